// The C ABI over client::Client (client/mxfp6_client.h): handles own everything they return.
#include "client/mxfp6_client.h"

#include <cstring>
#include <map>

#include "client/c_handles.h"
#include "client/client.h"

using mxfp6::client::Client;
using mxfp6::client::OpKey;
using mxfp6::client::Resolution;
using mxfp6::client::ResolvedOp;

struct mxc_client {
  std::unique_ptr<Client> client;
  std::string description;
};

namespace {

using mxfp6::client::setError;

const mxc_resolution::Entry* entry(const mxc_resolution* r, size_t i) {
  return r != nullptr && i < r->entries.size() ? &r->entries[i] : nullptr;
}

const ResolvedOp* op(const mxc_resolution* r, size_t i) {
  const auto* e = entry(r, i);
  return e ? e->op : nullptr;
}

}  // namespace

extern "C" {

mxc_client* mxc_connect(const char* uri, const char* cache_dir, int64_t deadline_ms, char* error, size_t error_size) {
  auto options = mxfp6::client::parseUri(uri ? uri : "");
  if (!options) return setError(error, error_size, options.status().message()), nullptr;
  if (cache_dir) options->cacheDir = cache_dir;
  if (deadline_ms > 0) options->deadline = std::chrono::milliseconds(deadline_ms);
  auto client = Client::connect(*options);
  if (!client) return setError(error, error_size, client.status().message()), nullptr;
  return new mxc_client{client.take(), ""};
}

void mxc_close(mxc_client* client) { delete client; }

const char* mxc_describe(mxc_client* client) {
  if (!client) return "";
  client->description = client->client->describe();
  return client->description.c_str();
}

mxc_resolution* mxc_resolve(mxc_client* client, const char* const* keys, size_t n, char* error, size_t error_size) {
  if (!client) return setError(error, error_size, "no client"), nullptr;
  std::vector<OpKey> parsed;
  auto result = std::make_unique<mxc_resolution>();
  std::vector<std::string> texts;
  for (size_t i = 0; i < n; ++i) {
    auto k = mxfp6::client::parseOpKey(keys[i] ? keys[i] : "");
    if (!k) return setError(error, error_size, k.status().message()), nullptr;
    texts.push_back(k->text());
    parsed.push_back(*k);
  }
  auto r = client->client->resolve(parsed);
  if (!r) return setError(error, error_size, r.status().message()), nullptr;
  result->resolution = r.take();
  std::map<std::string, const ResolvedOp*> ok;
  std::map<std::string, std::string> failed;
  for (const ResolvedOp& o : result->resolution.ops) ok[o.key.text()] = &o;
  for (const auto& [k, why] : result->resolution.errors) failed[k.text()] = why;
  for (const std::string& t : texts) {
    mxc_resolution::Entry e{t, nullptr, "", ""};
    if (auto it = ok.find(t); it != ok.end()) {
      e.op = it->second;
      e.planJson = mxfp6::ops::planToJson(e.op->plan);
    }
    else e.error = failed.count(t) ? failed[t] : "no answer for this key";
    result->entries.push_back(std::move(e));
  }
  return result.release();
}

void mxc_resolution_free(mxc_resolution* r) { delete r; }

const char* mxc_status(const mxc_resolution* r) { return r ? r->resolution.status.c_str() : ""; }
int mxc_source(const mxc_resolution* r) { return r ? int(r->resolution.source) : -1; }
double mxc_seconds(const mxc_resolution* r) { return r ? r->resolution.seconds : 0; }
int64_t mxc_objects_from_server(const mxc_resolution* r) { return r ? r->resolution.objectsFromServer : 0; }
int64_t mxc_bytes_from_server(const mxc_resolution* r) { return r ? r->resolution.bytesFromServer : 0; }
int64_t mxc_objects_from_cache(const mxc_resolution* r) { return r ? r->resolution.objectsFromCache : 0; }

size_t mxc_op_count(const mxc_resolution* r) { return r ? r->entries.size() : 0; }
const char* mxc_op_key(const mxc_resolution* r, size_t i) {
  const auto* e = entry(r, i);
  return e ? e->key.c_str() : "";
}
const char* mxc_op_error(const mxc_resolution* r, size_t i) {
  const auto* e = entry(r, i);
  if (!e) return "index out of range";
  return e->op ? nullptr : e->error.c_str();
}
const char* mxc_op_rule(const mxc_resolution* r, size_t i) {
  const ResolvedOp* o = op(r, i);
  return o ? o->rule.c_str() : "";
}
const char* mxc_op_why(const mxc_resolution* r, size_t i) {
  const ResolvedOp* o = op(r, i);
  return o ? o->why.c_str() : "";
}
const char* mxc_op_plan_id(const mxc_resolution* r, size_t i) {
  const ResolvedOp* o = op(r, i);
  return o ? o->planId.c_str() : "";
}
const char* mxc_op_plan_json(const mxc_resolution* r, size_t i) {
  const auto* e = entry(r, i);
  return e ? e->planJson.c_str() : "";
}
size_t mxc_op_launch_count(const mxc_resolution* r, size_t i) {
  const ResolvedOp* o = op(r, i);
  return o ? o->objects.size() : 0;
}
int mxc_op_launch_object(const mxc_resolution* r, size_t i, size_t j, const void** bytes, size_t* size,
                         const char** metadata_json, const char** sha256) {
  const ResolvedOp* o = op(r, i);
  if (!o || j >= o->objects.size()) return -1;
  const auto* object = o->objects[j];
  if (bytes) *bytes = object->bytes.data();
  if (size) *size = object->bytes.size();
  if (metadata_json) *metadata_json = object->metadataJson.c_str();
  if (sha256) *sha256 = object->sha256.c_str();
  return 0;
}

}  // extern "C"
