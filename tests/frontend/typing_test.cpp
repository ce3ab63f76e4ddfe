// The typing rules of kernels_dsl/README.md ("Typing") and the KIR they produce.
#include <gtest/gtest.h>

#include "tests/frontend/kir_checks.h"
#include "tests/frontend/test_util.h"

namespace mxfp6::frontend {
namespace {

using kir::Dtype;
using kir::OpCode;
using kir::ValueType;
using test::instantiateErrors;
using test::kernelWithBody;

// kernelWithBody(): x: bf16[T, D], y: out bf16[T, D], s: out f32[T], w: f32[T, 64], n: i32,
// eps: f32; D = 128. The body is line 6 and starts at column 5.

kir::Kernel lower(const std::string& source) {
  DiagnosticEngine diags;
  auto k = test::instantiateFirst(source, diags);
  EXPECT_TRUE(k.has_value()) << diags.render();
  if (!k) return {};
  test::expectWellFormed(*k);
  return std::move(*k);
}

const kir::Op& named(const kir::Kernel& k, const std::string& name) {
  for (const kir::Op& op : k.ops)
    if (op.name == name) return op;
  ADD_FAILURE() << "no op named " << name << " in\n" << dumpKir(k);
  static const kir::Op none;
  return none;
}

const kir::Op& lastStore(const kir::Kernel& k) {
  for (auto it = k.ops.rbegin(); it != k.ops.rend(); ++it)
    if (it->code == OpCode::Store) return *it;
  ADD_FAILURE() << "no store";
  static const kir::Op none;
  return none;
}

const ValueType kF32{Dtype::F32, 0};
const ValueType kI64{Dtype::I64, 0};

TEST(Typing, LiteralTakesTheOtherOperandsType) {
  kir::Kernel k = lower(kernelWithBody("v = sum(f32(x[t, :])) * 2\n    s[t] = v"));
  const kir::Op& v = named(k, "v");
  EXPECT_EQ(v.code, OpCode::Mul);
  const kir::Op& two = k.ops[v.operands[1]];
  EXPECT_EQ(two.code, OpCode::ConstFloat);
  EXPECT_EQ(two.type, kF32);
  EXPECT_EQ(two.fval, 2.0);

  k = lower(kernelWithBody("v = n + -1"));
  const kir::Op& minusOne = k.ops[named(k, "v").operands[1]];
  EXPECT_EQ(minusOne.code, OpCode::ConstInt);
  EXPECT_EQ(minusOne.type, (ValueType{Dtype::I32, 0}));
  EXPECT_EQ(minusOne.ival, -1);
  EXPECT_EQ(named(k, "v").type, (ValueType{Dtype::I32, 0}));

  k = lower(kernelWithBody("s[t] = 0"));
  EXPECT_EQ(k.ops[lastStore(k).value].code, OpCode::ConstFloat);
  EXPECT_EQ(k.ops[lastStore(k).value].type, kF32);
}

TEST(Typing, BareLiteralsAreF32AndI64) {
  kir::Kernel k = lower(kernelWithBody("a = 1 + 2.5\n    b = 3"));
  EXPECT_EQ(named(k, "a").type, kF32);
  EXPECT_EQ(k.ops[named(k, "a").operands[0]].code, OpCode::ConstFloat);
  EXPECT_EQ(named(k, "b").code, OpCode::ConstInt);
  EXPECT_EQ(named(k, "b").type, kI64);
}

TEST(Typing, FloatLiteralAgainstAnIntegerIsAnError) {
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = n * 1.5")),
            "t.mxk:6:13: error: float literal cannot be used as i32\n");
}

TEST(Typing, I32WithI64PromotesToI64) {
  kir::Kernel k = lower(kernelWithBody("v = n + t"));
  const kir::Op& v = named(k, "v");
  EXPECT_EQ(v.type, kI64);
  const kir::Op& widened = k.ops[v.operands[0]];
  EXPECT_EQ(widened.code, OpCode::Cast);
  EXPECT_EQ(k.ops[widened.operands[0]].code, OpCode::ScalarArg);
  EXPECT_EQ(k.ops[v.operands[1]].code, OpCode::RowIndex);
}

TEST(Typing, FloatWithIntegerIsAnError) {
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = eps + t")),
            "t.mxk:6:13: error: cannot mix f32 and i64 in '+'; convert one side first\n");
}

TEST(Typing, ScalarsBroadcastOverVectors) {
  kir::Kernel k = lower(kernelWithBody("v = eps * f32(x[t, :])"));
  EXPECT_EQ(named(k, "v").type, (ValueType{Dtype::F32, 128}));
}

TEST(Typing, Builtins) {
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = min(eps)")),
            "t.mxk:6:9: error: min takes 2 arguments, got 1\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = f32(eps, eps)")),
            "t.mxk:6:9: error: f32 takes 1 argument, got 2\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = sum(eps)")),
            "t.mxk:6:9: error: sum reduces a row vector, but its argument is a scalar f32\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = group_sum(eps)")),
            "t.mxk:6:9: error: group_sum takes 2 arguments, got 1\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = sqrt(n)")),
            "t.mxk:6:9: error: sqrt needs a float operand, got i32; convert with f32(...)\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = exp(x[t, 0])")),
            "t.mxk:6:9: error: arithmetic on bf16 needs f32(...) first\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = mean(i32(w[t, :]))")),
            "t.mxk:6:9: error: mean needs a float vector, got i32x64\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = f32(eps > 0.0)")),
            "t.mxk:6:9: error: cannot convert bool to f32\n");
}

TEST(Typing, CastToTheSameTypeEmitsNothing) {
  kir::Kernel k = lower(kernelWithBody("v = f32(eps)"));
  ASSERT_EQ(k.ops.size(), 1u);
  EXPECT_EQ(k.ops[0].code, OpCode::ScalarArg);
}

TEST(Typing, ReductionsAndMean) {
  kir::Kernel k = lower(kernelWithBody(
      "a = max_of(w[t, :])\n    b = min_of(w[t, :])\n    m = mean(w[t, :])\n    z = sqrt(2)"));
  EXPECT_EQ(named(k, "a").code, OpCode::ReduceMax);
  EXPECT_EQ(named(k, "b").code, OpCode::ReduceMin);
  const kir::Op& m = named(k, "m");
  EXPECT_EQ(m.code, OpCode::Div);
  EXPECT_EQ(m.type, kF32);
  EXPECT_EQ(k.ops[m.operands[0]].code, OpCode::ReduceSum);
  EXPECT_EQ(k.ops[m.operands[1]].fval, 64.0);
  EXPECT_EQ(k.ops[named(k, "z").operands[0]].type, kF32);
}

TEST(Typing, ConditionsAndSelect) {
  kir::Kernel k = lower(kernelWithBody("s[t] = eps > 0.0 && n != 0 ? eps : 0.0"));
  const kir::Op& select = k.ops[lastStore(k).value];
  EXPECT_EQ(select.code, OpCode::Select);
  EXPECT_EQ(select.type, kF32);
  const kir::Op& cond = k.ops[select.operands[0]];
  EXPECT_EQ(cond.code, OpCode::And);
  EXPECT_EQ(cond.type, (ValueType{Dtype::Bool, 0}));
  EXPECT_EQ(k.ops[cond.operands[1]].code, OpCode::CmpNe);

  k = lower(kernelWithBody("y[t, :] = f32(x[t, :]) > 0.0 ? x[t, :] : 0.0"));
  EXPECT_EQ(k.ops[lastStore(k).value].type, (ValueType{Dtype::BF16, 128}));

  EXPECT_EQ(instantiateErrors(kernelWithBody("v = eps && n")),
            "t.mxk:6:13: error: '&&' needs conditions (bool), got f32\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = !eps")),
            "t.mxk:6:9: error: '!' needs conditions (bool), got f32\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = n > 0 ? eps : n")),
            "t.mxk:6:15: error: cannot mix f32 and i32 in '?:'; convert one side first\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = eps ? 1.0 : 2.0")),
            "t.mxk:6:13: error: the condition of '?' must be bool, got f32\n");
}

TEST(Typing, LoadsAndStores) {
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = y[t, :]")),
            "t.mxk:6:9: error: cannot load from output tensor 'y'\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("x[t, :] = x[t, :]")),
            "t.mxk:6:5: error: cannot store into 'x': it is not declared 'out'\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = x[t]")),
            "t.mxk:6:9: error: tensor 'x' has rank 2 but is indexed with 1 index\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = x[eps, :]")),
            "t.mxk:6:11: error: an index of 'x' must be an integer, got f32\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("v = x[t, 0.5]")),
            "t.mxk:6:14: error: an index of 'x' must be an integer, got a float literal\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("y[t, :] = bf16(eps)")),
            "t.mxk:6:5: error: storing a scalar into a ':' slice of 'y' needs a row vector of 128 "
            "elements\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("s[t] = f32(x[t, :])")),
            "t.mxk:6:5: error: storing a row vector into one element of 's'\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("s[t] = n")),
            "t.mxk:6:5: error: storing i32 into f32 tensor 's' needs f32(...)\n");

  kir::Kernel k = lower(kernelWithBody("y[t, n] = x[t, 3]"));
  const kir::Op& store = lastStore(k);
  EXPECT_EQ(k.ops[store.value].code, OpCode::Load);
  EXPECT_EQ(k.ops[store.value].type, (ValueType{Dtype::BF16, 0}));
  EXPECT_EQ(k.ops[store.operands[1]].code, OpCode::Cast);  // i32 index widened to i64
}

TEST(Typing, SliceRules) {
  // Several slices read a row-major tile.
  EXPECT_EQ(instantiateErrors("kernel k(m: f32[T, 4, 1], o: out f32[T]) {\n  row t in T {\n"
                              "    o[t] = sum(m[t, :, :])\n  }\n}\n"),
            "");
  EXPECT_EQ(instantiateErrors("kernel k(a: f32[T, 8], o: out f32[T, 4]) {\n  row t in T {\n"
                              "    o[t, :] = a[t, :]\n  }\n}\n"),
            "t.mxk:3:5: error: length mismatch: storing 8 elements into a slice of 4\n");
  // A slice may have any stride (the GPU then accesses it element by element).
  EXPECT_EQ(instantiateErrors("kernel k(q: f32[T, 8] strides(s, s), s: i64, o: out f32[T]) {\n"
                              "  row t in T {\n    o[t] = sum(q[t, :])\n  }\n}\n"),
            "");
  EXPECT_EQ(instantiateErrors("kernel k(q: f32[T, 8], o: out f32[T]) {\n"
                              "  row t in T {\n    o[t] = sum(q[t, :, 0])\n  }\n}\n"),
            "t.mxk:3:16: error: tensor 'q' has rank 2 but is indexed with 3 indices\n");
  // start : n
  const char* range = "kernel k(q: f32[T, 8], o: out f32[T, 4], n: i64) {\n  row t in T {\n    o[t, :] = q[t, %s]\n  }\n}\n";
  auto withRange = [&](const char* index) {
    char text[256];
    std::snprintf(text, sizeof text, range, index);
    return instantiateErrors(text);
  };
  EXPECT_EQ(withRange("2 : 4"), "");
  EXPECT_EQ(withRange("t % 2 == 0 ? 0 : 4 : 4"), "");
  char parsed[256];
  std::snprintf(parsed, sizeof parsed, range, "0 : n");
  EXPECT_EQ(test::parseErrors(parsed),
            "t.mxk:3:24: error: 'n' is a scalar parameter; dimension expressions use only specialized "
            "sizes and tunables\n");
  EXPECT_EQ(withRange("0 : 9"),
            "t.mxk:3:24: error: a slice of 9 elements exceeds dimension '8' of 'q' (8)\n");
  EXPECT_EQ(withRange("0 : 0"),
            "t.mxk:3:24: error: a slice length must be at least 1, got 0\n");
  EXPECT_EQ(withRange("0 : 2"),
            "t.mxk:3:5: error: length mismatch: storing 2 elements into a slice of 4\n");
}

TEST(Typing, GatherRules) {
  // One integer vector index of a load: its length times the slices' elements.
  const char* gather =
      "kernel k(tab: f32[S, 8], o: out f32[T, 32]) {\n  row t in T {\n    %s\n  }\n}\n";
  auto body = [&](const char* line) {
    char text[256];
    std::snprintf(text, sizeof text, gather, line);
    return instantiateErrors(text);
  };
  EXPECT_EQ(body("o[t, :] = tab[(t + iota(4)) % S, :]"), "");
  EXPECT_EQ(body("o[t, :] = tab[iota(4), 0 : 8]"), "");
  EXPECT_EQ(body("o[t, 0 : 8] = tab[iota(1) + t, :]"), "");
  EXPECT_EQ(body("o[t, :] = tab[f32(iota(4)), :]"),
            "t.mxk:3:19: error: an index of 'tab' must be an integer, got f32x4\n");
  EXPECT_EQ(body("o[iota(2), :] = tab[0, 0 : 8] + tab[1, 0 : 8]"),
            "t.mxk:3:7: error: an index of 'o' must be a scalar, got i64x2\n");
}

TEST(Strides, RowMajorWithARuntimeInnerSizeIsComputedOnce) {
  kir::Kernel k = lower(
      "kernel k(a: f32[T, H, 128], o: out f32[T, H]) {\n"
      "  row t, h in T, H {\n"
      "    o[t, h] = sum(a[t, h, :]) + max_of(a[t, h, :])\n"
      "  }\n}\n");
  EXPECT_EQ(k.rowVars, (std::vector<std::string>{"t", "h"}));
  EXPECT_EQ(k.rowDims, (std::vector<int>{0, 1}));
  EXPECT_EQ(k.runtimeDimUsedByBody, (std::vector<bool>{true, true}));
  std::vector<const kir::Op*> loads;
  int muls = 0;
  for (const kir::Op& op : k.ops) {
    if (op.code == OpCode::Load) loads.push_back(&op);
    muls += op.code == OpCode::Mul;
  }
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_EQ(loads[0]->strides, loads[1]->strides);
  EXPECT_EQ(muls, 1);
  const kir::Op& outer = k.ops[loads[0]->strides[0]];
  EXPECT_EQ(outer.code, OpCode::Mul);
  EXPECT_EQ(k.ops[outer.operands[0]].ival, 128);
  EXPECT_EQ(k.ops[outer.operands[1]].code, OpCode::DimArg);
  EXPECT_EQ(k.ops[loads[0]->strides[1]].ival, 128);
  EXPECT_EQ(k.ops[loads[0]->strides[2]].ival, 1);
  const kir::Op& store = lastStore(k);
  EXPECT_EQ(k.ops[store.strides[0]].code, OpCode::DimArg);
  EXPECT_EQ(k.ops[store.strides[0]].ival, 1);
  ASSERT_EQ(k.abi().size(), 4u);
  EXPECT_EQ(k.abi()[2].name, "T");
  EXPECT_EQ(k.abi()[3].name, "H");
}

TEST(Strides, ADimensionNeededOnlyForAStrideIsPassed) {
  kir::Kernel k = lower(
      "kernel k(a: f32[T, H, 4], b: f32[B, 4], o: out f32[T]) {\n"
      "  row t in T {\n    o[t] = sum(a[t, 0, :])\n  }\n}\n");
  EXPECT_EQ(k.runtimeDims, (std::vector<std::string>{"T", "H", "B"}));
  EXPECT_EQ(k.runtimeDimUsedByBody, (std::vector<bool>{true, true, false}));
}

TEST(Strides, ExplicitStridesUseTheScalarWidenedToI64) {
  kir::Kernel k = lower(
      "kernel k(q: bf16[T, 128] strides(st, 1), st: i32, o: out f32[T]) {\n"
      "  row t in T {\n    o[t] = sum(f32(q[t, :]))\n  }\n}\n");
  const kir::Op* load = nullptr;
  for (const kir::Op& op : k.ops)
    if (op.code == OpCode::Load) load = &op;
  ASSERT_NE(load, nullptr);
  const kir::Op& outer = k.ops[load->strides[0]];
  EXPECT_EQ(outer.code, OpCode::Cast);
  EXPECT_EQ(k.ops[outer.operands[0]].code, OpCode::ScalarArg);
  EXPECT_EQ(k.ops[outer.operands[0]].param, 1);
  EXPECT_EQ(k.ops[load->strides[1]].ival, 1);
  EXPECT_EQ(k.runtimeDims, (std::vector<std::string>{"T"}));
}

TEST(Kir, OpsCarryTheirNameAndLocation) {
  kir::Kernel k = lower(kernelWithBody("d = f32(x[t, :]) - eps"));
  const kir::Op& d = named(k, "d");
  EXPECT_EQ(d.code, OpCode::Sub);
  EXPECT_EQ(d.loc.file, "t.mxk");
  EXPECT_EQ(d.loc.line, 6);
  EXPECT_EQ(d.loc.col, 22);
  const kir::Op& t = named(k, "t");
  EXPECT_EQ(t.code, OpCode::RowIndex);
  EXPECT_EQ(t.loc.line, 5);
  EXPECT_EQ(t.loc.col, 7);
}

TEST(Kir, ScheduleDefaultsToOneWithoutTunables) {
  kir::Kernel k = lower(kernelWithBody("s[t] = eps"));
  EXPECT_EQ(k.rowsPerProgram, 1);
  EXPECT_EQ(k.threadsPerRow, 1);
  EXPECT_EQ(k.vectorWidth, 1);
  EXPECT_EQ(k.config, (std::map<std::string, int64_t>{{"D", 128}}));
}

}  // namespace
}  // namespace mxfp6::frontend
