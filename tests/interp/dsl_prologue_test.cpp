// The packer prologue (kernels_dsl/norm_rope_bwd_pack.mxk) and the tiled whole-QKV backward
// (norm_rope_qkv_bwd_tiles, kernels_dsl/norm_rope.mxk) on the interpreter, against the kernels
// they restructure or fuse: norm_rope_qkv_bwd (kernels_dsl/norm_rope.mxk, itself checked on the GPU
// against independent bounds) writing the bf16 d(mixed_qkv), then the CPU encoder's packDual of
// it. Both compute each element in the same fp64 order (the per-row sum over 128 ascending), so
// the bound is 0 differing bytes in every blob; the bf16 d(mixed_qkv) of the _bf16 kernel is
// bit-identical; dw (fp64 partials summed in order) within 1e-12 relative of the reference's
// (the two kernels group the sum over tokens differently). Both layouts, a position table
// shorter than the tokens (p wraps) and pos_div = 2.
#include <gtest/gtest.h>

#include <bit>
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

using kir::Dtype;

constexpr int64_t kDh = 128, kPairs = 64;

uint16_t bf16(float f) { return uint16_t(std::bit_cast<uint32_t>(f) >> 16); }

struct Problem {
  int64_t T, H, S, posDiv;
  bool megatron;
  int64_t tokenStride, partStride, headStride;
  std::vector<uint16_t> qkv, dq, dk, dv, qWeight, kWeight;
  std::vector<float> qCos, qSin, kCos, kSin, qRstd, kRstd;
};

Problem makeProblem(bool megatron, uint64_t seed) {
  Problem p{64, 2, 5, 2, megatron};
  p.tokenStride = 3 * p.H * kDh;
  p.partStride = megatron ? kDh : p.H * kDh;
  p.headStride = megatron ? 3 * kDh : kDh;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> angle(-3.2f, 3.2f), rstd(0.3f, 3.0f);
  auto fill = [&](std::vector<uint16_t>& v, int64_t n, float mean, float sd) {
    v.resize(n);
    for (auto& x : v) x = bf16(mean + sd * normal(rng));
  };
  fill(p.qkv, p.T * p.tokenStride, 0.0f, 1.5f);
  for (auto* g : {&p.dq, &p.dk, &p.dv}) fill(*g, p.T * p.H * kDh, 0.0f, 1.0f);
  fill(p.qWeight, kDh, 1.0f, 0.2f);
  fill(p.kWeight, kDh, 1.0f, 0.2f);
  for (auto [c, s] : {std::pair{&p.qCos, &p.qSin}, std::pair{&p.kCos, &p.kSin}}) {
    for (int64_t i = 0; i < p.S * kPairs; ++i) {
      float a = angle(rng);
      c->push_back(std::cos(a));
      s->push_back(std::sin(a));
    }
  }
  for (auto* r : {&p.qRstd, &p.kRstd})
    for (int64_t i = 0; i < p.T * p.H; ++i) r->push_back(rstd(rng));
  return p;
}

struct Reference {
  std::vector<uint16_t> dqkv;
  std::vector<double> dw;  // [2, 128]
};

Reference runReference(const Problem& p) {
  auto k = instantiateKernelsDsl("norm_rope.mxk", "norm_rope_qkv_bwd");
  Reference ref;
  if (!k) return ref;
  int64_t partials = 3;
  ref.dqkv.assign(p.qkv.size(), 0);
  std::vector<float> dwPart(2 * partials * kDh);
  std::vector<double> dwPart64(dwPart.size());
  std::vector<Arg> args = {view(p.dq, Dtype::BF16, {p.T, p.H, kDh}), view(p.dk, Dtype::BF16, {p.T, p.H, kDh}),
                           view(p.dv, Dtype::BF16, {p.T, p.H, kDh}),
                           TensorArg{const_cast<uint16_t*>(p.qkv.data()), Dtype::BF16, {p.T, 3, p.H, kDh},
                                     int64_t(p.qkv.size())},
                           view(p.qWeight, Dtype::BF16, {kDh}), view(p.kWeight, Dtype::BF16, {kDh}),
                           view(p.qCos, Dtype::F32, {p.S, kPairs}), view(p.qSin, Dtype::F32, {p.S, kPairs}),
                           view(p.kCos, Dtype::F32, {p.S, kPairs}), view(p.kSin, Dtype::F32, {p.S, kPairs}),
                           view(p.qRstd, Dtype::F32, {p.T, p.H}), view(p.kRstd, Dtype::F32, {p.T, p.H}),
                           TensorArg{ref.dqkv.data(), Dtype::BF16, {p.T, 3, p.H, kDh}, int64_t(ref.dqkv.size())},
                           view(dwPart, Dtype::F32, {2, partials, kDh}),
                           p.tokenStride, p.partStride, p.headStride, p.posDiv};
  RunOptions opts;
  opts.fp64Outputs = {{13, &dwPart64}};
  Status st = run(*k, args, opts);
  EXPECT_TRUE(st.isOk()) << st.message();
  ref.dw.assign(2 * kDh, 0.0);
  for (int g = 0; g < 2; ++g)
    for (int64_t j = 0; j < partials; ++j)
      for (int64_t c = 0; c < kDh; ++c) ref.dw[g * kDh + c] += dwPart64[(g * partials + j) * kDh + c];
  return ref;
}

struct PrologueOut {
  std::vector<uint8_t> rowData, rowScales, colData, colScalesByToken;  // the column scales [TB, C]
  std::vector<double> dw;
  std::vector<uint16_t> dqkv;
};

/// The prologue (`blobs`: with or without its bf16 output `withBf16`), or with `blobs` false the
/// tiled backward (bf16 output and dw partials only).
PrologueOut runTiles(const Problem& p, bool blobs, bool withBf16, int64_t fmt = 0, int64_t mode = 0) {
  PrologueOut out;
  auto k = blobs ? instantiateKernelsDsl("norm_rope_bwd_pack.mxk",
                                   withBf16 ? "norm_rope_qkv_bwd_pack_bf16" : "norm_rope_qkv_bwd_pack",
                                   {{"FMT", fmt}, {"MODE", mode}})
                 : instantiateKernelsDsl("norm_rope.mxk", "norm_rope_qkv_bwd_tiles");
  if (!k) return out;
  int64_t TB = p.T / 32, C = p.tokenStride;
  out.rowData.assign(p.T * C * 3 / 4, 0xA5);
  out.rowScales.assign(p.T * C / 32, 0xA5);
  out.colData.assign(C * TB * 24, 0xA5);
  out.colScalesByToken.assign(TB * C, 0xA5);
  out.dqkv.assign(p.qkv.size(), 0xFFFF);
  std::vector<float> dwPart(2 * TB * p.H * kDh);
  std::vector<double> dwPart64(dwPart.size());
  std::vector<Arg> args = {
      view(p.dq, Dtype::BF16, {TB, 32, p.H, kDh}), view(p.dk, Dtype::BF16, {TB, 32, p.H, kDh}),
      view(p.dv, Dtype::BF16, {TB, 32, p.H, kDh}),
      TensorArg{const_cast<uint16_t*>(p.qkv.data()), Dtype::BF16, {TB, 32, 3, p.H, kDh}, int64_t(p.qkv.size())},
      // The weights expanded over the tile's 32 rows (stride 0): the [128] tensor itself.
      TensorArg{const_cast<uint16_t*>(p.qWeight.data()), Dtype::BF16, {32, kDh}, kDh},
      TensorArg{const_cast<uint16_t*>(p.kWeight.data()), Dtype::BF16, {32, kDh}, kDh},
      view(p.qCos, Dtype::F32, {p.S, kPairs}), view(p.qSin, Dtype::F32, {p.S, kPairs}),
      view(p.kCos, Dtype::F32, {p.S, kPairs}), view(p.kSin, Dtype::F32, {p.S, kPairs}),
      view(p.qRstd, Dtype::F32, {TB, 32, p.H}), view(p.kRstd, Dtype::F32, {TB, 32, p.H})};
  TensorArg dqkv{out.dqkv.data(), Dtype::BF16, {TB, 32, 3, p.H, kDh}, int64_t(out.dqkv.size())};
  if (blobs) {
    for (Arg a : {view(out.rowData, Dtype::U8, {TB, 32, C * 3 / 4}), view(out.rowScales, Dtype::U8, {TB, 32, C / 32}),
                  view(out.colData, Dtype::U8, {C, TB, 24}), view(out.colScalesByToken, Dtype::U8, {TB, C})})
      args.push_back(a);
    args.push_back(view(dwPart, Dtype::F32, {2, TB, p.H, kDh}));
    if (withBf16) args.push_back(dqkv);
  } else {
    args.push_back(dqkv);
    args.push_back(view(dwPart, Dtype::F32, {2, TB, p.H, kDh}));
  }
  for (int64_t v : {32 * p.tokenStride, p.tokenStride, p.partStride, p.headStride, p.posDiv}) args.push_back(v);
  RunOptions opts;
  opts.fp64Outputs = {{blobs ? 16 : 13, &dwPart64}};
  Status st = run(*k, args, opts);
  EXPECT_TRUE(st.isOk()) << st.message();
  out.dw.assign(2 * kDh, 0.0);
  int64_t partials = TB * p.H;
  for (int g = 0; g < 2; ++g)
    for (int64_t j = 0; j < partials; ++j)
      for (int64_t c = 0; c < kDh; ++c) out.dw[g * kDh + c] += dwPart64[(g * partials + j) * kDh + c];
  return out;
}

class DslPrologue : public ::testing::TestWithParam<bool> {};

TEST_P(DslPrologue, EqualsTheBackwardThenTheDualPacker) {
  bool megatron = GetParam();
  Problem p = makeProblem(megatron, megatron ? 5 : 6);
  Reference ref = runReference(p);
  ASSERT_FALSE(ref.dqkv.empty());
  int64_t C = p.tokenStride;
  for (auto [fmt, mode] : {std::pair<int64_t, int64_t>{0, 0}, {1, 1}, {1, 2}}) {
    SCOPED_TRACE("FMT=" + std::to_string(fmt) + " MODE=" + std::to_string(mode));
    Expected<mx::DualBlobs> blobs = mx::packDual(ref.dqkv, p.T, C, mx::ElementFormat(fmt), mx::ScaleMode(mode));
    ASSERT_TRUE(blobs.isOk()) << blobs.status().message();
    for (bool withBf16 : {false, true}) {
      PrologueOut out = runTiles(p, /*blobs=*/true, withBf16, fmt, mode);
      EXPECT_EQ(out.rowData, blobs->rows.data);
      EXPECT_EQ(out.rowScales, blobs->rows.scales);
      EXPECT_EQ(out.colData, blobs->columns.data);
      // The token-major column scales: byte (tb, c) is the blob's scale (c, tb); and
      // mxfp6_scales_transpose turns them into the blob's.
      int64_t TB = p.T / 32, wrong = 0;
      for (int64_t tb = 0; tb < TB; ++tb)
        for (int64_t c = 0; c < C; ++c) wrong += out.colScalesByToken[tb * C + c] != blobs->columns.scales[c * TB + tb];
      EXPECT_EQ(wrong, 0);
      auto transpose = instantiateKernelsDsl("mxfp6_pack.mxk", "mxfp6_scales_transpose",
                                            {{"GB", 1}, {"W", 128}, {"THREADS", 32}, {"VEC", 4}});
      ASSERT_TRUE(transpose);
      std::vector<uint8_t> colScales(C * TB, 0xA5);
      std::vector<Arg> transposeArgs = {view(out.colScalesByToken, Dtype::U8, {TB, 1, C / 128, 128}),
                                        view(colScales, Dtype::U8, {C / 128, 128, TB, 1})};
      Status st = run(*transpose, transposeArgs);
      ASSERT_TRUE(st.isOk()) << st.message();
      EXPECT_EQ(colScales, blobs->columns.scales);
      if (withBf16) EXPECT_EQ(out.dqkv, ref.dqkv);
      for (size_t i = 0; i < ref.dw.size(); ++i)
        EXPECT_NEAR(out.dw[i], ref.dw[i], 1e-12 * (1 + std::fabs(ref.dw[i]))) << "dw element " << i;
    }
  }
}

TEST_P(DslPrologue, TiledBackwardEqualsTheRowBackward) {
  bool megatron = GetParam();
  Problem p = makeProblem(megatron, megatron ? 7 : 8);
  Reference ref = runReference(p);
  ASSERT_FALSE(ref.dqkv.empty());
  PrologueOut out = runTiles(p, /*blobs=*/false, /*withBf16=*/true);
  EXPECT_EQ(out.dqkv, ref.dqkv);
  for (size_t i = 0; i < ref.dw.size(); ++i)
    EXPECT_NEAR(out.dw[i], ref.dw[i], 1e-12 * (1 + std::fabs(ref.dw[i]))) << "dw element " << i;
}

INSTANTIATE_TEST_SUITE_P(Layouts, DslPrologue, ::testing::Values(true, false),
                         [](const auto& info) { return std::string(info.param ? "Megatron" : "Blocked"); });

}  // namespace
}  // namespace mxfp6::interp
