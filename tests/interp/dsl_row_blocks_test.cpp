// The row-vector builtins written in the DSL (kernels_dsl/README.md, "Values and builtins"),
// lowered by the frontend and run by the interpreter: the same references as
// row_blocks_test.cpp, on kernels in inline sources. Reference for the packer: mx::packRows
// (bound: 0 differing bytes); for repeat, group reductions and rotate_pairs the index formulas
// and fma(c, v0, -(s * v1)), exact for f32 inputs (bound: bit-equal fp64 shadows).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "compiler/frontend/frontend.h"
#include "compiler/interp/interpreter.h"
#include "compiler/interp/mxfp6.h"
#include "tests/interp/dsl_test_util.h"

namespace mxfp6::interp {
namespace {

using ::testing::HasSubstr;
using kir::Dtype;

bool sameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

const char* const kPackRows = R"(
kernel pack_rows(X: bf16[R, C], data: out u8[R, P], scales: out u8[R, NB])
  specialize C = 64, P = 48, NB = 2
  variant FMT in {E2M3, E3M2}, MODE in {RCEIL, EVEN, FLOOR}
  require P * 4 == C * 3 : "P is the packed row, 3C/4 bytes"
  require NB * 32 == C : "NB is the number of 32-element blocks"
{
  row r in R {
    x = X[r, :]
    s = mx_scale(x, FMT, MODE)
    data[r, :] = pack6(mx_encode(x, s, FMT))
    scales[r, :] = s
  }
}
)";

TEST(InterpDsl, RowPackerIsByteIdenticalToPackRows) {
  for (const int64_t cols : {int64_t{64}, int64_t{3072}}) {
    const int64_t rows = cols == 64 ? 64 : 6;
    std::mt19937 rng(static_cast<uint32_t>(cols) + 1);
    std::vector<uint16_t> xs(static_cast<size_t>(rows * cols));
    for (size_t j = 0; j < xs.size(); ++j) {
      const int block = static_cast<int>(j / 32);
      const uint32_t u = rng();
      // Mostly values around a per-block binade; some blocks all zero, subnormal, or with a
      // NaN/Inf.
      const int exponent = 100 + block % 50 + static_cast<int>(u % 5);
      xs[j] = static_cast<uint16_t>((u & 0x8000) | (exponent << 7) | ((u >> 8) & 0x7F));
      if (block % 7 == 1) xs[j] = static_cast<uint16_t>(u & 0x8000);
      if (block % 7 == 2) xs[j] = static_cast<uint16_t>((u & 0x8000) | ((u >> 8) & 0x7F));
      if (block % 7 == 3 && j % 32 == 17) xs[j] = (u & 1) ? 0x7FC0 : 0xFF80;
    }
    for (int f = 0; f < 2; ++f) {
      for (int m = 0; m < 3; ++m) {
        SCOPED_TRACE("C=" + std::to_string(cols) + " FMT=" + std::to_string(f) +
                     " MODE=" + std::to_string(m));
        auto k = instantiateSource(kPackRows, "pack_rows",
                                   {{"C", cols}, {"P", cols / 4 * 3}, {"NB", cols / 32},
                                    {"FMT", f}, {"MODE", m}});
        ASSERT_TRUE(k);
        std::vector<uint16_t> x = xs;
        std::vector<uint8_t> data(static_cast<size_t>(rows * cols / 4 * 3), 0xEE);
        std::vector<uint8_t> scales(static_cast<size_t>(rows * cols / 32), 0xEE);
        std::vector<Arg> args = {view(x, Dtype::BF16, {rows, cols}),
                                 view(data, Dtype::U8, {rows, cols / 4 * 3}),
                                 view(scales, Dtype::U8, {rows, cols / 32})};
        const Status st = run(*k, args);
        ASSERT_TRUE(st.isOk()) << st.message();
        const auto format = f == 0 ? mx::ElementFormat::E2M3 : mx::ElementFormat::E3M2;
        const mx::ScaleMode modes[] = {mx::ScaleMode::Rceil, mx::ScaleMode::Even,
                                       mx::ScaleMode::Floor};
        Expected<mx::PackedBlobs> ref = mx::packRows(xs, rows, cols, format, modes[m]);
        ASSERT_TRUE(ref.isOk()) << ref.status().message();
        EXPECT_EQ(scales, ref->scales);
        EXPECT_EQ(data, ref->data);
      }
    }
  }
}

const char* const kBlocks = R"(
kernel blocks(x: f32[T, D], cs: f32[T, H], sn: f32[T, H], n: i32[T, D],
              y: out f32[T, D], g: out f32[T, G], rot: out f32[T, D], ni: out i32[T, G])
  specialize D = 128, H = 64, G = 4
{
  row t in T {
    v = x[t, :]
    g[t, :] = group_sum(v, 32)
    y[t, :] = v - repeat(group_max(v, 32), 32) + repeat(group_min(v, 32), 32)
    rot[t, :] = rotate_pairs(v, cs[t, :], sn[t, :])
    ni[t, :] = group_sum(n[t, :], 32)
  }
}
)";

TEST(InterpDsl, RepeatGroupReductionsAndRotatePairs) {
  auto k = instantiateSource(kBlocks, "blocks", {});
  ASSERT_TRUE(k);
  constexpr int kRows = 6, D = 128, H = 64, G = 4;
  std::mt19937 rng(29);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::uniform_real_distribution<double> angle(-4.0, 4.0);
  std::vector<float> x(kRows * D), cs(kRows * H), sn(kRows * H), y(kRows * D), g(kRows * G),
      rot(kRows * D);
  std::vector<int32_t> n(kRows * D), ni(kRows * G);
  for (float& e : x) e = dist(rng);
  x[D + 40] = std::nanf("");  // row 1, group 1
  for (size_t p = 0; p < cs.size(); ++p) {
    const double a = angle(rng);
    cs[p] = static_cast<float>(std::cos(a));
    sn[p] = static_cast<float>(std::sin(a));
  }
  for (int32_t& e : n) e = static_cast<int32_t>(rng() % 2000001) - 1000000;
  std::vector<double> y64(y.size(), -1.0), g64(g.size(), -1.0), rot64(rot.size(), -1.0);
  std::vector<Arg> args = {view(x, Dtype::F32, {kRows, D}),   view(cs, Dtype::F32, {kRows, H}),
                           view(sn, Dtype::F32, {kRows, H}),  view(n, Dtype::I32, {kRows, D}),
                           view(y, Dtype::F32, {kRows, D}),   view(g, Dtype::F32, {kRows, G}),
                           view(rot, Dtype::F32, {kRows, D}), view(ni, Dtype::I32, {kRows, G})};
  RunOptions opts;
  opts.fp64Outputs = {{4, &y64}, {5, &g64}, {6, &rot64}};
  const Status st = run(*k, args, opts);
  ASSERT_TRUE(st.isOk()) << st.message();

  for (int r = 0; r < kRows; ++r) {
    for (int q = 0; q < G; ++q) {
      const float* v = &x[r * D + 32 * q];
      double sum = v[0], hi = v[0], lo = v[0];
      int64_t isum = 0;
      bool nan = false;
      for (int j = 0; j < 32; ++j) {
        if (j > 0) sum += v[j];
        nan = nan || std::isnan(v[j]);
        hi = std::max(hi, static_cast<double>(v[j]));
        lo = std::min(lo, static_cast<double>(v[j]));
        isum += n[r * D + 32 * q + j];
      }
      if (nan) hi = lo = std::numeric_limits<double>::quiet_NaN();
      EXPECT_TRUE(sameBits(g64[r * G + q], sum)) << r << " " << q;
      EXPECT_EQ(ni[r * G + q], isum);
      for (int j = 0; j < 32; ++j) {
        const double want = static_cast<double>(v[j]) - hi + lo;
        const double got = y64[r * D + 32 * q + j];
        EXPECT_TRUE(sameBits(got, want) || (std::isnan(got) && std::isnan(want))) << r << " " << j;
      }
    }
    for (int p = 0; p < H; ++p) {
      const double v0 = x[r * D + 2 * p], v1 = x[r * D + 2 * p + 1];
      const double c = cs[r * H + p], s = sn[r * H + p];
      const double want0 = std::fma(c, v0, -(s * v1)), want1 = std::fma(s, v0, c * v1);
      const double got0 = rot64[r * D + 2 * p], got1 = rot64[r * D + 2 * p + 1];
      EXPECT_TRUE(sameBits(got0, want0) || (std::isnan(got0) && std::isnan(want0))) << r << " " << p;
      EXPECT_TRUE(sameBits(got1, want1) || (std::isnan(got1) && std::isnan(want1))) << r << " " << p;
    }
  }
}

const char* const kCastScale = R"(
kernel cast_scale(x: f32[T, 32], s: out u8[T, 1], c: out u8[T, 32]) {
  row t in T {
    v = bf16(x[t, :])
    s[t, :] = mx_scale(v, E2M3, FLOOR)
    c[t, :] = mx_encode(v, mx_scale(v, E2M3, FLOOR), E2M3)
  }
}
)";

TEST(InterpDsl, MxScaleOfACastQuantizesTheRoundedBf16Value) {
  // 2 - 2^-23 rounds to bf16 2.0: the FLOOR scale is 2^(1-2) (byte 126), not 125 as its
  // unrounded or truncated value (amax in 2^0) would give; its code is 2 / 2^-1 = 4 -> 0x18.
  auto k = instantiateSource(kCastScale, "cast_scale", {});
  ASSERT_TRUE(k);
  std::vector<float> x(32, 0.25f);
  x[9] = std::bit_cast<float>(0x3FFFFFFFu);
  std::vector<uint8_t> s(1), c(32);
  std::vector<Arg> args = {view(x, Dtype::F32, {1, 32}), view(s, Dtype::U8, {1, 1}),
                           view(c, Dtype::U8, {1, 32})};
  const Status st = run(*k, args);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(s[0], 126);
  EXPECT_EQ(c[9], 0x18);
  EXPECT_EQ(c[0], 0x04);
}

const char* const kPackCodes = R"(
kernel pack_codes(c: u8[T, 8], p: out u8[T, 6]) {
  row t in T {
    p[t, :] = pack6(c[t, :])
  }
}
)";

TEST(InterpDsl, Pack6OfANonSixBitCodeIsAnErrorAtTheCall) {
  auto k = instantiateSource(kPackCodes, "pack_codes", {});
  ASSERT_TRUE(k);
  std::vector<uint8_t> codes = {1, 2, 3, 4, 0x3F, 0, 0, 0, 0, 0, 0, 200, 0, 0, 0, 0};
  std::vector<uint8_t> packed(12, 0xEE);
  std::vector<Arg> args = {view(codes, Dtype::U8, {2, 8}), view(packed, Dtype::U8, {2, 6})};
  const Status st = run(*k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(),
              HasSubstr("inline.mxk:4:15: error: code 200 (element 3) is not a 6-bit code"));
  EXPECT_THAT(st.message(), HasSubstr("row t=1"));
  EXPECT_EQ(std::vector<uint8_t>(packed.begin(), packed.begin() + 6),
            (std::vector<uint8_t>{0x81, 0x30, 0x10, 0x3F, 0x00, 0x00}));
}

}  // namespace
}  // namespace mxfp6::interp
