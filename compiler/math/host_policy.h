// The host-float policy of compiler/math/special_functions.h: each operation one IEEE fp32
// operation of the CPU, so a test measures exactly the sequence the code generator emits.
// (Translation units using it must not contract a * b + c into an fma behind its back: the
// tests build with -ffp-contract=off.)
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace mxfp6::math {

struct HostPolicy {
  using V = float;
  using M = bool;
  V c(float v) const { return v; }
  V add(V a, V b) const { return a + b; }
  V sub(V a, V b) const { return a - b; }
  V mul(V a, V b) const { return a * b; }
  V div(V a, V b) const { return a / b; }
  V fma(V a, V b, V c) const { return std::fma(a, b, c); }
  M lt(V a, V b) const { return a < b; }
  M isnan(V a) const { return a != a; }
  V select(M m, V a, V b) const { return m ? a : b; }
  V abs(V a) const { return fromBits(bits(a) & 0x7fffffffu); }
  V copysign(V magnitude, V sign) const {
    return fromBits((bits(magnitude) & 0x7fffffffu) | (bits(sign) & 0x80000000u));
  }
  V pow2(V k) const { return fromBits(uint32_t(int32_t(k) + 127) << 23); }

  static uint32_t bits(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
  }
  static float fromBits(uint32_t u) {
    float v;
    std::memcpy(&v, &u, 4);
    return v;
  }
};

}  // namespace mxfp6::math
