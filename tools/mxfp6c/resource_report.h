// The one-line resource summary `mxfp6c compile` prints to stderr, and the warning on a spill.
#pragma once

#include <string>

#include "compiler/codegen/codegen.h"

namespace mxfp6::cli {

/// "mxfp6c: KERNEL for TARGET: 40 registers, 0 sgprs, 1024 B shared, 0 B spilled, occupancy
/// 75% (bound by registers), 256 threads per program\n", plus "mxfp6c: warning: ..." when the
/// code object spills. Unknown figures (PTX without ptxas) read "?".
std::string resourceReport(const std::string& kernel, const codegen::TargetInfo& target,
                           const codegen::CompiledKernel& compiled);

}  // namespace mxfp6::cli
