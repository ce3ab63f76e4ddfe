// Integer division and remainder of index values in 32 bits where that is exact.
//
// GPUs have no 64-bit integer divider: a 64-bit division is a long software sequence, and LLVM
// guards each one with a per-thread branch to a 32-bit divide (BypassSlowDivision). A row's
// position in the row space, and in a table indexed by it, goes through such divisions, so every
// row paid three branches, and ptxas would not move the row's table loads above them. The runtime
// keeps each launch's row count and every runtime size below 2^31 (checkLaunchArgs, gridForRows),
// so row indices, their digits and the sizes fit 31 bits, and a division among such values (or
// i32 scalars) is exact in 32 bits.
#include <algorithm>
#include <cstdint>

#include "compiler/codegen/kernel_emitter.h"

namespace mxfp6::codegen::detail {

using kir::Dtype;
using kir::OpCode;

KernelEmitter::IntRange KernelEmitter::intRange(int id) const {
  const kir::Op& op = k_.ops[id];
  if (op.type.isVector() || kir::isFloat(op.type.elem)) return IntRange::Any;
  IntRange own = op.type.elem == Dtype::I64 ? IntRange::Any : IntRange::I32;  // i32, u8, bool
  switch (op.code) {
    case OpCode::RowIndex:
    case OpCode::DimArg: return IntRange::NonNegI32;
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

bool KernelEmitter::narrowDivision(IntRange a, IntRange b) {
  // Both fit i32, and INT32_MIN / -1 (which overflows 32 bits) cannot occur.
  return a != IntRange::Any && b != IntRange::Any &&
         (a == IntRange::NonNegI32 || b == IntRange::NonNegI32);
}

Value KernelEmitter::toI32(Value v) {
  unsigned width = v.getType().getIntOrFloatBitWidth();
  if (width == 32) return v;
  if (width < 32) return arith::ExtUIOp::create(b_, b_.getI32Type(), v);  // u8, bool: non-negative
  return arith::TruncIOp::create(b_, b_.getI32Type(), v);
}

Value KernelEmitter::narrowDivide(const kir::Op& op, Value a, Value b) {
  IntRange ra = intRange(op.operands[0]), rb = intRange(op.operands[1]);
  if (!narrowDivision(ra, rb)) return {};
  bool isUnsigned = ra == IntRange::NonNegI32 && rb == IntRange::NonNegI32;
  Value x = toI32(a), y = toI32(b), r;
  if (op.code == OpCode::Div)
    r = isUnsigned ? Value(arith::DivUIOp::create(b_, x, y)) : Value(arith::DivSIOp::create(b_, x, y));
  else
    r = isUnsigned ? Value(arith::RemUIOp::create(b_, x, y)) : Value(arith::RemSIOp::create(b_, x, y));
  if (op.type.elem != Dtype::I64) return r;
  if (isUnsigned) return arith::ExtUIOp::create(b_, b_.getI64Type(), r);
  return arith::ExtSIOp::create(b_, b_.getI64Type(), r);
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
  Value r = width(row);
  for (int v = int(k_.rowVars.size()) - 1; v > var; --v) r = arith::DivUIOp::create(b_, r, width(rowExtent(v)));
  if (var > 0) r = arith::RemUIOp::create(b_, r, width(rowExtent(var)));
  return narrow ? Value(arith::ExtUIOp::create(b_, b_.getI64Type(), r)) : r;
}

}  // namespace mxfp6::codegen::detail
