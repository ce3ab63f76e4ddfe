// KIR -> MLIR: the one file that sees both the kernel IR and MLIR (as MLIRGen.cpp in the Toy
// tutorial). The result is a `gpu.module` holding one `gpu.func` kernel written in upstream
// dialects (gpu, arith, vector, scf, memref, llvm), still target-neutral except for the few
// operations the TargetInfo selects (subgroup width, square root intrinsic).
#pragma once

#include <map>
#include <set>
#include <string>

#include "compiler/codegen/target.h"
#include "compiler/frontend/kir.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mlir {
class MLIRContext;
}

namespace mxfp6::codegen {

/// Facts about the generated kernel that the launcher needs, decided while generating it.
struct LaunchShape {
  int blockThreads = 0;     // threads per program (ROWS * THREADS)
  int rowsPerProgram = 0;   // rows one program handles; grid = ceil(rows / rowsPerProgram)
  int sharedBytes = 0;      // shared memory of the buffers: reductions, transposes, staging, copies
  int dynamicSharedBytes = 0;  // of which passed at launch (0: all static)
  int pointerAlignment = 0; // bytes every tensor pointer must be aligned to
  std::map<int, int64_t> strideMultiples;  // stride parameter -> the multiple its value must be
  std::map<int, int64_t> dimMultiples;     // runtime dim -> the multiple its value must be
  std::set<int> positiveParams;            // integer scalar parameters that must be >= 1 where rows run (divisors)
  std::set<int> positiveDims;              // runtime dims that must be >= 1 where rows run (divisors)
  std::vector<std::vector<kir::Dim>> indexBounds;  // products of sizes that must be <= 2^31 - 1 (loop
                                                   // bounds, ranges of divided indices)
  std::vector<int> magicDivisors;          // ABI indices of the divisors whose multiplier and shift
                                           // follow the ABI's arguments (two i32 each, in order)
  bool waitsForPreviousGrid = false;       // waits for the stream's previous grid before any access
};

/// Generates the kernel; on failure, errors were emitted at the DSL location and the result is
/// null.
mlir::OwningOpRef<mlir::ModuleOp> generateMLIR(mlir::MLIRContext& context, const kir::Kernel& kernel,
                                               const TargetInfo& target, LaunchShape& shape);

/// The name of the kernel symbol in the code object.
std::string entryName(const kir::Kernel& kernel);

}  // namespace mxfp6::codegen
