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
};

/// The target named `name`, or nullopt.
std::optional<TargetInfo> findTarget(const std::string& name);
/// Every supported target name, for error messages and `precompile`.
std::vector<std::string> targetNames();

}  // namespace mxfp6::codegen
