// bf16/f16 conversions: decoding is exact for every bit pattern, and encoding from double rounds to
// nearest even exactly as an independent formula on the float64 bits does (reference_rounding.h),
// at the points where rounding is decided: representable values, ties, one double ulp either side
// of ties, overflow, subnormals, NaN.
#include "compiler/interp/float_formats.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tests/interp/reference_rounding.h"

namespace mxfp6::interp {
namespace {

using testing::referenceBf16;
using testing::referenceBf16Value;
using testing::referenceF16;

constexpr double kInf = std::numeric_limits<double>::infinity();

bool isBf16Nan(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0; }
bool isF16Nan(uint16_t b) { return (b & 0x7C00) == 0x7C00 && (b & 0x3FF) != 0; }

/// Every point where double -> narrow rounding is decided, around each positive finite value v
/// (given in increasing order): v, the midpoint to the next value, and one double ulp either side
/// of both; plus their negations.
std::vector<double> trickyPoints(const std::vector<double>& ascending) {
  std::vector<double> pts;
  for (size_t i = 0; i + 1 < ascending.size(); ++i) {
    const double v = ascending[i], next = ascending[i + 1];
    const double mid = v + (next - v) / 2;  // exact: both are narrow values
    for (double p : {v, std::nextafter(v, -kInf), std::nextafter(v, kInf), mid,
                     std::nextafter(mid, -kInf), std::nextafter(mid, kInf)}) {
      pts.push_back(p);
      pts.push_back(-p);
    }
  }
  return pts;
}

TEST(Bf16, AllBitPatternsRoundTripThroughDouble) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const double d = bf16ToDouble(bits);
    ASSERT_EQ(doubleToBf16(d), bits) << std::hex << b;
    if (isBf16Nan(bits)) {
      ASSERT_TRUE(std::isnan(d)) << std::hex << b;
    } else {
      ASSERT_EQ(std::bit_cast<uint64_t>(d), std::bit_cast<uint64_t>(referenceBf16Value(bits)))
          << std::hex << b;
    }
  }
}

TEST(Bf16, RoundingMatchesIntegerFormulaAtTies) {
  std::vector<double> ascending;
  for (uint32_t b = 0; b <= 0x7F7F; ++b) ascending.push_back(referenceBf16Value(b));
  ascending.push_back(0x1p128);  // beyond the largest value: its midpoint is the overflow point
  const std::vector<double> pts = trickyPoints(ascending);
  ASSERT_GT(pts.size(), 390000u);
  for (double x : pts) {
    ASSERT_EQ(doubleToBf16(x), referenceBf16(x)) << x;
  }
}

TEST(Bf16, RoundingMatchesIntegerFormulaOnRandomDoubles) {
  std::mt19937_64 rng(0x5eed);
  for (int i = 0; i < 2'000'000; ++i) {
    const double x = std::bit_cast<double>(rng());
    if (std::isnan(x)) {
      ASSERT_TRUE(isBf16Nan(doubleToBf16(x)));
      continue;
    }
    ASSERT_EQ(doubleToBf16(x), referenceBf16(x)) << x;
  }
  // Values in and around the bf16 range, where random bit patterns rarely land.
  std::uniform_real_distribution<double> expo(-140.0, 130.0), unit(-1.0, 1.0);
  for (int i = 0; i < 1'000'000; ++i) {
    const double x = unit(rng) * std::exp2(expo(rng));
    ASSERT_EQ(doubleToBf16(x), referenceBf16(x)) << x;
  }
}

TEST(Bf16, KnownRoundings) {
  EXPECT_EQ(doubleToBf16(1.0), 0x3F80);
  EXPECT_EQ(doubleToBf16(1.0 + 0x1p-8), 0x3F80);          // tie, to even (down)
  EXPECT_EQ(doubleToBf16(1.0 + 3 * 0x1p-8), 0x3F82);      // tie, to even (up)
  EXPECT_EQ(doubleToBf16(1.0 + 0x1p-8 + 0x1p-52), 0x3F81);  // just above a tie
  EXPECT_EQ(doubleToBf16(std::nextafter(1.0 + 3 * 0x1p-8, 0.0)), 0x3F81);  // just below a tie
  EXPECT_EQ(doubleToBf16(-2.0 + 0x1p-8), 0xC000);          // tie at the binade edge, carries
  // Overflow: the largest bf16 is 0x1.FEp127; the midpoint to 2^128 rounds to even, i.e. inf.
  EXPECT_EQ(doubleToBf16(0x1.FEp127), 0x7F7F);
  EXPECT_EQ(doubleToBf16(0x1.FFp127), 0x7F80);
  EXPECT_EQ(doubleToBf16(std::nextafter(0x1.FFp127, 0.0)), 0x7F7F);
  EXPECT_EQ(doubleToBf16(-1e300), 0xFF80);
  EXPECT_EQ(doubleToBf16(kInf), 0x7F80);
  EXPECT_EQ(doubleToBf16(-kInf), 0xFF80);
  // Subnormals: multiples of 2^-133.
  EXPECT_EQ(doubleToBf16(0x1p-133), 0x0001);
  EXPECT_EQ(doubleToBf16(0x1p-134), 0x0000);                     // tie, to even (zero)
  EXPECT_EQ(doubleToBf16(std::nextafter(0x1p-134, 1.0)), 0x0001);  // just above
  EXPECT_EQ(doubleToBf16(3 * 0x1p-134), 0x0002);                 // tie, to even (up)
  EXPECT_EQ(doubleToBf16(0x1p-126 - 0x1p-134), 0x0080);          // tie, carries into normal
  EXPECT_EQ(doubleToBf16(-0x1p-140), 0x8000);                    // signed zero
  EXPECT_EQ(doubleToBf16(std::numeric_limits<double>::denorm_min()), 0x0000);
  EXPECT_EQ(doubleToBf16(-0.0), 0x8000);
  // NaN: sign kept, stays a NaN even when its payload sits below the kept bits.
  EXPECT_EQ(doubleToBf16(std::numeric_limits<double>::quiet_NaN()), 0x7FC0);
  EXPECT_EQ(doubleToBf16(-std::numeric_limits<double>::quiet_NaN()), 0xFFC0);
  EXPECT_TRUE(isBf16Nan(doubleToBf16(std::bit_cast<double>(0x7FF0000000000001ull))));
}

TEST(Bf16, RoundsDirectlyFromDoubleNotViaFloat) {
  // Just above the tie between 1 and 1 + 2^-7, so it rounds up. Via float it first becomes the
  // tie itself (2^-30 is below float's half-ulp at 1), which then rounds to even: 1.0.
  const double x = 1.0 + 0x1p-8 + 0x1p-30;
  EXPECT_EQ(doubleToBf16(x), 0x3F81);
  EXPECT_EQ(referenceBf16(x), 0x3F81);
  EXPECT_EQ(doubleToBf16(static_cast<double>(static_cast<float>(x))), 0x3F80);
}

TEST(Bf16, UlpIsTheSpacingOfBf16Values) {
  EXPECT_EQ(ulpBf16(1.0), 0x1p-7);
  EXPECT_EQ(ulpBf16(1.99), 0x1p-7);
  EXPECT_EQ(ulpBf16(-2.0), 0x1p-6);
  EXPECT_EQ(ulpBf16(3072.0), 0x1p4);
  EXPECT_EQ(ulpBf16(0.0), 0x1p-133);
  EXPECT_EQ(ulpBf16(1e-40), 0x1p-133);
  EXPECT_EQ(ulpBf16(0x1.FEp127), 0x1p120);
  EXPECT_EQ(ulpBf16(kInf), kInf);
  EXPECT_TRUE(std::isnan(ulpBf16(std::numeric_limits<double>::quiet_NaN())));
  for (uint32_t b = 0; b < 0x7F7F; ++b) {
    const double v = referenceBf16Value(b), next = referenceBf16Value(b + 1);
    ASSERT_EQ(next - v, ulpBf16(v)) << std::hex << b;
    ASSERT_EQ(ulpBf16(-v), ulpBf16(v));
  }
}

TEST(F16, AllBitPatternsRoundTripThroughDouble) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const double d = f16ToDouble(bits);
    ASSERT_EQ(doubleToF16(d), bits) << std::hex << b;
    ASSERT_EQ(std::isnan(d), isF16Nan(bits)) << std::hex << b;
#ifdef __FLT16_MAX__
    if (!isF16Nan(bits)) {
      ASSERT_EQ(d, static_cast<double>(std::bit_cast<_Float16>(bits))) << std::hex << b;
    }
#endif
  }
}

TEST(F16, RoundingMatchesIntegerFormulaAtTies) {
  std::vector<double> ascending;
  for (uint32_t b = 0; b <= 0x7BFF; ++b) ascending.push_back(f16ToDouble(static_cast<uint16_t>(b)));
  ascending.push_back(0x1p16);
  for (double x : trickyPoints(ascending)) {
    ASSERT_EQ(doubleToF16(x), referenceF16(x)) << x;
#ifdef __FLT16_MAX__
    // The compiler's double -> _Float16 conversion is a third, independent opinion.
    ASSERT_EQ(doubleToF16(x), std::bit_cast<uint16_t>(static_cast<_Float16>(x))) << x;
#endif
  }
  EXPECT_EQ(doubleToF16(65504.0), 0x7BFF);
  EXPECT_EQ(doubleToF16(65520.0), 0x7C00);  // midpoint to 2^16: to even, inf
  EXPECT_EQ(doubleToF16(0x1p-25), 0x0000);  // tie with the smallest subnormal: to even
  EXPECT_EQ(doubleToF16(std::nextafter(0x1p-25, 1.0)), 0x0001);
  EXPECT_EQ(ulpF16(1.0), 0x1p-10);
  EXPECT_EQ(ulpF16(0.0), 0x1p-24);
}

TEST(F16, RoundingMatchesIntegerFormulaOnRandomDoubles) {
  std::mt19937_64 rng(0xf16);
  std::uniform_real_distribution<double> expo(-30.0, 20.0), unit(-1.0, 1.0);
  for (int i = 0; i < 1'000'000; ++i) {
    const double x = unit(rng) * std::exp2(expo(rng));
    ASSERT_EQ(doubleToF16(x), referenceF16(x)) << x;
  }
}

}  // namespace
}  // namespace mxfp6::interp
