#include "server/kernel_store.h"

#include <set>

#include "autotune/key_text.h"
#include "compiler/precompile/precompile.h"
#include "support/sha256.h"

namespace mxfp6::server {
namespace {

const std::set<std::string> kTargets = {"sm_90", "gfx942", "gfx950"};

bool expired(std::chrono::system_clock::time_point deadline) { return std::chrono::system_clock::now() > deadline; }

}  // namespace

KernelStore::KernelStore(std::unique_ptr<autotune::KernelDb> db, std::string compiler, StoreOptions options)
    : db_(std::move(db)), readOnly_(db_->readOnly()), compiler_(std::move(compiler)), options_(std::move(options)) {}

KernelStore::~KernelStore() { drain(std::chrono::steady_clock::now() + options_.compileTimeout); }

Failure KernelStore::dbFailure(const Status& status) const { return {ErrorKind::Internal, status.message()}; }

void KernelStore::forgetResolutions() {
  std::lock_guard<std::mutex> lock(cacheMutex_);
  resolutions_.clear();
}

Result<autotune::Key> KernelStore::key(const KeyRequest& r) {
  const ops::OpSpec* op = ops::findOp(r.op);
  if (!op) return Failure{ErrorKind::BadRequest, "unknown op '" + r.op + "'"};
  if (!kTargets.count(r.target))
    return Failure{ErrorKind::BadRequest, "unknown target '" + r.target + "' (valid: sm_90, gfx942, gfx950)"};
  auto problem = ops::problemFromKey(r.op, r.variant, r.sizes, r.rows);
  if (!problem) return Failure{ErrorKind::BadRequest, problem.status().message()};
  if (Status valid = ops::validateProblem(*problem); !valid) return Failure{ErrorKind::BadRequest, valid.message()};
  std::string toolchain;
  {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    auto it = opToolchains_.find(r.op);
    if (it != opToolchains_.end()) toolchain = it->second;
  }
  if (toolchain.empty()) {
    auto t = ops::keyToolchain(compiler_, *op, options_.dslDir);
    if (!t) return Failure{ErrorKind::Internal, t.status().message()};
    toolchain = *t;
    std::lock_guard<std::mutex> lock(cacheMutex_);
    opToolchains_[r.op] = toolchain;
  }
  return autotune::Key{{r.op, problem->variantText(), r.target, problem->sizes(), toolchain}, problem->rows()};
}

Result<Answer> KernelStore::resolve(const autotune::Key& key, std::chrono::system_clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    if (auto it = resolutions_.find(key); it != resolutions_.end()) return Answer{it->second, false};
  }
  bool compiledNow = false;
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool precompiled;
    {
      std::lock_guard<std::mutex> lock(dbMutex_);
      auto candidates = db_->candidates(key.family);
      if (!candidates) return dbFailure(candidates.status());
      precompiled = !candidates->empty();
      if (precompiled) {
        autotune::ResolveOptions options;
        options.withObjects = false;
        options.recordMiss = !readOnly_;
        auto r = autotune::resolve(*db_, key, options);
        if (!r) return Failure{ErrorKind::NotFound, r.status().message()};
        std::lock_guard<std::mutex> cacheLock(cacheMutex_);
        resolutions_[key] = *r;
        return Answer{*r, compiledNow};
      }
    }
    if (attempt == 1) break;
    if (readOnly_)
      return Failure{ErrorKind::NotFound, "nothing precompiled for " + autotune::formatKey(key) +
                                              " in this read-only replica; the writer precompiles it on a miss"};
    Result<bool> compiled = precompileFamily(key, deadline);
    if (!compiled) return compiled.failure;
    compiledNow = true;
  }
  return Failure{ErrorKind::Internal, "precompiled " + autotune::formatKey(key) + " but found no candidates after"};
}

Result<bool> KernelStore::precompileFamily(const autotune::Key& key, std::chrono::system_clock::time_point deadline) {
  if (draining_) return Failure{ErrorKind::Unavailable, "the server is shutting down: no new compiles"};
  if (familyCompiles_.inFlight() >= options_.maxCompilesInFlight)
    return Failure{ErrorKind::Overloaded, std::to_string(familyCompiles_.inFlight()) +
                                              " families are compiling already; retry later"};
  auto problem = ops::problemFromKey(key.family.op, key.family.variant, key.family.sizes, key.rows);
  if (!problem) return Failure{ErrorKind::BadRequest, problem.status().message()};
  precompile::FamilyRequest request{*problem, key.family.target};
  auto future = familyCompiles_.run(key.family, [this, request]() -> Failure {
    precompile::Options options;
    options.dslDir = options_.dslDir;
    options.jobs = options_.compileJobs;
    // Its own connection: requests for other keys go on reading while this one compiles (WAL);
    // its write is one short transaction per family.
    auto db = autotune::KernelDb::open(db_->path());
    if (!db) return {ErrorKind::Internal, db.status().message()};
    auto report = precompile::precompileFamilies(**db, {request}, options);
    if (!report) return {ErrorKind::Internal, report.status().message()};
    if (report->written > 0) ++counters_.familyCompiles;
    forgetResolutions();
    return {ErrorKind::Internal, ""};
  });
  auto wait = std::min(deadline, std::chrono::system_clock::now() + options_.compileTimeout);
  if (future.wait_until(wait) != std::future_status::ready)
    return Failure{ErrorKind::Deadline, "compiling " + autotune::formatKey(key) +
                                            " takes longer than this request may wait; it goes on, ask again later"};
  Failure f = future.get();
  if (!f.message.empty()) return f;
  return true;
}

Result<std::shared_ptr<const autotune::CodeObject>> KernelStore::object(const std::string& sha256) {
  {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    if (auto it = objects_.find(sha256); it != objects_.end()) return it->second;
  }
  std::lock_guard<std::mutex> lock(dbMutex_);
  auto o = db_->object(sha256);
  if (!o) return dbFailure(o.status());
  auto shared = std::make_shared<const autotune::CodeObject>(o.take());
  std::lock_guard<std::mutex> cacheLock(cacheMutex_);
  objects_[sha256] = shared;
  return shared;
}

Result<std::pair<autotune::CodeObject, bool>> KernelStore::compile(const std::string& fileName,
                                                                  const std::string& source,
                                                                  const std::string& kernel, const std::string& target,
                                                                  const std::string& config,
                                                                  std::chrono::system_clock::time_point deadline) {
  if (!kTargets.count(target))
    return Failure{ErrorKind::BadRequest, "unknown target '" + target + "' (valid: sm_90, gfx942, gfx950)"};
  std::string sourceHash = sha256Hex(source);
  {
    std::lock_guard<std::mutex> lock(dbMutex_);
    auto found = db_->findObject(sourceHash, kernel, target, config, compiler_);
    if (!found) return dbFailure(found.status());
    if (*found) {
      ++counters_.compileCacheHits;
      return std::make_pair(**found, true);
    }
  }
  if (draining_) return Failure{ErrorKind::Unavailable, "the server is shutting down: no new compiles"};
  if (kernelCompiles_.inFlight() >= options_.maxCompilesInFlight)
    return Failure{ErrorKind::Overloaded, "too many compiles in flight; retry later"};
  std::string flightKey = sourceHash + "|" + kernel + "|" + target + "|" + config;
  auto result = std::make_shared<std::optional<autotune::CodeObject>>();
  auto future = kernelCompiles_.run(flightKey, [=, this]() -> Failure {
    auto object = precompile::compileKernelObject(fileName, source, kernel, config, target, compiler_);
    if (!object) return {ErrorKind::BadRequest, object.status().message()};
    ++counters_.kernelCompiles;
    if (!readOnly_) {
      std::lock_guard<std::mutex> lock(dbMutex_);
      if (auto s = db_->putSource(fileName, source); !s) return dbFailure(s.status());
      if (Status s = db_->putObject(*object); !s) return dbFailure(s);
    }
    *result = object.take();
    return {ErrorKind::Internal, ""};
  });
  auto wait = std::min(deadline, std::chrono::system_clock::now() + options_.compileTimeout);
  if (future.wait_until(wait) != std::future_status::ready)
    return Failure{ErrorKind::Deadline, "the compile takes longer than this request may wait; it goes on"};
  Failure f = future.get();
  if (!f.message.empty()) return f;
  if (*result) return std::make_pair(**result, false);
  // Another caller's flight compiled it: the database has it now (a replica keeps nothing).
  std::lock_guard<std::mutex> lock(dbMutex_);
  auto found = db_->findObject(sourceHash, kernel, target, config, compiler_);
  if (!found) return dbFailure(found.status());
  if (!*found) return Failure{ErrorKind::Unavailable, "compiled by a concurrent request on a replica; ask again"};
  return std::make_pair(**found, false);
}

Result<std::string> KernelStore::pin(const autotune::Key& key, const std::string& planId, const std::string& config,
                                     const std::string& who, const std::string& why, const std::string& expiresAt) {
  if (readOnly_) return Failure{ErrorKind::ReadOnly, "this server is a read-only replica; pin on the writer"};
  if (why.empty()) return Failure{ErrorKind::BadRequest, "a pin needs a reason (why)"};
  if (planId.empty() == config.empty()) return Failure{ErrorKind::BadRequest, "name the plan by its id or by a config, one of the two"};
  std::lock_guard<std::mutex> lock(dbMutex_);
  auto candidate = autotune::findCandidate(*db_, key.family, planId, config);
  if (!candidate) return Failure{ErrorKind::NotFound, candidate.status().message()};
  autotune::Pin p{key, candidate->planId, who.empty() ? "unknown" : who, why, "",
                  expiresAt.empty() ? std::nullopt : std::optional<std::string>(expiresAt)};
  if (Status s = db_->pin(p); !s) return Failure{ErrorKind::BadRequest, s.message()};
  forgetResolutions();
  return candidate->planId;
}

Result<bool> KernelStore::unpin(const autotune::Key& key) {
  if (readOnly_) return Failure{ErrorKind::ReadOnly, "this server is a read-only replica; unpin on the writer"};
  std::lock_guard<std::mutex> lock(dbMutex_);
  if (Status s = db_->unpin(key); !s) return Failure{ErrorKind::NotFound, s.message()};
  forgetResolutions();
  return true;
}

Result<int64_t> KernelStore::pushMeasurements(autotune::TuningRun run) {
  if (readOnly_) return Failure{ErrorKind::ReadOnly, "this server is a read-only replica; push to the writer"};
  std::lock_guard<std::mutex> lock(dbMutex_);
  auto candidates = db_->candidates(run.key.family);
  if (!candidates) return dbFailure(candidates.status());
  std::set<std::string> known;
  for (const auto& c : *candidates) known.insert(c.planId);
  if (known.empty()) return Failure{ErrorKind::NotFound, "nothing precompiled for " + autotune::formatKey(run.key)};
  if (!known.count(run.selection.winner))
    return Failure{ErrorKind::BadRequest, "the winner '" + run.selection.winner + "' is not a candidate of " +
                                              autotune::formatKey(run.key)};
  for (const auto& t : run.timings)
    if (!known.count(t.planId))
      return Failure{ErrorKind::BadRequest, "timing of '" + t.planId + "', not a candidate of " +
                                                autotune::formatKey(run.key)};
  if (Status s = db_->recordTuning(run); !s) return dbFailure(s);
  forgetResolutions();
  return run.selection.runId;
}

Result<std::vector<autotune::KeyEntry>> KernelStore::list(const autotune::ListFilter& filter) {
  std::lock_guard<std::mutex> lock(dbMutex_);
  auto entries = db_->list(filter);
  if (!entries) return dbFailure(entries.status());
  return *entries;
}

bool KernelStore::drain(std::chrono::steady_clock::time_point deadline) {
  draining_ = true;
  return familyCompiles_.waitIdle(deadline) && kernelCompiles_.waitIdle(deadline);
}

}  // namespace mxfp6::server
