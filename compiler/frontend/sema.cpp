// Module-level checks. They run once, at parse time, because none depends on a configuration:
//  - every name is declared once: parameters, dimensions, specialized sizes, tunables and row
//    variables share one namespace (symbols.cpp);
//  - scalars are i32, i64 or f32 and never `out`; tensors hold bf16, f16, f32, i32 or u8; an
//    explicit stride list has one entry per dimension, each an integer or an integer scalar;
//    integer sizes are at least 1;
//  - a specialized size is a tensor dimension with a default of at least 1; a tunable's
//    candidates are distinct and include its default; a schedule knob's candidates are legal
//    values of it (knobs.h), and a tunable that is no knob is used by the kernel;
//  - a variant's values are distinct value names of one kind (formats or scale modes) and
//    include its default; a variant is not named like a value;
//  - a constraint is an integer condition over specialized sizes and tunables; a dimension
//    expression `(C * 3 / 4)` is an integer over them;
//  - row variables range over runtime dimensions, one extent per variable;
//  - in the body every name is defined before it is used, a binding or a `var` never reuses a
//    name in scope, `name = ...` of a `var` in scope assigns it, calls name builtins and only
//    tensors are indexed; a loop's body is a scope of its own (its index and what it binds are
//    local to it) and a literal step is positive; variants and value names (E2M3, ...) appear
//    only as the format and scale-mode arguments of builtins, and those arguments are a variant
//    or a value name of the kind the builtin takes there.
// Types and shapes of the body depend on the sizes and are checked by instantiate().
#include "compiler/frontend/sema.h"

#include <cfloat>
#include <cstdint>
#include <map>
#include <set>

#include "compiler/frontend/builtins.h"
#include "compiler/frontend/fn_expand.h"
#include "compiler/frontend/knobs.h"
#include "compiler/frontend/symbols.h"

namespace mxfp6::frontend {
namespace {

using ast::Expr;
using ast::ExprKind;

enum class ConstraintType { Int, Bool };

/// Where an integer expression over sizes and tunables appears, for messages.
struct ConstContext {
  const char* plural;    // "constraints"
  const char* singular;  // "constraint"
};
constexpr ConstContext kConstraint{"constraints", "constraint"};
constexpr ConstContext kDimExpr{"dimension expressions", "dimension expression"};

/// The value of an integer literal, possibly negated; nullopt for anything else.
std::optional<int64_t> intLiteral(const Expr& e) {
  if (e.kind == ExprKind::IntLit) return e.intValue;
  if (e.kind != ExprKind::Unary || e.unaryOp != ast::UnaryOp::Neg) return std::nullopt;
  auto v = intLiteral(*e.operands[0]);
  if (v) v = -*v;  // literals are never INT64_MIN: the lexer reads no sign
  return v;
}

/// Every name an expression, a size or a statement (recursively) mentions.
void collectNames(const Expr& e, std::set<std::string>& names) {
  if (e.kind == ExprKind::Name || e.kind == ExprKind::Call || e.kind == ExprKind::Access) names.insert(e.name);
  for (const ast::ExprPtr& o : e.operands) collectNames(*o, names);
}
void collectNames(const ast::SizeRef& s, std::set<std::string>& names) {
  if (s.isName()) names.insert(s.name);
  if (s.isExpr()) collectNames(*s.expr, names);
}
void collectNames(const std::vector<ast::Stmt>& body, std::set<std::string>& names) {
  for (const ast::Stmt& s : body) {
    for (const ast::ExprPtr& i : s.indices) collectNames(*i, names);
    for (const ast::Expr* e : {s.value.get(), s.end.get(), s.step.get()})
      if (e) collectNames(*e, names);
    collectNames(s.body, names);
  }
}

/// The names a kernel can read a tunable through: its sizes, strides, constraints, row extents
/// and body, and the bodies of the file's fns (which read the calling kernel's names).
std::set<std::string> namesUsed(const ast::KernelDecl& kernel, const ast::File& file) {
  std::set<std::string> names;
  for (const ast::ParamDecl& p : kernel.params) {
    for (const ast::SizeRef& d : p.dims) collectNames(d, names);
    for (const ast::SizeRef& s : p.strides) collectNames(s, names);
  }
  for (const ast::RequireDecl& r : kernel.constraints) collectNames(*r.condition, names);
  for (const ast::SizeRef& e : kernel.row.extents) collectNames(e, names);
  collectNames(kernel.row.body, names);
  for (const ast::FnDecl& fn : file.fns) {
    collectNames(fn.body, names);
    if (fn.result) collectNames(*fn.result, names);
  }
  return names;
}

class KernelChecker {
 public:
  KernelChecker(const ast::KernelDecl& kernel, const ast::File& file, DiagnosticEngine& diags)
      : kernel_(kernel), file_(file), diags_(diags), errorsBefore_(diags.diagnostics().size()),
        symbols_(collectSymbols(kernel, &diags)) {}

  KernelInfo run() {
    for (const ast::ParamDecl& p : kernel_.params) checkParam(p);
    for (const ast::SpecDecl& s : kernel_.specs) {
      if (s.defaultValue && *s.defaultValue < 1)
        error(s.loc, "specialized size '" + s.name + "' must be at least 1");
    }
    for (const ast::TunableDecl& t : kernel_.tunables) checkTunable(t);
    for (const ast::VariantDecl& v : kernel_.variants) checkVariant(v);
    for (const ast::RequireDecl& r : kernel_.constraints) {
      auto type = constraintType(*r.condition, kConstraint);
      if (type == ConstraintType::Int)
        error(r.loc, "a constraint must be a condition, such as 'D % 64 == 0'");
    }
    checkRowBlock();
    if (diags_.diagnostics().size() == errorsBefore_) checkTunablesUsed();
    return describe();
  }

 private:
  void error(const kir::SourceLoc& loc, std::string message) {
    diags_.error(loc, std::move(message));
  }

  void checkParam(const ast::ParamDecl& p) {
    if (!p.isTensor) {
      if (p.isOut) error(p.outLoc, "'out' applies only to tensors; '" + p.name + "' is a scalar");
      if (p.dtype != kir::Dtype::I32 && p.dtype != kir::Dtype::I64 && p.dtype != kir::Dtype::F32)
        error(p.typeLoc, "scalar parameter '" + p.name + "' has type " + kir::dtypeName(p.dtype) +
                             "; scalars are i32, i64 or f32");
      if (p.defaultValue) checkDefault(p, *p.defaultValue);
      return;
    }
    if (p.dtype == kir::Dtype::I64)
      error(p.typeLoc, "tensors of i64 are not supported; tensors hold bf16, f16, f32, i32 or u8");
    for (const ast::SizeRef& d : p.dims) {
      if (d.isExpr()) {
        auto type = constraintType(*d.expr, kDimExpr);
        if (type == ConstraintType::Bool)
          error(d.loc, "a dimension expression must be an integer, such as '(C * 3 / 4)'");
      } else if (!d.isName() && d.value < 1) {
        error(d.loc, "a dimension size must be at least 1");
      }
    }
    if (p.strides.empty()) return;
    if (p.strides.size() != p.dims.size()) {
      error(p.stridesLoc, "'" + p.name + "' has " + std::to_string(p.dims.size()) +
                              " dimensions but " + std::to_string(p.strides.size()) + " strides");
    }
    for (const ast::SizeRef& s : p.strides) {
      if (!s.isName()) continue;
      const Symbol* sym = symbols_.find(s.name);
      bool isIntScalar =
          sym && sym->kind == SymbolKind::Scalar && kir::isInt(kernel_.params[sym->index].dtype);
      if (!isIntScalar)
        error(s.loc, "stride '" + s.name + "' must name an i32 or i64 scalar parameter");
    }
  }

  void checkDefault(const ast::ParamDecl& p, const ast::Number& n) {
    if (p.dtype == kir::Dtype::F32) {
      if (n.isFloat && (n.floatValue > FLT_MAX || n.floatValue < -FLT_MAX))
        error(n.loc, "default of '" + p.name + "' does not fit in f32");
      return;
    }
    if (n.isFloat) {
      error(n.loc, "default of integer parameter '" + p.name + "' must be an integer");
    } else if (p.dtype == kir::Dtype::I32 && (n.intValue < INT32_MIN || n.intValue > INT32_MAX)) {
      error(n.loc, "default of '" + p.name + "' does not fit in i32");
    }
  }

  void checkTunable(const ast::TunableDecl& t) {
    std::set<int64_t> seen;
    for (int64_t v : t.values) {
      if (!seen.insert(v).second)
        error(t.loc, "value " + std::to_string(v) + " appears twice in the candidates of '" +
                         t.name + "'");
    }
    if (t.defaultValue && !seen.count(*t.defaultValue))
      error(t.defaultLoc, "default " + std::to_string(*t.defaultValue) + " of '" + t.name +
                              "' is not one of its candidates " + t.candidatesText());
    checkTunableName(t);
  }

  /// A schedule knob takes only its legal values; any other tunable must be a size or
  /// parameter the kernel uses, or it would silently do nothing (a misspelled knob).
  void checkTunableName(const ast::TunableDecl& t) {
    if (const KnobInfo* knob = findKnob(t.name)) {
      for (int64_t v : t.values)
        if (v < knob->min || v > knob->max)
          error(t.loc, "candidate " + std::to_string(v) + " of schedule knob '" + t.name +
                           "' is not legal: it takes " + legalValuesText(*knob));
      return;
    }
    unknownTunables_.push_back(&t);
  }

  /// Reported once the kernel is otherwise well formed, so a misspelling is not drowned in (or
  /// added to) the errors of a kernel that does not yet check.
  void checkTunablesUsed() {
    if (unknownTunables_.empty()) return;
    std::set<std::string> used = namesUsed(kernel_, file_);
    for (const ast::TunableDecl* t : unknownTunables_)
      if (!used.count(t->name)) reportUnusedTunable(*t);
  }

  void reportUnusedTunable(const ast::TunableDecl& t) {
    std::string hint;
    if (const KnobInfo* near = nearestKnob(t.name)) hint = "; did you mean the knob '" + std::string(near->name) + "'?";
    error(t.loc, "tunable '" + t.name + "' is neither a schedule knob nor used by kernel '" + kernel_.name +
                     "'" + hint + " (`mxfp6c knobs` lists the knobs)");
  }

  void checkVariant(const ast::VariantDecl& v) {
    if (auto named = findVariantValue(v.name))
      error(v.loc, "variant '" + v.name + "' is named like a " + variantKindName(named->kind) +
                       "; choose another name");
    std::set<std::string> seen;
    const ast::NameDecl* first = nullptr;  // the first known value: it sets the kind
    for (const ast::NameDecl& value : v.values) {
      auto named = findVariantValue(value.name);
      if (!named) {
        error(value.loc, "unknown value '" + value.name + "' of variant '" + v.name +
                             "'; values are the formats E2M3, E3M2 and the scale modes RCEIL, "
                             "EVEN, FLOOR");
      } else if (!first) {
        first = &value;
      } else if (VariantKind kind = findVariantValue(first->name)->kind; named->kind != kind) {
        error(value.loc, "variant '" + v.name + "' mixes kinds: '" + value.name + "' is a " +
                             variantKindName(named->kind) + " but '" + first->name + "' is a " +
                             variantKindName(kind));
      }
      if (!seen.insert(value.name).second)
        error(value.loc,
              "value '" + value.name + "' appears twice in the values of '" + v.name + "'");
    }
    if (v.defaultValue && !seen.count(v.defaultValue->name))
      error(v.defaultValue->loc, "default '" + v.defaultValue->name + "' of '" + v.name +
                                     "' is not one of its values " + v.valuesText());
  }

  /// The type of a constraint or dimension expression: integers are sizes and tunables,
  /// conditions compare them. nullopt after reporting an error.
  std::optional<ConstraintType> constraintType(const Expr& e, const ConstContext& ctx) {
    switch (e.kind) {
      case ExprKind::IntLit:
        return ConstraintType::Int;
      case ExprKind::FloatLit:
        error(e.loc, std::string(ctx.plural) +
                         " compute with integers; float literals are not allowed");
        return std::nullopt;
      case ExprKind::Name: {
        const Symbol* s = symbols_.find(e.name);
        if (s && (s->kind == SymbolKind::SpecializedDim || s->kind == SymbolKind::Tunable))
          return ConstraintType::Int;
        if (s)
          error(e.loc, "'" + e.name + "' is a " + symbolKindName(s->kind) + "; " + ctx.plural +
                           " use only specialized sizes and tunables");
        else if (isExpandedName(e.name))
          error(e.loc, "'" + e.name + "' is a value of a fn's expansion (an argument that calls " +
                           "or reads is passed as a value), not a size; " + ctx.plural +
                           " use only specialized sizes and tunables");
        else
          error(e.loc, "unknown name '" + e.name + "' in " + ctx.singular);
        return std::nullopt;
      }
      case ExprKind::Call:
      case ExprKind::Access:
      case ExprKind::Slice:
        error(e.loc, std::string(ctx.plural) + " cannot call functions or read tensors");
        return std::nullopt;
      case ExprKind::Unary: {
        auto t = constraintType(*e.operands[0], ctx);
        if (!t) return std::nullopt;
        auto want = e.unaryOp == ast::UnaryOp::Neg ? ConstraintType::Int : ConstraintType::Bool;
        if (*t != want) return mismatch(e.loc, ast::unaryOpText(e.unaryOp), want);
        return want;
      }
      case ExprKind::Binary: {
        auto l = constraintType(*e.operands[0], ctx);
        auto r = constraintType(*e.operands[1], ctx);
        if (!l || !r) return std::nullopt;
        auto want = ast::isLogical(e.binaryOp) ? ConstraintType::Bool : ConstraintType::Int;
        if (*l != want || *r != want) return mismatch(e.loc, ast::binaryOpText(e.binaryOp), want);
        return ast::isLogical(e.binaryOp) || ast::isComparison(e.binaryOp) ? ConstraintType::Bool
                                                                           : ConstraintType::Int;
      }
      case ExprKind::Ternary: {
        auto c = constraintType(*e.operands[0], ctx);
        auto a = constraintType(*e.operands[1], ctx);
        auto b = constraintType(*e.operands[2], ctx);
        if (!c || !a || !b) return std::nullopt;
        if (*c != ConstraintType::Bool) return mismatch(e.loc, "?", ConstraintType::Bool);
        if (*a != *b) {
          error(e.loc, "the arms of '?' must both be integers or both be conditions");
          return std::nullopt;
        }
        return a;
      }
    }
    return std::nullopt;
  }

  std::nullopt_t mismatch(const kir::SourceLoc& loc, const char* op, ConstraintType want) {
    error(loc, std::string("'") + op + "' needs " +
                   (want == ConstraintType::Int ? "integer" : "condition") + " operands");
    return std::nullopt;
  }

  void checkRowBlock() {
    const ast::RowBlock& row = kernel_.row;
    if (row.vars.size() != row.extents.size())
      error(row.loc, "'row' has " + std::to_string(row.vars.size()) + " variables but " +
                         std::to_string(row.extents.size()) + " extents");
    for (const ast::SizeRef& extent : row.extents) {
      if (extent.isExpr()) {
        if (constraintType(*extent.expr, kDimExpr) == ConstraintType::Bool)
          error(extent.loc, "a row extent expression must be an integer, such as '(C / W)'");
        continue;
      }
      if (!extent.isName()) {
        if (extent.value < 1) error(extent.loc, "a row extent must be at least 1");
        continue;
      }
      const Symbol* s = symbols_.find(extent.name);
      if (!s)
        error(extent.loc, "unknown dimension '" + extent.name + "'");
      else if (s->kind != SymbolKind::RuntimeDim && s->kind != SymbolKind::SpecializedDim &&
               s->kind != SymbolKind::Tunable)
        error(extent.loc, "rows range over runtime or specialized sizes, but '" + extent.name +
                              "' is a " + symbolKindName(s->kind));
    }
    scopes_.emplace_back();
    checkStmts(row.body);
    scopes_.pop_back();
  }

  /// What a name bound in the body is.
  enum class LocalKind { Value, Var, Index };

  const LocalKind* findLocal(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      auto it = scope->find(name);
      if (it != scope->end()) return &it->second;
    }
    return nullptr;
  }

  /// Checks that `name` may name something new (a value, a variable or a loop index) here:
  /// it is no declared name and is not in scope. The message for a declared name is "cannot
  /// <verb> 'name'<as>: it is a <kind>".
  bool checkNewName(const std::string& name, const kir::SourceLoc& loc, const char* verb,
                    const char* as = "") {
    if (const Symbol* s = symbols_.find(name)) {
      error(loc, std::string("cannot ") + verb + " '" + name + "'" + as + ": it is a " +
                     symbolKindName(s->kind));
      return false;
    }
    const LocalKind* local = findLocal(name);
    if (!local) return true;
    if (*local == LocalKind::Var)
      error(loc, "'" + name + "' is already declared as a variable");
    else if (*local == LocalKind::Index)
      error(loc, "'" + name + "' is already bound as a loop index");
    else
      error(loc, "'" + name + "' is already bound; values are immutable");
    return false;
  }

  void checkStmts(const std::vector<ast::Stmt>& stmts) {
    for (const ast::Stmt& stmt : stmts) {
      switch (stmt.kind) {
        case ast::Stmt::Kind::Store:
          checkTensorName(stmt.name, stmt.loc);
          for (const ast::ExprPtr& index : stmt.indices) checkExpr(*index);
          checkExpr(*stmt.value);
          break;
        case ast::Stmt::Kind::Bind: {
          checkExpr(*stmt.value);
          const LocalKind* local = symbols_.find(stmt.name) ? nullptr : findLocal(stmt.name);
          if (local && *local == LocalKind::Var) break;  // an assignment
          if (local && *local == LocalKind::Index)
            error(stmt.loc, "'" + stmt.name + "' is a loop index; values are immutable");
          else if (checkNewName(stmt.name, stmt.loc, "bind"))
            scopes_.back().emplace(stmt.name, LocalKind::Value);
          break;
        }
        case ast::Stmt::Kind::Var:
          checkExpr(*stmt.value);
          if (checkNewName(stmt.name, stmt.loc, "declare variable"))
            scopes_.back().emplace(stmt.name, LocalKind::Var);
          break;
        case ast::Stmt::Kind::For:
          checkFor(stmt);
          break;
        case ast::Stmt::Kind::Call:  // expanded away before the checks (fn_expand.h)
          break;
      }
    }
  }

  void checkFor(const ast::Stmt& loop) {
    checkExpr(*loop.value);
    checkExpr(*loop.end);
    if (loop.step) {
      checkExpr(*loop.step);
      if (auto step = intLiteral(*loop.step); step && *step <= 0)
        error(loop.step->loc, "the step of a loop must be positive, got " + std::to_string(*step));
    }
    bool fresh = checkNewName(loop.name, loop.nameLoc, "use", " as a loop index");
    scopes_.emplace_back();
    if (fresh) scopes_.back().emplace(loop.name, LocalKind::Index);
    checkStmts(loop.body);
    for (const auto& [name, kind] : scopes_.back()) expired_[name] = loop.loc;
    scopes_.pop_back();
  }

  void checkTensorName(const std::string& name, const kir::SourceLoc& loc) {
    const Symbol* s = symbols_.find(name);
    if (!s)
      error(loc, "unknown tensor '" + name + "'");
    else if (s->kind != SymbolKind::Tensor)
      error(loc, "'" + name + "' is a " + symbolKindName(s->kind) + ", not a tensor");
  }

  void checkExpr(const Expr& e) {
    std::optional<Builtin> builtin;
    if (e.kind == ExprKind::Name) {
      checkValueName(e);
    } else if (e.kind == ExprKind::Call && !(builtin = findBuiltin(e.name))) {
      error(e.loc, "unknown function '" + e.name + "'");
    } else if (e.kind == ExprKind::Access) {
      checkTensorName(e.name, e.loc);
    } else if (e.kind == ExprKind::Slice && !e.operands.empty()) {
      // start : n -- the start is a row value, the length a compile-time size.
      checkExpr(*e.operands[0]);
      if (constraintType(*e.operands[1], kDimExpr) == ConstraintType::Bool)
        error(e.operands[1]->loc, "a slice length must be an integer size, such as 'W' or '(W * 3 / 4)'");
      return;
    }
    for (size_t i = 0; i < e.operands.size(); ++i) {
      std::optional<VariantKind> valueArg = builtin ? builtinValueArg(*builtin, i) : std::nullopt;
      if (!valueArg) {
        checkExpr(*e.operands[i]);
        continue;
      }
      std::string message;
      if (!resolveValueArg(e, i, *valueArg, kernel_, symbols_, message))
        error(e.operands[i]->loc, message);
    }
  }

  /// A name used as a value: a declared name other than a tensor or a variant, or one in scope.
  void checkValueName(const Expr& e) {
    const Symbol* s = symbols_.find(e.name);
    if (s && s->kind == SymbolKind::Tensor) {
      error(e.loc, "tensor '" + e.name + "' must be indexed, as in " + e.name + "[...]");
    } else if (s && s->kind == SymbolKind::Variant) {
      VariantKind kind = variantKind(kernel_.variants[s->index]);
      error(e.loc, "variant '" + e.name + "' is not a value; pass it where a builtin takes a " +
                       variantKindName(kind));
    } else if (!s && !findLocal(e.name)) {
      auto expired = expired_.find(e.name);
      if (expired != expired_.end())
        error(e.loc, "'" + e.name + "' is local to the loop at line " +
                         std::to_string(expired->second.line) +
                         "; declare it with 'var' before the loop to use it after");
      else if (auto named = findVariantValue(e.name))
        error(e.loc, "'" + e.name + "' is a " + variantKindName(named->kind) +
                         " name, not a value; pass it where a builtin takes a " +
                         variantKindName(named->kind));
      else
        error(e.loc, "unknown name '" + e.name + "'");
    }
  }

  KernelInfo describe() const {
    KernelInfo info;
    info.name = kernel_.name;
    info.loc = kernel_.loc;
    for (const ast::ParamDecl& p : kernel_.params)
      info.params.push_back(describeParam(kernel_, p, symbols_, nullptr));
    for (const ast::SpecDecl& s : kernel_.specs)
      info.specializations.push_back({s.name, s.defaultValue});
    for (const ast::TunableDecl& t : kernel_.tunables)
      info.tunables.push_back({t.name, t.values, t.effectiveDefault()});
    for (const ast::VariantDecl& v : kernel_.variants) {
      VariantInfo variant{v.name, variantKind(v), {}, v.effectiveDefault()};
      for (const ast::NameDecl& value : v.values) variant.values.push_back(value.name);
      info.variants.push_back(std::move(variant));
    }
    for (const ast::RequireDecl& r : kernel_.constraints)
      info.constraints.push_back({r.text, r.message, r.loc});
    return info;
  }

  const ast::KernelDecl& kernel_;
  const ast::File& file_;
  DiagnosticEngine& diags_;
  size_t errorsBefore_;  // the file's errors before this kernel's checks
  KernelSymbols symbols_;
  std::vector<const ast::TunableDecl*> unknownTunables_;  // tunables that are no knob
  std::vector<std::map<std::string, LocalKind>> scopes_;  // the row body, then each loop body
  std::map<std::string, kir::SourceLoc> expired_;  // names local to a finished loop: its 'for'
};

}  // namespace

std::vector<KernelInfo> checkModule(const ast::File& file, DiagnosticEngine& diags) {
  std::vector<KernelInfo> kernels;
  std::set<std::string> names;
  for (const ast::KernelDecl& k : file.kernels) {
    if (!names.insert(k.name).second)
      diags.error(k.loc, "kernel '" + k.name + "' is already defined");
    kernels.push_back(KernelChecker(k, file, diags).run());
  }
  return kernels;
}

}  // namespace mxfp6::frontend
