// prepareLaunch: launches from tensors are checked against the kernel's declaration before the
// driver is reached. One test per class of mistake, each pinning the message, which must name
// the argument and say what was expected; the accepted cases pin the derived ABI and grid.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "runtime/runtime.h"
#include "tests/runtime/tensor_kernels.h"

namespace mxfp6::rt {
namespace {

using ::testing::HasSubstr;

KernelMetadata parsed(const char* json) {
  auto md = parseKernelMetadata(json);
  EXPECT_TRUE(md.isOk()) << md.status().message();
  return md.isOk() ? *md : KernelMetadata{};
}

/// Device addresses 16 MiB apart: aligned, and far enough that no two test tensors overlap.
const void* address(int slot) {
  return reinterpret_cast<const void*>(uintptr_t{0x10000000} + (uintptr_t(slot) << 24));
}

TensorArg tensor(int slot, Dtype dtype, std::vector<int64_t> sizes) {
  return TensorArg::contiguous(address(slot), dtype, sizes);
}

TensorArg view(int slot, Dtype dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  return TensorArg::view(address(slot), dtype, sizes, strides);
}

// ---- ln_modulate_fwd: x, scale, shift [T|B, 3072] bf16; y, mean, rstd out; sample_div, eps ----

class LnModulateFwd : public ::testing::Test {
 protected:
  std::vector<ParamArg> args(int64_t T = 5, int64_t B = 2) const {
    return {tensor(0, Dtype::BF16, {T, 3072}), tensor(1, Dtype::BF16, {B, 3072}),
            tensor(2, Dtype::BF16, {B, 3072}), tensor(3, Dtype::BF16, {T, 3072}),
            tensor(4, Dtype::F32, {T}),        tensor(5, Dtype::F32, {T}),
            LaunchArg::i32(3),                 LaunchArg::f32(1e-6f)};
  }
  std::string error(const std::vector<ParamArg>& params) const {
    auto prepared = prepareLaunch(md_, params);
    EXPECT_FALSE(prepared.isOk());
    return prepared.isOk() ? "" : prepared.status().message();
  }
  KernelMetadata md_ = parsed(testing::kLnModulateFwdMetadata);
};

TEST_F(LnModulateFwd, DerivesTheAbiAndTheGridFromTheShapes) {
  auto prepared = prepareLaunch(md_, args(/*T=*/5, /*B=*/2));
  ASSERT_TRUE(prepared.isOk()) << prepared.status().message();
  const std::vector<LaunchArg>& a = prepared->args;
  ASSERT_EQ(a.size(), 10u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(a[i].kind, ArgKind::Pointer);
    EXPECT_EQ(a[i].value.ptr, address(i)) << i;
  }
  EXPECT_EQ(a[6].kind, ArgKind::I32);
  EXPECT_EQ(a[6].value.i32, 3);
  EXPECT_EQ(a[7].kind, ArgKind::F32);
  EXPECT_EQ(a[7].value.f32, 1e-6f);
  EXPECT_EQ(a[8].kind, ArgKind::I64);
  EXPECT_EQ(a[8].value.i64, 5);  // T
  EXPECT_EQ(a[9].kind, ArgKind::I64);
  EXPECT_EQ(a[9].value.i64, 2);  // B
  EXPECT_EQ(prepared->rows, 5);
  EXPECT_EQ(prepared->grid, (std::array<uint32_t, 3>{3, 1, 1}));  // 2 rows per program
  EXPECT_TRUE(checkLaunchArgs(md_, a).isOk());
}

TEST_F(LnModulateFwd, RejectsAWrongDtype) {
  std::vector<ParamArg> p = args();
  p[1] = tensor(1, Dtype::F32, {2, 3072});
  EXPECT_EQ(error(p),
            "kernel ln_modulate_fwd: argument 'scale' (1): expected bf16[B, 3072], got f32[2, 3072]");
}

TEST_F(LnModulateFwd, RejectsAWrongNdim) {
  std::vector<ParamArg> p = args();
  p[0] = tensor(0, Dtype::BF16, {5, 3072, 1});
  EXPECT_EQ(error(p),
            "kernel ln_modulate_fwd: argument 'x' (0): expected bf16[T, 3072], got bf16[5, 3072, 1]");
  p[0] = TensorArg::view(address(0), Dtype::BF16, std::vector<int64_t>(9, 1),
                         std::vector<int64_t>(9, 1));
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'x' (0): has ndim 9, expected 2 (bf16[T, 3072])");
}

TEST_F(LnModulateFwd, RejectsAnUnknownDtypeCode) {
  std::vector<ParamArg> p = args();
  p[0].tensor.dtype = static_cast<Dtype>(17);
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'x' (0): has unknown dtype code 17, "
                      "expected bf16[T, 3072]");
}

TEST_F(LnModulateFwd, RejectsAConstantDimOtherThanCompiled) {
  std::vector<ParamArg> p = args();
  p[0] = tensor(0, Dtype::BF16, {5, 4096});
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'x' (0): dim 1 is 4096, the kernel was "
                      "compiled for D = 3072 (bf16[T, 3072])");
}

TEST_F(LnModulateFwd, RejectsRuntimeSizesThatDisagreeAcrossTensors) {
  std::vector<ParamArg> p = args();
  p[3] = tensor(3, Dtype::BF16, {4, 3072});
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'y' (3): dim 0 is 4, but T is 5 from "
                      "argument 'x' (0) dim 0");
  p = args();
  p[2] = tensor(2, Dtype::BF16, {3, 3072});
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'shift' (2): dim 0 is 3, but B is 2 from "
                      "argument 'scale' (1) dim 0");
  p = args();
  p[5] = tensor(5, Dtype::F32, {-1});
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'rstd' (5): dim 0 is -1, sizes must be >= 0");
}

TEST_F(LnModulateFwd, RejectsANonContiguousRowMajorTensor) {
  std::vector<ParamArg> p = args();
  p[0] = view(0, Dtype::BF16, {5, 3072}, {4096, 1});  // rows padded to 4096
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'x' (0): stride 0 is 4096, expected 3072: "
                      "the kernel reads it as a contiguous row-major bf16[T, 3072] (strides "
                      "[4096, 1])");
  p[0] = view(0, Dtype::BF16, {5, 3072}, {1, 5});  // a transposed view
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'x' (0): stride 1 is 5, expected 1: the "
                      "kernel reads it as a contiguous row-major bf16[T, 3072] (strides [1, 5])");
}

// A size-1 dimension is only ever indexed by 0, so frameworks give it any stride.
TEST_F(LnModulateFwd, StridesOfSizeOneDimsAndEmptyTensorsAreNotChecked) {
  std::vector<ParamArg> p = args(/*T=*/1, /*B=*/1);
  p[1] = view(1, Dtype::BF16, {1, 3072}, {12345, 1});
  EXPECT_TRUE(prepareLaunch(md_, p).isOk()) << prepareLaunch(md_, p).status().message();
  p = args(/*T=*/0);
  p[0] = view(0, Dtype::BF16, {0, 3072}, {1, 1});
  EXPECT_TRUE(prepareLaunch(md_, p).isOk()) << prepareLaunch(md_, p).status().message();
}

TEST_F(LnModulateFwd, RejectsAScalarOfTheWrongKind) {
  std::vector<ParamArg> p = args();
  p[6] = LaunchArg::i64(3);
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'sample_div' (6): expected an i32 scalar, "
                      "got an i64 scalar");
  p = args();
  p[7] = tensor(7, Dtype::F32, {1});
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'eps' (7): expected an f32 scalar, got a "
                      "tensor f32[1]");
  p = args();
  p[0] = LaunchArg::pointer(address(0));
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'x' (0): expected a tensor bf16[T, 3072], "
                      "got a pointer");
}

TEST_F(LnModulateFwd, RejectsAWrongNumberOfArguments) {
  std::vector<ParamArg> p = args();
  p.pop_back();
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: takes 8 arguments (x, scale, shift, y, mean, rstd, "
                      "sample_div, eps), got 7");
}

TEST_F(LnModulateFwd, RejectsNullAndMisalignedPointers) {
  std::vector<ParamArg> p = args();
  p[4].tensor.data = nullptr;
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'mean' (4) is a null pointer");
  p = args();
  p[0].tensor.data = static_cast<const char*>(address(0)) + 8;
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'x' (0): pointer 0x10000008 is not "
                      "16-byte aligned");
}

TEST_F(LnModulateFwd, RejectsAnOutputThatOverlapsAnotherTensor) {
  std::vector<ParamArg> p = args();
  p[3].tensor.data = address(0);  // y written in place of x
  EXPECT_EQ(error(p), "kernel ln_modulate_fwd: argument 'y' (3) is an output and its memory "
                      "[0x10000000, 0x10007800) overlaps argument 'x' (0) [0x10000000, "
                      "0x10007800)");
  p = args();
  p[5].tensor.data = static_cast<const char*>(address(4)) + 16;  // rstd inside mean
  EXPECT_THAT(error(p), HasSubstr("argument 'mean' (4) is an output and its memory"));
  // Inputs may share memory: one table passed twice.
  p = args();
  p[2].tensor.data = address(1);
  EXPECT_TRUE(prepareLaunch(md_, p).isOk()) << prepareLaunch(md_, p).status().message();
}

// An empty batch launches nothing, so it needs no memory: empty tensors may be null.
TEST_F(LnModulateFwd, ZeroRowsIsNothingToLaunch) {
  std::vector<ParamArg> p = args(/*T=*/0);
  p[0].tensor.data = nullptr;
  p[3].tensor.data = nullptr;
  auto prepared = prepareLaunch(md_, p);
  ASSERT_TRUE(prepared.isOk()) << prepared.status().message();
  EXPECT_EQ(prepared->rows, 0);
  EXPECT_EQ(prepared->grid, (std::array<uint32_t, 3>{0, 1, 1}));
  EXPECT_EQ(prepared->args[8].value.i64, 0);
}

TEST(PrepareLaunch, MetadataWithoutASignatureIsRefused) {
  KernelMetadata md = parsed(testing::kLnModulateFwdMetadata);
  md.signature.reset();
  auto prepared = prepareLaunch(md, {});
  ASSERT_FALSE(prepared.isOk());
  EXPECT_EQ(prepared.status().message(),
            "kernel ln_modulate_fwd: its metadata has no 'params' and 'rows' (written by an older "
            "compiler); recompile it to launch from tensors, or launch with raw arguments");
}

// ---- norm_rope_fwd: x [T, H, 128] with strides (x_token_stride, x_head_stride, 1) ----

class NormRopeFwd : public ::testing::Test {
 protected:
  static constexpr int64_t T = 3, H = 2, S = 7;
  /// x as the K third of a blocked mixed_qkv [T, 3, H, 128]: token stride 3*H*128.
  std::vector<ParamArg> args(int64_t tokenStride = 3 * H * 128, int64_t headStride = 128) const {
    return {view(0, Dtype::BF16, {T, H, 128}, {tokenStride, headStride, 1}),
            tensor(1, Dtype::BF16, {128}),
            tensor(2, Dtype::F32, {S, 64}),
            tensor(3, Dtype::F32, {S, 64}),
            tensor(4, Dtype::BF16, {T, H, 128}),
            tensor(5, Dtype::F32, {T, H}),
            LaunchArg::i64(tokenStride),
            LaunchArg::i64(headStride),
            LaunchArg::i32(1),
            LaunchArg::f32(1e-6f)};
  }
  std::string error(const std::vector<ParamArg>& params) const {
    auto prepared = prepareLaunch(md_, params);
    EXPECT_FALSE(prepared.isOk());
    return prepared.isOk() ? "" : prepared.status().message();
  }
  KernelMetadata md_ = parsed(testing::kNormRopeFwdMetadata);
};

TEST_F(NormRopeFwd, RowsAreTheProductOfTheRowExtents) {
  auto prepared = prepareLaunch(md_, args());
  ASSERT_TRUE(prepared.isOk()) << prepared.status().message();
  EXPECT_EQ(prepared->rows, T * H);
  EXPECT_EQ(prepared->grid, (std::array<uint32_t, 3>{2, 1, 1}));  // 6 rows, 4 per program
  const std::vector<LaunchArg>& a = prepared->args;
  ASSERT_EQ(a.size(), 13u);
  EXPECT_EQ(a[6].value.i64, 3 * H * 128);
  EXPECT_EQ(a[7].value.i64, 128);
  EXPECT_EQ(a[10].value.i64, T);
  EXPECT_EQ(a[11].value.i64, H);
  EXPECT_EQ(a[12].value.i64, S);
}

TEST_F(NormRopeFwd, RejectsAStrideThatDiffersFromItsParameter) {
  std::vector<ParamArg> p = args();
  p[6] = LaunchArg::i64(H * 128);  // the stride of a contiguous [T, H, 128], not of this view
  EXPECT_EQ(error(p), "kernel norm_rope_fwd: argument 'x' (0): stride 0 is 768, but argument "
                      "'x_token_stride' (6), which the kernel uses as this stride, is 256");
}

TEST_F(NormRopeFwd, RejectsAConstantStrideOtherThanCompiled) {
  std::vector<ParamArg> p = args();
  p[0] = view(0, Dtype::BF16, {T, H, 128}, {3 * H * 256, 256, 2});
  p[6] = LaunchArg::i64(3 * H * 256);
  p[7] = LaunchArg::i64(256);
  EXPECT_EQ(error(p), "kernel norm_rope_fwd: argument 'x' (0): stride 2 is 2, the kernel was "
                      "compiled for 1 (strides [1536, 256, 2])");
}

TEST_F(NormRopeFwd, RejectsAStrideThatIsNotAMultipleOfTheVectorWidth) {
  EXPECT_EQ(error(args(/*tokenStride=*/260)),
            "kernel norm_rope_fwd: argument 'x' (0): stride 0 is 260 (x_token_stride), not a "
            "multiple of 8 (the kernel steps vector accesses by it)");
  // A stride parameter whose dimension has size 1 is not compared with the tensor, but its
  // value still steps the kernel's accesses.
  std::vector<ParamArg> p = args();
  p[0] = view(0, Dtype::BF16, {T, 1, 128}, {3 * 128, 100, 1});
  p[4] = tensor(4, Dtype::BF16, {T, 1, 128});
  p[5] = tensor(5, Dtype::F32, {T, 1});
  p[6] = LaunchArg::i64(3 * 128);
  p[7] = LaunchArg::i64(100);
  EXPECT_EQ(error(p), "kernel norm_rope_fwd: argument 'x_head_stride' (7) is 100, not a multiple "
                      "of 8 (the kernel steps vector accesses by it)");
}

// A runtime size that steps vector accesses (the prologue's row pitch RW of packed bytes) carries
// a multiple_of like a stride parameter: a tensor giving it another value is refused, naming the
// argument and its dimension; the raw ABI checks the same argument.
TEST_F(NormRopeFwd, RejectsARuntimeSizeThatIsNotAMultipleOfTheVectorWidth) {
  std::string json = testing::kNormRopeFwdMetadata;
  const std::string h = R"({"kind": "i64", "name": "H", "minimum": 1})";
  json.replace(json.find(h), h.size(), R"({"kind": "i64", "name": "H", "minimum": 1, "multiple_of": 4})");
  md_ = parsed(json.c_str());
  EXPECT_EQ(error(args()), "kernel norm_rope_fwd: argument 'x' (0): dim 1 is 2, not a multiple of 4: "
                           "the kernel steps vector accesses by H (bf16[T, H, 128])");

  md_ = parsed(testing::kNormRopeFwdMetadata);
  auto prepared = prepareLaunch(md_, args());
  ASSERT_TRUE(prepared.isOk()) << prepared.status().message();
  md_ = parsed(json.c_str());
  EXPECT_EQ(checkLaunchArgs(md_, prepared->args).message(),
            "kernel norm_rope_fwd: argument 11 'H' is 2, not a multiple of 4");
}

// The generated code divides row indices and runtime sizes in 32 bits, so every launch path
// bounds them: from tensors (the row count), and raw arguments with a signature (each size and
// their product), which is also what launch() with a caller's grid checks.
TEST_F(NormRopeFwd, RowSpacesAndSizesBeyond32BitsAreRefused) {
  std::vector<ParamArg> p = args();
  p[0] = view(0, Dtype::BF16, {65536, 32768, 128}, {32768 * 128, 128, 1});
  p[4] = tensor(4, Dtype::BF16, {65536, 32768, 128});
  p[5] = tensor(5, Dtype::F32, {65536, 32768});
  p[6] = LaunchArg::i64(32768 * 128);
  EXPECT_EQ(error(p), "kernel norm_rope_fwd: 2147483648 rows exceed 2^31 - 1 (the generated code "
                      "indexes rows in 32 bits)");

  auto prepared = prepareLaunch(md_, args());
  ASSERT_TRUE(prepared.isOk()) << prepared.status().message();
  std::vector<LaunchArg> raw = prepared->args;
  EXPECT_TRUE(checkLaunchArgs(md_, raw).isOk());
  raw[10] = LaunchArg::i64(65536);  // T
  raw[11] = LaunchArg::i64(32767);  // H: 65536 * 32767 rows still fit
  EXPECT_TRUE(checkLaunchArgs(md_, raw).isOk());
  raw[11] = LaunchArg::i64(32768);
  EXPECT_EQ(checkLaunchArgs(md_, raw).message(),
            "kernel norm_rope_fwd: the row space T * H = 65536 * 32768 exceeds 2^31 - 1 rows (the "
            "generated code indexes rows in 32 bits)");
  raw = prepared->args;
  raw[12] = LaunchArg::i64(int64_t{1} << 31);  // S, not a row extent, is divided by too
  EXPECT_EQ(checkLaunchArgs(md_, raw).message(),
            "kernel norm_rope_fwd: argument 12 'S' is 2147483648: runtime sizes must be in "
            "[0, 2^31 - 1] (the generated code divides indices in 32 bits)");
  raw[12] = LaunchArg::i64(-1);
  EXPECT_THAT(checkLaunchArgs(md_, raw).message(), HasSubstr("argument 12 'S' is -1"));
}

/// Raw arguments of kNormRopeFwdMetadata's ABI: six aligned pointers, strides 256 and 128,
/// pos_div 1, eps, and the sizes T, H, S.
std::vector<LaunchArg> rawNormRopeFwdArgs(int64_t T, int64_t H, int64_t S) {
  std::vector<LaunchArg> raw;
  for (int i = 0; i < 6; ++i) raw.push_back(LaunchArg::pointer(address(i)));
  for (int64_t v : {int64_t{256}, int64_t{128}}) raw.push_back(LaunchArg::i64(v));
  raw.push_back(LaunchArg::i32(1));
  raw.push_back(LaunchArg::f32(1e-6f));
  for (int64_t v : {T, H, S}) raw.push_back(LaunchArg::i64(v));
  return raw;
}

// A scalar the kernel divides the token index by, unsigned, must be positive where rows run: 0 or
// a negative value is refused by every launch path instead of reaching the division. An empty
// batch divides nothing (a sequence-major caller passes its batch size, 0, as pos_div).
TEST_F(NormRopeFwd, ADivisorBelowItsMinimumIsRefusedWhereRowsRun) {
  for (int32_t bad : {0, -2}) {
    const std::string refused = "kernel norm_rope_fwd: argument 8 'pos_div' is " + std::to_string(bad) +
                                ", must be >= 1 (the kernel divides indices by it)";
    std::vector<ParamArg> p = args();
    p[8] = LaunchArg::i32(bad);
    EXPECT_EQ(error(p), refused);
    auto prepared = prepareLaunch(md_, args());
    ASSERT_TRUE(prepared.isOk()) << prepared.status().message();
    std::vector<LaunchArg> raw = prepared->args;
    raw[8] = LaunchArg::i32(bad);
    EXPECT_EQ(checkLaunchArgs(md_, raw).message(), refused);
    raw[10] = LaunchArg::i64(0);  // T = 0
    Status empty = checkLaunchArgs(md_, raw);
    EXPECT_TRUE(empty.isOk()) << empty.message();
  }
}

// A size the kernel divides by (the rotary table's S: the position is (t / pos_div) % S) must be
// at least 1 where rows run; an empty batch may still pass an empty table.
TEST_F(NormRopeFwd, ASizeItDividesByMustBePositiveWhereRowsRun) {
  const std::string refused = "kernel norm_rope_fwd: argument 12 'S' is 0, must be >= 1 (the kernel divides "
                              "indices by it)";
  std::vector<ParamArg> p = args();
  p[2] = tensor(2, Dtype::F32, {0, 64});
  p[3] = tensor(3, Dtype::F32, {0, 64});
  EXPECT_EQ(error(p), refused);
  auto prepared = prepareLaunch(md_, args());
  ASSERT_TRUE(prepared.isOk()) << prepared.status().message();
  std::vector<LaunchArg> raw = prepared->args;
  raw[12] = LaunchArg::i64(0);
  EXPECT_EQ(checkLaunchArgs(md_, raw).message(), refused);
  raw[10] = LaunchArg::i64(0);  // T = 0: no rows, nothing is divided
  Status empty = checkLaunchArgs(md_, raw);
  EXPECT_TRUE(empty.isOk()) << empty.message();
  p[0] = view(0, Dtype::BF16, {0, H, 128}, {3 * H * 128, 128, 1});
  p[4] = tensor(4, Dtype::BF16, {0, H, 128});
  p[5] = tensor(5, Dtype::F32, {0, H});
  auto emptyBatch = prepareLaunch(md_, p);
  ASSERT_TRUE(emptyBatch.isOk()) << emptyBatch.status().message();
  EXPECT_EQ(emptyBatch->rows, 0);
}

// Without a signature the runtime cannot tell sizes from scalars, nor an empty launch: every
// minimum holds on every launch, and so does the maximum of a divisor with a multiplier (which
// is exact below 2^31; with a signature, the size checks bound it).
TEST(CheckLaunchArgs, WithoutASignatureMinimumsAndMaximumsHoldAlways) {
  nlohmann::json j = nlohmann::json::parse(testing::kNormRopeFwdMetadata);
  j.erase("params");
  j.erase("rows");
  KernelMetadata md = parsed(j.dump().c_str());
  ASSERT_FALSE(md.signature.has_value());
  std::vector<LaunchArg> raw = rawNormRopeFwdArgs(0, 2, 7);  // T = 0
  Status status = checkLaunchArgs(md, raw);
  EXPECT_TRUE(status.isOk()) << status.message();
  raw[8] = LaunchArg::i32(0);
  EXPECT_EQ(checkLaunchArgs(md, raw).message(),
            "kernel norm_rope_fwd: argument 8 'pos_div' is 0, must be >= 1 (the kernel divides indices by it)");
  raw[8] = LaunchArg::i32(1);
  raw[12] = LaunchArg::i64(int64_t{1} << 31);  // S
  EXPECT_EQ(checkLaunchArgs(md, raw).message(),
            "kernel norm_rope_fwd: argument 12 'S' is 2147483648, must be <= 2147483647 (the kernel divides by "
            "it in 32 bits)");
}

// A loop bound the generated code counts up to in 32 bits (index_bounds: a backward's
// `for r in j .. T * H step P`) is bounded like the row space, which here is T alone.
TEST(PrepareLaunch, LoopBoundsBeyond32BitsAreRefused) {
  std::string json = testing::kNormRopeFwdMetadata;
  json.replace(json.find(R"("rows": [{"dim": "T"}, {"dim": "H"}])"), 36,
               R"("rows": [{"dim": "T"}], "index_bounds": [[{"dim": "T"}, {"dim": "H"}]])");
  KernelMetadata md = parsed(json.c_str());
  ASSERT_TRUE(md.signature.has_value());
  std::vector<LaunchArg> raw = rawNormRopeFwdArgs(65536, 32767, 7);
  Status status = checkLaunchArgs(md, raw);
  EXPECT_TRUE(status.isOk()) << status.message();  // 65536 * 32767 < 2^31
  raw[11] = LaunchArg::i64(32768);
  const std::string refused = "kernel norm_rope_fwd: the index bound T * H = 65536 * 32768 exceeds 2^31 - 1 "
                              "(the generated code divides the indices below it in 32 bits)";
  EXPECT_EQ(checkLaunchArgs(md, raw).message(), refused);
  EXPECT_EQ(checkLaunchSizes(md, raw).message(), refused);
  // From tensors: the same refusal before any launch (T = 65536 rows fit on their own).
  std::vector<ParamArg> p = {view(0, Dtype::BF16, {65536, 32768, 128}, {32768 * 128, 128, 1}),
                             tensor(1, Dtype::BF16, {128}),
                             tensor(2, Dtype::F32, {7, 64}),
                             tensor(3, Dtype::F32, {7, 64}),
                             tensor(4, Dtype::BF16, {65536, 32768, 128}),
                             tensor(5, Dtype::F32, {65536, 32768}),
                             LaunchArg::i64(32768 * 128),
                             LaunchArg::i64(128),
                             LaunchArg::i32(1),
                             LaunchArg::f32(1e-6f)};
  auto prepared = prepareLaunch(md, p);
  ASSERT_FALSE(prepared.isOk());
  EXPECT_EQ(prepared.status().message(), refused);
}

// A zero extent empties the row space even after the others' product overflowed 31 bits.
TEST(PrepareLaunch, AnEmptyRowSpaceIsNotTooManyRows) {
  std::string json = testing::kNormRopeFwdMetadata;
  json.replace(json.find(R"("rows": [{"dim": "T"}, {"dim": "H"}])"), 36,
               R"("rows": [{"dim": "T"}, {"dim": "H"}, {"dim": "S"}])");
  KernelMetadata md = parsed(json.c_str());
  std::vector<LaunchArg> raw = rawNormRopeFwdArgs(65536, 65536, 0);
  Status status = checkLaunchArgs(md, raw);
  EXPECT_TRUE(status.isOk()) << status.message();
  raw[12] = LaunchArg::i64(1);
  EXPECT_EQ(checkLaunchArgs(md, raw).message(),
            "kernel norm_rope_fwd: the row space T * H * S = 65536 * 65536 * 1 exceeds 2^31 - 1 "
            "rows (the generated code indexes rows in 32 bits)");
}

// Row extents may be compile-time constants: they multiply the runtime ones.
TEST(PrepareLaunch, ConstantRowExtentsMultiplyTheRowCount) {
  std::string json = testing::kLnModulateFwdMetadata;
  json.replace(json.find(R"("rows": [{"dim": "T"}])"), 22, R"("rows": [{"dim": "T"}, {"const": 3}])");
  KernelMetadata md = parsed(json.c_str());
  std::vector<ParamArg> p = {tensor(0, Dtype::BF16, {5, 3072}), tensor(1, Dtype::BF16, {2, 3072}),
                             tensor(2, Dtype::BF16, {2, 3072}), tensor(3, Dtype::BF16, {5, 3072}),
                             tensor(4, Dtype::F32, {5}),        tensor(5, Dtype::F32, {5}),
                             LaunchArg::i32(3),                 LaunchArg::f32(1e-6f)};
  auto prepared = prepareLaunch(md, p);
  ASSERT_TRUE(prepared.isOk()) << prepared.status().message();
  EXPECT_EQ(prepared->rows, 15);
  EXPECT_EQ(prepared->grid, (std::array<uint32_t, 3>{8, 1, 1}));
}

TEST(TensorArg, ContiguousHasRowMajorStrides) {
  TensorArg t = TensorArg::contiguous(address(0), Dtype::U8, std::vector<int64_t>{2, 3, 4});
  EXPECT_EQ(t.ndim, 3);
  EXPECT_EQ(t.strides[0], 12);
  EXPECT_EQ(t.strides[1], 4);
  EXPECT_EQ(t.strides[2], 1);
  EXPECT_EQ(TensorArg::view(address(0), Dtype::U8, std::vector<int64_t>{2, 3},
                            std::vector<int64_t>{1})
                .ndim,
            -1);
}

}  // namespace
}  // namespace mxfp6::rt
