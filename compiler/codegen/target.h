// The targets the compiler emits code for, and the few facts the shared lowering needs from
// each (the Triton TargetInfo idea): which GPU dialect path, the subgroup width, the chip name.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mxfp6::codegen {

enum class Backend { NVVM, ROCDL };

struct TargetInfo {
  std::string name;     // "sm_90", "gfx942", "gfx950": what users pass to --target
  Backend backend;
  int subgroupSize;     // threads that a warp shuffle spans: 32 on NVIDIA, 64 on CDNA
  std::string chip;     // the chip string of the MLIR target attribute
  // Shared memory (LDS) of one program: what it may allocate statically, and at most, past which
  // the rest must be requested at launch (sm_90: 48 KB static, 227 KB once the function opts in).
  int maxStaticSharedBytes;
  int maxSharedBytes;
  // Shared memory (LDS) of one SM (CU), which its resident programs divide among them; sm_90
  // reserves 1 KB of it for each program besides what the program asks for.
  int sharedBytesPerUnit;
  int sharedBytesReservedPerProgram;
  // Residency of one SM (CU) besides registers and shared memory: the warps (waves) and the
  // programs it holds at once (sm_90: 64 warps, 32 programs; CDNA: 4 SIMDs of 8 wave64s, and
  // no more programs than waves).
  int maxWarpsPerUnit;
  int maxProgramsPerUnit;
};

/// The target named `name`, or nullopt.
std::optional<TargetInfo> findTarget(const std::string& name);
/// Every supported target name, for error messages and `precompile`.
std::vector<std::string> targetNames();

}  // namespace mxfp6::codegen
