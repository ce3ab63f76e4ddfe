// Checks of a parsed file that do not depend on a configuration.
#pragma once

#include <vector>

#include "compiler/frontend/ast.h"
#include "compiler/frontend/frontend.h"

namespace mxfp6::frontend {

/// Checks names, kinds and declarations of every kernel (see sema.cpp) and describes the
/// kernels. Every problem found is reported; the caller rejects the file if any was.
std::vector<KernelInfo> checkModule(const ast::File& file, DiagnosticEngine& diags);

}  // namespace mxfp6::frontend
