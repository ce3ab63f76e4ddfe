// The server's view of the kernel database: resolution answered from memory, a family missing
// from the database precompiled once however many requests ask for it, and every database access
// serialized on one connection (the server is the database's one writer).
//
// Memory: code objects are immutable (content-addressed), so each is read and verified once and
// kept. Resolutions are kept per key until a write (pin, unpin, pushed measurements, a family
// precompiled) could change one; a nearest or default answer records its miss when it is first
// computed.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "autotune/resolve.h"
#include "server/single_flight.h"

namespace mxfp6::server {

/// Why a request failed, as the gRPC status code it becomes.
enum class ErrorKind { BadRequest, NotFound, ReadOnly, Overloaded, Deadline, Unavailable, Internal };

struct Failure {
  ErrorKind kind = ErrorKind::Internal;
  std::string message;
};

template <typename T>
struct Result {
  std::optional<T> value;
  Failure failure;
  Result(T v) : value(std::move(v)) {}                                  // NOLINT
  Result(Failure f) : failure(std::move(f)) {}                          // NOLINT
  explicit operator bool() const { return value.has_value(); }
};

struct StoreOptions {
  std::string dslDir;                              // the ops' .mxk files (their hash is in keys)
  std::chrono::seconds compileTimeout{120};        // how long a request waits for a compile
  size_t maxCompilesInFlight = 8;                  // distinct families compiling or queued
  unsigned compileJobs = 0;                        // compiler threads (0: every core)
};

/// A key as a client names it: no toolchain (the store adds its own).
struct KeyRequest {
  std::string op, variant, target, sizes;
  int64_t rows = 0;
};

struct Answer {
  autotune::Resolution resolution;  // objects empty: they are in `objects`
  bool compiledNow = false;
};

struct Counters {
  std::atomic<int64_t> familyCompiles{0}, kernelCompiles{0}, compileCacheHits{0};
};

class KernelStore {
 public:
  /// The compiler fingerprint `compiler` (precompile::toolchainFingerprint()) and each op's DSL
  /// hash make the keys' toolchains.
  KernelStore(std::unique_ptr<autotune::KernelDb> db, std::string compiler, StoreOptions options);
  ~KernelStore();

  bool readOnly() const { return readOnly_; }
  const std::string& compiler() const { return compiler_; }
  Counters& counters() { return counters_; }

  /// Validates a client's key and adds the toolchain.
  Result<autotune::Key> key(const KeyRequest& request);
  /// Resolves a key; on a family with nothing precompiled, precompiles it (single-flight) unless
  /// this is a read-only replica. Waits for a compile until `deadline`.
  Result<Answer> resolve(const autotune::Key& key, std::chrono::system_clock::time_point deadline);
  /// A code object, verified once, then from memory.
  Result<std::shared_ptr<const autotune::CodeObject>> object(const std::string& sha256);

  /// DSL source compiled for one kernel/target/config; from the database when compiled before.
  Result<std::pair<autotune::CodeObject, bool>> compile(const std::string& fileName, const std::string& source,
                                                        const std::string& kernel, const std::string& target,
                                                        const std::string& config,
                                                        std::chrono::system_clock::time_point deadline);

  Result<std::string> pin(const autotune::Key& key, const std::string& planId, const std::string& config,
                          const std::string& who, const std::string& why, const std::string& expiresAt);
  Result<bool> unpin(const autotune::Key& key);
  Result<int64_t> pushMeasurements(autotune::TuningRun run);
  Result<std::vector<autotune::KeyEntry>> list(const autotune::ListFilter& filter);

  /// Refuses new compiles and waits (until `deadline`) for those running to finish.
  bool drain(std::chrono::steady_clock::time_point deadline);

 private:
  Result<bool> precompileFamily(const autotune::Key& key, std::chrono::system_clock::time_point deadline);
  Failure dbFailure(const Status& status) const;
  void forgetResolutions();

  std::mutex dbMutex_;  // one connection, one user at a time
  std::unique_ptr<autotune::KernelDb> db_;
  bool readOnly_ = false;
  std::string compiler_;
  StoreOptions options_;
  std::map<std::string, std::string> opToolchains_;  // op -> its keys' toolchain

  std::mutex cacheMutex_;
  std::map<autotune::Key, autotune::Resolution> resolutions_;
  std::map<std::string, std::shared_ptr<const autotune::CodeObject>> objects_;

  SingleFlight<autotune::FamilyKey, Failure> familyCompiles_;  // empty message: done
  SingleFlight<std::string, Failure> kernelCompiles_;
  std::atomic<bool> draining_{false};
  Counters counters_;
};

}  // namespace mxfp6::server
