// The node-local cache: a directory every rank of a node shares, holding code objects by sha256
// and the last answer the server gave for each key, so that a restart costs no object bytes on
// the wire and a server outage does not stall training.
//
//   DIR/objects/<sha256>          one line of JSON (kernel, format, config, launch metadata), then
//                                 the code object's bytes: one file per object, so a process
//                                 starting from the cache opens one file per object
//   DIR/answers/<sha256 of key>.json   the last resolution of a key (plan, rule, why, when)
//
// Safe without locks: every file is written to a unique temporary name in DIR/tmp and renamed
// into place (atomic on one file system), so a reader sees a whole file or none, and two ranks
// writing the same object write the same bytes. An object is verified against its name on every
// read; a corrupt one is deleted and reported, so the caller fetches it again.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "support/status.h"

namespace mxfp6::client {

struct CachedObject {
  std::string sha256, kernel, target, format, config, metadataJson, bytes;
};

/// What the server answered for a key, as stored and reloaded (offline).
struct CachedAnswer {
  std::string key;            // "op/variant/target/sizes/M"
  std::string rule;           // pinned, exact, nearest, default
  int64_t fromRows = 0;
  std::string planId, planJson, why, toolchain, server, storedAt;
  std::vector<std::string> objects;
};

class NodeCache {
 public:
  /// Creates the directory (and its parents) if missing; an error when it cannot be written.
  static Expected<NodeCache> open(const std::string& dir);
  /// An existing cache, for offline use: an error when DIR holds no cache.
  static Expected<NodeCache> openExisting(const std::string& dir);

  const std::string& dir() const { return dir_; }
  /// The sha256 of every object present (not verified: the server skips their bytes, and each
  /// is verified when read).
  std::set<std::string> objectHashes() const;
  Status putObject(const CachedObject& object);
  /// nullopt when absent; an error when present but corrupt (the file is removed first).
  Expected<std::optional<CachedObject>> object(const std::string& sha256) const;
  Status putAnswer(const CachedAnswer& answer);
  Expected<std::optional<CachedAnswer>> answer(const std::string& key) const;

 private:
  explicit NodeCache(std::string dir) : dir_(std::move(dir)) {}
  Status writeAtomically(const std::string& path, const std::string& bytes) const;
  std::string dir_;
};

}  // namespace mxfp6::client
