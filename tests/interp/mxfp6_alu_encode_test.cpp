// The element encoder that compiler/codegen/mx_ops.cpp emits for gfx942 (and for sm_90 where a thread
// holds an odd number of elements; otherwise sm_90 converts through FP8), written here
// op for op (the same i32 and f32 operations in the same order), against the CPU reference
// encoder mx::encodeBf16Element. Reference: compiler/interp/mxfp6.h (itself checked against
// docs/mxfp6-format.md in mxfp6_test.cpp). Metric: exact equality of the 6-bit code. Bound: 0
// differences for every bf16 pattern, every scale byte 0..255 and both formats, under every
// floating-point environment a GPU may run the two FMAs in: f32 denormals kept (IEEE) or flushed
// to a zero of either sign on input and output, and any NaN a hardware FMA may return (canonical
// of either sign, or the quieted input of either sign).
//
// One documented exception, outside the spec (an Inf in a block makes mx_scale return 0xFF): a
// +-Inf element under a finite scale byte S gets sign | min((255 - S - EMIN) << MB, 31), the
// exponent part of 2^128, which is the reference's sign|0x1F for every S below 252 (E2M3) or 250
// (E3M2) and smaller above.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "compiler/interp/mxfp6.h"

namespace mxfp6::mx {
namespace {

// ---------------------------------------------------------------------------------------------
// The floating-point environments of the emitted FMAs

enum class Denormals { Keep, FlushSigned, FlushPositive };
enum class NanResult { Canonical, CanonicalNegative, QuietPositive, QuietInput, QuietInputFlipped };

struct FpEnv {
  Denormals denormals;
  NanResult nan;
};

constexpr FpEnv kEnvs[] = {
    {Denormals::Keep, NanResult::Canonical},                  // NVIDIA: 0x7FFFFFFF
    {Denormals::Keep, NanResult::QuietInput},                 // AMD: the quieted input NaN
    {Denormals::FlushSigned, NanResult::CanonicalNegative},   // .ftz; x86-style default NaN
    {Denormals::FlushSigned, NanResult::QuietPositive},       // AMD with f32 denormals off
    {Denormals::FlushPositive, NanResult::QuietInputFlipped}, // anything else
};

float flush(float x, Denormals d) {
  if (d == Denormals::Keep || std::fpclassify(x) != FP_SUBNORMAL) return x;
  return d == Denormals::FlushSigned ? std::copysign(0.0f, x) : 0.0f;
}

/// llvm.fma.f32 as a GPU may run it in `env`. `special` records whether an operand or the
/// result was a denormal or NaN, the only values on which the environments differ.
float fmaIn(const FpEnv& env, float a, float b, float c, bool& special) {
  const float exact = std::fma(a, b, c);
  for (float x : {a, b, c, exact})
    special |= std::fpclassify(x) == FP_SUBNORMAL || std::isnan(x);
  const Denormals d = env.denormals;
  const float fa = flush(a, d), fb = flush(b, d), fc = flush(c, d);
  float r = flush(std::fma(fa, fb, fc), d);
  if (!std::isnan(r)) return r;
  uint32_t input = 0x7FC00000;
  for (float op : {fa, fb, fc}) {
    if (std::isnan(op)) {
      input = std::bit_cast<uint32_t>(op) | 0x00400000;
      break;
    }
  }
  switch (env.nan) {
    case NanResult::Canonical: return std::bit_cast<float>(0x7FFFFFFFu);
    case NanResult::CanonicalNegative: return std::bit_cast<float>(0xFFC00000u);
    case NanResult::QuietPositive: return std::bit_cast<float>(0x7FC00000u);
    case NanResult::QuietInput: return std::bit_cast<float>(input);
    case NanResult::QuietInputFlipped: return std::bit_cast<float>(input ^ 0x80000000u);
  }
  return r;
}

float f32(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bitsOf(float x) { return std::bit_cast<uint32_t>(x); }
uint32_t umin(uint32_t a, uint32_t b) { return a < b ? a : b; }
uint32_t umax(uint32_t a, uint32_t b) { return a > b ? a : b; }

// ---------------------------------------------------------------------------------------------
// The emitted sequence (keep in step with KernelEmitter::emitMxEncode)

struct Fmt {
  int32_t emin;   // exponent of the smallest normal element
  int32_t mbits;  // mantissa bits
};

Fmt fmtOf(ElementFormat f) { return f == ElementFormat::E2M3 ? Fmt{0, 3} : Fmt{-2, 2}; }

/// Per block, from the scale byte S (u32 ops on the zero-extended byte).
struct BlockConstants {
  uint32_t scaleUp;  // K = k << 23: the block's elements are handled as |x| * 2^k
  uint32_t floor;    // L: f32 bits of 2^(EMIN + S - 127) * 2^k, below which the grid stops refining
  uint32_t bound;    // H = 31 + (L >> (23 - MB)): saturation of the biased code; 0 in a NaN block
  uint32_t unbias;   // 31 - H
};

BlockConstants blockConstants(uint32_t s, const Fmt& f) {
  const bool small = s < 128;
  const uint32_t scaleUp = small ? 7u << 23 : 0u;
  const uint32_t floor = (s + static_cast<uint32_t>(small ? f.emin + 7 : f.emin)) << 23;
  const uint32_t bound = s == 0xFF ? 0u : (floor >> (23 - f.mbits)) + 31;
  return {scaleUp, floor, bound, 31 - bound};
}

/// One element: `bits` the zero-extended bf16, everything in u32 lanes except the two FMAs.
uint32_t encodeElementOps(uint32_t bits, const BlockConstants& b, const Fmt& f, const FpEnv& env,
                          bool& special) {
  const uint32_t t = (bits & 0x7FFF) << 16;  // the f32 bits of |x|, a denormal for subnormal x
  const uint32_t normalised = bitsOf(fmaIn(env, f32(t + (1u << 23)), 0x1p7f, -0x1p-119f, special));
  const uint32_t xa = umin(t + b.scaleUp, normalised);  // |x| * 2^k
  const uint32_t binade = umax(xa, b.floor) & 0xFF800000;
  const float step = std::ldexp(1.0f, f.mbits - 23);
  const uint32_t rounded = bitsOf(fmaIn(env, f32(xa), step, f32(binade), special));
  const uint32_t biased = rounded - binade + (binade >> (23 - f.mbits));
  const uint32_t code = umin(biased, b.bound) + b.unbias;
  return code + ((bits >> 10) & 0x20);
}

/// The emitted code of +-Inf under a finite scale byte S: the FMA sees +-Inf, so the code is the
/// exponent part of 2^128 alone, (255 - S - EMIN) << MB, saturating.
uint8_t codeOfInf(uint16_t bits, uint32_t s, ElementFormat format) {
  const Fmt f = fmtOf(format);
  const int mag = std::min((255 - static_cast<int>(s) - f.emin) << f.mbits, 31);
  return static_cast<uint8_t>(mag | ((bits & 0x8000) != 0 ? 0x20 : 0));
}

bool isInf(uint16_t bits) { return (bits & 0x7FFF) == 0x7F80; }

TEST(Mxfp6AluEncode, EveryBf16PatternAndScaleMatchesTheCpuEncoderInEveryFpEnvironment) {
  for (ElementFormat format : {ElementFormat::E2M3, ElementFormat::E3M2}) {
    SCOPED_TRACE(elementFormatName(format));
    const Fmt f = fmtOf(format);
    const uint32_t infExactBelow = format == ElementFormat::E2M3 ? 252 : 250;
    int64_t mismatches = 0, infExceptions = 0, specialRuns = 0;
    for (uint32_t s = 0; s <= 255; ++s) {
      const BlockConstants b = blockConstants(s, f);
      for (uint32_t x = 0; x <= 0xFFFF; ++x) {
        const auto bits = static_cast<uint16_t>(x);
        uint8_t want = encodeBf16Element(bits, static_cast<uint8_t>(s), format);
        if (isInf(bits) && s < 255 && s >= infExactBelow) {
          want = codeOfInf(bits, s, format);
          ++infExceptions;
        }
        // Where no FMA saw a denormal or NaN in the first environment, every op computes the
        // same values in the others.
        bool special = false;
        for (const FpEnv& env : kEnvs) {
          const uint32_t got = encodeElementOps(x, b, f, env, special);
          if (got != want && ++mismatches <= 10) {
            ADD_FAILURE() << "bf16 0x" << std::hex << x << " scale 0x" << s << " env "
                          << static_cast<int>(env.denormals) << "/" << static_cast<int>(env.nan)
                          << ": got 0x" << got << ", want 0x" << +want;
          }
          if (!special) break;
          ++specialRuns;
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
    EXPECT_EQ(infExceptions, 2 * (255 - int64_t{infExactBelow}));
    EXPECT_GT(specialRuns, 0);
  }
}

// The exception above, pinned: +-Inf saturates just below the threshold scale byte and gives a
// smaller code at the largest one (the reference saturates everywhere).
TEST(Mxfp6AluEncode, InfUnderAFiniteScaleSaturatesBelowTheLargestScales) {
  for (ElementFormat format : {ElementFormat::E2M3, ElementFormat::E3M2}) {
    SCOPED_TRACE(elementFormatName(format));
    const Fmt f = fmtOf(format);
    const uint32_t threshold = format == ElementFormat::E2M3 ? 252 : 250;
    const uint32_t atScale254 = format == ElementFormat::E2M3 ? 0x08 : 0x0C;
    for (const FpEnv& env : kEnvs) {
      bool special = false;
      EXPECT_EQ(encodeElementOps(0x7F80, blockConstants(threshold - 1, f), f, env, special), 0x1Fu);
      EXPECT_EQ(encodeElementOps(0xFF80, blockConstants(threshold - 1, f), f, env, special), 0x3Fu);
      EXPECT_EQ(encodeElementOps(0x7F80, blockConstants(threshold, f), f, env, special),
                codeOfInf(0x7F80, threshold, format));
      EXPECT_LT(codeOfInf(0x7F80, threshold, format), 0x1F);
      EXPECT_EQ(encodeElementOps(0xFF80, blockConstants(254, f), f, env, special),
                0x20 | atScale254);
    }
  }
}

}  // namespace
}  // namespace mxfp6::mx
