// Rounding written independently of compiler/interp/float_formats.cpp, for checking it: the
// classic add-half-minus-one-plus-lsb trick on the float64 bits for normal results, and an exact
// power-of-two scaling followed by nearbyint (round-half-even in the default FP environment) for
// subnormal results.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace mxfp6::interp::testing {

/// Rounds x to a binary format with kMant mantissa and kExp exponent bits, ties to even.
template <int kMant, int kExp>
uint16_t referenceRound(double x) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr uint32_t kInf = ((1u << kExp) - 1) << kMant;
  constexpr int kDrop = 52 - kMant;
  const uint64_t u = std::bit_cast<uint64_t>(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 63) << (kMant + kExp));
  const uint64_t a = u & ~(uint64_t{1} << 63);
  if (a > 0x7FF0000000000000ull) {  // NaN: keep the top payload bits, stay a NaN
    uint32_t payload = static_cast<uint32_t>((a >> kDrop) & ((1u << kMant) - 1));
    return static_cast<uint16_t>(sign | kInf | (payload ? payload : 1u << (kMant - 1)));
  }
  if (a == 0x7FF0000000000000ull) return static_cast<uint16_t>(sign | kInf);
  const double mag = std::bit_cast<double>(a);
  const double minNormal = std::ldexp(1.0, 1 - kBias);
  if (mag < minNormal) {
    // Subnormal results are integer multiples of 2^(1 - bias - kMant); scaling is exact.
    const double units = std::nearbyint(std::ldexp(mag, kBias - 1 + kMant));
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(units));
  }
  // Round the 52-bit mantissa to kMant bits in place; a carry moves into the exponent.
  const uint64_t r = (a + ((uint64_t{1} << (kDrop - 1)) - 1) + ((a >> kDrop) & 1)) >> kDrop;
  const int64_t e = static_cast<int64_t>(r >> kMant) - 1023 + kBias;
  if (e >= (1 << kExp) - 1) return static_cast<uint16_t>(sign | kInf);
  return static_cast<uint16_t>(sign | (e << kMant) | (r & ((1u << kMant) - 1)));
}

inline uint16_t referenceBf16(double x) { return referenceRound<7, 8>(x); }
inline uint16_t referenceF16(double x) { return referenceRound<10, 5>(x); }

/// bf16 bits -> double through the float whose top half they are (exact for non-NaN values).
inline double referenceBf16Value(uint16_t bits) {
  return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(bits) << 16));
}

}  // namespace mxfp6::interp::testing
