// Interpreter semantics on small hand-built kernels: accesses outside a tensor and integer errors
// are reported (with source position, tensor, indices and row), never undefined behaviour; integer
// math is exact and truncating; float math is fp64 with one rounding at the store; reductions run in
// ascending order; NaN propagates through min/max.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "compiler/interp/float_formats.h"
#include "compiler/interp/interpreter.h"
#include "tests/interp/kir_builder.h"
#include "tests/interp/dsl_test_util.h"

namespace mxfp6::interp {
namespace {

using ::testing::HasSubstr;
using testing::KirBuilder;
using kir::Dtype;
using kir::OpCode;
constexpr int kColon = KirBuilder::kColon;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// shifted_copy(x: f32[T, 4], y: out f32[T, 4]) { row t in T { y[t, :] = x[t + delta, :] } }
kir::Kernel shiftedCopy(int64_t delta) {
  KirBuilder b("shifted_copy", "oob.mxk");
  b.tensor("x", Dtype::F32, {"T", 4});
  b.tensor("y", Dtype::F32, {"T", 4}, true);
  b.rows({"t"}, {"T"});
  b.at(3, 5);
  const int four = b.constInt(4), one = b.constInt(1);
  const int t = b.rowIndex(0);
  b.at(3, 14);
  const int src = b.op(OpCode::Add, {t, b.constInt(delta)});
  const int row = b.load(0, {src, kColon}, {four, one});
  b.at(3, 5);
  b.store(1, {t, kColon}, {four, one}, row);
  return b.take();
}

TEST(Interpreter, IndexPastTheEndIsAnError) {
  const kir::Kernel k = shiftedCopy(1);
  std::vector<float> x(16), y(16, -1.0f);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i);
  std::vector<Arg> args = {view(x, Dtype::F32, {4, 4}), view(y, Dtype::F32, {4, 4})};
  const Status st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(),
              HasSubstr("oob.mxk:3:14: error: load from 'x' out of bounds at x[4, :]: index 4 of "
                        "dim 0 (T) is outside [0, 4)"));
  EXPECT_THAT(st.message(), HasSubstr("row t=3"));
  // Rows before the failing one ran.
  EXPECT_EQ(y[0], 4.0f);
  EXPECT_EQ(y[11], 15.0f);
  EXPECT_EQ(y[12], -1.0f);
}

TEST(Interpreter, NegativeIndexIsAnError) {
  const kir::Kernel k = shiftedCopy(-1);
  std::vector<float> x(16), y(16);
  std::vector<Arg> args = {view(x, Dtype::F32, {4, 4}), view(y, Dtype::F32, {4, 4})};
  const Status st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("x[-1, :]: index -1 of dim 0 (T) is outside [0, 4)"));
  EXPECT_THAT(st.message(), HasSubstr("row t=0"));
}

TEST(Interpreter, OffsetPastTheExtentIsAnError) {
  // x: f32[T, 4] strides(xs, 1), a view whose rows are xs = 8 elements apart; the caller's buffer
  // holds only 26 elements past x's first element, so row 3 (offsets 24..27) leaves it.
  KirBuilder b("strided", "stride.mxk");
  b.tensor("x", Dtype::F32, {"T", 4});
  b.tensor("y", Dtype::F32, {"T", 4}, true);
  const int xs = b.scalar("xs", Dtype::I64);
  b.rows({"t"}, {"T"});
  b.at(7, 9);
  const int four = b.constInt(4), one = b.constInt(1), t = b.rowIndex(0);
  const int row = b.load(0, {t, kColon}, {b.scalarArg(xs), one});
  b.store(1, {t, kColon}, {four, one}, row);
  const kir::Kernel k = b.take();

  std::vector<float> buf(32), y(16);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<float>(i);
  std::vector<Arg> args = {TensorArg{buf.data(), Dtype::F32, {4, 4}, 26},
                           view(y, Dtype::F32, {4, 4}), int64_t{8}};
  Status st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("stride.mxk:7:9: error: load from 'x' out of bounds at "
                                      "x[3, :]: linear offsets 24..27 outside the extent [0, 26)"));
  EXPECT_THAT(st.message(), HasSubstr("row t=3"));
  EXPECT_EQ(y[8], 16.0f);  // row 2 read offsets 16..19

  std::get<TensorArg>(args[0]).extentElements = 28;
  st = run(k, args);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(y[12], 24.0f);
  EXPECT_EQ(y[15], 27.0f);
}

TEST(Interpreter, StorePastTheExtentIsAnError) {
  const kir::Kernel k = shiftedCopy(0);
  std::vector<float> x(16), y(16);
  std::vector<Arg> args = {view(x, Dtype::F32, {4, 4}),
                           TensorArg{y.data(), Dtype::F32, {4, 4}, 15}};
  const Status st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("oob.mxk:3:5: error: store to 'y' out of bounds at y[3, :]: "
                                      "linear offsets 12..15 outside the extent [0, 15)"));
}

/// int_ops(y: out i32[T], q: out i32[T], k: i32) { row t in T { y[t] = (t - 7) / k; q[t] = (t - 7) % k } }
kir::Kernel intOps() {
  KirBuilder b("int_ops", "div.mxk");
  b.tensor("y", Dtype::I32, {"T"}, true);
  b.tensor("q", Dtype::I32, {"T"}, true);
  const int kParam = b.scalar("k", Dtype::I32);
  b.rows({"t"}, {"T"});
  const int one = b.constInt(1);
  const int t = b.rowIndex(0);
  const int a = b.op(OpCode::Sub, {t, b.constInt(7)});
  const int k = b.cast(b.scalarArg(kParam), Dtype::I64);
  b.at(4, 12);
  const int quo = b.cast(b.op(OpCode::Div, {a, k}), Dtype::I32);
  b.at(5, 12);
  const int rem = b.cast(b.op(OpCode::Rem, {a, k}), Dtype::I32);
  b.store(0, {t}, {one}, quo);
  b.store(1, {t}, {one}, rem);
  return b.take();
}

TEST(Interpreter, IntegerDivisionTruncates) {
  const kir::Kernel k = intOps();
  std::vector<int32_t> y(10), q(10);
  std::vector<Arg> args = {view(y, Dtype::I32, {10}), view(q, Dtype::I32, {10}), int64_t{2}};
  ASSERT_TRUE(run(k, args).isOk());
  EXPECT_EQ(y, (std::vector<int32_t>{-3, -3, -2, -2, -1, -1, 0, 0, 0, 1}));
  EXPECT_EQ(q, (std::vector<int32_t>{-1, 0, -1, 0, -1, 0, -1, 0, 1, 0}));
}

TEST(Interpreter, IntegerDivisionByZeroIsAnError) {
  const kir::Kernel k = intOps();
  std::vector<int32_t> y(3), q(3);
  std::vector<Arg> args = {view(y, Dtype::I32, {3}), view(q, Dtype::I32, {3}), int64_t{0}};
  const Status st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("div.mxk:4:12: error: integer division of -7 by zero"));
  EXPECT_THAT(st.message(), HasSubstr("row t=0"));
}

TEST(Interpreter, IntegerRemainderByZeroIsAnError) {
  kir::Kernel k = intOps();
  // Drop the division so the remainder is the first to fail.
  for (kir::Op& op : k.ops)
    if (op.code == OpCode::Div) op.code = OpCode::Add;
  std::vector<int32_t> y(3), q(3);
  std::vector<Arg> args = {view(y, Dtype::I32, {3}), view(q, Dtype::I32, {3}), int64_t{0}};
  const Status st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("div.mxk:5:12: error: integer remainder of -7 by zero"));
}

TEST(Interpreter, IntegerResultOutsideItsTypeIsAnError) {
  KirBuilder b("overflow", "ovf.mxk");
  b.tensor("y", Dtype::I32, {"T"}, true);
  b.rows({"t"}, {"T"});
  const int one = b.constInt(1), t = b.rowIndex(0);
  b.at(2, 3);
  const int big = b.op(OpCode::Mul, {b.constInt(1 << 30, Dtype::I32), b.constInt(4, Dtype::I32)});
  b.store(0, {t}, {one}, big);
  std::vector<int32_t> y(1);
  std::vector<Arg> args = {view(y, Dtype::I32, {1})};
  Status st = run(b.kernel(), args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("ovf.mxk:2:3: error: result 4294967296 does not fit i32"));

  // int64 overflow.
  kir::Kernel k = b.take();
  k.ops[big].type.elem = Dtype::I64;
  k.ops[big - 2].type.elem = Dtype::I64;
  k.ops[big - 2].ival = int64_t{1} << 62;
  st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("int64 overflow in Mul of 4611686018427387904 and 4"));
}

/// store_value(y: out <dtype>[1]) { row t in T { y[t] = <value> } } with fp64 shadow.
struct StoreResult {
  Status status;
  std::vector<uint16_t> bits16;
  std::vector<float> f32;
  std::vector<int32_t> i32;
  std::vector<double> shadow;
};

StoreResult storeValue(Dtype dtype, double value, bool castFirst) {
  KirBuilder b("store_value", "store.mxk");
  b.tensor("y", dtype, {"T"}, true);
  b.rows({"t"}, {"T"});
  const int one = b.constInt(1), t = b.rowIndex(0);
  b.at(9, 1);
  int v = b.constFloat(value);
  // A cast between float types inside the math does not round.
  if (castFirst) v = b.op(OpCode::Mul, {b.cast(v, Dtype::BF16), b.constFloat(1.0)});
  if (kir::Dtype::F32 != dtype) v = b.cast(v, dtype == Dtype::I32 ? Dtype::F32 : dtype);
  b.store(0, {t}, {one}, v);
  StoreResult r;
  r.bits16.assign(2, 0);
  r.f32.assign(2, 0);
  r.i32.assign(2, 0);
  r.shadow.assign(2, kNaN);
  TensorArg arg;
  switch (dtype) {
    case Dtype::F32: arg = view(r.f32, dtype, {2}); break;
    case Dtype::I32: arg = view(r.i32, dtype, {2}); break;
    default: arg = view(r.bits16, dtype, {2}); break;
  }
  std::vector<Arg> args = {arg};
  RunOptions opts;
  opts.fp64Outputs[0] = &r.shadow;
  r.status = run(b.kernel(), args, opts);
  return r;
}

TEST(Interpreter, StoreRoundsOnceFromFp64) {
  const double x = 1.0 + 0x1p-8 + 0x1p-30;  // just above a bf16 tie
  StoreResult r = storeValue(Dtype::BF16, x, /*castFirst=*/true);
  ASSERT_TRUE(r.status.isOk()) << r.status.message();
  EXPECT_EQ(r.bits16[0], 0x3F81);  // rounding via float would give 0x3F80
  EXPECT_EQ(r.shadow[0], x);       // the bf16 cast inside the math did not round

  r = storeValue(Dtype::F16, 1.0 + 0x1p-11 + 0x1p-40, false);
  ASSERT_TRUE(r.status.isOk()) << r.status.message();
  EXPECT_EQ(r.bits16[0], 0x3C01);

  r = storeValue(Dtype::F32, 0.1, false);
  ASSERT_TRUE(r.status.isOk()) << r.status.message();
  EXPECT_EQ(r.f32[0], 0.1f);
  EXPECT_EQ(r.shadow[0], 0.1);

  r = storeValue(Dtype::BF16, 1e300, false);  // overflow rounds to inf, as bf16 does
  ASSERT_TRUE(r.status.isOk()) << r.status.message();
  EXPECT_EQ(r.bits16[0], 0x7F80);
}

TEST(Interpreter, StoreOfANonIntegerIntoAnIntegerTensorIsAnError) {
  // The value is cast to f32 only, so the store itself must convert 2.5 to i32.
  StoreResult r = storeValue(Dtype::I32, 2.5, false);
  ASSERT_FALSE(r.status.isOk());
  EXPECT_THAT(r.status.message(),
              HasSubstr("store.mxk:9:1: error: store to i32 tensor 'y' at y[0]: value 2.5 is not "
                        "representable"));
  r = storeValue(Dtype::I32, -3.0, false);
  ASSERT_TRUE(r.status.isOk()) << r.status.message();
  EXPECT_EQ(r.i32[0], -3);
}

/// reduce(x: f32[1, 4], s: out f32[1, 3]) { row t in T { v = x[t, :]; s = sum, max_of, min_of } }
struct ReduceResult {
  Status status;
  std::vector<double> out;
};

ReduceResult reduceRow(std::vector<float> x) {
  KirBuilder b("reduce", "reduce.mxk");
  b.tensor("x", Dtype::F32, {"T", 4});
  b.tensor("s", Dtype::F32, {"T", 3}, true);
  b.rows({"t"}, {"T"});
  const int four = b.constInt(4), three = b.constInt(3), one = b.constInt(1);
  const int t = b.rowIndex(0);
  const int v = b.load(0, {t, kColon}, {four, one});
  const int codes[] = {0, 1, 2};
  const OpCode ops[] = {OpCode::ReduceSum, OpCode::ReduceMax, OpCode::ReduceMin};
  for (int c : codes) b.store(1, {t, b.constInt(c)}, {three, one}, b.reduce(ops[c], v));
  ReduceResult r;
  std::vector<float> s(3);
  r.out.assign(3, kNaN);
  std::vector<Arg> args = {view(x, Dtype::F32, {1, 4}), view(s, Dtype::F32, {1, 3})};
  RunOptions opts;
  opts.fp64Outputs[1] = &r.out;
  r.status = run(b.kernel(), args, opts);
  return r;
}

TEST(Interpreter, ReduceSumAddsInAscendingIndexOrder) {
  // ((2^53 + 1) - 2^53) + 1 = 1 in fp64 (2^53 + 1 rounds to 2^53); descending order gives 2.
  const ReduceResult r = reduceRow({0x1p53f, 1.0f, -0x1p53f, 1.0f});
  ASSERT_TRUE(r.status.isOk()) << r.status.message();
  EXPECT_EQ(r.out[0], 1.0);
  EXPECT_EQ(r.out[1], 0x1p53);
  EXPECT_EQ(r.out[2], -0x1p53);
}

TEST(Interpreter, ReductionsPropagateNaN) {
  const ReduceResult r = reduceRow({1.0f, std::nanf(""), 3.0f, -2.0f});
  ASSERT_TRUE(r.status.isOk()) << r.status.message();
  EXPECT_TRUE(std::isnan(r.out[0]));
  EXPECT_TRUE(std::isnan(r.out[1]));
  EXPECT_TRUE(std::isnan(r.out[2]));
}

TEST(Interpreter, ElementwiseMathIsFp64WithScalarBroadcast) {
  // out[t, :] = select(x > 0 && !(x == 2), sqrt(x) + rsqrt(x), min(max(x, -1), exp(x)) ...)
  KirBuilder b("elementwise", "ew.mxk");
  b.tensor("x", Dtype::F32, {"T", 4});
  b.tensor("y", Dtype::F32, {"T", 4}, true);
  b.tensor("z", Dtype::F32, {"T", 4}, true);
  b.rows({"t"}, {"T"});
  const int four = b.constInt(4), one = b.constInt(1), t = b.rowIndex(0);
  const int x = b.load(0, {t, kColon}, {four, one});
  const int zero = b.constFloat(0.0), two = b.constFloat(2.0);
  const int cond = b.op(OpCode::And, {b.op(OpCode::CmpGt, {x, zero}, Dtype::Bool),
                                      b.op(OpCode::Not, {b.op(OpCode::CmpEq, {x, two}, Dtype::Bool)})});
  const int pos = b.op(OpCode::Add, {b.op(OpCode::Sqrt, {x}), b.op(OpCode::Rsqrt, {x})});
  const int other = b.op(OpCode::Min, {b.op(OpCode::Max, {x, b.constFloat(-1.0)}),
                                       b.op(OpCode::Exp, {x})});
  b.store(1, {t, kColon}, {four, one}, b.op(OpCode::Select, {cond, pos, other}, Dtype::F32));
  const int mag = b.op(OpCode::Abs, {b.op(OpCode::Neg, {x})});
  const int either = b.op(OpCode::Or, {b.op(OpCode::CmpLe, {x, zero}, Dtype::Bool),
                                       b.op(OpCode::CmpNe, {mag, x}, Dtype::Bool)});
  // Scalar on the left, vector on the right; Rem of floats is fmod.
  const int m = b.op(OpCode::Rem, {b.constFloat(7.5), mag});
  b.store(2, {t, kColon}, {four, one}, b.op(OpCode::Select, {either, m, b.op(OpCode::Div, {x, zero})}, Dtype::F32));
  std::vector<float> xs = {4.0f, 2.0f, -3.0f, std::nanf("")}, y(4), z(4);
  std::vector<double> y64(4), z64(4);
  std::vector<Arg> args = {view(xs, Dtype::F32, {1, 4}), view(y, Dtype::F32, {1, 4}),
                           view(z, Dtype::F32, {1, 4})};
  RunOptions opts;
  opts.fp64Outputs = {{1, &y64}, {2, &z64}};
  const Status st = run(b.kernel(), args, opts);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(y64[0], 2.0 + 0.5);
  EXPECT_EQ(y64[1], std::min(2.0, std::exp(2.0)));  // x == 2 takes the other branch
  EXPECT_EQ(y64[2], -1.0);                          // min(max(-3, -1), e^-3)
  EXPECT_TRUE(std::isnan(y64[3]));                  // NaN propagates through max and min
  EXPECT_EQ(z64[0], std::numeric_limits<double>::infinity());  // 4 / 0
  EXPECT_EQ(z64[1], std::numeric_limits<double>::infinity());
  EXPECT_EQ(z64[2], std::fmod(7.5, 3.0));  // x <= 0
  EXPECT_TRUE(std::isnan(z64[3]));         // NaN != NaN selects fmod(7.5, NaN)
  EXPECT_EQ(y[0], 2.5f);
}

TEST(Interpreter, RowVariablesIterateLastFastest) {
  // grid(y: out i32[T, H], k: i32) {
  //   row t, h in T, H { y[t, h] = i32(t * 10 + h + h / ((h - k) * (t - k))) }
  // }
  KirBuilder b("grid", "grid.mxk");
  b.tensor("y", Dtype::I32, {"T", "H"}, true);
  const int kParam = b.scalar("k", Dtype::I32);
  b.rows({"t", "h"}, {"T", "H"});
  const int one = b.constInt(1), t = b.rowIndex(0), h = b.rowIndex(1);
  const int rowStride = b.dimArg("H");
  const int k = b.cast(b.scalarArg(kParam), Dtype::I64);
  const int divisor = b.op(OpCode::Mul, {b.op(OpCode::Sub, {h, k}), b.op(OpCode::Sub, {t, k})});
  b.at(4, 20);
  const int q = b.op(OpCode::Div, {h, divisor});
  const int v = b.op(OpCode::Add, {b.op(OpCode::Add, {b.op(OpCode::Mul, {t, b.constInt(10)}), h}), q});
  b.store(0, {t, h}, {rowStride, one}, b.cast(v, Dtype::I32));
  std::vector<int32_t> y(6, -1);
  std::vector<Arg> args = {view(y, Dtype::I32, {2, 3}), int64_t{-1}};
  Status st = run(b.kernel(), args);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(y, (std::vector<int32_t>{0, 1, 2, 10, 11, 12}));
  // With k = 1 the divisor is zero on row (0, 1) and on row (1, 0): h varying fastest reaches
  // (0, 1) first; t varying fastest would reach (1, 0) first.
  args[1] = int64_t{1};
  st = run(b.kernel(), args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("grid.mxk:4:20: error: integer division of 1 by zero"));
  EXPECT_THAT(st.message(), HasSubstr("row t=0, h=1"));
}

TEST(Interpreter, NoRowsWhenAnExtentIsZero) {
  const kir::Kernel k = shiftedCopy(5);  // would be out of bounds if any row ran
  std::vector<Arg> args = {TensorArg{nullptr, Dtype::F32, {0, 4}, 0},
                           TensorArg{nullptr, Dtype::F32, {0, 4}, 0}};
  EXPECT_TRUE(run(k, args).isOk());
}

TEST(Interpreter, Fp64ShadowMustFitTheStores) {
  const kir::Kernel k = shiftedCopy(0);
  std::vector<float> x(8), y(8);
  std::vector<Arg> args = {view(x, Dtype::F32, {2, 4}), view(y, Dtype::F32, {2, 4})};
  std::vector<double> shadow(6);
  RunOptions opts;
  opts.fp64Outputs[1] = &shadow;
  Status st = run(k, args, opts);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("store to 'y' at y[1, :] writes linear offset 7, beyond its "
                                      "fp64 shadow of 6 elements"));
  opts.fp64Outputs = {{0, &shadow}};
  st = run(k, args, opts);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("fp64 shadow requested for param 0, which is not an output"));
}

TEST(Interpreter, MalformedKirIsAnErrorNotACrash) {
  kir::Kernel k = shiftedCopy(0);
  k.ops.back().value = static_cast<int>(k.ops.size());  // refers to a value not yet defined
  std::vector<float> x(8), y(8);
  std::vector<Arg> args = {view(x, Dtype::F32, {2, 4}), view(y, Dtype::F32, {2, 4})};
  Status st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("invalid KIR: the stored value refers to value"));

  k = shiftedCopy(0);
  k.ops.back().param = 0;
  st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("invalid KIR: store into input tensor 'x'"));

  k = shiftedCopy(0);
  k.ops.back().strides.pop_back();
  st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("tensor 'y' has rank 2, but 2 indices, 1 strides and 2 slice lengths"));
}

}  // namespace
}  // namespace mxfp6::interp
