// The DSL-only test fixtures (tests/fixtures/*.mxk) on the GPU against the fp64 interpreter:
// a kernel added as one .mxk file, with no C++, runs like the production ones.
//
// rmsnorm: y = x * rsqrt(mean(x*x) + eps) * w has no cancellation (products only), so every
// element must be within 1 bf16 ulp of the fp64 result rounded to bf16. Outputs poisoned (NaN)
// before each launch; two launches bit-identical.

#include <gtest/gtest.h>

#include <cmath>

#include "compiler/interp/float_formats.h"
#include "compiler/interp/interpreter.h"
#include "tests/gpu/gpu_harness.h"

namespace mxfp6 {
namespace {

constexpr int64_t kD = 4096;

interp::TensorArg tensor(const void* data, kir::Dtype dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return {const_cast<void*>(data), dtype, shape, n};
}

Expected<std::vector<uint16_t>> runRmsNorm(rt::Device& dev, const gputest::CodeObject& obj, const kir::Kernel& kernel,
                                           const std::vector<uint16_t>& x, const std::vector<uint16_t>& w,
                                           int64_t T) {
  ASSIGN_OR_RETURN(rt::DeviceBuffer dx, dev.allocate(x.size() * 2));
  ASSIGN_OR_RETURN(rt::DeviceBuffer dw, dev.allocate(w.size() * 2));
  ASSIGN_OR_RETURN(rt::DeviceBuffer dy, dev.allocate(x.size() * 2));
  RETURN_IF_ERROR(dev.copyToDevice(dx.data(), x.data(), x.size() * 2));
  RETURN_IF_ERROR(dev.copyToDevice(dw.data(), w.data(), w.size() * 2));
  RETURN_IF_ERROR(dev.memset(dy.data(), 0xFF, x.size() * 2));
  std::vector<interp::Arg> args = {tensor(dx.data(), kir::Dtype::BF16, {T, kD}),
                                   tensor(dw.data(), kir::Dtype::BF16, {kD}),
                                   tensor(dy.data(), kir::Dtype::BF16, {T, kD}), std::monostate{}};
  ASSIGN_OR_RETURN(interp::BoundArgs bound, interp::bindArguments(kernel, args));
  ASSIGN_OR_RETURN(auto loaded, rt::loadKernel(dev, std::as_bytes(std::span(obj.bytes.data(), obj.bytes.size())),
                                               obj.metadata));
  RETURN_IF_ERROR(loaded->launchRows(T, nullptr, gputest::launchArgs(kernel, bound)));
  RETURN_IF_ERROR(dev.synchronize());
  std::vector<uint16_t> y(x.size());
  RETURN_IF_ERROR(dev.copyToHost(y.data(), dy.data(), y.size() * 2));
  return y;
}

class RmsNormFixtureGpu : public ::testing::TestWithParam<int64_t> {};

TEST_P(RmsNormFixtureGpu, WithinOneUlpAndDeterministic) {
  std::string whyNot;
  rt::Device* dev = gputest::device(&whyNot);
  if (!dev) GTEST_SKIP() << whyNot;
  auto objects = gputest::findCodeObjects("rmsnorm");
  ASSERT_FALSE(objects.empty()) << "no rmsnorm code objects in " << gputest::gpuKernelsDir();
  std::string error;
  auto reference = gputest::instantiateDsl("tests/fixtures/rmsnorm.mxk", "rmsnorm", {}, error);
  ASSERT_TRUE(reference) << error;

  int64_t T = GetParam();
  std::mt19937_64 rng(5 + T);
  std::vector<uint16_t> x(T * kD), w(kD), y(T * kD);
  std::uniform_real_distribution<float> spread(0.1f, 10.0f);
  for (int64_t t = 0; t < T; ++t) gputest::fillNormalBf16(x, t * kD, kD, 0.0f, spread(rng), rng);
  gputest::fillNormalBf16(w, 0, kD, 1.0f, 0.3f, rng);
  std::vector<double> y64(T * kD);
  interp::RunOptions opts;
  opts.fp64Outputs = {{2, &y64}};
  std::vector<interp::Arg> hostArgs = {tensor(x.data(), kir::Dtype::BF16, {T, kD}), tensor(w.data(), kir::Dtype::BF16, {kD}),
                                       tensor(y.data(), kir::Dtype::BF16, {T, kD}), std::monostate{}};
  Status ran = interp::run(*reference, hostArgs, opts);
  ASSERT_TRUE(ran.isOk()) << ran.message();

  for (const gputest::CodeObject& obj : objects) {
    SCOPED_TRACE(obj.path);
    auto kernel = gputest::instantiateDsl("tests/fixtures/rmsnorm.mxk", "rmsnorm", obj.metadata.config, error);
    ASSERT_TRUE(kernel) << error;
    auto first = runRmsNorm(*dev, obj, *kernel, x, w, T);
    ASSERT_TRUE(first.isOk()) << first.status().message();
    auto second = runRmsNorm(*dev, obj, *kernel, x, w, T);
    ASSERT_TRUE(second.isOk()) << second.status().message();
    double maxUlp = 0;
    int64_t beyond = 0, nonFinite = 0;
    for (size_t i = 0; i < y64.size(); ++i) {
      double g = interp::bf16ToDouble((*first)[i]);
      if (!std::isfinite(g)) { ++nonFinite; continue; }
      double rounded = interp::roundToBf16(y64[i]);
      double ulps = std::fabs(g - rounded) / interp::ulpBf16(rounded);
      maxUlp = std::max(maxUlp, ulps);
      beyond += ulps > 1.0;
    }
    std::string tag;
    for (const auto& [k, v] : obj.metadata.config) tag += k + "=" + std::to_string(v) + " ";
    std::printf("RESULT rmsnorm %-28s T=%-6lld D=%lld max_ulp=%.3g beyond_1ulp=%lld nonfinite=%lld deterministic=%s\n",
                tag.c_str(), (long long)T, (long long)kD, maxUlp, (long long)beyond, (long long)nonFinite,
                *first == *second ? "yes" : "NO");
    EXPECT_EQ(nonFinite, 0);
    EXPECT_EQ(beyond, 0);
    EXPECT_EQ(*first, *second);
  }
}

INSTANTIATE_TEST_SUITE_P(Tokens, RmsNormFixtureGpu, ::testing::Values(int64_t{8192}, int64_t{3}),
                         [](const auto& info) { return "T" + std::to_string(info.param); });

}  // namespace
}  // namespace mxfp6
