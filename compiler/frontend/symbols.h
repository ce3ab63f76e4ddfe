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

enum class SymbolKind { Tensor, Scalar, RuntimeDim, SpecializedDim, Tunable, Variant, RowVar };

struct Symbol {
  SymbolKind kind;
  int index;  // param, runtime-dim, spec, tunable, variant or row-variable index
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

/// The kind of a variant: that of its first known value name (the module checks reject a
/// variant whose values are unknown or of both kinds).
VariantKind variantKind(const ast::VariantDecl& variant);

/// A format or scale-mode argument of a builtin, resolved: a variant (its index), or a value.
struct ValueArg {
  int variant = -1;
  int64_t value = 0;  // when variant < 0
};

/// Resolves argument `index` of the call `call` of a builtin taking a value of kind `want`
/// there: a name that is a variant of that kind, else a value name of that kind. A variant
/// name comes first, so a variant can never be shadowed; any other argument is an error,
/// described in `error`.
std::optional<ValueArg> resolveValueArg(const ast::Expr& call, size_t index, VariantKind want,
                                        const ast::KernelDecl& kernel, const KernelSymbols& symbols,
                                        std::string& error);

/// The KIR description of parameter `param` of `kernel`. Compile-time dimensions that depend
/// on the configuration (specialized sizes, tunables, parenthesized expressions, named by their
/// source text) carry their value from `bindings` when given, and constant -1 otherwise; they
/// are never runtime dimensions.
kir::Param describeParam(const ast::KernelDecl& kernel, const ast::ParamDecl& param,
                         const KernelSymbols& symbols,
                         const std::map<std::string, int64_t>* bindings);

}  // namespace mxfp6::frontend
