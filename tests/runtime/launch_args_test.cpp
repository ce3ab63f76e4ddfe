// checkLaunchArgs, checkGrid and gridForRows: what is caught before the driver is reached. The
// driver cannot check kernel arguments, so these checks are the only thing between a caller's
// mistake and a silently wrong result.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/runtime.h"

namespace mxfp6::rt {
namespace {

using ::testing::HasSubstr;

void* fakeAddress(uintptr_t address) { return reinterpret_cast<void*>(address); }

KernelMetadata lnModulateFwd() {
  KernelMetadata md;
  md.kernel = "ln_modulate_fwd";
  md.entry = "ln_modulate_fwd_kernel";
  md.target = "sm_90";
  md.abi = {{ArgKind::Pointer, "x"},    {ArgKind::Pointer, "shift"}, {ArgKind::Pointer, "scale"},
            {ArgKind::Pointer, "y"},    {ArgKind::Pointer, "mean"},  {ArgKind::Pointer, "rstd"},
            {ArgKind::I32, "stride"},   {ArgKind::F32, "eps"},       {ArgKind::I64, "T"}};
  md.block = {128, 1, 1};
  md.rowsPerProgram = 4;
  md.alignment = 16;
  return md;
}

std::vector<LaunchArg> goodArgs() {
  std::vector<LaunchArg> args;
  for (int i = 0; i < 6; ++i) args.push_back(LaunchArg::pointer(fakeAddress(0x10000 + 0x1000 * i)));
  args.push_back(LaunchArg::i32(3072));
  args.push_back(LaunchArg::f32(1e-6f));
  args.push_back(LaunchArg::i64(16384));
  return args;
}

TEST(CheckLaunchArgs, AcceptsAMatchingList) {
  Status status = checkLaunchArgs(lnModulateFwd(), goodArgs());
  EXPECT_TRUE(status.isOk()) << status.message();
}

// Strides that the generated code steps 16-byte vectors by must keep every access aligned.
TEST(CheckLaunchArgs, RejectsAStrideThatIsNotAMultipleOfTheAccess) {
  KernelMetadata md = lnModulateFwd();
  md.abi[6].multipleOf = 8;
  std::vector<LaunchArg> args = goodArgs();
  EXPECT_TRUE(checkLaunchArgs(md, args).isOk());
  args[6] = LaunchArg::i32(3076);
  EXPECT_EQ(checkLaunchArgs(md, args).message(),
            "kernel ln_modulate_fwd: argument 6 'stride' is 3076, not a multiple of 8");
  md.abi[8].multipleOf = 4;
  args = goodArgs();
  args[8] = LaunchArg::i64(16386);
  EXPECT_EQ(checkLaunchArgs(md, args).message(),
            "kernel ln_modulate_fwd: argument 8 'T' is 16386, not a multiple of 4");
}

TEST(CheckLaunchArgs, RejectsWrongCount) {
  std::vector<LaunchArg> args = goodArgs();
  args.pop_back();
  EXPECT_EQ(checkLaunchArgs(lnModulateFwd(), args).message(),
            "kernel ln_modulate_fwd takes 9 arguments, got 8");
  args = goodArgs();
  args.push_back(LaunchArg::i32(0));
  EXPECT_EQ(checkLaunchArgs(lnModulateFwd(), args).message(),
            "kernel ln_modulate_fwd takes 9 arguments, got 10");
}

TEST(CheckLaunchArgs, RejectsWrongKind) {
  std::vector<LaunchArg> args = goodArgs();
  args[7] = LaunchArg::i64(1);
  EXPECT_EQ(checkLaunchArgs(lnModulateFwd(), args).message(),
            "kernel ln_modulate_fwd: argument 7 'eps' is f32, got i64");
  args = goodArgs();
  args[2] = LaunchArg::i64(0x10000);  // an address passed as an integer
  EXPECT_THAT(checkLaunchArgs(lnModulateFwd(), args).message(),
              HasSubstr("argument 2 'scale' is ptr, got i64"));
}

TEST(CheckLaunchArgs, RejectsNullPointer) {
  std::vector<LaunchArg> args = goodArgs();
  args[0] = LaunchArg::pointer(nullptr);
  EXPECT_EQ(checkLaunchArgs(lnModulateFwd(), args).message(),
            "kernel ln_modulate_fwd: argument 0 'x' is a null pointer");
}

TEST(CheckLaunchArgs, RejectsMisalignedPointer) {
  std::vector<LaunchArg> args = goodArgs();
  args[0] = LaunchArg::pointer(fakeAddress(0x7f0000000004));
  EXPECT_EQ(checkLaunchArgs(lnModulateFwd(), args).message(),
            "kernel ln_modulate_fwd: argument 0 'x' pointer 0x7f0000000004 is not 16-byte "
            "aligned");
  args[0] = LaunchArg::pointer(fakeAddress(0x7f0000000010));
  EXPECT_TRUE(checkLaunchArgs(lnModulateFwd(), args).isOk());
}

TEST(CheckLaunchArgs, AlignmentOneAcceptsAnyNonNullPointer) {
  KernelMetadata md = lnModulateFwd();
  md.alignment = 1;
  std::vector<LaunchArg> args = goodArgs();
  args[3] = LaunchArg::pointer(fakeAddress(0x10003));
  EXPECT_TRUE(checkLaunchArgs(md, args).isOk());
}

TEST(CheckLaunchArgs, OneArgumentIsSingular) {
  KernelMetadata md = lnModulateFwd();
  md.abi.resize(1);
  EXPECT_EQ(checkLaunchArgs(md, {}).message(), "kernel ln_modulate_fwd takes 1 argument, got 0");
}

TEST(LaunchArg, ValuesShareTheFirstByte) {
  // The launch passes &arg.value for every kind; that is only right if each member starts there.
  LaunchArg a = LaunchArg::i32(-7);
  EXPECT_EQ(*reinterpret_cast<const int32_t*>(&a.value), -7);
  LaunchArg b = LaunchArg::f32(2.5f);
  EXPECT_EQ(*reinterpret_cast<const float*>(&b.value), 2.5f);
  LaunchArg c = LaunchArg::i64(int64_t{1} << 40);
  EXPECT_EQ(*reinterpret_cast<const int64_t*>(&c.value), int64_t{1} << 40);
  EXPECT_EQ(sizeof(LaunchArg::Value), 8u);
}

TEST(CheckGrid, EveryDimensionMustBeAtLeastOne) {
  EXPECT_TRUE(checkGrid({1, 1, 1}).isOk());
  EXPECT_TRUE(checkGrid({65536, 65535, 65535}).isOk());
  EXPECT_EQ(checkGrid({0, 1, 1}).message(),
            "grid (0, 1, 1) has a zero dimension; every grid dimension must be >= 1");
  EXPECT_FALSE(checkGrid({1, 0, 1}).isOk());
  EXPECT_FALSE(checkGrid({1, 1, 0}).isOk());
  EXPECT_THAT(checkGrid({1, 65536, 1}).message(), HasSubstr("exceeds the launch limits"));
}

TEST(GridForRows, RoundsUpToWholePrograms) {
  KernelMetadata md = lnModulateFwd();  // 4 rows per program
  auto exact = gridForRows(md, 16384);
  ASSERT_TRUE(exact.isOk());
  EXPECT_EQ(*exact, (std::array<uint32_t, 3>{4096, 1, 1}));
  auto partial = gridForRows(md, 16385);
  ASSERT_TRUE(partial.isOk());
  EXPECT_EQ(*partial, (std::array<uint32_t, 3>{4097, 1, 1}));
  auto one = gridForRows(md, 1);
  ASSERT_TRUE(one.isOk());
  EXPECT_EQ(*one, (std::array<uint32_t, 3>{1, 1, 1}));
}

TEST(GridForRows, ZeroNegativeAndHugeRowCountsAreErrors) {
  KernelMetadata md = lnModulateFwd();
  auto zero = gridForRows(md, 0);
  ASSERT_FALSE(zero.isOk());
  EXPECT_EQ(zero.status().message(),
            "kernel ln_modulate_fwd: cannot make a grid for 0 rows (launchRows treats 0 rows as "
            "a no-op)");
  EXPECT_FALSE(gridForRows(md, -1).isOk());
  // The generated code indexes rows in 32 bits: 2^31 - 1 rows is the most a launch may cover.
  md.rowsPerProgram = 1;
  auto most = gridForRows(md, (int64_t{1} << 31) - 1);
  ASSERT_TRUE(most.isOk()) << most.status().message();
  EXPECT_EQ(*most, (std::array<uint32_t, 3>{(1u << 31) - 1, 1, 1}));
  auto huge = gridForRows(md, int64_t{1} << 31);
  ASSERT_FALSE(huge.isOk());
  EXPECT_EQ(huge.status().message(),
            "kernel ln_modulate_fwd: 2147483648 rows exceed 2^31 - 1 (the generated code indexes "
            "rows in 32 bits)");
}

}  // namespace
}  // namespace mxfp6::rt
