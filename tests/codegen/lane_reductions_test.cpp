// Reductions across lanes end with the same bits in every lane: the butterfly's sums never fuse
// with a product (the DSL's arithmetic may contract into FMAs elsewhere). With THREADS=16, VEC=1
// each lane's partial of sum(v * w) is a lone product; were the exchange's add contracted, a lane
// would compute fma(a_i, b_i, round(a_j * b_j)) and its partner fma(a_j, b_j, round(a_i * b_i)),
// and the rows' lanes would disagree in the last bit (lane 0 stores s while the others scale y
// by their own q). group_sum across lanes likewise.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "compiler/codegen/codegen.h"
#include "tests/codegen/kernel_fixture.h"

namespace mxfp6 {
namespace {

constexpr const char* kSource = R"(
kernel lanes(x: f32[T, 16], w: f32[T, 16], y: out f32[T, 16], s: out f32[T], g: out f32[T, 4])
  tune THREADS in {16} = 16, VEC in {1} = 1
{
  row t in T {
    v = x[t, :]
    q = sum(v * w[t, :])
    y[t, :] = v * q
    s[t] = q
    g[t, :] = group_sum(v * w[t, :], 4)
  }
}
)";

/// The destination registers of the PTX's butterfly shuffles, and the lines that use them.
TEST(LaneReductions, ExchangeSumsAreNotFused) {
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = frontend::parseSource("lanes.mxk", kSource, diags);
  ASSERT_TRUE(m) << diags.render();
  std::optional<kir::Kernel> k = testing::instantiateOrFail(*m, "lanes", {});
  ASSERT_TRUE(k);
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(*k, *codegen::findTarget("sm_90"), codegen::Emit::Ptx);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  const std::string& ptx = c->bytes;
  std::set<std::string> shuffled;
  std::regex shfl(R"(shfl\.sync\.bfly\.b32\s+(%r\d+),)");
  for (std::sregex_iterator it(ptx.begin(), ptx.end(), shfl), end; it != end; ++it) shuffled.insert((*it)[1]);
  ASSERT_GE(shuffled.size(), 4u) << ptx;  // four steps of the sum (16 lanes), two of each group
  std::istringstream lines(ptx);
  int adds = 0;
  for (std::string line; std::getline(lines, line);) {
    for (const std::string& reg : shuffled) {
      if (!std::regex_search(line, std::regex(reg + R"(\b)")) || line.find("shfl") != std::string::npos) continue;
      EXPECT_EQ(line.find("fma"), std::string::npos) << "a shuffled partial feeds an FMA: " << line;
      adds += line.find("add.rn.f32") != std::string::npos;
    }
  }
  EXPECT_GE(adds, 4) << ptx;  // each exchange is a rounded add
}

}  // namespace
}  // namespace mxfp6
