// instantiate(): binds a configuration, checks the constraints, then type-checks the row body
// at the bound sizes and lowers it to KIR, one op per construct, in source order.
//
// Typing rules (kernels_dsl/README.md, "Typing"):
//  - Types are an element type and a length: a per-row scalar, or a row vector whose length is
//    a compile-time size. Storage types bf16, f16 and u8 take no part in arithmetic
//    (+ - * / % min max neg abs sqrt rsqrt exp, comparisons, reductions): they are converted
//    first ("arithmetic on bf16 needs f32(...) first").
//  - Binary operands: equal float types; i32 mixed with i64 promotes to i64; float mixed with
//    int is an error, unless one side is a numeric literal (possibly negated), which adopts the
//    other side's type (a float literal against an int is an error). Alone, a float literal is
//    f32 and an integer literal is i64. Comparisons give bool; '!', '&&', '||' take bool.
//  - A scalar broadcasts over a vector; two vectors need equal lengths.
//  - Row indices and runtime sizes are i64; specialized sizes and tunables are i64 constants.
//  - x[i, j]: one index per dimension, each an integer scalar (converted to i64); ':' (at most
//    one) takes a whole dimension of compile-time size and stride 1 and yields a vector of that
//    length. Output tensors are written, never read; inputs are read, never written.
//  - A store needs the tensor's exact element type, a vector of the ':' length into a slice and
//    a scalar into an element.
//  - f32/bf16/f16/i32/i64(e) convert (same type: no op); sqrt/rsqrt/exp/abs take floats;
//    sum/max_of/min_of/mean reduce a vector to a scalar; mean(v) = sum(v) / length.
//  - Strides are element counts in i64: row-major by default (a product of the inner sizes),
//    else as given by `strides(...)`.
//  - Row-vector building blocks take row vectors (never scalars): repeat(v, k) any float or
//    integer vector, k*L long; group_sum/max/min(v, G) f32, i32 or i64 vectors, L/G long, G
//    dividing L; k and G are positive integer literals, specialized sizes or tunables.
//    rotate_pairs(v, c, s): f32 vectors of lengths 2P, P, P. mx_scale(v, FMT, MODE) and
//    mx_encode(v, scales, FMT): v bf16 of a length L that is a multiple of 32, scales u8 of
//    length L/32; they give u8 of lengths L/32 and L. pack6(codes): u8 of a length that is a
//    multiple of 4, giving 3L/4. FMT and MODE are variants or value names (symbols.h).
//  - zeros(N) is an f32 vector of N zeros and splat(x, N) N copies of the scalar x (both Splat),
//    N a positive integer literal, specialized size or tunable.
//  - `var v = e` declares a variable of e's type (VarInit). Each read of v is a VarRead at that
//    point, since the value changes. `v = e` assigns it (VarWrite): e of exactly v's type, but
//    a scalar of v's element type broadcasts into a vector variable (Splat) and a literal takes
//    v's type.
//  - `for i in a .. b step c { ... }`: a, b, c integer scalars converted to i64 (c defaults to
//    1; a compile-time step must be positive), evaluated before ForBegin, whose result is i.
//    Names bound in the body are local to it. Leaves and strides are emitted once and reused,
//    but one first emitted inside a body is forgotten at its ForEnd (KIR uses a value defined
//    in a body only inside it) and emitted again if needed after it.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "compiler/frontend/builtins.h"
#include "compiler/frontend/config.h"
#include "compiler/frontend/knobs.h"
#include "compiler/frontend/module_impl.h"
#include "compiler/frontend/symbols.h"

namespace mxfp6::frontend {
namespace {

using ast::Expr;
using ast::ExprKind;
using kir::Dtype;
using kir::OpCode;
using kir::SourceLoc;
using kir::ValueType;

struct Value {
  int id;
  ValueType type;
};

/// A numeric literal, possibly negated, whose type the context decides.
struct Literal {
  bool isFloat = false;
  int64_t intValue = 0;
  double floatValue = 0;
};

std::optional<Literal> literalOf(const Expr& e) {
  if (e.kind == ExprKind::IntLit)
    return Literal{false, e.intValue, static_cast<double>(e.intValue)};
  if (e.kind == ExprKind::FloatLit) return Literal{true, 0, e.floatValue};
  if (e.kind == ExprKind::Unary && e.unaryOp == ast::UnaryOp::Neg) {
    auto lit = literalOf(*e.operands[0]);
    if (lit) {
      lit->intValue = -lit->intValue;
      lit->floatValue = -lit->floatValue;
    }
    return lit;
  }
  return std::nullopt;
}

double maxFinite(Dtype t) {
  switch (t) {
    case Dtype::BF16:
      return 3.3895313892515355e38;
    case Dtype::F16:
      return 65504.0;
    default:
      return FLT_MAX;
  }
}

/// What a pair of operands must be before they are unified.
enum class OperandRule {
  Arithmetic,  // f32, i32 or i64
  Logical,     // bool
  Any,         // any type (the arms of '?:')
};

/// What a name bound in the row body stands for: a value (`x = ...`), a variable (`var`; the
/// value is its VarInit) or a loop index (the value is its ForBegin).
enum class LocalKind { Value, Var, Index };

struct Local {
  LocalKind kind = LocalKind::Value;
  Value value{-1, {}};
};

/// A lowered tensor access: index value ids (-1 for ':'), stride value ids, per-dim slice
/// lengths (0: a scalar index) and their product (0 without slices).
struct Access {
  std::vector<int> indices;
  std::vector<int> strides;
  std::vector<int64_t> slices;
  int64_t sliceLength = 0;
};

class Lowerer {
 public:
  Lowerer(const ast::KernelDecl& decl, const Bindings& bindings, DiagnosticEngine& diags)
      : decl_(decl),
        bindings_(bindings),
        diags_(diags),
        symbols_(collectSymbols(decl, nullptr)) {}

  std::optional<kir::Kernel> run() {
    kernel_.name = decl_.name;
    kernel_.loc = decl_.loc;
    for (const ast::ParamDecl& p : decl_.params)
      kernel_.params.push_back(describeParam(decl_, p, symbols_, &bindings_));
    kernel_.runtimeDims = symbols_.runtimeDims;
    kernel_.runtimeDimUsedByBody.assign(kernel_.runtimeDims.size(), false);
    dimArgs_.assign(kernel_.runtimeDims.size(), -1);
    kernel_.config = bindings_;
    for (const ast::TunableDecl& t : decl_.tunables) {
      kernel_.tunables.push_back(t.name);
      kernel_.configLocs[t.name] = t.loc;
    }
    for (const ast::SpecDecl& s : decl_.specs) kernel_.configLocs[s.name] = s.loc;
    for (const ast::VariantDecl& v : decl_.variants) kernel_.configLocs[v.name] = v.loc;
    kernel_.rowsPerProgram = knobValue(kernel_, Knob::Rows);
    kernel_.threadsPerRow = knobValue(kernel_, Knob::Threads);
    kernel_.vectorWidth = knobValue(kernel_, Knob::Vec);
    const ast::RowBlock& row = decl_.row;
    for (size_t i = 0; i < row.vars.size() && i < row.extents.size(); ++i) {
      const ast::SizeRef& extent = row.extents[i];
      kernel_.rowVars.push_back(row.vars[i].name);
      const Symbol* s = extent.isName() ? symbols_.find(extent.name) : nullptr;
      if (s && s->kind == SymbolKind::RuntimeDim) {
        kernel_.rowDims.push_back(s->index);
        kernel_.rowConstExtents.push_back(0);
        kernel_.runtimeDimUsedByBody[s->index] = true;
        continue;
      }
      auto value = dimensionValue(extent, decl_, bindings_);
      if (!value || *value < 1)
        return error(extent.loc, "row extent '" + extent.text() + "' is " +
                                     (value ? std::to_string(*value) : "not a compile-time size") +
                                     "; rows range over runtime sizes or positive constants");
      kernel_.rowDims.push_back(-1);
      kernel_.rowConstExtents.push_back(*value);
    }
    scopes_.emplace_back();
    if (!lowerStmts(row.body)) return std::nullopt;
    return std::move(kernel_);
  }

 private:
  std::nullopt_t error(const SourceLoc& loc, std::string message) {
    diags_.error(loc, std::move(message));
    return std::nullopt;
  }

  Value emit(kir::Op op) {
    kernel_.ops.push_back(std::move(op));
    return {static_cast<int>(kernel_.ops.size()) - 1, kernel_.ops.back().type};
  }

  Value emitOp(OpCode code, ValueType type, std::vector<int> operands, const SourceLoc& loc) {
    kir::Op op;
    op.code = code;
    op.type = type;
    op.operands = std::move(operands);
    op.loc = loc;
    return emit(std::move(op));
  }

  Value emitConstInt(int64_t v, Dtype t, const SourceLoc& loc, std::string name = "") {
    kir::Op op;
    op.code = OpCode::ConstInt;
    op.type = {t, 0};
    op.ival = v;
    op.name = std::move(name);
    op.loc = loc;
    return emit(std::move(op));
  }

  Value emitFloat(double v, const SourceLoc& loc, Dtype t = Dtype::F32) {
    kir::Op op;
    op.code = OpCode::ConstFloat;
    op.type = {t, 0};
    op.fval = v;
    op.loc = loc;
    return emit(std::move(op));
  }

  Value castTo(const Value& v, Dtype t, const SourceLoc& loc) {
    if (v.type.elem == t) return v;
    return emitOp(OpCode::Cast, {t, v.type.length}, {v.id}, loc);
  }

  // ---- names ----

  SourceLoc dimLoc(const std::string& name) const {
    for (const ast::ParamDecl& p : decl_.params)
      for (const ast::SizeRef& d : p.dims)
        if (d.name == name) return d.loc;
    return decl_.loc;
  }

  Value dimArg(int runtimeDim) {
    if (dimArgs_[runtimeDim] < 0) {
      kir::Op op;
      op.code = OpCode::DimArg;
      op.type = {Dtype::I64, 0};
      op.ival = runtimeDim;
      op.name = kernel_.runtimeDims[runtimeDim];
      op.loc = dimLoc(op.name);
      dimArgs_[runtimeDim] = emit(std::move(op)).id;
      kernel_.runtimeDimUsedByBody[runtimeDim] = true;
    }
    return {dimArgs_[runtimeDim], {Dtype::I64, 0}};
  }

  /// A name bound in the row body, innermost scope first; nullptr when none.
  const Local* findLocal(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      auto it = scope->find(name);
      if (it != scope->end()) return &it->second;
    }
    return nullptr;
  }

  /// The value of a name: a bound value, a read of a variable, or the leaf op of a declared
  /// name, emitted once (per loop body, see forgetDefinedFrom()).
  std::optional<Value> nameValue(const std::string& name, const SourceLoc& useLoc) {
    if (const Local* local = findLocal(name)) {
      if (local->kind != LocalKind::Var) return local->value;
      kir::Op op;
      op.code = OpCode::VarRead;
      op.type = local->value.type;
      op.ival = local->value.id;
      op.name = name;
      op.loc = useLoc;
      return emit(std::move(op));
    }
    auto known = leaves_.find(name);
    if (known != leaves_.end()) return known->second;
    const Symbol* s = symbols_.find(name);
    if (!s) return error(useLoc, "unknown name '" + name + "'");
    kir::Op op;
    op.name = name;
    op.type = {Dtype::I64, 0};
    switch (s->kind) {
      case SymbolKind::Tensor:
        return error(useLoc, "tensor '" + name + "' must be indexed, as in " + name + "[...]");
      case SymbolKind::RuntimeDim:
        return leaves_[name] = dimArg(s->index);
      case SymbolKind::RowVar:
        op.code = OpCode::RowIndex;
        op.ival = s->index;
        op.loc = decl_.row.vars[s->index].loc;
        break;
      case SymbolKind::Scalar:
        op.code = OpCode::ScalarArg;
        op.param = s->index;
        op.type.elem = decl_.params[s->index].dtype;
        op.loc = decl_.params[s->index].loc;
        break;
      case SymbolKind::SpecializedDim:
        op.code = OpCode::ConstInt;
        op.ival = bindings_.at(name);
        op.loc = decl_.specs[s->index].loc;
        break;
      case SymbolKind::Tunable:
        op.code = OpCode::ConstInt;
        op.ival = bindings_.at(name);
        op.loc = decl_.tunables[s->index].loc;
        break;
      case SymbolKind::Variant:
        return error(useLoc, "variant '" + name + "' is not a value");
    }
    return leaves_[name] = emit(std::move(op));
  }

  // ---- literals and operands ----

  std::optional<Value> emitLiteral(const Literal& lit, Dtype t, const SourceLoc& loc) {
    if (kir::isFloat(t)) {
      double v = lit.isFloat ? lit.floatValue : static_cast<double>(lit.intValue);
      if (std::fabs(v) > maxFinite(t))
        return error(loc, std::string("literal does not fit in ") + kir::dtypeName(t));
      return emitFloat(v, loc, t);
    }
    if (t == Dtype::Bool) return error(loc, "a number cannot be used as a condition");
    if (lit.isFloat)
      return error(loc, std::string("float literal cannot be used as ") + kir::dtypeName(t));
    int64_t lo = t == Dtype::I32 ? INT32_MIN : t == Dtype::U8 ? 0 : INT64_MIN;
    int64_t hi = t == Dtype::I32 ? INT32_MAX : t == Dtype::U8 ? 255 : INT64_MAX;
    if (lit.intValue < lo || lit.intValue > hi)
      return error(loc, std::to_string(lit.intValue) + " does not fit in " + kir::dtypeName(t));
    return emitConstInt(lit.intValue, t, loc);
  }

  bool checkOperand(const Value& v, OperandRule rule, const std::string& what,
                    const SourceLoc& loc) {
    Dtype t = v.type.elem;
    if (rule == OperandRule::Logical) {
      if (t == Dtype::Bool) return true;
      error(loc, what + " needs conditions (bool), got " + kir::typeName(v.type));
      return false;
    }
    if (rule == OperandRule::Any) return true;
    if (t == Dtype::BF16 || t == Dtype::F16) {
      error(loc, std::string("arithmetic on ") + kir::dtypeName(t) + " needs f32(...) first");
      return false;
    }
    if (t == Dtype::U8) {
      error(loc, "arithmetic on u8 needs i32(...) first");
      return false;
    }
    if (t == Dtype::Bool) {
      error(loc, what + " needs numbers, got bool");
      return false;
    }
    return true;
  }

  /// Lowers two operands and unifies them (see the typing rules at the top).
  std::optional<std::pair<Value, Value>> lowerPair(const Expr& a, const Expr& b, OperandRule rule,
                                                   const std::string& what, const SourceLoc& loc) {
    auto litA = literalOf(a);
    auto litB = literalOf(b);
    std::optional<Value> va, vb;
    if (litA && litB) {
      Dtype t = litA->isFloat || litB->isFloat ? Dtype::F32 : Dtype::I64;
      va = emitLiteral(*litA, t, a.loc);
      vb = va ? emitLiteral(*litB, t, b.loc) : std::nullopt;
    } else {
      // The non-literal side is lowered first: a literal takes its type.
      auto lowerChecked = [&](const Expr& e) -> std::optional<Value> {
        auto v = lowerExpr(e);
        if (!v || !checkOperand(*v, rule, what, loc)) return std::nullopt;
        return v;
      };
      if (!litA && !(va = lowerChecked(a))) return std::nullopt;
      if (!litB && !(vb = lowerChecked(b))) return std::nullopt;
      if (litA) va = emitLiteral(*litA, vb->type.elem, a.loc);
      if (litB) vb = emitLiteral(*litB, va->type.elem, b.loc);
    }
    if (!va || !vb) return std::nullopt;
    Dtype ta = va->type.elem, tb = vb->type.elem;
    if (ta != tb) {
      auto isWideningInt = [](Dtype t) { return t == Dtype::I32 || t == Dtype::I64; };
      if (!isWideningInt(ta) || !isWideningInt(tb))
        return error(loc, std::string("cannot mix ") + kir::dtypeName(ta) + " and " +
                              kir::dtypeName(tb) + " in " + what + "; convert one side first");
      va = castTo(*va, Dtype::I64, loc);
      vb = castTo(*vb, Dtype::I64, loc);
    }
    if (!checkLengths(va->type, vb->type, loc)) return std::nullopt;
    return std::make_pair(*va, *vb);
  }

  bool checkLengths(const ValueType& a, const ValueType& b, const SourceLoc& loc) {
    if (!a.isVector() || !b.isVector() || a.length == b.length) return true;
    error(loc, "length mismatch: " + std::to_string(a.length) + " vs " + std::to_string(b.length));
    return false;
  }

  // ---- expressions ----

  std::optional<Value> lowerExpr(const Expr& e) {
    if (auto lit = literalOf(e))
      return emitLiteral(*lit, lit->isFloat ? Dtype::F32 : Dtype::I64, e.loc);
    switch (e.kind) {
      case ExprKind::Name:
        return nameValue(e.name, e.loc);
      case ExprKind::Access:
        return lowerLoad(e);
      case ExprKind::Call:
        return lowerCall(e);
      case ExprKind::Unary:
        return lowerUnary(e);
      case ExprKind::Binary:
        return lowerBinary(e);
      case ExprKind::Ternary:
        return lowerSelect(e);
      default:
        return error(e.loc, "':' can only be an index");
    }
  }

  std::optional<Value> lowerUnary(const Expr& e) {
    auto v = lowerExpr(*e.operands[0]);
    bool isNeg = e.unaryOp == ast::UnaryOp::Neg;
    std::string what = std::string("'") + ast::unaryOpText(e.unaryOp) + "'";
    if (!v ||
        !checkOperand(*v, isNeg ? OperandRule::Arithmetic : OperandRule::Logical, what, e.loc))
      return std::nullopt;
    return emitOp(isNeg ? OpCode::Neg : OpCode::Not, v->type, {v->id}, e.loc);
  }

  std::optional<Value> lowerBinary(const Expr& e) {
    using ast::BinaryOp;
    static constexpr std::pair<BinaryOp, OpCode> kCodes[] = {
        {BinaryOp::Add, OpCode::Add},  {BinaryOp::Sub, OpCode::Sub},  {BinaryOp::Mul, OpCode::Mul},
        {BinaryOp::Div, OpCode::Div},  {BinaryOp::Rem, OpCode::Rem},  {BinaryOp::Eq, OpCode::CmpEq},
        {BinaryOp::Ne, OpCode::CmpNe}, {BinaryOp::Lt, OpCode::CmpLt}, {BinaryOp::Le, OpCode::CmpLe},
        {BinaryOp::Gt, OpCode::CmpGt}, {BinaryOp::Ge, OpCode::CmpGe}, {BinaryOp::And, OpCode::And},
        {BinaryOp::Or, OpCode::Or},
    };
    OpCode code = OpCode::Add;
    for (const auto& [op, c] : kCodes)
      if (op == e.binaryOp) code = c;
    bool logical = ast::isLogical(e.binaryOp);
    std::string what = std::string("'") + ast::binaryOpText(e.binaryOp) + "'";
    auto operands =
        lowerPair(*e.operands[0], *e.operands[1],
                  logical ? OperandRule::Logical : OperandRule::Arithmetic, what, e.loc);
    if (!operands) return std::nullopt;
    auto [a, b] = *operands;
    ValueType type{a.type.elem, std::max(a.type.length, b.type.length)};
    if (ast::isComparison(e.binaryOp)) type.elem = Dtype::Bool;
    return emitOp(code, type, {a.id, b.id}, e.loc);
  }

  std::optional<Value> lowerSelect(const Expr& e) {
    auto cond = lowerExpr(*e.operands[0]);
    if (!cond) return std::nullopt;
    if (cond->type.elem != Dtype::Bool)
      return error(e.loc, "the condition of '?' must be bool, got " + kir::typeName(cond->type));
    auto arms = lowerPair(*e.operands[1], *e.operands[2], OperandRule::Any, "'?:'", e.loc);
    if (!arms) return std::nullopt;
    auto [a, b] = *arms;
    ValueType type{a.type.elem, std::max(a.type.length, b.type.length)};
    if (!checkLengths(cond->type, type, e.loc)) return std::nullopt;
    type.length = std::max(type.length, cond->type.length);
    return emitOp(OpCode::Select, type, {cond->id, a.id, b.id}, e.loc);
  }

  std::optional<Value> lowerCall(const Expr& e) {
    auto builtin = findBuiltin(e.name);
    if (!builtin) return error(e.loc, "unknown function '" + e.name + "'");
    size_t arity = builtinArity(*builtin);
    if (e.operands.size() != arity)
      return error(e.loc, e.name + " takes " + std::to_string(arity) +
                              (arity == 1 ? " argument" : " arguments") + ", got " +
                              std::to_string(e.operands.size()));
    switch (*builtin) {
      case Builtin::CastF32:
        return lowerCast(e, Dtype::F32);
      case Builtin::CastBF16:
        return lowerCast(e, Dtype::BF16);
      case Builtin::CastF16:
        return lowerCast(e, Dtype::F16);
      case Builtin::CastI32:
        return lowerCast(e, Dtype::I32);
      case Builtin::CastI64:
        return lowerCast(e, Dtype::I64);
      case Builtin::Sqrt:
        return lowerFloatMath(e, OpCode::Sqrt);
      case Builtin::Rsqrt:
        return lowerFloatMath(e, OpCode::Rsqrt);
      case Builtin::Exp:
        return lowerFloatMath(e, OpCode::Exp);
      case Builtin::Tanh:
        return lowerFloatMath(e, OpCode::Tanh);
      case Builtin::Sigmoid:
        return lowerFloatMath(e, OpCode::Sigmoid);
      case Builtin::Erf:
        return lowerFloatMath(e, OpCode::Erf);
      case Builtin::GeluTanh:
        return lowerFloatMath(e, OpCode::GeluTanh);
      case Builtin::Silu:
        return lowerFloatMath(e, OpCode::Silu);
      case Builtin::Abs:
        return lowerFloatMath(e, OpCode::Abs);
      case Builtin::Min:
      case Builtin::Max: {
        auto operands =
            lowerPair(*e.operands[0], *e.operands[1], OperandRule::Arithmetic, e.name, e.loc);
        if (!operands) return std::nullopt;
        auto [a, b] = *operands;
        return emitOp(*builtin == Builtin::Min ? OpCode::Min : OpCode::Max,
                      {a.type.elem, std::max(a.type.length, b.type.length)}, {a.id, b.id}, e.loc);
      }
      case Builtin::Sum:
        return lowerReduction(e, OpCode::ReduceSum);
      case Builtin::MaxOf:
        return lowerReduction(e, OpCode::ReduceMax);
      case Builtin::MinOf:
        return lowerReduction(e, OpCode::ReduceMin);
      case Builtin::Mean:
        return lowerReduction(e, OpCode::ReduceSum, /*isMean=*/true);
      case Builtin::Repeat:
        return lowerRepeat(e);
      case Builtin::GroupSum:
        return lowerGroupReduction(e, OpCode::GroupReduceSum);
      case Builtin::GroupMax:
        return lowerGroupReduction(e, OpCode::GroupReduceMax);
      case Builtin::GroupMin:
        return lowerGroupReduction(e, OpCode::GroupReduceMin);
      case Builtin::RotatePairs:
        return lowerRotatePairs(e);
      case Builtin::MxScale:
        return lowerMxScale(e);
      case Builtin::MxEncode:
        return lowerMxEncode(e);
      case Builtin::Pack6:
        return lowerPack6(e);
      case Builtin::Transpose:
        return lowerTranspose(e);
      case Builtin::Iota: {
        auto n = countArg(e, 0);
        if (!n) return std::nullopt;
        return emitOp(OpCode::Iota, {Dtype::I64, *n}, {}, e.loc);
      }
      case Builtin::Zeros: {
        auto n = countArg(e, 0);
        if (!n) return std::nullopt;
        Value zero = emitFloat(0.0, e.loc);
        return emitOp(OpCode::Splat, {Dtype::F32, *n}, {zero.id}, e.loc);
      }
      case Builtin::Splat: {
        auto v = lowerExpr(*e.operands[0]);
        if (!v) return std::nullopt;
        if (v->type.isVector())
          return error(e.operands[0]->loc, "splat takes a scalar as its first argument, got " +
                                               kir::typeName(v->type));
        auto n = countArg(e, 1);
        if (!n) return std::nullopt;
        return emitOp(OpCode::Splat, {v->type.elem, *n}, {v->id}, e.loc);
      }
    }
    return std::nullopt;
  }

  std::optional<Value> lowerCast(const Expr& e, Dtype to) {
    auto v = lowerExpr(*e.operands[0]);
    if (!v) return std::nullopt;
    if (v->type.elem == Dtype::Bool)
      return error(e.loc, std::string("cannot convert bool to ") + kir::dtypeName(to));
    return castTo(*v, to, e.loc);
  }

  /// sqrt, rsqrt, exp, abs: floats only; an integer literal argument is taken as f32.
  std::optional<Value> lowerFloatMath(const Expr& e, OpCode code) {
    const Expr& arg = *e.operands[0];
    auto lit = literalOf(arg);
    auto v = lit ? emitLiteral(*lit, Dtype::F32, arg.loc) : lowerExpr(arg);
    if (!v || !checkOperand(*v, OperandRule::Arithmetic, e.name, e.loc)) return std::nullopt;
    if (!kir::isFloat(v->type.elem))
      return error(e.loc, e.name + " needs a float operand, got " + kir::typeName(v->type) +
                              "; convert with f32(...)");
    return emitOp(code, v->type, {v->id}, e.loc);
  }

  /// sum, max_of, min_of, and mean(v) = ReduceSum(v) / length in v's float type.
  std::optional<Value> lowerReduction(const Expr& e, OpCode code, bool isMean = false) {
    auto v = lowerExpr(*e.operands[0]);
    if (!v) return std::nullopt;
    if (!v->type.isVector())
      return error(e.loc, e.name + " reduces a row vector, but its argument is a scalar " +
                              kir::typeName(v->type));
    if (!checkOperand(*v, OperandRule::Arithmetic, e.name, e.loc)) return std::nullopt;
    if (isMean && !kir::isFloat(v->type.elem))
      return error(e.loc, "mean needs a float vector, got " + kir::typeName(v->type));
    ValueType scalar{v->type.elem, 0};
    Value reduced = emitOp(code, scalar, {v->id}, e.loc);
    if (!isMean) return reduced;
    Value n = emitFloat(static_cast<double>(v->type.length), e.loc, scalar.elem);
    return emitOp(OpCode::Div, scalar, {reduced.id, n.id}, e.loc);
  }

  // ---- row-vector building blocks ----

  /// Argument `index` of `call`, which must be a row vector.
  std::optional<Value> vectorArg(const Expr& call, size_t index) {
    const Expr& arg = *call.operands[index];
    auto v = lowerExpr(arg);
    if (!v) return std::nullopt;
    if (!v->type.isVector())
      return error(arg.loc, call.name + " takes a row vector as its " + argumentOrdinal(index) +
                                " argument, got a scalar " + kir::typeName(v->type));
    return v;
  }

  /// Argument `index` of `call`, a row vector of element type `elem` (bf16 or u8) whose
  /// length is a multiple of `multiple`.
  std::optional<Value> storageVectorArg(const Expr& call, size_t index, Dtype elem,
                                        int64_t multiple) {
    auto v = vectorArg(call, index);
    if (!v) return std::nullopt;
    const SourceLoc& loc = call.operands[index]->loc;
    if (v->type.elem != elem) {
      std::string convert = elem == Dtype::BF16 ? "; convert with bf16(...)" : "";
      return error(loc, call.name + " takes a " + kir::dtypeName(elem) + " vector as its " +
                            argumentOrdinal(index) + " argument, got " + kir::typeName(v->type) +
                            convert);
    }
    if (v->type.length % multiple != 0)
      return error(loc, call.name + " takes a vector whose length is a multiple of " +
                            std::to_string(multiple) + ", got " + kir::typeName(v->type));
    return v;
  }

  /// The count of repeat or the group size of a group reduction: a positive integer literal,
  /// specialized size or tunable, known at this configuration.
  std::optional<int64_t> countArg(const Expr& call, size_t index) {
    const Expr& arg = *call.operands[index];
    std::string what = std::string("the ") + argumentOrdinal(index) + " argument of " + call.name;
    std::optional<int64_t> value;
    if (auto lit = literalOf(arg); lit && !lit->isFloat) {
      value = lit->intValue;
    } else if (arg.kind == ExprKind::Name) {
      const Symbol* s = symbols_.find(arg.name);
      if (s && (s->kind == SymbolKind::SpecializedDim || s->kind == SymbolKind::Tunable))
        value = bindings_.at(arg.name);
    } else if (usesOnlySizes(arg)) {
      std::string why;
      value = constantExprValue(arg, bindings_, why);
      if (!value) return error(arg.loc, what + ": " + why);
    }
    if (!value)
      return error(arg.loc, what +
                                " must be a positive integer constant: a literal, a "
                                "specialized size, a tunable or an expression over them");
    if (*value < 1)
      return error(arg.loc, what + " must be at least 1, got " + std::to_string(*value));
    return value;
  }

  /// Whether `e` is integer arithmetic over literals, specialized sizes and tunables only.
  bool usesOnlySizes(const Expr& e) const {
    switch (e.kind) {
      case ExprKind::IntLit: return true;
      case ExprKind::Name: {
        const Symbol* s = symbols_.find(e.name);
        return s && (s->kind == SymbolKind::SpecializedDim || s->kind == SymbolKind::Tunable);
      }
      case ExprKind::Unary: case ExprKind::Binary: case ExprKind::Ternary:
        return std::all_of(e.operands.begin(), e.operands.end(),
                           [&](const ast::ExprPtr& o) { return usesOnlySizes(*o); });
      default: return false;
    }
  }

  /// transpose(v, R): v as an [R, L/R] row-major tile, turned into its [L/R, R] transpose.
  std::optional<Value> lowerTranspose(const Expr& e) {
    auto v = vectorArg(e, 0);
    if (!v) return std::nullopt;
    if (v->type.elem == Dtype::Bool)
      return error(e.operands[0]->loc, "transpose takes a float or integer vector, got " +
                                           kir::typeName(v->type));
    auto rows = countArg(e, 1);
    if (!rows) return std::nullopt;
    if (v->type.length % *rows != 0)
      return error(e.operands[1]->loc, std::to_string(*rows) + " rows do not divide the length of " +
                                           kir::typeName(v->type));
    Value r = emitOp(OpCode::Transpose, v->type, {v->id}, e.loc);
    kernel_.ops[r.id].ival = *rows;
    return r;
  }

  /// repeat(v, k): element j of the result is v[j / k].
  std::optional<Value> lowerRepeat(const Expr& e) {
    auto v = vectorArg(e, 0);
    if (!v) return std::nullopt;
    if (v->type.elem == Dtype::Bool)
      return error(e.operands[0]->loc,
                   "repeat takes a float or integer vector, got " + kir::typeName(v->type));
    auto k = countArg(e, 1);
    if (!k) return std::nullopt;
    int64_t length = 0;
    if (__builtin_mul_overflow(v->type.length, *k, &length))
      return error(e.loc, "repeat gives a vector of more than 2^63 elements");
    Value r = emitOp(OpCode::Repeat, {v->type.elem, length}, {v->id}, e.loc);
    kernel_.ops[r.id].ival = *k;
    return r;
  }

  /// group_sum/max/min(v, G): one result per run of G elements.
  std::optional<Value> lowerGroupReduction(const Expr& e, OpCode code) {
    auto v = vectorArg(e, 0);
    if (!v || !checkOperand(*v, OperandRule::Arithmetic, e.name, e.operands[0]->loc))
      return std::nullopt;
    auto g = countArg(e, 1);
    if (!g) return std::nullopt;
    if (v->type.length % *g != 0)
      return error(e.operands[1]->loc, "group size " + std::to_string(*g) +
                                           " does not divide the length of " +
                                           kir::typeName(v->type));
    Value r = emitOp(code, {v->type.elem, v->type.length / *g}, {v->id}, e.loc);
    kernel_.ops[r.id].ival = *g;
    return r;
  }

  /// rotate_pairs(v, c, s): v of length 2P rotated pair by pair by c and s of length P.
  std::optional<Value> lowerRotatePairs(const Expr& e) {
    std::vector<Value> args;
    for (size_t i = 0; i < 3; ++i) {
      auto v = vectorArg(e, i);
      const SourceLoc& loc = e.operands[i]->loc;
      if (!v || !checkOperand(*v, OperandRule::Arithmetic, e.name, loc)) return std::nullopt;
      if (!kir::isFloat(v->type.elem))
        return error(loc, "rotate_pairs takes float vectors, got " + kir::typeName(v->type) +
                              " as its " + argumentOrdinal(i) + " argument");
      args.push_back(*v);
    }
    // Every float type but f32 is a storage type, so the three agree once checked.
    const Value &v = args[0], &c = args[1], &s = args[2];
    if (v.type.length % 2 != 0 || c.type.length * 2 != v.type.length ||
        s.type.length * 2 != v.type.length)
      return error(e.loc, "rotate_pairs takes v of length 2P and c, s of length P, got " +
                              kir::typeName(v.type) + ", " + kir::typeName(c.type) + ", " +
                              kir::typeName(s.type));
    return emitOp(OpCode::RotatePairs, v.type, {v.id, c.id, s.id}, e.loc);
  }

  /// A format or scale-mode argument: the value of a variant at this configuration, or a name.
  std::optional<int64_t> valueArg(const Expr& call, size_t index, VariantKind want) {
    std::string message;
    auto arg = resolveValueArg(call, index, want, decl_, symbols_, message);
    if (!arg) return error(call.operands[index]->loc, message);
    if (arg->variant < 0) return arg->value;
    return bindings_.at(decl_.variants[arg->variant].name);
  }

  std::optional<Value> lowerMxScale(const Expr& e) {
    auto v = storageVectorArg(e, 0, Dtype::BF16, 32);
    if (!v) return std::nullopt;
    auto format = valueArg(e, 1, VariantKind::Format);
    auto mode = format ? valueArg(e, 2, VariantKind::ScaleMode) : std::nullopt;
    if (!mode) return std::nullopt;
    Value r = emitOp(OpCode::MxScale, {Dtype::U8, v->type.length / 32}, {v->id}, e.loc);
    kernel_.ops[r.id].ival = kir::mxVariant(kir::MxFormat(*format), kir::MxScaleMode(*mode));
    return r;
  }

  std::optional<Value> lowerMxEncode(const Expr& e) {
    auto v = storageVectorArg(e, 0, Dtype::BF16, 32);
    if (!v) return std::nullopt;
    auto scales = storageVectorArg(e, 1, Dtype::U8, 1);
    if (!scales) return std::nullopt;
    if (scales->type.length * 32 != v->type.length)
      return error(
          e.operands[1]->loc,
          "mx_encode takes one scale per 32 elements: " + std::to_string(v->type.length / 32) +
              " for " + kir::typeName(v->type) + ", got " + kir::typeName(scales->type));
    auto format = valueArg(e, 2, VariantKind::Format);
    if (!format) return std::nullopt;
    Value r = emitOp(OpCode::MxEncode, {Dtype::U8, v->type.length}, {v->id, scales->id}, e.loc);
    // The scale mode only chooses scales, which mx_encode is given.
    kernel_.ops[r.id].ival = kir::mxVariant(kir::MxFormat(*format), kir::MxScaleMode::Rceil);
    return r;
  }

  std::optional<Value> lowerPack6(const Expr& e) {
    auto codes = storageVectorArg(e, 0, Dtype::U8, 4);
    if (!codes) return std::nullopt;
    return emitOp(OpCode::Pack6, {Dtype::U8, codes->type.length / 4 * 3}, {codes->id}, e.loc);
  }

  // ---- tensor accesses ----

  std::optional<int> tensorParam(const std::string& name, const SourceLoc& loc) {
    const Symbol* s = symbols_.find(name);
    if (!s || s->kind != SymbolKind::Tensor) return error(loc, "'" + name + "' is not a tensor");
    return s->index;
  }

  std::optional<Value> lowerLoad(const Expr& e) {
    auto p = tensorParam(e.name, e.loc);
    if (!p) return std::nullopt;
    const ast::ParamDecl& param = decl_.params[*p];
    if (param.isOut) return error(e.loc, "cannot load from output tensor '" + e.name + "'");
    auto access = lowerAccess(*p, e.operands, e.loc, /*allowGather=*/true);
    if (!access) return std::nullopt;
    kir::Op op;
    op.code = OpCode::Load;
    op.type = {param.dtype, access->sliceLength};
    op.operands = std::move(access->indices);
    op.strides = std::move(access->strides);
    op.slices = std::move(access->slices);
    op.param = *p;
    op.loc = e.loc;
    return emit(std::move(op));
  }

  bool lowerStore(const ast::Stmt& stmt) {
    auto p = tensorParam(stmt.name, stmt.loc);
    if (!p) return false;
    const ast::ParamDecl& param = decl_.params[*p];
    if (!param.isOut) {
      error(stmt.loc, "cannot store into '" + stmt.name + "': it is not declared 'out'");
      return false;
    }
    auto access = lowerAccess(*p, stmt.indices, stmt.loc);
    if (!access) return false;
    const Expr& valueExpr = *stmt.value;
    auto lit = literalOf(valueExpr);
    auto value = lit ? emitLiteral(*lit, param.dtype, valueExpr.loc) : lowerExpr(valueExpr);
    if (!value) return false;
    std::string tensorType = kir::dtypeName(param.dtype);
    if (value->type.elem != param.dtype) {
      bool hasCast = findBuiltin(tensorType).has_value();
      error(stmt.loc, std::string("storing ") + kir::dtypeName(value->type.elem) + " into " +
                          tensorType + " tensor '" + stmt.name + "'" +
                          (hasCast ? " needs " + tensorType + "(...)" : " is not supported"));
      return false;
    }
    if (access->sliceLength > 0 && !value->type.isVector()) {
      error(stmt.loc, "storing a scalar into a ':' slice of '" + stmt.name +
                          "' needs a row vector of " + std::to_string(access->sliceLength) +
                          " elements");
      return false;
    }
    if (access->sliceLength > 0 && value->type.length != access->sliceLength) {
      error(stmt.loc, "length mismatch: storing " + std::to_string(value->type.length) +
                          " elements into a slice of " + std::to_string(access->sliceLength));
      return false;
    }
    if (access->sliceLength == 0 && value->type.isVector()) {
      error(stmt.loc, "storing a row vector into one element of '" + stmt.name + "'");
      return false;
    }
    kir::Op op;
    op.code = OpCode::Store;
    op.type = value->type;
    op.operands = std::move(access->indices);
    op.strides = std::move(access->strides);
    op.slices = std::move(access->slices);
    op.value = value->id;
    op.param = *p;
    op.loc = stmt.loc;
    emit(std::move(op));
    return true;
  }

  std::optional<Access> lowerAccess(int p, const std::vector<ast::ExprPtr>& indices,
                                    const SourceLoc& loc, bool allowGather = false) {
    const ast::ParamDecl& param = decl_.params[p];
    size_t rank = param.dims.size();
    if (indices.size() != rank)
      return error(loc, "tensor '" + param.name + "' has rank " + std::to_string(rank) +
                            " but is indexed with " + std::to_string(indices.size()) +
                            (indices.size() == 1 ? " index" : " indices"));
    Access access;
    int64_t gatherLength = 0;  // the length of the one integer vector index, if any
    for (size_t i = 0; i < rank; ++i) {
      const Expr& index = *indices[i];
      if (index.kind != ExprKind::Slice) {
        auto v = lowerIndex(index, param.name, allowGather && gatherLength == 0);
        if (!v) return std::nullopt;
        access.indices.push_back(v->id);
        access.slices.push_back(0);
        if (v->type.isVector()) gatherLength = v->type.length;
        continue;
      }
      std::optional<int64_t> length;
      if (index.operands.empty()) {
        length = sliceLength(p, i, index.loc);
        access.indices.push_back(-1);
      } else {
        auto start = lowerIndex(*index.operands[0], param.name);
        if (!start) return std::nullopt;
        access.indices.push_back(start->id);
        length = sliceRangeLength(*index.operands[1], p, i);
      }
      if (!length) return std::nullopt;
      int64_t total = access.sliceLength == 0 ? 1 : access.sliceLength;
      if (__builtin_mul_overflow(total, *length, &access.sliceLength))
        return error(index.loc, "the slices of '" + param.name + "' hold more than 2^63 elements");
      access.slices.push_back(*length);
    }
    if (gatherLength > 0 &&
        __builtin_mul_overflow(gatherLength, access.sliceLength == 0 ? 1 : access.sliceLength, &access.sliceLength))
      return error(loc, "the gather from '" + param.name + "' holds more than 2^63 elements");
    auto strides = stridesOf(p);
    if (!strides) return std::nullopt;
    access.strides = *strides;
    return access;
  }

  std::optional<Value> lowerIndex(const Expr& index, const std::string& tensor, bool allowVector = false) {
    auto lit = literalOf(index);
    if (lit && lit->isFloat)
      return error(index.loc,
                   "an index of '" + tensor + "' must be an integer, got a float literal");
    auto v = lit ? emitLiteral(*lit, Dtype::I64, index.loc) : lowerExpr(index);
    if (!v) return std::nullopt;
    if (v->type.isVector() && !allowVector)
      return error(index.loc,
                   "an index of '" + tensor + "' must be a scalar, got " + kir::typeName(v->type));
    if (!kir::isInt(v->type.elem))
      return error(index.loc, "an index of '" + tensor + "' must be an integer, got " +
                                  kir::typeName(v->type));
    return castTo(*v, Dtype::I64, index.loc);
  }

  /// The length of a ':' on dimension `dim` of tensor `p`: its size, which must be a
  /// compile-time constant. (Any stride: the GPU accesses a slice whose elements are not
  /// contiguous element by element.)
  std::optional<int64_t> sliceLength(int p, size_t dim, const SourceLoc& loc) {
    const ast::ParamDecl& param = decl_.params[p];
    const kir::Dim& d = kernel_.params[p].dims[dim];
    if (d.constant < 0)
      return error(loc, "':' needs a compile-time size, but dimension '" + d.name + "' of '" +
                            param.name + "' is a runtime size");
    return d.constant;
  }

  /// The n of `start : n` on dimension `dim` of tensor `p`: a positive compile-time size, no
  /// larger than the dimension when that is a constant.
  std::optional<int64_t> sliceRangeLength(const Expr& lengthExpr, int p, size_t dim) {
    const ast::ParamDecl& param = decl_.params[p];
    const kir::Dim& d = kernel_.params[p].dims[dim];
    std::string why = "it uses a runtime value";
    std::optional<int64_t> n;
    if (usesOnlySizes(lengthExpr)) n = constantExprValue(lengthExpr, bindings_, why);
    if (!n) return error(lengthExpr.loc, "a slice length must be a compile-time size: " + why);
    if (*n < 1) return error(lengthExpr.loc, "a slice length must be at least 1, got " + std::to_string(*n));
    if (d.constant >= 0 && *n > d.constant)
      return error(lengthExpr.loc, "a slice of " + std::to_string(*n) + " elements exceeds dimension '" +
                                       d.name + "' of '" + param.name + "' (" + std::to_string(d.constant) + ")");
    return n;
  }

  // ---- strides ----

  /// A stride factor: a compile-time constant, or the id of an i64 value.
  struct Term {
    bool isConst = true;
    int64_t value = 1;
    int id = -1;
  };

  /// Emits the op computing a stride once per kernel, keyed by what it computes.
  template <typename MakeOp>
  int memoized(const std::string& key, MakeOp make) {
    auto it = strideMemo_.find(key);
    if (it != strideMemo_.end()) return it->second;
    int id = make();
    strideMemo_[key] = id;
    return id;
  }

  int materialize(const Term& t, const SourceLoc& loc) {
    if (!t.isConst) return t.id;
    return memoized("const " + std::to_string(t.value),
                    [&] { return emitConstInt(t.value, Dtype::I64, loc).id; });
  }

  std::optional<Term> multiply(const Term& a, const Term& b, const ast::ParamDecl& param) {
    if (a.isConst && b.isConst) {
      Term product;
      if (__builtin_mul_overflow(a.value, b.value, &product.value))
        return error(param.loc, "the strides of '" + param.name + "' overflow 64 bits");
      return product;
    }
    if (a.isConst && a.value == 1) return b;
    if (b.isConst && b.value == 1) return a;
    int ia = materialize(a, param.loc), ib = materialize(b, param.loc);
    Term product{false, 0, -1};
    product.id = memoized("mul " + std::to_string(ia) + " " + std::to_string(ib), [&] {
      return emitOp(OpCode::Mul, {Dtype::I64, 0}, {ia, ib}, param.loc).id;
    });
    return product;
  }

  /// One i64 value id per dimension of tensor `p`: the explicit strides, or row-major ones
  /// (stride[n-1] = 1, stride[i] = stride[i+1] * size[i+1]).
  std::optional<std::vector<int>> stridesOf(int p) {
    auto cached = tensorStrides_.find(p);
    if (cached != tensorStrides_.end()) return cached->second;
    const ast::ParamDecl& param = decl_.params[p];
    const kir::Param& kp = kernel_.params[p];
    std::vector<int> ids(param.dims.size(), -1);
    if (!param.strides.empty()) {
      for (size_t i = 0; i < param.strides.size() && i < ids.size(); ++i) {
        const ast::SizeRef& s = param.strides[i];
        if (!s.isName()) {
          ids[i] = materialize(Term{true, s.value, -1}, param.loc);
          continue;
        }
        auto v = nameValue(s.name, s.loc);
        if (!v) return std::nullopt;
        ids[i] = memoized("i64 " + std::to_string(v->id),
                          [&] { return castTo(*v, Dtype::I64, param.loc).id; });
      }
    } else {
      Term stride;
      for (size_t i = ids.size(); i-- > 0;) {
        ids[i] = materialize(stride, param.loc);
        if (i == 0) break;
        const kir::Dim& inner = kp.dims[i];
        Term size = inner.constant >= 0 ? Term{true, inner.constant, -1}
                                        : Term{false, 0, dimArg(inner.runtimeDim).id};
        auto next = multiply(stride, size, param);
        if (!next) return std::nullopt;
        stride = *next;
      }
    }
    return tensorStrides_[p] = ids;
  }

  // ---- statements ----

  bool lowerStmts(const std::vector<ast::Stmt>& stmts) {
    for (const ast::Stmt& stmt : stmts) {
      bool ok = false;
      switch (stmt.kind) {
        case ast::Stmt::Kind::Bind:
          ok = lowerBind(stmt);
          break;
        case ast::Stmt::Kind::Store:
          ok = lowerStore(stmt);
          break;
        case ast::Stmt::Kind::Var:
          ok = lowerVar(stmt);
          break;
        case ast::Stmt::Kind::For:
          ok = lowerFor(stmt);
          break;
        case ast::Stmt::Kind::Call:  // expanded away before the checks (fn_expand.h)
          error(stmt.loc, "a fn call was not expanded");
          break;
      }
      if (!ok) return false;
    }
    return true;
  }

  /// `name = value`: binds a new value, or assigns the variable `name` in scope.
  bool lowerBind(const ast::Stmt& stmt) {
    if (const Local* local = findLocal(stmt.name)) {
      if (local->kind == LocalKind::Var) return lowerAssign(stmt, local->value);
      error(stmt.loc, "'" + stmt.name + "' is already bound; values are immutable");
      return false;
    }
    auto v = lowerExpr(*stmt.value);
    if (!v) return false;
    if (kernel_.ops[v->id].name.empty()) kernel_.ops[v->id].name = stmt.name;
    scopes_.back()[stmt.name] = {LocalKind::Value, *v};
    return true;
  }

  /// `var name = value`: a variable of the value's type, initialized to it.
  bool lowerVar(const ast::Stmt& stmt) {
    auto v = lowerExpr(*stmt.value);
    if (!v) return false;
    Value var = emitOp(OpCode::VarInit, v->type, {v->id}, stmt.loc);
    kernel_.ops[var.id].name = stmt.name;
    scopes_.back()[stmt.name] = {LocalKind::Var, var};
    return true;
  }

  /// `name = value` for the variable declared by VarInit `var`: a value of exactly its type,
  /// a scalar of its element type splatted into a vector variable, or a literal of its type.
  bool lowerAssign(const ast::Stmt& stmt, Value var) {
    const Expr& valueExpr = *stmt.value;
    auto lit = literalOf(valueExpr);
    auto v = lit ? emitLiteral(*lit, var.type.elem, valueExpr.loc) : lowerExpr(valueExpr);
    if (!v) return false;
    bool broadcast = !v->type.isVector() && var.type.isVector();
    if (v->type.elem != var.type.elem || (v->type.length != var.type.length && !broadcast)) {
      error(stmt.loc, "cannot assign " + kir::typeName(v->type) + " to variable '" + stmt.name +
                          "' of type " + kir::typeName(var.type));
      return false;
    }
    if (broadcast) v = emitOp(OpCode::Splat, var.type, {v->id}, valueExpr.loc);
    kir::Op op;
    op.code = OpCode::VarWrite;
    op.type = var.type;
    op.ival = var.id;
    op.operands = {v->id};
    op.name = stmt.name;
    op.loc = stmt.loc;
    emit(std::move(op));
    return true;
  }

  /// A bound of a loop ("start", "end", "step"): an integer scalar, as i64.
  std::optional<Value> loopBound(const Expr& e, const char* which) {
    std::string what = std::string("the ") + which + " of a loop";
    auto lit = literalOf(e);
    if (lit && lit->isFloat)
      return error(e.loc, what + " must be an integer scalar, got a float literal");
    auto v = lit ? emitLiteral(*lit, Dtype::I64, e.loc) : lowerExpr(e);
    if (!v) return std::nullopt;
    if (v->type.isVector() || !kir::isInt(v->type.elem))
      return error(e.loc, what + " must be an integer scalar, got " + kir::typeName(v->type));
    return castTo(*v, Dtype::I64, e.loc);
  }

  /// for i in start .. end step step { body }:
  ///   start, end, step (i64, evaluated once); %i = ForBegin start, end, step; body; ForEnd %i
  bool lowerFor(const ast::Stmt& loop) {
    auto start = loopBound(*loop.value, "start");
    auto end = start ? loopBound(*loop.end, "end") : std::nullopt;
    if (!end) return false;
    std::optional<Value> step;
    if (loop.step) {
      step = loopBound(*loop.step, "step");
      if (!step) return false;
      // A step known now must be positive; a runtime one is checked when the loop runs.
      const kir::Op& stepOp = kernel_.ops[step->id];
      if (stepOp.code == OpCode::ConstInt && stepOp.ival <= 0) {
        error(loop.step->loc,
              "the step of a loop must be positive, got " + std::to_string(stepOp.ival));
        return false;
      }
    } else {
      step = emitConstInt(1, Dtype::I64, loop.loc);
    }
    Value begin = emitOp(OpCode::ForBegin, {Dtype::I64, 0}, {start->id, end->id, step->id},
                         loop.loc);
    kernel_.ops[begin.id].name = loop.name;
    scopes_.emplace_back();
    scopes_.back()[loop.name] = {LocalKind::Index, begin};
    bool ok = lowerStmts(loop.body);
    scopes_.pop_back();
    if (!ok) return false;
    forgetDefinedFrom(begin.id);
    kir::Op close;
    close.code = OpCode::ForEnd;
    close.type = {Dtype::I64, 0};
    close.ival = begin.id;
    close.loc = loop.endLoc;
    emit(std::move(close));
    return true;
  }

  /// Forgets the leaves and strides emitted from op `first` on (inside a loop body that is
  /// closing): later uses emit them again, after the body.
  void forgetDefinedFrom(int first) {
    std::erase_if(leaves_, [&](const auto& entry) { return entry.second.id >= first; });
    std::erase_if(strideMemo_, [&](const auto& entry) { return entry.second >= first; });
    std::erase_if(tensorStrides_, [&](const auto& entry) {
      return std::any_of(entry.second.begin(), entry.second.end(),
                         [&](int id) { return id >= first; });
    });
    for (int& id : dimArgs_)
      if (id >= first) id = -1;
  }

  const ast::KernelDecl& decl_;
  const Bindings& bindings_;
  DiagnosticEngine& diags_;
  KernelSymbols symbols_;
  kir::Kernel kernel_;
  std::vector<std::map<std::string, Local>> scopes_;  // the row body, then each loop body
  std::map<std::string, Value> leaves_;            // leaf ops of declared names
  std::map<std::string, int> strideMemo_;          // stride computations, emitted once each
  std::map<int, std::vector<int>> tensorStrides_;  // per tensor param
  std::vector<int> dimArgs_;                       // DimArg op per runtime dim, -1 until used
};

}  // namespace

std::optional<kir::Kernel> instantiate(const Module& module, const std::string& kernel,
                                       const std::map<std::string, int64_t>& config,
                                       DiagnosticEngine& diags) {
  const ModuleImpl& impl = module.impl();
  const ast::KernelDecl* decl = impl.findKernel(kernel);
  if (!decl) {
    std::string names;
    for (const ast::KernelDecl& k : impl.ast.kernels) names += (names.empty() ? "" : ", ") + k.name;
    diags.error({impl.file, 0, 0}, "no kernel named '" + kernel + "' in " + impl.file +
                                       (names.empty() ? "" : "; kernels: " + names));
    return std::nullopt;
  }
  auto bindings = bindConfig(*decl, config, diags);
  if (!bindings || !checkConstraints(*decl, *bindings, diags) ||
      !checkDimensions(*decl, *bindings, &diags))
    return std::nullopt;
  return Lowerer(*decl, *bindings, diags).run();
}

}  // namespace mxfp6::frontend
