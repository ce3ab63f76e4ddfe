// The launch metadata that travels with a code object: entry symbol, ABI (argument kinds in
// order), block size, rows per program, shared memory, pointer alignment, configuration and
// resources. The runtime parses it (runtime/runtime.h: parseKernelMetadata).
#pragma once

#include <string>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/mlir_gen.h"

namespace mxfp6::codegen {

std::string launchMetadataJson(const kir::Kernel& kernel, const TargetInfo& target, const LaunchShape& shape,
                               const Resources& resources);

}  // namespace mxfp6::codegen
