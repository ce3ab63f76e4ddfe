// The fp32 algorithms of the DSL's math builtins tanh, sigmoid, erf, gelu_tanh and silu, written
// once over a policy of IEEE fp32 operations. The code generator instantiates them with a policy
// that emits MLIR ops (compiler/codegen/special_functions.cpp); tests instantiate them with
// host floats (compiler/math/host_policy.h) and measure them against fp64 on every bf16 input.
// The GPU code is therefore exactly what the test measured, provided the target honours IEEE
// fp32: every step is a correctly rounded add, mul, fma or div, a compare, a select or integer
// bit manipulation -- no hardware approximation (ex2.approx, rcp.approx), no device library.
// Plain C++, no LLVM.
//
// Measured against fp64 over all 65,536 bf16 inputs (tests/interp/special_functions_test.cpp,
// which asserts kMaxUlp): tanh 0.93 ulp, sigmoid 1.63, erf 0.78, gelu_tanh 2.15, silu 2.04; over
// 1 in 1021 of all fp32 inputs: 1.30, 2.09, 1.03, 2.52, 2.80 (asserted within kMaxUlp + 0.5).
//
// Policy P provides: types V (a float value, scalar or vector) and M (a mask);
//   V c(float)              a constant shaped like the policy's values
//   V add, sub, mul, div    correctly rounded, never contracted
//   V fma(a, b, c)          a*b + c rounded once
//   M lt(a, b)              ordered a < b (false for NaN)
//   M isnan(a)
//   V select(m, a, b)
//   V abs(a), V copysign(magnitude, sign)   bit operations (exact, also on NaN and subnormals)
//   V pow2(k)               2^k for an integral k in [-126, 127], built from its exponent bits
//
// Every step is its own statement: with the MLIR policy each call emits an op, and C++ leaves
// the order of a call's arguments unspecified (g++ and clang differ), so an operation nested in
// another's arguments would make the emitted code depend on the compiler that built mxfp6c.
#pragma once

namespace mxfp6::math {

/// Largest error, in fp32 ulps of the fp64 result, over all bf16 inputs (tests assert these).
struct UlpBounds {
  double tanh, sigmoid, erf, geluTanh, silu;
};
inline constexpr UlpBounds kMaxUlp{1.0, 2.0, 1.0, 2.5, 2.5};

namespace detail {

/// Horner's rule with fma, coefficients highest degree first.
template <class P, int N>
typename P::V horner(P& p, typename P::V x, const float (&coef)[N]) {
  typename P::V r = p.c(coef[0]);
  for (int i = 1; i < N; ++i) {
    typename P::V ci = p.c(coef[i]);
    r = p.fma(r, x, ci);
  }
  return r;
}

/// x * 2^k for an integral k in [-190, 127] and a normal x with |x| < 2^21: the scaling is exact
/// unless the result is subnormal, where it rounds once (never twice): x * 2^(k+64) is normal,
/// and the second scaling by 2^-64 is then the only rounding.
template <class P>
typename P::V scale(P& p, typename P::V x, typename P::V k) {
  typename P::V minus100 = p.c(-100.0f);
  typename P::M deep = p.lt(k, minus100);
  typename P::V c64 = p.c(64.0f);
  typename P::V kUp = p.add(k, c64);
  typename P::V k1 = p.select(deep, kUp, k);
  typename P::V factor = p.pow2(k1);
  typename P::V r = p.mul(x, factor);
  typename P::V cDown = p.c(0x1p-64f);
  typename P::V rDown = p.mul(r, cDown);
  return p.select(deep, rDown, r);
}

/// e^(wh + wl) as m * 2^k, m in [0.7, 1.42], for wh in [-120, 88.7] and |wl| <= 2^-20 |wh|:
/// Cody-Waite reduction r = w - k ln2 (k * L2H is exact in the fma, so r is exact before its
/// low part), then a degree-6 minimax polynomial of e^r on |r| <= 0.36 (error 2.6e-9).
template <class P>
void expParts(P& p, typename P::V wh, typename P::V wl, typename P::V& m, typename P::V& k) {
  using V = typename P::V;
  // Round to nearest integer: adding 1.5 * 2^23 leaves no fraction bits (|x| < 2^22).
  V log2e = p.c(1.44269502f);
  V t = p.mul(wh, log2e);
  V shifter = p.c(12582912.0f);
  V shifted = p.add(t, shifter);
  k = p.sub(shifted, shifter);
  V ln2High = p.c(-0.693145751953125f);  // 16 bits: k * it is exact
  V r = p.fma(k, ln2High, wh);
  V ln2Low = p.c(-1.42860677e-06f);
  r = p.fma(k, ln2Low, r);
  r = p.add(r, wl);
  static const float kExp[] = {1.394524006e-03f, 8.378434926e-03f, 4.166630283e-02f, 1.666637361e-01f,
                               5.000000000e-01f, 1.000000000e+00f, 1.000000000e+00f};
  m = horner(p, r, kExp);
}

/// e^w for w in [-120, 88.7] (subnormal results round once).
template <class P>
typename P::V exp(P& p, typename P::V w) {
  typename P::V m, k;
  expParts(p, w, p.c(0.0f), m, k);
  return scale(p, m, k);
}

/// x * sigmoid(zh + zl), the form of silu (z = x) and gelu_tanh. With e = e^-|z| in (0, 1]:
/// z >= 0: x / (1 + e);  z < 0: x * e / (1 + e), where e = m * 2^k is scaled after the
/// division, so a product that is subnormal is rounded once, from a quotient accurate to an ulp
/// of a normal number, instead of from an already rounded tiny e. |z| is clamped to 120, where
/// x * e^-120 is below every subnormal for |x| < 2^20 and 0 is the fp32 result.
template <class P>
typename P::V timesSigmoid(P& p, typename P::V x, typename P::V zh, typename P::V zl) {
  using V = typename P::V;
  V zero = p.c(0.0f);
  typename P::M negative = p.lt(zh, zero);
  V minusZh = p.sub(zero, zh);
  V wh = p.select(negative, zh, minusZh);  // -|z|
  V minusZl = p.sub(zero, zl);
  V wl = p.select(negative, zl, minusZl);
  // NaN takes the clamp too, so no NaN reaches the exponent's integer conversion.
  V floor = p.c(-120.0f);
  typename P::M inRange = p.lt(floor, wh);
  wh = p.select(inRange, wh, floor);
  wl = p.select(inRange, wl, zero);
  V m, k;
  expParts(p, wh, wl, m, k);
  V e = scale(p, m, k);
  V one = p.c(1.0f);
  V denominator = p.add(one, e);
  V positive = p.div(x, denominator);
  V xm = p.mul(x, m);
  V scaled = p.div(xm, denominator);  // |x| < 2^21, m in [0.7, 1.42]: normal
  V negativeResult = scale(p, scaled, k);
  return p.select(negative, negativeResult, positive);
}

/// x with |x| clamped to 2^20, for silu and gelu_tanh (x * m stays below overflow); `inside`
/// says where |x| < 2^20, so finishBeyond2e20 can put the exact result back beyond it.
template <class P>
typename P::V clampBeyond2e20(P& p, typename P::V x, typename P::M& inside) {
  typename P::V big = p.c(0x1p20f);
  typename P::V a = p.abs(x);
  inside = p.lt(a, big);
  typename P::V bigSigned = p.copysign(big, x);
  return p.select(inside, x, bigSigned);
}

/// r where |x| < 2^20; beyond, x * sigmoid(...) rounds to x (x > 0) or -0 (x < 0); NaN passes.
template <class P>
typename P::V finishBeyond2e20(P& p, typename P::V x, typename P::V r, typename P::M inside, typename P::V zero) {
  typename P::M negative = p.lt(x, zero);
  typename P::V minusZero = p.c(-0.0f);
  typename P::V outside = p.select(negative, minusZero, x);
  r = p.select(inside, r, outside);
  typename P::M nan = p.isnan(x);
  return p.select(nan, x, r);
}

}  // namespace detail

/// tanh(x). |x| < 0.6: x + x^3 P(x^2), a degree-5 minimax P (error 1e-9). Else
/// 1 - 2 / (e^(2|x|) + 1), whose subtraction cancels at most one bit (the quotient is below
/// 0.5); |x| is clamped to 10, where tanh rounds to 1 in fp32. The sign is copied back.
template <class P>
typename P::V tanh(P& p, typename P::V x) {
  using V = typename P::V;
  V a = p.abs(x);
  V s = p.mul(a, a);
  static const float kTanh[] = {2.370765666e-03f, -8.410071023e-03f, 2.178832144e-02f,
                                -5.396155268e-02f, 1.333331317e-01f, -3.333333433e-01f};
  V a3 = p.mul(a, s);
  V poly = detail::horner(p, s, kTanh);
  V small = p.fma(a3, poly, a);
  V ten = p.c(10.0f);
  typename P::M belowTen = p.lt(a, ten);
  V clamped = p.select(belowTen, a, ten);
  V twice = p.add(clamped, clamped);
  V e = detail::exp(p, twice);
  V one = p.c(1.0f);
  V ePlus1 = p.add(e, one);
  V two = p.c(2.0f);
  V quotient = p.div(two, ePlus1);
  V large = p.sub(one, quotient);
  V cut = p.c(0.6f);
  typename P::M isSmall = p.lt(a, cut);
  V r = p.select(isSmall, small, large);
  typename P::M nan = p.isnan(x);
  V signed_ = p.copysign(r, x);
  return p.select(nan, x, signed_);
}

/// sigmoid(x) = 1 / (1 + e^-x), through detail::timesSigmoid with x = 1.
template <class P>
typename P::V sigmoid(P& p, typename P::V x) {
  typename P::V one = p.c(1.0f);
  typename P::V zero = p.c(0.0f);
  typename P::V r = detail::timesSigmoid(p, one, x, zero);
  typename P::M nan = p.isnan(x);
  return p.select(nan, x, r);
}

/// silu(x) = x * sigmoid(x).
template <class P>
typename P::V silu(P& p, typename P::V x) {
  using V = typename P::V;
  typename P::M inside;
  V clamped = detail::clampBeyond2e20(p, x, inside);
  V zero = p.c(0.0f);
  V r = detail::timesSigmoid(p, clamped, clamped, zero);
  return detail::finishBeyond2e20(p, x, r, inside, zero);
}

/// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) = x * sigmoid(z) with
/// z = x (A + B x^2), A = 2 sqrt(2/pi), B = 0.044715 A. The tanh form cancels for negative x;
/// this one does not. z is carried as a pair of floats (zh + zl): where z is large and negative
/// the result's relative error is about |z| times z's, so z needs more than fp32's 24 bits.
template <class P>
typename P::V geluTanh(P& p, typename P::V x) {
  using V = typename P::V;
  typename P::M inside;
  V xc = detail::clampBeyond2e20(p, x, inside);
  V zero = p.c(0.0f);
  // x^2 = s + sl exactly.
  V s = p.mul(xc, xc);
  V minusS = p.sub(zero, s);
  V sl = p.fma(xc, xc, minusS);
  // t = A + B x^2 as th + tl (A and B split in two floats; 2Sum for th).
  V Ah = p.c(1.595769167e+00f), Al = p.c(-4.534068054e-08f);
  V Bh = p.c(7.135481387e-02f), Bl = p.c(2.398832466e-09f);
  V prod = p.mul(Bh, s);
  V minusProd = p.sub(zero, prod);
  V prodl = p.fma(Bh, s, minusProd);
  prodl = p.fma(Bl, s, prodl);
  prodl = p.fma(Bh, sl, prodl);
  V th = p.add(prod, Ah);
  V bb = p.sub(th, prod);
  V thMinusBb = p.sub(th, bb);
  V errHigh = p.sub(prod, thMinusBb);
  V errLow = p.sub(Ah, bb);
  V err = p.add(errHigh, errLow);
  V tl = p.add(err, prodl);
  tl = p.add(tl, Al);
  // z = x * t as zh + zl.
  V zh = p.mul(xc, th);
  V minusZh = p.sub(zero, zh);
  V zhErr = p.fma(xc, th, minusZh);
  V zl = p.fma(xc, tl, zhErr);
  V r = detail::timesSigmoid(p, xc, zh, zl);
  return detail::finishBeyond2e20(p, x, r, inside, zero);
}

/// erf(x). |x| < 0.921875: x + x P(x^2), a degree-6 minimax P (error 4e-10). Else
/// 1 - e^Q(|x|), Q a degree-10 minimax fit of log(erfc) on [0.921875, 3.92] (error 2.7e-9);
/// beyond 3.92 erf rounds to 1 in fp32. The sign is copied back.
template <class P>
typename P::V erf(P& p, typename P::V x) {
  using V = typename P::V;
  V a = p.abs(x);
  static const float kSmall[] = {8.387590788e-05f, -8.147202316e-04f, 5.201466847e-03f, -2.685959265e-02f,
                                 1.128369942e-01f, -3.761263490e-01f, 1.283791661e-01f};
  V a2 = p.mul(a, a);
  V poly = detail::horner(p, a2, kSmall);
  V small = p.fma(a, poly, a);
  static const float kLarge[] = {-5.593436470e-08f, 1.330036639e-06f, -1.227598023e-05f, 3.817026300e-05f,
                                 2.702956845e-04f,  -3.913278226e-03f, 2.493618429e-02f, -1.083385348e-01f,
                                 -6.331330538e-01f, -1.129666328e+00f, 2.119972924e-04f};
  V top = p.c(3.92f);
  typename P::M belowTop = p.lt(a, top);
  V clamped = p.select(belowTop, a, top);
  V q = detail::horner(p, clamped, kLarge);
  V eq = detail::exp(p, q);
  V one = p.c(1.0f);
  V large = p.sub(one, eq);
  large = p.select(belowTop, large, one);
  V cut = p.c(0.921875f);
  typename P::M isSmall = p.lt(a, cut);
  V r = p.select(isSmall, small, large);
  typename P::M nan = p.isnan(x);
  V signed_ = p.copysign(r, x);
  return p.select(nan, x, signed_);
}

}  // namespace mxfp6::math
