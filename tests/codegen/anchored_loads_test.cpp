// ANCHOR = 1 (anchored_loads.cpp): the loads a row issues before its reduction become inputs of
// the reduction's in-thread partial through one select on a null-pointer test, so ptxas cannot
// schedule them after the reduction. Here x (one 16-byte access per thread) and w (32 bytes: two
// accesses) are loaded before sum(v * v), and w is needed only after it.
#include <gtest/gtest.h>

#include <regex>

#include "compiler/codegen/codegen.h"
#include "tests/codegen/kernel_fixture.h"

namespace mxfp6 {
namespace {

using testing::countMatches;

constexpr const char* kSource = R"(
kernel anchor(x: bf16[T, 64], w: f32[64], y: out f32[T, 64], s: out f32[T])
  tune THREADS in {8} = 8, VEC in {8} = 8, ANCHOR in {0, 1} = 0
  require 64 % (THREADS * VEC) == 0 : "each thread holds whole vectors of the row"
{
  row t in T {
    v = f32(x[t, :])
    r = sum(v * v)
    y[t, :] = v * r * w[:]
    s[t] = r
  }
}
)";

std::string ptxAt(int64_t anchor) {
  return testing::compiledOrFail(testing::inlineKernel(kSource, "anchor", {{"ANCHOR", anchor}}), "sm_90",
                                 codegen::Emit::Ptx);
}

TEST(AnchoredLoads, OneSelectOnANullTestFeedsTheReduction) {
  std::string ptx = ptxAt(1);
  size_t shuffle = ptx.find("shfl.sync");
  ASSERT_NE(shuffle, std::string::npos) << ptx;
  std::string before = ptx.substr(0, shuffle);
  // Every load is issued before the reduction's first shuffle, and one select joins them to it.
  EXPECT_EQ(countMatches(before, R"(ld\.global)"), countMatches(ptx, R"(ld\.global)")) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(selp\.f32)"), 1u) << ptx;
  EXPECT_EQ(countMatches(before, R"(selp\.f32)"), 1u) << ptx;
  // Its condition: a base pointer compared with null, which no load that ran can satisfy.
  std::smatch sel;
  ASSERT_TRUE(std::regex_search(before, sel, std::regex(R"(selp\.f32\s+%r\d+, (%r\d+), %r\d+, (%p\d+);)"))) << ptx;
  EXPECT_EQ(countMatches(before, "setp\\.eq\\.[bs]64\\s+\\" + sel[2].str() + ", %rd\\d+, 0;"), 1u) << ptx;
  // The select's chosen-never operand sums one element of each 16-byte access: x's and w's two.
  EXPECT_EQ(countMatches(before, "add(\\.rn)?\\.f32\\s+\\" + sel[1].str() + ","), 1u) << ptx;
}

TEST(AnchoredLoads, TheDefaultAddsNothing) {
  std::string plain = ptxAt(0), anchored = ptxAt(1);
  EXPECT_EQ(countMatches(plain, R"(selp\.f32)"), 0u) << plain;
  EXPECT_EQ(countMatches(plain, R"(setp\.eq\.[bs]64\s+%p\d+, %rd\d+, 0;)"), 0u) << plain;
  // The tie: two adds for three elements, and nothing else changes in the arithmetic.
  EXPECT_EQ(countMatches(anchored, R"(add(\.rn)?\.f32)") - countMatches(plain, R"(add(\.rn)?\.f32)"), 2u) << plain << anchored;
  EXPECT_EQ(countMatches(anchored, R"(ld\.global)"), countMatches(plain, R"(ld\.global)")) << plain << anchored;
}

}  // namespace
}  // namespace mxfp6
