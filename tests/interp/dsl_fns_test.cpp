// fns (kernels_dsl/README.md, "Functions") run by the interpreter: a kernel calling fns computes
// what the formula says, and an error the interpreter finds inside a fn's body names the call
// that put it there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "compiler/interp/interpreter.h"
#include "tests/interp/dsl_test_util.h"

namespace mxfp6::interp {
namespace {

using kir::Dtype;
using testing::HasSubstr;

// Line 2 holds the division of `ratio`, line 9 the call.
const char* kRatio =
    "fn ratio(a, b) {\n"
    "  return a / b\n"
    "}\n"
    "kernel k(y: out i32[T], n: i32)\n"
    "{\n"
    "  row t in T {\n"
    "    q = i32(t) + 10\n"
    "    twice = q + q\n"
    "    y[t] = ratio(twice, n) - ratio(q, 2)\n"
    "  }\n"
    "}\n";

TEST(DslFns, ComputeTheFormula) {
  auto k = instantiateSource(kRatio, "k");
  ASSERT_TRUE(k);
  std::vector<int32_t> y(5);
  std::vector<Arg> args = {view(y, Dtype::I32, {5}), int64_t{3}};
  ASSERT_TRUE(run(*k, args).isOk());
  for (int32_t t = 0; t < 5; ++t) EXPECT_EQ(y[t], 2 * (t + 10) / 3 - (t + 10) / 2) << t;
}

TEST(DslFns, AnErrorInAFnNamesItsCall) {
  auto k = instantiateSource(kRatio, "k");
  ASSERT_TRUE(k);
  std::vector<int32_t> y(5);
  std::vector<Arg> args = {view(y, Dtype::I32, {5}), int64_t{0}};
  const Status st = run(*k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("inline.mxk:2:12: error: integer division of 20 by zero"));
  EXPECT_THAT(st.message(), HasSubstr("\ninline.mxk:9:12: note: in the call of fn 'ratio'"));
}

}  // namespace
}  // namespace mxfp6::interp
