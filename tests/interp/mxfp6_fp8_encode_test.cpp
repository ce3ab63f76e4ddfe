// The element encoder that compiler/codegen/mx_ops.cpp emits for sm_90 (emitMxEncodeFp8), written
// here op for op, against the CPU reference encoder mx::encodeBf16Element (compiler/interp/mxfp6.h,
// itself checked against docs/mxfp6-format.md in mxfp6_test.cpp). The FP8 conversion the GPU runs
// (cvt.rn.satfinite.e4m3x2 / e5m2x2.f32) is modelled by an independent rounding,
// tests/interp/reference_rounding.h, to E4M3 / E5M2 (round to nearest even; the inputs stay below
// the FP8 maxima, so the saturation never acts). The f32 multiply keeps denormals, as the NVPTX
// multiply without .ftz does. Metric: exact equality of the 6-bit code. Bound: 0 differences for
// every bf16 pattern (NaN and Inf included), every scale byte 0..255 and both formats. The
// packing of those codes (packCodeWords) likewise, against the reference pack4, for every word.
// The bounded sequence (the scale is the RCEIL scale of the block: no min), for every scale byte
// and every bf16 pattern a block of that scale can hold, NaN blocks included.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

#include "compiler/interp/mxfp6.h"
#include "tests/interp/reference_rounding.h"

namespace mxfp6::mx {
namespace {

struct Fp8Path {
  int shift;    // FP6 value * 2^-shift = the FP8 value of the same code
  float bound;  // the largest FP6 value, so scaled
  bool e4m3;    // E2M3 through E4M3, E3M2 through E5M2
};

Fp8Path pathFor(ElementFormat format) {
  if (format == ElementFormat::E2M3) return {6, std::ldexp(7.5f, -6), true};
  return {12, std::ldexp(28.0f, -12), false};
}

/// The f32 bits of a finite scale byte's factor F = 2^(127 - S - shift): normal, or denormal.
uint32_t finiteFactorBits(uint32_t scale, const Fp8Path& p) {
  const int exponent = 127 - p.shift - static_cast<int>(scale);
  return exponent >= -126 ? static_cast<uint32_t>(exponent + 127) << 23 : 1u << std::max(exponent + 149, 0);
}

/// The emitted sequence for one element: its scale factor per block, then per element.
uint8_t encodeThroughFp8(uint16_t bits, uint32_t scale, const Fp8Path& p) {
  const uint32_t factorBits = scale == 0xFF ? 0x7F800000u : finiteFactorBits(scale, p);  // +Inf: a NaN block
  const float x = std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
  const float y = x * std::bit_cast<float>(factorBits);
  const float magnitude = std::bit_cast<float>(std::bit_cast<uint32_t>(y) & 0x7FFFFFFFu);
  const float a = std::fmin(magnitude, p.bound);  // the non-NaN operand, as PTX min.f32
  const uint32_t fp8 = p.e4m3 ? interp::testing::referenceRound<3, 4>(a) : interp::testing::referenceRound<2, 5>(a);
  // The sign byte the permute replicates from the bf16's top bit, masked to bit 5.
  const uint32_t sign = (bits & 0x8000) ? 0xFF : 0x00;
  return static_cast<uint8_t>(fp8 | (sign & 0x20));
}

/// The bounded sequence (encode of mx_scale(v, RCEIL)): |x| * F converted with no min, and a NaN
/// block's word replaced by 0x1F1F1F1F through word * (S != 0xFF) + (S == 0xFF ? 0x1F1F1F1F : 0)
/// -- whatever its conversion gave, modelled here as 0x7F7F7F7F (the cvt of an Inf or NaN is an
/// FP8 NaN or maximum, never a code). `saturationNeeded` reports an input above the bound, where
/// this sequence would be wrong and the emitter must keep the min.
uint8_t encodeThroughFp8Bounded(uint16_t bits, uint32_t scale, const Fp8Path& p, bool& saturationNeeded) {
  uint32_t fp8 = 0x7F;
  if (scale != 0xFF) {
    const float magnitude = std::fabs(std::bit_cast<float>(static_cast<uint32_t>(bits) << 16));
    const float y = magnitude * std::bit_cast<float>(finiteFactorBits(scale, p));
    saturationNeeded = saturationNeeded || !(y <= p.bound);
    fp8 = p.e4m3 ? interp::testing::referenceRound<3, 4>(y) : interp::testing::referenceRound<2, 5>(y);
  }
  const uint32_t keep = scale != 0xFF ? 1 : 0;
  const uint32_t byte = fp8 * keep + (keep ? 0 : 0x1F);  // one byte of the word's multiply-add
  const uint32_t sign = (bits & 0x8000) ? 0xFF : 0x00;
  return static_cast<uint8_t>(byte | (sign & 0x20));
}

/// The emitted packing of a word of four codes below 64 (mx_ops.cpp's packCodeWords): a byte
/// permute and two multiply-adds, in 32-bit unsigned arithmetic (wrapping, as the GPU's).
uint32_t packWordAsEmitted(uint32_t word) {
  const uint32_t odd = ((word >> 8) & 0xFF) | (((word >> 24) & 0xFF) << 16);  // prmt(word, 0, 0x4341)
  const uint32_t pairs = word - odd * 192u;
  return pairs - (pairs >> 16) * 0xF000u;
}

TEST(Mxfp6Fp8Encode, EveryBf16PatternAndScaleMatchesTheCpuEncoder) {
  for (ElementFormat format : {ElementFormat::E2M3, ElementFormat::E3M2}) {
    SCOPED_TRACE(elementFormatName(format));
    const Fp8Path p = pathFor(format);
    int64_t mismatches = 0;
    for (uint32_t s = 0; s <= 255; ++s) {
      for (uint32_t x = 0; x <= 0xFFFF; ++x) {
        const auto bits = static_cast<uint16_t>(x);
        const uint8_t want = encodeBf16Element(bits, static_cast<uint8_t>(s), format);
        const uint8_t got = encodeThroughFp8(bits, s, p);
        if (got != want && ++mismatches <= 10) {
          ADD_FAILURE() << "bf16 0x" << std::hex << x << " scale 0x" << s << ": got 0x" << +got << ", want 0x"
                        << +want;
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

// Under RCEIL the scale of a block bounds its every element: each bf16 x that a block of scale S
// can hold (RCEIL is monotone in the amax, so those whose own RCEIL scale is at most S; every
// pattern for S = 0xFF, a NaN block) encodes as the CPU encoder does with no min at all. The
// same sequence under the FLOOR scale of x itself overflows the bound: the emitter keeps the min
// for the other modes.
TEST(Mxfp6Fp8Encode, RceilScalesNeedNoSaturation) {
  for (ElementFormat format : {ElementFormat::E2M3, ElementFormat::E3M2}) {
    SCOPED_TRACE(elementFormatName(format));
    const Fp8Path p = pathFor(format);
    int64_t mismatches = 0, checked = 0;
    bool saturationNeeded = false;
    for (uint32_t x = 0; x <= 0xFFFF; ++x) {
      const auto bits = static_cast<uint16_t>(x);
      const bool finite = (x & 0x7F80) != 0x7F80;
      const uint32_t own = finite ? scaleByte(bits, false, format, ScaleMode::Rceil) : 0xFF;
      for (uint32_t s = own; s < 0xFF; ++s) {
        const uint8_t want = encodeBf16Element(bits, static_cast<uint8_t>(s), format);
        const uint8_t got = encodeThroughFp8Bounded(bits, s, p, saturationNeeded);
        ++checked;
        if (got != want && ++mismatches <= 10)
          ADD_FAILURE() << "bf16 0x" << std::hex << x << " scale 0x" << s << ": got 0x" << +got << ", want 0x" << +want;
      }
      const uint8_t nanBlock = encodeThroughFp8Bounded(bits, 0xFF, p, saturationNeeded);
      if (nanBlock != encodeBf16Element(bits, 0xFF, format) && ++mismatches <= 10)
        ADD_FAILURE() << "bf16 0x" << std::hex << x << " in a NaN block: got 0x" << +nanBlock;
    }
    EXPECT_EQ(mismatches, 0);
    EXPECT_FALSE(saturationNeeded);
    EXPECT_GT(checked, 0x10000 * 100);  // most scales for most patterns

    bool floorOverflows = false;
    for (uint32_t x = 0; x <= 0x7F7F; ++x)
      encodeThroughFp8Bounded(static_cast<uint16_t>(x), scaleByte(static_cast<uint16_t>(x), false, format, ScaleMode::Floor),
                              p, floorOverflows);
    EXPECT_TRUE(floorOverflows);
  }
}

// The FP8 value at the scaled FP6 bound is the largest FP6 code, and the exponent ranges line up:
// the smallest FP6 normal is the smallest FP8 normal, its subnormal step the FP8 subnormal step.
TEST(Mxfp6Fp8Encode, TheFp6GridIsTheScaledFp8Grid) {
  auto e4m3 = [](double v) { return interp::testing::referenceRound<3, 4>(v); };
  auto e5m2 = [](double v) { return interp::testing::referenceRound<2, 5>(v); };
  EXPECT_EQ(e4m3(std::ldexp(7.5, -6)), 0x1F);     // E4M3 0.0011.111 = E2M3 0x1F
  EXPECT_EQ(e4m3(std::ldexp(1.0, -6)), 0x08);     // E2M3 smallest normal 0x08
  EXPECT_EQ(e4m3(std::ldexp(0.125, -6)), 0x01);   // E2M3 smallest subnormal 0x01
  EXPECT_EQ(e5m2(std::ldexp(28.0, -12)), 0x1F);   // E5M2 0.00111.11 = E3M2 0x1F
  EXPECT_EQ(e5m2(std::ldexp(0.25, -12)), 0x04);   // E3M2 smallest normal 0x04
  EXPECT_EQ(e5m2(std::ldexp(0.0625, -12)), 0x01); // E3M2 smallest subnormal 0x01
}

// Every word of four 6-bit codes packs to the spec's LSB-first 24-bit group (pack4, itself
// checked against docs/mxfp6-format.md's worked examples in mxfp6_test.cpp).
TEST(Mxfp6Fp8Encode, ThePackingArithmeticIsTheSpecsForEveryFourCodes) {
  int64_t mismatches = 0;
  for (uint32_t codes = 0; codes < (1u << 24); ++codes) {
    const uint8_t c[4] = {uint8_t(codes & 63), uint8_t((codes >> 6) & 63), uint8_t((codes >> 12) & 63),
                          uint8_t((codes >> 18) & 63)};
    const uint32_t word = c[0] | c[1] << 8 | c[2] << 16 | uint32_t(c[3]) << 24;
    const std::array<uint8_t, 3> bytes = pack4(c[0], c[1], c[2], c[3]);
    const uint32_t want = bytes[0] | bytes[1] << 8 | bytes[2] << 16;
    const uint32_t got = packWordAsEmitted(word);
    if (got != want && ++mismatches <= 10)
      ADD_FAILURE() << "word 0x" << std::hex << word << ": 0x" << got << ", want 0x" << want;
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace mxfp6::mx
