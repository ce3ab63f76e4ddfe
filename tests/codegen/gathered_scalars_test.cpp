// SCALARS = 1 (gathered_scalars.cpp): a program's per-row scalar stores leave after one barrier,
// each from consecutive threads reading the rows' values and offsets from shared memory, instead
// of one store per row by its first lane; loops and other than 4-byte scalars are refused with
// the reason. The GPU tests (norm_rope_gpu_test) run the SCALARS = 1 objects against the
// interpreter, ragged row counts included.
#include <gtest/gtest.h>

#include "compiler/codegen/codegen.h"
#include "tests/codegen/kernel_fixture.h"

namespace mxfp6 {
namespace {

using testing::compileError;
using testing::countMatches;

constexpr const char* kSource = R"(
kernel rows2(x: bf16[T, 64], y: out bf16[T, 64], total: out f32[T], squares: out f32[T])
  tune ROWS in {4, 16} = 4, THREADS in {8, 16} = 16, VEC in {4} = 4, SCALARS in {0, 1} = 0, INTERLEAVE in {1, 2} = 1
{
  row t in T {
    v = f32(x[t, :])
    y[t, :] = bf16(v * 2.0)
    total[t] = sum(v)
    squares[t] = sum(v * v)
  }
}
)";

std::string ptxAt(const std::map<std::string, int64_t>& config) {
  return testing::compiledOrFail(testing::inlineKernel(kSource, "rows2", config), "sm_90", codegen::Emit::Ptx);
}

TEST(GatheredScalars, EachScalarLeavesOnceAfterOneBarrier) {
  std::string ptx = ptxAt({{"ROWS", 16}, {"SCALARS", 1}});
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(countMatches(ptx, R"(bar\.sync)"), 1u) << ptx;
  // Each row's value and offset to shared memory, then one 4-byte global store per output.
  EXPECT_EQ(countMatches(ptx, R"(st\.shared\.b32)"), 2u) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(st\.shared\.b64)"), 2u) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(st\.global\.b32)"), 2u) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(ld\.shared\.b32)"), 2u) << ptx;
  // Without it, no barrier and the same two global stores, each by the row's first lane.
  std::string plain = ptxAt({{"ROWS", 16}});
  EXPECT_EQ(countMatches(plain, R"(bar\.sync)"), 0u) << plain;
  EXPECT_EQ(countMatches(plain, R"(st\.shared)"), 0u) << plain;
  EXPECT_EQ(countMatches(plain, R"(st\.global\.b32)"), 2u) << plain;
}

TEST(GatheredScalars, InterleavedRowSlotsAreGatheredEachOnTheirOwn) {
  std::string ptx = ptxAt({{"ROWS", 4}, {"SCALARS", 1}, {"INTERLEAVE", 2}});
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(countMatches(ptx, R"(bar\.sync)"), 1u) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(st\.global\.b32)"), 4u) << ptx;  // two outputs x two row slots
}

TEST(GatheredScalars, PtxasAssemblesIt) {
  if (!testing::ptxasInstalled()) GTEST_SKIP() << "ptxas not installed";
  kir::Kernel k = testing::inlineKernel(kSource, "rows2", {{"ROWS", 16}, {"SCALARS", 1}});
  EXPECT_FALSE(testing::compiledOrFail(k, "sm_90", codegen::Emit::Cubin).empty());
}

TEST(GatheredScalars, ALoopOrAnotherWidthIsRefusedWithTheReason) {
  constexpr const char* kLoop = R"(
kernel looped(x: f32[P, 64], result: out f32[P])
  tune THREADS in {16} = 16, VEC in {4} = 4, SCALARS in {0, 1} = 0
{
  row j in P {
    var acc = zeros(64)
    for r in 0 .. 4 {
      acc = acc + x[j, :]
      result[j] = sum(acc)
    }
  }
}
)";
  EXPECT_NE(compileError(kLoop, "looped", {{"SCALARS", 1}}).find("is inside a loop"), std::string::npos);
  EXPECT_EQ(compileError(kLoop, "looped", {{"SCALARS", 0}}), "");
  constexpr const char* kHalf = R"(
kernel half(x: bf16[T, 64], total: out bf16[T])
  tune THREADS in {16} = 16, VEC in {4} = 4, SCALARS in {0, 1} = 0
{
  row t in T {
    total[t] = bf16(sum(f32(x[t, :])))
  }
}
)";
  EXPECT_NE(compileError(kHalf, "half", {{"SCALARS", 1}}).find("gathers 4-byte scalars"), std::string::npos);
}

}  // namespace
}  // namespace mxfp6
