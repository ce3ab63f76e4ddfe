// The MXFP6 reference encoder against docs/mxfp6-format.md. Reference: oracles written here from the
// format definitions only (a table of the 32 code values built from exponent bias, mantissa bits
// and subnormals, nearest value by exhaustive comparison in double, ties to the even code; scale
// exponents from log2 in double), never from the encoder's own arithmetic. Metric: exact equality
// of every code, scale byte and packed byte (bound: 0 differences), except the dequantisation
// round trip, which is bounded by half an element grid step at the block's scale.
#include "compiler/interp/mxfp6.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace mxfp6::mx {
namespace {

constexpr ElementFormat kFormats[] = {ElementFormat::E2M3, ElementFormat::E3M2};
constexpr ScaleMode kModes[] = {ScaleMode::Rceil, ScaleMode::Even, ScaleMode::Floor};

// ---------------------------------------------------------------------------------------------
// Independent oracle

/// The format as the spec's table defines it: s.e..e.m..m with an exponent bias, subnormals at
/// exponent field 0, no Inf/NaN codes.
struct FormatDef {
  int exponentBits;
  int mantissaBits;
  int bias;
};

FormatDef defOf(ElementFormat f) {
  return f == ElementFormat::E2M3 ? FormatDef{2, 3, 1} : FormatDef{3, 2, 3};
}

/// Values of the 32 non-negative codes, index = code.
std::array<double, 32> codeValues(ElementFormat f) {
  const FormatDef d = defOf(f);
  std::array<double, 32> v{};
  for (int code = 0; code < 32; ++code) {
    const int ef = code >> d.mantissaBits;
    const int m = code & ((1 << d.mantissaBits) - 1);
    const double frac = static_cast<double>(m) / (1 << d.mantissaBits);
    v[code] = ef == 0 ? frac * std::pow(2.0, 1 - d.bias) : (1.0 + frac) * std::pow(2.0, ef - d.bias);
  }
  return v;
}

/// Exponent of the largest normal (the table's emax_elem).
int emaxOf(ElementFormat f) {
  const FormatDef d = defOf(f);
  return (1 << d.exponentBits) - 1 - d.bias;
}

/// Nearest code to |y| by exhaustive comparison; ties to the even code; above max saturates;
/// sign bit from signbit(y). Distances are exact in double for the inputs used (bf16 and floats of
/// moderate range against a 6-bit grid); |y| far below the grid makes them inexact only where the
/// answer (code 0) is not in doubt.
uint8_t oracleEncode(double y, const std::array<double, 32>& values) {
  const uint8_t sign = std::signbit(y) ? 0x20 : 0x00;
  const double a = std::fabs(y);
  if (a > values[31]) return 0x1F | sign;
  int best = 0;
  double bestDist = a;
  for (int c = 1; c < 32; ++c) {
    const double d = std::fabs(values[c] - a);
    if (d < bestDist || (d == bestDist && c % 2 == 0)) {
      best = c;
      bestDist = d;
    }
  }
  return static_cast<uint8_t>(best) | sign;
}

/// Whether q > 0 rounds (nearest, ties to even) above the format's max: the grid is extended by
/// its next value 2^(emax+1), whose code (32) is even.
bool roundsAboveMax(double q, ElementFormat f) {
  std::vector<double> grid;
  for (double v : codeValues(f)) grid.push_back(v);
  grid.push_back(std::ldexp(1.0, emaxOf(f) + 1));
  int best = 0;
  double bestDist = q;
  for (int c = 1; c < static_cast<int>(grid.size()); ++c) {
    const double d = std::fabs(grid[static_cast<size_t>(c)] - q);
    if (d < bestDist || (d == bestDist && c % 2 == 0)) {
      best = c;
      bestDist = d;
    }
  }
  return best == 32;
}

/// bf16 bits -> double through the float of which they are the top half.
double bf16Value(uint16_t bits) {
  return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits) << 16));
}

/// The bf16 bits of v, which must be a bf16 value.
uint16_t bf16Bits(double v) {
  const float f = static_cast<float>(v);
  const uint32_t u = std::bit_cast<uint32_t>(f);
  EXPECT_EQ(static_cast<double>(f), v) << "not a float";
  EXPECT_EQ(u & 0xFFFFu, 0u) << v << " is not a bf16 value";
  return static_cast<uint16_t>(u >> 16);
}

bool isNanOrInf(uint16_t bits) { return (bits & 0x7F80) == 0x7F80; }

/// The bf16 bits of (1 + m7/128) * 2^e, for random data: below 2^-126 the significand is shifted
/// into a subnormal (truncating), down to at least the smallest subnormal; e <= 127.
uint16_t makeBf16(int e, int m7, bool negative) {
  uint16_t bits;
  if (e >= -126) {
    bits = static_cast<uint16_t>((e + 127) << 7 | m7);
  } else {
    const int shift = std::min(-126 - e, 7);
    bits = static_cast<uint16_t>(std::max((128 | m7) >> shift, 1));
  }
  return static_cast<uint16_t>(bits | (negative ? 0x8000 : 0));
}

/// Independent scale: FLOOR = floor(log2 amax) - emax, RCEIL = ceil(log2(amax / max)), EVEN =
/// FLOOR + 1 exactly when amax / 2^FLOOR rounds above max; clamped to [-127, 127]; zero and
/// subnormal amax give byte 0.
uint8_t oracleScale(double amax, ElementFormat f, ScaleMode mode) {
  if (amax < std::ldexp(1.0, -126)) return 0x00;
  const double maxElem = codeValues(f)[31];
  const int floorExp = static_cast<int>(std::floor(std::log2(amax))) - emaxOf(f);
  int s = floorExp;
  switch (mode) {
    case ScaleMode::Floor: break;
    case ScaleMode::Rceil: s = static_cast<int>(std::ceil(std::log2(amax / maxElem))); break;
    case ScaleMode::Even:
      s = floorExp + (roundsAboveMax(std::ldexp(amax, -floorExp), f) ? 1 : 0);
      break;
  }
  return static_cast<uint8_t>(std::clamp(s, -127, 127) + 127);
}

std::string label(ElementFormat f, ScaleMode m) {
  return std::string(elementFormatName(f)) + "/" + scaleModeName(m);
}

// ---------------------------------------------------------------------------------------------
// 1. The spec's worked examples

struct BlockExample {
  std::vector<double> block;
  ElementFormat format;
  ScaleMode mode;
  uint8_t scale;
  std::vector<uint8_t> leadingCodes;  // the rest of the 32 are 0x00 (zero padding)
};

std::vector<BlockExample> specBlockExamples() {
  using EF = ElementFormat;
  using SM = ScaleMode;
  std::vector<BlockExample> ex;
  auto allModes = [&](std::vector<double> block, EF f, uint8_t scale, std::vector<uint8_t> codes) {
    for (SM m : kModes) ex.push_back({block, f, m, scale, codes});
  };
  // | [0, -0] | both | 00; 00 20 | same | same |
  for (EF f : kFormats) allModes({0.0, -0.0}, f, 0x00, {0x00, 0x20});
  // | [7.5, -7.5, 1] | E2M3 | 7F; 1F 3F 08 | same | same |
  allModes({7.5, -7.5, 1.0}, EF::E2M3, 0x7F, {0x1F, 0x3F, 0x08});
  // | [7.5, -7.5, 1] | E3M2 | 7D; 1F 3F 14 | 7E; 1C 3C 10 | = EVEN |
  ex.push_back({{7.5, -7.5, 1.0}, EF::E3M2, SM::Floor, 0x7D, {0x1F, 0x3F, 0x14}});
  ex.push_back({{7.5, -7.5, 1.0}, EF::E3M2, SM::Even, 0x7E, {0x1C, 0x3C, 0x10}});
  ex.push_back({{7.5, -7.5, 1.0}, EF::E3M2, SM::Rceil, 0x7E, {0x1C, 0x3C, 0x10}});
  // | [7.75, 1] | E2M3 | 7F; 1F 08 | 80; 18 04 | = EVEN |
  ex.push_back({{7.75, 1.0}, EF::E2M3, SM::Floor, 0x7F, {0x1F, 0x08}});
  ex.push_back({{7.75, 1.0}, EF::E2M3, SM::Even, 0x80, {0x18, 0x04}});
  ex.push_back({{7.75, 1.0}, EF::E2M3, SM::Rceil, 0x80, {0x18, 0x04}});
  // | [30, 1] | E3M2 | 7F; 1F 0C | 80; 1C 08 | = EVEN |
  ex.push_back({{30.0, 1.0}, EF::E3M2, SM::Floor, 0x7F, {0x1F, 0x0C}});
  ex.push_back({{30.0, 1.0}, EF::E3M2, SM::Even, 0x80, {0x1C, 0x08}});
  ex.push_back({{30.0, 1.0}, EF::E3M2, SM::Rceil, 0x80, {0x1C, 0x08}});
  // | [1, 2^-20] | E2M3 / E3M2 | 7D; 18 00 / 7B; 1C 00 | same | same |
  allModes({1.0, std::ldexp(1.0, -20)}, EF::E2M3, 0x7D, {0x18, 0x00});
  allModes({1.0, std::ldexp(1.0, -20)}, EF::E3M2, 0x7B, {0x1C, 0x00});
  return ex;
}

TEST(Mxfp6SpecExamples, BlocksGiveTheTabulatedScaleAndCodes) {
  const auto examples = specBlockExamples();
  ASSERT_EQ(examples.size(), 24u);
  for (const BlockExample& e : examples) {
    SCOPED_TRACE(label(e.format, e.mode) + " block starting " + std::to_string(e.block[0]));
    std::vector<uint16_t> bits;
    for (double v : e.block) bits.push_back(bf16Bits(v));
    uint8_t codes[32];
    EXPECT_EQ(encodeBlock(bits, e.format, e.mode, codes), e.scale);
    for (size_t i = 0; i < 32; ++i) {
      const uint8_t want = i < e.leadingCodes.size() ? e.leadingCodes[i] : 0x00;
      EXPECT_EQ(codes[i], want) << "element " << i;
    }
    // The same block through the element path and through a [1, n] tensor.
    for (size_t i = 0; i < bits.size(); ++i) {
      EXPECT_EQ(encodeBf16Element(bits[i], e.scale, e.format), e.leadingCodes[i]);
    }
    auto packed = packRows(bits, 1, static_cast<int64_t>(bits.size()), e.format, e.mode);
    ASSERT_TRUE(packed.isOk()) << packed.status().message();
    ASSERT_EQ(packed->scales.size(), 1u);
    EXPECT_EQ(packed->scales[0], e.scale);
    EXPECT_EQ(unpackBlock(packed->data.data())[0], e.leadingCodes[0]);
  }
}

TEST(Mxfp6SpecExamples, PackingBytes) {
  // | codes | bytes |
  EXPECT_EQ(pack4(0x3F, 0, 0, 0), (std::array<uint8_t, 3>{0x3F, 0x00, 0x00}));
  EXPECT_EQ(pack4(0, 0x3F, 0, 0), (std::array<uint8_t, 3>{0xC0, 0x0F, 0x00}));
  EXPECT_EQ(pack4(1, 2, 3, 4), (std::array<uint8_t, 3>{0x81, 0x30, 0x10}));
  const uint8_t b[3] = {0x81, 0x30, 0x10};
  EXPECT_EQ(unpack4(b), (std::array<uint8_t, 4>{1, 2, 3, 4}));
  // The same groups inside a block, at group 0 and group 7.
  uint8_t codes[32] = {};
  codes[0] = 1, codes[1] = 2, codes[2] = 3, codes[3] = 4;
  codes[29] = 0x3F;
  const auto bytes = packBlock(codes);
  EXPECT_EQ(bytes[0], 0x81);
  EXPECT_EQ(bytes[1], 0x30);
  EXPECT_EQ(bytes[2], 0x10);
  EXPECT_EQ(bytes[21], 0xC0);
  EXPECT_EQ(bytes[22], 0x0F);
  EXPECT_EQ(bytes[23], 0x00);
  for (int i = 3; i < 21; ++i) EXPECT_EQ(bytes[static_cast<size_t>(i)], 0) << i;
}

// ---------------------------------------------------------------------------------------------
// 2. Elements: every bf16 pattern at fixed scales, against the oracle

TEST(Mxfp6Elements, OracleTableMatchesTheSpecTable) {
  const auto e2m3 = codeValues(ElementFormat::E2M3);
  EXPECT_EQ(e2m3[0x1F], 7.5);
  EXPECT_EQ(e2m3[0x08], 1.0);
  EXPECT_EQ(e2m3[0x01], 0.125);
  EXPECT_EQ(emaxOf(ElementFormat::E2M3), 2);
  const auto e3m2 = codeValues(ElementFormat::E3M2);
  EXPECT_EQ(e3m2[0x1F], 28.0);
  EXPECT_EQ(e3m2[0x04], 0.25);
  EXPECT_EQ(e3m2[0x01], 0.0625);
  EXPECT_EQ(emaxOf(ElementFormat::E3M2), 4);
  for (ElementFormat f : kFormats) {
    const auto v = codeValues(f);
    for (int c = 1; c < 32; ++c) EXPECT_LT(v[c - 1], v[c]);
  }
}

TEST(Mxfp6Elements, DecodeMatchesTheOracleTable) {
  for (ElementFormat f : kFormats) {
    const auto v = codeValues(f);
    for (int c = 0; c < 64; ++c) {
      const double want = (c & 0x20) != 0 ? -v[c & 0x1F] : v[c & 0x1F];
      const double got = decodeElement(static_cast<uint8_t>(c), f);
      EXPECT_EQ(got, want) << elementFormatName(f) << " code " << c;
      EXPECT_EQ(std::signbit(got), (c & 0x20) != 0);
    }
  }
  EXPECT_EQ(decodeScale(127), 1.0);
  EXPECT_EQ(decodeScale(0), std::ldexp(1.0, -127));
  EXPECT_EQ(decodeScale(0xFE), std::ldexp(1.0, 127));
  EXPECT_EQ(decodeScale(132), 32.0);
  EXPECT_TRUE(std::isnan(decodeScale(0xFF)));
}

TEST(Mxfp6Elements, EveryBf16PatternAtFixedScalesMatchesTheOracle) {
  // 127-8, 127, 127+5 from typical use; 0x00 and 0xFE are the extreme scales (2^-127 shifts
  // bf16 subnormals into range, 2^127 sends almost everything to 0 or the element subnormals);
  // 127+20 puts bf16 values of ~2^17..2^22 into the element subnormals.
  const uint8_t scales[] = {127 - 8, 127, 127 + 5, 127 + 20, 0x00, 0xFE};
  for (ElementFormat f : kFormats) {
    const auto values = codeValues(f);
    for (uint8_t scale : scales) {
      SCOPED_TRACE(std::string(elementFormatName(f)) + " scale " + std::to_string(scale));
      int mismatches = 0, subnormalCodes = 0, saturated = 0, tiesChecked = 0;
      for (uint32_t b = 0; b <= 0xFFFF; ++b) {
        const auto bits = static_cast<uint16_t>(b);
        if (isNanOrInf(bits)) continue;  // NaN/Inf go through the block path (0xFF scale)
        const double y = std::ldexp(bf16Value(bits), 127 - static_cast<int>(scale));
        const uint8_t want = oracleEncode(y, values);
        const uint8_t got = encodeBf16Element(bits, scale, f);
        if (got != want && ++mismatches <= 10) {
          ADD_FAILURE() << "bf16 0x" << std::hex << b << " y=" << y << ": got 0x" << +got
                        << ", oracle 0x" << +want;
        }
        const int mag = want & 0x1F;
        if (mag != 0 && mag < (1 << defOf(f).mantissaBits)) ++subnormalCodes;
        if (mag == 0x1F && std::fabs(y) > values[31]) ++saturated;
        for (int c = 0; c < 31; ++c) {
          if (std::fabs(y) == (values[c] + values[c + 1]) / 2) ++tiesChecked;
        }
        // Where y is exact in float, the float entry point agrees.
        const float yf = static_cast<float>(y);
        if (static_cast<double>(yf) == y) EXPECT_EQ(encodeElement(yf, f), want);
      }
      EXPECT_EQ(mismatches, 0);
      // Each scale's sweep really reaches the element subnormals, and all but 0xFE saturation
      // and ties.
      EXPECT_GT(subnormalCodes, 0);
      if (scale != 0xFE) {
        EXPECT_GT(saturated, 0);
        EXPECT_GT(tiesChecked, 0);
      }
    }
  }
}

TEST(Mxfp6Elements, FloatTiesNeighboursAndRandomValuesMatchTheOracle) {
  std::mt19937_64 rng(0x6D78);
  for (ElementFormat f : kFormats) {
    SCOPED_TRACE(elementFormatName(f));
    const auto values = codeValues(f);
    std::vector<double> points;
    auto around = [&](double p) {
      for (double q : {p, static_cast<double>(std::nextafter(static_cast<float>(p), -1.0f)),
                       static_cast<double>(std::nextafter(static_cast<float>(p), 100.0f))}) {
        points.push_back(q);
        points.push_back(-q);
      }
    };
    for (int c = 0; c < 31; ++c) {
      around(values[c]);
      around((values[c] + values[c + 1]) / 2);
    }
    const double nextBinade = std::ldexp(1.0, emaxOf(f) + 1);
    around(values[31]);
    around((values[31] + nextBinade) / 2);
    around(nextBinade);
    around(values[1] / 2);       // half the smallest subnormal: a tie that goes to 0
    around(values[1] / 4);
    std::uniform_real_distribution<double> logMag(-20.0, 7.0);
    for (int i = 0; i < 200000; ++i) {
      const float v = static_cast<float>(std::exp2(logMag(rng)));
      points.push_back(static_cast<double>(i % 2 != 0 ? -v : v));
    }
    for (double p : points) {
      const float y = static_cast<float>(p);
      ASSERT_EQ(static_cast<double>(y), p);
      EXPECT_EQ(encodeElement(y, f), oracleEncode(p, values)) << "y=" << p;
    }
  }
}

TEST(Mxfp6Elements, SignedZeroSubnormalsAndNonFinite) {
  for (ElementFormat f : kFormats) {
    EXPECT_EQ(encodeElement(0.0f, f), 0x00);
    EXPECT_EQ(encodeElement(-0.0f, f), 0x20);
    EXPECT_EQ(encodeElement(-1e-30f, f), 0x20);  // underflows to -0
    EXPECT_EQ(encodeElement(std::numeric_limits<float>::denorm_min(), f), 0x00);
    EXPECT_EQ(encodeElement(1e30f, f), 0x1F);
    EXPECT_EQ(encodeElement(std::numeric_limits<float>::infinity(), f), 0x1F);
    EXPECT_EQ(encodeElement(-std::numeric_limits<float>::infinity(), f), 0x3F);
    EXPECT_EQ(encodeElement(std::numeric_limits<float>::quiet_NaN(), f), 0x1F);
    EXPECT_EQ(encodeElement(-std::numeric_limits<float>::quiet_NaN(), f), 0x3F);
  }
  EXPECT_EQ(encodeElement(0.125f, ElementFormat::E2M3), 0x01);
  EXPECT_EQ(encodeElement(-0.0625f, ElementFormat::E3M2), 0x21);
  EXPECT_EQ(encodeElement(0.9375f, ElementFormat::E2M3), 0x08);  // tie 0.875|1.0 -> 1.0 (even)
}

TEST(Mxfp6Elements, NanScaleWritesSignAndMaxForEveryPattern) {
  for (ElementFormat f : kFormats) {
    for (uint32_t b = 0; b <= 0xFFFF; ++b) {
      const uint8_t want = (b & 0x8000) != 0 ? 0x3F : 0x1F;
      ASSERT_EQ(encodeBf16Element(static_cast<uint16_t>(b), 0xFF, f), want) << b;
    }
  }
}

TEST(Mxfp6Blocks, NanOrInfAnywhereGivesScaleFFAndSignMaxCodes) {
  const uint16_t one = bf16Bits(1.0), minusHalf = bf16Bits(-0.5);
  const uint16_t specials[] = {0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81};
  for (ElementFormat f : kFormats) {
    for (ScaleMode m : kModes) {
      for (uint16_t special : specials) {
        for (size_t pos : {size_t{0}, size_t{5}, size_t{19}}) {
          std::vector<uint16_t> block(20, one);
          block[1] = minusHalf;
          block[2] = 0x8000;  // -0
          block[3] = 0x0000;
          block[pos] = special;
          uint8_t codes[32];
          ASSERT_EQ(encodeBlock(block, f, m, codes), 0xFF) << label(f, m);
          for (size_t i = 0; i < 32; ++i) {
            // Padding (i >= 20) is +0, so 0x1F like every other non-negative element.
            const bool negative = i < block.size() && (block[i] & 0x8000) != 0;
            EXPECT_EQ(codes[i], negative ? 0x3F : 0x1F) << label(f, m) << " element " << i;
          }
        }
      }
    }
  }
}

TEST(Mxfp6Blocks, RandomBlocksAreScaleOfAmaxThenElementwise) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> bitsDist(0, 0xFFFF), lenDist(0, 40), expDist(-140, 127);
  for (int trial = 0; trial < 20000; ++trial) {
    // Elements spread over ~12 binades around a random exponent, so blocks are realistic.
    const int base = expDist(rng);
    std::vector<uint16_t> block(static_cast<size_t>(lenDist(rng)));
    for (auto& b : block) {
      const int r = bitsDist(rng);
      if (r % 17 == 0) {
        b = static_cast<uint16_t>(r & 0x8000);
      } else {
        b = makeBf16(base - (r >> 7) % 12, r & 0x7F, (r & 0x8000) != 0);
      }
    }
    if (trial % 500 == 0 && !block.empty()) block[0] = 0x7FC0;
    const size_t n = std::min<size_t>(block.size(), 32);
    double amax = 0;
    bool special = false;
    for (size_t i = 0; i < n; ++i) {
      if (isNanOrInf(block[i])) special = true;
      else amax = std::max(amax, std::fabs(bf16Value(block[i])));
    }
    for (ElementFormat f : kFormats) {
      for (ScaleMode m : kModes) {
        uint8_t codes[32];
        const uint8_t scale = encodeBlock(block, f, m, codes);
        ASSERT_EQ(scale, special ? 0xFF : oracleScale(amax, f, m)) << label(f, m);
        const auto values = codeValues(f);
        for (size_t i = 0; i < 32; ++i) {
          const uint16_t x = i < n ? block[i] : 0;
          const uint8_t want =
              special ? static_cast<uint8_t>((x & 0x8000) != 0 ? 0x3F : 0x1F)
                      : oracleEncode(std::ldexp(bf16Value(x), 127 - scale), values);
          ASSERT_EQ(codes[i], want) << label(f, m) << " element " << i;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Scale modes against the independent formulation

TEST(Mxfp6Scales, EveryFiniteAmaxMatchesTheIndependentFormulation) {
  for (ElementFormat f : kFormats) {
    for (ScaleMode m : kModes) {
      int mismatches = 0;
      for (uint32_t b = 0; b < 0x7F80; ++b) {  // +0 through the largest finite bf16
        const auto bits = static_cast<uint16_t>(b);
        const uint8_t want = oracleScale(bf16Value(bits), f, m);
        const uint8_t got = scaleByte(bits, false, f, m);
        if (got != want && ++mismatches <= 10) {
          ADD_FAILURE() << label(f, m) << " amax 0x" << std::hex << b << ": got 0x" << +got
                        << ", oracle 0x" << +want;
        }
        // The sign bit of the amax bits is ignored.
        ASSERT_EQ(scaleByte(static_cast<uint16_t>(bits | 0x8000), false, f, m), got);
        ASSERT_NE(got, 0xFE);
        ASSERT_NE(got, 0xFF);
      }
      EXPECT_EQ(mismatches, 0) << label(f, m);
    }
  }
}

TEST(Mxfp6Scales, RceilNeverSaturatesTheBlockMaxAndEvenNeverRoundsItAbove) {
  for (ElementFormat f : kFormats) {
    const double maxElem = codeValues(f)[31];
    for (uint32_t b = 0x0080; b < 0x7F80; ++b) {
      const double amax = bf16Value(static_cast<uint16_t>(b));
      const int rceil = scaleByte(static_cast<uint16_t>(b), false, f, ScaleMode::Rceil) - 127;
      const int even = scaleByte(static_cast<uint16_t>(b), false, f, ScaleMode::Even) - 127;
      const int floor = scaleByte(static_cast<uint16_t>(b), false, f, ScaleMode::Floor) - 127;
      ASSERT_LE(std::ldexp(amax, -rceil), maxElem) << b;
      ASSERT_FALSE(roundsAboveMax(std::ldexp(amax, -even), f)) << b;
      ASSERT_TRUE(even == floor || even == floor + 1) << b;
      ASSERT_TRUE(rceil == even || rceil == even + 1) << b;
    }
  }
}

TEST(Mxfp6Scales, ZeroSubnormalClampsAndNan) {
  for (ElementFormat f : kFormats) {
    for (ScaleMode m : kModes) {
      SCOPED_TRACE(label(f, m));
      EXPECT_EQ(scaleByte(0x0000, false, f, m), 0x00);
      EXPECT_EQ(scaleByte(0x8000, false, f, m), 0x00);
      EXPECT_EQ(scaleByte(0x0001, false, f, m), 0x00);  // smallest bf16 subnormal
      EXPECT_EQ(scaleByte(0x007F, false, f, m), 0x00);  // largest bf16 subnormal
      // Smallest normal 2^-126: FLOOR is -128 (E2M3) / -130 (E3M2), clamped to -127.
      EXPECT_EQ(scaleByte(0x0080, false, f, m), 0x00);
      // NaN/Inf: the flag, or amax bits that are themselves NaN/Inf.
      EXPECT_EQ(scaleByte(0x3F80, true, f, m), 0xFF);
      EXPECT_EQ(scaleByte(0x0000, true, f, m), 0xFF);
      EXPECT_EQ(scaleByte(0x7F80, false, f, m), 0xFF);
      EXPECT_EQ(scaleByte(0x7FC0, false, f, m), 0xFF);
    }
  }
  // The largest finite bf16 (2^127 * (2 - 2^-7)): the upper clamp at 127 is never reached by a
  // finite amax; the largest bytes are FLOOR 127-emax and the round-up modes one more.
  EXPECT_EQ(scaleByte(0x7F7F, false, ElementFormat::E2M3, ScaleMode::Floor), 127 + 125);
  EXPECT_EQ(scaleByte(0x7F7F, false, ElementFormat::E2M3, ScaleMode::Even), 127 + 126);
  EXPECT_EQ(scaleByte(0x7F7F, false, ElementFormat::E2M3, ScaleMode::Rceil), 127 + 126);
  EXPECT_EQ(scaleByte(0x7F7F, false, ElementFormat::E3M2, ScaleMode::Floor), 127 + 123);
  EXPECT_EQ(scaleByte(0x7F7F, false, ElementFormat::E3M2, ScaleMode::Rceil), 127 + 124);
  // The lowest unclamped bytes: 2^-124 (E2M3 FLOOR -126 -> 0x01); 2^-123 (E3M2 -127 -> 0x00).
  EXPECT_EQ(scaleByte(bf16Bits(std::ldexp(1.0, -124)), false, ElementFormat::E2M3,
                      ScaleMode::Floor), 0x01);
  EXPECT_EQ(scaleByte(bf16Bits(std::ldexp(1.0, -123)), false, ElementFormat::E3M2,
                      ScaleMode::Floor), 0x00);
  EXPECT_EQ(scaleByte(bf16Bits(std::ldexp(1.0, -122)), false, ElementFormat::E3M2,
                      ScaleMode::Floor), 0x01);
  // A subnormal-amax block still encodes its elements at scale 2^-127.
  const uint16_t sub[] = {0x0040, 0x8001};  // 2^-127, -2^-133
  uint8_t codes[32];
  EXPECT_EQ(encodeBlock(sub, ElementFormat::E2M3, ScaleMode::Rceil, codes), 0x00);
  EXPECT_EQ(codes[0], 0x08);  // 1.0
  EXPECT_EQ(codes[1], 0x20);  // -2^-6 rounds to -0
}

TEST(Mxfp6Scales, EmptyAndAllZeroBlocks) {
  uint8_t codes[32];
  std::fill(codes, codes + 32, 0xAA);
  EXPECT_EQ(encodeBlock({}, ElementFormat::E3M2, ScaleMode::Even, codes), 0x00);
  for (uint8_t c : codes) EXPECT_EQ(c, 0x00);
  // Only the first 32 elements of a longer span are read.
  std::vector<uint16_t> longBlock(40, 0);
  longBlock[35] = 0x7FC0;
  longBlock[0] = bf16Bits(1.0);
  EXPECT_EQ(encodeBlock(longBlock, ElementFormat::E2M3, ScaleMode::Floor, codes), 127 - 2);
}

// ---------------------------------------------------------------------------------------------
// 4. Packing and layouts

TEST(Mxfp6Packing, ElementIOccupiesBits6iTo6iPlus6LsbFirst) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> code(0, 63);
  for (int trial = 0; trial < 10000; ++trial) {
    uint8_t codes[32];
    for (auto& c : codes) c = static_cast<uint8_t>(code(rng));
    const auto bytes = packBlock(codes);
    for (int i = 0; i < 32; ++i) {
      int v = 0;
      for (int k = 0; k < 6; ++k) {
        const int bit = 6 * i + k;
        v |= ((bytes[static_cast<size_t>(bit / 8)] >> (bit % 8)) & 1) << k;
      }
      ASSERT_EQ(v, codes[i]) << "element " << i;
    }
    EXPECT_EQ(unpackBlock(bytes.data()), std::to_array(codes));
    uint8_t four[3] = {bytes[0], bytes[1], bytes[2]};
    EXPECT_EQ(pack4(codes[0], codes[1], codes[2], codes[3]),
              (std::array<uint8_t, 3>{four[0], four[1], four[2]}));
    EXPECT_EQ(unpack4(four), (std::array<uint8_t, 4>{codes[0], codes[1], codes[2], codes[3]}));
  }
  // Bits above the 6-bit code are ignored.
  EXPECT_EQ(pack4(0xFF, 0xC0, 0, 0), (std::array<uint8_t, 3>{0x3F, 0x00, 0x00}));
}

/// A tensor of bf16 bits: rows of values over a few binades with per-row magnitudes from 2^-130
/// to 2^120 (bf16 subnormals included), some zero and -0 elements, and `specials` NaN/Inf.
std::vector<uint16_t> randomTensor(int64_t rows, int64_t cols, uint64_t seed, int specials) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> bits(0, 0xFFFF), rowExp(-130, 120), spread(0, 10);
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const int base = rowExp(rng);
    for (int64_t c = 0; c < cols; ++c) {
      const int b = bits(rng);
      uint16_t v;
      if (b % 23 == 0) {
        v = static_cast<uint16_t>(b & 0x8000);
      } else {
        v = makeBf16(base - spread(rng), b & 0x7F, (b & 0x8000) != 0);
      }
      x[static_cast<size_t>(r * cols + c)] = v;
    }
  }
  const uint16_t kSpecial[] = {0x7F80, 0xFF80, 0x7FC0, 0xFFC3};
  for (int i = 0; i < specials && !x.empty(); ++i) {
    x[static_cast<size_t>(bits(rng)) % x.size()] = kSpecial[i % 4];
  }
  return x;
}

/// x followed by NaN guards: a packer reading past the end of its span would see a NaN and write
/// a 0xFF scale where the separately computed expectation has none.
struct Guarded {
  explicit Guarded(const std::vector<uint16_t>& x) : storage(x) {
    storage.insert(storage.end(), 64, 0x7FC0);
  }
  std::span<const uint16_t> span() const { return {storage.data(), storage.size() - 64}; }
  std::vector<uint16_t> storage;
};

std::vector<uint16_t> transpose(const std::vector<uint16_t>& x, int64_t rows, int64_t cols) {
  std::vector<uint16_t> t(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      t[static_cast<size_t>(c * rows + r)] = x[static_cast<size_t>(r * cols + c)];
    }
  }
  return t;
}

const std::pair<int64_t, int64_t> kShapes[] = {
    {32, 32}, {64, 96}, {1, 1}, {1, 32}, {32, 1}, {33, 65}, {31, 7}, {100, 37}, {0, 5}, {5, 0},
    {0, 0}, {96, 33}};

TEST(Mxfp6Layout, RowBlobsAreTheBlocksOfEachRowInOrder) {
  for (auto [rows, cols] : kShapes) {
    const auto x = randomTensor(rows, cols, static_cast<uint64_t>(rows * 1000 + cols), 2);
    const Guarded guarded(x);
    for (ElementFormat f : kFormats) {
      auto packed = packRows(guarded.span(), rows, cols, f, ScaleMode::Even);
      ASSERT_TRUE(packed.isOk()) << packed.status().message();
      const int64_t nb = (cols + 31) / 32;
      ASSERT_EQ(packed->rows, rows);
      ASSERT_EQ(packed->cols, cols);
      ASSERT_EQ(packed->blocksPerRow(), nb);
      ASSERT_EQ(packed->scales.size(), static_cast<size_t>(rows * nb));
      ASSERT_EQ(packed->data.size(), static_cast<size_t>(rows * nb * 24));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < nb; ++b) {
          // Zero-pad the last block explicitly: the result must be the same as a short span.
          std::vector<uint16_t> block(32, 0);
          for (int64_t i = 0; i < 32 && b * 32 + i < cols; ++i) {
            block[static_cast<size_t>(i)] = x[static_cast<size_t>(r * cols + b * 32 + i)];
          }
          uint8_t codes[32];
          const uint8_t scale = encodeBlock(block, f, ScaleMode::Even, codes);
          const size_t index = static_cast<size_t>(r * nb + b);
          ASSERT_EQ(packed->scales[index], scale) << r << "," << b;
          const auto bytes = packBlock(codes);
          ASSERT_TRUE(std::equal(bytes.begin(), bytes.end(), packed->data.begin() + index * 24))
              << r << "," << b;
        }
      }
    }
  }
}

TEST(Mxfp6Layout, ColumnsAreRowsOfTheTransposeAndDualIsByteIdentical) {
  uint64_t seed = 11;
  for (auto [rows, cols] : kShapes) {
    for (int specials : {0, 3}) {
      const auto x = randomTensor(rows, cols, ++seed, specials);
      const auto xt = transpose(x, rows, cols);
      const Guarded gx(x), gxt(xt);
      for (ElementFormat f : kFormats) {
        for (ScaleMode m : kModes) {
          SCOPED_TRACE(label(f, m) + " shape " + std::to_string(rows) + "x" +
                       std::to_string(cols));
          auto byRows = packRows(gx.span(), rows, cols, f, m);
          auto byColumns = packColumns(gx.span(), rows, cols, f, m);
          auto transposedRows = packRows(gxt.span(), cols, rows, f, m);
          auto dual = packDual(gx.span(), rows, cols, f, m);
          ASSERT_TRUE(byRows.isOk() && byColumns.isOk() && transposedRows.isOk() && dual.isOk());
          EXPECT_EQ(*byColumns, *transposedRows);
          EXPECT_EQ(byColumns->rows, cols);
          EXPECT_EQ(byColumns->blocksPerRow(), (rows + 31) / 32);
          EXPECT_EQ(dual->rows, *byRows);
          EXPECT_EQ(dual->columns, *byColumns);
        }
      }
    }
  }
}

TEST(Mxfp6Layout, ThreadsSplitTheBlocksWithoutChangingAByte) {
  // More threads than blocks, bands of 32 rows that do not divide the rows, one thread per row.
  const std::pair<int64_t, int64_t> shapes[] = {{300, 70}, {5, 96}, {64, 33}, {1, 1}, {0, 40}};
  uint64_t seed = 40;
  for (auto [rows, cols] : shapes) {
    const auto x = randomTensor(rows, cols, ++seed, 2);
    const Guarded gx(x);
    for (ElementFormat f : kFormats) {
      auto rowsOne = packRows(gx.span(), rows, cols, f, ScaleMode::Even, 1);
      auto columnsOne = packColumns(gx.span(), rows, cols, f, ScaleMode::Even, 1);
      ASSERT_TRUE(rowsOne.isOk() && columnsOne.isOk());
      for (int threads : {0, 2, 3, 7, 301}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " on " + std::to_string(threads) +
                     " threads, " + elementFormatName(f));
        auto byRows = packRows(gx.span(), rows, cols, f, ScaleMode::Even, threads);
        auto byColumns = packColumns(gx.span(), rows, cols, f, ScaleMode::Even, threads);
        auto dual = packDual(gx.span(), rows, cols, f, ScaleMode::Even, threads);
        ASSERT_TRUE(byRows.isOk() && byColumns.isOk() && dual.isOk());
        EXPECT_EQ(*byRows, *rowsOne);
        EXPECT_EQ(*byColumns, *columnsOne);
        EXPECT_EQ(dual->rows, *rowsOne);
        EXPECT_EQ(dual->columns, *columnsOne);
      }
    }
  }
}

TEST(Mxfp6Layout, DefaultModeIsRceil) {
  const auto x = randomTensor(40, 70, 5, 0);
  auto byDefault = packRows(x, 40, 70, ElementFormat::E3M2);
  auto rceil = packRows(x, 40, 70, ElementFormat::E3M2, ScaleMode::Rceil);
  ASSERT_TRUE(byDefault.isOk() && rceil.isOk());
  EXPECT_EQ(*byDefault, *rceil);
  EXPECT_EQ(ScaleMode{}, ScaleMode::Rceil);
  EXPECT_EQ(scaleByte(bf16Bits(7.75), false, ElementFormat::E2M3), 0x80);
}

TEST(Mxfp6Layout, DequantisedValuesAreWithinHalfAGridStep) {
  // RCEIL never saturates, so every element is within half the top binade's grid step
  // 2^(emax - MB) at the block's scale: |x - decoded| <= 2^(s + emax - MB - 1).
  const int64_t rows = 64, cols = 80;
  for (ElementFormat f : kFormats) {
    const auto x = randomTensor(rows, cols, 99, 1);
    auto packed = packRows(x, rows, cols, f, ScaleMode::Rceil);
    ASSERT_TRUE(packed.isOk());
    auto decoded = decodeBlobs(*packed, f);
    ASSERT_TRUE(decoded.isOk()) << decoded.status().message();
    ASSERT_EQ(decoded->size(), x.size());
    const int nb = 3, mb = defOf(f).mantissaBits;
    int nanBlocks = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const uint8_t scale = packed->scales[static_cast<size_t>(r * nb + c / 32)];
        const double got = (*decoded)[static_cast<size_t>(r * cols + c)];
        if (scale == 0xFF) {
          EXPECT_TRUE(std::isnan(got));
          nanBlocks += c % 32 == 0;
          continue;
        }
        const double want = bf16Value(x[static_cast<size_t>(r * cols + c)]);
        EXPECT_LE(std::fabs(want - got), std::ldexp(1.0, scale - 127 + emaxOf(f) - mb - 1))
            << r << "," << c;
      }
    }
    EXPECT_EQ(nanBlocks, 1);
  }
  PackedBlobs bad;
  bad.rows = 2;
  bad.cols = 40;
  EXPECT_FALSE(decodeBlobs(bad, ElementFormat::E2M3).isOk());
}

TEST(Mxfp6Layout, ShapeErrors) {
  const std::vector<uint16_t> x(12, 0);
  for (auto pack : {packRows, packColumns}) {
    auto wrongSize = pack(x, 3, 5, ElementFormat::E2M3, ScaleMode::Rceil, 1);
    ASSERT_FALSE(wrongSize.isOk());
    EXPECT_NE(wrongSize.status().message().find("12 elements"), std::string::npos)
        << wrongSize.status().message();
    EXPECT_FALSE(pack(x, -3, -4, ElementFormat::E2M3, ScaleMode::Rceil, 4).isOk());
    EXPECT_TRUE(pack(x, 3, 4, ElementFormat::E2M3, ScaleMode::Rceil, 4).isOk());
  }
  EXPECT_FALSE(packDual(x, 4, 4, ElementFormat::E3M2, ScaleMode::Floor).isOk());
  EXPECT_FALSE(packDual(x, INT64_C(1) << 40, INT64_C(1) << 40, ElementFormat::E3M2,
                        ScaleMode::Floor).isOk());
}

TEST(Mxfp6Names, RoundTripAndErrors) {
  for (ElementFormat f : kFormats) {
    auto parsed = parseElementFormat(elementFormatName(f));
    ASSERT_TRUE(parsed.isOk());
    EXPECT_EQ(*parsed, f);
  }
  for (ScaleMode m : kModes) {
    auto parsed = parseScaleMode(scaleModeName(m));
    ASSERT_TRUE(parsed.isOk());
    EXPECT_EQ(*parsed, m);
  }
  EXPECT_STREQ(elementFormatName(ElementFormat::E2M3), "e2m3");
  EXPECT_STREQ(scaleModeName(ScaleMode::Rceil), "rceil");
  EXPECT_EQ(*parseScaleMode(""), ScaleMode::Rceil);
  auto bad = parseElementFormat("e4m3");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "unknown MXFP6 element format 'e4m3' (expected e2m3 or e3m2)");
  EXPECT_FALSE(parseScaleMode("ceil").isOk());
}

}  // namespace
}  // namespace mxfp6::mx
