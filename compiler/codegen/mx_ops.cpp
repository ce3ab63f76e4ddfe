// MXFP6 in ALU code (docs/mxfp6-format.md), the path for gfx942, which has no FP6 or FP8 conversion
// instructions (sm_90 converts through FP8, gfx950 natively: both below).
//
// Scale of a 32-element block (amax = the largest |bf16| bit pattern; NaN/Inf sort above
// every finite value as integers):
//   amax >= 0x7F80 -> 0xFF;  E = amax >> 7;  E == 0 -> 0x00
//   s = E - 127 - EMAX (+ (m7 > RC) for RCEIL, + (m7 >= EV) for EVEN), clamp to [-127, 127], + 127
//
// Element code of a bf16 x under scale byte S (y = x * 2^(127-S)): integer ops on f32 bit
// patterns (u32 lanes) and two FMAs, which do the normalisation and the rounding. Per block,
// with k = S < 128 ? 7 : 0 and sh = 23 - MB:
//   K = k << 23;   L = (EMIN + S + k) << 23;   H = S == 0xFF ? 0 : (L >> sh) + 31
// Per element, bits = the bf16 zero-extended (16 ops, the first shared with the amax):
//   t    = (bits & 0x7FFF) << 16                               the f32 bits of |x|
//   xa   = umin(t + K, bits(fma(f32(t + 2^23), 2^7, -2^-119)))  |x| * 2^k
//   A    = umax(xa, L) & 0xFF800000
//   c    = umin(bits(fma(f32(xa), 2^(MB-23), f32(A))) - A + (A >> sh), H)
//   code = c + 31 - H + ((bits >> 10) & 0x20)
// Why this is the spec's encode, bit for bit and whatever the f32 denormal mode:
//  - xa = |x| * 2^k as a normal f32 (or 0) wherever the code depends on it. For a normal x it is
//    t + K. A bf16 subnormal has t + 2^23 = 2^-126 + |x| (exponent field 1), so the first FMA
//    returns exactly |x| * 2^7, normal or 0; for a normal x it returns (2|x| - 2^-126) * 2^7,
//    which is at least t + K, so the unsigned min picks the right operand without a compare.
//    k = 7 (S < 128) is what makes subnormals and L normal at small S; k = 0 keeps L finite at
//    large S, where a subnormal x keeps its denormal t (y < 2^-120: code 0, read as 0 or not).
//  - L is the smallest normal element in xa's units (2^(EMIN + S - 127) * 2^k) and A the power
//    of two of max(xa, L). The second FMA adds xa * 2^(MB-23) < 2^(MB-22) * A to A, staying in
//    A's binade, so it rounds to nearest even at 2^(max(e, L) - MB) in xa's units: the element
//    grid step 2^(max(e_y, EMIN) - MB). Its bits minus A's are r = RNE(y / step), 0..2^(MB+1),
//    and (A - L) >> sh = (max(e_y, EMIN) - EMIN) << MB, so c - (L >> sh) is the spec's cm (a
//    carry of r rolls into the exponent). The min with H saturates at 31.
//  - Out of range, the unsigned ops saturate: at S < 128 an x >= 2^121 overflows t + K into the
//    sign bit or an Inf/NaN pattern while the first FMA gives +Inf (or NaN, of either sign), so
//    xa is +Inf, a NaN or has the sign bit; then A is Inf or has the sign bit too, and c is at
//    least 255 << MB > H (L <= 134 << 23 there). At S >= 128 a NaN x reaches the second FMA as
//    a NaN and gets a quiet NaN back, so c >= 2^22 > H whatever its sign. A NaN block
//    (S = 0xFF) has H = 0: every code is sign | 0x1F.
//  - Denormals: the first FMA reads one only for a NaN/Inf x (t + 2^23 wraps to -0 or a negative
//    denormal; its negative result loses the min either way), the second only for a subnormal x
//    under S >= 128 (code 0 either way); neither returns one. Flushed or kept, same codes.
//  - An Inf x with a finite scale byte (which mx_scale never gives: an Inf makes the block 0xFF)
//    is +-2^128 without its leading one: saturated below S = 252 (E2M3) or 250 (E3M2), smaller
//    codes above. The CPU encoder saturates it always.
// tests/interp/mxfp6_alu_encode_test.cpp runs this sequence against the CPU encoder for every
// bf16 pattern, scale byte and format, with denormals kept and flushed and every NaN result.
//
// sm_90 (any NVIDIA chip from sm_89) has FP8 conversions, and an FP6 element is an FP8 element
// of the same mantissa width in a shifted exponent range: E2M3 (bias 1) is E4M3 (bias 7) scaled by
// 2^-6, E3M2 (bias 3) is E5M2 (bias 15) scaled by 2^-12 -- the smallest normals (1 and 2^-6; 2^-2
// and 2^-14) and the subnormal steps (2^-3 and 2^-9; 2^-4 and 2^-16) line up, so the FP8 round to
// nearest even is the FP6 one. Per element (half an instruction for the conversion of a pair):
//   y    = f32(x) * F          F = 2^(127 - S - 6) (E2M3) or 2^(127 - S - 12) (E3M2), exact: a
//                              power of two (denormal for the largest S; f32 denormals are kept,
//                              the NVPTX multiply has no .ftz), and where y itself is denormal the
//                              code is 0 either way; F = +Inf for a NaN block (S = 0xFF), so every
//                              y is an Inf or a NaN there
//   a    = min(|y|, MAX * 2^-6 or 2^-12)   saturates; min (PTX min.f32) of a NaN is the bound: an
//                                          Inf or NaN y gives the spec's 0x1F
//   byte = cvt.rn.satfinite.{e4m3,e5m2}x2(a): the FP6 magnitude code in bits 0-4 (|a| <= MAX
//          keeps the sign and the two top exponent bits clear)
//   code = byte | sign(x) << 5
// The last line runs on words of four codes, the signs gathered by one byte permute (prmt) of
// the four bf16: the scale's amax, these codes and pack6 stay on 32-bit words throughout.
// Where the scale is the RCEIL scale of the encoded elements themselves (mx_encode(v,
// mx_scale(v, FMT, RCEIL))), the min is dropped: RCEIL rounds the scale up exactly when the amax's
// mantissa exceeds MAX's, so |x| * 2^-s <= amax * 2^-s <= MAX for every element of a finite block
// (and the scale's clamps only lower it), and the conversion of a value at most the scaled MAX
// rounds to at most MAX (MAX lies on the grid). A NaN block (S = 0xFF) then converts garbage;
// its words are replaced per block by an integer multiply-add, word * (S != 0xFF) + (S == 0xFF ?
// 0x1F1F1F1F : 0), before the signs. That trades an ALU min per element for a multiply-add per
// four, where the packers' ALU pipe is their busiest.
// tests/interp/mxfp6_fp8_encode_test.cpp runs this sequence, with an independent FP8 rounding,
// against the CPU encoder for every bf16 pattern, scale byte and format.
//
// gfx950 encodes and packs a whole block in one instruction: pack6(mx_encode(v, s)) with 32
// elements per thread becomes v_cvt_scalef32_pk32_{fp6,bf6}_bf16 (the scale operand is the f32
// whose exponent field is the scale byte). Blocks with scale 0xFF take the spec's sign|0x1F codes
// instead, which the instruction does not define.

#include <cmath>

#include "compiler/codegen/kernel_emitter.h"

#include <bit>
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
  Value umax(Value a, Value x) { return arith::MaxUIOp::create(b_, a, x); }
  Value umin(Value a, Value x) { return arith::MinUIOp::create(b_, a, x); }
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
    Value amax = blockAmax(chunk, perThread);

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

Value KernelEmitter::blockAmax(Value chunk, int64_t perThread) {
  if (target_.backend != Backend::NVVM || perThread % 2 != 0) {
    Type i32v = sameShape(chunk, b_.getI32Type());
    IntMath m(b_, i32v);
    Value bits = arith::ExtUIOp::create(b_, i32v, arith::BitcastOp::create(b_, sameShape(chunk, b_.getI16Type()), chunk));
    return groupReduceChunk(OpCode::ReduceMax, m.band(bits, m.c(0x7FFF)), perThread, 32);
  }
  // NVIDIA: max.NaN.xorsign.abs.bf16x2 (sm_86+) on pairs, in a tree: each lane's larger
  // magnitude (its sign bit, the xor of the inputs', is dropped at the end; subnormals are
  // compared as they are), or the canonical NaN (0x7FFF) if either is a NaN. So the result is
  // 0x7FFF (>= 0x7F80) for a block with a NaN, 0x7F80 for one with an Inf and no NaN, and
  // otherwise the largest magnitude's own bits: wherever the scale depends on the bits, they
  // are the integer maximum's. Half an instruction per element instead of about three.
  Type i32 = b_.getI32Type();
  Type pair = VectorType::get({2}, b_.getBF16Type());
  int64_t words = perThread / 2, perGroup = std::min<int64_t>(perThread, 32) / 2;
  Value asWords = vector::BitCastOp::create(b_, VectorType::get({words}, i32), chunk);
  IntMath m(b_, i32);
  SmallVector<Value> partials;
  for (int64_t g = 0; g < words; g += perGroup) {
    SmallVector<Value> level;
    for (int64_t w = 0; w < perGroup; ++w)
      level.push_back(LLVM::BitcastOp::create(b_, pair, vector::ExtractOp::create(b_, asWords, ArrayRef<int64_t>{g + w})));
    while (level.size() > 1) {
      SmallVector<Value> next;
      for (size_t i = 0; i + 1 < level.size(); i += 2)
        next.push_back(LLVM::CallIntrinsicOp::create(b_, pair, b_.getStringAttr("llvm.nvvm.fmax.nan.xorsign.abs.bf16x2"),
                                                     ValueRange{level[i], level[i + 1]})
                           .getResult(0));
      if (level.size() % 2) next.push_back(level.back());
      level = std::move(next);
    }
    Value bits = LLVM::BitcastOp::create(b_, i32, level[0]);
    Value low = m.band(bits, m.c(0x7FFF)), high = m.band(m.shr(bits, m.c(16)), m.c(0x7FFF));
    partials.push_back(m.umax(low, high));
  }
  Value amax = vector::FromElementsOp::create(b_, VectorType::get({int64_t(partials.size())}, i32), partials);
  // A block spread over 32 / perThread lanes: the lanes' maxima meet through shuffles.
  return perThread >= 32 ? amax : groupReduceChunk(OpCode::ReduceMax, amax, 1, 32 / perThread);
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

Value KernelEmitter::spreadToBlocks(Value perBlock, const Layout& scales, int64_t lanes, int64_t lanesPerBlock) {
  Type ty = VectorType::get({lanes}, getElementTypeOrSelf(perBlock.getType()));
  // A thread with part of one block holds its one scale (replicated); else one per 32 elements.
  if (scales.replicas > 1) return broadcast(vector::ExtractOp::create(b_, perBlock, ArrayRef<int64_t>{0}), ty);
  SmallVector<int64_t> mask;
  for (int64_t e = 0; e < lanes; ++e) mask.push_back(e / lanesPerBlock);
  return vector::ShuffleOp::create(b_, perBlock, perBlock, mask);
}

bool KernelEmitter::isRceilScaleOf(int scaleId, int valueId) const {
  const kir::Op& scale = k_.ops[scaleId];
  return scale.code == OpCode::MxScale && kir::mxScaleMode(scale.ival) == kir::MxScaleMode::Rceil &&
         scale.operands[0] == valueId;
}

KernelEmitter::EncodeInputs KernelEmitter::encodeInputs(const kir::Op& encode, int64_t c) {
  Value chunk = values_[encode.operands[0]].chunks[c];
  Value scaleChunk = values_[encode.operands[1]].chunks[c];
  Value scale = arith::ExtUIOp::create(b_, sameShape(scaleChunk, b_.getI32Type()), scaleChunk);
  return {chunk, cast<VectorType>(chunk.getType()).getNumElements(), scale};
}

LogicalResult KernelEmitter::emitMxEncodeFp8(const kir::Op& op, int id) {
  const bool e2m3 = kir::mxFormat(op.ival) == kir::MxFormat::E2M3;
  const int64_t shift = e2m3 ? 6 : 12;
  const float bound = e2m3 ? std::ldexp(7.5f, -6) : std::ldexp(28.0f, -12);
  const char* convert = e2m3 ? "llvm.nvvm.ff.to.e4m3x2.rn" : "llvm.nvvm.ff.to.e5m2x2.rn";
  Layout scales = layoutFor(k_.ops[op.operands[1]].type.length);
  Type i32 = b_.getI32Type(), f32 = b_.getF32Type(), i16 = b_.getI16Type();
  const bool bounded = isRceilScaleOf(op.operands[1], op.operands[0]);
  for (int64_t c = 0; c < chunks_; ++c) {
    auto [chunk, perThread, scale] = encodeInputs(op, c);

    // Per block: the factor F as f32 bits (normal, or denormal below 2^-126; +Inf for a NaN
    // block, whose codes the saturation then makes sign | 0x1F with no op per element; bounded,
    // a NaN block's words are replaced below instead).
    IntMath s(b_, scale.getType());
    Value exponent = s.sub(s.c(127 - shift), scale);
    Value normal = s.cmp(arith::CmpIPredicate::sge, exponent, s.c(-126));
    Value normalBits = s.shl(s.add(exponent, s.c(127)), s.c(23));
    Value denormalBits = s.shl(s.c(1), s.max(s.add(exponent, s.c(149)), s.c(0)));
    Value factor = s.sel(normal, normalBits, denormalBits);
    Value nanBlock = s.cmp(arith::CmpIPredicate::eq, scale, s.c(0xFF));
    if (!bounded) factor = s.sel(nanBlock, s.c(0x7F800000), factor);
    Type f32v = VectorType::get({perThread}, f32), i32v = VectorType::get({perThread}, i32);
    Type words = VectorType::get({perThread / 4}, i32);
    Value factorF = arith::BitcastOp::create(b_, f32v, spreadToBlocks(factor, scales, perThread, 32));

    // Per element: min(|x * F|, bound) through NVVM's fmin (the non-NaN operand: a NaN, such as
    // 0 * Inf in a NaN block, gives the bound; not arith.minnumf, which MLIR lowers to
    // libdevice's __nv_fminf, an undefined function wherever no CUDA toolkit is installed),
    // converted in pairs, the first operand to the high byte: FP8 bytes 0.0eeeee = the FP6
    // magnitude codes (|a| <= MAX keeps the top exponent bits clear).
    // Bounded: |x| * F alone, the absolute value a free operand modifier of the multiply. Through
    // llvm.nvvm.fabs: the NVVM lowering sends llvm.intr.fabs to libdevice, and LLVM turns a
    // sign mask or llvm.fabs of the widened bf16 into a mask after the widening's shift, an ALU
    // op more per element.
    Value x = castValue(chunk, Dtype::BF16, Dtype::F32);
    Value magnitude;
    if (bounded) {
      SmallVector<Value> absX;
      for (int64_t e = 0; e < perThread; ++e)
        absX.push_back(LLVM::CallIntrinsicOp::create(b_, f32, b_.getStringAttr("llvm.nvvm.fabs.f32"),
                                                     ValueRange{vector::ExtractOp::create(b_, x, ArrayRef<int64_t>{e})})
                           .getResult(0));
      magnitude = arith::MulFOp::create(b_, vector::FromElementsOp::create(b_, f32v, absX), factorF);
    } else {
      IntMath m(b_, i32v);
      Value y = arith::MulFOp::create(b_, x, factorF);
      magnitude = arith::BitcastOp::create(b_, f32v, m.band(arith::BitcastOp::create(b_, i32v, y), m.c(0x7FFFFFFF)));
    }
    Value boundF = bounded ? Value() : arith::ConstantOp::create(b_, b_.getF32FloatAttr(bound)).getResult();
    auto saturated = [&](int64_t e) -> Value {
      Value mag = vector::ExtractOp::create(b_, magnitude, ArrayRef<int64_t>{e});
      if (bounded) return mag;
      return LLVM::CallIntrinsicOp::create(b_, f32, b_.getStringAttr("llvm.nvvm.fmin.f"), ValueRange{mag, boundF})
          .getResult(0);
    };
    SmallVector<Value> pairs;
    for (int64_t e = 0; e < perThread; e += 2)
      pairs.push_back(LLVM::CallIntrinsicOp::create(b_, i16, b_.getStringAttr(convert), ValueRange{saturated(e + 1), saturated(e)})
                          .getResult(0));
    Value fp8 = vector::BitCastOp::create(b_, words, vector::FromElementsOp::create(b_, VectorType::get({perThread / 2}, i16), pairs));
    if (bounded) {
      // A NaN block's words: 0x1F1F1F1F in place of its converted garbage (header). Each op
      // named before its use (kernel_emitter.h: creation order).
      Value keep = s.zext(s.cmp(arith::CmpIPredicate::ne, scale, s.c(0xFF)));
      Value nanWord = s.c(0x1F1F1F1F);
      Value noWord = s.c(0);
      Value nanCodes = s.sel(nanBlock, nanWord, noWord);
      Value kept = arith::MulIOp::create(b_, fp8, spreadToBlocks(keep, scales, perThread / 4, 8));
      Value replaced = spreadToBlocks(nanCodes, scales, perThread / 4, 8);
      fp8 = IntMath(b_, words).add(kept, replaced);
    }

    // Per four elements: their signs, one byte each (0xFF or 0), by a byte permute of the two bf16
    // pairs that replicates the top bit of bytes 1 and 3 of each; bit 5 of the code.
    Value bf16Words = vector::BitCastOp::create(b_, VectorType::get({perThread / 2}, i32), chunk);
    SmallVector<Value> signWords;
    for (int64_t w = 0; w < perThread / 4; ++w) {
      Value low = vector::ExtractOp::create(b_, bf16Words, ArrayRef<int64_t>{2 * w});
      Value high = vector::ExtractOp::create(b_, bf16Words, ArrayRef<int64_t>{2 * w + 1});
      Value selector = arith::ConstantOp::create(b_, b_.getI32IntegerAttr(0xFDB9));
      signWords.push_back(
          LLVM::CallIntrinsicOp::create(b_, i32, b_.getStringAttr("llvm.nvvm.prmt"), ValueRange{low, high, selector})
              .getResult(0));
    }
    IntMath h(b_, words);
    Value signs = h.band(vector::FromElementsOp::create(b_, words, signWords), h.c(0x20202020));
    Value codes = h.bor(fp8, signs);
    values_[id].chunks.push_back(vector::BitCastOp::create(b_, VectorType::get({perThread}, b_.getI8Type()), codes));
  }
  return success();
}

LogicalResult KernelEmitter::emitMxEncode(const kir::Op& op, int id) {
  // Its Pack6 emits the native instruction instead; the codes never exist on their own.
  if (usesNativeMxPack(id)) return success();
  // NVIDIA converts through FP8 four elements at a time; a thread holding another number of
  // elements keeps the ALU path.
  if (target_.backend == Backend::NVVM && layoutFor(op.type.length).perThread % 4 == 0) return emitMxEncodeFp8(op, id);
  FormatConstants fc = constantsFor(kir::mxFormat(op.ival));
  const int64_t gridShift = 23 - fc.mbits;
  Layout scales = layoutFor(k_.ops[op.operands[1]].type.length);
  Type i32 = b_.getI32Type(), f32 = b_.getF32Type();
  for (int64_t c = 0; c < chunks_; ++c) {
    auto [chunk, perThread, scale] = encodeInputs(op, c);

    // Per block, on the scale bytes: K, L, H and 31 - H of the header.
    IntMath s(b_, scale.getType());
    Value small = s.cmp(arith::CmpIPredicate::ult, scale, s.c(128));
    Value scaleUp = s.sel(small, s.c(7 << 23), s.c(0));
    Value floor = s.shl(s.add(scale, s.sel(small, s.c(fc.emin + 7), s.c(fc.emin))), s.c(23));
    Value nanScale = s.cmp(arith::CmpIPredicate::eq, scale, s.c(0xFF));
    Value zero = s.c(0);
    Value finiteBound = s.add(s.shr(floor, s.c(gridShift)), s.c(31));
    Value bound = s.sel(nanScale, zero, finiteBound);
    Value unbias = s.sub(s.c(31), bound);
    // Each block's constants, spread to its elements' positions.
    Type i32v = VectorType::get({perThread}, i32);
    scaleUp = spreadToBlocks(scaleUp, scales, perThread, 32);
    floor = spreadToBlocks(floor, scales, perThread, 32);
    bound = spreadToBlocks(bound, scales, perThread, 32);
    unbias = spreadToBlocks(unbias, scales, perThread, 32);

    // Per element: the header's sequence, op for op.
    IntMath m(b_, i32v);
    Type f32v = VectorType::get({perThread}, f32);
    auto asFloat = [&](Value v) -> Value { return arith::BitcastOp::create(b_, f32v, v); };
    auto fconst = [&](float v) { return splat(f32v, b_.getF32FloatAttr(v)); };
    auto fmaBits = [&](Value a, Value x, Value y) -> Value {
      return arith::BitcastOp::create(b_, i32v, LLVM::FMAOp::create(b_, a, x, y));
    };
    Value bits = arith::ExtUIOp::create(b_, i32v, arith::BitcastOp::create(b_, sameShape(chunk, b_.getI16Type()), chunk));
    Value t = m.shl(m.band(bits, m.c(0x7FFF)), m.c(16));
    Value normalised = fmaBits(asFloat(m.add(t, m.c(1 << 23))), fconst(0x1p7f), fconst(-0x1p-119f));
    Value xa = m.umin(m.add(t, scaleUp), normalised);
    Value binade = m.band(m.umax(xa, floor), m.c(int32_t(0xFF800000u)));
    // The fma's operands named in order (kernel_emitter.h: creation order).
    Value xaF = asFloat(xa);
    Value step = fconst(std::ldexp(1.0f, int(fc.mbits) - 23));
    Value binadeF = asFloat(binade);
    Value rounded = fmaBits(xaF, step, binadeF);
    Value steps = m.sub(rounded, binade);
    Value biased = m.add(steps, m.shr(binade, m.c(gridShift)));
    Value code = m.add(m.umin(biased, bound), unbias);
    code = m.add(code, m.band(m.shr(bits, m.c(10)), m.c(0x20)));
    values_[id].chunks.push_back(arith::TruncIOp::create(b_, sameShape(code, b_.getI8Type()), code));
  }
  return success();
}

namespace {

/// 24-bit groups of four codes (i32 values below 2^24) laid end to end, LSB first: the 3n/4
/// bytes cut into the widest words (i32, i16 or i8) that tile them, bitcast to bytes.
Value cutGroups(ImplicitLocOpBuilder& b, ArrayRef<Value> groups) {
  IntMath m(b, b.getI32Type());
  int64_t n = int64_t(groups.size()) * 4;
  int64_t bytes = n / 4 * 3;
  int64_t width = bytes % 4 == 0 ? 32 : bytes % 2 == 0 ? 16 : 8;
  Type wordType = b.getIntegerType(width);
  auto wordsType = VectorType::get({bytes * 8 / width}, wordType);
  Value words = arith::ConstantOp::create(b, DenseElementsAttr::get(wordsType, b.getIntegerAttr(wordType, 0)));
  for (int64_t w = 0; w < bytes * 8 / width; ++w) {
    int64_t lo = w * width;
    Value word;
    for (int64_t g = lo / 24; g < n / 4 && 24 * g < lo + width; ++g) {
      Value part = 24 * g >= lo ? m.shl(groups[g], m.c(24 * g - lo)) : m.shr(groups[g], m.c(lo - 24 * g));
      word = word ? m.bor(word, part) : part;
    }
    if (width < 32) word = arith::TruncIOp::create(b, wordType, word);
    words = vector::InsertOp::create(b, word, words, ArrayRef<int64_t>{w});
  }
  if (width == 8) return words;
  return vector::BitCastOp::create(b, VectorType::get({bytes}, b.getI8Type()), words);
}

/// The byte image of 6-bit codes (`codes`: i32 lanes, each below 64), element i at bits
/// [6i, 6i+6) LSB first: groups c0 | c1<<6 | c2<<12 | c3<<18.
Value packSmallCodes(ImplicitLocOpBuilder& b, Value codes) {
  IntMath m(b, b.getI32Type());
  int64_t n = cast<VectorType>(codes.getType()).getNumElements();
  SmallVector<Value> groups;
  for (int64_t g = 0; g < n / 4; ++g) {
    Value group = vector::ExtractOp::create(b, codes, ArrayRef<int64_t>{4 * g});
    for (int64_t i = 1; i < 4; ++i)
      group = m.bor(group, m.shl(vector::ExtractOp::create(b, codes, ArrayRef<int64_t>{4 * g + i}), m.c(6 * i)));
    groups.push_back(group);
  }
  return cutGroups(b, groups);
}

/// The same from i32 words holding four codes below 64 in their bytes (NVIDIA: the FP8 path's
/// words). Two steps close the gaps, each a subtraction of the shifted-out part's multiple, so
/// that the FMA pipe takes half the work off the ALU pipe (the packers keep their ALU pipe the
/// busiest): with w = c0 + c1 2^8 + c2 2^16 + c3 2^24 and t = c1 + c3 2^16 (a byte permute),
///   p = w - 192 t = c0 + c1 2^6 + c2 2^16 + c3 2^22       (12-bit pairs in each half)
///   g = p - 0xF000 (p >> 16) = c0 + c1 2^6 + c2 2^12 + c3 2^18
/// one permute (ALU) and three multiplies (FMA pipe; p >> 16 as the high word of p * 2^16) per 4
/// codes, where the mask-and-shift sequence took six ALU ops.
Value packCodeWords(ImplicitLocOpBuilder& b, Value words) {
  IntMath m(b, b.getI32Type());
  Value zero = m.c(0), oddBytes = m.c(0x4341);  // bytes 1, 3 of the word to bytes 0, 2; zeros between
  SmallVector<Value> groups;
  for (int64_t w = 0; w < cast<VectorType>(words.getType()).getNumElements(); ++w) {
    Value word = vector::ExtractOp::create(b, words, ArrayRef<int64_t>{w});
    Value odd = LLVM::CallIntrinsicOp::create(b, b.getI32Type(), b.getStringAttr("llvm.nvvm.prmt"),
                                              ValueRange{word, zero, oddBytes})
                    .getResult(0);
    Value pairs = m.sub(word, arith::MulIOp::create(b, odd, m.c(192)));
    Value high = LLVM::CallIntrinsicOp::create(b, b.getI32Type(), b.getStringAttr("llvm.nvvm.mulhi.ui"),
                                               ValueRange{pairs, m.c(1 << 16)})
                     .getResult(0);
    groups.push_back(m.sub(pairs, arith::MulIOp::create(b, high, m.c(0xF000))));
  }
  return cutGroups(b, groups);
}

}  // namespace

Value KernelEmitter::packCodes(Value codes) {
  // Any u8 codes: only their low 6 bits are packed, as the reference's pack4 does.
  Type i32v = sameShape(codes, b_.getI32Type());
  IntMath m(b_, i32v);
  return packSmallCodes(b_, m.band(arith::ExtUIOp::create(b_, i32v, codes), m.c(0x3F)));
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
  bool encoded = k_.ops[op.operands[0]].code == OpCode::MxEncode;
  for (Value chunk : values_[op.operands[0]].chunks) {
    // emitMxEncode's codes are the truncation of i32 lanes below 64, or (FP8 path) the bytes of
    // i32 words: pack those directly.
    auto trunc = chunk.getDefiningOp<arith::TruncIOp>();
    auto cast = chunk.getDefiningOp<vector::BitCastOp>();
    bool fromWords = cast && getElementTypeOrSelf(cast.getSource().getType()).isInteger(32);
    values_[id].chunks.push_back(!encoded ? packCodes(chunk)
                                 : trunc  ? packSmallCodes(b_, trunc.getIn())
                                 : fromWords ? packCodeWords(b_, cast.getSource())
                                             : packCodes(chunk));
  }
  return success();
}

}  // namespace mxfp6::codegen::detail
