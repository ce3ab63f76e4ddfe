// One place that knows which MLIR dialects, extensions, translations and passes the compiler
// uses; kept in its own file because the "register everything" headers are slow to compile.
#pragma once

namespace mlir {
class DialectRegistry;
}

namespace mxfp6::codegen {

/// Registers dialects, target attribute interfaces and LLVM IR translations into `registry`,
/// and the pass registry (once per process) so pipelines can be parsed from text.
void registerCompilerComponents(mlir::DialectRegistry& registry);

}  // namespace mxfp6::codegen
