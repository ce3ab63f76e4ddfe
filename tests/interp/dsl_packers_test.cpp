// kernels_dsl/mxfp6_pack.mxk run by the interpreter against the CPU encoder (compiler/interp/
// mxfp6.h, checked exhaustively against docs/mxfp6-format.md): the row, column and dual packers in
// every format and scale mode, bound 0 differing bytes; and the dual packer's two outputs
// byte-identical to the row and column packers' (spec "Layout": dual = both from one read).
// Also the tile accesses the column packers rely on: several slices, `start : n` ranges,
// strided slices and transpose, against index formulas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

/// Blocks of N(0, 2^U(-20, 20)) bf16 values; some blocks zero, subnormal, saturating, or
/// holding an Inf or a NaN (a block is 32 consecutive elements of a row or of a column, so the
/// special kinds land in both orientations).
std::vector<uint16_t> makeOperand(int64_t rows, int64_t cols, uint64_t seed) {
  std::vector<uint16_t> x(rows * cols);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> exponent(-20.0f, 20.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 23);
  auto bf16 = [](float f) { return uint16_t(std::bit_cast<uint32_t>(f) >> 16); };
  for (int64_t b = 0; b < rows * cols / 32; ++b) {
    uint16_t* blk = &x[b * 32];
    float scale = std::exp2(exponent(rng));
    for (int i = 0; i < 32; ++i) blk[i] = bf16(normal(rng) * scale);
    switch (kind(rng)) {
      case 0: std::fill(blk, blk + 32, uint16_t(0)); break;
      case 1: for (int i = 0; i < 32; ++i) blk[i] = uint16_t(blk[i] & 0x807F); break;  // subnormal
      case 2: blk[b % 32] = 0x7F80; break;                                          // +Inf
      case 3: blk[(b * 7) % 32] = 0x7FC1; break;                                    // NaN
      case 4: blk[(b * 3) % 32] = 0x7F7F; break;                                    // largest finite
      case 5: blk[(b * 5) % 32] = bf16(7.75f); break;                               // E2M3 FLOOR saturates
      default: break;
    }
  }
  return x;
}

struct ModeCase {
  int64_t format, mode;
};

class DslPackers : public ::testing::TestWithParam<ModeCase> {};

constexpr int64_t kC = 256, kRB = 6, kR = kRB * 32, kW = 64;

TEST_P(DslPackers, RowColumnAndDualMatchTheCpuEncoderByteForByte) {
  auto [fmt, mode] = GetParam();
  std::map<std::string, int64_t> config = {{"C", kC}, {"FMT", fmt}, {"MODE", mode}};
  auto format = mx::ElementFormat(fmt);
  auto scaleMode = mx::ScaleMode(mode);
  std::vector<uint16_t> x = makeOperand(kR, kC, 7 + fmt * 3 + mode);
  Expected<mx::DualBlobs> ref = mx::packDual(x, kR, kC, format, scaleMode);
  ASSERT_TRUE(ref.isOk()) << ref.status().message();
  Expected<mx::PackedBlobs> refRows = mx::packRows(x, kR, kC, format, scaleMode);
  Expected<mx::PackedBlobs> refCols = mx::packColumns(x, kR, kC, format, scaleMode);
  ASSERT_TRUE(refRows.isOk() && refCols.isOk());
  ASSERT_EQ(ref->rows, *refRows);
  ASSERT_EQ(ref->columns, *refCols);

  std::vector<uint8_t> rowData(kR * kC * 3 / 4, 0xA5), rowScales(kR * kC / 32, 0xA5);
  std::vector<uint8_t> colData(kC * kRB * 24, 0xA5), colScales(kC * kRB, 0xA5);
  std::map<std::string, int64_t> rowConfig = config;
  rowConfig["THREADS"] = 32;  // a schedule that fits C = 256 (the interpreter ignores it)
  rowConfig["VEC"] = 8;
  auto rows = instantiateKernelsDsl("mxfp6_pack.mxk", "mxfp6_pack_rows", rowConfig);
  ASSERT_TRUE(rows);
  std::vector<Arg> rowArgs = {view(x, Dtype::BF16, {kR, kC}), view(rowData, Dtype::U8, {kR, kC * 3 / 4}),
                              view(rowScales, Dtype::U8, {kR, kC / 32})};
  Status st = run(*rows, rowArgs);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(rowData, ref->rows.data);
  EXPECT_EQ(rowScales, ref->rows.scales);

  // Tiles of one block of rows, and of two (x as [RB/2, 2, 32, C]: each column's run of two
  // blocks in one program).
  config["W"] = kW;
  for (int64_t hb : {1, 2}) {
    SCOPED_TRACE("HB=" + std::to_string(hb));
    const int64_t rg = kRB / hb;
    config["HB"] = hb;
    std::fill(colData.begin(), colData.end(), 0xA5);
    std::fill(colScales.begin(), colScales.end(), 0xA5);
    auto cols = instantiateKernelsDsl("mxfp6_pack.mxk", "mxfp6_pack_cols", config);
    ASSERT_TRUE(cols);
    std::vector<Arg> colArgs = {view(x, Dtype::BF16, {rg, hb, 32, kC}), view(colData, Dtype::U8, {kC, rg, hb, 24}),
                                view(colScales, Dtype::U8, {kC, rg, hb})};
    st = run(*cols, colArgs);
    ASSERT_TRUE(st.isOk()) << st.message();
    EXPECT_EQ(colData, ref->columns.data);
    EXPECT_EQ(colScales, ref->columns.scales);

    std::vector<uint8_t> dualRowData(rowData.size(), 0x5A), dualRowScales(rowScales.size(), 0x5A);
    std::vector<uint8_t> dualColData(colData.size(), 0x5A), dualColScales(colScales.size(), 0x5A);
    auto dual = instantiateKernelsDsl("mxfp6_pack.mxk", "mxfp6_pack_dual", config);
    ASSERT_TRUE(dual);
    std::vector<Arg> dualArgs = {view(x, Dtype::BF16, {rg, hb, 32, kC}),
                                 view(dualRowData, Dtype::U8, {rg, hb, 32, kC * 3 / 4}),
                                 view(dualRowScales, Dtype::U8, {rg, hb, 32, kC / 32}),
                                 view(dualColData, Dtype::U8, {kC, rg, hb, 24}),
                                 view(dualColScales, Dtype::U8, {kC, rg, hb})};
    st = run(*dual, dualArgs);
    ASSERT_TRUE(st.isOk()) << st.message();
    // Byte-identical to the two single-orientation kernels.
    EXPECT_EQ(dualRowData, rowData);
    EXPECT_EQ(dualRowScales, rowScales);
    EXPECT_EQ(dualColData, colData);
    EXPECT_EQ(dualColScales, colScales);
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryFormatAndMode, DslPackers,
    ::testing::Values(ModeCase{0, 0}, ModeCase{0, 1}, ModeCase{0, 2}, ModeCase{1, 0}, ModeCase{1, 1},
                      ModeCase{1, 2}),
    [](const auto& info) {
      return std::string(info.param.format ? "E3M2" : "E2M3") + "_" +
             (info.param.mode == 0 ? "RCEIL" : info.param.mode == 1 ? "EVEN" : "FLOOR");
    });

TEST(DslPackers, AColumnPackerNeedsWholeBlocksOfRows) {
  // x is [RG, HB, 32, C]: a row count that is not a multiple of 32 HB cannot be described.
  auto cols = instantiateKernelsDsl("mxfp6_pack.mxk", "mxfp6_pack_cols", {{"C", kC}, {"W", kW}});
  ASSERT_TRUE(cols);
  std::vector<uint16_t> x(40 * kC);
  std::vector<uint8_t> data(kC * 2 * 24), scales(kC * 2);
  std::vector<Arg> args = {view(x, Dtype::BF16, {40, kC}), view(data, Dtype::U8, {kC, 2, 24}),
                           view(scales, Dtype::U8, {kC, 2})};
  Status st = run(*cols, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("'x'"));
}

// Tile accesses against index formulas: y[r, w, i] = x[b*4 + i, c*2 + w] for a [4, 2] tile.
const char* const kTiles = R"(
kernel tiles(x: f32[B4, 6], t: out f32[B, 3, 8], rows: out f32[B, 3, 4, 2], d: out f32[6, B] strides(1, 6))
  specialize B4 = 12
{
  row b, c in B, 3 {
    tile = x[b * 4 : 4, c * 2 : 2]
    rows[b, c, :, :] = tile
    t[b, c, :] = transpose(tile, 4)
    d[c * 2 : 2, b] = group_sum(transpose(tile, 4), 4)
  }
}
)";

// mxfp6_scales_transpose: dst[c, tb] = src[tb, c] for every token block tb and column c, at each
// number of blocks per program that divides TB.
TEST(DslPackers, ScalesTransposeTurnsTokenMajorScalesColumnMajor) {
  constexpr int64_t TB = 64, C = 384;
  std::vector<uint8_t> src(TB * C);
  std::mt19937 rng(5);
  for (uint8_t& b : src) b = uint8_t(rng());
  for (int64_t gb : {1, 4, 32}) {
    SCOPED_TRACE("GB=" + std::to_string(gb));
    int64_t w = 128;
    auto k = instantiateKernelsDsl("mxfp6_pack.mxk", "mxfp6_scales_transpose",
                                   {{"GB", gb}, {"W", w}, {"THREADS", 32}, {"VEC", 4}});
    ASSERT_TRUE(k);
    std::vector<uint8_t> dst(C * TB, 0xA5);
    std::vector<Arg> args = {view(src, Dtype::U8, {TB / gb, gb, C / w, w}), view(dst, Dtype::U8, {C / w, w, TB / gb, gb})};
    Status st = run(*k, args);
    ASSERT_TRUE(st.isOk()) << st.message();
    int64_t wrong = 0;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t tb = 0; tb < TB; ++tb) wrong += dst[c * TB + tb] != src[tb * C + c];
    EXPECT_EQ(wrong, 0);
  }
}

TEST(TileAccesses, SlicesRangesStridesAndTransposeFollowTheirIndexFormulas) {
  auto k = instantiateSource(kTiles, "tiles");
  ASSERT_TRUE(k);
  constexpr int64_t B = 3;
  std::vector<float> x(B * 4 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f - 3.0f;
  std::vector<float> t(B * 3 * 8, -1), rows(B * 3 * 8, -1), d(6 * B, -1);
  std::vector<Arg> args = {view(x, Dtype::F32, {B * 4, 6}), view(t, Dtype::F32, {B, 3, 8}),
                           view(rows, Dtype::F32, {B, 3, 4, 2}), view(d, Dtype::F32, {6, B})};
  Status st = run(*k, args);
  ASSERT_TRUE(st.isOk()) << st.message();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t i = 0; i < 4; ++i) {
        for (int64_t w = 0; w < 2; ++w) {
          float xv = x[(b * 4 + i) * 6 + c * 2 + w];
          EXPECT_EQ(rows[((b * 3 + c) * 4 + i) * 2 + w], xv);
          EXPECT_EQ(t[(b * 3 + c) * 8 + w * 4 + i], xv);
        }
      }
      for (int64_t w = 0; w < 2; ++w) {
        float sum = 0;
        for (int64_t i = 0; i < 4; ++i) sum += x[(b * 4 + i) * 6 + c * 2 + w];
        // d is column-major: d[col, b] at col + 6*b.
        EXPECT_FLOAT_EQ(d[(c * 2 + w) + 6 * b], sum);
      }
    }
  }
}

TEST(TileAccesses, ARangePastTheDimensionIsAnError) {
  auto k = instantiateSource(R"(
kernel k(x: f32[T, 8], y: out f32[T, 4], o: i64) {
  row t in T { y[t, :] = x[t, o : 4] }
}
)", "k");
  ASSERT_TRUE(k);
  std::vector<float> x(16), y(8);
  std::vector<Arg> args = {view(x, Dtype::F32, {2, 8}), view(y, Dtype::F32, {2, 4}), Arg{int64_t{5}}};
  Status st = run(*k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("slice 5 : 4 of dim 1 (8) is outside [0, 8)"));
}

TEST(TileAccesses, GathersReadTheIndexedRowsAndCheckEveryIndex) {
  auto k = instantiateSource(R"(
kernel g(tab: f32[S, 4], o: out f32[T, 12], shift: i64) {
  row t in T { o[t, :] = tab[(t + shift + iota(3)) % S, :] }
}
)", "g");
  ASSERT_TRUE(k);
  constexpr int64_t S = 5, T = 4;
  std::vector<float> tab(S * 4), o(T * 12, -1);
  for (size_t i = 0; i < tab.size(); ++i) tab[i] = float(i);
  std::vector<Arg> args = {view(tab, Dtype::F32, {S, 4}), view(o, Dtype::F32, {T, 12}), Arg{int64_t{2}}};
  Status st = run(*k, args);
  ASSERT_TRUE(st.isOk()) << st.message();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(o[t * 12 + i * 4 + c], tab[((t + 2 + i) % S) * 4 + c]);
  // A gathered index outside the dimension is an error, not a read past the table.
  auto bad = instantiateSource(R"(
kernel g(tab: f32[S, 4], o: out f32[T, 12]) {
  row t in T { o[t, :] = tab[t + iota(3), :] }
}
)", "g");
  ASSERT_TRUE(bad);
  std::vector<Arg> badArgs = {view(tab, Dtype::F32, {S, 4}), view(o, Dtype::F32, {T, 12})};
  st = run(*bad, badArgs);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("gathered index 5 (element 2) of dim 0 (S) is outside [0, 5)"));
}

}  // namespace
}  // namespace mxfp6::interp
