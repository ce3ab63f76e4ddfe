// The `variant` clause (kernels_dsl/README.md, "Names and sizes"): its checks, its binding from
// configuration maps and strings, and its place in the enumeration the autotuner uses.
#include <gtest/gtest.h>

#include "tests/frontend/test_util.h"

namespace mxfp6::frontend {
namespace {

using test::instantiateErrors;
using test::parseErrors;

/// A kernel with one format variant and one scale-mode variant; `clauses` ends line 2.
std::string withClauses(const std::string& clauses) {
  return "kernel k(x: bf16[T, 64], s: out u8[T, 2])\n"
         "  " +
         clauses +
         "\n"
         "{\n"
         "  row t in T { s[t, :] = mx_scale(x[t, :], E2M3, RCEIL) }\n"
         "}\n";
}

// Line 3: "  variant FMT in {E2M3, E3M2}, MODE in {RCEIL, EVEN, FLOOR} = FLOOR":
// FMT at column 11, MODE at column 32.
const char* kVariants =
    "kernel k(x: bf16[T, D], s: out u8[T, D])\n"
    "  specialize D = 128\n"
    "  variant FMT in {E2M3, E3M2}, MODE in {RCEIL, EVEN, FLOOR} = FLOOR\n"
    "  tune K in {1, 2}, L in {8, 16, 32}\n"
    "  require D % (K * L) == 0\n"
    "{\n"
    "  row t in T { s[t, :] = mx_encode(x[t, :], mx_scale(x[t, :], FMT, MODE), FMT) }\n"
    "}\n";

std::optional<Module> parse(const char* source) {
  DiagnosticEngine diags;
  auto module = parseSource("t.mxk", source, diags);
  EXPECT_TRUE(module.has_value()) << diags.render();
  return module;
}

int64_t code(VariantKind kind, int64_t value) { return variantNameCode({kind, value}); }

TEST(Variant, DescribedInKernelInfo) {
  auto module = parse(kVariants);
  ASSERT_TRUE(module);
  const KernelInfo& k = module->kernels().front();
  ASSERT_EQ(k.variants.size(), 2u);
  EXPECT_EQ(k.variants[0].name, "FMT");
  EXPECT_EQ(k.variants[0].kind, VariantKind::Format);
  EXPECT_EQ(k.variants[0].values, (std::vector<std::string>{"E2M3", "E3M2"}));
  EXPECT_EQ(k.variants[0].defaultValue, "E2M3");
  EXPECT_EQ(k.variants[1].kind, VariantKind::ScaleMode);
  EXPECT_EQ(k.variants[1].values, (std::vector<std::string>{"RCEIL", "EVEN", "FLOOR"}));
  EXPECT_EQ(k.variants[1].defaultValue, "FLOOR");
}

TEST(Variant, ValueNamesAreGlobal) {
  EXPECT_EQ(findVariantValue("E3M2")->kind, VariantKind::Format);
  EXPECT_EQ(findVariantValue("E3M2")->value, int64_t(kir::MxFormat::E3M2));
  EXPECT_EQ(findVariantValue("FLOOR")->kind, VariantKind::ScaleMode);
  EXPECT_EQ(findVariantValue("FLOOR")->value, int64_t(kir::MxScaleMode::Floor));
  EXPECT_FALSE(findVariantValue("e2m3").has_value());
  EXPECT_STREQ(variantValueName(VariantKind::ScaleMode, 1), "EVEN");
  EXPECT_EQ(variantValueName(VariantKind::Format, 2), nullptr);
  EXPECT_EQ(decodeVariantNameCode(code(VariantKind::Format, 1))->value, 1);
  EXPECT_FALSE(decodeVariantNameCode(1).has_value());
  EXPECT_FALSE(decodeVariantNameCode(code(VariantKind::Format, 2)).has_value());
}

TEST(Variant, DeclarationErrors) {
  EXPECT_EQ(parseErrors(withClauses("variant FMT in {E2M3, E4M3}")),
            "t.mxk:2:25: error: unknown value 'E4M3' of variant 'FMT'; values are the formats "
            "E2M3, E3M2 and the scale modes RCEIL, EVEN, FLOOR\n");
  EXPECT_EQ(parseErrors(withClauses("variant V in {E2M3, RCEIL}")),
            "t.mxk:2:23: error: variant 'V' mixes kinds: 'RCEIL' is a scale mode but 'E2M3' is "
            "a format\n");
  EXPECT_EQ(parseErrors(withClauses("variant M in {EVEN, FLOOR, EVEN}")),
            "t.mxk:2:30: error: value 'EVEN' appears twice in the values of 'M'\n");
  EXPECT_EQ(parseErrors(withClauses("variant FMT in {E2M3} = E3M2")),
            "t.mxk:2:27: error: default 'E3M2' of 'FMT' is not one of its values {E2M3}\n");
  EXPECT_EQ(parseErrors(withClauses("variant FMT in {E2M3} = FLOOR")),
            "t.mxk:2:27: error: default 'FLOOR' of 'FMT' is not one of its values {E2M3}\n");
  EXPECT_EQ(parseErrors(withClauses("variant EVEN in {RCEIL}")),
            "t.mxk:2:11: error: variant 'EVEN' is named like a scale mode; choose another name\n");
  EXPECT_EQ(parseErrors(withClauses("tune F in {1} variant F in {E2M3}")),
            "t.mxk:2:25: error: 'F' is already declared as a tunable\n");
  EXPECT_EQ(parseErrors(withClauses("variant T in {E2M3}")),
            "t.mxk:2:11: error: 'T' is already declared as a runtime dimension\n");
  EXPECT_EQ(parseErrors(withClauses("variant F in {E2M3} require F == 0")),
            "t.mxk:2:31: error: 'F' is a variant; constraints use only specialized sizes and "
            "tunables\n");
}

TEST(Variant, SyntaxErrors) {
  EXPECT_EQ(parseErrors(withClauses("variant FMT {E2M3}")),
            "t.mxk:2:15: error: expected 'in' after the variant name, found '{'\n");
  EXPECT_EQ(parseErrors(withClauses("variant FMT in {1, 2}")),
            "t.mxk:2:19: error: expected an identifier as a variant value, found '1'\n");
  EXPECT_EQ(parseErrors(withClauses("variant FMT in {}")),
            "t.mxk:2:19: error: expected an identifier as a variant value, found '}'\n");
  EXPECT_EQ(parseErrors(withClauses("variant FMT in {E2M3} = 0")),
            "t.mxk:2:27: error: expected an identifier as the default value, found '0'\n");
  EXPECT_EQ(parseErrors(withClauses("variant FMT in {E2M3 E3M2}")),
            "t.mxk:2:24: error: expected '}' to close the variant's values, found 'E3M2'\n");
  EXPECT_EQ(parseErrors(withClauses("variant in {E2M3}")),
            "t.mxk:2:11: error: expected an identifier as a variant name, found 'in'\n");
}

TEST(Variant, NamesAreNotValues) {
  const std::string head =
      "kernel k(x: bf16[T, 64], y: out f32[T, 64])\n"
      "  variant FMT in {E2M3}\n"
      "{\n"
      "  row t in T {\n"
      "    ";
  EXPECT_EQ(parseErrors(head + "v = FMT\n  }\n}\n"),
            "t.mxk:5:9: error: variant 'FMT' is not a value; pass it where a builtin takes a "
            "format\n");
  EXPECT_EQ(parseErrors(head + "y[t, :] = f32(x[t, :]) * E3M2\n  }\n}\n"),
            "t.mxk:5:30: error: 'E3M2' is a format name, not a value; pass it where a builtin "
            "takes a format\n");
  EXPECT_EQ(parseErrors(head + "v = sum(f32(x[t, :])) > FLOOR\n  }\n}\n"),
            "t.mxk:5:29: error: 'FLOOR' is a scale mode name, not a value; pass it where a "
            "builtin takes a scale mode\n");
  EXPECT_EQ(parseErrors(head + "FMT = 1.0\n  }\n}\n"),
            "t.mxk:5:5: error: cannot bind 'FMT': it is a variant\n");
  EXPECT_EQ(parseErrors(head + "FMT[t] = 1.0\n  }\n}\n"),
            "t.mxk:5:5: error: 'FMT' is a variant, not a tensor\n");
  // A name bound in the body may shadow a value name outside format arguments.
  EXPECT_EQ(parseErrors(head + "EVEN = 2.0\n    y[t, :] = f32(x[t, :]) * EVEN\n  }\n}\n"), "");
}

TEST(Variant, DefaultsBindTheEnumValue) {
  DiagnosticEngine diags;
  auto k = test::instantiateFirst(kVariants, diags);
  ASSERT_TRUE(k) << diags.render();
  EXPECT_EQ(k->config, (std::map<std::string, int64_t>{
                           {"D", 128}, {"FMT", 0}, {"MODE", 2}, {"K", 1}, {"L", 8}}));
}

TEST(Variant, BindsFromAConfigurationString) {
  std::string error;
  auto config = parseConfigString("FMT=E3M2,MODE=FLOOR", error);
  ASSERT_TRUE(config) << error;
  EXPECT_EQ(*config, (std::map<std::string, int64_t>{{"FMT", code(VariantKind::Format, 1)},
                                                     {"MODE", code(VariantKind::ScaleMode, 2)}}));
  DiagnosticEngine diags;
  auto k = test::instantiateFirst(kVariants, diags, *config);
  ASSERT_TRUE(k) << diags.render();
  EXPECT_EQ(k->config.at("FMT"), int64_t(kir::MxFormat::E3M2));
  EXPECT_EQ(k->config.at("MODE"), int64_t(kir::MxScaleMode::Floor));
  const kir::Op* scale = nullptr;
  for (const kir::Op& op : k->ops)
    if (op.code == kir::OpCode::MxScale) scale = &op;
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale->ival, kir::mxVariant(kir::MxFormat::E3M2, kir::MxScaleMode::Floor));

  // A kernel's config instantiates it again: enum values are accepted as such.
  DiagnosticEngine again;
  auto k2 = test::instantiateFirst(kVariants, again, k->config);
  ASSERT_TRUE(k2) << again.render();
  EXPECT_EQ(k2->config, k->config);
}

TEST(Variant, ConfigurationErrorsListTheValidNames) {
  std::string error;
  EXPECT_FALSE(parseConfigString("FMT=E4M3", error));
  EXPECT_EQ(error,
            "unknown value 'E4M3' in configuration entry 'FMT=E4M3'; values are integers or the "
            "names E2M3, E3M2, RCEIL, EVEN, FLOOR");

  auto errors = [&](const std::string& text) {
    std::string parseError;
    auto config = parseConfigString(text, parseError);
    EXPECT_TRUE(config) << parseError;
    return config ? instantiateErrors(kVariants, *config) : parseError;
  };
  EXPECT_EQ(errors("MODE=E3M2"),
            "t.mxk:3:32: error: MODE = E3M2 is not one of its values {RCEIL, EVEN, FLOOR}\n");
  EXPECT_EQ(errors("FMT=RCEIL"),
            "t.mxk:3:11: error: FMT = RCEIL is not one of its values {E2M3, E3M2}\n");
  EXPECT_EQ(errors("FMT=7"), "t.mxk:3:11: error: FMT = 7 is not one of its values {E2M3, E3M2}\n");
  EXPECT_EQ(errors("FMT=-1"),
            "t.mxk:3:11: error: FMT = -1 is not one of its values {E2M3, E3M2}\n");
  EXPECT_EQ(errors("D=E3M2"),
            "t.mxk:2:14: error: specialized size 'D' takes an integer, not the name E3M2\n");
  EXPECT_EQ(errors("K=EVEN"),
            "t.mxk:4:8: error: tunable 'K' takes an integer, not the name EVEN\n");
  EXPECT_EQ(errors("Q=EVEN"),
            "t.mxk:1:8: error: unknown configuration key 'Q' for kernel 'k'; valid keys: D, K, L, "
            "FMT, MODE\n");
  // A variant with fewer values rejects the others, whichever way they are written.
  const char* narrow =
      "kernel k(x: bf16[T, 64], s: out u8[T, 2])\n"
      "  variant M in {FLOOR}\n"
      "{\n"
      "  row t in T { s[t, :] = mx_scale(x[t, :], E2M3, M) }\n"
      "}\n";
  EXPECT_EQ(instantiateErrors(narrow, {{"M", int64_t(kir::MxScaleMode::Rceil)}}),
            "t.mxk:2:11: error: M = 0 is not one of its values {FLOOR}\n");
  EXPECT_EQ(instantiateErrors(narrow, {{"M", code(VariantKind::ScaleMode, 0)}}),
            "t.mxk:2:11: error: M = RCEIL is not one of its values {FLOOR}\n");
  EXPECT_EQ(instantiateErrors(narrow, {{"M", code(VariantKind::ScaleMode, 2)}}), "");
}

TEST(Variant, EnumerationKeepsVariantsFixed) {
  auto module = parse(kVariants);
  ASSERT_TRUE(module);
  // K in {1, 2} x L in {8, 16, 32}: every pair divides 128; the variants add no factor.
  auto configs = enumerateConfigs(*module, "k", {});
  ASSERT_EQ(configs.size(), 6u);
  for (const auto& c : configs) {
    EXPECT_EQ(c.at("FMT"), 0);
    EXPECT_EQ(c.at("MODE"), 2);
  }
  EXPECT_EQ(configs.front(), (std::map<std::string, int64_t>{
                                 {"D", 128}, {"FMT", 0}, {"MODE", 2}, {"K", 1}, {"L", 8}}));

  configs = enumerateConfigs(*module, "k", {{"FMT", code(VariantKind::Format, 1)}, {"D", 32}});
  ASSERT_EQ(configs.size(), 5u);  // K * L = 2 * 32 does not divide 32
  for (const auto& c : configs) {
    EXPECT_EQ(c.at("FMT"), 1);
    EXPECT_EQ(c.at("D"), 32);
    DiagnosticEngine diags;
    EXPECT_TRUE(instantiate(*module, "k", c, diags)) << diags.render();
  }
  EXPECT_EQ(enumerateConfigs(*module, "k", {{"MODE", int64_t(kir::MxScaleMode::Even)}}).size(), 6u);
  EXPECT_TRUE(enumerateConfigs(*module, "k", {{"MODE", code(VariantKind::Format, 0)}}).empty());
  EXPECT_TRUE(enumerateConfigs(*module, "k", {{"FMT", 5}}).empty());
  EXPECT_TRUE(enumerateConfigs(*module, "k", {{"K", 1}}).empty());  // tunables are enumerated
}

TEST(Variant, DumpedInTheAst) {
  auto module = parse(kVariants);
  ASSERT_TRUE(module);
  std::string ast = dumpAst(*module);
  EXPECT_NE(ast.find("  variant FMT in {E2M3, E3M2}\n  variant MODE in {RCEIL, EVEN, FLOOR} = "
                     "FLOOR\n"),
            std::string::npos)
      << ast;
  EXPECT_NE(ast.find("mx_scale(x[t, :], FMT, MODE)"), std::string::npos) << ast;
}

}  // namespace
}  // namespace mxfp6::frontend
