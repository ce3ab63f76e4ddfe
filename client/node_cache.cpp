#include "client/node_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/sha256.h"

namespace mxfp6::client {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

bool isHash(const std::string& name) {
  return name.size() == 64 && name.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

Expected<NodeCache> NodeCache::open(const std::string& dir) {
  std::error_code ec;
  for (const char* sub : {"objects", "answers", "tmp"}) {
    fs::create_directories(fs::path(dir) / sub, ec);
    if (ec) return Status::error("cannot create the node cache " + dir + ": " + ec.message());
  }
  if (access((dir + "/tmp").c_str(), W_OK) != 0) return Status::error("the node cache " + dir + " is not writable");
  return NodeCache(dir);
}

Expected<NodeCache> NodeCache::openExisting(const std::string& dir) {
  if (!fs::is_directory(fs::path(dir) / "answers")) return Status::error("no node cache at " + dir);
  return NodeCache(dir);
}

Status NodeCache::writeAtomically(const std::string& path, const std::string& bytes) const {
  // Unique among the node's processes: the process id, a random number drawn once per process
  // (containers sharing the directory can reuse process ids) and a per-process count.
  static std::atomic<uint64_t> counter{0};
  static const unsigned nonce = std::random_device{}();
  std::string tmp = dir_ + "/tmp/" + std::to_string(getpid()) + "-" + std::to_string(nonce) + "-" +
                    std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return Status::error("cannot write " + tmp + " (is the node cache's disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::error("cannot rename into " + path);
  }
  return Status::ok();
}

std::set<std::string> NodeCache::objectHashes() const {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(dir_) / "objects", ec)) {
    std::string name = e.path().filename().string();
    if (isHash(name)) out.insert(name);  // renamed into place whole
  }
  return out;
}

Status NodeCache::putObject(const CachedObject& o) {
  if (sha256Hex(o.bytes) != o.sha256)
    return Status::error("code object " + o.sha256 + " arrived corrupt: its bytes hash to " + sha256Hex(o.bytes));
  nlohmann::json meta = {{"kernel", o.kernel}, {"target", o.target}, {"format", o.format},
                         {"config", o.config}, {"metadata", o.metadataJson}};
  // The header's own sha256 follows it, so a flipped bit there is caught as surely as in the bytes.
  std::string header = meta.dump();  // one line: dump() escapes newlines
  return writeAtomically(dir_ + "/objects/" + o.sha256, header + "\n" + sha256Hex(header) + "\n" + o.bytes);
}

Expected<std::optional<CachedObject>> NodeCache::object(const std::string& sha256) const {
  if (!isHash(sha256)) return Status::error("'" + sha256 + "' is not a sha256");
  std::string path = dir_ + "/objects/" + sha256;
  auto file = readFile(path);
  if (!file) return std::optional<CachedObject>();
  // header \n sha256(header) \n bytes
  size_t first = file->find('\n');
  size_t second = first == std::string::npos ? std::string::npos : file->find('\n', first + 1);
  std::string header = second == std::string::npos ? std::string() : file->substr(0, first);
  bool headerSound = second != std::string::npos && file->substr(first + 1, second - first - 1) == sha256Hex(header);
  nlohmann::json meta = headerSound ? nlohmann::json::parse(header, nullptr, false) : nlohmann::json();
  std::string bytes = second == std::string::npos ? std::string() : file->substr(second + 1);
  std::string actual = sha256Hex(bytes);
  if (!meta.is_object() || actual != sha256) {
    std::remove(path.c_str());
    return Status::error("the node cache's copy of code object " + sha256 + " (" + path + ") is corrupt: " +
                         (meta.is_object() ? "its bytes hash to " + actual : std::string("its header does not match its hash")) +
                         "; removed");
  }
  return std::optional<CachedObject>(CachedObject{sha256, meta.value("kernel", ""), meta.value("target", ""),
                                                  meta.value("format", ""), meta.value("config", ""),
                                                  meta.value("metadata", ""), std::move(bytes)});
}

Status NodeCache::putAnswer(const CachedAnswer& a) {
  nlohmann::json j = {{"key", a.key},       {"rule", a.rule},           {"from_rows", a.fromRows},
                      {"plan_id", a.planId}, {"plan_json", a.planJson}, {"why", a.why},
                      {"toolchain", a.toolchain}, {"server", a.server}, {"stored_at", a.storedAt},
                      {"objects", a.objects}};
  return writeAtomically(dir_ + "/answers/" + sha256Hex(a.key) + ".json", j.dump());
}

Expected<std::optional<CachedAnswer>> NodeCache::answer(const std::string& key) const {
  std::string path = dir_ + "/answers/" + sha256Hex(key) + ".json";
  auto text = readFile(path);
  if (!text) return std::optional<CachedAnswer>();
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("key", "") != key)
    return Status::error("the node cache's answer for " + key + " (" + path + ") is unreadable");
  CachedAnswer a;
  a.key = key;
  a.rule = j.value("rule", "");
  a.fromRows = j.value("from_rows", int64_t{0});
  a.planId = j.value("plan_id", "");
  a.planJson = j.value("plan_json", "");
  a.why = j.value("why", "");
  a.toolchain = j.value("toolchain", "");
  a.server = j.value("server", "");
  a.storedAt = j.value("stored_at", "");
  a.objects = j.value("objects", std::vector<std::string>{});
  return std::optional<CachedAnswer>(std::move(a));
}

}  // namespace mxfp6::client
