// Variables and loops written in the DSL (kernels_dsl/README.md, "Variables and loops"), lowered
// by the frontend and run by the interpreter: the LN-modulate backward kernel, ln_modulate_bwd of
// kernels_dsl/ln_modulate.mxk, whose rows (b, j) loop over the tokens s = j, j+P, ... of sample b
// and accumulate dscale/dshift partials in variables, against a C++ reference written from the
// formulas
//   xh = (x - mean) * rstd, gh = g * (1 + scale[b]),
//   dx = rstd * (gh - mean(gh) - xh * mean(gh * xh)),
//   dscale[b] = sum over the tokens t of b of g * xh, dshift[b] = sum of g,
// with the tokens of sample b at t = b * sample_stride + s * token_stride, in both layouts
// ([B, S, D]: strides S, 1; [S, B, D]: strides 1, B). Bounds: dx bit-equal (fp64 shadow and
// bf16 bits; the reference evaluates the formula in the DSL's order); dshift exact (sums of bf16
// values are exact in fp64); dscale, summed over the partials j here, within 1e-12 of the sum of
// |g * xh| (a different order of the same fp64 sum), and every f32 partial the rounding of its
// fp64 shadow.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/frontend/frontend.h"
#include "compiler/interp/interpreter.h"
#include "tests/interp/reference_rounding.h"
#include "tests/interp/dsl_test_util.h"

namespace mxfp6::interp {
namespace {

using kir::Dtype;
using testing::referenceBf16;
using testing::referenceBf16Value;

bool sameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

/// ln_modulate_bwd from kernels_dsl/ln_modulate.mxk at width D. The file requires
/// D % (THREADS * VEC) == 0: D = 3072 takes the defaults, a smaller D the smallest candidates
/// (THREADS = 128, VEC = 2), so any multiple of 256.
std::optional<kir::Kernel> instantiateLnModulateBwd(int64_t D) {
  frontend::DiagnosticEngine diags;
  auto module = frontend::parseFile(MXFP6_SOURCE_DIR "/kernels_dsl/ln_modulate.mxk", diags);
  if (!module) {
    ADD_FAILURE() << diags.render();
    return std::nullopt;
  }
  std::map<std::string, int64_t> config = {{"D", D}};
  if (D != 3072) config.insert({{"THREADS", 128}, {"VEC", 2}});
  auto k = frontend::instantiate(*module, "ln_modulate_bwd", config, diags);
  if (!k) ADD_FAILURE() << diags.render();
  return k;
}

struct Case {
  int64_t B, S, P, D;
  bool sampleMajor;  // [B, S, D] (true) or [S, B, D]
  int threads = 1;   // RunOptions::threads: the rows (b, j) split over this many threads
  int64_t tokens = 0;  // T when it ends inside the last sample or position; 0: B * S
};

std::string caseName(const Case& c) {
  return "B=" + std::to_string(c.B) + " S=" + std::to_string(c.S) + " P=" +
         std::to_string(c.P) + " D=" + std::to_string(c.D) +
         (c.sampleMajor ? " [B,S,D]" : " [S,B,D]") + " threads=" + std::to_string(c.threads) +
         (c.tokens ? " T=" + std::to_string(c.tokens) : "");
}

void checkLnModulateBwd(const Case& c) {
  SCOPED_TRACE(caseName(c));
  const int64_t B = c.B, S = c.S, P = c.P, D = c.D, T = c.tokens ? c.tokens : B * S;
  const int64_t sampleStride = c.sampleMajor ? S : 1;
  const int64_t tokenStride = c.sampleMajor ? 1 : B;
  auto k = instantiateLnModulateBwd(D);
  ASSERT_TRUE(k);

  // Inputs: bf16 g, x, scale; mean and rstd the f32 statistics of each row of x.
  std::mt19937 rng(static_cast<uint32_t>(B * 1000 + S * 100 + P * 10 + D + c.sampleMajor));
  std::normal_distribution<double> normal(0.0, 1.0);
  auto bf16Vector = [&](int64_t n, double sigma, double mu) {
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (uint16_t& e : v) e = referenceBf16(mu + sigma * normal(rng));
    return v;
  };
  std::vector<uint16_t> g = bf16Vector(T * D, 0.5, 0.0);
  std::vector<uint16_t> x = bf16Vector(T * D, 2.0, 0.3);
  std::vector<uint16_t> scale = bf16Vector(B * D, 0.2, 0.0);
  std::vector<float> mean(static_cast<size_t>(T)), rstd(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    double sum = 0, sq = 0;
    for (int64_t d = 0; d < D; ++d) sum += referenceBf16Value(x[t * D + d]);
    const double mu = sum / static_cast<double>(D);
    for (int64_t d = 0; d < D; ++d) {
      const double e = referenceBf16Value(x[t * D + d]) - mu;
      sq += e * e;
    }
    mean[t] = static_cast<float>(mu);
    rstd[t] = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(D) + 1e-6));
  }

  std::vector<uint16_t> dx(static_cast<size_t>(T * D), 0x7FC1);  // a NaN no result has
  std::vector<float> dscalePart(static_cast<size_t>(B * P * D), -7.0f);
  std::vector<float> dshiftPart(dscalePart.size(), -7.0f);
  std::vector<double> dxShadow(dx.size()), dscaleShadow(dscalePart.size()),
      dshiftShadow(dshiftPart.size());
  RunOptions options;
  options.fp64Outputs = {{5, &dxShadow}, {6, &dscaleShadow}, {7, &dshiftShadow}};
  options.threads = c.threads;
  std::vector<Arg> args = {view(g, Dtype::BF16, {T, D}),
                           view(x, Dtype::BF16, {T, D}),
                           view(scale, Dtype::BF16, {B, D}),
                           view(mean, Dtype::F32, {T}),
                           view(rstd, Dtype::F32, {T}),
                           view(dx, Dtype::BF16, {T, D}),
                           view(dscalePart, Dtype::F32, {B, P, D}),
                           view(dshiftPart, Dtype::F32, {B, P, D}),
                           int64_t{S},
                           int64_t{sampleStride},
                           int64_t{tokenStride}};
  const Status st = run(*k, args, options);
  ASSERT_TRUE(st.isOk()) << st.message();

  // The reference, token by token.
  std::vector<double> refDx(dx.size());
  std::vector<double> refDscale(static_cast<size_t>(B * D), 0.0),
      refDshift(static_cast<size_t>(B * D), 0.0), absDscale(static_cast<size_t>(B * D), 0.0);
  std::vector<double> gh(static_cast<size_t>(D)), xh(static_cast<size_t>(D));
  std::vector<int64_t> present(static_cast<size_t>(B), 0);  // tokens of each sample below T
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      const int64_t t = b * sampleStride + s * tokenStride;
      if (t >= T) continue;
      ++present[b];
      const double r = rstd[t];
      double sumGh = 0, sumGhXh = 0;
      for (int64_t d = 0; d < D; ++d) {
        const double gv = referenceBf16Value(g[t * D + d]);
        xh[d] = (referenceBf16Value(x[t * D + d]) - static_cast<double>(mean[t])) * r;
        gh[d] = gv * (1.0 + referenceBf16Value(scale[b * D + d]));
        sumGh += gh[d];
        sumGhXh += gh[d] * xh[d];
        refDscale[b * D + d] += gv * xh[d];
        absDscale[b * D + d] += std::fabs(gv * xh[d]);
        refDshift[b * D + d] += gv;
      }
      const double meanGh = sumGh / static_cast<double>(D);
      const double meanGhXh = sumGhXh / static_cast<double>(D);
      for (int64_t d = 0; d < D; ++d) {
        refDx[t * D + d] = r * (gh[d] - meanGh - xh[d] * meanGhXh);
      }
    }
  }

  int64_t dxBad = 0;
  for (size_t o = 0; o < dx.size(); ++o) {
    dxBad += !sameBits(dxShadow[o], refDx[o]) || dx[o] != referenceBf16(refDx[o]);
  }
  EXPECT_EQ(dxBad, 0) << "of " << dx.size() << " dx elements";

  int64_t partBad = 0, dscaleBad = 0, dshiftBad = 0;
  for (size_t o = 0; o < dscalePart.size(); ++o) {
    partBad += dscalePart[o] != static_cast<float>(dscaleShadow[o]) ||
               dshiftPart[o] != static_cast<float>(dshiftShadow[o]);
  }
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t d = 0; d < D; ++d) {
      double dscale = 0, dshift = 0;
      for (int64_t j = 0; j < P; ++j) {
        dscale += dscaleShadow[(b * P + j) * D + d];
        dshift += dshiftShadow[(b * P + j) * D + d];
      }
      const size_t o = static_cast<size_t>(b * D + d);
      dscaleBad += !(std::fabs(dscale - refDscale[o]) <= 1e-12 * absDscale[o]);
      dshiftBad += dshift != refDshift[o];
    }
  }
  EXPECT_EQ(partBad, 0);
  EXPECT_EQ(dscaleBad, 0);
  EXPECT_EQ(dshiftBad, 0);

  // Partials of a j with no token (j >= the sample's tokens below T) are zero: no trip ran.
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = present[b]; j < P; ++j) {
      for (int64_t d = 0; d < D; ++d) {
        ASSERT_EQ(dscalePart[(b * P + j) * D + d], 0.0f);
        ASSERT_EQ(dshiftPart[(b * P + j) * D + d], 0.0f);
      }
    }
  }
}

TEST(InterpDslLoops, LnModulateBackwardLowersToALoopWithVariables) {
  auto k = instantiateLnModulateBwd(256);
  ASSERT_TRUE(k);
  std::map<kir::OpCode, int> count;
  for (const kir::Op& op : k->ops) ++count[op.code];
  EXPECT_EQ(count[kir::OpCode::ForBegin], 1);
  EXPECT_EQ(count[kir::OpCode::ForEnd], 1);
  EXPECT_EQ(count[kir::OpCode::VarInit], 2);
  EXPECT_EQ(count[kir::OpCode::VarWrite], 2);
  EXPECT_GE(count[kir::OpCode::Splat], 1);
}

TEST(InterpDslLoops, LnModulateBackwardMatchesTheFormulasInBothLayouts) {
  for (const bool sampleMajor : {true, false}) {
    checkLnModulateBwd({3, 5, 2, 256, sampleMajor});
    checkLnModulateBwd({2, 7, 1, 256, sampleMajor});  // one partial: the whole sample in order
    checkLnModulateBwd({2, 3, 5, 256, sampleMajor});  // j = 3, 4 run no trip
  }
}

// T ending inside the last sample ([B, S, D]) or sequence position ([S, B, D]): every token
// below T gets its dx, the partials sum the tokens that are there, and nothing is read or written
// past T (the interpreter's bounds checks fail the run otherwise).
TEST(InterpDslLoops, LnModulateBackwardStopsAtTheLastToken) {
  for (const bool sampleMajor : {true, false}) {
    checkLnModulateBwd({3, 5, 2, 256, sampleMajor, 1, 13});
    checkLnModulateBwd({3, 5, 4, 256, sampleMajor, 1, 7});   // [B,S,D]: sample 2 has no token
    checkLnModulateBwd({2, 7, 3, 256, sampleMajor, 2, 1});
  }
}

// The same on several threads: contiguous ranges of the rows (b, j) on their own machines,
// ranges that split a sample's partials (3 threads over 6 rows, 4 over 15) and more threads than
// rows (64 over 6), against the same formulas.
TEST(InterpDslLoops, LnModulateBackwardOnSeveralThreadsMatchesTheFormulas) {
  for (const bool sampleMajor : {true, false}) {
    checkLnModulateBwd({3, 5, 2, 256, sampleMajor, 3});
    checkLnModulateBwd({3, 7, 5, 256, sampleMajor, 4});
    checkLnModulateBwd({2, 3, 3, 256, sampleMajor, 64});
  }
}

// A failing row is reported as on one thread: the first row of the earliest range that fails.
TEST(InterpDslLoops, SeveralThreadsReportTheFirstFailingRow) {
  auto k = instantiateLnModulateBwd(256);
  ASSERT_TRUE(k);
  const int64_t B = 2, S = 9, P = 2, D = 256, T = B * S;
  std::vector<uint16_t> g(T * D, 0x3F80), x(T * D, 0x3F80), scale(B * D, 0), dx(T * D);
  std::vector<float> mean(T, 1.0f), rstd(T, 1.0f), part(B * P * D);
  std::vector<float> part2(part.size());
  std::string messages[2];
  for (int threads : {1, 3}) {
    RunOptions options;
    options.threads = threads;
    options.maxLoopTripsPerRow = 4;  // rows j = 0 run 5 trips of s = 0, 2, .., 8: they fail
    std::vector<Arg> args = {view(g, Dtype::BF16, {T, D}),     view(x, Dtype::BF16, {T, D}),
                             view(scale, Dtype::BF16, {B, D}), view(mean, Dtype::F32, {T}),
                             view(rstd, Dtype::F32, {T}),      view(dx, Dtype::BF16, {T, D}),
                             view(part, Dtype::F32, {B, P, D}), view(part2, Dtype::F32, {B, P, D}),
                             int64_t{S},                       int64_t{S},
                             int64_t{1}};
    const Status st = run(*k, args, options);
    ASSERT_FALSE(st.isOk());
    messages[threads == 1 ? 0 : 1] = st.message();
  }
  EXPECT_EQ(messages[1], messages[0]);
  EXPECT_NE(messages[0].find("b=0"), std::string::npos) << messages[0];
}

TEST(InterpDslLoops, LnModulateBackwardAtTheSpecializedWidth) {
  // D = 3072 and 32 tokens per sample: 16 trips per row.
  for (const bool sampleMajor : {true, false}) checkLnModulateBwd({2, 32, 2, 3072, sampleMajor});
}

// ln_modulate_bwd_reduce: program (b, c) sums the W-column strip c of sample b's P partials in
// order, j ascending. Reference: the same f32 additions in C++ (j ascending from 0.0f), rounded once
// to bf16 -- bit-equal at every strip width, whatever the strip split.
TEST(InterpDslLoops, LnModulateBackwardReduceSumsEachStripInOrder) {
  const int64_t B = 3, P = 5, D = 3072;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  std::vector<float> dsPart(static_cast<size_t>(B * P * D)), dhPart(dsPart.size());
  for (float& v : dsPart) v = normal(rng);
  for (float& v : dhPart) v = normal(rng);
  std::vector<uint16_t> dsRef(static_cast<size_t>(B * D)), dhRef(dsRef.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t d = 0; d < D; ++d) {
      float ds = 0.0f, dh = 0.0f;
      for (int64_t j = 0; j < P; ++j) {
        ds += dsPart[(b * P + j) * D + d];
        dh += dhPart[(b * P + j) * D + d];
      }
      dsRef[b * D + d] = referenceBf16(ds);
      dhRef[b * D + d] = referenceBf16(dh);
    }
  for (auto [W, threads, vec] : {std::tuple<int64_t, int64_t, int64_t>{384, 64, 2}, {768, 192, 4}, {3072, 384, 8}}) {
    SCOPED_TRACE("W=" + std::to_string(W));
    auto k = instantiateKernelsDsl("ln_modulate.mxk", "ln_modulate_bwd_reduce",
                                   {{"W", W}, {"THREADS", threads}, {"VEC", vec}});
    ASSERT_TRUE(k);
    std::vector<uint16_t> ds(dsRef.size(), 0x7FC1), dh(dhRef.size(), 0x7FC1);
    std::vector<Arg> args = {view(dsPart, Dtype::F32, {B, P, D}), view(dhPart, Dtype::F32, {B, P, D}),
                             view(ds, Dtype::BF16, {B, D}), view(dh, Dtype::BF16, {B, D})};
    Status ran = run(*k, args);
    ASSERT_TRUE(ran.isOk()) << ran.message();
    EXPECT_EQ(ds, dsRef);
    EXPECT_EQ(dh, dhRef);
  }
}

}  // namespace
}  // namespace mxfp6::interp
