// The first real kernel, kernels_dsl/ln_modulate.mxk: it parses, instantiates at its default
// configuration and at every configuration the tuner would enumerate, with the launch ABI and
// the KIR that the interpreter and the code generator rely on.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "tests/frontend/kir_checks.h"
#include "tests/frontend/test_util.h"

namespace mxfp6::frontend {
namespace {

using kir::AbiKind;
using kir::Dtype;
using kir::OpCode;

class LnModulateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = parseFile(test::kLnModulatePath, diags_);
    ASSERT_TRUE(m.has_value()) << diags_.render();
    module_ = std::make_unique<Module>(std::move(*m));
  }

  kir::Kernel instantiateAt(const std::map<std::string, int64_t>& config) {
    auto k = instantiate(*module_, "ln_modulate_fwd", config, diags_);
    EXPECT_TRUE(k.has_value()) << diags_.render();
    return k ? std::move(*k) : kir::Kernel{};
  }

  DiagnosticEngine diags_;
  std::unique_ptr<Module> module_;
};

TEST_F(LnModulateTest, DescribesItsDeclarations) {
  const KernelInfo* info = module_->findKernel("ln_modulate_fwd");
  ASSERT_NE(info, nullptr);
  ASSERT_EQ(info->params.size(), 8u);
  EXPECT_EQ(info->params[0].name, "x");
  EXPECT_EQ(info->params[3].name, "y");
  EXPECT_TRUE(info->params[3].isOutput);
  EXPECT_EQ(info->params[6].name, "sample_div");
  EXPECT_EQ(info->params[7].name, "eps");
  EXPECT_TRUE(info->params[7].hasDefault);
  EXPECT_DOUBLE_EQ(info->params[7].defaultValue, 1e-6);
  // Before specialization D has no value yet; T is runtime dim 0, B runtime dim 1.
  EXPECT_EQ(info->params[0].dims[0].runtimeDim, 0);
  EXPECT_EQ(info->params[0].dims[1].constant, -1);
  EXPECT_EQ(info->params[1].dims[0].runtimeDim, 1);

  ASSERT_EQ(info->specializations.size(), 1u);
  EXPECT_EQ(info->specializations[0].name, "D");
  EXPECT_EQ(info->specializations[0].defaultValue, 3072);
  ASSERT_EQ(info->tunables.size(), 6u);
  EXPECT_EQ(info->tunables[1].name, "THREADS");
  EXPECT_EQ(info->tunables[1].values, (std::vector<int64_t>{128, 192, 256, 384, 512, 768}));
  EXPECT_EQ(info->tunables[1].defaultValue, 384);
  EXPECT_EQ(info->tunables[3].name, "SERIAL");
  EXPECT_EQ(info->tunables[4].name, "ASYNC");
  EXPECT_EQ(info->tunables[4].defaultValue, 0);
  EXPECT_EQ(info->tunables[5].name, "ANCHOR");
  EXPECT_EQ(info->tunables[5].values, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(info->tunables[5].defaultValue, 0);
  ASSERT_EQ(info->constraints.size(), 4u);
  EXPECT_EQ(info->constraints[0].text, "D % (THREADS * VEC) == 0");
  EXPECT_EQ(info->constraints[0].message, "each thread holds whole vectors of the row");
  EXPECT_EQ(info->constraints[1].text, "ROWS * THREADS <= 1024");
  EXPECT_EQ(info->constraints[2].text, "ASYNC == 0 || SERIAL > 1");
}

TEST_F(LnModulateTest, DefaultConfigurationHasTheLaunchAbi) {
  kir::Kernel k = instantiateAt({});
  test::expectWellFormed(k);
  EXPECT_EQ(k.config, (std::map<std::string, int64_t>{
                          {"ANCHOR", 0}, {"ASYNC", 0}, {"D", 3072}, {"ROWS", 1}, {"SERIAL", 1}, {"THREADS", 384},
                          {"VEC", 8}}));
  EXPECT_EQ(k.rowsPerProgram, 1);
  EXPECT_EQ(k.threadsPerRow, 384);
  EXPECT_EQ(k.vectorWidth, 8);
  EXPECT_EQ(k.rowVars, (std::vector<std::string>{"t"}));
  EXPECT_EQ(k.rowDims, (std::vector<int>{0}));
  EXPECT_EQ(k.runtimeDims, (std::vector<std::string>{"T", "B"}));
  EXPECT_EQ(k.runtimeDimUsedByBody, (std::vector<bool>{true, true}));
  EXPECT_EQ(k.params[0].dims[1].constant, 3072);

  std::vector<std::pair<AbiKind, std::string>> abi;
  for (const kir::AbiArg& a : k.abi()) abi.push_back({a.kind, a.name});
  std::vector<std::pair<AbiKind, std::string>> expected = {
      {AbiKind::Pointer, "x"},
      {AbiKind::Pointer, "scale"},
      {AbiKind::Pointer, "shift"},
      {AbiKind::Pointer, "y"},
      {AbiKind::Pointer, "mean"},
      {AbiKind::Pointer, "rstd"},
      {AbiKind::I32, "sample_div"},
      {AbiKind::F32, "eps"},
      {AbiKind::I64, "T"},
      {AbiKind::I64, "B"},
  };
  EXPECT_EQ(abi, expected);
  EXPECT_EQ(k.abi()[8].runtimeDim, 0);
  EXPECT_EQ(k.abi()[8].param, -1);
  EXPECT_EQ(k.abi().back().runtimeDim, 1);
  EXPECT_EQ(k.abi().back().param, -1);
  EXPECT_EQ(k.abi()[6].param, 6);
}

TEST_F(LnModulateTest, KirHasTheExpectedOps) {
  kir::Kernel k = instantiateAt({});
  std::multiset<OpCode> codes;
  for (const kir::Op& op : k.ops) codes.insert(op.code);
  EXPECT_EQ(codes.count(OpCode::Load), 3u);   // x, scale, shift rows
  EXPECT_EQ(codes.count(OpCode::Store), 3u);  // y row, mean, rstd
  EXPECT_EQ(codes.count(OpCode::ReduceSum), 2u);
  EXPECT_EQ(codes.count(OpCode::Rsqrt), 1u);
  EXPECT_EQ(codes.count(OpCode::RowIndex), 1u);
  EXPECT_EQ(codes.count(OpCode::ScalarArg), 2u);
  EXPECT_EQ(codes.count(OpCode::DimArg), 1u);  // B; D is constant and T only counts rows
  EXPECT_EQ(codes.count(OpCode::Rem), 1u);

  // `mean(` is the builtin and `mean[` the output tensor.
  const kir::Op* storeMean = nullptr;
  for (const kir::Op& op : k.ops)
    if (op.code == OpCode::Store && k.params[op.param].name == "mean") storeMean = &op;
  ASSERT_NE(storeMean, nullptr);
  const kir::Op& mu = k.ops[storeMean->value];
  EXPECT_EQ(mu.code, OpCode::Div);
  EXPECT_EQ(mu.name, "mu@1");  // the first call's `mu` of the fn ln_modulate_row
  EXPECT_EQ(k.ops[mu.operands[0]].code, OpCode::ReduceSum);
  EXPECT_EQ(k.ops[mu.operands[1]].code, OpCode::ConstFloat);
  EXPECT_EQ(k.ops[mu.operands[1]].fval, 3072.0);

  // y[t, :] = bf16(...): one rounding of an f32 row vector, stored with row-major strides.
  auto firstStore = std::find_if(k.ops.begin(), k.ops.end(),
                                 [](const kir::Op& op) { return op.code == OpCode::Store; });
  ASSERT_NE(firstStore, k.ops.end());
  const kir::Op& storeY = *firstStore;
  EXPECT_EQ(k.params[storeY.param].name, "y");
  EXPECT_EQ(storeY.operands[1], -1);
  const kir::Op& rounded = k.ops[storeY.value];
  EXPECT_EQ(rounded.code, OpCode::Cast);
  EXPECT_EQ(rounded.type, (kir::ValueType{Dtype::BF16, 3072}));
  EXPECT_EQ(k.ops[rounded.operands[0]].type, (kir::ValueType{Dtype::F32, 3072}));
  EXPECT_EQ(k.ops[storeY.strides[0]].code, OpCode::ConstInt);
  EXPECT_EQ(k.ops[storeY.strides[0]].ival, 3072);
  EXPECT_EQ(k.ops[storeY.strides[1]].ival, 1);

  // b = (t / sample_div) % B, computed once: i64 division of the row index by the widened i32
  // scalar, then the i64 remainder by the runtime dim B.
  auto b =
      std::find_if(k.ops.begin(), k.ops.end(), [](const kir::Op& op) { return op.name == "b@1"; });
  ASSERT_NE(b, k.ops.end());
  EXPECT_EQ(b->code, OpCode::Rem);
  EXPECT_EQ(b->type, (kir::ValueType{Dtype::I64, 0}));
  const kir::Op& quotient = k.ops[b->operands[0]];
  EXPECT_EQ(quotient.code, OpCode::Div);
  EXPECT_EQ(quotient.type, (kir::ValueType{Dtype::I64, 0}));
  EXPECT_EQ(k.ops[quotient.operands[0]].code, OpCode::RowIndex);
  EXPECT_EQ(k.ops[quotient.operands[1]].code, OpCode::Cast);
  EXPECT_EQ(k.ops[k.ops[quotient.operands[1]].operands[0]].code, OpCode::ScalarArg);
  EXPECT_EQ(k.params[k.ops[k.ops[quotient.operands[1]].operands[0]].param].name, "sample_div");
  const kir::Op& samples = k.ops[b->operands[1]];
  EXPECT_EQ(samples.code, OpCode::DimArg);
  EXPECT_EQ(samples.type, (kir::ValueType{Dtype::I64, 0}));
  EXPECT_EQ(k.runtimeDims[samples.ival], "B");

  // Each distinct stride is computed once for the whole kernel.
  int constInts = 0;
  for (const kir::Op& op : k.ops) constInts += op.code == OpCode::ConstInt;
  EXPECT_EQ(constInts, 2);  // 3072 and 1
}

TEST_F(LnModulateTest, DumpShowsOneOpPerLine) {
  std::string text = dumpKir(instantiateAt({}));
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\n  %\d+ = Sub f32x3072 %\d+, %\d+  ; d@1\n)")))
      << text;
  EXPECT_TRUE(
      std::regex_search(text, std::regex(R"(\n  Store f32 @mean\[%0\] strides\(%\d+\), %\d+\n)")))
      << text;
  EXPECT_NE(dumpAst(*module_).find("y[t, :] = bf16("), std::string::npos);
}

/// How many configurations of ln_modulate_fwd the constraints allow at row width D, counted
/// independently over the declared candidate sets (ANCHOR, which no constraint names, doubles it).
size_t configCount(int64_t D) {
  size_t count = 0;
  for (int64_t rows : {1, 2, 4})
    for (int64_t threads : {128, 192, 256, 384, 512, 768})
      for (int64_t vec : {2, 4, 8})
        for (int64_t serial : {1, 4, 8})
          for (int64_t async : {0, 1, 2})
            count += D % (threads * vec) == 0 && rows * threads <= 1024 && (async == 0 || serial > 1) &&
                     rows * D * 2 * (async + 1) <= 45056;
  return 2 * count;
}

TEST_F(LnModulateTest, EveryEnumeratedConfigurationInstantiates) {
  auto configs = enumerateConfigs(*module_, "ln_modulate_fwd", {});
  EXPECT_EQ(configs.size(), configCount(3072));
  // By hand: 14, 12 and 8 (ROWS, THREADS, VEC) schedules at ROWS = 1, 2, 4; seven (SERIAL, ASYNC)
  // pairs each at ROWS = 1 and 2, three at ROWS = 4 (no room in shared memory for copies ahead);
  // each with ANCHOR = 0 and 1.
  EXPECT_EQ(configs.size(), 2 * (14u * 7 + 12 * 7 + 8 * 3));
  for (const auto& config : configs) {
    kir::Kernel k = instantiateAt(config);
    test::expectWellFormed(k);
    EXPECT_EQ(k.config, config);
    EXPECT_EQ(k.rowsPerProgram, config.at("ROWS"));
    EXPECT_EQ(k.threadsPerRow, config.at("THREADS"));
    EXPECT_EQ(k.vectorWidth, config.at("VEC"));
  }
  // First tunable varies slowest.
  EXPECT_EQ(configs.front().at("ROWS"), 1);
  EXPECT_EQ(configs.back().at("ROWS"), 4);
}

TEST_F(LnModulateTest, EnumerationFollowsTheSpecializedSize) {
  auto configs = enumerateConfigs(*module_, "ln_modulate_fwd", {{"D", 1024}});
  EXPECT_EQ(configs.size(), configCount(1024));
  for (const auto& config : configs) EXPECT_EQ(config.at("D"), 1024);
  kir::Kernel k = instantiateAt(configs.front());
  EXPECT_EQ(k.params[0].dims[1].constant, 1024);
}

}  // namespace
}  // namespace mxfp6::frontend
