#include "compiler/frontend/config.h"

#include <algorithm>
#include <vector>

#include "compiler/frontend/module_impl.h"
#include "compiler/frontend/symbols.h"

namespace mxfp6::frontend {
namespace {

using ast::BinaryOp;
using ast::Expr;
using ast::ExprKind;

struct EvalError {
  kir::SourceLoc loc;
  std::string message;
};

/// Evaluates a constraint or dimension expression (checked at parse time to be well typed:
/// conditions are 0 or 1). `&&`, `||` and `?:` evaluate only what they need, so
/// `B != 0 && D % B == 0` is safe. Division by zero and overflow are errors, never undefined
/// behaviour; with `exact`, so is a division that leaves a remainder.
std::optional<int64_t> evaluate(const Expr& e, const Bindings& b, EvalError& err,
                                bool exact = false) {
  auto fail = [&](std::string message) -> std::optional<int64_t> {
    err = {e.loc, std::move(message)};
    return std::nullopt;
  };
  switch (e.kind) {
    case ExprKind::IntLit:
      return e.intValue;
    case ExprKind::Name: {
      auto it = b.find(e.name);
      if (it == b.end()) return fail("'" + e.name + "' has no value");
      return it->second;
    }
    case ExprKind::Unary: {
      auto v = evaluate(*e.operands[0], b, err, exact);
      if (!v) return std::nullopt;
      if (e.unaryOp == ast::UnaryOp::Not) return *v == 0 ? 1 : 0;
      if (*v == INT64_MIN) return fail("integer overflow");
      return -*v;
    }
    case ExprKind::Ternary: {
      auto c = evaluate(*e.operands[0], b, err, exact);
      if (!c) return std::nullopt;
      return evaluate(*e.operands[*c ? 1 : 2], b, err, exact);
    }
    case ExprKind::Binary:
      break;
    default:
      return fail("not an integer expression");
  }
  auto l = evaluate(*e.operands[0], b, err, exact);
  if (!l) return std::nullopt;
  if (e.binaryOp == BinaryOp::And && *l == 0) return 0;
  if (e.binaryOp == BinaryOp::Or && *l != 0) return 1;
  auto r = evaluate(*e.operands[1], b, err, exact);
  if (!r) return std::nullopt;
  int64_t out = 0;
  switch (e.binaryOp) {
    case BinaryOp::Add:
      if (__builtin_add_overflow(*l, *r, &out)) return fail("integer overflow");
      return out;
    case BinaryOp::Sub:
      if (__builtin_sub_overflow(*l, *r, &out)) return fail("integer overflow");
      return out;
    case BinaryOp::Mul:
      if (__builtin_mul_overflow(*l, *r, &out)) return fail("integer overflow");
      return out;
    case BinaryOp::Div:
    case BinaryOp::Rem:
      if (*r == 0) return fail("division by zero");
      if (*l == INT64_MIN && *r == -1) return fail("integer overflow");
      if (exact && e.binaryOp == BinaryOp::Div && *l % *r != 0)
        return fail(std::to_string(*l) + " / " + std::to_string(*r) + " is not an integer");
      return e.binaryOp == BinaryOp::Div ? *l / *r : *l % *r;
    case BinaryOp::Eq:
      return *l == *r;
    case BinaryOp::Ne:
      return *l != *r;
    case BinaryOp::Lt:
      return *l < *r;
    case BinaryOp::Le:
      return *l <= *r;
    case BinaryOp::Gt:
      return *l > *r;
    case BinaryOp::Ge:
      return *l >= *r;
    case BinaryOp::And:
    case BinaryOp::Or:
      return *r != 0;
  }
  return fail("not an integer expression");
}

/// Names used by `e`, in first-appearance order.
void collectNames(const Expr& e, std::vector<std::string>& names) {
  if (e.kind == ExprKind::Name && std::find(names.begin(), names.end(), e.name) == names.end())
    names.push_back(e.name);
  for (const ast::ExprPtr& operand : e.operands) collectNames(*operand, names);
}

/// "C = 8, K = 2": the values of the names `e` uses, for messages.
std::string valuesUsed(const Expr& e, const Bindings& bindings) {
  std::vector<std::string> names;
  collectNames(e, names);
  std::string values;
  for (const std::string& n : names) {
    auto it = bindings.find(n);
    if (it != bindings.end())
      values += (values.empty() ? "" : ", ") + n + " = " + std::to_string(it->second);
  }
  return values;
}

bool isTunable(const ast::KernelDecl& kernel, const std::string& name) {
  return std::any_of(kernel.tunables.begin(), kernel.tunables.end(),
                     [&](auto& t) { return t.name == name; });
}

bool allConstraintsHold(const ast::KernelDecl& kernel, const Bindings& bindings) {
  for (const ast::RequireDecl& r : kernel.constraints) {
    EvalError err;
    auto v = evaluate(*r.condition, bindings, err);
    if (!v || *v == 0) return false;
  }
  return checkDimensions(kernel, bindings, nullptr);
}

}  // namespace

std::optional<Bindings> bindConfig(const ast::KernelDecl& kernel,
                                   const std::map<std::string, int64_t>& overrides,
                                   DiagnosticEngine& diags) {
  bool ok = true;
  auto isKey = [&](const std::string& key) {
    return std::any_of(kernel.specs.begin(), kernel.specs.end(),
                       [&](auto& s) { return s.name == key; }) ||
           std::any_of(kernel.tunables.begin(), kernel.tunables.end(),
                       [&](auto& t) { return t.name == key; }) ||
           std::any_of(kernel.variants.begin(), kernel.variants.end(),
                       [&](auto& v) { return v.name == key; });
  };
  for (const auto& [key, value] : overrides) {
    if (isKey(key)) continue;
    std::string valid;
    for (const ast::SpecDecl& s : kernel.specs) valid += (valid.empty() ? "" : ", ") + s.name;
    for (const ast::TunableDecl& t : kernel.tunables) valid += (valid.empty() ? "" : ", ") + t.name;
    for (const ast::VariantDecl& v : kernel.variants) valid += (valid.empty() ? "" : ", ") + v.name;
    diags.error(kernel.loc,
                "unknown configuration key '" + key + "' for kernel '" + kernel.name + "'; " +
                    (valid.empty() ? "it has no configuration keys" : "valid keys: " + valid));
    ok = false;
  }
  // A value name given to a size or a tunable: say so rather than print its code.
  auto isName = [&](const char* what, const std::string& name, const kir::SourceLoc& loc,
                    int64_t value) {
    auto named = decodeVariantNameCode(value);
    if (named)
      diags.error(loc, std::string(what) + " '" + name + "' takes an integer, not the name " +
                           variantValueName(named->kind, named->value));
    return named.has_value();
  };

  Bindings bindings;
  for (const ast::SpecDecl& s : kernel.specs) {
    auto given = overrides.find(s.name);
    std::optional<int64_t> value = given != overrides.end() ? given->second : s.defaultValue;
    if (!value) {
      diags.error(s.loc, "specialized size '" + s.name +
                             "' has no value; give it a default or a configuration value");
      ok = false;
    } else if (isName("specialized size", s.name, s.loc, *value)) {
      ok = false;
    } else if (*value < 1) {
      diags.error(s.loc, "specialized size '" + s.name + "' must be at least 1, got " +
                             std::to_string(*value));
      ok = false;
    } else {
      bindings[s.name] = *value;
    }
  }
  for (const ast::TunableDecl& t : kernel.tunables) {
    auto given = overrides.find(t.name);
    int64_t value = given != overrides.end() ? given->second : t.effectiveDefault();
    if (isName("tunable", t.name, t.loc, value)) {
      ok = false;
    } else if (std::find(t.values.begin(), t.values.end(), value) == t.values.end()) {
      diags.error(t.loc, t.name + " = " + std::to_string(value) + " is not one of its candidates " +
                             t.candidatesText());
      ok = false;
    }
    bindings[t.name] = value;
  }
  for (const ast::VariantDecl& v : kernel.variants) {
    VariantKind kind = variantKind(v);
    std::string chosen = v.effectiveDefault();
    auto given = overrides.find(v.name);
    if (given != overrides.end()) {
      // A name code from a configuration string, or the enum value of Kernel::config.
      auto named = decodeVariantNameCode(given->second);
      const char* name =
          named ? (named->kind == kind ? variantValueName(kind, named->value) : nullptr)
                : variantValueName(kind, given->second);
      bool member = name && std::any_of(v.values.begin(), v.values.end(),
                                        [&](auto& value) { return value.name == name; });
      if (!member) {
        std::string text =
            named ? variantValueName(named->kind, named->value) : std::to_string(given->second);
        diags.error(v.loc, v.name + " = " + text + " is not one of its values " + v.valuesText());
        ok = false;
        continue;
      }
      chosen = name;
    }
    bindings[v.name] = findVariantValue(chosen)->value;
  }
  if (!ok) return std::nullopt;
  return bindings;
}

bool checkConstraints(const ast::KernelDecl& kernel, const Bindings& bindings,
                      DiagnosticEngine& diags) {
  bool ok = true;
  for (const ast::RequireDecl& r : kernel.constraints) {
    EvalError err;
    auto v = evaluate(*r.condition, bindings, err);
    if (!v) {
      diags.error(err.loc, "in constraint '" + r.text + "': " + err.message);
      ok = false;
      continue;
    }
    if (*v != 0) continue;
    std::string values = valuesUsed(*r.condition, bindings);
    std::string message = "constraint '" + r.text + "' is violated";
    if (!values.empty()) message += " with " + values;
    if (!r.message.empty()) message += ": " + r.message;
    diags.error(r.loc, message);
    ok = false;
  }
  return ok;
}

bool checkDimensions(const ast::KernelDecl& kernel, const Bindings& bindings,
                     DiagnosticEngine* diags) {
  bool ok = true;
  for (const ast::ParamDecl& p : kernel.params) {
    for (const ast::SizeRef& dim : p.dims) {
      std::string where = "dimension '" + dim.text() + "' of '" + p.name + "'";
      std::optional<int64_t> value;
      std::string values;
      if (dim.isExpr()) {
        EvalError err;
        value = evaluate(*dim.expr, bindings, err, /*exact=*/true);
        if (!value) {
          if (diags) diags->error(err.loc, "in " + where + ": " + err.message);
          ok = false;
          continue;
        }
        values = valuesUsed(*dim.expr, bindings);
      } else if (auto bound = bindings.find(dim.name);
                 dim.isName() && isTunable(kernel, dim.name) && bound != bindings.end()) {
        value = bound->second;
      }
      if (!value || *value >= 1) continue;
      if (diags)
        diags->error(dim.loc, where + " is " + std::to_string(*value) +
                                  (values.empty() ? "" : " with " + values) +
                                  "; a dimension must be at least 1");
      ok = false;
    }
  }
  return ok;
}

std::optional<int64_t> dimensionValue(const ast::SizeRef& dim, const ast::KernelDecl& kernel,
                                      const Bindings& bindings) {
  if (dim.isExpr()) {
    EvalError err;
    return evaluate(*dim.expr, bindings, err, /*exact=*/true);
  }
  if (!dim.isName()) return dim.value;
  bool compileTime = isTunable(kernel, dim.name) ||
                     std::any_of(kernel.specs.begin(), kernel.specs.end(),
                                 [&](auto& s) { return s.name == dim.name; });
  auto bound = bindings.find(dim.name);
  if (!compileTime || bound == bindings.end()) return std::nullopt;
  return bound->second;
}

std::optional<int64_t> constantExprValue(const ast::Expr& e, const Bindings& bindings,
                                         std::string& error) {
  EvalError err;
  auto value = evaluate(e, bindings, err, /*exact=*/true);
  if (!value) error = err.message;
  return value;
}

std::vector<std::map<std::string, int64_t>> enumerateConfigs(
    const Module& module, const std::string& kernelName,
    const std::map<std::string, int64_t>& fixed) {
  const ast::KernelDecl* kernel = module.impl().findKernel(kernelName);
  if (!kernel) return {};
  for (const auto& [key, value] : fixed) {
    bool isFixable = std::any_of(kernel->specs.begin(), kernel->specs.end(),
                                 [&](auto& s) { return s.name == key; }) ||
                     std::any_of(kernel->variants.begin(), kernel->variants.end(),
                                 [&](auto& v) { return v.name == key; });
    if (!isFixable) return {};
  }
  // Sizes and variants as instantiate() binds them; the tunables are overwritten below.
  DiagnosticEngine ignored;
  std::optional<Bindings> base = bindConfig(*kernel, fixed, ignored);
  if (!base) return {};

  // Walk the cross product like an odometer: the last tunable varies fastest.
  const std::vector<ast::TunableDecl>& tunables = kernel->tunables;
  std::vector<size_t> pick(tunables.size(), 0);
  std::vector<std::map<std::string, int64_t>> configs;
  while (true) {
    Bindings b = *base;
    for (size_t i = 0; i < tunables.size(); ++i) b[tunables[i].name] = tunables[i].values[pick[i]];
    if (allConstraintsHold(*kernel, b)) configs.push_back(std::move(b));
    size_t i = tunables.size();
    while (i > 0 && ++pick[i - 1] == tunables[i - 1].values.size()) pick[--i] = 0;
    if (i == 0) return configs;
  }
}

}  // namespace mxfp6::frontend
