#include "compiler/frontend/symbols.h"

#include "compiler/frontend/builtins.h"
#include "compiler/frontend/config.h"

namespace mxfp6::frontend {

const char* symbolKindName(SymbolKind kind) {
  switch (kind) {
    case SymbolKind::Tensor:
      return "tensor parameter";
    case SymbolKind::Scalar:
      return "scalar parameter";
    case SymbolKind::RuntimeDim:
      return "runtime dimension";
    case SymbolKind::SpecializedDim:
      return "specialized size";
    case SymbolKind::Tunable:
      return "tunable";
    case SymbolKind::Variant:
      return "variant";
    case SymbolKind::RowVar:
      return "row variable";
  }
  return "name";
}

KernelSymbols collectSymbols(const ast::KernelDecl& kernel, DiagnosticEngine* diags) {
  KernelSymbols symbols;
  auto report = [&](const kir::SourceLoc& loc, std::string message) {
    if (diags) diags->error(loc, std::move(message));
  };
  auto declare = [&](const std::string& name, const kir::SourceLoc& loc, Symbol symbol) {
    auto [it, inserted] = symbols.names.emplace(name, symbol);
    if (!inserted)
      report(loc, "'" + name + "' is already declared as a " + symbolKindName(it->second.kind));
  };

  for (int i = 0; i < static_cast<int>(kernel.params.size()); ++i) {
    const ast::ParamDecl& p = kernel.params[i];
    declare(p.name, p.loc, {p.isTensor ? SymbolKind::Tensor : SymbolKind::Scalar, i});
  }

  std::map<std::string, int> specIndex;
  for (int i = 0; i < static_cast<int>(kernel.specs.size()); ++i) {
    const ast::SpecDecl& s = kernel.specs[i];
    if (!specIndex.emplace(s.name, i).second)
      report(s.loc, "'" + s.name + "' is already specialized");
  }

  std::map<std::string, int> tunableIndex;
  for (int i = 0; i < static_cast<int>(kernel.tunables.size()); ++i)
    tunableIndex.emplace(kernel.tunables[i].name, i);

  // Dimensions are declared by their uses in tensor types; a name may size many tensors. A
  // tunable may size a tensor too: it is declared with the tunables below. A specialized size
  // used only inside dimension expressions still sizes a tensor; other names in those
  // expressions are checked by the module checks.
  auto declareSpecsIn = [&](const ast::Expr& e, auto& self) -> void {
    if (e.kind == ast::ExprKind::Name && !symbols.find(e.name)) {
      auto spec = specIndex.find(e.name);
      if (spec != specIndex.end())
        symbols.names.emplace(e.name, Symbol{SymbolKind::SpecializedDim, spec->second});
    }
    for (const ast::ExprPtr& operand : e.operands) self(*operand, self);
  };
  for (const ast::ParamDecl& p : kernel.params) {
    for (const ast::SizeRef& dim : p.dims) {
      if (dim.isExpr()) declareSpecsIn(*dim.expr, declareSpecsIn);
      if (!dim.isName() || tunableIndex.count(dim.name)) continue;
      if (const Symbol* s = symbols.find(dim.name)) {
        if (s->kind != SymbolKind::RuntimeDim && s->kind != SymbolKind::SpecializedDim)
          report(dim.loc, "'" + dim.name + "' is already declared as a " + symbolKindName(s->kind));
        continue;
      }
      auto spec = specIndex.find(dim.name);
      if (spec != specIndex.end()) {
        symbols.names.emplace(dim.name, Symbol{SymbolKind::SpecializedDim, spec->second});
      } else {
        symbols.names.emplace(
            dim.name, Symbol{SymbolKind::RuntimeDim, static_cast<int>(symbols.runtimeDims.size())});
        symbols.runtimeDims.push_back(dim.name);
      }
    }
  }
  for (const ast::SpecDecl& s : kernel.specs) {
    const Symbol* sym = symbols.find(s.name);
    if (!sym || sym->kind != SymbolKind::SpecializedDim)
      report(s.loc, "specialized size '" + s.name + "' is not a dimension of any tensor parameter");
  }

  for (int i = 0; i < static_cast<int>(kernel.tunables.size()); ++i) {
    const ast::TunableDecl& t = kernel.tunables[i];
    declare(t.name, t.loc, {SymbolKind::Tunable, i});
  }
  for (int i = 0; i < static_cast<int>(kernel.variants.size()); ++i) {
    const ast::VariantDecl& v = kernel.variants[i];
    declare(v.name, v.loc, {SymbolKind::Variant, i});
  }
  for (int i = 0; i < static_cast<int>(kernel.row.vars.size()); ++i) {
    const ast::NameDecl& v = kernel.row.vars[i];
    declare(v.name, v.loc, {SymbolKind::RowVar, i});
  }
  return symbols;
}

VariantKind variantKind(const ast::VariantDecl& variant) {
  for (const ast::NameDecl& value : variant.values)
    if (auto v = findVariantValue(value.name)) return v->kind;
  return VariantKind::Format;
}

std::optional<ValueArg> resolveValueArg(const ast::Expr& call, size_t index, VariantKind want,
                                        const ast::KernelDecl& kernel, const KernelSymbols& symbols,
                                        std::string& error) {
  const ast::Expr& arg = *call.operands[index];
  std::string expected = std::string("the ") + argumentOrdinal(index) + " argument of " +
                         call.name + " is a " + variantKindName(want) + " (" +
                         variantKindValues(want) + ", or a variant naming " +
                         (want == VariantKind::Format ? "formats" : "scale modes") + ")";
  if (arg.kind != ast::ExprKind::Name) {
    error = expected;
    return std::nullopt;
  }
  const Symbol* s = symbols.find(arg.name);
  if (s && s->kind == SymbolKind::Variant) {
    VariantKind kind = variantKind(kernel.variants[s->index]);
    if (kind == want) return ValueArg{s->index, 0};
    error = "variant '" + arg.name + "' names " +
            (kind == VariantKind::Format ? "formats" : "scale modes") + ", but " + expected;
    return std::nullopt;
  }
  if (auto v = findVariantValue(arg.name)) {
    if (v->kind == want) return ValueArg{-1, v->value};
    error = "'" + arg.name + "' is a " + variantKindName(v->kind) + ", but " + expected;
    return std::nullopt;
  }
  error = expected + ", got '" + arg.name + "'";
  return std::nullopt;
}

kir::Param describeParam(const ast::KernelDecl& kernel, const ast::ParamDecl& param,
                         const KernelSymbols& symbols,
                         const std::map<std::string, int64_t>* bindings) {
  kir::Param p;
  p.name = param.name;
  p.kind = param.isTensor ? kir::ParamKind::Tensor : kir::ParamKind::Scalar;
  p.dtype = param.dtype;
  p.isOutput = param.isOut;
  p.loc = param.loc;
  if (param.defaultValue) {
    p.hasDefault = true;
    p.defaultValue = param.defaultValue->isFloat
                         ? param.defaultValue->floatValue
                         : static_cast<double>(param.defaultValue->intValue);
  }
  for (const ast::SizeRef& size : param.dims) {
    kir::Dim d;
    d.name = size.text();
    const Symbol* s = size.isName() ? symbols.find(size.name) : nullptr;
    if (s && s->kind == SymbolKind::RuntimeDim) {
      d.runtimeDim = s->index;
    } else if (!size.isName() && !size.isExpr()) {
      d.constant = size.value;
    } else if (bindings) {
      // Specialized sizes, tunables and expressions: compile-time constants of the configuration.
      d.constant = dimensionValue(size, kernel, *bindings).value_or(-1);
    }
    p.dims.push_back(std::move(d));
  }
  return p;
}

}  // namespace mxfp6::frontend
