// LN-modulate forward run by the interpreter against an independent reference written from the
// formulas of docs/architecture.md 4.2 in long double:
//   mu = mean(x); rstd = 1 / sqrt(mean((x - mu)^2) + eps); y = (x - mu) * rstd * (1 + scale[b])
//   + shift[b], where b is the sample of token t: t / S for tokens laid out [B, S, D], t % B for
//   [S, B, D]. The kernel gets the layout as sample_div (S, resp. 1) and computes
//   b = (t / sample_div) % B.
// eps is the f32 argument's value, float(1e-6): that is what the kernel receives.
//
// Metrics and bounds:
//   - fp64 shadows (y, mean, rstd) vs the reference: |error| <= 1e-12 * magnitude, where the
//     magnitude is that of the terms, so cancellation does not inflate a relative error:
//     y: |xh * (1 + scale)| + |shift|; mean: mean(|x|); rstd: rstd.
//   - stored bf16 y (and f32 mean/rstd) bit-equal to the reference rounded once to bf16 (f32),
//     except where the reference lies within 1e-12 relative of a rounding tie: there the fp64
//     evaluation order may legitimately pick either side, so either neighbour is accepted. For y
//     such elements must be rare (~1e-9 per element). The mean is often exactly a float tie
//     (a short dyadic sum of bf16 values divided by D = 3 * 2^10), so it is not counted.
#include <fstream>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <map>
#include <optional>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "compiler/frontend/frontend.h"
#include "compiler/interp/float_formats.h"
#include "compiler/interp/interpreter.h"
#include "tests/interp/ln_modulate_kernel.h"
#include "tests/interp/reference_rounding.h"


namespace mxfp6::interp {
namespace {

using testing::buildLnModulate;
using testing::referenceBf16;
using testing::referenceBf16Value;

constexpr double kTol = 1e-12;

struct LnShape {
  int64_t B, S, T, D;
  bool seqMajor = false;  // tokens laid out [S, B, D] instead of [B, S, D]
  int64_t sampleDiv() const { return seqMajor ? 1 : S; }
  int64_t sampleOf(int64_t t) const { return seqMajor ? t % B : t / S; }
};

struct LnData {
  LnShape shape;
  std::vector<uint16_t> x, scale, shift, y;
  std::vector<float> mean, rstd;
  std::vector<double> y64, mean64, rstd64;
};

LnData makeData(const LnShape& s, uint64_t seed) {
  LnData d{s, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> xs(0.25, 1.5), mods(0.0, 0.3);
  auto fill = [&](std::vector<uint16_t>& v, size_t n, std::normal_distribution<double>& dist) {
    v.resize(n);
    for (auto& e : v) e = referenceBf16(dist(rng));
  };
  fill(d.x, s.T * s.D, xs);
  fill(d.scale, s.B * s.D, mods);
  fill(d.shift, s.B * s.D, mods);
  d.y.assign(s.T * s.D, 0xFFFF);  // NaN: an element the kernel failed to write stays visible
  d.mean.assign(s.T, std::nanf(""));
  d.rstd.assign(s.T, std::nanf(""));
  d.y64.assign(s.T * s.D, std::nan(""));
  d.mean64.assign(s.T, std::nan(""));
  d.rstd64.assign(s.T, std::nan(""));
  return d;
}

std::vector<Arg> lnArgs(LnData& d, const kir::Kernel& k) {
  auto tensor = [](void* p, kir::Dtype t, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    return TensorArg{p, t, std::move(shape), n};
  };
  const LnShape& s = d.shape;
  std::vector<Arg> args(k.params.size());
  args[testing::kX] = tensor(d.x.data(), kir::Dtype::BF16, {s.T, s.D});
  args[testing::kScale] = tensor(d.scale.data(), kir::Dtype::BF16, {s.B, s.D});
  args[testing::kShift] = tensor(d.shift.data(), kir::Dtype::BF16, {s.B, s.D});
  args[testing::kY] = tensor(d.y.data(), kir::Dtype::BF16, {s.T, s.D});
  args[testing::kMean] = tensor(d.mean.data(), kir::Dtype::F32, {s.T});
  args[testing::kRstd] = tensor(d.rstd.data(), kir::Dtype::F32, {s.T});
  args[testing::kSampleDiv] = s.sampleDiv();
  args[testing::kEps] = std::monostate{};  // default 1e-6
  if (k.name == "ln_modulate_fwd_samples") {
    // Where the samples' tokens are instead of sample_div (token t of sample b at
    // b * sample_stride + s * token_stride), then eps: set by name.
    auto set = [&](const char* name, Arg value) {
      for (size_t i = 0; i < k.params.size(); ++i)
        if (k.params[i].name == name) args[i] = std::move(value);
    };
    set("tokens_per_sample", s.S);
    set("sample_stride", s.seqMajor ? int64_t{1} : s.S);
    set("token_stride", s.seqMajor ? s.B : int64_t{1});
    set("eps", std::monostate{});
  }
  return args;
}

/// Checks that `stored` is `round(ref)`, or, when ref lies within kTol relative of a rounding
/// boundary (a tie), either of the two roundings on each side of it; counts the latter.
template <class Bits, class Round>
::testing::AssertionResult roundedOnce(Bits stored, long double ref, Round round,
                                       int64_t& nearTies) {
  const Bits below = round(static_cast<double>(ref * (1 - kTol)));
  const Bits above = round(static_cast<double>(ref * (1 + kTol)));
  if (below != above) {
    ++nearTies;
    if (stored == below || stored == above) return ::testing::AssertionSuccess();
  } else if (stored == round(static_cast<double>(ref))) {
    return ::testing::AssertionSuccess();
  }
  std::ostringstream os;
  os << "stored bits 0x" << std::hex << +stored << ", reference " << std::hexfloat
     << static_cast<double>(ref) << " rounds to 0x" << +round(static_cast<double>(ref));
  return ::testing::AssertionFailure() << os.str();
}

struct Mismatches {
  int64_t yNearTies = 0;
  int64_t statNearTies = 0;
};

void checkAgainstReference(const LnData& d, Mismatches& m) {
  const LnShape& s = d.shape;
  const long double eps = static_cast<float>(1e-6);
  auto f32Bits = [](double v) { return std::bit_cast<uint32_t>(static_cast<float>(v)); };
  for (int64_t t = 0; t < s.T; ++t) {
    const int64_t b = s.sampleOf(t);
    const uint16_t* x = &d.x[t * s.D];
    long double sum = 0, sumAbs = 0;
    for (int64_t i = 0; i < s.D; ++i) {
      sum += referenceBf16Value(x[i]);
      sumAbs += std::fabs(referenceBf16Value(x[i]));
    }
    const long double mu = sum / s.D;
    long double sq = 0;
    for (int64_t i = 0; i < s.D; ++i) {
      const long double c = referenceBf16Value(x[i]) - mu;
      sq += c * c;
    }
    const long double rstd = 1 / std::sqrt(sq / s.D + eps);

    ASSERT_LE(std::fabs(d.mean64[t] - mu), kTol * sumAbs / s.D) << "t=" << t;
    ASSERT_LE(std::fabs(d.rstd64[t] - rstd), kTol * rstd) << "t=" << t;
    ASSERT_TRUE(roundedOnce(std::bit_cast<uint32_t>(d.mean[t]), mu, f32Bits, m.statNearTies))
        << "mean, t=" << t;
    ASSERT_TRUE(roundedOnce(std::bit_cast<uint32_t>(d.rstd[t]), rstd, f32Bits, m.statNearTies))
        << "rstd, t=" << t;

    for (int64_t i = 0; i < s.D; ++i) {
      const long double xh = (referenceBf16Value(x[i]) - mu) * rstd;
      const long double mod = 1 + static_cast<long double>(referenceBf16Value(d.scale[b * s.D + i]));
      const long double sh = referenceBf16Value(d.shift[b * s.D + i]);
      const long double y = xh * mod + sh;
      const long double terms = std::fabs(xh * mod) + std::fabs(sh);
      const int64_t o = t * s.D + i;
      ASSERT_LE(std::fabs(d.y64[o] - y), kTol * terms) << "t=" << t << " i=" << i;
      ASSERT_TRUE(roundedOnce(d.y[o], y, referenceBf16, m.yNearTies)) << "y, t=" << t << " i=" << i;
    }
  }
}

void runAndCheck(const kir::Kernel& k, const LnShape& shape, uint64_t seed) {
  LnData d = makeData(shape, seed);
  std::vector<Arg> args = lnArgs(d, k);
  RunOptions opts;
  opts.fp64Outputs = {{testing::kY, &d.y64}, {testing::kMean, &d.mean64},
                      {testing::kRstd, &d.rstd64}};
  const Status st = run(k, args, opts);
  ASSERT_TRUE(st.isOk()) << st.message();
  Mismatches m;
  checkAgainstReference(d, m);
  if (::testing::Test::HasFatalFailure()) return;
  // Within 1e-12 of a tie is a ~1e-9 event per element of y: a handful at most.
  EXPECT_LE(m.yNearTies, 2) << "elements of y within 1e-12 of a bf16 tie";
}

TEST(LnModulateHandBuilt, SmallD) {
  runAndCheck(buildLnModulate(64), {3, 5, 15, 64}, 1);
}

TEST(LnModulateHandBuilt, SmallDSequenceMajor) {
  // [S, B, D]: consecutive tokens belong to consecutive samples, sample_div = 1.
  runAndCheck(buildLnModulate(64), {3, 5, 15, 64, true}, 1);
}

TEST(LnModulateHandBuilt, RealD) {
  runAndCheck(buildLnModulate(3072), {3, 3, 7, 3072}, 2);
}

TEST(LnModulateHandBuilt, ThousandsOfRows) {
  // The size GPU tests compare against: it must run in well under a second.
  runAndCheck(buildLnModulate(3072), {8, 256, 2048, 3072}, 3);
}

TEST(LnModulateHandBuilt, ExplicitEpsAndSampleIndexing) {
  // Every token of sample b must read scale[b]/shift[b]: with S = 1 each row has its own sample.
  const kir::Kernel k = buildLnModulate(64);
  LnData d = makeData({4, 1, 4, 64}, 4);
  std::vector<Arg> args = lnArgs(d, k);
  args[testing::kEps] = 0.25;
  ASSERT_TRUE(run(k, args).isOk());
  for (int64_t t = 0; t < 4; ++t) {
    long double mu = 0, sq = 0;
    for (int i = 0; i < 64; ++i) mu += referenceBf16Value(d.x[t * 64 + i]);
    mu /= 64;
    for (int i = 0; i < 64; ++i) {
      const long double c = referenceBf16Value(d.x[t * 64 + i]) - mu;
      sq += c * c;
    }
    const long double rstd = 1 / std::sqrt(sq / 64 + 0.25L);
    EXPECT_EQ(d.rstd[t], static_cast<float>(static_cast<double>(rstd)));
    const long double y0 = (referenceBf16Value(d.x[t * 64]) - mu) * rstd *
                               (1 + static_cast<long double>(referenceBf16Value(d.scale[t * 64]))) +
                           referenceBf16Value(d.shift[t * 64]);
    EXPECT_EQ(d.y[t * 64], referenceBf16(static_cast<double>(y0)));
  }
}

TEST(LnModulateHandBuilt, ReportsSampleIndexOutsideScale) {
  // (t / sample_div) % B lies in [0, B) for a positive sample_div. A negative one gives a
  // negative sample index (the remainder truncates: (1 / -1) % 2 = -1), so scale is read out of
  // bounds at the first such row, t = 1.
  const kir::Kernel k = buildLnModulate(64);
  LnData d = makeData({2, 3, 7, 64}, 5);
  std::vector<Arg> args = lnArgs(d, k);
  args[testing::kSampleDiv] = int64_t{-1};
  const Status st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("ln_modulate.mxk:19:5: error: load from 'scale' out of bounds at "
                              "scale[-1, :]: index -1 of dim 0 (B) is outside [0, 2)"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("row t=1"), std::string::npos) << st.message();
}

std::optional<kir::Kernel> instantiateLnModulate(const std::map<std::string, int64_t>& config,
                                                 const char* name = "ln_modulate_fwd") {
  frontend::DiagnosticEngine diags;
  auto module = frontend::parseFile(MXFP6_SOURCE_DIR "/kernels_dsl/ln_modulate.mxk", diags);
  if (!module) {
    ADD_FAILURE() << diags.render();
    return std::nullopt;
  }
  auto k = frontend::instantiate(*module, name, config, diags);
  if (!k) ADD_FAILURE() << diags.render();
  return k;
}

TEST(LnModulateFromDsl, RealD) {
  auto k = instantiateLnModulate({});
  ASSERT_TRUE(k);
  ASSERT_EQ(k->params.size(), static_cast<size_t>(testing::kLnParamCount));
  runAndCheck(*k, {3, 3, 7, 3072}, 2);
}

TEST(LnModulateFromDsl, RealDSequenceMajor) {
  // [S, B, D] with a ragged last sequence position: T = 7 tokens of B = 3 samples.
  auto k = instantiateLnModulate({});
  ASSERT_TRUE(k);
  runAndCheck(*k, {3, 3, 7, 3072, true}, 9);
}

TEST(LnModulateFromDsl, SmallD) {
  // The file's constraints need D % (THREADS * VEC) == 0: D = 256 with THREADS = 128, VEC = 2.
  auto k = instantiateLnModulate({{"D", 256}, {"THREADS", 128}, {"VEC", 2}});
  ASSERT_TRUE(k);
  runAndCheck(*k, {3, 5, 15, 256}, 1);
}

TEST(LnModulateFromDsl, BindsRuntimeDimsOfTheRealSignature) {
  auto k = instantiateLnModulate({});
  ASSERT_TRUE(k);
  LnData d = makeData({3, 3, 7, 3072}, 6);
  auto bound = bindArguments(*k, lnArgs(d, *k));
  ASSERT_TRUE(bound.isOk()) << bound.status().message();
  for (size_t i = 0; i < k->runtimeDims.size(); ++i) {
    if (k->runtimeDims[i] == "T") EXPECT_EQ(bound->runtimeDims[i], 7);
    if (k->runtimeDims[i] == "B") EXPECT_EQ(bound->runtimeDims[i], 3);
  }
  EXPECT_EQ(bound->floatScalars[testing::kEps], static_cast<double>(1e-6f));
  EXPECT_EQ(bound->intScalars[testing::kSampleDiv], 3);
}

TEST(LnModulateFromDsl, MatchesTheHandBuiltKirBitForBit) {
  auto k = instantiateLnModulate({});
  ASSERT_TRUE(k);
  const kir::Kernel hand = buildLnModulate(3072);
  for (bool seqMajor : {false, true}) {
    SCOPED_TRACE(seqMajor ? "[S, B, D]" : "[B, S, D]");
    LnData a = makeData({3, 3, 7, 3072, seqMajor}, 7), b = a;
    RunOptions optsA, optsB;
    optsA.fp64Outputs = {{testing::kY, &a.y64}};
    optsB.fp64Outputs = {{testing::kY, &b.y64}};
    ASSERT_TRUE(run(*k, lnArgs(a, *k), optsA).isOk());
    ASSERT_TRUE(run(hand, lnArgs(b, hand), optsB).isOk());
    EXPECT_EQ(a.y, b.y);
    EXPECT_EQ(a.y64, b.y64);
    EXPECT_EQ(0, std::memcmp(a.mean.data(), b.mean.data(), a.mean.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(a.rstd.data(), b.rstd.data(), a.rstd.size() * sizeof(float)));
  }
}

TEST(LnModulateFromDsl, ZeroSampleDivIsALocatedError) {
  auto k = instantiateLnModulate({});
  ASSERT_TRUE(k);
  LnData d = makeData({3, 3, 7, 3072}, 8);
  std::vector<Arg> args = lnArgs(d, *k);
  args[testing::kSampleDiv] = int64_t{0};
  const Status st = run(*k, args);
  ASSERT_FALSE(st.isOk());
  // The location is the division's line in the DSL source: the forward's sample index
  // "(t / sample_div) % B", passed to the fn that computes its row.
  std::ifstream source(MXFP6_SOURCE_DIR "/kernels_dsl/ln_modulate.mxk");
  std::string line;
  int number = 0, divisionLine = 0;
  while (divisionLine == 0 && std::getline(source, line)) {
    ++number;
    if (line.find("(t / sample_div) % B)") != std::string::npos) divisionLine = number;
  }
  ASSERT_GT(divisionLine, 0);
  EXPECT_NE(st.message().find("ln_modulate.mxk:" + std::to_string(divisionLine) + ":"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("error: integer division of 0 by zero"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("row t=0"), std::string::npos) << st.message();
}

// The sample-walking forward: the same reference, every token written once whatever P leaves
// each program (no trip, one, or several), in both token layouts, with T ending inside the last
// sample or sequence position too.
TEST(LnModulateSamplesFromDsl, EveryToken) {
  for (int64_t P : {64, 128, 256}) {
    auto k = instantiateLnModulate({{"P", P}}, "ln_modulate_fwd_samples");
    ASSERT_TRUE(k);
    for (bool seqMajor : {false, true}) {
      SCOPED_TRACE(std::string(seqMajor ? "[S, B, D]" : "[B, S, D]") + " P=" + std::to_string(P));
      runAndCheck(*k, {2, 130, 260, 3072, seqMajor}, 11);  // 130 tokens: P=64 runs 3 or 2 trips
      runAndCheck(*k, {3, 5, 15, 3072, seqMajor}, 12);     // fewer tokens than programs per sample
      runAndCheck(*k, {3, 5, 13, 3072, seqMajor}, 14);     // ragged: T ends inside a sample / position
    }
  }
}

TEST(LnModulateSamplesFromDsl, MatchesThePerTokenKernelBitForBit) {
  auto samples = instantiateLnModulate({}, "ln_modulate_fwd_samples");
  auto perToken = instantiateLnModulate({});
  ASSERT_TRUE(samples && perToken);
  for (bool seqMajor : {false, true}) {
    SCOPED_TRACE(seqMajor ? "[S, B, D]" : "[B, S, D]");
    LnData a = makeData({3, 4, 11, 3072, seqMajor}, 13), b = a;  // T = 11: ragged in both layouts
    ASSERT_TRUE(run(*samples, lnArgs(a, *samples), {}).isOk());
    ASSERT_TRUE(run(*perToken, lnArgs(b, *perToken), {}).isOk());
    EXPECT_EQ(a.y, b.y);
    EXPECT_EQ(0, std::memcmp(a.mean.data(), b.mean.data(), a.mean.size() * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(a.rstd.data(), b.rstd.data(), a.rstd.size() * sizeof(float)));
  }
}

}  // namespace
}  // namespace mxfp6::interp
