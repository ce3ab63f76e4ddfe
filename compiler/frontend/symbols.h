// The names a kernel declares (parameters, dimensions, specialized sizes, tunables, row
// variables), shared by the module checks and by instantiation.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/frontend/ast.h"
#include "compiler/frontend/frontend.h"

namespace mxfp6::frontend {

enum class SymbolKind { Tensor, Scalar, RuntimeDim, SpecializedDim, Tunable, RowVar };

struct Symbol {
  SymbolKind kind;
  int index;  // param index, runtime-dim index, spec index, tunable index or row-variable index
};

struct KernelSymbols {
  std::map<std::string, Symbol> names;
  std::vector<std::string> runtimeDims;  // first-appearance order over the params

  const Symbol* find(const std::string& name) const {
    auto it = names.find(name);
    return it == names.end() ? nullptr : &it->second;
  }
};

/// "tensor parameter", "runtime dimension", ... for messages.
const char* symbolKindName(SymbolKind kind);

/// Collects the kernel's names; the first declaration of a name wins. With `diags`, reports
/// every name declared twice and every specialized size that is no tensor dimension.
KernelSymbols collectSymbols(const ast::KernelDecl& kernel, DiagnosticEngine* diags);

/// The KIR description of a parameter. Specialized dimensions carry their value from
/// `bindings` when given, and constant -1 otherwise (their value depends on the configuration).
kir::Param describeParam(const ast::ParamDecl& param, const KernelSymbols& symbols,
                         const std::map<std::string, int64_t>* bindings);

}  // namespace mxfp6::frontend
