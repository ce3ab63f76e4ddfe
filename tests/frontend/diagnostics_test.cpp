// Each class of user error is reported as `file:line:col: error: message` at the construct
// that is wrong, and rendered with the source line and a caret.
#include <gtest/gtest.h>

#include "tests/frontend/test_util.h"

namespace mxfp6::frontend {
namespace {

using test::instantiateErrors;
using test::kernelWithBody;
using test::parseErrors;

// Line 6 of kernelWithBody() is "    <body>": the body starts at column 5.

TEST(Diagnostics, SyntaxErrorPointsAtTheUnexpectedToken) {
  EXPECT_EQ(parseErrors(kernelWithBody("v = f32(x[t, :]) +")),
            "t.mxk:7:3: error: expected an expression, found '}'\n");
  EXPECT_EQ(parseErrors("kernel k(x f32[T]) {}"),
            "t.mxk:1:12: error: expected ':' after the parameter name, found 'f32'\n");
  EXPECT_EQ(parseErrors(kernelWithBody("v = x[t, :] @ 2")),
            "t.mxk:6:17: error: unexpected character '@'\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T])\n  require 1 < 2 < 3\n{ row t in T { } }"),
            "t.mxk:2:17: error: comparisons do not chain; use '&&' or parentheses\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T]) require 1 == 1 : \"oops\n{ row t in T { } }"),
            "t.mxk:1:38: error: unterminated string\n");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T]) { rows t in T { } }"),
            "t.mxk:1:23: error: expected 'row' to start the row block, found 'rows'\n");
}

TEST(Diagnostics, UnknownIdentifier) {
  EXPECT_EQ(parseErrors(kernelWithBody("v = f32(x[t, :]) * q")),
            "t.mxk:6:24: error: unknown name 'q'\n");
  EXPECT_EQ(parseErrors(kernelWithBody("v = foo(eps)")),
            "t.mxk:6:9: error: unknown function 'foo'\n");
  EXPECT_EQ(parseErrors(kernelWithBody("z[t] = eps")), "t.mxk:6:5: error: unknown tensor 'z'\n");
}

TEST(Diagnostics, TypeErrors) {
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = x[t, :] * 2.0")),
            "t.mxk:6:17: error: arithmetic on bf16 needs f32(...) first\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("y[t, :] = f32(x[t, :])")),
            "t.mxk:6:5: error: storing f32 into bf16 tensor 'y' needs bf16(...)\n");
}

TEST(Diagnostics, ShapeErrors) {
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = f32(x[t, :]) + w[t, :]")),
            "t.mxk:6:22: error: length mismatch: 128 vs 64\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = f32(x[:, 0])")),
            "t.mxk:6:15: error: ':' needs a compile-time size, but dimension 'T' of 'x' is a "
            "runtime size\n");
}

const char* kTuned =
    "kernel k(x: f32[T, D])\n"
    "  specialize D = 256\n"
    "  tune THREADS in {64, 128} = 64, VEC in {2, 4}\n"
    "  require D % (THREADS * VEC) == 0 : \"whole vectors per thread\"\n"
    "{\n"
    "  row t in T { }\n"
    "}\n";

TEST(Diagnostics, ConstraintViolationQuotesTheConstraint) {
  EXPECT_EQ(instantiateErrors(kTuned, {{"THREADS", 128}, {"VEC", 4}}),
            "t.mxk:4:3: error: constraint 'D % (THREADS * VEC) == 0' is violated with D = 256, "
            "THREADS = 128, VEC = 4: whole vectors per thread\n");
  EXPECT_EQ(instantiateErrors(kTuned, {{"D", 96}}),
            "t.mxk:4:3: error: constraint 'D % (THREADS * VEC) == 0' is violated with D = 96, "
            "THREADS = 64, VEC = 2: whole vectors per thread\n");
  EXPECT_EQ(instantiateErrors(kTuned, {{"THREADS", 128}, {"VEC", 2}}), "");
}

TEST(Diagnostics, UnknownConfigKeyListsTheValidKeys) {
  EXPECT_EQ(instantiateErrors(kTuned, {{"WARPS", 4}}),
            "t.mxk:1:8: error: unknown configuration key 'WARPS' for kernel 'k'; valid keys: D, "
            "THREADS, VEC\n");
}

TEST(Diagnostics, TunableValueOutsideItsSetListsTheSet) {
  EXPECT_EQ(instantiateErrors(kTuned, {{"THREADS", 100}}),
            "t.mxk:3:8: error: THREADS = 100 is not one of its candidates {64, 128}\n");
}

TEST(Diagnostics, RenderShowsTheLineAndACaret) {
  DiagnosticEngine diags;
  test::instantiateFirst(kernelWithBody("v = x[t, :] * 2.0"), diags);
  EXPECT_EQ(diags.render(),
            "t.mxk:6:17: error: arithmetic on bf16 needs f32(...) first\n"
            "    v = x[t, :] * 2.0\n"
            "                ^\n");
}

TEST(Diagnostics, CaretFollowsTabs) {
  DiagnosticEngine diags;
  EXPECT_FALSE(
      parseSource("tabs.mxk", "kernel k(x: f32[T]) {\n\trow t in T {\n\t\tv = ?\n\t}\n}\n", diags));
  EXPECT_EQ(diags.render(),
            "tabs.mxk:3:7: error: expected an expression, found '?'\n"
            "\t\tv = ?\n"
            "\t\t    ^\n");
}

TEST(Diagnostics, UnreadableFileIsADiagnostic) {
  DiagnosticEngine diags;
  EXPECT_FALSE(parseFile("/nonexistent/k.mxk", diags));
  ASSERT_EQ(diags.diagnostics().size(), 1u);
  EXPECT_EQ(diags.render().rfind("/nonexistent/k.mxk: error: ", 0), 0u) << diags.render();
}

TEST(Diagnostics, ErrorAtEndOfFile) {
  DiagnosticEngine diags;
  EXPECT_FALSE(parseSource("e.mxk", "kernel k(x: f32[T]) {\n  row t in T {\n", diags));
  EXPECT_EQ(diags.render(),
            "e.mxk:3:1: error: expected a statement ('name = ...', 'tensor[...] = ...', 'var', 'for' "
            "or 'fn(...)') or '}', "
            "found end of file\n"
            "\n"
            "^\n");
}

}  // namespace
}  // namespace mxfp6::frontend
