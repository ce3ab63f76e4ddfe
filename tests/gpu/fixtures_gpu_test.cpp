// The DSL-only test fixtures (tests/fixtures/*.mxk) on the GPU against the fp64 interpreter:
// a kernel added as one .mxk file, with no C++, runs like the production ones.
//
// rmsnorm: y = x * rsqrt(mean(x*x) + eps) * w has no cancellation (products only), so every
// element must be within 1 bf16 ulp of the fp64 result rounded to bf16. Outputs poisoned (NaN)
// before each launch; two launches bit-identical.
//
// silu_mul_pack: h = bf16(silu(gate) * up) packed to MXFP6 rows (E2M3/RCEIL and E3M2/EVEN code
// objects), T = 8192 and 3 rows of F = 3072. The GPU rounds its fp32 h (exp through the
// approximate hardware exp2) to bf16, the interpreter its exact fp64 h, so near a bf16 rounding
// tie they can hold neighbouring bf16 values; everything downstream is the exact encoder. Rules,
// on both outputs decoded (mx::decodeBlobs) with a = GPU, b = interpreter:
//   scales:   the two scale bytes of every block differ by at most 1 (a bf16 neighbour of the
//             amax moves the scale by at most one step) and neither is 0xFF (NaN).
//   elements: with s = the larger of the block's two scale bytes, u = 2^(s-127) and
//             m = max(|a|, |b|) / u, |a - b| <= u * step(m), step(m) = the spacing of the element
//             format's codes in m's binade: 2^(max(floor(log2 m), EMIN) - MB), i.e. 2^-3 below 1
//             and 2^(floor(log2 m) - 3) above for E2M3, 2^-4 below 1/4 and 2^(floor(log2 m) - 2)
//             above for E3M2. Why this holds: two round-to-nearest results of inputs one bf16 ulp
//             apart (a bf16 ulp is 1/16 of an E2M3 step, 1/32 of an E3M2 step) on one grid are
//             equal or adjacent codes; with scales one apart the two grids agree in the normal
//             range and the smaller scale only refines the subnormals, and neither mode saturates
//             beyond rounding to the largest code; so a and b are at most one step of the larger's
//             binade apart. A NaN fails.
//   exact bytes: data and scale bytes that differ are counted and reported, and must number
//             fewer than 1e-3 of the elements + 25 (one block's 24 data bytes and its scale byte,
//             so that a single scale step cannot fail the 3-row shape alone). Safe: a byte can
//             differ only where an element's two bf16 values differ (the exact h within the
//             GPU's fp32 error of a bf16 rounding midpoint) and these straddle an MXFP6 rounding
//             boundary, or where the block's amax straddles a scale boundary (which changes up to
//             all 24 data bytes of the block). A CPU model of the GPU arithmetic (fp32, 4 to 64
//             ulp of error on exp) on these inputs puts bf16 disagreements on 1.4e-5 to 2.5e-4 of
//             the elements and differing bytes on 2e-6 to 1e-5: a margin of 100 or more.
// Outputs poisoned (0xFF) before each launch; two launches byte-identical.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "compiler/interp/float_formats.h"
#include "compiler/interp/interpreter.h"
#include "compiler/interp/mxfp6.h"
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
  interp::RunOptions opts = gputest::referenceOptions();
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

// ---------------------------------------------------------------------------------------------
// silu_mul_pack (tests/fixtures/silu_mul_pack.mxk): see the rules at the top.

constexpr int64_t kF = 3072, kFBlocks = kF / 32, kFPacked = kF * 3 / 4;

struct Packed {
  std::vector<uint8_t> data, scales;
  bool operator==(const Packed&) const = default;
};

std::vector<interp::Arg> siluArgs(const void* gate, const void* up, void* data, void* scales, int64_t T) {
  return {tensor(gate, kir::Dtype::BF16, {T, kF}), tensor(up, kir::Dtype::BF16, {T, kF}),
          tensor(data, kir::Dtype::U8, {T, kFPacked}), tensor(scales, kir::Dtype::U8, {T, kFBlocks})};
}

Expected<Packed> runSiluMulPack(rt::Device& dev, const gputest::CodeObject& obj, const kir::Kernel& kernel,
                                const std::vector<uint16_t>& gate, const std::vector<uint16_t>& up, int64_t T) {
  gputest::DeviceArgs d;
  ASSIGN_OR_RETURN(void* g, d.upload(dev, gate.data(), gate.size() * 2));
  ASSIGN_OR_RETURN(void* u, d.upload(dev, up.data(), up.size() * 2));
  ASSIGN_OR_RETURN(void* data, d.output(dev, T * kFPacked));
  ASSIGN_OR_RETURN(void* scales, d.output(dev, T * kFBlocks));
  RETURN_IF_ERROR(gputest::launch(dev, obj, kernel, siluArgs(g, u, data, scales, T), T));
  Packed out;
  ASSIGN_OR_RETURN(out.data, gputest::download<uint8_t>(dev, data, T * kFPacked));
  ASSIGN_OR_RETURN(out.scales, gputest::download<uint8_t>(dev, scales, T * kFBlocks));
  return out;
}

/// The spacing of the format's codes in the binade of m >= 0 (in units of the block scale):
/// 2^(max(floor(log2 m), EMIN) - MB); E2M3: EMIN = 0, MB = 3; E3M2: EMIN = -2, MB = 2.
double elementStep(double m, mx::ElementFormat format) {
  int emin = format == mx::ElementFormat::E2M3 ? 0 : -2, mb = format == mx::ElementFormat::E2M3 ? 3 : 2;
  int e = m < std::ldexp(1.0, emin) ? emin : std::ilogb(m);
  return std::ldexp(1.0, e - mb);
}

class SiluMulPackFixtureGpu : public ::testing::TestWithParam<int64_t> {};

TEST_P(SiluMulPackFixtureGpu, WithinOneElementStepRarelyDifferentAndDeterministic) {
  std::string whyNot;
  rt::Device* dev = gputest::device(&whyNot);
  if (!dev) GTEST_SKIP() << whyNot;
  auto objects = gputest::findCodeObjects("silu_mul_pack");
  ASSERT_FALSE(objects.empty()) << "no silu_mul_pack code objects in " << gputest::gpuKernelsDir();

  int64_t T = GetParam();
  std::mt19937_64 rng(11 + T);
  std::vector<uint16_t> gate(T * kF), up(T * kF);
  // Per-row spreads, so blocks take many scales; gate straddles 0 so silu takes both signs.
  std::uniform_real_distribution<float> gateSpread(0.5f, 4.0f), upSpread(0.1f, 10.0f);
  for (int64_t t = 0; t < T; ++t) {
    gputest::fillNormalBf16(gate, t * kF, kF, 0.0f, gateSpread(rng), rng);
    gputest::fillNormalBf16(up, t * kF, kF, 0.0f, upSpread(rng), rng);
  }
  std::string error;
  for (const gputest::CodeObject& obj : objects) {
    SCOPED_TRACE(obj.path);
    auto kernel = gputest::instantiateDsl("tests/fixtures/silu_mul_pack.mxk", "silu_mul_pack", obj.metadata.config, error);
    ASSERT_TRUE(kernel) << error;
    auto format = mx::ElementFormat(kernel->config.at("FMT"));
    auto mode = mx::ScaleMode(kernel->config.at("MODE"));
    // The interpreter runs the same instantiation (the schedule does not change its result).
    Packed ref{std::vector<uint8_t>(T * kFPacked), std::vector<uint8_t>(T * kFBlocks)};
    Status ran = interp::run(*kernel, siluArgs(gate.data(), up.data(), ref.data.data(), ref.scales.data(), T),
                             gputest::referenceOptions());
    ASSERT_TRUE(ran.isOk()) << ran.message();
    auto first = runSiluMulPack(*dev, obj, *kernel, gate, up, T);
    ASSERT_TRUE(first.isOk()) << first.status().message();
    auto second = runSiluMulPack(*dev, obj, *kernel, gate, up, T);
    ASSERT_TRUE(second.isOk()) << second.status().message();

    auto gpuValues = mx::decodeBlobs(mx::PackedBlobs{T, kF, first->data, first->scales}, format);
    ASSERT_TRUE(gpuValues.isOk()) << gpuValues.status().message();
    auto refValues = mx::decodeBlobs(mx::PackedBlobs{T, kF, ref.data, ref.scales}, format);
    ASSERT_TRUE(refValues.isOk()) << refValues.status().message();
    int64_t elements = T * kF, dataBytes = 0, scaleBytes = 0, scalesApart = 0, codesDiffering = 0, beyondStep = 0;
    for (size_t i = 0; i < first->data.size(); ++i) dataBytes += first->data[i] != ref.data[i];
    for (int64_t blk = 0; blk < T * kFBlocks; ++blk) {
      int sa = first->scales[blk], sb = ref.scales[blk];
      scaleBytes += sa != sb;
      scalesApart += std::abs(sa - sb) > 1 || sa == mx::kNanScale || sb == mx::kNanScale;
      double unit = std::ldexp(1.0, std::max(sa, sb) - 127);
      for (int64_t i = blk * 32; i < blk * 32 + 32; ++i) {
        double a = (*gpuValues)[i], b = (*refValues)[i];
        double bound = unit * elementStep(std::max(std::fabs(a), std::fabs(b)) / unit, format);
        codesDiffering += a != b;
        beyondStep += !(std::fabs(a - b) <= bound);  // a NaN counts as beyond
      }
    }
    bool identical = *first == *second;
    std::string tag;
    for (const auto& [k, v] : obj.metadata.config) tag += k + "=" + std::to_string(v) + " ";
    std::printf("RESULT silu_mul_pack %-36s T=%-6lld F=%lld %s/%s data_bytes_differing=%lld scale_bytes_differing=%lld "
                "(%.2g of elements) elements_differing=%lld beyond_one_step=%lld scales_beyond_one=%lld "
                "deterministic=%s\n",
                tag.c_str(), (long long)T, (long long)kF, mx::elementFormatName(format), mx::scaleModeName(mode),
                (long long)dataBytes, (long long)scaleBytes, double(dataBytes + scaleBytes) / double(elements),
                (long long)codesDiffering, (long long)beyondStep, (long long)scalesApart, identical ? "yes" : "NO");
    EXPECT_EQ(scalesApart, 0);
    EXPECT_EQ(beyondStep, 0);
    EXPECT_LT(double(dataBytes + scaleBytes), 1e-3 * double(elements) + 25);
    EXPECT_TRUE(identical);
  }
}

INSTANTIATE_TEST_SUITE_P(Tokens, SiluMulPackFixtureGpu, ::testing::Values(int64_t{8192}, int64_t{3}),
                         [](const auto& info) { return "T" + std::to_string(info.param); });

}  // namespace
}  // namespace mxfp6
