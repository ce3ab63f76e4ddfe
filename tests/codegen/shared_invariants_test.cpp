// INVARIANTS = 1 (shared_invariants.cpp): a load that reads the same elements for every row (w
// read whole) is copied once per program into shared memory, one piece per thread, and each
// thread reads its chunks back after one barrier placed before their first use, after the row's
// reduction. A load inside a loop of the DSL, or of a tensor of more than one dimension, is
// refused with the reason; SERIAL's row groups read the copy before their loop. The GPU
// tests (norm_rope_gpu_test) run the benchmark's INVARIANTS = 1 objects against the interpreter.
#include <gtest/gtest.h>

#include "compiler/codegen/codegen.h"
#include "tests/codegen/kernel_fixture.h"

namespace mxfp6 {
namespace {

using testing::compileError;
using testing::countMatches;

constexpr const char* kSource = R"(
kernel inv(x: bf16[T, 64], w: f32[64], y: out f32[T, 64], s: out f32[T])
  tune ROWS in {1, 4} = 4, THREADS in {8} = 8, VEC in {8} = 8, INVARIANTS in {0, 1} = 0, ANCHOR in {0, 1} = 0,
       INTERLEAVE in {1, 2} = 1
{
  row t in T {
    v = f32(x[t, :])
    r = sum(v * v)
    y[t, :] = v * r * w[:]
    s[t] = r
  }
}
)";

std::string ptxAt(const std::map<std::string, int64_t>& config) {
  return testing::compiledOrFail(testing::inlineKernel(kSource, "inv", config), "sm_90", codegen::Emit::Ptx);
}

size_t firstOf(const std::string& ptx, const std::string& what) {
  size_t at = ptx.find(what);
  EXPECT_NE(at, std::string::npos) << what << " missing:\n" << ptx;
  return at;
}

TEST(SharedInvariants, EachThreadCopiesOnePieceAndReadsItsChunksAfterTheReduction) {
  // 4 rows of 8 threads: w's 256 bytes in 32 pieces of 8 bytes, one per thread.
  std::string ptx = ptxAt({{"INVARIANTS", 1}});
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(countMatches(ptx, R"(bar\.sync)"), 1u) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(ld\.global)"), 2u) << ptx;  // x's 16 bytes and w's piece
  EXPECT_EQ(countMatches(ptx, R"(ld\.global\.v2\.(b|f)32)"), 1u) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(st\.shared\.v2\.(b|f)32)"), 1u) << ptx;
  // A thread's chunk of w, 8 floats, as two 16-byte reads of the buffer.
  EXPECT_EQ(countMatches(ptx, R"(ld\.shared\.v4\.(b|f)32)"), 2u) << ptx;
  // The copy before the barrier, the reduction's shuffles before it too, the reads after.
  size_t barrier = firstOf(ptx, "bar.sync");
  EXPECT_LT(firstOf(ptx, "st.shared"), barrier) << ptx;
  EXPECT_LT(firstOf(ptx, "shfl.sync"), barrier) << ptx;
  EXPECT_GT(firstOf(ptx, "ld.shared"), barrier) << ptx;
}

TEST(SharedInvariants, FewerThreadsCopyInRoundsOfTheWidestAlignedPiece) {
  // One row of 8 threads: 16-byte pieces (w's chunks are 16-byte aligned), two rounds.
  std::string ptx = ptxAt({{"ROWS", 1}, {"INVARIANTS", 1}});
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(countMatches(ptx, R"(ld\.global\.v4\.(b|f)32)"), 3u) << ptx;  // x's one, w's two
  EXPECT_EQ(countMatches(ptx, R"(st\.shared\.v4\.(b|f)32)"), 2u) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(bar\.sync)"), 1u) << ptx;
}

TEST(SharedInvariants, TheDefaultKeepsTheLoadInRegisters) {
  std::string plain = ptxAt({});
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(countMatches(plain, R"(bar\.sync)"), 0u) << plain;
  EXPECT_EQ(countMatches(plain, R"(\.shared)"), 0u) << plain;
  EXPECT_EQ(countMatches(plain, R"(ld\.global\.v4\.(b|f)32)"), 3u) << plain;  // x's one, w's 32 bytes in two
}

TEST(SharedInvariants, InterleavedRowsShareOneCopyAndAnchorsLeaveItOut) {
  std::string interleaved = ptxAt({{"INVARIANTS", 1}, {"INTERLEAVE", 2}});
  ASSERT_FALSE(interleaved.empty());
  EXPECT_EQ(countMatches(interleaved, R"(st\.shared)"), 1u) << interleaved;
  EXPECT_EQ(countMatches(interleaved, R"(bar\.sync)"), 1u) << interleaved;
  // ANCHOR ties x's load to the reduction, not the staged one: its tie is x's element alone,
  // so the select's never-chosen operand is one widened element, with no add.
  std::string anchored = ptxAt({{"INVARIANTS", 1}, {"ANCHOR", 1}});
  std::string anchoredPlain = ptxAt({{"ANCHOR", 1}});
  EXPECT_EQ(countMatches(anchored, R"(selp\.f32)"), 1u) << anchored;
  EXPECT_EQ(countMatches(anchoredPlain, R"(add(\.rn)?\.f32)") - countMatches(anchored, R"(add(\.rn)?\.f32)"), 2u)
      << anchoredPlain << anchored;
  EXPECT_LT(firstOf(anchored, "selp.f32"), firstOf(anchored, "bar.sync")) << anchored;
}

TEST(SharedInvariants, PtxasAssemblesIt) {
  if (!testing::ptxasInstalled()) GTEST_SKIP() << "ptxas not installed";
  kir::Kernel k = testing::inlineKernel(kSource, "inv", {{"INVARIANTS", 1}});
  EXPECT_FALSE(testing::compiledOrFail(k, "sm_90", codegen::Emit::Cubin).empty());
}

TEST(SharedInvariants, SerialRowGroupsReadTheCopyBeforeTheirLoop) {
  // SERIAL's rewrite puts the row-invariant loads before the loop over the row groups: the copy,
  // the barrier and the reads stay outside it.
  constexpr const char* kSerial = R"(
kernel serial(x: bf16[T, 64], w: f32[64], y: out f32[T, 64])
  tune THREADS in {8} = 8, VEC in {8} = 8, SERIAL in {1, 2} = 1, INVARIANTS in {0, 1} = 0
{
  row t in T {
    y[t, :] = f32(x[t, :]) * w[:]
  }
}
)";
  std::string ptx = testing::compiledOrFail(testing::inlineKernel(kSerial, "serial", {{"SERIAL", 2}, {"INVARIANTS", 1}}),
                                            "sm_90", codegen::Emit::Ptx);
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(countMatches(ptx, R"(bar\.sync)"), 1u) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(ld\.shared)"), 2u) << ptx;  // once, not per row group
  EXPECT_LT(firstOf(ptx, "bar.sync"), firstOf(ptx, "st.global")) << ptx;
}

TEST(SharedInvariants, ALoopOrATensorOfMoreDimensionsIsRefusedWithTheReason) {
  constexpr const char* kLoop = R"(
kernel looped(x: f32[P, 64], w: f32[64], result: out f32[P])
  tune THREADS in {16} = 16, VEC in {4} = 4, INVARIANTS in {0, 1} = 0
{
  row j in P {
    var acc = zeros(64)
    for r in 0 .. 4 {
      acc = acc + x[j, :] * w[:]
    }
    result[j] = sum(acc)
  }
}
)";
  EXPECT_NE(compileError(kLoop, "looped", {{"INVARIANTS", 1}}).find("'w' is loaded inside a loop"), std::string::npos);
  EXPECT_EQ(compileError(kLoop, "looped", {}), "");
  constexpr const char* kMatrix = R"(
kernel matrix(x: f32[T, 64], m: f32[2, 32], y: out f32[T, 64])
  tune THREADS in {8} = 8, VEC in {8} = 8, INVARIANTS in {0, 1} = 0
{
  row t in T {
    y[t, :] = x[t, :] * m[:, :]
  }
}
)";
  EXPECT_NE(compileError(kMatrix, "matrix", {{"INVARIANTS", 1}}).find("'m' has 2 dimensions"), std::string::npos);
  EXPECT_EQ(compileError(kMatrix, "matrix", {}), "");
}

}  // namespace
}  // namespace mxfp6
