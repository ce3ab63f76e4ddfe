#include "compiler/interp/float_formats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mxfp6::interp {
namespace {

/// Rounds a double to a binary format with kMant stored mantissa bits and kExp exponent bits
/// (IEEE layout: sign, biased exponent, mantissa), to nearest with ties to even.
///
///   x = sig * 2^(e-52), sig = 1.frac in 53 bits
///   q = 2^(max(e, emin) - kMant)        the target's quantum in x's binade (subnormals: fixed)
///   kept = sig / (q / 2^(e-52))         truncated; the dropped bits decide the rounding
///   encode: normal -> ((e + bias) << kMant) + kept - 2^kMant, so a carry out of the mantissa
///           moves into the exponent; subnormal -> kept (a carry to 2^kMant is the smallest
///           normal's encoding); an exponent field reaching all-ones is an overflow to inf.
template <int kMant, int kExp>
uint16_t roundFromDouble(double x) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr int kEmin = 1 - kBias;
  constexpr uint32_t kInfBits = ((1u << kExp) - 1) << kMant;

  const uint64_t b = std::bit_cast<uint64_t>(x);
  const uint32_t sign = static_cast<uint32_t>(b >> 63) << (kMant + kExp);
  const int biasedExp = static_cast<int>((b >> 52) & 0x7FF);
  const uint64_t frac = b & ((uint64_t{1} << 52) - 1);

  if (biasedExp == 0x7FF) {
    if (frac == 0) return static_cast<uint16_t>(sign | kInfBits);
    uint32_t payload = static_cast<uint32_t>(frac >> (52 - kMant));
    if (payload == 0) payload = 1u << (kMant - 1);
    return static_cast<uint16_t>(sign | kInfBits | payload);
  }
  // Zero, or a double subnormal (< 2^-1022): far below half the smallest target subnormal.
  if (biasedExp == 0) return static_cast<uint16_t>(sign);

  const int e = biasedExp - 1023;
  const uint64_t sig = (uint64_t{1} << 52) | frac;
  const int qexp = std::max(e, kEmin) - kMant;
  const int shift = qexp - (e - 52);  // >= 52 - kMant > 0
  // shift >= 54 means |x| < q/2 strictly: rounds to zero. Also keeps the shifts below in range.
  if (shift >= 54) return static_cast<uint16_t>(sign);

  uint64_t kept = sig >> shift;
  const uint64_t rem = sig & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (kept & 1) != 0)) ++kept;

  if (e < kEmin) return static_cast<uint16_t>(sign | static_cast<uint32_t>(kept));
  const uint64_t field =
      (static_cast<uint64_t>(e + kBias) << kMant) + kept - (uint64_t{1} << kMant);
  if (field >= kInfBits) return static_cast<uint16_t>(sign | kInfBits);
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(field));
}

double ulpIn(double x, int emin, int emax, int mant) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return std::numeric_limits<double>::infinity();
  const double a = std::fabs(x);
  if (a == 0) return std::ldexp(1.0, emin - mant);
  const int e = std::clamp(std::ilogb(a), emin, emax);
  return std::ldexp(1.0, e - mant);
}

}  // namespace

uint16_t doubleToBf16(double x) { return roundFromDouble<7, 8>(x); }

uint16_t doubleToF16(double x) { return roundFromDouble<10, 5>(x); }

double f16ToDouble(uint16_t bits) {
  const bool negative = (bits & 0x8000) != 0;
  const int exp = (bits >> 10) & 0x1F;
  const int man = bits & 0x3FF;
  if (exp == 0x1F) {
    if (man == 0) {
      return negative ? -std::numeric_limits<double>::infinity()
                      : std::numeric_limits<double>::infinity();
    }
    uint64_t d = (static_cast<uint64_t>(negative) << 63) | 0x7FF0000000000000ull |
                 (static_cast<uint64_t>(man) << 42);
    return std::bit_cast<double>(d);
  }
  const double mag = exp == 0 ? std::ldexp(static_cast<double>(man), -24)
                              : std::ldexp(static_cast<double>(1024 + man), exp - 25);
  return negative ? -mag : mag;
}

double ulpBf16(double x) { return ulpIn(x, -126, 127, 7); }

double ulpF16(double x) { return ulpIn(x, -14, 15, 10); }

}  // namespace mxfp6::interp
