// MXFP6 row, column and dual packing on the GPU, bit for bit against the CPU encoder
// (compiler/interp/mxfp6.h, itself checked exhaustively against specs/mxfp6.md): every format
// and scale mode, on data with ordinary values, zero blocks, bf16 subnormals, values at the
// format's saturation, and NaN/Inf blocks. Outputs poisoned before each launch; two launches
// bit-identical.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "compiler/interp/float_formats.h"
#include "compiler/interp/interpreter.h"
#include "compiler/interp/mxfp6.h"
#include "tests/gpu/gpu_harness.h"

namespace mxfp6 {
namespace {

constexpr int64_t kC = 3072, kBlocks = kC / 32, kPacked = kC * 3 / 4;

interp::TensorArg tensor(const void* data, kir::Dtype dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return {const_cast<void*>(data), dtype, shape, n};
}

/// Random rows with a special block kind every few blocks.
std::vector<uint16_t> makeOperand(int64_t rows, uint64_t seed) {
  std::vector<uint16_t> x(rows * kC);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> magnitude(-20.0f, 20.0f);
  std::uniform_int_distribution<int> kind(0, 15);
  std::uniform_int_distribution<int> lane(0, 31);
  for (int64_t b = 0; b < rows * kBlocks; ++b) {
    uint16_t* blk = &x[b * 32];
    float scale = std::exp2(magnitude(rng));
    gputest::fillNormalBf16(x, b * 32, 32, 0.0f, scale, rng);
    switch (kind(rng)) {
      case 0: std::fill(blk, blk + 32, uint16_t(0)); break;                          // zero block
      case 1: for (int i = 0; i < 32; ++i) blk[i] = uint16_t(blk[i] & 0x807F); break;  // bf16 subnormals
      case 2: blk[lane(rng)] = 0x7F80; break;                                         // +Inf
      case 3: blk[lane(rng)] = 0x7FC1; break;                                         // NaN
      case 4: blk[lane(rng)] = 0xFF80; break;                                         // -Inf
      case 5: blk[lane(rng)] = 0x7F7F; break;                                         // largest finite
      default: break;
    }
  }
  return x;
}

struct Packed {
  std::vector<uint8_t> data, scales;
  bool operator==(const Packed&) const = default;
};

/// The CPU encoder's blobs of one operand by format and scale mode, each computed once on every
/// core (`pack(format, mode, threads)`): a test checks tens of code objects against the same few.
template <typename Blobs>
class References {
 public:
  template <typename Pack>
  Expected<const Blobs*> get(mx::ElementFormat format, mx::ScaleMode mode, const Pack& pack) {
    auto key = std::pair(format, mode);
    auto found = blobs_.find(key);
    if (found == blobs_.end()) {
      ASSIGN_OR_RETURN(Blobs made, pack(format, mode, gputest::hostThreads()));
      found = blobs_.emplace(key, std::move(made)).first;
    }
    return &found->second;
  }

 private:
  std::map<std::pair<mx::ElementFormat, mx::ScaleMode>, Blobs> blobs_;
};

Expected<Packed> runRows(rt::Device& dev, const gputest::CodeObject& obj, const kir::Kernel& kernel,
                         const std::vector<uint16_t>& x, int64_t rows) {
  ASSIGN_OR_RETURN(rt::DeviceBuffer dx, dev.allocate(x.size() * 2));
  ASSIGN_OR_RETURN(rt::DeviceBuffer data, dev.allocate(rows * kPacked));
  ASSIGN_OR_RETURN(rt::DeviceBuffer scales, dev.allocate(rows * kBlocks));
  RETURN_IF_ERROR(dev.copyToDevice(dx.data(), x.data(), x.size() * 2));
  RETURN_IF_ERROR(dev.memset(data.data(), 0xA5, rows * kPacked));
  RETURN_IF_ERROR(dev.memset(scales.data(), 0xA5, rows * kBlocks));
  std::vector<interp::Arg> args = {tensor(dx.data(), kir::Dtype::BF16, {rows, kC}),
                                   tensor(data.data(), kir::Dtype::U8, {rows, kPacked}),
                                   tensor(scales.data(), kir::Dtype::U8, {rows, kBlocks})};
  ASSIGN_OR_RETURN(interp::BoundArgs bound, interp::bindArguments(kernel, args));
  ASSIGN_OR_RETURN(auto loaded, rt::loadKernel(dev, std::as_bytes(std::span(obj.bytes.data(), obj.bytes.size())),
                                               obj.metadata));
  RETURN_IF_ERROR(loaded->launchRows(rows, nullptr, gputest::launchArgs(kernel, bound)));
  RETURN_IF_ERROR(dev.synchronize());
  Packed out;
  out.data.resize(rows * kPacked);
  out.scales.resize(rows * kBlocks);
  RETURN_IF_ERROR(dev.copyToHost(out.data.data(), data.data(), out.data.size()));
  RETURN_IF_ERROR(dev.copyToHost(out.scales.data(), scales.data(), out.scales.size()));
  return out;
}

class MxPackRowsGpu : public ::testing::TestWithParam<int64_t> {};

TEST_P(MxPackRowsGpu, BitExactAgainstTheCpuEncoderInEveryFormatAndMode) {
  std::string whyNot;
  rt::Device* dev = gputest::device(&whyNot);
  if (!dev) GTEST_SKIP() << whyNot;
  auto objects = gputest::findCodeObjects("mxfp6_pack_rows");
  ASSERT_FALSE(objects.empty()) << "no mxfp6_pack_rows code objects in " << gputest::gpuKernelsDir();
  int64_t rows = GetParam();
  std::vector<uint16_t> x = makeOperand(rows, 31 + rows);
  References<mx::PackedBlobs> references;
  std::string error;
  for (const gputest::CodeObject& obj : objects) {
    SCOPED_TRACE(obj.path);
    auto kernel = gputest::instantiateDsl("kernels_dsl/mxfp6_pack.mxk", "mxfp6_pack_rows", obj.metadata.config, error);
    ASSERT_TRUE(kernel) << error;
    auto format = mx::ElementFormat(kernel->config.at("FMT"));
    auto mode = mx::ScaleMode(kernel->config.at("MODE"));
    auto expected = references.get(format, mode, [&](mx::ElementFormat f, mx::ScaleMode m, int threads) {
      return mx::packRows(x, rows, kC, f, m, threads);
    });
    ASSERT_TRUE(expected.isOk()) << expected.status().message();
    auto first = runRows(*dev, obj, *kernel, x, rows);
    ASSERT_TRUE(first.isOk()) << first.status().message();
    auto second = runRows(*dev, obj, *kernel, x, rows);
    ASSERT_TRUE(second.isOk()) << second.status().message();
    int64_t dataMismatch = 0, scaleMismatch = 0;
    const mx::PackedBlobs& want = **expected;
    for (size_t i = 0; i < first->data.size(); ++i) dataMismatch += first->data[i] != want.data[i];
    for (size_t i = 0; i < first->scales.size(); ++i) scaleMismatch += first->scales[i] != want.scales[i];
    std::string tag;
    for (const auto& [k, v] : obj.metadata.config) tag += k + "=" + std::to_string(v) + " ";
    std::printf("RESULT mxfp6_pack_rows %-44s R=%-6lld C=%lld %s/%s data_bytes_differing=%lld "
                "scale_bytes_differing=%lld deterministic=%s\n",
                tag.c_str(), (long long)rows, (long long)kC, mx::elementFormatName(format), mx::scaleModeName(mode),
                (long long)dataMismatch, (long long)scaleMismatch, *first == *second ? "yes" : "NO");
    EXPECT_EQ(dataMismatch, 0);
    EXPECT_EQ(scaleMismatch, 0);
    EXPECT_EQ(*first, *second);
  }
}

/// The column (and, for the dual kernel, row) blobs of x [R = 32*RB, C] from one launch, x seen
/// as [RB/HB, HB, 32, C] (HB row blocks per program's tile).
struct TileOutputs {
  Packed rows, cols;
  bool operator==(const TileOutputs&) const = default;
};

Expected<TileOutputs> runTiles(rt::Device& dev, const gputest::CodeObject& obj, const kir::Kernel& kernel,
                               const std::vector<uint16_t>& x, int64_t blocks, bool dual) {
  int64_t rows = blocks * 32;
  ASSIGN_OR_RETURN(rt::DeviceBuffer dx, dev.allocate(x.size() * 2));
  RETURN_IF_ERROR(dev.copyToDevice(dx.data(), x.data(), x.size() * 2));
  std::vector<std::pair<rt::DeviceBuffer, int64_t>> outs;  // row data, row scales, col data, col scales
  for (int64_t bytes : {rows * kPacked, rows * kBlocks, kC * blocks * 24, kC * blocks}) {
    ASSIGN_OR_RETURN(rt::DeviceBuffer b, dev.allocate(bytes));
    RETURN_IF_ERROR(dev.memset(b.data(), 0xA5, bytes));
    outs.emplace_back(std::move(b), bytes);
  }
  const int64_t hb = kernel.config.at("HB"), groups = blocks / hb;
  std::vector<interp::Arg> args = {tensor(dx.data(), kir::Dtype::BF16, {groups, hb, 32, kC})};
  if (dual) {
    args.push_back(tensor(outs[0].first.data(), kir::Dtype::U8, {groups, hb, 32, kPacked}));
    args.push_back(tensor(outs[1].first.data(), kir::Dtype::U8, {groups, hb, 32, kBlocks}));
  }
  args.push_back(tensor(outs[2].first.data(), kir::Dtype::U8, {kC, groups, hb, 24}));
  args.push_back(tensor(outs[3].first.data(), kir::Dtype::U8, {kC, groups, hb}));
  ASSIGN_OR_RETURN(interp::BoundArgs bound, interp::bindArguments(kernel, args));
  ASSIGN_OR_RETURN(auto loaded, rt::loadKernel(dev, std::as_bytes(std::span(obj.bytes.data(), obj.bytes.size())),
                                               obj.metadata));
  // One program row per (group of HB row blocks, column tile).
  int64_t programRows = groups * (kC / kernel.config.at("W"));
  RETURN_IF_ERROR(loaded->launchRows(programRows, nullptr, gputest::launchArgs(kernel, bound)));
  RETURN_IF_ERROR(dev.synchronize());
  std::vector<std::vector<uint8_t>> host(4);
  for (size_t i = 0; i < 4; ++i) {
    if (!dual && i < 2) continue;
    host[i].resize(outs[i].second);
    RETURN_IF_ERROR(dev.copyToHost(host[i].data(), outs[i].first.data(), host[i].size()));
  }
  return TileOutputs{{host[0], host[1]}, {host[2], host[3]}};
}

int64_t differing(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return int64_t(std::max(a.size(), b.size()));
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

class MxPackTilesGpu : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(MxPackTilesGpu, BitExactAgainstTheCpuEncoderInEveryFormatAndMode) {
  std::string whyNot;
  rt::Device* dev = gputest::device(&whyNot);
  if (!dev) GTEST_SKIP() << whyNot;
  auto [name, blocks] = GetParam();
  bool dual = name == "mxfp6_pack_dual";
  auto objects = gputest::findCodeObjects(name);
  ASSERT_FALSE(objects.empty()) << "no " << name << " code objects in " << gputest::gpuKernelsDir();
  int64_t rows = blocks * 32;
  std::vector<uint16_t> x = makeOperand(rows, 77 + blocks);
  References<mx::DualBlobs> references;
  std::string error;
  for (const gputest::CodeObject& obj : objects) {
    SCOPED_TRACE(obj.path);
    auto kernel = gputest::instantiateDsl("kernels_dsl/mxfp6_pack.mxk", name, obj.metadata.config, error);
    ASSERT_TRUE(kernel) << error;
    if (blocks % kernel->config.at("HB") != 0) {  // the [RB/HB, HB, 32, C] view does not exist
      std::printf("RESULT %s %s R=%lld not run: R is not a multiple of 32*HB\n", name.c_str(), obj.path.c_str(),
                  (long long)rows);
      continue;
    }
    auto format = mx::ElementFormat(kernel->config.at("FMT"));
    auto mode = mx::ScaleMode(kernel->config.at("MODE"));
    auto expected = references.get(format, mode, [&](mx::ElementFormat f, mx::ScaleMode m, int threads) {
      return mx::packDual(x, rows, kC, f, m, threads);
    });
    ASSERT_TRUE(expected.isOk()) << expected.status().message();
    auto first = runTiles(*dev, obj, *kernel, x, blocks, dual);
    ASSERT_TRUE(first.isOk()) << first.status().message();
    auto second = runTiles(*dev, obj, *kernel, x, blocks, dual);
    ASSERT_TRUE(second.isOk()) << second.status().message();
    const mx::DualBlobs& want = **expected;
    int64_t colData = differing(first->cols.data, want.columns.data);
    int64_t colScales = differing(first->cols.scales, want.columns.scales);
    int64_t rowData = dual ? differing(first->rows.data, want.rows.data) : 0;
    int64_t rowScales = dual ? differing(first->rows.scales, want.rows.scales) : 0;
    std::string tag;
    for (const auto& [k, v] : obj.metadata.config) tag += k + "=" + std::to_string(v) + " ";
    std::printf("RESULT %s %-52s R=%-6lld C=%lld %s/%s col_data_differing=%lld col_scales_differing=%lld "
                "row_data_differing=%s row_scales_differing=%s deterministic=%s\n",
                name.c_str(), tag.c_str(), (long long)rows, (long long)kC, mx::elementFormatName(format),
                mx::scaleModeName(mode), (long long)colData, (long long)colScales,
                dual ? std::to_string(rowData).c_str() : "-", dual ? std::to_string(rowScales).c_str() : "-",
                *first == *second ? "yes" : "NO");
    EXPECT_EQ(colData, 0);
    EXPECT_EQ(colScales, 0);
    EXPECT_EQ(rowData, 0);
    EXPECT_EQ(rowScales, 0);
    EXPECT_EQ(*first, *second);
  }
}

// R = 16384 tokens (Flux, B=32), 768 rows (24 row blocks: every HB, fewer programs than SMs) and
// a ragged 96 rows (three row blocks: HB = 1 only).
INSTANTIATE_TEST_SUITE_P(Tiles, MxPackTilesGpu,
                         ::testing::Combine(::testing::Values(std::string("mxfp6_pack_cols"),
                                                              std::string("mxfp6_pack_dual")),
                                            ::testing::Values(int64_t{512}, int64_t{24}, int64_t{3})),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_R" + std::to_string(32 * std::get<1>(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(Rows, MxPackRowsGpu, ::testing::Values(int64_t{16384}, int64_t{5}),
                         [](const auto& info) { return "R" + std::to_string(info.param); });

}  // namespace
}  // namespace mxfp6
