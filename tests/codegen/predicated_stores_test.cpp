// PREDICATE = 1 (predicated_stores.cpp): every store of a row is one or more `@p st.global` of
// the widest piece its size and alignment allow -- 16-byte and 8-byte vectors, a 4-byte f32 and a
// 2-byte bf16 scalar here -- each predicated on the row being in range (and, for a scalar, on
// the lane that stores it). ptxas, where installed, assembles the inline PTX.
#include <gtest/gtest.h>

#include <unistd.h>

#include "compiler/codegen/codegen.h"
#include "tests/codegen/kernel_fixture.h"

namespace mxfp6 {
namespace {

using testing::countMatches;

constexpr const char* kSource = R"(
kernel pstore(x: bf16[T, 64], y: out bf16[T, 64], total: out bf16[T], squares: out f32[T])
  tune ROWS in {1, 2} = 2, THREADS in {8, 16} = 16, VEC in {4, 8} = 4, PREDICATE in {0, 1} = 0
  require 64 % (THREADS * VEC) == 0 : "each thread holds whole vectors of the row"
{
  row t in T {
    v = f32(x[t, :])
    y[t, :] = bf16(v * 2.0)
    total[t] = bf16(sum(v))
    squares[t] = sum(v * v)
  }
}
)";

std::string ptxAt(const std::map<std::string, int64_t>& config, codegen::Emit emit = codegen::Emit::Ptx) {
  return testing::compiledOrFail(testing::inlineKernel(kSource, "pstore", config), "sm_90", emit);
}

TEST(PredicatedStores, EveryStoreCarriesItsPredicate) {
  // THREADS=16, VEC=4: one 8-byte chunk of y per thread.
  std::string ptx = ptxAt({{"THREADS", 16}, {"VEC", 4}, {"PREDICATE", 1}});
  EXPECT_EQ(countMatches(ptx, R"(@%p\d+ st\.global\.v2\.b32 \[%rd\d+\], \{%r\d+, %r\d+\};)"), 1u) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(@%p\d+ st\.global\.b16 \[%rd\d+\], %rs\d+;)"), 1u) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(@%p\d+ st\.global\.b32 \[%rd\d+\], %r\d+;)"), 1u) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(st\.global)"), 3u) << ptx;  // nothing stored without a predicate
  // THREADS=8, VEC=8: one 16-byte chunk per thread.
  ptx = ptxAt({{"THREADS", 8}, {"VEC", 8}, {"PREDICATE", 1}});
  EXPECT_EQ(countMatches(ptx, R"(@%p\d+ st\.global\.v4\.b32 \[%rd\d+\], \{%r\d+, %r\d+, %r\d+, %r\d+\};)"), 1u) << ptx;
}

TEST(PredicatedStores, TheDefaultBranchesAroundTheStores) {
  std::string ptx = ptxAt({{"THREADS", 16}, {"VEC", 4}});
  EXPECT_EQ(countMatches(ptx, R"(@%p\d+ st\.global)"), 0u) << ptx;
  EXPECT_EQ(countMatches(ptx, R"(st\.global)"), 3u) << ptx;
}

TEST(PredicatedStores, PtxasAssemblesThem) {
  if (!testing::ptxasInstalled()) GTEST_SKIP() << "ptxas not installed";
  for (int64_t vec : {4, 8})
    EXPECT_FALSE(ptxAt({{"THREADS", 8}, {"VEC", vec}, {"PREDICATE", 1}}, codegen::Emit::Cubin).empty()) << vec;
}

TEST(PredicatedStores, AmdRefusesThemWithTheReason) {
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = frontend::parseSource("pstore.mxk", kSource, diags);
  ASSERT_TRUE(m) << diags.render();
  std::optional<kir::Kernel> k = testing::instantiateOrFail(*m, "pstore", {{"PREDICATE", 1}});
  ASSERT_TRUE(k);
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(*k, *codegen::findTarget("gfx950"), codegen::Emit::Hsaco);
  ASSERT_FALSE(c.isOk());
  EXPECT_NE(c.status().message().find("use PREDICATE = 0 there"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace mxfp6
