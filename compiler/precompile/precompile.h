// Precompile: every candidate plan of a key family, compiled into the kernel database
// (docs/architecture.md, "Precompile") or into a folder of code objects. Shared by
// `mxfp6c precompile --shapes` and by the server, which precompiles a family on a miss. Links the
// compiler (MLIR/LLVM).
//
// Per family (op, variant, target, sizes, toolchain): the op's candidate plans; their distinct
// (kernel, config, target) compiles run on a pool of threads; then plans that cannot win are
// pruned before anything is stored:
//   - a launch the target refuses (the compiler's reason is kept);
//   - a launch that spills to stack;
//   - a plan whose code objects are exactly those of an earlier plan (a knob that changed
//     nothing in the code): same code, same time, so only the first in declaration order is kept.
// Each family's candidates are written in one transaction, with the objects they launch.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "autotune/db.h"
#include "ops/plan.h"

namespace mxfp6::precompile {

/// The toolchain fingerprint of this build: the compiler's source hash, LLVM's version and
/// ptxas's (or "no ptxas": PTX instead of cubin), so objects of another compiler never load
/// as current.
std::string toolchainFingerprint();

/// Bumped when the launch metadata's meaning changes: loaders refuse other versions.
inline constexpr int kMetadataSchema = 1;

/// A compiled kernel's launch metadata stamped with kMetadataSchema and `toolchain`: what every
/// code object this compiler writes carries (the database's, `precompile -o`'s and `compile -o`'s),
/// so a loader tells current objects from stale ones. indent: as nlohmann::json::dump (-1: one
/// line, what the database stores; 2: the compiler's own layout, for files).
Expected<std::string> stampedMetadata(const std::string& metadataJson, const std::string& toolchain, int indent = -1);

/// One kernel of a DSL source compiled for a target (cubin where ptxas is present, else PTX;
/// HSACO for AMD), its launch metadata stamped with kMetadataSchema and `toolchain`. Errors
/// carry the compiler's located diagnostics. Thread-safe.
Expected<autotune::CodeObject> compileKernelObject(const std::string& fileName, const std::string& source,
                                                   const std::string& kernel, const std::string& config,
                                                   const std::string& target, const std::string& toolchain);

/// One family to precompile: the problem gives the op, variant and specialized size (its token
/// count is not used: plans are shape-free).
struct FamilyRequest {
  ops::Problem problem;
  std::string target;
};

struct Options {
  bool force = false;   // recompile families the database already has
  unsigned jobs = 0;    // compile threads; 0 = every core
  std::string dslDir;   // where the ops' .mxk files are
  /// Called after each compile from a worker thread (serialized): done, total.
  std::function<void(size_t, size_t)> progress;
};

struct Report {
  std::string toolchain;       // the compiler's fingerprint (keys add their op's DSL hash)
  std::vector<autotune::FamilyKey> families;  // every family asked for, with its key toolchain
  int written = 0, skipped = 0;  // families stored now; already present
  size_t compiles = 0;
  int objectsStored = 0, pruned = 0;
  std::map<std::string, std::string> pruneReasons;  // reason -> "op for target"
  double seconds = 0;
};

/// Precompiles the families (duplicates ignored). Errors: an unreadable .mxk file, a family whose
/// every candidate was pruned (naming it; reported before anything is written), a database error.
/// Families written before a database error stay written (each is its own transaction).
Expected<Report> precompileFamilies(autotune::KernelDb& db, const std::vector<FamilyRequest>& requests,
                                    const Options& options);

/// Every family's candidates after pruning, and the code objects they launch.
struct CompiledFamilies {
  std::vector<std::pair<autotune::FamilyKey, std::vector<autotune::Candidate>>> families;
  std::vector<autotune::CodeObject> objects;  // each launched object once, in the order compiled
};

/// The same compiles and pruning as precompileFamilies, stored nowhere (`options.force` does not
/// apply: every family is compiled): what `mxfp6c precompile --shapes -o DIR` writes to a folder.
/// `report` gets the compile and pruning counts. Errors as precompileFamilies'.
Expected<CompiledFamilies> compileFamilies(const std::vector<FamilyRequest>& requests, const Options& options,
                                           Report& report);

}  // namespace mxfp6::precompile
