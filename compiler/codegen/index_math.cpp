// Integer division and remainder of index values in 32 bits where that is exact.
//
// GPUs have no 64-bit integer divider: a 64-bit division is a long software sequence, and LLVM
// guards each one with a per-thread branch to a 32-bit divide (BypassSlowDivision). A row's
// position in the row space, and in a table indexed by it, goes through such divisions, so every
// row paid three branches, and ptxas would not move the row's table loads above them. The runtime
// keeps each launch's row count and every runtime size below 2^31 (checkLaunchArgs, gridForRows),
// so row indices, their digits and the sizes fit 31 bits, and a division among such values (or
// i32 scalars) is exact in 32 bits.
//
// More facts the launch checks, so that loops and positions divide in 32 bits as rows do
// (norm_rope_bwd's `for r in j .. T * H step P` took four 64-bit divisions per trip, each a
// branch around a call, and ptxas kept the next trip's loads behind them):
//   - a loop that counts from a non-negative start by a non-negative step up to a product of
//     sizes (T * H) has that product recorded as an index bound (LaunchShape::indexBounds), which
//     the runtime requires to be at most 2^31 - 1, so the induction value fits 31 bits;
//   - an integer scalar parameter that divides (t / pos_div) is recorded as required to be >= 1
//     (LaunchShape::positiveParams): a zero or negative divisor is refused at launch instead of
//     computing garbage, and an i32 one dividing a non-negative index divides unsigned;
//   - so is a runtime size that divides (`% S`, LaunchShape::positiveDims), wherever rows run: an
//     empty rotary table with tokens to rotate would be indexed by a division by zero;
//   - a dividend below a product of sizes and constants (the prologue's token positions
//     `tb * 32 + iota(32)`, each below TB * 32: exclusiveBound) has that product recorded as an
//     index bound too, so a vector of them divides in 32 bits, element by element.
//
// A 32-bit division by a runtime value is still about a dozen instructions (the divisor's
// reciprocal in floating point, a multiply-high, two corrections), and a row's position takes
// up to three in a chain before its first load (t and h of the row, t / pos_div, % S). Dividing
// by a constant is a multiply-high, an add and a shift; so is dividing by a runtime divisor
// whose multiplier and shift the runtime computes once per launch (Granlund and Montgomery,
// "Division by invariant integers using multiplication", 1994, section 4) and passes after the
// ABI's arguments (LaunchShape::magicDivisors; runtime.h, DerivedArg). Every unsigned 32-bit
// division by a scalar parameter or runtime size gets them.
#include <algorithm>
#include <cstdint>
#include <set>

#include "compiler/codegen/kernel_emitter.h"

namespace mxfp6::codegen::detail {

using kir::Dtype;
using kir::OpCode;

KernelEmitter::IntRange KernelEmitter::intRange(int id) const {
  const kir::Op& op = k_.ops[id];
  // Of a vector, the range of each element.
  if (kir::isFloat(op.type.elem)) return IntRange::Any;
  if (boundedDividends_.count(id)) return IntRange::NonNegI32;
  IntRange own = op.type.elem == Dtype::I64 ? IntRange::Any : IntRange::I32;  // i32, u8, bool
  switch (op.code) {
    case OpCode::RowIndex:
    case OpCode::DimArg: return IntRange::NonNegI32;
    case OpCode::Iota: return op.type.length <= INT32_MAX ? IntRange::NonNegI32 : own;
    case OpCode::ScalarArg:  // an i32 the launch requires >= 1 (a divisor) fits 31 bits
      return op.type.elem == Dtype::I32 && positiveParams_.count(op.param) ? IntRange::NonNegI32 : own;
    case OpCode::ForBegin: {
      const int start = op.operands[0], end = op.operands[1], step = op.operands[2];
      if (intRange(start) != IntRange::NonNegI32 || intRange(step) != IntRange::NonNegI32) return own;
      // The induction value lies in [start, end): below a bound of at most 2^31 - 1.
      return intRange(end) == IntRange::NonNegI32 || boundFactors(end) ? IntRange::NonNegI32 : own;
    }
    case OpCode::ConstInt:
      if (op.ival >= 0 && op.ival <= INT32_MAX) return IntRange::NonNegI32;
      return op.ival >= INT32_MIN && op.ival <= INT32_MAX ? IntRange::I32 : IntRange::Any;
    case OpCode::Cast: {
      Dtype from = k_.ops[op.operands[0]].type.elem;
      if (kir::isFloat(from)) return own;
      return std::max(own, intRange(op.operands[0]));
    }
    case OpCode::Div:
    case OpCode::Rem: {
      IntRange a = intRange(op.operands[0]), b = intRange(op.operands[1]);
      if (!narrowDivision(a, b)) return own;
      // |a / b| <= |a| and |a % b| <= |a|, with a's sign (or zero).
      if (a == IntRange::NonNegI32 && (op.code == OpCode::Rem || b == IntRange::NonNegI32))
        return IntRange::NonNegI32;
      return IntRange::I32;
    }
    default: return own;
  }
}

std::optional<std::vector<kir::Dim>> KernelEmitter::boundFactors(int id) const {
  const kir::Op& op = k_.ops[id];
  switch (op.code) {
    case OpCode::DimArg: return std::vector<kir::Dim>{kir::Dim{.runtimeDim = int(op.ival)}};
    case OpCode::ConstInt:
      if (op.ival < 1) return std::nullopt;
      return std::vector<kir::Dim>{kir::Dim{.constant = op.ival}};
    case OpCode::Cast:
      if (!kir::isInt(k_.ops[op.operands[0]].type.elem)) return std::nullopt;
      return boundFactors(op.operands[0]);
    case OpCode::Mul: {
      std::optional<std::vector<kir::Dim>> a = boundFactors(op.operands[0]);
      std::optional<std::vector<kir::Dim>> b = boundFactors(op.operands[1]);
      if (!a || !b) return std::nullopt;
      a->insert(a->end(), b->begin(), b->end());
      return a;
    }
    default: return std::nullopt;
  }
}

/// The op a divisor's value comes from, through casts between i32 and i64 (exact for the
/// divisors that matter: i32 scalars, and sizes below 2^31). A cast to a narrower type (u8)
/// changes the value, so the divisor is the cast itself.
static const kir::Op& divisorRoot(const kir::Kernel& k, int id) {
  auto wide = [](Dtype t) { return t == Dtype::I32 || t == Dtype::I64; };
  while (k.ops[id].code == OpCode::Cast && wide(k.ops[id].type.elem) && wide(k.ops[k.ops[id].operands[0]].type.elem))
    id = k.ops[id].operands[0];
  return k.ops[id];
}

std::optional<std::vector<kir::Dim>> KernelEmitter::exclusiveBound(int id) const {
  const kir::Op& op = k_.ops[id];
  auto constant = [&](int operand) -> std::optional<int64_t> {
    const kir::Op& c = k_.ops[operand];
    if (c.code != OpCode::ConstInt || c.ival < 1) return std::nullopt;
    return c.ival;
  };
  switch (op.code) {
    case OpCode::RowIndex: {  // clamped to its extent under SERIAL and INTERLEAVE too
      const int var = int(op.ival);
      if (k_.rowDims[var] >= 0) return std::vector<kir::Dim>{kir::Dim{.runtimeDim = k_.rowDims[var]}};
      if (size_t(var) >= k_.rowConstExtents.size()) return std::nullopt;  // a KIR without its value
      return std::vector<kir::Dim>{kir::Dim{.constant = k_.rowConstExtents[var]}};
    }
    case OpCode::Iota: return std::vector<kir::Dim>{kir::Dim{.constant = op.type.length}};
    case OpCode::ConstInt:
      if (op.ival < 0 || op.ival >= INT32_MAX) return std::nullopt;
      return std::vector<kir::Dim>{kir::Dim{.constant = op.ival + 1}};
    case OpCode::Cast: {
      const Dtype from = k_.ops[op.operands[0]].type.elem;
      if (!kir::isInt(from) || (op.type.elem != Dtype::I32 && op.type.elem != Dtype::I64)) return std::nullopt;
      return exclusiveBound(op.operands[0]);
    }
    case OpCode::Mul:  // x * c < bound(x) * c
      for (int side = 0; side < 2; ++side) {
        std::optional<int64_t> c = constant(op.operands[1 - side]);
        std::optional<std::vector<kir::Dim>> x = exclusiveBound(op.operands[side]);
        if (!c || !x) continue;
        x->push_back(kir::Dim{.constant = *c});
        return x;
      }
      return std::nullopt;
    case OpCode::Add:  // x * c + y with 0 <= y < c: below bound(x) * c
      for (int side = 0; side < 2; ++side) {
        const kir::Op& scaled = k_.ops[op.operands[side]];
        std::optional<std::vector<kir::Dim>> y = exclusiveBound(op.operands[1 - side]);
        if (scaled.code != OpCode::Mul || !y || y->size() != 1 || (*y)[0].constant < 0) continue;
        for (int s = 0; s < 2; ++s) {
          std::optional<int64_t> c = constant(scaled.operands[1 - s]);
          std::optional<std::vector<kir::Dim>> x = exclusiveBound(scaled.operands[s]);
          if (!c || !x || (*y)[0].constant > *c) continue;
          x->push_back(kir::Dim{.constant = *c});
          return x;
        }
      }
      return std::nullopt;
    default: return std::nullopt;
  }
}

void KernelEmitter::planIndexRanges() {
  for (const kir::Op& op : k_.ops) {
    if ((op.code == OpCode::Div || op.code == OpCode::Rem) && kir::isInt(op.type.elem)) {
      // Whatever the dividend (a vector's elements too): a zero divisor would make the quotient
      // garbage (`% S` with S = 0 indexes a table by it), a negative one is no index math.
      const kir::Op& d = divisorRoot(k_, op.operands[1]);
      if (d.code == OpCode::ScalarArg) positiveParams_.insert(d.param);
      if (d.code == OpCode::DimArg) positiveDims_.insert(int(d.ival));
    }
  }
  for (size_t i = 0; i < k_.ops.size(); ++i) {
    const kir::Op& op = k_.ops[i];
    if (op.code != OpCode::ForBegin || intRange(int(i)) != IntRange::NonNegI32) continue;
    // A bound that is one size or a constant is already within the launch limits.
    if (intRange(op.operands[1]) == IntRange::NonNegI32) continue;
    std::vector<kir::Dim> factors = *boundFactors(op.operands[1]);
    if (std::find(indexBounds_.begin(), indexBounds_.end(), factors) == indexBounds_.end())
      indexBounds_.push_back(std::move(factors));
  }
  // A dividend of no known range that is below a product of sizes (the prologue's token
  // positions tb * 32 + iota(32)): the launch holds that product to 2^31 - 1 too, so the
  // division is in 32 bits.
  for (size_t i = 0; i < k_.ops.size(); ++i) {
    const kir::Op& op = k_.ops[i];
    if ((op.code != OpCode::Div && op.code != OpCode::Rem) || !kir::isInt(op.type.elem)) continue;
    const int dividend = op.operands[0];
    if (intRange(dividend) == IntRange::NonNegI32 || intRange(op.operands[1]) != IntRange::NonNegI32) continue;
    std::optional<std::vector<kir::Dim>> factors = exclusiveBound(dividend);
    if (!factors) continue;
    int64_t constants = 1;  // the product of the constant factors
    bool sizes = false;
    for (const kir::Dim& f : *factors)
      if (f.constant < 0) sizes = true;
      else if (__builtin_mul_overflow(constants, f.constant, &constants)) constants = INT64_MAX;
    if (constants > INT32_MAX) continue;  // no launch could hold it
    boundedDividends_.insert(dividend);
    if (sizes && std::find(indexBounds_.begin(), indexBounds_.end(), *factors) == indexBounds_.end())
      indexBounds_.push_back(std::move(*factors));
  }
  planDivisorMagic();
}

void KernelEmitter::planDivisorMagic() {
  const std::vector<kir::AbiArg> abi = k_.abi();
  std::set<int> divisors;  // ABI indices
  auto addDivisor = [&](int param, int runtimeDim) {
    for (size_t i = 0; i < abi.size(); ++i)
      if (param >= 0 ? abi[i].param == param : abi[i].runtimeDim == runtimeDim) divisors.insert(int(i));
  };
  for (const kir::Op& op : k_.ops) {
    if ((op.code != OpCode::Div && op.code != OpCode::Rem) || !kir::isInt(op.type.elem)) continue;
    // The divisions narrowDivide makes unsigned.
    if (intRange(op.operands[0]) != IntRange::NonNegI32 || intRange(op.operands[1]) != IntRange::NonNegI32) continue;
    const kir::Op& d = divisorRoot(k_, op.operands[1]);
    if (d.code == OpCode::ScalarArg) addDivisor(d.param, -1);
    if (d.code == OpCode::DimArg) addDivisor(-1, int(d.ival));
  }
  // A row's digits divide by the runtime extents after the first (rowDigit). Where rows run those
  // are at least 1, and the ABI says so.
  for (size_t v = 1; k_.rowVars.size() > 1 && v < k_.rowDims.size(); ++v) {
    if (k_.rowDims[v] < 0) continue;
    positiveDims_.insert(k_.rowDims[v]);
    addDivisor(-1, k_.rowDims[v]);
  }
  magicDivisors_.assign(divisors.begin(), divisors.end());
}

const KernelEmitter::DivisorMagic* KernelEmitter::divisorMagic(int id) const {
  const kir::Op& d = divisorRoot(k_, id);
  const std::map<int, DivisorMagic>* magic = d.code == OpCode::ScalarArg ? &paramMagic_
                                             : d.code == OpCode::DimArg  ? &dimMagic_
                                                                         : nullptr;
  if (!magic) return nullptr;
  auto it = magic->find(d.code == OpCode::ScalarArg ? d.param : int(d.ival));
  return it == magic->end() ? nullptr : &it->second;
}

Value KernelEmitter::magicDivide(Value n, Value d, const DivisorMagic& magic, bool remainder) {
  // q = (mulhi(multiplier, n) + n) >> shift (runtime.h, divisorMultiplier): mulhi(m, n) <= n, so
  // for n < 2^31 the sum does not wrap. The remainder is n - q * d, which is at most n.
  Value multiplier = magic.multiplier, shift = magic.shift;
  if (isa<VectorType>(n.getType())) {  // each element of a chunk by the same divisor
    multiplier = broadcast(multiplier, n.getType());
    shift = broadcast(shift, n.getType());
  }
  Value high = arith::MulUIExtendedOp::create(b_, multiplier, n).getHigh();
  Value q = arith::ShRUIOp::create(b_, arith::AddIOp::create(b_, high, n), shift);
  if (!remainder) return q;
  return arith::SubIOp::create(b_, n, arith::MulIOp::create(b_, q, d));
}

bool KernelEmitter::narrowDivision(IntRange a, IntRange b) {
  // Both fit i32, and INT32_MIN / -1 (which overflows 32 bits) cannot occur.
  return a != IntRange::Any && b != IntRange::Any &&
         (a == IntRange::NonNegI32 || b == IntRange::NonNegI32);
}

Value KernelEmitter::toI32(Value v) {
  unsigned width = getElementTypeOrSelf(v.getType()).getIntOrFloatBitWidth();
  Type i32 = sameShape(v, b_.getI32Type());
  if (width == 32) return v;
  if (width < 32) return arith::ExtUIOp::create(b_, i32, v);  // u8, bool: non-negative
  return arith::TruncIOp::create(b_, i32, v);
}

Value KernelEmitter::narrowDivide(const kir::Op& op, Value a, Value b) {
  IntRange ra = intRange(op.operands[0]), rb = intRange(op.operands[1]);
  if (!narrowDivision(ra, rb)) return {};
  bool isUnsigned = ra == IntRange::NonNegI32 && rb == IntRange::NonNegI32;
  Value x = toI32(a), y = toI32(b), r;
  if (const DivisorMagic* magic = isUnsigned ? divisorMagic(op.operands[1]) : nullptr)
    r = magicDivide(x, y, *magic, op.code == OpCode::Rem);
  else if (op.code == OpCode::Div)
    r = isUnsigned ? Value(arith::DivUIOp::create(b_, x, y)) : Value(arith::DivSIOp::create(b_, x, y));
  else
    r = isUnsigned ? Value(arith::RemUIOp::create(b_, x, y)) : Value(arith::RemSIOp::create(b_, x, y));
  if (op.type.elem != Dtype::I64) return r;
  Type i64 = sameShape(r, b_.getI64Type());
  if (isUnsigned) return arith::ExtUIOp::create(b_, i64, r);
  return arith::ExtSIOp::create(b_, i64, r);
}

Value KernelEmitter::rowDigit(Value row, int var) {
  // Row variables are the digits of the flat row index, the last one fastest. Divisions by
  // constant extents only stay 64-bit: LLVM turns them into multiply-highs with no branch, and
  // ptxas allocated fewer registers for them there (the column packers' digits of `row rg, cb in
  // RG, 48`: 48 registers against 62, one more program per SM).
  bool narrow = false;  // the digit divides by the extents after it, takes the remainder by its own
  for (int v = var; v < int(k_.rowVars.size()); ++v)
    narrow |= (v > var || var > 0) && k_.rowDims[v] >= 0;
  auto width = [&](Value x) { return narrow ? toI32(x) : x; };
  // Runtime extents are divided in 32 bits (narrow), by their multipliers (planDivisorMagic).
  auto divide = [&](Value r, int v, bool remainder) -> Value {
    Value extent = width(rowExtent(v));
    if (auto it = dimMagic_.find(k_.rowDims[v]); k_.rowDims[v] >= 0 && it != dimMagic_.end())
      return magicDivide(r, extent, it->second, remainder);
    return remainder ? Value(arith::RemUIOp::create(b_, r, extent)) : Value(arith::DivUIOp::create(b_, r, extent));
  };
  Value r = width(row);
  for (int v = int(k_.rowVars.size()) - 1; v > var; --v) r = divide(r, v, false);
  if (var > 0) r = divide(r, var, true);
  return narrow ? Value(arith::ExtUIOp::create(b_, b_.getI64Type(), r)) : r;
}

}  // namespace mxfp6::codegen::detail
