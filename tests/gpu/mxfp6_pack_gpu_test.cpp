// MXFP6 row, column and dual packing on the GPU, bit for bit against the CPU encoder
// (compiler/interp/mxfp6.h, itself checked exhaustively against docs/mxfp6-format.md): every format
// and scale mode, on data with ordinary values, zero blocks, bf16 subnormals, values at the
// format's saturation, and NaN/Inf blocks. Outputs poisoned before each launch; two launches
// bit-identical. The GPU tests' own schedules (C = 3072) at Flux's R, and the benchmark's other
// schedules (build/gpu_kernels/bench: C = 9216, 12288, 21504) and the op table's candidates
// (build/gpu_kernels/candidates: every width of the Flux shape set) at smaller R, so every packer
// the benchmark or the tuner can choose has passed here.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "compiler/interp/float_formats.h"
#include "compiler/interp/interpreter.h"
#include "compiler/interp/mxfp6.h"
#include "tests/gpu/gpu_harness.h"

namespace mxfp6 {
namespace {

interp::TensorArg tensor(const void* data, kir::Dtype dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return {const_cast<void*>(data), dtype, shape, n};
}

/// Random rows [rows, C] with a special block kind every few blocks.
std::vector<uint16_t> makeOperand(int64_t rows, int64_t C, uint64_t seed) {
  std::vector<uint16_t> x(rows * C);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> magnitude(-20.0f, 20.0f);
  std::uniform_int_distribution<int> kind(0, 15);
  std::uniform_int_distribution<int> lane(0, 31);
  for (int64_t b = 0; b < rows * C / 32; ++b) {
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

/// The operands of one test, one per width C [rows, C], and the CPU encoder's blobs of each by
/// format and scale mode, each computed once on every core (`pack(x, C, format, mode, threads)`):
/// a test checks tens of code objects against the same few.
template <typename Blobs>
class Operands {
 public:
  Operands(int64_t rows, uint64_t seed) : rows_(rows), seed_(seed) {}

  const std::vector<uint16_t>& x(int64_t C) {
    auto found = x_.find(C);
    if (found == x_.end()) found = x_.emplace(C, makeOperand(rows_, C, seed_ + C)).first;
    return found->second;
  }

  template <typename Pack>
  Expected<const Blobs*> blobs(int64_t C, mx::ElementFormat format, mx::ScaleMode mode, const Pack& pack) {
    auto key = std::tuple(C, format, mode);
    auto found = blobs_.find(key);
    if (found == blobs_.end()) {
      ASSIGN_OR_RETURN(Blobs made, pack(x(C), C, format, mode, gputest::hostThreads()));
      found = blobs_.emplace(key, std::move(made)).first;
    }
    return &found->second;
  }

 private:
  int64_t rows_;
  uint64_t seed_;
  std::map<int64_t, std::vector<uint16_t>> x_;
  std::map<std::tuple<int64_t, mx::ElementFormat, mx::ScaleMode>, Blobs> blobs_;
};

/// Whose code objects a test checks: the GPU tests' own (every packer at C = 3072), or the
/// benchmark's other schedules and the op table's candidates (every GEMM operand width), at
/// smaller R.
enum class Schedules { Tests, Bench };

std::vector<std::string> objectsDirs(Schedules s) {
  if (s == Schedules::Tests) return {gputest::gpuKernelsDir()};
  return {gputest::benchKernelsDir(), gputest::candidatesDir()};
}

std::string objectsDirsText(Schedules s) {
  std::string text;
  for (const std::string& dir : objectsDirs(s)) text += (text.empty() ? "" : " and ") + dir;
  return text;
}

const char* schedulesName(Schedules s) { return s == Schedules::Tests ? "Tests" : "Bench"; }

void PrintTo(Schedules s, std::ostream* os) { *os << schedulesName(s); }  // gtest's name for a parameter

Expected<Packed> runRows(rt::Device& dev, const gputest::CodeObject& obj, const kir::Kernel& kernel,
                         const std::vector<uint16_t>& x, int64_t rows, int64_t C) {
  const int64_t packed = C * 3 / 4, blocks = C / 32;
  ASSIGN_OR_RETURN(rt::DeviceBuffer dx, dev.allocate(x.size() * 2));
  ASSIGN_OR_RETURN(rt::DeviceBuffer data, dev.allocate(rows * packed));
  ASSIGN_OR_RETURN(rt::DeviceBuffer scales, dev.allocate(rows * blocks));
  RETURN_IF_ERROR(dev.copyToDevice(dx.data(), x.data(), x.size() * 2));
  RETURN_IF_ERROR(dev.memset(data.data(), 0xA5, rows * packed));
  RETURN_IF_ERROR(dev.memset(scales.data(), 0xA5, rows * blocks));
  std::vector<interp::Arg> args = {tensor(dx.data(), kir::Dtype::BF16, {rows, C}),
                                   tensor(data.data(), kir::Dtype::U8, {rows, packed}),
                                   tensor(scales.data(), kir::Dtype::U8, {rows, blocks})};
  ASSIGN_OR_RETURN(interp::BoundArgs bound, interp::bindArguments(kernel, args));
  ASSIGN_OR_RETURN(auto loaded, rt::loadKernel(dev, std::as_bytes(std::span(obj.bytes.data(), obj.bytes.size())),
                                               obj.metadata));
  RETURN_IF_ERROR(loaded->launchRows(rows, nullptr, gputest::launchArgs(kernel, bound)));
  RETURN_IF_ERROR(dev.synchronize());
  Packed out;
  out.data.resize(rows * packed);
  out.scales.resize(rows * blocks);
  RETURN_IF_ERROR(dev.copyToHost(out.data.data(), data.data(), out.data.size()));
  RETURN_IF_ERROR(dev.copyToHost(out.scales.data(), scales.data(), out.scales.size()));
  return out;
}

class MxPackRowsGpu : public ::testing::TestWithParam<std::tuple<Schedules, int64_t>> {};

TEST_P(MxPackRowsGpu, BitExactAgainstTheCpuEncoderInEveryFormatAndMode) {
  std::string whyNot;
  rt::Device* dev = gputest::device(&whyNot);
  if (!dev) GTEST_SKIP() << whyNot;
  auto [schedules, rows] = GetParam();
  auto objects = gputest::findCodeObjects("mxfp6_pack_rows", objectsDirs(schedules));
  ASSERT_FALSE(objects.empty()) << "no mxfp6_pack_rows code objects in " << objectsDirsText(schedules);
  Operands<mx::PackedBlobs> operands(rows, 31 + rows);
  std::string error;
  for (const gputest::CodeObject& obj : objects) {
    SCOPED_TRACE(obj.path);
    auto kernel = gputest::instantiateDsl("kernels_dsl/mxfp6_pack.mxk", "mxfp6_pack_rows", obj.metadata.config, error);
    ASSERT_TRUE(kernel) << error;
    const int64_t C = kernel->config.at("C");
    auto format = mx::ElementFormat(kernel->config.at("FMT"));
    auto mode = mx::ScaleMode(kernel->config.at("MODE"));
    auto expected = operands.blobs(C, format, mode, [&](const std::vector<uint16_t>& x, int64_t c, mx::ElementFormat f,
                                                        mx::ScaleMode m, int threads) {
      return mx::packRows(x, rows, c, f, m, threads);
    });
    ASSERT_TRUE(expected.isOk()) << expected.status().message();
    auto first = runRows(*dev, obj, *kernel, operands.x(C), rows, C);
    ASSERT_TRUE(first.isOk()) << first.status().message();
    auto second = runRows(*dev, obj, *kernel, operands.x(C), rows, C);
    ASSERT_TRUE(second.isOk()) << second.status().message();
    int64_t dataMismatch = 0, scaleMismatch = 0;
    const mx::PackedBlobs& want = **expected;
    for (size_t i = 0; i < first->data.size(); ++i) dataMismatch += first->data[i] != want.data[i];
    for (size_t i = 0; i < first->scales.size(); ++i) scaleMismatch += first->scales[i] != want.scales[i];
    std::string tag;
    for (const auto& [k, v] : obj.metadata.config) tag += k + "=" + std::to_string(v) + " ";
    std::printf("RESULT mxfp6_pack_rows %-44s R=%-6lld C=%lld %s/%s data_bytes_differing=%lld "
                "scale_bytes_differing=%lld deterministic=%s\n",
                tag.c_str(), (long long)rows, (long long)C, mx::elementFormatName(format), mx::scaleModeName(mode),
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
                               const std::vector<uint16_t>& x, int64_t blocks, int64_t C, bool dual) {
  const int64_t rows = blocks * 32, packed = C * 3 / 4, rowBlocks = C / 32;
  ASSIGN_OR_RETURN(rt::DeviceBuffer dx, dev.allocate(x.size() * 2));
  RETURN_IF_ERROR(dev.copyToDevice(dx.data(), x.data(), x.size() * 2));
  std::vector<std::pair<rt::DeviceBuffer, int64_t>> outs;  // row data, row scales, col data, col scales
  for (int64_t bytes : {rows * packed, rows * rowBlocks, C * blocks * 24, C * blocks}) {
    ASSIGN_OR_RETURN(rt::DeviceBuffer b, dev.allocate(bytes));
    RETURN_IF_ERROR(dev.memset(b.data(), 0xA5, bytes));
    outs.emplace_back(std::move(b), bytes);
  }
  const int64_t hb = kernel.config.at("HB"), groups = blocks / hb;
  std::vector<interp::Arg> args = {tensor(dx.data(), kir::Dtype::BF16, {groups, hb, 32, C})};
  if (dual) {
    args.push_back(tensor(outs[0].first.data(), kir::Dtype::U8, {groups, hb, 32, packed}));
    args.push_back(tensor(outs[1].first.data(), kir::Dtype::U8, {groups, hb, 32, rowBlocks}));
  }
  args.push_back(tensor(outs[2].first.data(), kir::Dtype::U8, {C, groups, hb, 24}));
  args.push_back(tensor(outs[3].first.data(), kir::Dtype::U8, {C, groups, hb}));
  ASSIGN_OR_RETURN(interp::BoundArgs bound, interp::bindArguments(kernel, args));
  ASSIGN_OR_RETURN(auto loaded, rt::loadKernel(dev, std::as_bytes(std::span(obj.bytes.data(), obj.bytes.size())),
                                               obj.metadata));
  // One program row per (group of HB row blocks, column tile).
  int64_t programRows = groups * (C / kernel.config.at("W"));
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

class MxPackTilesGpu : public ::testing::TestWithParam<std::tuple<Schedules, std::string, int64_t>> {};

TEST_P(MxPackTilesGpu, BitExactAgainstTheCpuEncoderInEveryFormatAndMode) {
  std::string whyNot;
  rt::Device* dev = gputest::device(&whyNot);
  if (!dev) GTEST_SKIP() << whyNot;
  auto [schedules, name, blocks] = GetParam();
  bool dual = name == "mxfp6_pack_dual";
  auto objects = gputest::findCodeObjects(name, objectsDirs(schedules));
  ASSERT_FALSE(objects.empty()) << "no " << name << " code objects in " << objectsDirsText(schedules);
  int64_t rows = blocks * 32;
  Operands<mx::DualBlobs> operands(rows, 77 + blocks);
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
    const int64_t C = kernel->config.at("C");
    auto format = mx::ElementFormat(kernel->config.at("FMT"));
    auto mode = mx::ScaleMode(kernel->config.at("MODE"));
    auto expected = operands.blobs(C, format, mode, [&](const std::vector<uint16_t>& x, int64_t c, mx::ElementFormat f,
                                                        mx::ScaleMode m, int threads) {
      return mx::packDual(x, rows, c, f, m, threads);
    });
    ASSERT_TRUE(expected.isOk()) << expected.status().message();
    auto first = runTiles(*dev, obj, *kernel, operands.x(C), blocks, C, dual);
    ASSERT_TRUE(first.isOk()) << first.status().message();
    auto second = runTiles(*dev, obj, *kernel, operands.x(C), blocks, C, dual);
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
                name.c_str(), tag.c_str(), (long long)rows, (long long)C, mx::elementFormatName(format),
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

std::string tilesTestName(const ::testing::TestParamInfo<MxPackTilesGpu::ParamType>& info) {
  return std::string(schedulesName(std::get<0>(info.param))) + "_" + std::get<1>(info.param) + "_R" +
         std::to_string(32 * std::get<2>(info.param));
}

std::string rowsTestName(const ::testing::TestParamInfo<MxPackRowsGpu::ParamType>& info) {
  return std::string(schedulesName(std::get<0>(info.param))) + "_R" + std::to_string(std::get<1>(info.param));
}

const auto kPackers = ::testing::Values(std::string("mxfp6_pack_cols"), std::string("mxfp6_pack_dual"));

// The tests' schedules at R = 16384 tokens (Flux, B=32), 768 rows (24 row blocks: every HB, fewer
// programs than SMs) and a ragged 96 rows (three row blocks: HB = 1 only).
INSTANTIATE_TEST_SUITE_P(Tiles, MxPackTilesGpu,
                         ::testing::Combine(::testing::Values(Schedules::Tests), kPackers,
                                            ::testing::Values(int64_t{512}, int64_t{24}, int64_t{3})),
                         tilesTestName);
// The benchmark's wide tiles (C = 9216 to 21504, HB = 4) and the candidates (C = 3072 to 21504)
// at 2048 rows (16 groups: thousands of programs) and 768.
INSTANTIATE_TEST_SUITE_P(BenchTiles, MxPackTilesGpu,
                         ::testing::Combine(::testing::Values(Schedules::Bench), kPackers,
                                            ::testing::Values(int64_t{64}, int64_t{24})),
                         tilesTestName);

INSTANTIATE_TEST_SUITE_P(Rows, MxPackRowsGpu,
                         ::testing::Combine(::testing::Values(Schedules::Tests),
                                            ::testing::Values(int64_t{16384}, int64_t{5})),
                         rowsTestName);
// The benchmark's row packers at C = 9216 to 21504 and the candidates (C = 3072 to 21504): 2048
// rows and a ragged 5 (ROWS = 2 programs past the last row).
INSTANTIATE_TEST_SUITE_P(BenchRows, MxPackRowsGpu,
                         ::testing::Combine(::testing::Values(Schedules::Bench),
                                            ::testing::Values(int64_t{2048}, int64_t{5})),
                         rowsTestName);

}  // namespace
}  // namespace mxfp6
