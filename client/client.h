// The client a training process links (docs/architecture.md, "The service"): resolves a model's
// ops to plans and code objects, from a server (with failover across a list), or from a local
// database file (embedded mode), keeping a node-local cache (client/node_cache.h). No LLVM or
// MLIR: it links the runtime, gRPC and SQLite.
//
// Every answer says where it came from. A server that cannot be reached at connect is tried
// again at each resolve; with none reachable, the node cache answers and the result's status
// says "offline". No cache and no server is an error at connect, not at the first launch.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/plan.h"
#include "runtime/runtime.h"
#include "support/status.h"

namespace mxfp6::client {

/// A key as the command line and the server spell it, without the toolchain.
struct OpKey {
  std::string op, variant, target, sizes;
  int64_t rows = 0;
  /// "op/variant/target/sizes/M".
  std::string text() const;
};
/// Parses "op/variant/target/sizes/M" (variant and sizes may be empty).
Expected<OpKey> parseOpKey(const std::string& text);
/// The key of a problem (ops/plan.h) on a target.
OpKey keyOf(const ops::Problem& problem, const std::string& target);

struct ClientOptions {
  std::vector<std::string> servers;  // "host:port", tried in order
  std::string dbPath;                // embedded: a kernel database file instead of servers
  std::string cacheDir;              // the node cache ("" for none; servers only)
  std::chrono::milliseconds deadline{30000};  // per call
  int retries = 2;                   // more tries per server on UNAVAILABLE, with backoff
  /// Answers the node cache got from a server less than this long ago are used without asking
  /// again (0: always ask). A job's ranks start within seconds of each other: the first on a
  /// node asks, the others read the cache and never open a connection. The price: a pin or a
  /// re-tune reaches new processes only after this long.
  std::chrono::seconds freshFor{0};
};

/// Parses "grpc://host:port[,host:port...][?fresh_for=SECONDS]" or "sqlite:///path/kernels.db"
/// into options.
Expected<ClientOptions> parseUri(const std::string& uri);

/// Where a resolution's answers came from: a server; the node cache because no server answered
/// (offline); a local database file; the node cache because its answers were fresh (freshFor).
enum class Source { Server, NodeCache, Embedded, FreshNodeCache };
const char* sourceName(Source source);

struct Object {
  std::string sha256, kernel, target, format, config, metadataJson, bytes;
};

struct ResolvedOp {
  OpKey key;
  std::string rule;  // "pinned", "exact", "nearest", "default"
  int64_t fromRows = 0;
  ops::Plan plan;
  std::string planId, why, toolchain;
  bool compiledNow = false;
  std::vector<const Object*> objects;  // per launch; owned by the Resolution
};

struct Resolution {
  Source source = Source::Server;
  std::string status;  // "served by 127.0.0.1:50051", "offline: from the node cache ...", ...
  std::vector<ResolvedOp> ops;                                // in request order, the keys that resolved
  std::vector<std::pair<OpKey, std::string>> errors;          // the keys that did not, and why
  std::vector<std::unique_ptr<Object>> objects;               // every distinct object
  int64_t objectsFromServer = 0, bytesFromServer = 0, objectsFromCache = 0;
  double seconds = 0;
};

class Client {
 public:
  static Expected<std::unique_ptr<Client>> connect(const ClientOptions& options);
  ~Client();

  /// Resolves every key in one round trip (BatchResolve). Per-key failures are in `errors`; an
  /// error Status means nothing could answer.
  Expected<Resolution> resolve(const std::vector<OpKey>& keys);
  /// Where answers come from now: "server 127.0.0.1:50051", "offline (node cache DIR)", ...
  std::string describe() const;

  /// An object's launch metadata; refuses metadata of another schema.
  static Expected<rt::KernelMetadata> metadataOf(const Object& object);
  /// Loads each launch's code object on `device`; refuses metadata of another schema.
  static Expected<std::vector<std::unique_ptr<rt::LoadedKernel>>> load(rt::Device& device, const ResolvedOp& op);

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mxfp6::client
