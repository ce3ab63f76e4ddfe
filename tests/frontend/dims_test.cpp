// Compile-time dimensions beyond a specialized name (kernels_dsl/README.md, "Names and sizes"):
// parenthesized expressions over specialized sizes and tunables, and tunables used as
// dimensions. Both are constants of the configuration: described by their text (constant -1)
// before instantiation, evaluated by it, never runtime dimensions, so the launch ABI is
// unchanged.
#include <gtest/gtest.h>

#include "tests/frontend/kir_checks.h"
#include "tests/frontend/test_util.h"

namespace mxfp6::frontend {
namespace {

using kir::AbiKind;
using kir::OpCode;
using test::instantiateErrors;
using test::parseErrors;

/// A row packer whose outputs are sized by expressions over C (specialized) and K (tunable).
/// `data` is on line 1, its dimension expression from column 52.
std::string packer(const std::string& dataDim = "(C * 3 / 4)",
                   const std::string& tune = "tune K in {1, 2, 4} = 2") {
  return "kernel pack(x: bf16[R, C], n: i32, data: out u8[R, " + dataDim +
         "], sc: out u8[R, (C / 32)], part: out f32[R, K, (C / K)])\n"
         "  specialize C = 128\n"
         "  " +
         tune +
         "\n"
         "{\n"
         "  row r in R {\n"
         "    v = x[r, :]\n"
         "    s = mx_scale(v, E2M3, RCEIL)\n"
         "    sc[r, :] = s\n"
         "    data[r, :] = pack6(mx_encode(v, s, E2M3))\n"
         "  }\n"
         "}\n";
}

std::vector<std::pair<AbiKind, std::string>> abiOf(const kir::Kernel& k) {
  std::vector<std::pair<AbiKind, std::string>> abi;
  for (const kir::AbiArg& a : k.abi()) abi.push_back({a.kind, a.name});
  return abi;
}

TEST(DimExpressions, DescribedByTheirTextBeforeInstantiation) {
  DiagnosticEngine diags;
  auto module = parseSource("t.mxk", packer(), diags);
  ASSERT_TRUE(module) << diags.render();
  const KernelInfo& info = module->kernels().front();
  const kir::Dim& bytes = info.params[2].dims[1];
  EXPECT_EQ(bytes.name, "(C * 3 / 4)");
  EXPECT_EQ(bytes.constant, -1);
  EXPECT_EQ(bytes.runtimeDim, -1);
  EXPECT_EQ(info.params[3].dims[1].name, "(C / 32)");
  // A tunable as a dimension: a compile-time constant like C.
  const kir::Dim& k = info.params[4].dims[1];
  EXPECT_EQ(k.name, "K");
  EXPECT_EQ(k.constant, -1);
  EXPECT_EQ(k.runtimeDim, -1);
  EXPECT_EQ(info.params[4].dims[2].name, "(C / K)");
  EXPECT_EQ(info.params[0].dims[0].runtimeDim, 0);  // R stays the only runtime dimension
  EXPECT_NE(dumpAst(*module).find("param data: out u8[R, (C * 3 / 4)]"), std::string::npos);
}

TEST(DimExpressions, EvaluatedByInstantiation) {
  DiagnosticEngine diags;
  auto k = test::instantiateFirst(packer(), diags, {{"C", 256}, {"K", 4}});
  ASSERT_TRUE(k) << diags.render();
  test::expectWellFormed(*k);
  EXPECT_EQ(k->params[2].dims[1].constant, 192);
  EXPECT_EQ(k->params[2].dims[1].runtimeDim, -1);
  EXPECT_EQ(k->params[3].dims[1].constant, 8);
  EXPECT_EQ(k->params[4].dims[1].constant, 4);
  EXPECT_EQ(k->params[4].dims[2].constant, 64);
  EXPECT_EQ(k->runtimeDims, (std::vector<std::string>{"R"}));
  std::vector<std::pair<AbiKind, std::string>> expected = {
      {AbiKind::Pointer, "x"},  {AbiKind::I32, "n"},        {AbiKind::Pointer, "data"},
      {AbiKind::Pointer, "sc"}, {AbiKind::Pointer, "part"}, {AbiKind::I64, "R"},
  };
  EXPECT_EQ(abiOf(*k), expected);
  // The packed row: a 192-byte slice with row stride 192.
  const kir::Op& store = k->ops.back();
  EXPECT_EQ(k->params[store.param].name, "data");
  EXPECT_EQ(k->ops[store.value].type, (kir::ValueType{kir::Dtype::U8, 192}));
  EXPECT_EQ(k->ops[store.strides[0]].code, OpCode::ConstInt);
  EXPECT_EQ(k->ops[store.strides[0]].ival, 192);
  std::string dump = dumpKir(*k);
  EXPECT_NE(dump.find("param data: out u8[R, (C * 3 / 4)=192]"), std::string::npos) << dump;
  EXPECT_NE(dump.find("param part: out f32[R, K=4, (C / K)=64]"), std::string::npos) << dump;
}

TEST(DimExpressions, TunableDimensionInTheBody) {
  // A tunable sizes a tensor and its ':' slice.
  std::string source =
      "kernel k(x: f32[B, P, D], y: out f32[B, P])\n"
      "  specialize D = 64\n"
      "  tune P in {2, 4} = 2\n"
      "{\n"
      "  row b in B {\n"
      "    y[b, :] = splat(sum(x[b, 0, :]), P)\n"
      "  }\n"
      "}\n";
  DiagnosticEngine diags;
  auto k = test::instantiateFirst(source, diags, {{"P", 4}});
  ASSERT_TRUE(k) << diags.render();
  test::expectWellFormed(*k);
  EXPECT_EQ(k->runtimeDims, (std::vector<std::string>{"B"}));
  EXPECT_EQ(k->params[0].dims[1].constant, 4);
  EXPECT_EQ(k->ops.back().code, OpCode::Store);
  EXPECT_EQ(k->ops[k->ops.back().value].type.length, 4);
  // x[b, 0, :]: the b stride is P * D = 256, a constant.
  const kir::Op& load = *std::find_if(k->ops.begin(), k->ops.end(),
                                      [](const kir::Op& op) { return op.code == OpCode::Load; });
  EXPECT_EQ(k->ops[load.strides[0]].ival, 256);
  EXPECT_EQ(k->ops[load.strides[1]].ival, 64);

  // Rows may also range over a compile-time size (column blocks of a specialized width).
  EXPECT_EQ(parseErrors("kernel k(x: f32[T, P]) tune P in {1} { row t in P { } }"), "");
  EXPECT_EQ(parseErrors("kernel k(x: f32[T, P], n: i32) tune P in {1} { row t in n { } }"),
            "t.mxk:1:57: error: rows range over runtime or specialized sizes, but 'n' is a scalar "
            "parameter\n");
}

TEST(DimExpressions, ASpecializedSizeUsedOnlyInAnExpressionSizesATensor) {
  EXPECT_EQ(parseErrors("kernel k(x: f32[T, (2 * D)]) specialize D = 4 { row t in T { } }"), "");
}

TEST(DimExpressions, ParseTimeErrors) {
  // The data dimension starts at column 52 (its '('); C at 53.
  EXPECT_EQ(parseErrors(packer("(R * 3 / 4)")),
            "t.mxk:1:53: error: 'R' is a runtime dimension; dimension expressions use only "
            "specialized sizes and tunables\n");
  EXPECT_EQ(parseErrors(packer("(Z + 1)")),
            "t.mxk:1:53: error: unknown name 'Z' in dimension expression\n");
  EXPECT_EQ(parseErrors(packer("(n * 2)")),
            "t.mxk:1:53: error: 'n' is a scalar parameter; dimension expressions use only "
            "specialized sizes and tunables\n");
  EXPECT_EQ(parseErrors(packer("(C * 0.75)")),
            "t.mxk:1:57: error: dimension expressions compute with integers; float literals are "
            "not allowed\n");
  EXPECT_EQ(parseErrors(packer("(max(C, 4))")),
            "t.mxk:1:53: error: dimension expressions cannot call functions or read tensors\n");
  EXPECT_EQ(parseErrors(packer("(C > 4)")),
            "t.mxk:1:52: error: a dimension expression must be an integer, such as "
            "'(C * 3 / 4)'\n");
  EXPECT_EQ(parseErrors(packer("(C * 3 / 4]")),
            "t.mxk:1:62: error: expected ')' to close the dimension expression, found ']'\n");
  EXPECT_EQ(parseErrors(packer("()")), "t.mxk:1:53: error: expected an expression, found ')'\n");
  // Strides stay names and integers.
  EXPECT_EQ(parseErrors("kernel k(x: f32[T, 4] strides((4), 1)) { row t in T { } }"),
            "t.mxk:1:31: error: expected a size name or an integer, found '('\n");
}

TEST(DimExpressions, InstantiationErrors) {
  EXPECT_EQ(instantiateErrors(packer("(C - 128)")),
            "t.mxk:1:52: error: dimension '(C - 128)' of 'data' is 0 with C = 128; a dimension "
            "must be at least 1\n");
  EXPECT_EQ(instantiateErrors(packer("(C / (K - 2))")),
            "t.mxk:1:55: error: in dimension '(C / (K - 2))' of 'data': division by zero\n");
  EXPECT_EQ(instantiateErrors(packer("(C * 4611686018427387904)")),
            "t.mxk:1:55: error: in dimension '(C * 4611686018427387904)' of 'data': integer "
            "overflow\n");
  // A dimension is a whole number of elements.
  EXPECT_EQ(instantiateErrors(packer(), {{"C", 10}, {"K", 4}}),
            "t.mxk:1:59: error: in dimension '(C * 3 / 4)' of 'data': 30 / 4 is not an "
            "integer\n"
            "t.mxk:1:83: error: in dimension '(C / 32)' of 'sc': 10 / 32 is not an integer\n"
            "t.mxk:1:114: error: in dimension '(C / K)' of 'part': 10 / 4 is not an integer\n");
  // A tunable dimension below 1.
  EXPECT_EQ(instantiateErrors(packer("(C * 3 / 4)", "tune K in {2, 0}"), {{"K", 0}}),
            "t.mxk:1:108: error: dimension 'K' of 'part' is 0; a dimension must be at least 1\n"
            "t.mxk:1:114: error: in dimension '(C / K)' of 'part': division by zero\n");
}

TEST(DimExpressions, ConfigurationsWithInvalidDimensionsAreNotEnumerated) {
  DiagnosticEngine diags;
  auto module = parseSource("t.mxk", packer("(C * 3 / 4)", "tune K in {0, 2, 3, 4}"), diags);
  ASSERT_TRUE(module) << diags.render();
  // K = 0 divides by zero and 3 does not divide 128.
  auto configs = enumerateConfigs(*module, "pack", {});
  ASSERT_EQ(configs.size(), 2u);
  EXPECT_EQ(configs[0].at("K"), 2);
  EXPECT_EQ(configs[1].at("K"), 4);
  for (const auto& config : configs) EXPECT_TRUE(instantiate(*module, "pack", config, diags));
  EXPECT_FALSE(diags.hasErrors()) << diags.render();
}

}  // namespace
}  // namespace mxfp6::frontend
