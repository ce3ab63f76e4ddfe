// The math builtins tanh, sigmoid, erf, gelu_tanh and silu.
//
// GPU side: the fp32 algorithms of compiler/math/special_functions.h, run here with host floats
// (the same op sequence the code generator emits), against long double references written from
// the textbook definitions, on all 65,536 bf16 inputs. Metric: |y - ref| in fp32 ulps of ref
// (2^-149 below 2^-126); bound: math::kMaxUlp. NaN gives NaN; the infinities give the limits.
// A sample of 2^32 / 1021 fp32 inputs checks the same algorithms between bf16 values.
//
// Interpreter side: a DSL kernel storing f32(f(x)) for every bf16 x: fp64 math rounded once at
// the store must be within 0.5 ulp (+ 2^-40 relative for fp64's own error) of the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "compiler/math/host_policy.h"
#include "compiler/math/special_functions.h"
#include "tests/interp/dsl_test_util.h"

namespace mxfp6::interp {
namespace {

using LD = long double;

LD sigmoidRef(LD z) { return z >= 0 ? 1 / (1 + expl(-z)) : expl(z) / (1 + expl(z)); }

/// 0.5 x (1 + tanh(u)): the definition where 1 + tanh(u) does not cancel (u > -1), and
/// x e^(2u) / (1 + e^(2u)) (the same value) where it would.
LD geluRef(LD x) {
  if (std::isinf(x)) return x > 0 ? x : -0.0L;
  const LD u = sqrtl(2 / 3.141592653589793238462643383279502884L) * (x + 0.044715L * x * x * x);
  if (u > -1) return 0.5L * x * (1 + tanhl(u));
  const LD e = expl(2 * u);
  return x * e / (1 + e);
}
LD siluRef(LD x) { return std::isinf(x) ? (x > 0 ? x : -0.0L) : x * sigmoidRef(x); }

struct Builtin {
  const char* name;
  std::function<LD(LD)> reference;
  std::function<float(float)> fp32;
  double bound;
};

std::vector<Builtin> builtins() {
  static math::HostPolicy p;
  return {
      {"tanh", [](LD x) { return tanhl(x); }, [](float x) { return math::tanh(p, x); }, math::kMaxUlp.tanh},
      {"sigmoid", sigmoidRef, [](float x) { return math::sigmoid(p, x); }, math::kMaxUlp.sigmoid},
      {"erf", [](LD x) { return erfl(x); }, [](float x) { return math::erf(p, x); }, math::kMaxUlp.erf},
      {"gelu_tanh", geluRef, [](float x) { return math::geluTanh(p, x); }, math::kMaxUlp.geluTanh},
      {"silu", siluRef, [](float x) { return math::silu(p, x); }, math::kMaxUlp.silu},
  };
}

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// fp32 ulps between y and the reference; 0 when both are the same infinity.
double ulpError(float y, LD ref) {
  if (std::isinf(ref) || std::isinf(float(ref))) return float(ref) == y ? 0 : INFINITY;
  const LD a = fabsl(ref);
  int e = 0;
  frexpl(a, &e);
  const LD ulp = a < 0x1p-126L ? 0x1p-149L : ldexpl(1, e - 24);
  return double(fabsl(LD(y) - ref) / ulp);
}

struct Worst {
  double ulps = 0;
  float x = 0;
};

Worst measure(const Builtin& f, uint64_t count, uint32_t (*input)(uint64_t)) {
  Worst w;
  for (uint64_t i = 0; i < count; ++i) {
    const float x = fromBits(input(i));
    const float y = f.fp32(x);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(y)) << f.name << "(NaN)";
      continue;
    }
    const double e = ulpError(y, f.reference(x));
    if (!(e <= w.ulps)) w = {e, x};
  }
  return w;
}

TEST(SpecialFunctions, Fp32AlgorithmsWithinTheirUlpBoundOnEveryBf16Input) {
  for (const Builtin& f : builtins()) {
    Worst w = measure(f, 65536, [](uint64_t i) { return uint32_t(i) << 16; });
    RecordProperty(std::string(f.name) + "_max_ulp", std::to_string(w.ulps));
    std::printf("%-10s max %.3f ulp over every bf16 input (at x = %a), bound %.1f\n", f.name, w.ulps, w.x, f.bound);
    EXPECT_LE(w.ulps, f.bound) << f.name << " at x = " << w.x;
  }
}

TEST(SpecialFunctions, Fp32AlgorithmsBetweenBf16Values) {
  // Between bf16 values the algorithms are no worse than 0.5 ulp beyond their bf16 bound.
  for (const Builtin& f : builtins()) {
    Worst w = measure(f, (uint64_t{1} << 32) / 1021, [](uint64_t i) { return uint32_t(i * 1021); });
    std::printf("%-10s max %.3f ulp over 1 in 1021 fp32 inputs (at x = %a)\n", f.name, w.ulps, w.x);
    EXPECT_LE(w.ulps, f.bound + 0.5) << f.name << " at x = " << w.x;
  }
}

TEST(SpecialFunctions, LimitsAndSpecialValues) {
  math::HostPolicy p;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(math::tanh(p, inf), 1.0f);
  EXPECT_EQ(math::tanh(p, -inf), -1.0f);
  EXPECT_TRUE(std::signbit(math::tanh(p, -0.0f)));
  EXPECT_EQ(math::erf(p, -inf), -1.0f);
  EXPECT_EQ(math::sigmoid(p, -inf), 0.0f);
  EXPECT_EQ(math::sigmoid(p, inf), 1.0f);
  EXPECT_EQ(math::silu(p, inf), inf);
  EXPECT_EQ(math::silu(p, -inf), 0.0f);
  EXPECT_EQ(math::geluTanh(p, inf), inf);
  EXPECT_EQ(math::geluTanh(p, -inf), 0.0f);
  // A subnormal input passes through tanh, erf's slope aside, unchanged.
  EXPECT_EQ(math::tanh(p, 0x1p-140f), 0x1p-140f);
}

/// The interpreter's fp64 builtins, through the DSL: y = f(x) stored as f32 for every bf16 x.
TEST(SpecialFunctions, InterpreterIsFp64RoundedOnceAtTheStore) {
  std::vector<uint16_t> x(65536);
  for (uint32_t i = 0; i < 65536; ++i) x[i] = uint16_t(i);
  for (const Builtin& f : builtins()) {
    std::string source = "kernel k(x: bf16[N], y: out f32[N]) { row t in N { y[t] = " + std::string(f.name) +
                         "(f32(x[t])) } }";
    auto kernel = instantiateSource(source, "k");
    ASSERT_TRUE(kernel) << f.name;
    std::vector<float> y(65536);
    Status s = run(*kernel, std::vector<Arg>{view(x, kir::Dtype::BF16, {65536}), view(y, kir::Dtype::F32, {65536})});
    ASSERT_TRUE(s.isOk()) << s.message();
    double worst = 0;
    for (uint32_t i = 0; i < 65536; ++i) {
      const float xi = fromBits(uint32_t(i) << 16);
      if (std::isnan(xi)) {
        EXPECT_TRUE(std::isnan(y[i])) << f.name;
        continue;
      }
      const LD ref = f.reference(xi);
      worst = std::max(worst, ulpError(y[i], ref) - double(fabsl(ref) * 0x1p-40L / (fabsl(ref) < 0x1p-126L ? 0x1p-149L : 0x1p-24L * fabsl(ref))));
    }
    EXPECT_LE(worst, 0.5) << f.name;
  }
}

}  // namespace
}  // namespace mxfp6::interp
