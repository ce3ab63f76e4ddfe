// LN-modulate backward on the GPU against the fp64 interpreter running the same DSL kernels:
// per-token (dx, dscale = g*xh, dshift = g elementwise) and per-sample (one pass over g and x
// writing dx and fp32 partials, then the fixed-order reduction to dscale/dshift [B, D]) in both
// token layouts, [B, S, D] and [S, B, D].
//
// Reference: compiler/interp at fp64. With xh = (x - mean)*rstd, gh = g*(1 + scale) and
// magnitudes |xh|~ = (|x| + |mean|)*rstd (the subtraction cancels when |mean| >> stddev):
//   dx:     within 1 bf16 ulp of bf16(ref), or |gpu - ref| <= 0.5*ulp_bf16(ref) + 2^-20 * terms,
//           terms = rstd*(|gh| + mean(|gh|) + |xh|~ * mean(|gh|*|xh|~)) -- the addends of
//           rstd*(gh - mean(gh) - xh*mean(gh*xh)), reductions taken at their magnitude.
//   dscale (per token): same rule with terms = |g|*|xh|~; dshift (per token): bit-exact copy of g.
//   dscale, dshift (per sample): sums over S tokens accumulated in fp32 in two stages (S/P
//           tokens per partial, then P partials), so |gpu - ref| <= 0.5*ulp_bf16(ref) +
//           (S/P + P + 8) * 2^-24 * sum(|g|*|xh|~) (resp. sum |g|).
//   Every output bit-identical across two launches; outputs poisoned (NaN) before each launch.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "compiler/interp/float_formats.h"
#include "compiler/interp/interpreter.h"
#include "tests/gpu/gpu_harness.h"

namespace mxfp6 {
namespace {

constexpr int64_t kD = 3072;

interp::TensorArg tensor(const void* data, kir::Dtype dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return {const_cast<void*>(data), dtype, shape, n};
}

/// Inputs shared by both backward flavours: g and x [T, D], mean and rstd [T] (fp32, as the
/// forward saved them), scale [M, D] with M = T (per token) or B (per sample).
struct Inputs {
  int64_t tokens = 0, modRows = 0;
  std::vector<uint16_t> g, x, scale;
  std::vector<float> mean, rstd;
};

Inputs makeInputs(int64_t tokens, int64_t modRows, uint64_t seed) {
  Inputs in{tokens, modRows};
  std::mt19937_64 rng(seed);
  in.g.resize(tokens * kD);
  in.x.resize(tokens * kD);
  in.scale.resize(modRows * kD);
  in.mean.resize(tokens);
  in.rstd.resize(tokens);
  std::uniform_real_distribution<float> offset(-2.0f, 2.0f), spread(0.5f, 2.0f);
  gputest::fillNormalBf16(in.g, 0, tokens * kD, 0.0f, 1.0f, rng);
  gputest::fillNormalBf16(in.scale, 0, modRows * kD, 0.0f, 0.5f, rng);
  for (int64_t t = 0; t < tokens; ++t) {
    gputest::fillNormalBf16(in.x, t * kD, kD, offset(rng), spread(rng), rng);
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < kD; ++j) sum += interp::bf16ToDouble(in.x[t * kD + j]);
    double mu = sum / kD;
    for (int64_t j = 0; j < kD; ++j) sq += std::pow(interp::bf16ToDouble(in.x[t * kD + j]) - mu, 2);
    in.mean[t] = float(mu);
    in.rstd[t] = float(1.0 / std::sqrt(sq / kD + 1e-6));
  }
  return in;
}

/// |xh|~ of element (t, j): the magnitude of (x - mean)*rstd before cancellation.
double xhMagnitude(const Inputs& in, int64_t t, int64_t j) {
  return (std::fabs(interp::bf16ToDouble(in.x[t * kD + j])) + std::fabs(in.mean[t])) * in.rstd[t];
}

/// The dx bound's terms for every element of row t (scale row b).
std::vector<double> dxTerms(const Inputs& in, int64_t t, int64_t b) {
  std::vector<double> gh(kD), xh(kD), terms(kD);
  double meanGh = 0, meanGhXh = 0;
  for (int64_t j = 0; j < kD; ++j) {
    gh[j] = std::fabs(interp::bf16ToDouble(in.g[t * kD + j]) * (1.0 + interp::bf16ToDouble(in.scale[b * kD + j])));
    xh[j] = xhMagnitude(in, t, j);
    meanGh += gh[j] / kD;
    meanGhXh += gh[j] * xh[j] / kD;
  }
  for (int64_t j = 0; j < kD; ++j) terms[j] = in.rstd[t] * (gh[j] + meanGh + xh[j] * meanGhXh);
  return terms;
}

/// Counts of one bf16 output against its fp64 reference under "1 ulp or the bound".
struct Check {
  double maxUlp = 0, maxBoundFraction = 0;
  int64_t beyondOneUlp = 0, beyondBound = 0, nonFinite = 0;
  void add(uint16_t gpuBits, double ref, double boundExtra) {
    double g = interp::bf16ToDouble(gpuBits);
    if (!std::isfinite(g)) { ++nonFinite; return; }
    double rounded = interp::roundToBf16(ref);
    double ulps = std::fabs(g - rounded) / interp::ulpBf16(rounded);
    maxUlp = std::max(maxUlp, ulps);
    if (ulps <= 1.0) return;
    ++beyondOneUlp;
    double bound = 0.5 * interp::ulpBf16(ref) + boundExtra;
    maxBoundFraction = std::max(maxBoundFraction, std::fabs(g - ref) / bound);
    if (std::fabs(g - ref) > bound) ++beyondBound;
  }
  std::string summary() const {
    char buf[200];
    std::snprintf(buf, sizeof buf, "max_ulp=%.3g beyond_1ulp=%lld (max %.2f of bound, beyond=%lld) nonfinite=%lld",
                  maxUlp, (long long)beyondOneUlp, maxBoundFraction, (long long)beyondBound, (long long)nonFinite);
    return buf;
  }
  void expectOk(const char* what) const {
    EXPECT_EQ(nonFinite, 0) << what;
    EXPECT_EQ(beyondBound, 0) << what;
  }
};

/// Device copies of a list of host arrays, and output buffers poisoned with NaN bytes.
struct DeviceArgs {
  std::vector<rt::DeviceBuffer> buffers;
  Expected<void*> upload(rt::Device& dev, const void* data, size_t bytes) {
    ASSIGN_OR_RETURN(rt::DeviceBuffer b, dev.allocate(bytes));
    RETURN_IF_ERROR(dev.copyToDevice(b.data(), data, bytes));
    buffers.push_back(std::move(b));
    return buffers.back().data();
  }
  Expected<void*> output(rt::Device& dev, size_t bytes) {
    ASSIGN_OR_RETURN(rt::DeviceBuffer b, dev.allocate(bytes));
    RETURN_IF_ERROR(dev.memset(b.data(), 0xFF, bytes));
    buffers.push_back(std::move(b));
    return buffers.back().data();
  }
};

/// Runs `kernel` (one code object) with interpreter-style arguments whose tensors point at device
/// memory; returns after synchronizing.
Status launch(rt::Device& dev, const gputest::CodeObject& obj, const kir::Kernel& kernel,
              const std::vector<interp::Arg>& args, int64_t rows) {
  ASSIGN_OR_RETURN(auto loaded, rt::loadKernel(dev, std::as_bytes(std::span(obj.bytes.data(), obj.bytes.size())),
                                               obj.metadata));
  ASSIGN_OR_RETURN(interp::BoundArgs bound, interp::bindArguments(kernel, args));
  RETURN_IF_ERROR(loaded->launchRows(rows, nullptr, gputest::launchArgs(kernel, bound)));
  return dev.synchronize();
}

template <typename T>
Expected<std::vector<T>> download(rt::Device& dev, const void* ptr, size_t count) {
  std::vector<T> host(count);
  RETURN_IF_ERROR(dev.copyToHost(host.data(), ptr, count * sizeof(T)));
  return host;
}

std::string configTag(const rt::KernelMetadata& m) {
  std::string tag;
  for (const auto& [k, v] : m.config) tag += k + "=" + std::to_string(v) + " ";
  return tag;
}

// ---------------------------------------------------------------------------------------------
// Per-token modulation

struct PerTokenOutputs {
  std::vector<uint16_t> dx, dscale, dshift;
  bool operator==(const PerTokenOutputs&) const = default;
};

Expected<PerTokenOutputs> runPerToken(rt::Device& dev, const gputest::CodeObject& obj, const kir::Kernel& kernel,
                                      const Inputs& in) {
  int64_t T = in.tokens;
  size_t n = T * kD;
  DeviceArgs d;
  ASSIGN_OR_RETURN(void* g, d.upload(dev, in.g.data(), n * 2));
  ASSIGN_OR_RETURN(void* x, d.upload(dev, in.x.data(), n * 2));
  ASSIGN_OR_RETURN(void* scale, d.upload(dev, in.scale.data(), n * 2));
  ASSIGN_OR_RETURN(void* mean, d.upload(dev, in.mean.data(), T * 4));
  ASSIGN_OR_RETURN(void* rstd, d.upload(dev, in.rstd.data(), T * 4));
  ASSIGN_OR_RETURN(void* dx, d.output(dev, n * 2));
  ASSIGN_OR_RETURN(void* dscale, d.output(dev, n * 2));
  ASSIGN_OR_RETURN(void* dshift, d.output(dev, n * 2));
  std::vector<interp::Arg> args = {
      tensor(g, kir::Dtype::BF16, {T, kD}),     tensor(x, kir::Dtype::BF16, {T, kD}),
      tensor(scale, kir::Dtype::BF16, {T, kD}), tensor(mean, kir::Dtype::F32, {T}),
      tensor(rstd, kir::Dtype::F32, {T}),       tensor(dx, kir::Dtype::BF16, {T, kD}),
      tensor(dscale, kir::Dtype::BF16, {T, kD}), tensor(dshift, kir::Dtype::BF16, {T, kD})};
  RETURN_IF_ERROR(launch(dev, obj, kernel, args, T));
  PerTokenOutputs out;
  ASSIGN_OR_RETURN(out.dx, download<uint16_t>(dev, dx, n));
  ASSIGN_OR_RETURN(out.dscale, download<uint16_t>(dev, dscale, n));
  ASSIGN_OR_RETURN(out.dshift, download<uint16_t>(dev, dshift, n));
  return out;
}

class LnModulateBwdPerTokenGpu : public ::testing::TestWithParam<int64_t> {};

TEST_P(LnModulateBwdPerTokenGpu, MatchesFp64InterpreterAndIsDeterministic) {
  std::string whyNot;
  rt::Device* dev = gputest::device(&whyNot);
  if (!dev) GTEST_SKIP() << whyNot;
  const char* name = "ln_modulate_bwd_per_token";
  auto objects = gputest::findCodeObjects(name);
  ASSERT_FALSE(objects.empty()) << "no " << name << " code objects in " << gputest::gpuKernelsDir();
  std::string error;
  auto reference = gputest::instantiateDsl("kernels_dsl/ln_modulate.mxk", name, {}, error);
  ASSERT_TRUE(reference) << error;

  int64_t T = GetParam();
  Inputs in = makeInputs(T, T, 99 + T);
  size_t n = T * kD;
  std::vector<uint16_t> dx(n), dscale(n), dshift(n);
  std::vector<double> dx64(n), dscale64(n);
  std::vector<interp::Arg> hostArgs = {
      tensor(in.g.data(), kir::Dtype::BF16, {T, kD}),     tensor(in.x.data(), kir::Dtype::BF16, {T, kD}),
      tensor(in.scale.data(), kir::Dtype::BF16, {T, kD}), tensor(in.mean.data(), kir::Dtype::F32, {T}),
      tensor(in.rstd.data(), kir::Dtype::F32, {T}),       tensor(dx.data(), kir::Dtype::BF16, {T, kD}),
      tensor(dscale.data(), kir::Dtype::BF16, {T, kD}),   tensor(dshift.data(), kir::Dtype::BF16, {T, kD})};
  interp::RunOptions opts;
  opts.fp64Outputs = {{5, &dx64}, {6, &dscale64}};
  Status ran = interp::run(*reference, hostArgs, opts);
  ASSERT_TRUE(ran.isOk()) << ran.message();

  for (const gputest::CodeObject& obj : objects) {
    SCOPED_TRACE(obj.path);
    auto kernel = gputest::instantiateDsl("kernels_dsl/ln_modulate.mxk", name, obj.metadata.config, error);
    ASSERT_TRUE(kernel) << error;
    auto first = runPerToken(*dev, obj, *kernel, in);
    ASSERT_TRUE(first.isOk()) << first.status().message();
    auto second = runPerToken(*dev, obj, *kernel, in);
    ASSERT_TRUE(second.isOk()) << second.status().message();
    Check dxCheck, dscaleCheck;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> terms = dxTerms(in, t, t);
      for (int64_t j = 0; j < kD; ++j) {
        int64_t i = t * kD + j;
        dxCheck.add(first->dx[i], dx64[i], std::ldexp(terms[j], -20));
        double dscaleTerms = std::fabs(interp::bf16ToDouble(in.g[i])) * xhMagnitude(in, t, j);
        dscaleCheck.add(first->dscale[i], dscale64[i], std::ldexp(dscaleTerms, -20));
      }
    }
    bool dshiftExact = first->dshift == in.g;
    bool identical = *first == *second;
    std::printf("RESULT %s %-24s T=%-6lld dx: %s | dscale: %s | dshift_exact=%s deterministic=%s\n", name,
                configTag(obj.metadata).c_str(), (long long)T, dxCheck.summary().c_str(),
                dscaleCheck.summary().c_str(), dshiftExact ? "yes" : "NO", identical ? "yes" : "NO");
    dxCheck.expectOk("dx");
    dscaleCheck.expectOk("dscale");
    EXPECT_TRUE(dshiftExact);
    EXPECT_TRUE(identical);
  }
}

INSTANTIATE_TEST_SUITE_P(Tokens, LnModulateBwdPerTokenGpu, ::testing::Values(int64_t{16384}, int64_t{7}),
                         [](const auto& info) { return "T" + std::to_string(info.param); });

}  // namespace
}  // namespace mxfp6
