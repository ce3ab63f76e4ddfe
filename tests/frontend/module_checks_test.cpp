// Checks made when a file is parsed, before any configuration is chosen: declarations, names,
// constraints and the limits that keep the frontend safe on hostile input.
#include <gtest/gtest.h>

#include "tests/frontend/test_util.h"

namespace mxfp6::frontend {
namespace {

using test::kernelWithBody;
using test::parseErrors;

TEST(ModuleChecks, DuplicateNames) {
  EXPECT_EQ(parseErrors("kernel k(x: f32[T], x: f32[T]) { row t in T { } }"),
            "t.mxk:1:21: error: 'x' is already declared as a tensor parameter\n");
  EXPECT_EQ(
      parseErrors("kernel k(x: f32[n], n: i32) { row t in n { } }"),
      "t.mxk:1:17: error: 'n' is already declared as a scalar parameter\n"
      "t.mxk:1:40: error: rows range over runtime or specialized sizes, but 'n' is a scalar "
            "parameter\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T], n: i32) tune n in {1} { row t in T { } }"),
            "t.mxk:1:34: error: 'n' is already declared as a scalar parameter\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T]) { row x in T { } }"),
            "t.mxk:1:27: error: 'x' is already declared as a tensor parameter\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T]) { row t in T { } }\n"
                        "kernel k(x: f32[T]) { row t in T { } }\n"),
            "t.mxk:2:8: error: kernel 'k' is already defined\n");
}

TEST(ModuleChecks, ParameterTypes) {
  EXPECT_EQ(parseErrors("kernel k(x: f32[T], n: out i32) { row t in T { } }"),
            "t.mxk:1:24: error: 'out' applies only to tensors; 'n' is a scalar\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T], n: bf16) { row t in T { } }"),
            "t.mxk:1:24: error: scalar parameter 'n' has type bf16; scalars are i32, i64 or f32\n");
  EXPECT_EQ(parseErrors("kernel k(x: i64[T]) { row t in T { } }"),
            "t.mxk:1:13: error: tensors of i64 are not supported; tensors hold bf16, f16, f32, "
            "i32 or u8\n");
  EXPECT_EQ(parseErrors("kernel k(x: f64[T]) { row t in T { } }"),
            "t.mxk:1:13: error: unknown type 'f64'; types are bf16, f16, f32, i32, i64 and u8\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T, 0]) { row t in T { } }"),
            "t.mxk:1:20: error: a dimension size must be at least 1\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T], n: i32 = 1.5) { row t in T { } }"),
            "t.mxk:1:30: error: default of integer parameter 'n' must be an integer\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T], n: i32 = -3, e: f32 = -1e-3) { row t in T { } }"), "");
}

TEST(ModuleChecks, Strides) {
  EXPECT_EQ(parseErrors("kernel k(x: f32[T, 8] strides(s), s: i64) { row t in T { } }"),
            "t.mxk:1:23: error: 'x' has 2 dimensions but 1 strides\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T, 8] strides(e, 1), e: f32) { row t in T { } }"),
            "t.mxk:1:31: error: stride 'e' must name an i32 or i64 scalar parameter\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T, 8] strides(s, 1), s: i32) { row t in T { } }"), "");
}

TEST(ModuleChecks, SpecializationsAndTunables) {
  EXPECT_EQ(parseErrors("kernel k(x: f32[T, D]) specialize E { row t in T { } }"),
            "t.mxk:1:35: error: specialized size 'E' is not a dimension of any tensor parameter\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T, D]) specialize D = 0 { row t in T { } }"),
            "t.mxk:1:35: error: specialized size 'D' must be at least 1\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T]) tune VEC in {2, 4} = 8 { row t in T { } }"),
            "t.mxk:1:42: error: default 8 of 'VEC' is not one of its candidates {2, 4}\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T]) tune VEC in {2, 2} { row t in T { } }"),
            "t.mxk:1:26: error: value 2 appears twice in the candidates of 'VEC'\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T]) tune ROWS in {0, 1} { row t in T { } }"),
            "t.mxk:1:26: error: candidate 0 of schedule knob 'ROWS' is not legal: it takes at least 1\n");
  EXPECT_EQ(
      parseErrors("kernel k(x: f32[T, D]) specialize D tune U in {0, 1} { row t in (D > 1) { } }"),
      "t.mxk:1:65: error: a row extent expression must be an integer, such as '(C / W)'\n");
}

TEST(ModuleChecks, Constraints) {
  const std::string prefix =
      "kernel k(x: f32[T, D]) specialize D = 64 tune V in {1, 2}\n  require ";
  const std::string suffix = "\n{ row t in T { } }";
  EXPECT_EQ(parseErrors(prefix + "D % Q == 0" + suffix),
            "t.mxk:2:15: error: unknown name 'Q' in constraint\n");
  EXPECT_EQ(parseErrors(prefix + "T > 1" + suffix),
            "t.mxk:2:11: error: 'T' is a runtime dimension; constraints use only specialized "
            "sizes and tunables\n");
  EXPECT_EQ(parseErrors(prefix + "D * V" + suffix),
            "t.mxk:2:3: error: a constraint must be a condition, such as 'D % 64 == 0'\n");
  EXPECT_EQ(
      parseErrors(prefix + "D > 1.5" + suffix),
      "t.mxk:2:15: error: constraints compute with integers; float literals are not allowed\n");
  EXPECT_EQ(parseErrors(prefix + "min(D, V) > 1" + suffix),
            "t.mxk:2:11: error: constraints cannot call functions or read tensors\n");
  EXPECT_EQ(parseErrors(prefix + "D && V > 1" + suffix),
            "t.mxk:2:13: error: '&&' needs condition operands\n");
  EXPECT_EQ(parseErrors(prefix + "(V == 1 ? D : V * 2) <= 64 && !(D < V)" + suffix), "");
}

TEST(ModuleChecks, BodyNamesAndBindings) {
  EXPECT_EQ(parseErrors(kernelWithBody("v = eps\n    v = eps")),
            "t.mxk:7:5: error: 'v' is already bound; values are immutable\n");
  EXPECT_EQ(parseErrors(kernelWithBody("eps = 1.0")),
            "t.mxk:6:5: error: cannot bind 'eps': it is a scalar parameter\n");
  EXPECT_EQ(parseErrors(kernelWithBody("D = 1")),
            "t.mxk:6:5: error: cannot bind 'D': it is a specialized size\n");
  EXPECT_EQ(parseErrors(kernelWithBody("a = b\n    b = eps")),
            "t.mxk:6:9: error: unknown name 'b'\n");
  EXPECT_EQ(parseErrors(kernelWithBody("v = x")),
            "t.mxk:6:9: error: tensor 'x' must be indexed, as in x[...]\n");
  EXPECT_EQ(parseErrors(kernelWithBody("n[t] = 1")),
            "t.mxk:6:5: error: 'n' is a scalar parameter, not a tensor\n");
  // A builtin's name is free for a value or a tensor: the next token decides.
  EXPECT_EQ(parseErrors(kernelWithBody("sum = eps + sum(f32(x[t, :]))")), "");
}

TEST(ModuleChecks, DeepNestingIsADiagnosticNotACrash) {
  const std::string limit = "expression nests more than 256 levels deep";
  std::string parens = std::string(5000, '(') + "eps" + std::string(5000, ')');
  EXPECT_NE(parseErrors(kernelWithBody("v = " + parens)).find(limit), std::string::npos);
  std::string negations = std::string(5000, '-') + "eps";
  EXPECT_NE(parseErrors(kernelWithBody("v = " + negations)).find(limit), std::string::npos);
  std::string chain = "eps";
  for (int i = 0; i < 5000; ++i) chain += " + eps";
  EXPECT_NE(parseErrors(kernelWithBody("v = " + chain)).find(limit), std::string::npos);
  std::string calls;
  for (int i = 0; i < 5000; ++i) calls += "abs(";
  calls += "eps" + std::string(5000, ')');
  EXPECT_NE(parseErrors(kernelWithBody("v = " + calls)).find(limit), std::string::npos);
  // Moderate nesting is fine.
  std::string ok = std::string(100, '(') + "eps" + std::string(100, ')');
  EXPECT_EQ(parseErrors(kernelWithBody("v = " + ok)), "");
}

TEST(ModuleChecks, NumbersOutOfRange) {
  EXPECT_EQ(parseErrors(kernelWithBody("v = 99999999999999999999")),
            "t.mxk:6:9: error: integer literal '99999999999999999999' does not fit in 64 bits\n");
  EXPECT_EQ(parseErrors(kernelWithBody("v = 1e999")),
            "t.mxk:6:9: error: float literal '1e999' is out of range\n");
}

}  // namespace
}  // namespace mxfp6::frontend
