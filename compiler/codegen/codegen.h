// Public interface of the code generator: one instantiated kernel (KIR) to one code object or
// one intermediate stage, for one target. The only component that links MLIR/LLVM.
#pragma once

#include <optional>
#include <string>

#include "compiler/codegen/target.h"
#include "compiler/frontend/kir.h"
#include "support/status.h"

namespace mxfp6::codegen {

/// The stages the driver can stop after (`mxfp6c compile --emit ...`).
enum class Emit { Mlir, Llvm, Ptx, Cubin, Hsaco, Isa };

std::optional<Emit> parseEmit(const std::string& name);
const char* emitName(Emit e);
/// Whether `e` is produced for `target` (ptx/cubin for NVIDIA, hsaco for AMD, isa for both).
bool emitSupported(Emit e, const TargetInfo& target);

/// Resource use of a code object, from ptxas (sm_90) or the amdhsa metadata (gfx*).
struct Resources {
  std::optional<int> registers;      // per thread: registers (NVIDIA) / VGPRs (AMD)
  std::optional<int> sgprs;          // AMD scalar registers
  std::optional<int> sharedBytes;    // shared memory / LDS per program, static and dynamic
  std::optional<int> stackBytes;     // spill/stack per thread (private segment on AMD)
};

struct CompiledKernel {
  std::string bytes;         // the code object (cubin, hsaco) or the stage's text
  std::string metadataJson;  // launch metadata the runtime loads with the code object
  Resources resources;
  int blockThreads = 0;      // threads per program
};

/// Compiles `kernel` for `target` up to the stage `emit`. Errors carry the DSL location
/// (`file:line:col: error: ...`) when the failure belongs to the user's source.
Expected<CompiledKernel> compileKernel(const kir::Kernel& kernel, const TargetInfo& target, Emit emit);

}  // namespace mxfp6::codegen
