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

#include <array>
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
  gputest::DeviceArgs d;
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
  RETURN_IF_ERROR(gputest::launch(dev, obj, kernel, args, T));
  PerTokenOutputs out;
  ASSIGN_OR_RETURN(out.dx, gputest::download<uint16_t>(dev, dx, n));
  ASSIGN_OR_RETURN(out.dscale, gputest::download<uint16_t>(dev, dscale, n));
  ASSIGN_OR_RETURN(out.dshift, gputest::download<uint16_t>(dev, dshift, n));
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
  interp::RunOptions opts = gputest::referenceOptions();
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
    auto [dxCheck, dscaleCheck] = gputest::checkInParallel<std::array<gputest::Bf16Check, 2>>(
        T, [&](int64_t begin, int64_t end, std::array<gputest::Bf16Check, 2>& checks) {
          for (int64_t t = begin; t < end; ++t) {
            std::vector<double> terms = dxTerms(in, t, t);
            for (int64_t j = 0; j < kD; ++j) {
              int64_t i = t * kD + j;
              checks[0].add(first->dx[i], dx64[i], std::ldexp(terms[j], -20));
              double dscaleTerms = std::fabs(interp::bf16ToDouble(in.g[i])) * xhMagnitude(in, t, j);
              checks[1].add(first->dscale[i], dscale64[i], std::ldexp(dscaleTerms, -20));
            }
          }
        });
    bool dshiftExact = first->dshift == in.g;
    bool identical = *first == *second;
    std::printf("RESULT %s %-24s T=%-6lld dx: %s | dscale: %s | dshift_exact=%s deterministic=%s\n", name,
                gputest::configTag(obj.metadata).c_str(), (long long)T, dxCheck.summary().c_str(),
                dscaleCheck.summary().c_str(), dshiftExact ? "yes" : "NO", identical ? "yes" : "NO");
    dxCheck.expectOk("dx");
    dscaleCheck.expectOk("dscale");
    EXPECT_TRUE(dshiftExact);
    EXPECT_TRUE(identical);
  }
}

INSTANTIATE_TEST_SUITE_P(Tokens, LnModulateBwdPerTokenGpu, ::testing::Values(int64_t{16384}, int64_t{7}),
                         [](const auto& info) { return "T" + std::to_string(info.param); });


// ---------------------------------------------------------------------------------------------
// Per-sample modulation: ln_modulate_bwd (dx + partials) then ln_modulate_bwd_reduce

struct SampleShape {
  int64_t samples, tokensPerSample, partials;
  bool sequenceMajor;  // tokens [S, B, D] instead of [B, S, D]
  int64_t tokens = 0;  // T when it ends inside the last sample or position; 0: B * S
};

int64_t tokenCount(const SampleShape& sh) { return sh.tokens ? sh.tokens : sh.samples * sh.tokensPerSample; }

struct PerSampleOutputs {
  std::vector<uint16_t> dx, dscale, dshift;
  bool operator==(const PerSampleOutputs&) const = default;
};

/// Token index of sample b's s-th token.
int64_t tokenOf(const SampleShape& sh, int64_t b, int64_t s) {
  return sh.sequenceMajor ? s * sh.samples + b : b * sh.tokensPerSample + s;
}

std::vector<interp::Arg> bwdArgs(const SampleShape& sh, const void* g, const void* x, const void* scale,
                                 const void* mean, const void* rstd, void* dx, void* dsPart, void* dhPart) {
  int64_t B = sh.samples, S = sh.tokensPerSample, T = tokenCount(sh), P = sh.partials;
  return {tensor(g, kir::Dtype::BF16, {T, kD}),         tensor(x, kir::Dtype::BF16, {T, kD}),
          tensor(scale, kir::Dtype::BF16, {B, kD}),     tensor(mean, kir::Dtype::F32, {T}),
          tensor(rstd, kir::Dtype::F32, {T}),           tensor(dx, kir::Dtype::BF16, {T, kD}),
          tensor(dsPart, kir::Dtype::F32, {B, P, kD}),  tensor(dhPart, kir::Dtype::F32, {B, P, kD}),
          S, sh.sequenceMajor ? int64_t(1) : S, sh.sequenceMajor ? B : int64_t(1)};
}

std::vector<interp::Arg> reduceArgs(const SampleShape& sh, const void* dsPart, const void* dhPart, void* ds, void* dh) {
  int64_t B = sh.samples, P = sh.partials;
  return {tensor(dsPart, kir::Dtype::F32, {B, P, kD}), tensor(dhPart, kir::Dtype::F32, {B, P, kD}),
          tensor(ds, kir::Dtype::BF16, {B, kD}), tensor(dh, kir::Dtype::BF16, {B, kD})};
}

Expected<PerSampleOutputs> runPerSample(rt::Device& dev, const gputest::CodeObject& bwdObj, const kir::Kernel& bwd,
                                        const gputest::CodeObject& reduceObj, const kir::Kernel& reduce,
                                        const SampleShape& sh, const Inputs& in) {
  int64_t B = sh.samples, T = tokenCount(sh), P = sh.partials;
  gputest::DeviceArgs d;
  ASSIGN_OR_RETURN(void* g, d.upload(dev, in.g.data(), T * kD * 2));
  ASSIGN_OR_RETURN(void* x, d.upload(dev, in.x.data(), T * kD * 2));
  ASSIGN_OR_RETURN(void* scale, d.upload(dev, in.scale.data(), B * kD * 2));
  ASSIGN_OR_RETURN(void* mean, d.upload(dev, in.mean.data(), T * 4));
  ASSIGN_OR_RETURN(void* rstd, d.upload(dev, in.rstd.data(), T * 4));
  ASSIGN_OR_RETURN(void* dx, d.output(dev, T * kD * 2));
  ASSIGN_OR_RETURN(void* dsPart, d.output(dev, B * P * kD * 4));
  ASSIGN_OR_RETURN(void* dhPart, d.output(dev, B * P * kD * 4));
  ASSIGN_OR_RETURN(void* ds, d.output(dev, B * kD * 2));
  ASSIGN_OR_RETURN(void* dh, d.output(dev, B * kD * 2));
  RETURN_IF_ERROR(gputest::launch(dev, bwdObj, bwd, bwdArgs(sh, g, x, scale, mean, rstd, dx, dsPart, dhPart), B * P));
  // One program per W-column strip of a sample.
  int64_t strips = kD / reduceObj.metadata.config.at("W");
  RETURN_IF_ERROR(gputest::launch(dev, reduceObj, reduce, reduceArgs(sh, dsPart, dhPart, ds, dh), B * strips));
  PerSampleOutputs out;
  ASSIGN_OR_RETURN(out.dx, gputest::download<uint16_t>(dev, dx, T * kD));
  ASSIGN_OR_RETURN(out.dscale, gputest::download<uint16_t>(dev, ds, B * kD));
  ASSIGN_OR_RETURN(out.dshift, gputest::download<uint16_t>(dev, dh, B * kD));
  return out;
}

class LnModulateBwdPerSampleGpu : public ::testing::TestWithParam<SampleShape> {};

TEST_P(LnModulateBwdPerSampleGpu, MatchesFp64InterpreterAndIsDeterministic) {
  std::string whyNot;
  rt::Device* dev = gputest::device(&whyNot);
  if (!dev) GTEST_SKIP() << whyNot;
  auto bwdObjects = gputest::findCodeObjects("ln_modulate_bwd");
  auto reduceObjects = gputest::findCodeObjects("ln_modulate_bwd_reduce");
  ASSERT_FALSE(bwdObjects.empty() || reduceObjects.empty()) << "missing code objects in " << gputest::gpuKernelsDir();
  std::string error;
  auto bwdRef = gputest::instantiateDsl("kernels_dsl/ln_modulate.mxk", "ln_modulate_bwd", {}, error);
  ASSERT_TRUE(bwdRef) << error;

  const SampleShape sh = GetParam();
  int64_t B = sh.samples, S = sh.tokensPerSample, T = tokenCount(sh), P = sh.partials;
  Inputs in = makeInputs(T, B, 1234 + T + sh.sequenceMajor);
  std::vector<uint16_t> dx(T * kD);
  std::vector<float> dsPart(B * P * kD), dhPart(B * P * kD);
  std::vector<double> dx64(T * kD), ds64Part(B * P * kD), dh64Part(B * P * kD);
  interp::RunOptions opts = gputest::referenceOptions();
  opts.fp64Outputs = {{5, &dx64}, {6, &ds64Part}, {7, &dh64Part}};
  Status ran = interp::run(*bwdRef, bwdArgs(sh, in.g.data(), in.x.data(), in.scale.data(), in.mean.data(),
                                            in.rstd.data(), dx.data(), dsPart.data(), dhPart.data()), opts);
  ASSERT_TRUE(ran.isOk()) << ran.message();
  // The exact sums over each sample's tokens, and the magnitudes that bound fp32 accumulation.
  std::vector<double> ds64(B * kD, 0.0), dh64(B * kD, 0.0), dsMag(B * kD, 0.0), dhMag(B * kD, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < P; ++j)
      for (int64_t c = 0; c < kD; ++c) {
        ds64[b * kD + c] += ds64Part[(b * P + j) * kD + c];
        dh64[b * kD + c] += dh64Part[(b * P + j) * kD + c];
      }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      int64_t t = tokenOf(sh, b, s);
      if (t >= T) continue;  // past a ragged T: not in the sums
      for (int64_t c = 0; c < kD; ++c) {
        double gAbs = std::fabs(interp::bf16ToDouble(in.g[t * kD + c]));
        dsMag[b * kD + c] += gAbs * xhMagnitude(in, t, c);
        dhMag[b * kD + c] += gAbs;
      }
    }
  double accumulation = std::ldexp(double(S / P + P + 8), -24);

  for (const gputest::CodeObject& bwdObj : bwdObjects)
    for (const gputest::CodeObject& reduceObj : reduceObjects) {
      SCOPED_TRACE(bwdObj.path + " + " + reduceObj.path);
      auto bwd = gputest::instantiateDsl("kernels_dsl/ln_modulate.mxk", "ln_modulate_bwd", bwdObj.metadata.config, error);
      ASSERT_TRUE(bwd) << error;
      auto reduce = gputest::instantiateDsl("kernels_dsl/ln_modulate.mxk", "ln_modulate_bwd_reduce",
                                            reduceObj.metadata.config, error);
      ASSERT_TRUE(reduce) << error;
      auto first = runPerSample(*dev, bwdObj, *bwd, reduceObj, *reduce, sh, in);
      ASSERT_TRUE(first.isOk()) << first.status().message();
      auto second = runPerSample(*dev, bwdObj, *bwd, reduceObj, *reduce, sh, in);
      ASSERT_TRUE(second.isOk()) << second.status().message();
      gputest::Bf16Check dsCheck, dhCheck;
      gputest::Bf16Check dxCheck = gputest::checkInParallel<gputest::Bf16Check>(
          T, [&](int64_t begin, int64_t end, gputest::Bf16Check& check) {
            for (int64_t t = begin; t < end; ++t) {
              int64_t b = sh.sequenceMajor ? t % B : t / S;
              std::vector<double> terms = dxTerms(in, t, b);
              for (int64_t c = 0; c < kD; ++c) check.add(first->dx[t * kD + c], dx64[t * kD + c], std::ldexp(terms[c], -20));
            }
          });
      for (int64_t i = 0; i < B * kD; ++i) {
        dsCheck.add(first->dscale[i], ds64[i], accumulation * dsMag[i]);
        dhCheck.add(first->dshift[i], dh64[i], accumulation * dhMag[i]);
      }
      bool identical = *first == *second;
      std::printf("RESULT ln_modulate_bwd+reduce %-38s B=%lld S=%lld T=%lld P=%lld %s dx: %s | dscale: %s | dshift: %s | "
                  "deterministic=%s\n",
                  (gputest::configTag(bwdObj.metadata) + "/ " + gputest::configTag(reduceObj.metadata)).c_str(), (long long)B,
                  (long long)S, (long long)T, (long long)P, sh.sequenceMajor ? "[S,B,D]" : "[B,S,D]", dxCheck.summary().c_str(),
                  dsCheck.summary().c_str(), dhCheck.summary().c_str(), identical ? "yes" : "NO");
      dxCheck.expectOk("dx");
      dsCheck.expectOk("dscale");
      dhCheck.expectOk("dshift");
      EXPECT_TRUE(identical);
    }
}

// B=32, S=512 (T=16384) in both token layouts with 16 partials per sample; a ragged split (S=7
// tokens over P=3 partials) with fewer tokens than a typical P; T = 11 of 14 and 299 of 320
// tokens, ending inside the last sample ([B, S, D]) or sequence position ([S, B, D]), so programs
// stop early or run no trip.
INSTANTIATE_TEST_SUITE_P(Shapes, LnModulateBwdPerSampleGpu,
                         ::testing::Values(SampleShape{32, 512, 16, false}, SampleShape{32, 512, 16, true},
                                           SampleShape{2, 7, 3, false}, SampleShape{2, 7, 3, true},
                                           SampleShape{2, 7, 3, false, 11}, SampleShape{2, 7, 3, true, 11},
                                           SampleShape{4, 80, 16, false, 299}, SampleShape{4, 80, 16, true, 299}),
                         [](const auto& info) {
                           return "B" + std::to_string(info.param.samples) + "_S" +
                                  std::to_string(info.param.tokensPerSample) +
                                  (info.param.sequenceMajor ? "_SBD" : "_BSD") +
                                  (info.param.tokens ? "_T" + std::to_string(info.param.tokens) : "");
                         });

}  // namespace
}  // namespace mxfp6
