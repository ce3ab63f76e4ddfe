// The launch metadata that travels with a code object: entry symbol, ABI (argument kinds in
// order), block size, rows per program, shared memory, pointer alignment, configuration,
// resources, and the kernel's signature (every parameter's dtype, dims and strides, and the row
// extents) that launches from tensors are checked against. The runtime parses it
// (runtime/runtime.h: parseKernelMetadata, which states the schema).
#pragma once

#include <string>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/mlir_gen.h"

namespace mxfp6::codegen {

std::string launchMetadataJson(const kir::Kernel& kernel, const TargetInfo& target, const LaunchShape& shape,
                               const Resources& resources);

}  // namespace mxfp6::codegen
