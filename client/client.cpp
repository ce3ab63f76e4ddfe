#include "client/client.h"

#include <map>
#include <span>
#include <set>
#include <sstream>
#include <thread>
#include <ctime>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "autotune/key_text.h"
#include "autotune/resolve.h"
#include "client/node_cache.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "mxfp6/v1/kernel_service.grpc.pb.h"
#include "support/sha256.h"

namespace mxfp6::client {
namespace {

/// The launch metadata schema this client loads (compiler/precompile/precompile.h writes it).
constexpr int kMetadataSchema = 1;

const char* ruleText(v1::Rule rule) {
  switch (rule) {
    case v1::PINNED: return "pinned";
    case v1::EXACT: return "exact";
    case v1::NEAREST: return "nearest";
    case v1::DEFAULT: return "default";
    default: return "unknown";
  }
}

bool retryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

std::string grpcError(const std::string& server, const grpc::Status& s) {
  return server + ": " + s.error_message() + " (gRPC code " + std::to_string(int(s.error_code())) + ")";
}

/// A server of the list; its channel is opened on first use (a process whose node cache answers
/// never opens one).
struct Server {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::KernelService::Stub> stub;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;

  void open() {
    if (channel) return;
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(512 << 20);  // a whole model's code objects in one reply
    channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    stub = v1::KernelService::NewStub(channel);
    health = grpc::health::v1::Health::NewStub(channel);
  }
};

/// Seconds since the epoch of "2026-12-07T12:30:00Z" (utcNow's form); nullopt when malformed.
std::optional<std::time_t> parseUtc(const std::string& text) {
  std::tm tm{};
  if (!strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) return std::nullopt;
  return timegm(&tm);
}

}  // namespace

std::string OpKey::text() const {
  return op + "/" + variant + "/" + target + "/" + sizes + "/" + std::to_string(rows);
}

Expected<OpKey> parseOpKey(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, '/');) parts.push_back(part);
  if (!text.empty() && text.back() == '/') parts.push_back("");
  if (parts.size() != 5)
    return Status::error("key '" + text + "' is not op/variant/target/sizes/M (variant and sizes may be empty)");
  OpKey k{parts[0], parts[1], parts[2], parts[3], 0};
  char* end = nullptr;
  k.rows = std::strtoll(parts[4].c_str(), &end, 10);
  if (parts[4].empty() || *end != '\0' || k.rows <= 0) return Status::error("key '" + text + "': M must be a positive integer");
  return k;
}

OpKey keyOf(const ops::Problem& problem, const std::string& target) {
  return {problem.op->name, problem.variantText(), target, problem.sizes(), problem.rows()};
}

Expected<ClientOptions> parseUri(const std::string& uri) {
  ClientOptions options;
  if (uri.rfind("sqlite://", 0) == 0) {
    options.dbPath = uri.substr(9);
    if (options.dbPath.empty()) return Status::error("'" + uri + "': sqlite:// needs a path (sqlite:///abs/kernels.db)");
    return options;
  }
  if (uri.rfind("grpc://", 0) == 0) {
    std::string rest = uri.substr(7), query;
    if (auto q = rest.find('?'); q != std::string::npos) {
      query = rest.substr(q + 1);
      rest = rest.substr(0, q);
    }
    std::stringstream in(rest);
    for (std::string s; std::getline(in, s, ',');)
      if (!s.empty()) options.servers.push_back(s);
    if (options.servers.empty()) return Status::error("'" + uri + "': grpc:// needs host:port[,host:port...]");
    if (!query.empty()) {
      char* end = nullptr;
      long long seconds = query.rfind("fresh_for=", 0) == 0 ? std::strtoll(query.c_str() + 10, &end, 10) : -1;
      if (seconds < 0 || (end && *end != '\0'))
        return Status::error("'" + uri + "': the only option is ?fresh_for=SECONDS");
      options.freshFor = std::chrono::seconds(seconds);
    }
    return options;
  }
  return Status::error("'" + uri + "' is neither grpc://HOST:PORT[,HOST:PORT...] nor sqlite:///PATH");
}

const char* sourceName(Source source) {
  switch (source) {
    case Source::Server: return "server";
    case Source::NodeCache: return "node cache";
    case Source::Embedded: return "embedded database";
    case Source::FreshNodeCache: return "node cache (fresh answers)";
  }
  return "?";
}

struct Client::Impl {
  ClientOptions options;
  std::vector<Server> servers;
  size_t current = 0;  // the server that answered last
  std::optional<NodeCache> cache;
  std::unique_ptr<autotune::KernelDb> db;  // embedded mode

  Expected<Resolution> embedded(const std::vector<OpKey>& keys);
  Expected<Resolution> fromServers(const std::vector<OpKey>& keys, std::string& whyOffline);
  Expected<Resolution> offline(const std::vector<OpKey>& keys, const std::string& whyOffline);
  /// Every key from the node cache when each answer is younger than options.freshFor and every
  /// object it names is there and sound; an error (ask a server) otherwise.
  Expected<Resolution> fresh(const std::vector<OpKey>& keys);
  /// The cached answers of `keys` with their objects; a key that cannot be answered is in
  /// `errors`. `maxAge` > 0: answers older than that count as absent.
  Resolution fromCache(const std::vector<OpKey>& keys, std::chrono::seconds maxAge);
  /// One BatchResolve on one server, its objects verified and cached; `missing` collects the
  /// objects the server skipped but the cache no longer holds (corrupt and removed).
  grpc::Status batch(Server& server, const std::vector<OpKey>& keys, Resolution& out, std::set<std::string>& missing);
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Expected<std::unique_ptr<Client>> Client::connect(const ClientOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (!options.dbPath.empty()) {
    auto db = autotune::KernelDb::open(options.dbPath, autotune::OpenMode::ReadOnly);
    if (!db) return db.status();
    impl->db = db.take();
    return std::unique_ptr<Client>(new Client(std::move(impl)));
  }
  if (options.servers.empty()) return Status::error("no server and no database to resolve from");
  std::string unreachable;
  // A node cache that already holds answers can answer whatever happens to the servers, so a
  // warm restart makes no call at connect: the servers are tried at the first resolve. Without
  // one, a server must answer a health check now, or connect fails.
  bool warmCache = !options.cacheDir.empty() && NodeCache::openExisting(options.cacheDir).isOk();
  bool anyUp = false;
  for (const std::string& address : options.servers) {
    Server s;
    s.address = address;
    if (!anyUp && !warmCache) {
      s.open();
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::min(options.deadline, std::chrono::milliseconds(5000)));
      grpc::health::v1::HealthCheckRequest request;
      grpc::health::v1::HealthCheckResponse response;
      grpc::Status st = s.health->Check(&context, request, &response);
      if (st.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
        anyUp = true;
        impl->current = impl->servers.size();
      } else {
        unreachable += (unreachable.empty() ? "" : "; ") +
                       (st.ok() ? address + ": not serving" : grpcError(address, st));
      }
    }
    impl->servers.push_back(std::move(s));
  }
  if (!options.cacheDir.empty()) {
    auto cache = anyUp || warmCache ? NodeCache::open(options.cacheDir) : NodeCache::openExisting(options.cacheDir);
    if (!cache && warmCache) cache = NodeCache::openExisting(options.cacheDir);  // read-only: offline answers
    if (cache) impl->cache = cache.take();
    else if (anyUp) return cache.status();
  }
  if (!anyUp && !impl->cache)
    return Status::error("no server reachable (" + unreachable + ") and no node cache to answer from" +
                         (options.cacheDir.empty() ? std::string(" (none configured)") : " at " + options.cacheDir));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

std::string Client::describe() const {
  if (impl_->db) return "embedded database " + impl_->options.dbPath;
  return "server " + impl_->servers[impl_->current].address +
         (impl_->cache ? ", node cache " + impl_->cache->dir() : std::string(", no node cache"));
}

Expected<Resolution> Client::resolve(const std::vector<OpKey>& keys) {
  auto start = std::chrono::steady_clock::now();
  Expected<Resolution> r = Status::error("unreachable");
  if (impl_->db) {
    r = impl_->embedded(keys);
  } else {
    std::string whyOffline;
    if (impl_->cache && impl_->options.freshFor.count() > 0) r = impl_->fresh(keys);
    if (!r) r = impl_->fromServers(keys, whyOffline);
    if (!r && !whyOffline.empty()) {
      if (!impl_->cache) return Status::error("no server reachable (" + whyOffline + ") and no node cache");
      r = impl_->offline(keys, whyOffline);
    }
  }
  if (r) r->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

Expected<Resolution> Client::Impl::embedded(const std::vector<OpKey>& keys) {
  Resolution out;
  out.source = Source::Embedded;
  out.status = "embedded: resolved in " + options.dbPath;
  std::map<std::string, const Object*> bySha;
  for (const OpKey& k : keys) {
    autotune::KeyTextError keyError;
    auto key = autotune::parseKeyText(*db, k.text(), std::nullopt, keyError);
    if (!key) {
      out.errors.emplace_back(k, key.status().message());
      continue;
    }
    autotune::ResolveOptions ro;
    ro.recordMiss = false;  // read-only: the tuning fleet learns of misses from servers
    auto r = autotune::resolve(*db, *key, ro);
    if (!r) {
      out.errors.emplace_back(k, r.status().message());
      continue;
    }
    ResolvedOp op{k, autotune::ruleName(r->rule), r->fromRows.value_or(0), r->plan, r->plan.id(), r->why,
                  key->family.toolchain, false, {}};
    for (const autotune::CodeObject& o : r->objects) {
      auto it = bySha.find(o.sha256);
      if (it == bySha.end()) {
        out.objects.push_back(std::make_unique<Object>(
            Object{o.sha256, o.kernel, o.target, o.format, o.config, o.metadata, o.bytes}));
        it = bySha.emplace(o.sha256, out.objects.back().get()).first;
      }
      op.objects.push_back(it->second);
    }
    out.ops.push_back(std::move(op));
  }
  return out;
}

grpc::Status Client::Impl::batch(Server& server, const std::vector<OpKey>& keys, Resolution& out,
                                 std::set<std::string>& missing) {
  server.open();
  v1::BatchResolveRequest request;
  for (const OpKey& k : keys) {
    v1::OpKey* p = request.add_keys();
    p->set_op(k.op);
    p->set_variant(k.variant);
    p->set_target(k.target);
    p->set_sizes(k.sizes);
    p->set_rows(k.rows);
  }
  if (cache)
    for (const std::string& sha : cache->objectHashes()) request.add_have_sha256(sha);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options.deadline);
  v1::BatchResolveReply reply;
  grpc::Status status = server.stub->BatchResolve(&context, request, &reply);
  if (!status.ok()) return status;

  std::map<std::string, const Object*> bySha;
  for (const v1::CodeObject& o : reply.objects()) {
    Object object{o.sha256(), o.kernel(), o.target(), o.format(), o.config(), o.metadata_json(), o.bytes()};
    if (!o.bytes().empty()) {
      if (sha256Hex(object.bytes) != object.sha256)
        return grpc::Status(grpc::StatusCode::DATA_LOSS, "code object " + object.sha256 + " from " + server.address +
                                                             " arrived corrupt");
      ++out.objectsFromServer;
      out.bytesFromServer += int64_t(object.bytes.size());
      if (cache) {
        Status s = cache->putObject({object.sha256, object.kernel, object.target, object.format, object.config,
                                     object.metadataJson, object.bytes});
        if (!s) return grpc::Status(grpc::StatusCode::INTERNAL, s.message());
      }
    } else {
      auto cached = cache ? cache->object(object.sha256) : Expected<std::optional<CachedObject>>(std::nullopt);
      if (!cached || !*cached) {
        missing.insert(object.sha256);  // corrupt (now removed) or gone: fetched again
        continue;
      }
      object.bytes = (*cached)->bytes;
      ++out.objectsFromCache;
    }
    out.objects.push_back(std::make_unique<Object>(std::move(object)));
    bySha[out.objects.back()->sha256] = out.objects.back().get();
  }
  if (!missing.empty()) return grpc::Status::OK;

  std::string now = autotune::utcNow();
  for (const v1::Resolved& r : reply.results()) {
    OpKey k{r.key().op(), r.key().variant(), r.key().target(), r.key().sizes(), r.key().rows()};
    auto plan = ops::parsePlan(r.plan_json());
    if (!plan) {
      out.errors.emplace_back(k, "the server's plan does not parse: " + plan.status().message());
      continue;
    }
    ResolvedOp op{k, ruleText(r.rule()), r.from_rows(), *plan, r.plan_id(), r.why(), r.toolchain(), r.compiled_now(), {}};
    for (const std::string& sha : r.objects()) op.objects.push_back(bySha.at(sha));
    if (cache) {
      // Every rank of a node writes the same answers at startup: only a changed one is written.
      CachedAnswer answer{k.text(), op.rule,      op.fromRows,    op.planId, r.plan_json(),
                          op.why,   op.toolchain, server.address, now,       {r.objects().begin(), r.objects().end()}};
      auto previous = cache->answer(answer.key);
      bool same = previous && *previous && (*previous)->rule == answer.rule && (*previous)->planJson == answer.planJson &&
                  (*previous)->why == answer.why && (*previous)->toolchain == answer.toolchain &&
                  (*previous)->fromRows == answer.fromRows;
      if (!same) cache->putAnswer(answer);
    }
    out.ops.push_back(std::move(op));
  }
  for (const v1::KeyError& e : reply.errors())
    out.errors.emplace_back(OpKey{e.key().op(), e.key().variant(), e.key().target(), e.key().sizes(), e.key().rows()},
                            e.message());
  out.source = Source::Server;
  out.status = "served by " + server.address;
  return grpc::Status::OK;
}

Expected<Resolution> Client::Impl::fromServers(const std::vector<OpKey>& keys, std::string& whyOffline) {
  // Every server once, starting with the one that answered last, before any is tried again: a
  // dead server costs one refused connection, not a backoff, when another is up.
  std::map<std::string, std::string> failures;  // the last error of each server
  for (int attempt = 0; attempt <= options.retries; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100 << (attempt - 1)));
    for (size_t n = 0; n < servers.size(); ++n) {
      size_t index = (current + n) % servers.size();
      Server& server = servers[index];
      Resolution out;
      std::set<std::string> missing;
      grpc::Status s = batch(server, keys, out, missing);
      if (s.ok() && !missing.empty()) {
        // The cache lost objects the server skipped: ask again, now without them.
        out = Resolution();
        std::set<std::string> stillMissing;
        s = batch(server, keys, out, stillMissing);
        if (s.ok() && !stillMissing.empty())
          return Status::error("code objects keep going missing from the node cache " + cache->dir());
      }
      if (s.ok()) {
        current = index;
        return out;
      }
      if (!retryable(s.error_code())) return Status::error(grpcError(server.address, s));
      failures[server.address] = grpcError(server.address, s);
    }
  }
  std::string all;
  for (const auto& [address, why] : failures) all += (all.empty() ? "" : "; ") + why;
  whyOffline = all;
  return Status::error("no server answered: " + all);
}

Resolution Client::Impl::fromCache(const std::vector<OpKey>& keys, std::chrono::seconds maxAge) {
  Resolution out;
  std::map<std::string, const Object*> bySha;
  std::time_t now = std::time(nullptr);
  for (const OpKey& k : keys) {
    auto a = cache->answer(k.text());
    if (!a) {
      out.errors.emplace_back(k, a.status().message());
      continue;
    }
    if (!*a) {
      out.errors.emplace_back(k, "not in the node cache");
      continue;
    }
    if (maxAge.count() > 0) {
      auto stored = parseUtc((*a)->storedAt);
      if (!stored || now - *stored >= maxAge.count()) {
        out.errors.emplace_back(k, "the node cache's answer is older than " + std::to_string(maxAge.count()) + " s");
        continue;
      }
    }
    auto plan = ops::parsePlan((*a)->planJson);
    if (!plan) {
      out.errors.emplace_back(k, "the node cache's plan does not parse: " + plan.status().message());
      continue;
    }
    ResolvedOp op{k, (*a)->rule, (*a)->fromRows, *plan, (*a)->planId,
                  (*a)->why + " (cached from " + (*a)->server + " at " + (*a)->storedAt + ")", (*a)->toolchain, false, {}};
    std::string failed;
    for (const std::string& sha : (*a)->objects) {
      auto it = bySha.find(sha);
      if (it == bySha.end()) {
        auto o = cache->object(sha);
        if (!o || !*o) {
          failed = o ? "code object " + sha + " is not in the node cache" : o.status().message();
          break;
        }
        out.objects.push_back(std::make_unique<Object>(
            Object{sha, (*o)->kernel, (*o)->target, (*o)->format, (*o)->config, (*o)->metadataJson, (*o)->bytes}));
        ++out.objectsFromCache;
        it = bySha.emplace(sha, out.objects.back().get()).first;
      }
      op.objects.push_back(it->second);
    }
    if (!failed.empty()) {
      out.errors.emplace_back(k, failed);
      continue;
    }
    out.ops.push_back(std::move(op));
  }
  return out;
}

Expected<Resolution> Client::Impl::offline(const std::vector<OpKey>& keys, const std::string& whyOffline) {
  Resolution out = fromCache(keys, std::chrono::seconds(0));
  out.source = Source::NodeCache;
  out.status = "offline: answered from the node cache " + cache->dir() + " (no server reachable: " + whyOffline + ")";
  for (auto& [key, why] : out.errors) why += ", and no server reachable";
  return out;
}

Expected<Resolution> Client::Impl::fresh(const std::vector<OpKey>& keys) {
  Resolution out = fromCache(keys, options.freshFor);
  if (!out.errors.empty()) return Status::error(out.errors.front().second);  // a server answers instead
  out.source = Source::FreshNodeCache;
  out.status = "node cache " + cache->dir() + ": every answer fetched less than " +
               std::to_string(options.freshFor.count()) + " s ago";
  return out;
}

Expected<rt::KernelMetadata> Client::metadataOf(const Object& o) {
  // Metadata of another schema may mean other argument conventions: never used as current.
  nlohmann::json meta = nlohmann::json::parse(o.metadataJson, nullptr, false);
  int schema = meta.is_object() ? meta.value("metadata_schema", 0) : 0;
  if (schema != kMetadataSchema)
    return Status::error("code object " + o.sha256 + " (" + o.kernel + ") has launch metadata schema " +
                         std::to_string(schema) + "; this client loads schema " + std::to_string(kMetadataSchema) +
                         " (precompile it again with this release)");
  return rt::parseKernelMetadata(o.metadataJson);
}

Expected<std::vector<std::unique_ptr<rt::LoadedKernel>>> Client::load(rt::Device& device, const ResolvedOp& op) {
  std::vector<std::unique_ptr<rt::LoadedKernel>> kernels;
  for (const Object* o : op.objects) {
    ASSIGN_OR_RETURN(rt::KernelMetadata metadata, metadataOf(*o));
    auto bytes = std::as_bytes(std::span(o->bytes.data(), o->bytes.size()));
    ASSIGN_OR_RETURN(std::unique_ptr<rt::LoadedKernel> kernel, rt::loadKernel(device, bytes, std::move(metadata)));
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

}  // namespace mxfp6::client
