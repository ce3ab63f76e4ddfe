// Variables, counted loops and splat on hand-built KIR (kir.h; semantics in interpreter.h): a
// column summed over rows into a variable against a direct fp64 sum (bound: bit-equal), the exact
// trip sequences of zero-trip, nested and strided loops, variable scopes across trips and rows,
// located runtime errors (step, induction overflow, the trip limit) and every structural check
// made before the first row.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

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
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

bool sameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

// col_sum(x: f32[T, D], y: out f32[B, D], n: out i64[B], S: i64)
//   row b in B {
//     var acc = splat(0.0, D); var count = 0
//     for t in b * S .. b * S + S { acc = acc + x[t, :]; count = count + 1 }
//     y[b, :] = acc; n[b] = count
//   }
kir::Kernel colSum(int64_t D) {
  KirBuilder b("col_sum", "loops.mxk");
  b.tensor("x", Dtype::F32, {"T", D});
  b.tensor("y", Dtype::F32, {"B", D}, true);
  b.tensor("n", Dtype::I64, {"B"}, true);
  b.scalar("S", Dtype::I64);
  b.rows({"b"}, {"B"});
  b.at(2, 3);
  const int strideD = b.constInt(D), one = b.constInt(1);
  const int row = b.rowIndex(0);
  const int start = b.op(OpCode::Mul, {row, b.scalarArg(3)});
  const int end = b.op(OpCode::Add, {start, b.scalarArg(3)});
  b.at(3, 5);
  const int acc = b.varInit(b.splat(b.constFloat(0.0), D));
  const int count = b.varInit(b.constInt(0));
  b.at(4, 5);
  const int t = b.forBegin(start, end, one);
  b.name(t, "t");
  b.at(5, 7);
  const int xv = b.load(0, {t, kColon}, {strideD, one});
  b.varWrite(acc, b.op(OpCode::Add, {b.varRead(acc), xv}));
  b.varWrite(count, b.op(OpCode::Add, {b.varRead(count), one}));
  b.at(6, 5);
  b.forEnd(t);
  b.at(7, 5);
  b.store(1, {row, kColon}, {strideD, one}, b.varRead(acc));
  b.store(2, {row}, {one}, b.varRead(count));
  return b.take();
}

TEST(InterpLoops, ColumnSumOverRowsMatchesDirectSum) {
  for (const int64_t D : {int64_t{4}, int64_t{3072}}) {
    SCOPED_TRACE("D=" + std::to_string(D));
    const int64_t B = 3, S = 32, T = B * S;
    const kir::Kernel k = colSum(D);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
    std::uniform_int_distribution<int> expo(-20, 20);
    std::vector<float> x(static_cast<size_t>(T * D));
    // Wide exponents: the sum's value depends on the order of the additions.
    for (float& v : x) v = std::ldexp(mant(rng), expo(rng));
    std::vector<float> y(static_cast<size_t>(B * D), -1.0f);
    std::vector<int64_t> n(B, -1);
    std::vector<double> yShadow(y.size());
    RunOptions options;
    options.fp64Outputs[1] = &yShadow;
    std::vector<Arg> args = {view(x, Dtype::F32, {T, D}), view(y, Dtype::F32, {B, D}),
                             view(n, Dtype::I64, {B}), int64_t{S}};
    const Status st = run(k, args, options);
    ASSERT_TRUE(st.isOk()) << st.message();
    int64_t mismatches = 0;
    for (int64_t b = 0; b < B; ++b) {
      EXPECT_EQ(n[b], S);
      for (int64_t d = 0; d < D; ++d) {
        double sum = 0.0;
        for (int64_t s = 0; s < S; ++s) sum += static_cast<double>(x[(b * S + s) * D + d]);
        const size_t o = static_cast<size_t>(b * D + d);
        mismatches += !sameBits(yShadow[o], sum) || y[o] != static_cast<float>(sum);
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

// Records the trips of loops into an i64 output: `log[k] = value` with k a counter variable, so
// the test sees the exact sequence of induction values.
class Recorder {
 public:
  explicit Recorder(const std::string& name) : b_(name, "loops.mxk") {
    log_ = b_.tensor("log", Dtype::I64, {"N"}, true);
    count_ = b_.tensor("count", Dtype::I64, {1}, true);
    b_.rows({}, {});
    one_ = b_.constInt(1);
    zero_ = b_.constInt(0);
    k_ = b_.varInit(zero_);
  }
  KirBuilder& b() { return b_; }
  int one() const { return one_; }
  int c(int64_t v) { return b_.constInt(v); }
  /// log[k] = value; k = k + 1
  void record(int value) {
    const int k = b_.varRead(k_);
    b_.store(log_, {k}, {one_}, value);
    b_.varWrite(k_, b_.op(OpCode::Add, {k, one_}));
  }
  /// Runs the kernel; returns the values logged (the log holds up to 64).
  std::vector<int64_t> run(Status* status = nullptr, const RunOptions& options = {}) {
    b_.store(count_, {zero_}, {one_}, b_.varRead(k_));
    const kir::Kernel k = b_.take();
    std::vector<int64_t> log(64, -1), count(1, 0);
    std::vector<Arg> args = {view(log, Dtype::I64, {64}), view(count, Dtype::I64, {1})};
    const Status st = interp::run(k, args, options);
    if (status) {
      *status = st;
    } else {
      EXPECT_TRUE(st.isOk()) << st.message();
    }
    log.resize(static_cast<size_t>(count[0]));
    return log;
  }

 private:
  KirBuilder b_;
  int log_ = -1, count_ = -1, one_ = -1, zero_ = -1, k_ = -1;
};

TEST(InterpLoops, StepsGreaterThanOne) {
  using V = std::vector<int64_t>;
  auto trips = [](int64_t start, int64_t end, int64_t step) {
    Recorder r("strided");
    const int s = r.b().forBegin(r.c(start), r.c(end), r.c(step));
    r.record(s);
    r.b().forEnd(s);
    return r.run();
  };
  EXPECT_EQ(trips(3, 17, 4), (V{3, 7, 11, 15}));
  EXPECT_EQ(trips(3, 15, 4), (V{3, 7, 11}));  // end is exclusive
  EXPECT_EQ(trips(3, 16, 4), (V{3, 7, 11, 15}));
  EXPECT_EQ(trips(-5, 5, 3), (V{-5, -2, 1, 4}));
  EXPECT_EQ(trips(0, 1, 1000), (V{0}));
  EXPECT_EQ(trips(0, 4, 1), (V{0, 1, 2, 3}));
  // Near the top of int64: the step past the last value does not overflow.
  EXPECT_EQ(trips(kMax - 10, kMax, 5), (V{kMax - 10, kMax - 5}));
}

TEST(InterpLoops, ZeroTripLoopsSkipTheirBody) {
  for (const auto& [start, end] :
       std::vector<std::pair<int64_t, int64_t>>{{5, 5}, {6, 5}, {0, -100}}) {
    SCOPED_TRACE(std::to_string(start) + " .. " + std::to_string(end));
    Recorder r("zero_trip");
    r.record(r.c(100));
    const int s = r.b().forBegin(r.c(start), r.c(end), r.c(1));
    r.record(s);
    // A body that would fail: an index far out of bounds, and a nested loop with step 0.
    r.b().store(0, {r.c(1000)}, {r.one()}, s);
    const int inner = r.b().forBegin(r.c(0), r.c(10), r.c(0));
    r.b().forEnd(inner);
    r.b().forEnd(s);
    r.record(r.c(200));
    EXPECT_EQ(r.run(), (std::vector<int64_t>{100, 200}));
  }
}

TEST(InterpLoops, NestedLoopsReevaluateInnerBounds) {
  // for i in 0 .. 3 { log i; for j in i .. 4 step 2 { log 100*i + j }; log -i }
  Recorder r("nested");
  const int i = r.b().forBegin(r.c(0), r.c(3), r.c(1));
  r.record(i);
  const int j = r.b().forBegin(i, r.c(4), r.c(2));
  r.record(r.b().op(OpCode::Add, {r.b().op(OpCode::Mul, {i, r.c(100)}), j}));
  r.b().forEnd(j);
  r.record(r.b().op(OpCode::Neg, {i}));
  r.b().forEnd(i);
  EXPECT_EQ(r.run(), (std::vector<int64_t>{0, 0, 2, 0, 1, 101, 103, -1, 2, 202, -2}));
}

TEST(InterpLoops, ThreeDeepNestWithEmptyInnerLoops) {
  // for a in 0..2 { for b in 0..a { for c in b..2 { log 100a + 10b + c } } }
  Recorder r("deep");
  const int a = r.b().forBegin(r.c(0), r.c(2), r.c(1));
  const int bb = r.b().forBegin(r.c(0), a, r.c(1));
  const int cc = r.b().forBegin(bb, r.c(2), r.c(1));
  const int v = r.b().op(OpCode::Add, {r.b().op(OpCode::Mul, {a, r.c(100)}),
                                       r.b().op(OpCode::Mul, {bb, r.c(10)})});
  r.record(r.b().op(OpCode::Add, {v, cc}));
  r.b().forEnd(cc);
  r.b().forEnd(bb);
  r.b().forEnd(a);
  EXPECT_EQ(r.run(), (std::vector<int64_t>{100, 101}));
}

TEST(InterpLoops, VariablesKeepTheirScope) {
  // var outer = 0
  // for i in 0 .. 4 {
  //   var inner = 10          -- afresh every trip
  //   old = outer             -- a read is a copy: the write below does not change it
  //   outer = outer + i
  //   inner = inner + i
  //   log old; log inner
  // }
  // log outer
  Recorder r("scopes");
  const int outer = r.b().varInit(r.c(0));
  const int i = r.b().forBegin(r.c(0), r.c(4), r.c(1));
  const int inner = r.b().varInit(r.c(10));
  const int old = r.b().varRead(outer);
  r.b().varWrite(outer, r.b().op(OpCode::Add, {r.b().varRead(outer), i}));
  r.b().varWrite(inner, r.b().op(OpCode::Add, {r.b().varRead(inner), i}));
  r.record(old);
  r.record(r.b().varRead(inner));
  r.b().forEnd(i);
  r.record(r.b().varRead(outer));
  EXPECT_EQ(r.run(), (std::vector<int64_t>{0, 10, 0, 11, 1, 12, 3, 13, 6}));
}

TEST(InterpLoops, VariablesStartAfreshEveryRow) {
  // row r in R { var v = splat(r, 3); for i in 0 .. r + 1 { v = v + i }; out[r, :] = v }
  KirBuilder b("fresh", "loops.mxk");
  b.tensor("out", Dtype::I64, {"R", 3}, true);
  b.rows({"r"}, {"R"});
  const int three = b.constInt(3), one = b.constInt(1);
  const int row = b.rowIndex(0);
  const int v = b.varInit(b.splat(row, 3));
  const int i = b.forBegin(b.constInt(0), b.op(OpCode::Add, {row, one}), one);
  b.varWrite(v, b.op(OpCode::Add, {b.varRead(v), i}));
  b.forEnd(i);
  b.store(0, {row, kColon}, {three, one}, b.varRead(v));
  const kir::Kernel k = b.take();
  std::vector<int64_t> out(12, -1);
  std::vector<Arg> args = {view(out, Dtype::I64, {4, 3})};
  const Status st = run(k, args);
  ASSERT_TRUE(st.isOk()) << st.message();
  // Row r: r + (0 + 1 + ... + r).
  EXPECT_EQ(out, (std::vector<int64_t>{0, 0, 0, 2, 2, 2, 5, 5, 5, 9, 9, 9}));
}

TEST(InterpLoops, SplatCopiesTheScalar) {
  KirBuilder b("splat", "loops.mxk");
  b.tensor("x", Dtype::F32, {"T"});
  b.tensor("y", Dtype::F32, {"T", 5}, true);
  b.tensor("m", Dtype::U8, {"T", 4}, true);
  b.rows({"t"}, {"T"});
  const int five = b.constInt(5), four = b.constInt(4), one = b.constInt(1);
  const int t = b.rowIndex(0);
  const int xs = b.load(0, {t}, {one});
  b.store(1, {t, kColon}, {five, one}, b.splat(xs, 5));
  b.store(2, {t, kColon}, {four, one}, b.splat(b.constInt(200, Dtype::U8), 4));
  const kir::Kernel k = b.take();
  std::vector<float> x = {1.5f, -3.25f}, y(10, 0.0f);
  std::vector<uint8_t> m(8, 0);
  std::vector<Arg> args = {view(x, Dtype::F32, {2}), view(y, Dtype::F32, {2, 5}),
                           view(m, Dtype::U8, {2, 4})};
  const Status st = run(k, args);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(y, (std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f, 1.5f, -3.25f, -3.25f, -3.25f, -3.25f,
                                   -3.25f}));
  EXPECT_EQ(m, std::vector<uint8_t>(8, 200));
}

// ---- Runtime errors ----

TEST(InterpLoops, NonPositiveStepIsALocatedError) {
  for (const int64_t step : {int64_t{0}, int64_t{-2}}) {
    Recorder r("bad_step");
    r.b().at(9, 3);
    const int s = r.b().forBegin(r.c(0), r.c(10), r.c(step));
    r.b().forEnd(s);
    Status st;
    r.run(&st);
    ASSERT_FALSE(st.isOk());
    EXPECT_THAT(st.message(), HasSubstr("loops.mxk:9:3: error: loop 0 .. 10 step " +
                                        std::to_string(step) + ": the step is not positive"));
    EXPECT_THAT(st.message(), HasSubstr("ForBegin)"));
  }
}

TEST(InterpLoops, InductionOverflowIsAnError) {
  Recorder r("overflow");
  r.b().at(4, 7);
  const int s = r.b().forBegin(r.c(kMax - 5), r.c(kMax), r.c(4));
  r.record(s);
  r.b().forEnd(s);
  Status st;
  const std::vector<int64_t> log = r.run(&st);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("loops.mxk:4:7: error: loop " + std::to_string(kMax - 5) +
                                      " .. " + std::to_string(kMax) +
                                      " step 4: the induction value overflows int64 when "
                                      "stepped past its last value " +
                                      std::to_string(kMax - 1)));
  EXPECT_TRUE(log.empty());  // reported before the first trip
}

TEST(InterpLoops, TripLimitPerRowStopsARunawayKernel) {
  // The default limit: a loop over most of int64 fails at once instead of running for ages.
  {
    Recorder r("runaway");
    const int s = r.b().forBegin(r.c(0), r.c(kMax - 1), r.c(1));
    r.b().forEnd(s);
    Status st;
    r.run(&st);
    ASSERT_FALSE(st.isOk());
    EXPECT_THAT(st.message(), HasSubstr("would run " + std::to_string(kMax - 1) +
                                        " trips, after 0 in this row already: over the limit "
                                        "of 2147483648 loop trips per row"));
  }
  // Nested 10 x 10 runs 110 trips (10 outer + 100 inner).
  auto nested = [](int64_t limit, Status* st) {
    Recorder r("limit");
    const int i = r.b().forBegin(r.c(0), r.c(10), r.c(1));
    r.b().name(i, "i");
    const int j = r.b().forBegin(r.c(0), r.c(10), r.c(1));
    r.b().forEnd(j);
    r.b().forEnd(i);
    RunOptions options;
    options.maxLoopTripsPerRow = limit;
    r.run(st, options);
  };
  Status st;
  nested(110, &st);
  EXPECT_TRUE(st.isOk()) << st.message();
  nested(109, &st);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("loop 0 .. 10 step 1 would run 10 trips, after 100 in "
                                      "this row already: over the limit of 109"));
  // The open loop's induction value is part of the position.
  EXPECT_THAT(st.message(), HasSubstr("(kernel 'limit', row; loop i=9, op #"));
}

TEST(InterpLoops, TripLimitCountsEachRowAfresh) {
  // row r in R { for i in 0 .. 8 {} } with a limit of 8: every row may run 8 trips.
  KirBuilder b("rows", "loops.mxk");
  b.tensor("out", Dtype::I64, {"R"}, true);
  b.rows({"r"}, {"R"});
  const int i = b.forBegin(b.constInt(0), b.constInt(8), b.constInt(1));
  b.forEnd(i);
  const kir::Kernel k = b.take();
  std::vector<int64_t> out(5);
  std::vector<Arg> args = {view(out, Dtype::I64, {5})};
  RunOptions options;
  options.maxLoopTripsPerRow = 8;
  const Status st = run(k, args, options);
  EXPECT_TRUE(st.isOk()) << st.message();
}

TEST(InterpLoops, ErrorsInABodyNameTheTrip) {
  // row t in T { for s in 0 .. 8 step 3 { y[t, s] = 1 } } with y: [T, 4]: fails at s = 6.
  KirBuilder b("body_error", "loops.mxk");
  b.tensor("y", Dtype::I64, {"T", 4}, true);
  b.rows({"t"}, {"T"});
  const int four = b.constInt(4), one = b.constInt(1);
  const int t = b.rowIndex(0);
  const int s = b.forBegin(b.constInt(0), b.constInt(8), b.constInt(3));
  b.name(s, "s");
  b.at(3, 9);
  b.store(0, {t, s}, {four, one}, one);
  b.at(4, 1);
  b.forEnd(s);
  const kir::Kernel k = b.take();
  std::vector<int64_t> y(8, 0);
  std::vector<Arg> args = {view(y, Dtype::I64, {2, 4})};
  const Status st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("loops.mxk:3:9: error: store to 'y' out of bounds at "
                                      "y[0, 6]"));
  EXPECT_THAT(st.message(), HasSubstr("row t=0; loop s=6, op #"));
  EXPECT_EQ(y, (std::vector<int64_t>{1, 0, 0, 1, 0, 0, 0, 0}));  // earlier trips stay written
}

// ---- Validation before the first row ----

/// Runs `k` (one tensor param `out: i64[N]`, 4 elements) and returns the error message.
std::string invalidMessage(const kir::Kernel& k) {
  std::vector<int64_t> out(4, 0);
  std::vector<Arg> args = {view(out, Dtype::I64, {4})};
  const Status st = run(k, args);
  EXPECT_FALSE(st.isOk());
  EXPECT_EQ(out, std::vector<int64_t>(4, 0)) << "ran before validation failed";
  return st.message();
}

KirBuilder validationKernel() {
  KirBuilder b("invalid", "v.mxk");
  b.tensor("out", Dtype::I64, {"N"}, true);
  b.rows({}, {});
  return b;
}

TEST(InterpLoopsValidation, ForBeginWithoutForEnd) {
  KirBuilder b = validationKernel();
  const int zero = b.constInt(0), one = b.constInt(1);
  b.store(0, {zero}, {one}, one);
  b.at(2, 5);
  const int i = b.forBegin(zero, b.constInt(3), one);
  const int j = b.forBegin(zero, b.constInt(3), one);
  b.forEnd(j);
  (void)i;
  EXPECT_THAT(invalidMessage(b.take()),
              HasSubstr("v.mxk:2:5: error: invalid KIR: ForBegin has no matching ForEnd "
                        "(kernel 'invalid', op #4 ForBegin)"));
}

TEST(InterpLoopsValidation, ForEndWithoutOpenLoop) {
  KirBuilder b = validationKernel();
  const int zero = b.constInt(0), one = b.constInt(1);
  const int i = b.forBegin(zero, one, one);
  b.forEnd(i);
  b.at(7, 1);
  b.forEnd(i);
  EXPECT_THAT(invalidMessage(b.take()),
              HasSubstr("v.mxk:7:1: error: invalid KIR: ForEnd names op #2, but no loop is "
                        "open (kernel 'invalid', op #4 ForEnd)"));
}

TEST(InterpLoopsValidation, LoopsMustNest) {
  KirBuilder b = validationKernel();
  const int zero = b.constInt(0), one = b.constInt(1);
  const int i = b.forBegin(zero, one, one);
  const int j = b.forBegin(zero, one, one);
  b.forEnd(i);  // closes the outer loop first
  b.forEnd(j);
  EXPECT_THAT(invalidMessage(b.take()),
              HasSubstr("invalid KIR: ForEnd names op #2, but the innermost open loop is op #3 "
                        "(ForBegin) (kernel 'invalid', op #4 ForEnd)"));
}

TEST(InterpLoopsValidation, ForEndNamingANonLoop) {
  KirBuilder b = validationKernel();
  const int zero = b.constInt(0), one = b.constInt(1);
  const int i = b.forBegin(zero, one, one);
  b.forEnd(zero);
  b.forEnd(i);
  EXPECT_THAT(invalidMessage(b.take()),
              HasSubstr("invalid KIR: ForEnd names op #0, but the innermost open loop is op #2"));
}

TEST(InterpLoopsValidation, ValueOfABodyUsedAfterItsForEnd) {
  KirBuilder b = validationKernel();
  const int zero = b.constInt(0), one = b.constInt(1);
  const int i = b.forBegin(zero, b.constInt(3), one);
  const int twice = b.op(OpCode::Add, {i, i});
  b.forEnd(i);
  b.at(9, 2);
  b.store(0, {zero}, {one}, twice);
  EXPECT_THAT(invalidMessage(b.take()),
              HasSubstr("v.mxk:9:2: error: invalid KIR: the stored value refers to value 4, "
                        "defined in the body of the loop of op #3 (ForBegin), which closed at "
                        "op #5 (kernel 'invalid', op #6 Store)"));
}

TEST(InterpLoopsValidation, InductionValueUsedAfterItsForEnd) {
  KirBuilder b = validationKernel();
  const int zero = b.constInt(0), one = b.constInt(1);
  const int i = b.forBegin(zero, b.constInt(3), one);
  b.forEnd(i);
  b.store(0, {i}, {one}, one);
  EXPECT_THAT(invalidMessage(b.take()),
              HasSubstr("invalid KIR: an index refers to value 3, defined in the body of the "
                        "loop of op #3 (ForBegin), which closed at op #4"));
}

TEST(InterpLoopsValidation, InnerLoopValueUsedInTheOuterBody) {
  KirBuilder b = validationKernel();
  const int zero = b.constInt(0), one = b.constInt(1);
  const int i = b.forBegin(zero, b.constInt(3), one);
  const int j = b.forBegin(zero, b.constInt(3), one);
  const int v = b.op(OpCode::Add, {i, j});  // fine: both loops are open
  b.forEnd(j);
  b.op(OpCode::Add, {i, v});
  b.forEnd(i);
  EXPECT_THAT(invalidMessage(b.take()),
              HasSubstr("invalid KIR: an operand refers to value 6, defined in the body of the "
                        "loop of op #5 (ForBegin), which closed at op #7 (kernel 'invalid', "
                        "op #8 Add)"));
}

TEST(InterpLoopsValidation, VarReadMustNameAnEarlierVarInit) {
  {
    KirBuilder b = validationKernel();
    const int zero = b.constInt(0);
    b.at(3, 3);
    b.varRead(zero);
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("v.mxk:3:3: error: invalid KIR: ival 0 does not name an earlier "
                          "VarInit (kernel 'invalid', op #1 VarRead)"));
  }
  {
    KirBuilder b = validationKernel();
    const int zero = b.constInt(0);
    kir::Kernel k = b.take();
    kir::Op read = k.ops[zero];
    read.code = OpCode::VarRead;
    read.ival = 2;  // the VarInit after it
    kir::Op init = k.ops[zero];
    init.code = OpCode::VarInit;
    init.operands = {zero};
    k.ops.push_back(read);
    k.ops.push_back(init);
    EXPECT_THAT(invalidMessage(k), HasSubstr("invalid KIR: ival 2 does not name an earlier "
                                             "VarInit (kernel 'invalid', op #1 VarRead)"));
  }
  {
    KirBuilder b = validationKernel();
    const int zero = b.constInt(0), one = b.constInt(1);
    const int v = b.varInit(zero);
    b.varWrite(one, b.varRead(v));  // names a ConstInt
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: ival 1 does not name an earlier VarInit (kernel "
                          "'invalid', op #4 VarWrite)"));
  }
}

TEST(InterpLoopsValidation, VariableOfAClosedLoopIsOutOfScope) {
  for (const bool write : {false, true}) {
    KirBuilder b = validationKernel();
    const int zero = b.constInt(0), one = b.constInt(1);
    const int i = b.forBegin(zero, b.constInt(3), one);
    const int v = b.varInit(i);
    b.varWrite(v, b.op(OpCode::Add, {b.varRead(v), one}));  // fine inside
    b.forEnd(i);
    b.at(5, 5);
    if (write) {
      b.varWrite(v, one);
    } else {
      b.varRead(v);
    }
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr(std::string("v.mxk:5:5: error: invalid KIR: variable of op #4 "
                                      "(VarInit) is out of scope: it was declared in the body "
                                      "of the loop of op #3 (ForBegin), which closed at op #8 "
                                      "(kernel 'invalid', op #9 ") +
                          (write ? "VarWrite)" : "VarRead)")));
  }
}

TEST(InterpLoopsValidation, VariableTypesMustMatch) {
  {  // VarWrite of another length
    KirBuilder b = validationKernel();
    const int v = b.varInit(b.splat(b.constFloat(0.0), 8));
    b.varWrite(v, b.splat(b.constFloat(1.0), 4));
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: the value written is f32x4, the variable is f32x8 "
                          "(kernel 'invalid', op #5 VarWrite)"));
  }
  {  // VarWrite of another element type
    KirBuilder b = validationKernel();
    const int v = b.varInit(b.splat(b.constFloat(0.0), 8));
    b.varWrite(v, b.cast(b.splat(b.constFloat(1.0), 8), Dtype::BF16));
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: the value written is bf16x8, the variable is f32x8"));
  }
  {  // VarWrite of a float into an integer variable
    KirBuilder b = validationKernel();
    const int v = b.varInit(b.constInt(0));
    b.varWrite(v, b.constFloat(1.0));
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: the value written is f32, the variable is i64"));
  }
  {  // VarRead typed otherwise
    KirBuilder b = validationKernel();
    const int v = b.varInit(b.constInt(0));
    const int r = b.varRead(v);
    b.kernel().ops[r].type = {Dtype::I32, 0};
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: the result is i32, the variable is i64 (kernel "
                          "'invalid', op #2 VarRead)"));
  }
  {  // VarInit typed otherwise than its initial value
    KirBuilder b = validationKernel();
    const int v = b.varInit(b.constInt(0));
    b.kernel().ops[v].type = {Dtype::I64, 4};
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: the initial value is i64, the variable is i64x4 "
                          "(kernel 'invalid', op #1 VarInit)"));
  }
}

TEST(InterpLoopsValidation, VariablesAndEffectsAreNotValues) {
  {
    KirBuilder b = validationKernel();
    const int v = b.varInit(b.constInt(0));
    b.op(OpCode::Add, {v, v});
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: an operand refers to op #1 (VarInit), a variable, not "
                          "a value: read it with VarRead (kernel 'invalid', op #2 Add)"));
  }
  {
    KirBuilder b = validationKernel();
    const int zero = b.constInt(0);
    const int v = b.varInit(zero);
    b.varWrite(v, zero);
    b.op(OpCode::Add, {zero, 2});  // op #2 is the VarWrite
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: an operand refers to value 2, which is not an earlier "
                          "value (kernel 'invalid', op #3 Add)"));
  }
  {
    KirBuilder b = validationKernel();
    const int zero = b.constInt(0), one = b.constInt(1);
    const int i = b.forBegin(zero, one, one);
    b.forEnd(i);
    b.varInit(3);  // the ForEnd
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: an operand refers to value 3, which is not an earlier "
                          "value (kernel 'invalid', op #4 VarInit)"));
  }
}

TEST(InterpLoopsValidation, LoopBoundsAreIntegerScalars) {
  {
    KirBuilder b = validationKernel();
    const int zero = b.constInt(0);
    const int i = b.forBegin(zero, b.constFloat(4.0), zero);
    b.forEnd(i);
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: the end (value 1) is f32, not an integer scalar "
                          "(kernel 'invalid', op #2 ForBegin)"));
  }
  {
    KirBuilder b = validationKernel();
    const int zero = b.constInt(0);
    const int i = b.forBegin(zero, zero, b.splat(zero, 4));
    b.forEnd(i);
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: the step (value 1) is i64x4, not an integer scalar"));
  }
  {
    KirBuilder b = validationKernel();
    const int zero = b.constInt(0);
    const int cond = b.op(OpCode::CmpEq, {zero, zero}, Dtype::Bool);
    const int i = b.forBegin(cond, zero, zero);
    b.forEnd(i);
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: the start (value 1) is bool, not an integer scalar"));
  }
  {
    KirBuilder b = validationKernel();
    const int zero = b.constInt(0), one = b.constInt(1);
    const int i = b.forBegin(zero, one, one);
    b.kernel().ops[i].type = {Dtype::I32, 0};
    b.forEnd(i);
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: the induction value is typed i32, not i64"));
  }
  {  // i32 bounds are integer scalars too: exact in int64
    KirBuilder b = validationKernel();
    const int zero = b.constInt(0, Dtype::I32), one = b.constInt(1, Dtype::I32);
    const int i = b.forBegin(zero, b.constInt(4, Dtype::I32), one);
    b.store(0, {i}, {b.constInt(1)}, i);
    b.forEnd(i);
    std::vector<int64_t> out(4, -1);
    std::vector<Arg> args = {view(out, Dtype::I64, {4})};
    const Status st = run(b.take(), args);
    ASSERT_TRUE(st.isOk()) << st.message();
    EXPECT_EQ(out, (std::vector<int64_t>{0, 1, 2, 3}));
  }
}

TEST(InterpLoopsValidation, SplatTakesAScalarOfItsType) {
  {
    KirBuilder b = validationKernel();
    const int v = b.splat(b.constFloat(1.0), 4);
    b.splat(v, 8);
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: operand (value 1) is a row vector, not a scalar "
                          "(kernel 'invalid', op #2 Splat)"));
  }
  {
    KirBuilder b = validationKernel();
    b.splat(b.constFloat(1.0), 0);
    EXPECT_THAT(invalidMessage(b.take()), HasSubstr("invalid KIR: result must be a row vector"));
  }
  {
    KirBuilder b = validationKernel();
    const int s = b.splat(b.constFloat(1.0), 4);
    b.kernel().ops[s].type.elem = Dtype::BF16;
    EXPECT_THAT(invalidMessage(b.take()),
                HasSubstr("invalid KIR: result type bf16x4 splats a f32 (kernel 'invalid', "
                          "op #1 Splat)"));
  }
}

}  // namespace
}  // namespace mxfp6::interp
