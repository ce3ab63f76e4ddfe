// Narrow float formats used by kernels (bf16, f16): exact decoding to double, round-to-nearest-even
// encoding straight from double, and the ulp used in error bounds. The interpreter rounds every
// stored value with these, GPU tests bound their errors with ulpBf16, and the MXFP6 encoder builds
// on the same decomposition.
//
// Rounding goes directly from double to the narrow format. Going through float first would round
// twice: 1 + 2^-8 + 2^-30 is just above a bf16 tie and must round up to 1 + 2^-7, but as a float it
// becomes the tie 1 + 2^-8 itself, which then rounds to even (1.0).
#pragma once

#include <bit>
#include <cstdint>

namespace mxfp6::interp {

/// bf16 bits -> double, exact for every pattern (NaN payloads included: the 7 payload bits land in
/// the top of the double's mantissa, so doubleToBf16(bf16ToDouble(b)) == b for all 65,536 b).
inline double bf16ToDouble(uint16_t bits) {
  // A bf16 is the top half of a float; float -> double is exact. Built through integer bits so a
  // signalling NaN keeps its payload (a float->double conversion of an sNaN would quiet it).
  uint32_t f = static_cast<uint32_t>(bits) << 16;
  if ((f & 0x7F800000u) == 0x7F800000u && (f & 0x007FFFFFu) != 0) {
    uint64_t d = (static_cast<uint64_t>(f >> 31) << 63) | 0x7FF0000000000000ull |
                 (static_cast<uint64_t>(f & 0x007FFFFFu) << 29);
    return std::bit_cast<double>(d);
  }
  return static_cast<double>(std::bit_cast<float>(f));
}

/// double -> bf16 bits, round to nearest, ties to even. Overflow gives +-inf (IEEE: values at or
/// above the midpoint between the largest bf16 and 2^128 round to inf), results below the smallest
/// subnormal round to signed zero, inf stays inf. NaN keeps its sign and the top 7 payload bits; a
/// NaN whose kept payload would be zero gets the quiet bit so it stays a NaN.
uint16_t doubleToBf16(double x);

/// f16 (IEEE binary16) bits -> double, exact for every pattern (NaN payloads preserved as above).
double f16ToDouble(uint16_t bits);

/// double -> f16 bits, round to nearest even; same overflow/underflow/NaN rules as doubleToBf16.
uint16_t doubleToF16(double x);

/// The value x rounded once to bf16 / f16, as a double.
inline double roundToBf16(double x) { return bf16ToDouble(doubleToBf16(x)); }
inline double roundToF16(double x) { return f16ToDouble(doubleToF16(x)); }

/// Spacing of bf16 values in the binade of |x|: 2^(max(floor(log2|x|), -126) - 7), capped at the
/// largest binade (2^120). For a bf16 value it is the distance to the next value of larger
/// magnitude; rounding any finite x in range to bf16 errs by at most ulpBf16(x) / 2.
/// 0 -> 2^-133 (the subnormal spacing); +-inf -> +inf; NaN -> NaN.
double ulpBf16(double x);

/// The same for f16: 2^(max(floor(log2|x|), -14) - 10), capped at 2^5; 0 -> 2^-24.
double ulpF16(double x);

}  // namespace mxfp6::interp
