// MXFP6 in integer ALU code (specs/mxfp6.md), the path for gfx942 and sm_90, which have no FP6
// instructions. All arithmetic is on the bf16 bit patterns, so it is exact on every target and
// independent of the denormal mode.
//
// Scale of a 32-element block (amax = the largest |bf16| bit pattern; NaN/Inf sort above
// every finite value as integers):
//   amax >= 0x7F80 -> 0xFF;  E = amax >> 7;  E == 0 -> 0x00
//   s = E - 127 - EMAX (+ (m7 > RC) for RCEIL, + (m7 >= EV) for EVEN), clamp to [-127, 127], + 127
//
// Element code of x under scale byte S, with x = M * 2^k exactly (M the 8-bit significand):
//   normal:    M = 0x80 | m7, k = Ex - 7 - S      subnormal: M = m7, k = 1 - 7 - S
//   e  = floor_log2(M) + k                       (the exponent of y = x * 2^-(S-127))
//   qe = max(e, EMIN) - MB;  r = RNE(M * 2^(k - qe))
//   cm = (max(e - EMIN + 1, 0) << MB) + r - (e >= EMIN ? 1 << MB : 0)
//   code = min(cm, 31) | sign << 5               (S == 0xFF: sign | 0x1F)
// The shift k - qe is at most 3 to the left (small subnormal significands) and clamped at 16 to
// the right, where M < 2^8 rounds to 0 anyway.
//
// gfx950 encodes and packs a whole block in one instruction: pack6(mx_encode(v, s)) with 32
// elements per thread becomes v_cvt_scalef32_pk32_{fp6,bf6}_bf16 (the scale operand is the f32
// whose exponent field is the scale byte). Blocks with scale 0xFF take the spec's sign|0x1F codes
// instead, which the instruction does not define.

#include "compiler/codegen/kernel_emitter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"

namespace mxfp6::codegen::detail {
namespace {

struct FormatConstants {
  int64_t emax;   // exponent of the largest normal element
  int64_t emin;   // exponent of the smallest normal element
  int64_t mbits;  // mantissa bits
  int64_t rceil;  // RCEIL threshold on the amax's 7 mantissa bits
  int64_t even;   // EVEN threshold
};

FormatConstants constantsFor(kir::MxFormat f) {
  if (f == kir::MxFormat::E2M3) return {2, 0, 3, 112, 120};
  return {4, -2, 2, 96, 112};
}

/// Small helper for i32 vector arithmetic of one shape.
class IntMath {
 public:
  IntMath(ImplicitLocOpBuilder& b, Type shape) : b_(b), ty_(shape) {}
  Value c(int64_t v) {
    Type elem = getElementTypeOrSelf(ty_);
    auto attr = b_.getIntegerAttr(elem, v);
    if (auto vt = dyn_cast<VectorType>(ty_)) return arith::ConstantOp::create(b_, DenseElementsAttr::get(vt, attr));
    return arith::ConstantOp::create(b_, attr);
  }
  Value add(Value a, Value x) { return arith::AddIOp::create(b_, a, x); }
  Value sub(Value a, Value x) { return arith::SubIOp::create(b_, a, x); }
  Value band(Value a, Value x) { return arith::AndIOp::create(b_, a, x); }
  Value bor(Value a, Value x) { return arith::OrIOp::create(b_, a, x); }
  Value shl(Value a, Value x) { return arith::ShLIOp::create(b_, a, x); }
  Value shr(Value a, Value x) { return arith::ShRUIOp::create(b_, a, x); }
  Value max(Value a, Value x) { return arith::MaxSIOp::create(b_, a, x); }
  Value min(Value a, Value x) { return arith::MinSIOp::create(b_, a, x); }
  Value cmp(arith::CmpIPredicate p, Value a, Value x) { return arith::CmpIOp::create(b_, p, a, x); }
  Value sel(Value cond, Value a, Value x) { return arith::SelectOp::create(b_, cond, a, x); }
  Value zext(Value bool_) { return arith::ExtUIOp::create(b_, ty_, bool_); }

 private:
  ImplicitLocOpBuilder& b_;
  Type ty_;
};

}  // namespace

LogicalResult KernelEmitter::emitMxScale(const kir::Op& op, int id) {
  FormatConstants fc = constantsFor(kir::mxFormat(op.ival));
  kir::MxScaleMode mode = kir::mxScaleMode(op.ival);
  int64_t perThread = layoutFor(k_.ops[op.operands[0]].type.length).perThread;
  for (Value chunk : values_[op.operands[0]].chunks) {
    Type i32v = sameShape(chunk, b_.getI32Type());
    IntMath m(b_, i32v);
    Value bits = arith::ExtUIOp::create(b_, i32v, arith::BitcastOp::create(b_, sameShape(chunk, b_.getI16Type()), chunk));
    Value magnitude = m.band(bits, m.c(0x7FFF));
    Value amax = groupReduceChunk(OpCode::ReduceMax, magnitude, perThread, 32);

    IntMath s(b_, amax.getType());
    Value exponent = s.shr(amax, s.c(7));
    Value mantissa = s.band(amax, s.c(0x7F));
    Value scale = s.sub(exponent, s.c(127 + fc.emax));
    if (mode == kir::MxScaleMode::Rceil) scale = s.add(scale, s.zext(s.cmp(arith::CmpIPredicate::sgt, mantissa, s.c(fc.rceil))));
    if (mode == kir::MxScaleMode::Even) scale = s.add(scale, s.zext(s.cmp(arith::CmpIPredicate::sge, mantissa, s.c(fc.even))));
    Value byte = s.add(s.min(s.max(scale, s.c(-127)), s.c(127)), s.c(127));
    byte = s.sel(s.cmp(arith::CmpIPredicate::eq, exponent, s.c(0)), s.c(0), byte);
    byte = s.sel(s.cmp(arith::CmpIPredicate::sge, amax, s.c(0x7F80)), s.c(0xFF), byte);
    values_[id].chunks.push_back(arith::TruncIOp::create(b_, sameShape(byte, b_.getI8Type()), byte));
  }
  return success();
}

bool KernelEmitter::usesNativeMxPack(int encodeId) const {
  if (target_.chip != "gfx950") return false;
  const kir::Op& enc = k_.ops[encodeId];
  if (layoutFor(enc.type.length).perThread % 32 != 0) return false;
  int packUses = 0, otherUses = 0;
  for (const kir::Op& op : k_.ops) {
    for (int o : op.operands)
      if (o == encodeId) ++(op.code == OpCode::Pack6 ? packUses : otherUses);
    if (op.value == encodeId) ++otherUses;
  }
  return packUses > 0 && otherUses == 0;
}

LogicalResult KernelEmitter::emitMxEncode(const kir::Op& op, int id) {
  // Its Pack6 emits the native instruction instead; the codes never exist on their own.
  if (usesNativeMxPack(id)) return success();
  FormatConstants fc = constantsFor(kir::mxFormat(op.ival));
  Layout scales = layoutFor(k_.ops[op.operands[1]].type.length);
  for (int64_t c = 0; c < chunks_; ++c) {
    Value chunk = values_[op.operands[0]].chunks[c];
    Value scaleChunk = values_[op.operands[1]].chunks[c];
    int64_t perThread = cast<VectorType>(chunk.getType()).getNumElements();
    Type i32v = sameShape(chunk, b_.getI32Type());
    IntMath m(b_, i32v);
    // Each element's block scale, spread to the element's position.
    Value scale8;
    if (scales.replicas > 1) {
      scale8 = broadcast(vector::ExtractOp::create(b_, scaleChunk, ArrayRef<int64_t>{0}),
                         VectorType::get({perThread}, b_.getI8Type()));
    } else {
      SmallVector<int64_t> mask;
      for (int64_t e = 0; e < perThread; ++e) mask.push_back(e / 32);
      scale8 = vector::ShuffleOp::create(b_, scaleChunk, scaleChunk, mask);
    }
    Value scale = arith::ExtUIOp::create(b_, i32v, scale8);
    Value bits = arith::ExtUIOp::create(b_, i32v, arith::BitcastOp::create(b_, sameShape(chunk, b_.getI16Type()), chunk));

    Value sign = m.shl(m.shr(bits, m.c(15)), m.c(5));
    Value ex = m.band(m.shr(bits, m.c(7)), m.c(0xFF));
    Value m7 = m.band(bits, m.c(0x7F));
    Value subnormal = m.cmp(arith::CmpIPredicate::eq, ex, m.c(0));
    Value sig = m.sel(subnormal, m7, m.bor(m7, m.c(0x80)));
    Value k = m.sub(m.sub(m.sel(subnormal, m.c(1), ex), m.c(7)), scale);
    Value clz = LLVM::CountLeadingZerosOp::create(b_, i32v, sig, false);
    Value e = m.add(m.sub(m.c(31), clz), k);
    Value qe = m.sub(m.max(e, m.c(fc.emin)), m.c(fc.mbits));
    Value shift = m.sub(qe, k);
    // Left shift (exact) for shift <= 0; round half to even for shift > 0.
    Value left = m.shl(sig, m.max(m.sub(m.c(0), shift), m.c(0)));
    Value right = m.min(m.max(shift, m.c(1)), m.c(16));
    Value quotient = m.shr(sig, right);
    Value remainder = m.band(sig, m.sub(m.shl(m.c(1), right), m.c(1)));
    Value half = m.shl(m.c(1), m.sub(right, m.c(1)));
    Value up = arith::OrIOp::create(
        b_, m.cmp(arith::CmpIPredicate::ugt, remainder, half),
        arith::AndIOp::create(b_, m.cmp(arith::CmpIPredicate::eq, remainder, half),
                              m.cmp(arith::CmpIPredicate::ne, m.band(quotient, m.c(1)), m.c(0))));
    Value rounded = m.add(quotient, m.zext(up));
    Value r = m.sel(m.cmp(arith::CmpIPredicate::sle, shift, m.c(0)), left, rounded);
    Value normal = m.cmp(arith::CmpIPredicate::sge, e, m.c(fc.emin));
    Value cm = m.sub(m.add(m.shl(m.max(m.add(m.sub(e, m.c(fc.emin)), m.c(1)), m.c(0)), m.c(fc.mbits)), r),
                     m.sel(normal, m.c(1 << fc.mbits), m.c(0)));
    Value code = m.min(cm, m.c(31));
    code = m.sel(m.cmp(arith::CmpIPredicate::eq, sig, m.c(0)), m.c(0), code);
    code = m.sel(m.cmp(arith::CmpIPredicate::eq, scale, m.c(0xFF)), m.c(0x1F), code);
    code = m.bor(code, sign);
    values_[id].chunks.push_back(arith::TruncIOp::create(b_, sameShape(code, b_.getI8Type()), code));
  }
  return success();
}

Value KernelEmitter::packCodes(Value codes) {
  Type i32 = b_.getI32Type();
  Type i8 = b_.getI8Type();
  IntMath m(b_, i32);
  int64_t n = cast<VectorType>(codes.getType()).getNumElements();
  Value out = splat(VectorType::get({n / 4 * 3}, i8), cast<TypedAttr>(b_.getZeroAttr(i8)));
  for (int64_t g = 0; g < n / 4; ++g) {
    Value word = m.c(0);
    for (int64_t i = 0; i < 4; ++i) {
      Value code = arith::ExtUIOp::create(b_, i32, vector::ExtractOp::create(b_, codes, ArrayRef<int64_t>{4 * g + i}));
      word = m.bor(word, m.shl(code, m.c(6 * i)));
    }
    for (int64_t byte = 0; byte < 3; ++byte) {
      Value v = arith::TruncIOp::create(b_, i8, m.shr(word, m.c(8 * byte)));
      out = vector::InsertOp::create(b_, v, out, ArrayRef<int64_t>{3 * g + byte});
    }
  }
  return out;
}

Value KernelEmitter::nativeMxPack(const kir::Op& encode, int64_t c) {
  Value chunk = values_[encode.operands[0]].chunks[c];
  Value scales = values_[encode.operands[1]].chunks[c];
  int64_t blocks = cast<VectorType>(chunk.getType()).getNumElements() / 32;
  Type i32 = b_.getI32Type(), i8 = b_.getI8Type();
  IntMath m(b_, i32);
  auto bytesType = VectorType::get({24}, i8);
  Value out = splat(VectorType::get({blocks * 24}, i8), cast<TypedAttr>(b_.getZeroAttr(i8)));
  for (int64_t blk = 0; blk < blocks; ++blk) {
    Value block = vector::ExtractStridedSliceOp::create(b_, chunk, ArrayRef<int64_t>{blk * 32}, ArrayRef<int64_t>{32},
                                                        ArrayRef<int64_t>{1});
    Value byte = arith::ExtUIOp::create(b_, i32, vector::ExtractOp::create(b_, scales, ArrayRef<int64_t>{blk}));
    Value scale = arith::BitcastOp::create(b_, b_.getF32Type(), m.shl(byte, m.c(23)));
    auto words = VectorType::get({6}, i32);
    Value packed = kir::mxFormat(encode.ival) == kir::MxFormat::E2M3
                       ? Value(ROCDL::CvtScaleF32Pk32Fp6Bf16Op::create(b_, words, block, scale))
                       : Value(ROCDL::CvtScaleF32Pk32Bf6Bf16Op::create(b_, words, block, scale));
    Value bytes = vector::BitCastOp::create(b_, bytesType, packed);
    // NaN/Inf block: every code is sign | 0x1F.
    Type i32v = VectorType::get({32}, i32);
    IntMath v(b_, i32v);
    Value bits = arith::ExtUIOp::create(b_, i32v, arith::BitcastOp::create(b_, VectorType::get({32}, b_.getI16Type()), block));
    Value nanCodes = v.bor(v.shl(v.shr(bits, v.c(15)), v.c(5)), v.c(0x1F));
    Value nanBytes = packCodes(arith::TruncIOp::create(b_, VectorType::get({32}, i8), nanCodes));
    Value isNan = m.cmp(arith::CmpIPredicate::eq, byte, m.c(0xFF));
    bytes = arith::SelectOp::create(b_, isNan, nanBytes, bytes);
    out = vector::InsertStridedSliceOp::create(b_, bytes, out, ArrayRef<int64_t>{blk * 24}, ArrayRef<int64_t>{1});
  }
  return out;
}

LogicalResult KernelEmitter::emitPack6(const kir::Op& op, int id) {
  if (usesNativeMxPack(op.operands[0])) {
    for (int64_t c = 0; c < chunks_; ++c) values_[id].chunks.push_back(nativeMxPack(k_.ops[op.operands[0]], c));
    return success();
  }
  for (Value chunk : values_[op.operands[0]].chunks) values_[id].chunks.push_back(packCodes(chunk));
  return success();
}

}  // namespace mxfp6::codegen::detail
