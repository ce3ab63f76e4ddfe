// LN-modulate forward on the GPU against the fp64 interpreter running the same DSL kernel.
//
// Reference: compiler/interp at fp64 (its fp64 shadows of y, mean and rstd).
// Metrics and bounds, per element:
//   mean, rstd: relative error |gpu - ref| / |ref| <= 1e-5 (fp32 sums of 3072 terms; the inputs
//               keep |mean| >= 0.4 so the relative error of the mean is meaningful).
//   y:          within 1 bf16 ulp of bf16(ref), except where the result cancels (|y| << |terms|):
//               there |gpu - ref| <= 0.5*ulp_bf16(ref) + 2^-20 * terms (docs/architecture.md section 4.5:
//               fp32 math rounded once to bf16), with terms = every addend of
//               y = (x - mu)*rstd*(1+scale) + shift at the output's scale:
//               |x*rstd*(1+scale)| + |mu*rstd*(1+scale)| + |shift|. The mu term is there because
//               x - mu cancels too when |mu| >> stddev (these inputs go to |mu|/stddev = 4): the
//               fp32 mean carries ~2^-24*|mu| of error into every element. Elements beyond 1 ulp
//               are counted and reported, with the largest error as a fraction of the bound.
//   Determinism: a second launch on re-poisoned outputs gives bit-identical y, mean and rstd.
// Outputs are poisoned (0xFF bytes, NaN) before each launch so an unwritten element fails.
// The measured maxima are printed as one "RESULT" line per code object and shape.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "compiler/interp/float_formats.h"
#include "compiler/interp/interpreter.h"
#include "tests/gpu/gpu_harness.h"

namespace mxfp6 {
namespace {

constexpr int64_t kD = 3072;
constexpr double kStatsRelBound = 1e-5;

struct Shape {
  int64_t samples;            // B
  int64_t tokensPerSample;    // S
  int64_t tokens;             // T (<= B*S; fewer leaves the last sample ([B, S, D]) or the last
                              // sequence position ([S, B, D]) ragged)
};

/// Per-sample modulation (scale/shift [B, D]) with tokens laid out [B, S, D] (sample of token t
/// = t / S, sample_div = S) or [S, B, D] (sample of token t = t % B, sample_div = 1), or
/// per-token modulation ([T, D]). ln_modulate_fwd_samples walks each sample's tokens and is told
/// where they are (tokens_per_sample, sample_stride, token_stride) instead of sample_div.
struct Variant {
  const char* kernel;
  bool perToken;
  bool sequenceMajor;  // per-sample only: tokens [S, B, D] instead of [B, S, D]
  bool walksSamples = false;
};

struct HostProblem {
  Shape shape;
  bool perToken = false;
  bool sequenceMajor = false;
  bool walksSamples = false;
  int64_t modRows() const { return perToken ? shape.tokens : shape.samples; }
  int64_t modRowOf(int64_t t) const {
    if (perToken) return t;
    return sequenceMajor ? t % shape.samples : t / shape.tokensPerSample;
  }
  /// The kernel's sample_div: the sample of token t is (t / sample_div) % B.
  int64_t sampleDiv() const { return sequenceMajor ? 1 : shape.tokensPerSample; }
  std::vector<uint16_t> x, scale, shift;  // bf16 bits
  std::vector<uint16_t> y;                // interpreter outputs, rounded as stored
  std::vector<float> mean, rstd;
  std::vector<double> y64, mean64, rstd64;  // fp64 shadows
};

interp::TensorArg tensor(void* data, kir::Dtype dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return {data, dtype, shape, n};
}

/// Interpreter arguments in declaration order: x, scale, shift, y, mean, rstd, then sample_div
/// (per-sample), or tokens_per_sample, sample_stride, token_stride (sample walk), then eps.
std::vector<interp::Arg> argsFor(HostProblem& p, void* x, void* scale, void* shift, void* y, void* mean, void* rstd) {
  int64_t T = p.shape.tokens, M = p.modRows();
  std::vector<interp::Arg> args = {
      tensor(x, kir::Dtype::BF16, {T, kD}),     tensor(scale, kir::Dtype::BF16, {M, kD}),
      tensor(shift, kir::Dtype::BF16, {M, kD}), tensor(y, kir::Dtype::BF16, {T, kD}),
      tensor(mean, kir::Dtype::F32, {T}),       tensor(rstd, kir::Dtype::F32, {T})};
  if (p.walksSamples) {
    int64_t S = p.shape.tokensPerSample, B = p.shape.samples;
    args.push_back(S);
    args.push_back(p.sequenceMajor ? int64_t{1} : S);  // sample_stride
    args.push_back(p.sequenceMajor ? B : int64_t{1});  // token_stride
  } else if (!p.perToken) {
    args.push_back(p.sampleDiv());
  }
  args.push_back(std::monostate{});
  return args;
}

HostProblem makeProblem(const Shape& shape, const Variant& variant, const kir::Kernel& kernel, uint64_t seed) {
  HostProblem p;
  p.shape = shape;
  p.perToken = variant.perToken;
  p.sequenceMajor = variant.sequenceMajor;
  p.walksSamples = variant.walksSamples;
  int64_t T = shape.tokens, B = p.modRows();
  p.x.resize(T * kD);
  p.scale.resize(B * kD);
  p.shift.resize(B * kD);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> offset(0.5f, 2.0f), spread(0.5f, 2.0f), sign(-1.0f, 1.0f);
  for (int64_t t = 0; t < T; ++t) {
    float c = offset(rng) * (sign(rng) < 0 ? -1.0f : 1.0f);
    gputest::fillNormalBf16(p.x, t * kD, kD, c, spread(rng), rng);
  }
  gputest::fillNormalBf16(p.scale, 0, B * kD, 0.0f, 0.5f, rng);
  gputest::fillNormalBf16(p.shift, 0, B * kD, 0.0f, 0.5f, rng);
  p.y.resize(T * kD);
  p.mean.resize(T);
  p.rstd.resize(T);
  p.y64.resize(T * kD);
  p.mean64.resize(T);
  p.rstd64.resize(T);
  std::vector<interp::Arg> args = argsFor(p, p.x.data(), p.scale.data(), p.shift.data(), p.y.data(), p.mean.data(),
                                          p.rstd.data());
  interp::RunOptions opts = gputest::referenceOptions();
  opts.fp64Outputs = {{3, &p.y64}, {4, &p.mean64}, {5, &p.rstd64}};
  Status s = interp::run(kernel, args, opts);
  EXPECT_TRUE(s.isOk()) << s.message();
  return p;
}

struct GpuOutputs {
  std::vector<uint16_t> y;
  std::vector<float> mean, rstd;
};

/// Launches one code object on the problem and reads the outputs back.
Expected<GpuOutputs> runOnGpu(rt::Device& dev, const rt::LoadedKernel& k, const kir::Kernel& kernel, HostProblem& p) {
  int64_t T = p.shape.tokens, B = p.modRows();
  size_t xBytes = T * kD * 2, modBytes = B * kD * 2, statBytes = T * 4;
  ASSIGN_OR_RETURN(rt::DeviceBuffer x, dev.allocate(xBytes));
  ASSIGN_OR_RETURN(rt::DeviceBuffer scale, dev.allocate(modBytes));
  ASSIGN_OR_RETURN(rt::DeviceBuffer shift, dev.allocate(modBytes));
  ASSIGN_OR_RETURN(rt::DeviceBuffer y, dev.allocate(xBytes));
  ASSIGN_OR_RETURN(rt::DeviceBuffer mean, dev.allocate(statBytes));
  ASSIGN_OR_RETURN(rt::DeviceBuffer rstd, dev.allocate(statBytes));
  RETURN_IF_ERROR(dev.copyToDevice(x.data(), p.x.data(), xBytes));
  RETURN_IF_ERROR(dev.copyToDevice(scale.data(), p.scale.data(), modBytes));
  RETURN_IF_ERROR(dev.copyToDevice(shift.data(), p.shift.data(), modBytes));
  RETURN_IF_ERROR(dev.memset(y.data(), 0xFF, xBytes));
  RETURN_IF_ERROR(dev.memset(mean.data(), 0xFF, statBytes));
  RETURN_IF_ERROR(dev.memset(rstd.data(), 0xFF, statBytes));

  // The launch ABI comes from the kernel's own signature, filled from the bound arguments.
  std::vector<interp::Arg> args = argsFor(p, x.data(), scale.data(), shift.data(), y.data(), mean.data(), rstd.data());
  ASSIGN_OR_RETURN(interp::BoundArgs bound, interp::bindArguments(kernel, args));
  // Sample walk: one program row per (sample, j < P), each walking its sample's tokens.
  int64_t rows = p.walksSamples ? p.shape.samples * kernel.config.at("P") : T;
  RETURN_IF_ERROR(k.launchRows(rows, nullptr, gputest::launchArgs(kernel, bound)));
  RETURN_IF_ERROR(dev.synchronize());
  GpuOutputs out;
  out.y.resize(T * kD);
  out.mean.resize(T);
  out.rstd.resize(T);
  RETURN_IF_ERROR(dev.copyToHost(out.y.data(), y.data(), xBytes));
  RETURN_IF_ERROR(dev.copyToHost(out.mean.data(), mean.data(), statBytes));
  RETURN_IF_ERROR(dev.copyToHost(out.rstd.data(), rstd.data(), statBytes));
  return out;
}

struct Errors {
  double meanRel = 0, rstdRel = 0;
  int64_t statsNonFinite = 0;  // mean and rstd
  gputest::Bf16Check y;
  void merge(const Errors& o) {
    meanRel = std::max(meanRel, o.meanRel);
    rstdRel = std::max(rstdRel, o.rstdRel);
    statsNonFinite += o.statsNonFinite;
    y.merge(o.y);
  }
};

/// Tokens [begin, end) of the GPU's outputs against the fp64 reference, into `e`.
void compareTokens(const HostProblem& p, const GpuOutputs& g, int64_t begin, int64_t end, Errors& e) {
  for (int64_t t = begin; t < end; ++t) {
    if (!std::isfinite(g.mean[t]) || !std::isfinite(g.rstd[t])) ++e.statsNonFinite;
    e.meanRel = std::max(e.meanRel, std::fabs(g.mean[t] - p.mean64[t]) / std::fabs(p.mean64[t]));
    e.rstdRel = std::max(e.rstdRel, std::fabs(g.rstd[t] - p.rstd64[t]) / std::fabs(p.rstd64[t]));
    int64_t b = p.modRowOf(t);
    for (int64_t j = 0; j < kD; ++j) {
      int64_t i = t * kD + j;
      e.y.addLazily(g.y[i], p.y64[i], [&] {
        double x = interp::bf16ToDouble(p.x[i]);
        double gain = std::fabs(p.rstd64[t] * (1.0 + interp::bf16ToDouble(p.scale[b * kD + j])));
        double terms = std::fabs(x) * gain + std::fabs(p.mean64[t]) * gain +
                       std::fabs(interp::bf16ToDouble(p.shift[b * kD + j]));
        return std::ldexp(terms, -20);
      });
    }
  }
}

Errors compare(const HostProblem& p, const GpuOutputs& g) {
  return gputest::checkInParallel<Errors>(
      p.shape.tokens, [&](int64_t begin, int64_t end, Errors& e) { compareTokens(p, g, begin, end, e); });
}

class LnModulateGpu : public ::testing::TestWithParam<std::tuple<Variant, Shape>> {};

TEST_P(LnModulateGpu, MatchesFp64InterpreterAndIsDeterministic) {
  std::string whyNot;
  rt::Device* dev = gputest::device(&whyNot);
  if (!dev) GTEST_SKIP() << whyNot;
  const auto [variant, shape] = GetParam();
  std::vector<gputest::CodeObject> objects = gputest::findCodeObjects(variant.kernel);
  ASSERT_FALSE(objects.empty()) << "no " << variant.kernel << " code objects in " << gputest::gpuKernelsDir();

  std::string error;
  std::optional<kir::Kernel> reference = gputest::instantiateDsl("kernels_dsl/ln_modulate.mxk", variant.kernel, {}, error);
  ASSERT_TRUE(reference) << error;
  HostProblem p = makeProblem(shape, variant, *reference, 20261130 + shape.tokens);

  for (const gputest::CodeObject& obj : objects) {
    SCOPED_TRACE(obj.path);
    std::optional<kir::Kernel> kernel = gputest::instantiateDsl("kernels_dsl/ln_modulate.mxk", variant.kernel, obj.metadata.config, error);
    ASSERT_TRUE(kernel) << error;
    Expected<std::unique_ptr<rt::LoadedKernel>> loaded =
        rt::loadKernel(*dev, std::as_bytes(std::span(obj.bytes.data(), obj.bytes.size())), obj.metadata);
    ASSERT_TRUE(loaded.isOk()) << loaded.status().message();

    Expected<GpuOutputs> first = runOnGpu(*dev, **loaded, *kernel, p);
    ASSERT_TRUE(first.isOk()) << first.status().message();
    Expected<GpuOutputs> second = runOnGpu(*dev, **loaded, *kernel, p);
    ASSERT_TRUE(second.isOk()) << second.status().message();

    Errors e = compare(p, *first);
    bool identical = first->y == second->y &&
                     std::memcmp(first->mean.data(), second->mean.data(), first->mean.size() * 4) == 0 &&
                     std::memcmp(first->rstd.data(), second->rstd.data(), first->rstd.size() * 4) == 0;
    std::printf("RESULT %s %-28s T=%-6lld B=%-3lld S=%-4lld D=%lld %s  mean_rel=%.3g rstd_rel=%.3g "
                "y_max_ulp=%.3g y_beyond_1ulp=%lld (max %.2f of bound, beyond=%lld) "
                "nonfinite=%lld deterministic=%s\n",
                variant.kernel, gputest::configTag(obj.metadata).c_str(), (long long)shape.tokens, (long long)shape.samples,
                (long long)shape.tokensPerSample, (long long)kD,
                variant.perToken ? "per-token" : variant.sequenceMajor ? "[S,B,D]" : "[B,S,D]", e.meanRel,
                e.rstdRel, e.y.maxUlp,
                (long long)e.y.beyondOneUlp, e.y.maxBoundFraction, (long long)e.y.beyondBound,
                (long long)(e.y.nonFinite + e.statsNonFinite),
                identical ? "yes" : "NO");
    EXPECT_EQ(e.statsNonFinite, 0);
    EXPECT_LE(e.meanRel, kStatsRelBound);
    EXPECT_LE(e.rstdRel, kStatsRelBound);
    e.y.expectOk("y");
    EXPECT_TRUE(identical) << "two launches on the same inputs differ";
  }
}

// B=32, S=512 (T=16384): the Flux training shape. T=7 with B=2, S=4: [B, S, D] has one full
// sample and a ragged one, [S, B, D] three full sequence positions and a ragged one; fewer rows
// than one program of the widest schedule. T=299 (B=3, S=100): an odd count, so the last program
// of every schedule (SERIAL row groups included) is partly past the end. The per-sample kernel
// runs in both token layouts.
INSTANTIATE_TEST_SUITE_P(
    Shapes, LnModulateGpu,
    ::testing::Combine(::testing::Values(Variant{"ln_modulate_fwd", false, false}, Variant{"ln_modulate_fwd", false, true},
                                         Variant{"ln_modulate_fwd_per_token", true, false}),
                       ::testing::Values(Shape{32, 512, 16384}, Shape{2, 4, 7}, Shape{3, 100, 299})),
    [](const auto& info) {
      const Variant& v = std::get<0>(info.param);
      return std::string(v.perToken ? "PerToken" : v.sequenceMajor ? "PerSample_SBD" : "PerSample_BSD") + "_T" +
             std::to_string(std::get<1>(info.param).tokens);
    });

// The sample-walking forward, both token layouts: the Flux shape; T=8 (B=2, S=4), fewer tokens
// per sample than programs per sample (P of every schedule), so most programs run no trip; T=300
// (B=3, S=100), where P = 64 leaves programs with two trips and programs with one; and the ragged
// shapes above, where programs stop at the last token below T.
INSTANTIATE_TEST_SUITE_P(
    SampleWalk, LnModulateGpu,
    ::testing::Combine(::testing::Values(Variant{"ln_modulate_fwd_samples", false, false, true},
                                         Variant{"ln_modulate_fwd_samples", false, true, true}),
                       ::testing::Values(Shape{32, 512, 16384}, Shape{2, 4, 8}, Shape{3, 100, 300}, Shape{2, 4, 7},
                                         Shape{3, 100, 299})),
    [](const auto& info) {
      const Variant& v = std::get<0>(info.param);
      return std::string(v.sequenceMajor ? "SBD" : "BSD") + "_T" + std::to_string(std::get<1>(info.param).tokens);
    });

}  // namespace
}  // namespace mxfp6
