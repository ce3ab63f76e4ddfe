// Elementwise math of KIR ops, chunk by chunk: the DSL's arithmetic (products and sums may fuse
// into FMAs), conversions, the math functions through hardware intrinsics (no device math
// library), and the combining step and identity of reductions.

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/codegen/special_functions.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mxfp6::codegen::detail {

Value KernelEmitter::identityFor(OpCode reduce) {
  Type f32 = b_.getF32Type();
  switch (reduce) {
    case OpCode::ReduceMax:
      return arith::ConstantOp::create(b_, b_.getFloatAttr(f32, -std::numeric_limits<float>::infinity()));
    case OpCode::ReduceMin:
      return arith::ConstantOp::create(b_, b_.getFloatAttr(f32, std::numeric_limits<float>::infinity()));
    default:
      return arith::ConstantOp::create(b_, b_.getFloatAttr(f32, 0.0));
  }
}

Value KernelEmitter::combineLanes(OpCode reduce, Value a, Value c) {
  // Not contracted: were a lane's own partial a lone product, the sum would fuse with it on one
  // side of the exchange and not on the other, and the lanes would end with different bits.
  if (reduce == OpCode::ReduceSum && isa<FloatType>(getElementTypeOrSelf(a.getType())))
    return arith::AddFOp::create(b_, a, c);
  return combine(reduce, a, c);
}

Value KernelEmitter::combine(OpCode reduce, Value a, Value c) {
  bool isFloat = isa<FloatType>(getElementTypeOrSelf(a.getType()));
  switch (reduce) {
    case OpCode::ReduceMax:
      return isFloat ? Value(arith::MaximumFOp::create(b_, a, c)) : Value(arith::MaxSIOp::create(b_, a, c));
    case OpCode::ReduceMin:
      return isFloat ? Value(arith::MinimumFOp::create(b_, a, c)) : Value(arith::MinSIOp::create(b_, a, c));
    default:
      return isFloat ? addF(a, c) : Value(arith::AddIOp::create(b_, a, c));
  }
}

Value KernelEmitter::widenBf16Pairs(Value v) {
  const int64_t n = cast<VectorType>(v.getType()).getNumElements();
  Type i32 = b_.getI32Type();
  auto wordsType = VectorType::get({n / 2}, i32);
  Value words = vector::BitCastOp::create(b_, wordsType, v);
  Value low = arith::ShLIOp::create(b_, words, splat(wordsType, b_.getI32IntegerAttr(16)));
  Value high = arith::AndIOp::create(b_, words, splat(wordsType, b_.getI32IntegerAttr(int32_t(0xFFFF0000u))));
  SmallVector<int64_t> interleave;
  for (int64_t w = 0; w < n / 2; ++w) interleave.append({w, n / 2 + w});
  Value bits = vector::ShuffleOp::create(b_, low, high, interleave);
  return vector::BitCastOp::create(b_, VectorType::get({n}, b_.getF32Type()), bits);
}

Value KernelEmitter::castValue(Value v, Dtype from, Dtype to) {
  if (from == to) return v;
  // NVIDIA only: measured there (b1bc92a:bench/results/2026-12-01-h200-notes.md, section 43); on AMD the
  // word-wise form costs 2-4 more VGPRs in the resource table and nothing shows it gains.
  if (from == Dtype::BF16 && to == Dtype::F32 && target_.backend == Backend::NVVM) {
    auto vt = dyn_cast<VectorType>(v.getType());
    if (vt && vt.getNumElements() % 2 == 0) return widenBf16Pairs(v);
  }
  Type elem = scalarType(&ctx_, to);
  Type ty = sameShape(v, elem);
  bool fromFloat = kir::isFloat(from), toFloat = kir::isFloat(to);
  if (fromFloat && toFloat) {
    int fromBits = getElementTypeOrSelf(v.getType()).getIntOrFloatBitWidth();
    int toBits = elem.getIntOrFloatBitWidth();
    if (fromBits == toBits) {  // f16 <-> bf16 goes through f32, exact then one rounding
      Type f32 = sameShape(v, b_.getF32Type());
      return arith::TruncFOp::create(b_, ty, arith::ExtFOp::create(b_, f32, v));
    }
    if (fromBits < toBits) return arith::ExtFOp::create(b_, ty, v);
    return arith::TruncFOp::create(b_, ty, v);  // round to nearest even
  }
  if (!fromFloat && toFloat) return arith::SIToFPOp::create(b_, ty, v);
  if (fromFloat && !toFloat) return arith::FPToSIOp::create(b_, ty, v);
  int fromBits = getElementTypeOrSelf(v.getType()).getIntOrFloatBitWidth();
  int toBits = elem.getIntOrFloatBitWidth();
  if (fromBits == toBits) return v;
  if (fromBits > toBits) return arith::TruncIOp::create(b_, ty, v);
  if (from == Dtype::Bool || from == Dtype::U8) return arith::ExtUIOp::create(b_, ty, v);
  return arith::ExtSIOp::create(b_, ty, v);
}

Value KernelEmitter::perElementIntrinsic(Value v, const char* intrinsic) {
  auto scalar = [&](Value x) {
    return LLVM::CallIntrinsicOp::create(b_, b_.getF32Type(), b_.getStringAttr(intrinsic), ValueRange{x})
        .getResult(0);
  };
  auto vt = dyn_cast<VectorType>(v.getType());
  if (!vt) return scalar(v);
  Value result = v;
  for (int64_t i = 0; i < vt.getNumElements(); ++i) {
    Value e = scalar(vector::ExtractOp::create(b_, v, ArrayRef<int64_t>{i}));
    result = vector::InsertOp::create(b_, e, result, ArrayRef<int64_t>{i});
  }
  return result;
}

/// Correctly rounded square root without a device math library: NVPTX's sqrt.rn through its
/// intrinsic (the generic llvm.sqrt would become a libdevice call), llvm.sqrt on AMDGPU.
Value KernelEmitter::sqrtValue(Value v) {
  return perElementIntrinsic(v, target_.backend == Backend::NVVM ? "llvm.nvvm.sqrt.rn.f" : "llvm.sqrt.f32");
}

/// 1/sqrt(x) in one hardware instruction (rsqrt.approx.f32: relative error below 2^-22.9;
/// v_rsq_f32: 1 ulp) instead of a rounded square root and a rounded reciprocal, each a sequence
/// with a slow path. Its users normalise by it (rstd), where that error is far below the bf16
/// rounding of the results.
Value KernelEmitter::rsqrtValue(Value v) {
  return perElementIntrinsic(v, target_.backend == Backend::NVVM ? "llvm.nvvm.rsqrt.approx.f" : "llvm.amdgcn.rsq.f32");
}

/// exp(x) = 2^(x*log2(e)) through the hardware base-2 exponential (≈2 ulp in f32).
Value KernelEmitter::expValue(Value v) {
  Value log2e = splat(v.getType(), b_.getF32FloatAttr(1.4426950408889634f));
  return perElementIntrinsic(mulF(v, log2e),
                             target_.backend == Backend::NVVM ? "llvm.nvvm.ex2.approx.f32" : "llvm.amdgcn.exp2.f32");
}

Value KernelEmitter::addF(Value a, Value c) {
  return arith::AddFOp::create(b_, a, c, arith::FastMathFlags::contract);
}
Value KernelEmitter::subF(Value a, Value c) {
  return arith::SubFOp::create(b_, a, c, arith::FastMathFlags::contract);
}
Value KernelEmitter::mulF(Value a, Value c) {
  return arith::MulFOp::create(b_, a, c, arith::FastMathFlags::contract);
}

Value KernelEmitter::applyScalar(OpCode code, Dtype t, ArrayRef<Value> x, Dtype resultType) {
  bool f = kir::isFloat(t);
  switch (code) {
    case OpCode::Cast: return castValue(x[0], t, resultType);
    case OpCode::Neg:
      if (f) return arith::NegFOp::create(b_, x[0]);
      return arith::SubIOp::create(b_, arith::ConstantOp::create(b_, b_.getZeroAttr(x[0].getType())), x[0]);
    case OpCode::Abs: {
      if (!f) {
        Value zero = arith::ConstantOp::create(b_, b_.getZeroAttr(x[0].getType()));
        Value negative = arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, x[0], zero);
        return arith::SelectOp::create(b_, negative, arith::SubIOp::create(b_, zero, x[0]), x[0]);
      }
      // Clear the sign bit: exact, and needs no math library on any target.
      Type elem = getElementTypeOrSelf(x[0].getType());
      Type intElem = b_.getIntegerType(elem.getIntOrFloatBitWidth());
      Type intTy = sameShape(x[0], intElem);
      Value bits = arith::BitcastOp::create(b_, intTy, x[0]);
      APInt mask = APInt::getSignedMaxValue(elem.getIntOrFloatBitWidth());
      Value m = splat(intTy, b_.getIntegerAttr(intElem, mask));
      return arith::BitcastOp::create(b_, x[0].getType(), arith::AndIOp::create(b_, bits, m));
    }
    case OpCode::Sqrt: return sqrtValue(x[0]);
    case OpCode::Rsqrt: return rsqrtValue(x[0]);
    case OpCode::Exp: return expValue(x[0]);
    case OpCode::Tanh: case OpCode::Sigmoid: case OpCode::Erf: case OpCode::GeluTanh: case OpCode::Silu:
      return emitSpecialFunction(b_, code, x[0]);
    case OpCode::Not: {
      Value one = arith::ConstantOp::create(b_, b_.getOneAttr(x[0].getType()));
      return arith::XOrIOp::create(b_, x[0], one);
    }
    case OpCode::Add: return f ? addF(x[0], x[1]) : Value(arith::AddIOp::create(b_, x[0], x[1]));
    case OpCode::Sub: return f ? subF(x[0], x[1]) : Value(arith::SubIOp::create(b_, x[0], x[1]));
    case OpCode::Mul: return f ? mulF(x[0], x[1]) : Value(arith::MulIOp::create(b_, x[0], x[1]));
    case OpCode::Div: return f ? Value(arith::DivFOp::create(b_, x[0], x[1])) : Value(arith::DivSIOp::create(b_, x[0], x[1]));
    case OpCode::Rem: return f ? Value(arith::RemFOp::create(b_, x[0], x[1])) : Value(arith::RemSIOp::create(b_, x[0], x[1]));
    case OpCode::Min: return f ? Value(arith::MinimumFOp::create(b_, x[0], x[1])) : Value(arith::MinSIOp::create(b_, x[0], x[1]));
    case OpCode::Max: return f ? Value(arith::MaximumFOp::create(b_, x[0], x[1])) : Value(arith::MaxSIOp::create(b_, x[0], x[1]));
    case OpCode::And: return arith::AndIOp::create(b_, x[0], x[1]);
    case OpCode::Or: return arith::OrIOp::create(b_, x[0], x[1]);
    case OpCode::Select: return arith::SelectOp::create(b_, x[0], x[1], x[2]);
    case OpCode::CmpEq: case OpCode::CmpNe: case OpCode::CmpLt:
    case OpCode::CmpLe: case OpCode::CmpGt: case OpCode::CmpGe: {
      static const std::map<OpCode, std::pair<arith::CmpFPredicate, arith::CmpIPredicate>> preds = {
          {OpCode::CmpEq, {arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq}},
          {OpCode::CmpNe, {arith::CmpFPredicate::UNE, arith::CmpIPredicate::ne}},
          {OpCode::CmpLt, {arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt}},
          {OpCode::CmpLe, {arith::CmpFPredicate::OLE, arith::CmpIPredicate::sle}},
          {OpCode::CmpGt, {arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt}},
          {OpCode::CmpGe, {arith::CmpFPredicate::OGE, arith::CmpIPredicate::sge}},
      };
      auto [fp, ip] = preds.at(code);
      if (f) return arith::CmpFOp::create(b_, fp, x[0], x[1]);
      return arith::CmpIOp::create(b_, ip, x[0], x[1]);
    }
    default: return {};
  }
}

std::optional<float> KernelEmitter::reciprocalOfDivisor(const kir::Op& op, int id) const {
  if (op.code != OpCode::Div || op.type.elem != Dtype::F32) return std::nullopt;
  const kir::Op& divisor = k_.ops[op.operands[1]];
  if (divisor.code != OpCode::ConstFloat) return std::nullopt;
  // Rounded once to f32: within about 1 ulp of the quotient, exact for powers of two. A
  // reciprocal that overflows or is subnormal would not be.
  float r = float(1.0 / divisor.fval);
  if (!std::isnormal(r)) return std::nullopt;
  // Where the quotient reaches a comparison or a conversion to an integer, an ulp can flip the
  // outcome (41 * RN(1/41) < 1): those keep the correctly rounded division.
  // Values flow through operands, and through variables (VarWrite to its VarInit, read back by
  // VarRead, possibly earlier in a loop): iterate until nothing new is reached.
  std::vector<bool> reached(k_.ops.size(), false);
  reached[id] = true;
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t u = 0; u < k_.ops.size(); ++u) {
      const kir::Op& user = k_.ops[u];
      if (reached[u]) continue;
      bool uses = user.value >= 0 && reached[user.value];
      for (int o : user.operands) uses = uses || (o >= 0 && reached[o]);
      if (user.code == OpCode::VarRead) uses = reached[user.ival];
      if (!uses) continue;
      bool toInteger = user.code == OpCode::Cast && !kir::isFloat(user.type.elem);
      bool compares = user.code >= OpCode::CmpEq && user.code <= OpCode::CmpGe;
      if (toInteger || compares) return std::nullopt;
      reached[u] = grew = true;
      if (user.code == OpCode::VarWrite && !reached[user.ival]) reached[user.ival] = true;
    }
  }
  return r;
}

LogicalResult KernelEmitter::emitElementwise(const kir::Op& op, int id) {
  // Operand dtype: what the arithmetic runs in (the result type, except for casts, compares
  // and selects, whose operands carry their own).
  Dtype operandType = op.type.elem;
  if (op.code == OpCode::Cast || (op.code >= OpCode::CmpEq && op.code <= OpCode::CmpGe))
    operandType = k_.ops[op.operands[0]].type.elem;
  if (op.code == OpCode::Select) operandType = op.type.elem;

  // A division by a constant is a multiplication by the constant's reciprocal (see
  // reciprocalOfDivisor): a correctly rounded division is a long sequence with a slow path behind
  // a branch (div.rn.f32), on a row's dependent path (mean = sum / D, D = 3072).
  OpCode code = op.code;
  std::optional<float> recip = reciprocalOfDivisor(op, id);
  const bool byConstant = recip.has_value();
  auto reciprocal = [&](Type like) { return splat(like, b_.getF32FloatAttr(*recip)); };
  if (byConstant) code = OpCode::Mul;

  RegValue& out = values_[id];
  if (!op.type.isVector()) {
    SmallVector<Value> xs;
    for (int o : op.operands) xs.push_back(values_[o].scalar);
    if ((op.code == OpCode::Div || op.code == OpCode::Rem) && !kir::isFloat(operandType))
      if (Value narrow = narrowDivide(op, xs[0], xs[1])) {
        out.scalar = narrow;
        return success();
      }
    // Mixed i32/i64 scalar operands were promoted by the frontend's typing; make them agree.
    if (!kir::isFloat(operandType) && op.code != OpCode::Cast && op.code != OpCode::Select)
      for (Value& x : xs)
        if (x.getType().isInteger(32) && operandType == Dtype::I64) x = toI64(x);
    if (byConstant) xs[1] = reciprocal(xs[0].getType());
    out.scalar = applyScalar(code, operandType, xs, op.type.elem);
    if (!out.scalar) {
      error(op) << "operation " << kir::opName(op.code) << " is not supported by the code generator";
      return failure();
    }
    return success();
  }
  Layout l = layoutFor(op.type.length);
  for (int64_t c = 0; c < chunks_; ++c) {
    SmallVector<Value> xs;
    for (int o : op.operands) {
      const RegValue& v = values_[o];
      Type chunk = chunkType(k_.ops[o].type.elem, l.perThread);
      xs.push_back(v.isVector() ? v.chunks[c] : broadcast(v.scalar, chunk));
    }
    if (byConstant) xs[1] = reciprocal(xs[0].getType());
    // A vector divided by a scalar or size (the prologue's token positions by pos_div, then S):
    // in 32 bits where that is exact. By a constant it stays 64-bit, where LLVM makes it a
    // multiply-high and the packers' registers were fewer (rowDigit).
    Value r;
    if ((op.code == OpCode::Div || op.code == OpCode::Rem) && !kir::isFloat(operandType) &&
        k_.ops[op.operands[1]].code != OpCode::ConstInt)
      r = narrowDivide(op, xs[0], xs[1]);
    if (!r) r = applyScalar(code, operandType, xs, op.type.elem);
    if (!r) {
      error(op) << "operation " << kir::opName(op.code) << " is not supported by the code generator";
      return failure();
    }
    out.chunks.push_back(r);
  }
  return success();
}

}  // namespace mxfp6::codegen::detail
