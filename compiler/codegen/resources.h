// Resource use of a code object: what `mxfp6c precompile` reports and the tuner will weigh
// (registers, shared memory/LDS, stack).
#pragma once

#include <string>

#include "compiler/codegen/codegen.h"

namespace mxfp6::codegen {

/// Parses `ptxas -v` output ("Used 40 registers, 48 bytes smem", "N bytes stack frame").
Resources parsePtxasResources(const std::string& ptxasOutput);

/// Reads the amdhsa kernel metadata (the NT_AMDGPU_METADATA note, msgpack) of an HSACO for
/// the kernel `entry`: .vgpr_count, .sgpr_count, .group_segment_fixed_size,
/// .private_segment_fixed_size. A file that is not an AMDGPU ELF is an error.
Expected<Resources> readHsacoResources(const std::string& hsaco, const std::string& entry);

}  // namespace mxfp6::codegen
