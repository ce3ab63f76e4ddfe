// Configuration strings, binding sizes and tunables, and the enumeration the autotuner uses.
#include <gtest/gtest.h>

#include "tests/frontend/test_util.h"

namespace mxfp6::frontend {
namespace {

using test::instantiateErrors;

TEST(ConfigString, ParsesKeyValuePairs) {
  std::string error;
  auto config = parseConfigString("D=3072,VEC=8", error);
  ASSERT_TRUE(config.has_value()) << error;
  EXPECT_EQ(*config, (std::map<std::string, int64_t>{{"D", 3072}, {"VEC", 8}}));
  config = parseConfigString(" ROWS = 2 , X_1=-4 ", error);
  ASSERT_TRUE(config.has_value()) << error;
  EXPECT_EQ(*config, (std::map<std::string, int64_t>{{"ROWS", 2}, {"X_1", -4}}));
  config = parseConfigString("", error);
  ASSERT_TRUE(config.has_value());
  EXPECT_TRUE(config->empty());
}

TEST(ConfigString, RejectsMalformedText) {
  std::string error;
  for (const char* bad : {"D", "D=", "=3", "D=3x", "1D=3", "D=3,", "D=3,,E=4",
                          "D=99999999999999999999", "D=+3", "D=E 3"}) {
    error.clear();
    EXPECT_FALSE(parseConfigString(bad, error).has_value()) << bad;
    EXPECT_NE(error.find("malformed configuration entry"), std::string::npos) << bad;
  }
  EXPECT_FALSE(parseConfigString("D=1,D=2", error).has_value());
  EXPECT_EQ(error, "configuration key 'D' is given twice");
}

const char* kNoDefault =
    "kernel k(x: f32[T, N])\n"
    "  specialize N\n"
    "  tune A in {1, 2, 3}, B in {8, 16}\n"
    "  require N % (A * B) == 0\n"
    "  require A != 2 || N % (B - 8) == 0\n"
    "{\n"
    "  row t in T { }\n"
    "}\n";

TEST(Config, SpecializedSizeNeedsAValue) {
  EXPECT_EQ(instantiateErrors(kNoDefault),
            "t.mxk:2:14: error: specialized size 'N' has no value; give it a default or a "
            "configuration value\n");
  EXPECT_EQ(instantiateErrors(kNoDefault, {{"N", 0}}),
            "t.mxk:2:14: error: specialized size 'N' must be at least 1, got 0\n");
  EXPECT_EQ(instantiateErrors(kNoDefault, {{"N", 48}}), "");
}

TEST(Config, ConstraintEvaluationErrorsAreDiagnostics) {
  // A = 2, B = 8: N % (B - 8) divides by zero.
  EXPECT_EQ(instantiateErrors(kNoDefault, {{"N", 48}, {"A", 2}}),
            "t.mxk:5:23: error: in constraint 'A != 2 || N % (B - 8) == 0': division by zero\n");
}

TEST(Config, EnumerationSkipsViolatingAndFailingConfigurations) {
  DiagnosticEngine diags;
  auto module = parseSource("t.mxk", kNoDefault, diags);
  ASSERT_TRUE(module.has_value()) << diags.render();
  EXPECT_TRUE(enumerateConfigs(*module, "k", {}).empty());          // N has no value
  EXPECT_TRUE(enumerateConfigs(*module, "k", {{"Q", 1}}).empty());  // not a size
  EXPECT_TRUE(enumerateConfigs(*module, "nope", {{"N", 48}}).empty());
  auto configs = enumerateConfigs(*module, "k", {{"N", 48}});
  // N = 48: A*B divides 48 for (1,8) (1,16) (2,8) (3,8) (3,16); (2,8) divides by zero and
  // (2,16) gives 48 % 32 != 0.
  std::vector<std::map<std::string, int64_t>> expected = {
      {{"N", 48}, {"A", 1}, {"B", 8}},
      {{"N", 48}, {"A", 1}, {"B", 16}},
      {{"N", 48}, {"A", 3}, {"B", 8}},
      {{"N", 48}, {"A", 3}, {"B", 16}},
  };
  EXPECT_EQ(configs, expected);
}

TEST(Config, KernelWithoutTunablesHasOneConfiguration) {
  DiagnosticEngine diags;
  auto module =
      parseSource("t.mxk", "kernel k(x: f32[T, D]) specialize D = 4 { row t in T { } }", diags);
  ASSERT_TRUE(module.has_value());
  auto configs = enumerateConfigs(*module, "k", {});
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0], (std::map<std::string, int64_t>{{"D", 4}}));
  EXPECT_EQ(instantiateErrors("kernel k(x: f32[T]) { row t in T { } }", {{"D", 4}}),
            "t.mxk:1:8: error: unknown configuration key 'D' for kernel 'k'; it has no "
            "configuration keys\n");
}

TEST(Config, UnknownKernel) {
  DiagnosticEngine diags;
  auto module = parseSource("t.mxk", "kernel k(x: f32[T]) { row t in T { } }", diags);
  ASSERT_TRUE(module.has_value());
  EXPECT_FALSE(instantiate(*module, "q", {}, diags).has_value());
  EXPECT_EQ(diags.render(), "t.mxk: error: no kernel named 'q' in t.mxk; kernels: k\n");
}

}  // namespace
}  // namespace mxfp6::frontend
