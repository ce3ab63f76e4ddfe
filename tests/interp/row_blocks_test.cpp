// The row-vector building blocks in the interpreter, on hand-built KIR: Repeat, GroupReduceSum/
// Max/Min, RotatePairs, MxScale, MxEncode and Pack6. References are written here from the
// definitions in kir.h and docs/mxfp6-format.md, never from the interpreter's or the encoder's code:
//   - Repeat / group reductions: index formulas; sums in ascending order (the definition), max/min
//     as "NaN if any NaN, else the first element equal to the extreme".
//   - RotatePairs: the inputs are f32, so each product of two of them is exact in fp64 and the
//     definition (two fp64 products, one fp64 add/sub) equals the exact value rounded once to
//     fp64: fma(c, v0, -(s * v1)). Bound: 0 (bit-equal fp64 shadows).
//   - MxScale: the scale from frexp-style exponent and mantissa thresholds in double; MxEncode:
//     nearest value of a table of the 32 code values, ties to the even code; Pack6: the 24-bit
//     word. Bound: 0 differing bytes.
//   - The KIR row packer (bf16 row -> MxScale -> MxEncode -> Pack6 -> u8 stores) against
//     mx::packRows, the oracle GPU packers are tested against. Bound: 0 differing bytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compiler/interp/interpreter.h"
#include "compiler/interp/mxfp6.h"
#include "tests/interp/kir_builder.h"
#include "tests/interp/reference_rounding.h"
#include "tests/interp/dsl_test_util.h"

namespace mxfp6::interp {
namespace {

using ::testing::HasSubstr;
using testing::KirBuilder;
using testing::referenceBf16;
using testing::vectorType;
using kir::Dtype;
using kir::OpCode;
constexpr int kColon = KirBuilder::kColon;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Loads row `row` of a 2-D tensor whose inner dim has `cols` elements (row-major).
int loadRow(KirBuilder& b, int param, int row, int64_t cols) {
  return b.load(param, {row, kColon}, {b.constInt(cols), b.constInt(1)});
}

void storeRow(KirBuilder& b, int param, int row, int64_t cols, int value) {
  b.store(param, {row, kColon}, {b.constInt(cols), b.constInt(1)}, value);
}

bool sameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

// ---------------------------------------------------------------------------------------------
// Repeat and group reductions

TEST(InterpRowBlocks, RepeatCopiesElementJOverKExactly) {
  // repeat_rows(x: f32[T, 8], n: i32[T, 4], y: out f32[T, 24], m: out i32[T, 8]) {
  //   row t in T { y[t, :] = repeat(x[t, :], 3); m[t, :] = repeat(n[t, :], 2) }
  // }
  KirBuilder b("repeat_rows");
  b.tensor("x", Dtype::F32, {"T", 8});
  b.tensor("n", Dtype::I32, {"T", 4});
  b.tensor("y", Dtype::F32, {"T", 24}, true);
  b.tensor("m", Dtype::I32, {"T", 8}, true);
  b.rows({"t"}, {"T"});
  const int t = b.rowIndex(0);
  const int x = loadRow(b, 0, t, 8), n = loadRow(b, 1, t, 4);
  storeRow(b, 2, t, 24, b.vectorOp(OpCode::Repeat, {x}, vectorType(Dtype::F32, 24), 3));
  storeRow(b, 3, t, 8, b.vectorOp(OpCode::Repeat, {n}, vectorType(Dtype::I32, 8), 2));

  constexpr int kRows = 3;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 100.0f);
  std::vector<float> xs(kRows * 8);
  for (float& e : xs) e = dist(rng);
  xs[3] = -0.0f;
  xs[9] = std::nanf("");
  xs[20] = -std::numeric_limits<float>::infinity();
  std::vector<int32_t> ns(kRows * 4);
  for (size_t j = 0; j < ns.size(); ++j) ns[j] = static_cast<int32_t>(j * 1000003 - 7);
  std::vector<float> y(kRows * 24);
  std::vector<int32_t> m(kRows * 8);
  std::vector<double> y64(y.size(), -1.0);
  std::vector<Arg> args = {view(xs, Dtype::F32, {kRows, 8}), view(ns, Dtype::I32, {kRows, 4}),
                           view(y, Dtype::F32, {kRows, 24}), view(m, Dtype::I32, {kRows, 8})};
  RunOptions opts;
  opts.fp64Outputs[2] = &y64;
  const Status st = run(b.kernel(), args, opts);
  ASSERT_TRUE(st.isOk()) << st.message();
  for (int r = 0; r < kRows; ++r) {
    for (int j = 0; j < 24; ++j) {
      const float want = xs[r * 8 + j / 3];
      EXPECT_TRUE(sameBits(y64[r * 24 + j], static_cast<double>(want)))
          << "row " << r << " element " << j;
    }
    for (int j = 0; j < 8; ++j) EXPECT_EQ(m[r * 8 + j], ns[r * 4 + j / 2]);
  }
}

/// Reference max/min: NaN if any element is NaN, else the FIRST element equal to the extreme
/// (so of -0 and +0 the earlier one).
double firstExtreme(const double* v, int64_t n, bool wantMax) {
  double best = v[0];
  for (int64_t j = 0; j < n; ++j) {
    if (std::isnan(v[j])) return kNaN;
    if (wantMax ? v[j] > best : v[j] < best) best = v[j];
  }
  for (int64_t j = 0; j < n; ++j)
    if (v[j] == best) return v[j];
  return best;
}

double ascendingSum(const double* v, int64_t n) {
  double acc = 0.0;
  for (int64_t j = 0; j < n; ++j) acc = j == 0 ? v[0] : acc + v[j];
  return acc;
}

TEST(InterpRowBlocks, GroupReductionsReduceEachRunInAscendingOrder) {
  // groups(x: f32[T, 128], s: out f32[T, 4], hi: out f32[T, 4], lo: out f32[T, 4],
  //        total: out f32[T, 1], same: out f32[T, 128]) {
  //   row t in T { v = x[t, :]
  //     s[t, :] = group_sum(v, 32); hi[t, :] = group_max(v, 32); lo[t, :] = group_min(v, 32)
  //     total[t, :] = group_sum(v, 128); same[t, :] = group_min(v, 1) }
  // }
  KirBuilder b("groups", "groups.mxk");
  b.tensor("x", Dtype::F32, {"T", 128});
  for (const char* name : {"s", "hi", "lo"}) b.tensor(name, Dtype::F32, {"T", 4}, true);
  b.tensor("total", Dtype::F32, {"T", 1}, true);
  b.tensor("same", Dtype::F32, {"T", 128}, true);
  b.rows({"t"}, {"T"});
  const int t = b.rowIndex(0);
  const int v = loadRow(b, 0, t, 128);
  const OpCode codes[] = {OpCode::GroupReduceSum, OpCode::GroupReduceMax, OpCode::GroupReduceMin};
  for (int p = 0; p < 3; ++p) {
    storeRow(b, 1 + p, t, 4, b.vectorOp(codes[p], {v}, vectorType(Dtype::F32, 4), 32));
  }
  storeRow(b, 4, t, 1, b.vectorOp(OpCode::GroupReduceSum, {v}, vectorType(Dtype::F32, 1), 128));
  storeRow(b, 5, t, 128, b.vectorOp(OpCode::GroupReduceMin, {v}, vectorType(Dtype::F32, 128), 1));

  constexpr int kRows = 4;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> xs(kRows * 128);
  for (float& e : xs) e = dist(rng);
  // Row 1, group 2: a NaN poisons that group's sum, max and min and nothing else.
  xs[128 + 70] = std::nanf("");
  // Row 2, group 0: ((2^53 + 1) - 2^53) + 1 = 1 in ascending order (2^53 + 1 rounds to 2^53);
  // any other order of these four gives 0 or 2.
  float* g0 = &xs[256];
  std::fill(g0, g0 + 32, 0.0f);
  g0[0] = 0x1p53f, g0[1] = 1.0f, g0[2] = -0x1p53f, g0[3] = 1.0f;
  // Row 2, group 1: min over {+0, -0, positives} keeps +0 (the earlier of the equal zeros).
  float* g1 = &xs[256 + 32];
  g1[0] = 0.0f, g1[1] = -0.0f;
  for (int j = 2; j < 32; ++j) g1[j] = std::fabs(g1[j]) + 1.0f;
  // Row 3, group 3: all zeros, -0 first: max keeps -0.
  float* g3 = &xs[384 + 96];
  std::fill(g3, g3 + 32, 0.0f);
  g3[0] = -0.0f;

  std::vector<std::vector<float>> outs = {std::vector<float>(kRows * 4),
                                          std::vector<float>(kRows * 4),
                                          std::vector<float>(kRows * 4),
                                          std::vector<float>(kRows * 1),
                                          std::vector<float>(kRows * 128)};
  std::vector<std::vector<double>> shadows;
  for (const auto& o : outs) shadows.emplace_back(o.size(), -7.0);
  std::vector<Arg> args = {view(xs, Dtype::F32, {kRows, 128})};
  RunOptions opts;
  for (int p = 0; p < 5; ++p) {
    args.push_back(view(outs[p], Dtype::F32, {kRows, static_cast<int64_t>(outs[p].size() / kRows)}));
    opts.fp64Outputs[1 + p] = &shadows[p];
  }
  const Status st = run(b.kernel(), args, opts);
  ASSERT_TRUE(st.isOk()) << st.message();

  for (int r = 0; r < kRows; ++r) {
    double v64[128];
    for (int j = 0; j < 128; ++j) v64[j] = xs[r * 128 + j];
    for (int g = 0; g < 4; ++g) {
      SCOPED_TRACE("row " + std::to_string(r) + " group " + std::to_string(g));
      EXPECT_TRUE(sameBits(shadows[0][r * 4 + g], ascendingSum(v64 + 32 * g, 32)))
          << shadows[0][r * 4 + g];
      EXPECT_TRUE(sameBits(shadows[1][r * 4 + g], firstExtreme(v64 + 32 * g, 32, true)));
      EXPECT_TRUE(sameBits(shadows[2][r * 4 + g], firstExtreme(v64 + 32 * g, 32, false)));
    }
    EXPECT_TRUE(sameBits(shadows[3][r], ascendingSum(v64, 128)));
    for (int j = 0; j < 128; ++j) EXPECT_TRUE(sameBits(shadows[4][r * 128 + j], v64[j]));
  }
  // The special groups, stated literally.
  for (int p = 0; p < 3; ++p) EXPECT_TRUE(std::isnan(shadows[p][4 + 2])) << p;
  EXPECT_FALSE(std::isnan(shadows[1][4 + 1]));
  EXPECT_EQ(shadows[0][8 + 0], 1.0);
  EXPECT_TRUE(sameBits(shadows[2][8 + 1], 0.0));
  EXPECT_TRUE(sameBits(shadows[1][12 + 3], -0.0));
  EXPECT_TRUE(std::isnan(shadows[3][1]));
}

TEST(InterpRowBlocks, GroupOf32OverA128VectorRepeatedBackToTheRow) {
  // centred(x: f32[T, 128], y: out f32[T, 128]) {
  //   row t in T { v = x[t, :]; y[t, :] = v - repeat(group_max(v, 32), 32) }
  // }
  KirBuilder b("centred");
  b.tensor("x", Dtype::F32, {"T", 128});
  b.tensor("y", Dtype::F32, {"T", 128}, true);
  b.rows({"t"}, {"T"});
  const int t = b.rowIndex(0);
  const int v = loadRow(b, 0, t, 128);
  const int hi = b.vectorOp(OpCode::GroupReduceMax, {v}, vectorType(Dtype::F32, 4), 32);
  const int spread = b.vectorOp(OpCode::Repeat, {hi}, vectorType(Dtype::F32, 128), 32);
  storeRow(b, 1, t, 128, b.op(OpCode::Sub, {v, spread}));

  constexpr int kRows = 5;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  std::vector<float> xs(kRows * 128), y(kRows * 128);
  for (float& e : xs) e = dist(rng);
  std::vector<double> y64(y.size(), kNaN);
  std::vector<Arg> args = {view(xs, Dtype::F32, {kRows, 128}), view(y, Dtype::F32, {kRows, 128})};
  RunOptions opts;
  opts.fp64Outputs[1] = &y64;
  const Status st = run(b.kernel(), args, opts);
  ASSERT_TRUE(st.isOk()) << st.message();
  for (int r = 0; r < kRows; ++r) {
    for (int j = 0; j < 128; ++j) {
      const float* group = &xs[r * 128 + (j / 32) * 32];
      double hiRef = group[0];
      for (int e = 1; e < 32; ++e) hiRef = std::max(hiRef, static_cast<double>(group[e]));
      EXPECT_EQ(y64[r * 128 + j], xs[r * 128 + j] - hiRef) << "row " << r << " element " << j;
    }
  }
}

TEST(InterpRowBlocks, IntegerGroupReductionsAreExactInt64) {
  // int_groups(n: i64[T, 4], k: i32[T, 4], s: out i64[T, 1], m: out i32[T, 2]) {
  //   row t in T { s[t, :] = group_sum(n[t, :], 4); m[t, :] = group_max(k[t, :], 2) }
  // }
  KirBuilder b("int_groups", "ig.mxk");
  b.tensor("n", Dtype::I64, {"T", 4});
  b.tensor("k", Dtype::I32, {"T", 4});
  b.tensor("s", Dtype::I64, {"T", 1}, true);
  b.tensor("m", Dtype::I32, {"T", 2}, true);
  b.rows({"t"}, {"T"});
  const int t = b.rowIndex(0);
  const int n = loadRow(b, 0, t, 4), kv = loadRow(b, 1, t, 4);
  storeRow(b, 2, t, 1, b.vectorOp(OpCode::GroupReduceSum, {n}, vectorType(Dtype::I64, 1), 4));
  b.at(3, 9);
  const int km = b.vectorOp(OpCode::GroupReduceMax, {kv}, vectorType(Dtype::I32, 2), 2);
  storeRow(b, 3, t, 2, km);

  // 2^60 + 9 is not a double: an fp64 sum would lose the low bits.
  const int64_t big = int64_t{1} << 60;
  std::vector<int64_t> ns = {big + 1, big + 3, -big, 5, -1, -2, -3, -4};
  std::vector<int32_t> ks = {-5, -9, 7, 7, 1 << 30, -(1 << 30), 0, -1};
  std::vector<int64_t> s(2);
  std::vector<int32_t> m(4);
  std::vector<Arg> args = {view(ns, Dtype::I64, {2, 4}), view(ks, Dtype::I32, {2, 4}),
                           view(s, Dtype::I64, {2, 1}), view(m, Dtype::I32, {2, 2})};
  Status st = run(b.kernel(), args);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(s, (std::vector<int64_t>{big + 9, -10}));
  EXPECT_EQ(m, (std::vector<int32_t>{-5, 7, 1 << 30, 0}));

  // An i32 group sum whose exact value leaves i32 is an error, not a wrap.
  kir::Kernel k = b.take();
  k.ops[km].code = OpCode::GroupReduceSum;
  std::fill(ks.begin(), ks.end(), 0);
  ks[0] = ks[1] = 1 << 30;
  st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(),
              HasSubstr("ig.mxk:3:9: error: result 2147483648 (element 0) does not fit i32"));
  EXPECT_THAT(st.message(), HasSubstr("row t=0"));
}

// ---------------------------------------------------------------------------------------------
// RotatePairs

TEST(InterpRowBlocks, RotatePairsOnRandomDataIsTheFormulaInFp64) {
  // rope(x: f32[T, 64], cs: f32[T, 32], sn: f32[T, 32], y: out f32[T, 64]) {
  //   row t in T { y[t, :] = rotate_pairs(x[t, :], cs[t, :], sn[t, :]) }
  // }
  KirBuilder b("rope");
  b.tensor("x", Dtype::F32, {"T", 64});
  b.tensor("cs", Dtype::F32, {"T", 32});
  b.tensor("sn", Dtype::F32, {"T", 32});
  b.tensor("y", Dtype::F32, {"T", 64}, true);
  b.rows({"t"}, {"T"});
  const int t = b.rowIndex(0);
  const int x = loadRow(b, 0, t, 64), c = loadRow(b, 1, t, 32), s = loadRow(b, 2, t, 32);
  storeRow(b, 3, t, 64, b.vectorOp(OpCode::RotatePairs, {x, c, s}, vectorType(Dtype::F32, 64)));

  constexpr int kRows = 16;
  std::mt19937 rng(5);
  std::normal_distribution<float> vd(0.0f, 4.0f);
  std::uniform_real_distribution<double> angle(-10.0, 10.0);
  std::vector<float> xs(kRows * 64), cs(kRows * 32), sn(kRows * 32), y(kRows * 64);
  for (float& e : xs) e = vd(rng);
  for (size_t p = 0; p < cs.size(); ++p) {
    const double a = angle(rng);
    cs[p] = static_cast<float>(std::cos(a));
    sn[p] = static_cast<float>(std::sin(a));
  }
  std::vector<double> y64(y.size(), kNaN);
  std::vector<Arg> args = {view(xs, Dtype::F32, {kRows, 64}), view(cs, Dtype::F32, {kRows, 32}),
                           view(sn, Dtype::F32, {kRows, 32}), view(y, Dtype::F32, {kRows, 64})};
  RunOptions opts;
  opts.fp64Outputs[3] = &y64;
  const Status st = run(b.kernel(), args, opts);
  ASSERT_TRUE(st.isOk()) << st.message();
  int64_t differing = 0;
  for (int r = 0; r < kRows; ++r) {
    for (int p = 0; p < 32; ++p) {
      const double v0 = xs[r * 64 + 2 * p], v1 = xs[r * 64 + 2 * p + 1];
      const double c0 = cs[r * 32 + p], s0 = sn[r * 32 + p];
      const double want0 = std::fma(c0, v0, -(s0 * v1));  // s0 * v1 is exact (24 x 24 bits)
      const double want1 = std::fma(s0, v0, c0 * v1);
      differing += !sameBits(y64[r * 64 + 2 * p], want0) + !sameBits(y64[r * 64 + 2 * p + 1], want1);
      EXPECT_EQ(y[r * 64 + 2 * p], static_cast<float>(want0));
    }
  }
  EXPECT_EQ(differing, 0);
}

TEST(InterpRowBlocks, RotatePairsRoundsEachProductToFp64NeverFused) {
  // a = 1 + 2^-30 is not an f32, so the operands are fp64 values built from f32 loads:
  //   v = [1, 2] * a, c = [1] * a, s = [0.5]
  //   y0 = c*v0 - s*v1 = fl(a^2) - a = (1 + 2^-29) - (1 + 2^-30) = 2^-30
  // whereas a fused c*v0 - s*v1 keeps a^2's 2^-60 and gives 2^-30 + 2^-60.
  //   y1 = s*v0 + c*v1 = (0.5 + 2^-31) + fl(2a^2) = 2.5 + 2^-28 + 2^-31.
  KirBuilder b("rope_fp64");
  b.tensor("x", Dtype::F32, {"T", 2});
  b.tensor("cs", Dtype::F32, {"T", 1});
  b.tensor("sn", Dtype::F32, {"T", 1});
  b.tensor("y", Dtype::F32, {"T", 2}, true);
  b.rows({"t"}, {"T"});
  const int t = b.rowIndex(0);
  const int a = b.constFloat(1.0 + 0x1p-30);
  const int v = b.op(OpCode::Mul, {loadRow(b, 0, t, 2), a});
  const int c = b.op(OpCode::Mul, {loadRow(b, 1, t, 1), a});
  const int s = loadRow(b, 2, t, 1);
  storeRow(b, 3, t, 2, b.vectorOp(OpCode::RotatePairs, {v, c, s}, vectorType(Dtype::F32, 2)));
  std::vector<float> xs = {1.0f, 2.0f}, cs = {1.0f}, sn = {0.5f}, y(2);
  std::vector<double> y64(2, kNaN);
  std::vector<Arg> args = {view(xs, Dtype::F32, {1, 2}), view(cs, Dtype::F32, {1, 1}),
                           view(sn, Dtype::F32, {1, 1}), view(y, Dtype::F32, {1, 2})};
  RunOptions opts;
  opts.fp64Outputs[3] = &y64;
  const Status st = run(b.kernel(), args, opts);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(y64[0], 0x1p-30);
  EXPECT_EQ(y64[1], 2.5 + 0x1p-28 + 0x1p-31);
}

// ---------------------------------------------------------------------------------------------
// Independent MXFP6 oracle (docs/mxfp6-format.md sections 1 and 2)

struct FormatRef {
  int mantissaBits, bias, emax;
  double maxValue;    // code 0x1F
  double saturateAt;  // FLOOR saturates the block max when amax / 2^s reaches it
};

FormatRef formatRef(kir::MxFormat f) {
  return f == kir::MxFormat::E2M3 ? FormatRef{3, 1, 2, 7.5, 7.75} : FormatRef{2, 3, 4, 28.0, 30.0};
}

std::array<double, 32> codeTable(kir::MxFormat f) {
  const FormatRef d = formatRef(f);
  std::array<double, 32> v{};
  for (int code = 0; code < 32; ++code) {
    const int ef = code >> d.mantissaBits;
    const double frac = static_cast<double>(code & ((1 << d.mantissaBits) - 1)) / (1 << d.mantissaBits);
    v[code] = ef == 0 ? std::ldexp(frac, 1 - d.bias) : std::ldexp(1.0 + frac, ef - d.bias);
  }
  return v;
}

bool bf16IsNanOrInf(uint16_t bits) { return (bits & 0x7F80) == 0x7F80; }  // exponent all ones

/// The scale byte of a block of bf16 values: 0xFF with a NaN/Inf; 0 for a zero or subnormal
/// amax; else 127 + clamp(s) with s = floor(log2 amax) - emax, +1 in RCEIL when amax / 2^s
/// exceeds the largest element, +1 in EVEN when it reaches the saturation point.
uint8_t referenceScale(const uint16_t* block, kir::MxFormat f, kir::MxScaleMode mode) {
  double amax = 0.0;
  for (int e = 0; e < 32; ++e) {
    if (bf16IsNanOrInf(block[e])) return 0xFF;
    amax = std::max(amax, std::fabs(testing::referenceBf16Value(block[e])));
  }
  if (amax < 0x1p-126) return 0x00;
  const FormatRef d = formatRef(f);
  int exponent = 0;
  const double mant = std::frexp(amax, &exponent) * 2.0;  // amax = mant * 2^(exponent - 1)
  int s = exponent - 1 - d.emax;
  const double top = std::ldexp(mant, d.emax);  // amax / 2^s
  if (mode == kir::MxScaleMode::Rceil && top > d.maxValue) ++s;
  if (mode == kir::MxScaleMode::Even && top >= d.saturateAt) ++s;
  return static_cast<uint8_t>(std::clamp(s, -127, 127) + 127);
}

/// The code of bf16 x under a scale byte: nearest table value to |x| / 2^(scale - 127), ties to
/// the even code, saturating to the top code, sign in bit 5; sign|0x1F
/// for a NaN/Inf element or a 0xFF scale.
uint8_t referenceCode(uint16_t x, uint8_t scale, kir::MxFormat f) {
  const uint8_t sign = (x & 0x8000) ? 0x20 : 0;
  if (scale == 0xFF || bf16IsNanOrInf(x)) return sign | 0x1F;
  const double y = std::ldexp(std::fabs(testing::referenceBf16Value(x)), 127 - scale);
  const std::array<double, 32> table = codeTable(f);
  // At and past the top every value is nearest to it; saying so keeps huge y, whose distances
  // to the top codes round to the same double, from looking like ties.
  if (y >= table[31]) return sign | 0x1F;
  int best = 0;
  for (int code = 1; code < 32; ++code) {
    const double dBest = std::fabs(y - table[best]), d = std::fabs(y - table[code]);
    if (d < dBest || (d == dBest && code % 2 == 0)) best = code;
  }
  return sign | static_cast<uint8_t>(best);
}

constexpr kir::MxFormat kFormats[] = {kir::MxFormat::E2M3, kir::MxFormat::E3M2};
constexpr kir::MxScaleMode kModes[] = {kir::MxScaleMode::Rceil, kir::MxScaleMode::Even,
                                       kir::MxScaleMode::Floor};

std::string variantText(kir::MxFormat f, kir::MxScaleMode m) {
  static const char* const kModeNames[] = {"RCEIL", "EVEN", "FLOOR"};
  return std::string(f == kir::MxFormat::E2M3 ? "E2M3" : "E3M2") + "/" +
         kModeNames[static_cast<int>(m)];
}

// ---------------------------------------------------------------------------------------------
// MxScale, MxEncode, Pack6 one by one

TEST(InterpMx, MxScaleOfEveryFiniteAmaxMatchesTheFormula) {
  // scales(x: bf16[T, 32], s: out u8[T, 1]) { row t in T { s[t, :] = mx_scale(x[t, :], F, M) } }
  // Row b < 0x7F80 holds the amax pattern b at a random position with a random sign and 31
  // random elements of smaller magnitude; then blocks with a NaN or an Inf somewhere.
  std::mt19937 rng(17);
  std::vector<uint16_t> xs;
  for (uint32_t amax = 0; amax < 0x7F80; ++amax) {
    uint16_t block[32];
    for (uint16_t& e : block) e = static_cast<uint16_t>((rng() % (amax + 1)) | (rng() & 0x8000));
    block[rng() % 32] = static_cast<uint16_t>(amax | (rng() & 0x8000));
    xs.insert(xs.end(), block, block + 32);
  }
  for (uint16_t special : {0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81}) {
    for (int pos : {0, 13, 31}) {
      uint16_t block[32];
      for (uint16_t& e : block) e = static_cast<uint16_t>(rng() & 0xFF7F);  // finite
      block[pos] = special;
      xs.insert(xs.end(), block, block + 32);
    }
  }
  const int64_t rows = static_cast<int64_t>(xs.size() / 32);

  for (kir::MxFormat f : kFormats) {
    for (kir::MxScaleMode mode : kModes) {
      SCOPED_TRACE(variantText(f, mode));
      KirBuilder b("scales");
      b.tensor("x", Dtype::BF16, {"T", 32});
      b.tensor("s", Dtype::U8, {"T", 1}, true);
      b.rows({"t"}, {"T"});
      const int t = b.rowIndex(0);
      const int x = loadRow(b, 0, t, 32);
      storeRow(b, 1, t, 1,
               b.vectorOp(OpCode::MxScale, {x}, vectorType(Dtype::U8, 1), kir::mxVariant(f, mode)));
      std::vector<uint8_t> s(static_cast<size_t>(rows), 0x5A);
      std::vector<Arg> args = {view(xs, Dtype::BF16, {rows, 32}), view(s, Dtype::U8, {rows, 1})};
      const Status st = run(b.kernel(), args);
      ASSERT_TRUE(st.isOk()) << st.message();
      int64_t differing = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t want = referenceScale(&xs[r * 32], f, mode);
        if (s[r] != want && ++differing <= 5) {
          ADD_FAILURE() << "block " << r << ": scale " << int(s[r]) << ", expected " << int(want);
        }
      }
      EXPECT_EQ(differing, 0);
    }
  }
}

TEST(InterpMx, MxEncodeOfEveryBf16PatternUnderGivenScalesMatchesTheTable) {
  // codes(x: bf16[T, 32], s: u8[T, 1], c: out u8[T, 32]) {
  //   row t in T { c[t, :] = mx_encode(x[t, :], s[t, :], F) }
  // }
  // Every bf16 pattern (2048 rows of 32) under each of these scale bytes, which take typical
  // elements to the top, middle and bottom of the grid, to zero and to saturation.
  const uint8_t kScales[] = {0x00, 0x01, 0x6E, 0x7C, 0x7F, 0x81, 0x85, 0xFD, 0xFE, 0xFF};
  constexpr int64_t kRowsPerScale = 65536 / 32;
  const int64_t rows = kRowsPerScale * static_cast<int64_t>(std::size(kScales));
  std::vector<uint16_t> xs(static_cast<size_t>(rows * 32));
  std::vector<uint8_t> scales(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    scales[r] = kScales[r / kRowsPerScale];
    for (int e = 0; e < 32; ++e) xs[r * 32 + e] = static_cast<uint16_t>((r % kRowsPerScale) * 32 + e);
  }
  for (kir::MxFormat f : kFormats) {
    SCOPED_TRACE(variantText(f, kir::MxScaleMode::Rceil));
    KirBuilder b("codes");
    b.tensor("x", Dtype::BF16, {"T", 32});
    b.tensor("s", Dtype::U8, {"T", 1});
    b.tensor("c", Dtype::U8, {"T", 32}, true);
    b.rows({"t"}, {"T"});
    const int t = b.rowIndex(0);
    const int x = loadRow(b, 0, t, 32), s = loadRow(b, 1, t, 1);
    storeRow(b, 2, t, 32,
             b.vectorOp(OpCode::MxEncode, {x, s}, vectorType(Dtype::U8, 32),
                        kir::mxVariant(f, kir::MxScaleMode::Rceil)));
    std::vector<uint8_t> c(xs.size(), 0xEE);
    std::vector<Arg> args = {view(xs, Dtype::BF16, {rows, 32}), view(scales, Dtype::U8, {rows, 1}),
                             view(c, Dtype::U8, {rows, 32})};
    const Status st = run(b.kernel(), args);
    ASSERT_TRUE(st.isOk()) << st.message();
    int64_t differing = 0;
    for (size_t j = 0; j < xs.size(); ++j) {
      const uint8_t want = referenceCode(xs[j], scales[j / 32], f);
      if (c[j] != want && ++differing <= 5) {
        ADD_FAILURE() << "x 0x" << std::hex << xs[j] << " scale 0x" << int(scales[j / 32])
                      << ": code 0x" << int(c[j]) << ", expected 0x" << int(want);
      }
    }
    EXPECT_EQ(differing, 0);
  }
}

kir::Kernel pack6Kernel() {
  // pack(c: u8[T, 8], p: out u8[T, 6]) { row t in T { p[t, :] = pack6(c[t, :]) } }
  KirBuilder b("pack", "pack.mxk");
  b.tensor("c", Dtype::U8, {"T", 8});
  b.tensor("p", Dtype::U8, {"T", 6}, true);
  b.rows({"t"}, {"T"});
  const int t = b.rowIndex(0);
  const int c = loadRow(b, 0, t, 8);
  b.at(2, 17);
  storeRow(b, 1, t, 6, b.vectorOp(OpCode::Pack6, {c}, vectorType(Dtype::U8, 6)));
  return b.take();
}

TEST(InterpMx, Pack6IsTheLsbFirst24BitWord) {
  const kir::Kernel k = pack6Kernel();
  constexpr int kRows = 300;
  std::mt19937 rng(23);
  // The spec's examples first, then random codes (with 0 and 0x3F frequent).
  std::vector<uint8_t> codes = {0x3F, 0, 0, 0, 0, 0x3F, 0, 0, 1, 2, 3, 4, 0x3F, 0x3F, 0x3F, 0x3F};
  while (codes.size() < kRows * 8) {
    const uint32_t u = rng();
    codes.push_back(static_cast<uint8_t>(u % 4 == 0 ? 0 : u % 4 == 1 ? 0x3F : (u >> 8) % 64));
  }
  std::vector<uint8_t> packed(kRows * 6, 0xEE);
  std::vector<Arg> args = {view(codes, Dtype::U8, {kRows, 8}), view(packed, Dtype::U8, {kRows, 6})};
  const Status st = run(k, args);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(std::vector<uint8_t>(packed.begin(), packed.begin() + 6),
            (std::vector<uint8_t>{0x3F, 0x00, 0x00, 0xC0, 0x0F, 0x00}));
  EXPECT_EQ(std::vector<uint8_t>(packed.begin() + 6, packed.begin() + 9),
            (std::vector<uint8_t>{0x81, 0x30, 0x10}));
  for (size_t q = 0; q < codes.size() / 4; ++q) {
    const uint8_t* c = &codes[4 * q];
    const uint32_t w = c[0] + 64u * c[1] + 4096u * c[2] + 262144u * c[3];
    ASSERT_EQ(packed[3 * q], w % 256) << q;
    ASSERT_EQ(packed[3 * q + 1], (w / 256) % 256) << q;
    ASSERT_EQ(packed[3 * q + 2], w / 65536) << q;
  }
}

TEST(InterpMx, Pack6OfAValueAbove63IsALocatedError) {
  const kir::Kernel k = pack6Kernel();
  std::vector<uint8_t> codes(16, 1), packed(12, 0xEE);
  codes[8 + 5] = 64;
  std::vector<Arg> args = {view(codes, Dtype::U8, {2, 8}), view(packed, Dtype::U8, {2, 6})};
  const Status st = run(k, args);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(),
              HasSubstr("pack.mxk:2:17: error: code 64 (element 5) is not a 6-bit code"));
  EXPECT_THAT(st.message(), HasSubstr("row t=1"));
  EXPECT_THAT(st.message(), HasSubstr("Pack6"));
  EXPECT_EQ(packed[0], 0x41);  // row 0 was packed: 1 | 1 << 6
  EXPECT_EQ(packed[6], 0xEE);  // row 1 was not stored
}

// ---------------------------------------------------------------------------------------------
// The row packer in KIR against mx::packRows

/// pack_rows(X: bf16[R, C], data: out u8[R, 3C/4], scales: out u8[R, C/32])
///   variant FMT, MODE { row r in R { x = X[r, :]; s = mx_scale(x, FMT, MODE)
///                                    data[r, :] = pack6(mx_encode(x, s, FMT)); scales[r, :] = s } }
kir::Kernel rowPacker(int64_t cols, kir::MxFormat f, kir::MxScaleMode mode) {
  KirBuilder b("pack_rows", "pack_rows.mxk");
  b.tensor("X", Dtype::BF16, {"R", {"C", cols}});
  b.tensor("data", Dtype::U8, {"R", cols / 4 * 3}, true);
  b.tensor("scales", Dtype::U8, {"R", cols / 32}, true);
  b.rows({"r"}, {"R"});
  const int r = b.rowIndex(0);
  const int x = loadRow(b, 0, r, cols);
  const int64_t variant = kir::mxVariant(f, mode);
  const int s = b.vectorOp(OpCode::MxScale, {x}, vectorType(Dtype::U8, cols / 32), variant);
  const int codes = b.vectorOp(OpCode::MxEncode, {x, s}, vectorType(Dtype::U8, cols), variant);
  const int bytes = b.vectorOp(OpCode::Pack6, {codes}, vectorType(Dtype::U8, cols / 4 * 3));
  storeRow(b, 1, r, cols / 4 * 3, bytes);
  storeRow(b, 2, r, cols / 32, s);
  return b.take();
}

/// Random bf16 rows whose blocks mix random magnitudes with zeros (both signs), subnormals only,
/// subnormals next to the smallest normals (scale clamped at 0), the largest finite values,
/// amax mantissas at the RCEIL/EVEN thresholds, and a NaN, +Inf or -Inf somewhere.
std::vector<uint16_t> packerInput(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  auto randomBits = [&](int expLo, int expHi) {
    const int e = expLo + static_cast<int>(rng() % static_cast<uint32_t>(expHi - expLo + 1));
    return static_cast<uint16_t>((rng() & 0x8000) | (e << 7) | (rng() & 0x7F));
  };
  for (int64_t blk = 0; blk < rows * cols / 32; ++blk) {
    uint16_t* b = &x[static_cast<size_t>(blk * 32)];
    const int centre = 90 + static_cast<int>(rng() % 75);  // 2^-37 .. 2^37
    for (int e = 0; e < 32; ++e) b[e] = randomBits(centre - 6, centre + 3);
    switch (blk % 12) {
      case 0: break;
      case 1:
        for (int e = 0; e < 32; ++e) b[e] = (rng() & 1) ? 0x8000 : 0x0000;
        break;
      case 2:
        for (int e = 0; e < 32; ++e) b[e] = static_cast<uint16_t>((rng() & 0x807F));
        break;
      case 3:
        for (int e = 0; e < 32; ++e) b[e] = randomBits(0, 2);
        break;
      case 4:
        for (int e = 0; e < 32; ++e) b[e] = randomBits(250, 254);
        break;
      case 5: {
        static const uint16_t kM7[] = {96, 97, 111, 112, 113, 119, 120, 121, 127};
        b[rng() % 32] = static_cast<uint16_t>(((centre + 4) << 7) | kM7[rng() % 9] | (rng() & 0x8000));
        break;
      }
      case 6: b[rng() % 32] = 0x7FC0; break;
      case 7: b[rng() % 32] = 0x7F80; break;
      case 8: b[rng() % 32] = 0xFF80; break;
      case 9: b[rng() % 32] = static_cast<uint16_t>(0xFF81 + rng() % 0x7E); break;
      case 10:
        for (int e = 0; e < 32; e += 2) b[e] = 0;
        break;
      default:
        for (int e = 0; e < 32; ++e) b[e] = static_cast<uint16_t>(rng() & 0xFFFF);  // anything
        break;
    }
  }
  return x;
}

TEST(InterpMx, KirRowPackerIsByteIdenticalToPackRows) {
  for (const int64_t cols : {int64_t{64}, int64_t{3072}}) {
    const int64_t rows = cols == 64 ? 96 : 8;
    const std::vector<uint16_t> xs = packerInput(rows, cols, static_cast<uint32_t>(cols));
    for (kir::MxFormat f : kFormats) {
      for (kir::MxScaleMode mode : kModes) {
        SCOPED_TRACE("C=" + std::to_string(cols) + " " + variantText(f, mode));
        const kir::Kernel k = rowPacker(cols, f, mode);
        std::vector<uint16_t> x = xs;
        std::vector<uint8_t> data(static_cast<size_t>(rows * cols / 4 * 3), 0xEE);
        std::vector<uint8_t> scales(static_cast<size_t>(rows * cols / 32), 0xEE);
        std::vector<Arg> args = {view(x, Dtype::BF16, {rows, cols}),
                                 view(data, Dtype::U8, {rows, cols / 4 * 3}),
                                 view(scales, Dtype::U8, {rows, cols / 32})};
        const Status st = run(k, args);
        ASSERT_TRUE(st.isOk()) << st.message();
        const mx::ElementFormat ef =
            f == kir::MxFormat::E2M3 ? mx::ElementFormat::E2M3 : mx::ElementFormat::E3M2;
        const mx::ScaleMode em = mode == kir::MxScaleMode::Rceil  ? mx::ScaleMode::Rceil
                                 : mode == kir::MxScaleMode::Even ? mx::ScaleMode::Even
                                                                  : mx::ScaleMode::Floor;
        Expected<mx::PackedBlobs> ref = mx::packRows(xs, rows, cols, ef, em);
        ASSERT_TRUE(ref.isOk()) << ref.status().message();
        EXPECT_EQ(scales, ref->scales);
        EXPECT_EQ(data, ref->data);
        // The input covers what it claims: NaN scales, zero scales and ordinary ones.
        EXPECT_NE(std::find(scales.begin(), scales.end(), 0xFF), scales.end());
        EXPECT_NE(std::find(scales.begin(), scales.end(), 0x00), scales.end());
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The value the MX builtins quantize

TEST(InterpMx, MxBuiltinsQuantizeTheRoundedBf16Value) {
  // cast_scale(x: f32[T, 64], s: out u8[T, 2], c: out u8[T, 64]) {
  //   row t in T { v = bf16(x[t, :]); s[t, :] = mx_scale(v, E2M3, FLOOR)
  //                c[t, :] = mx_encode(v, s[t, :], E2M3) }
  // }
  // bf16(...) does not round in the interpreter; the MX builtins round v once to nearest even:
  //   - block 0: x = 0x3FFFFFFF (2 - 2^-23) rounds to bf16 2.0, so the amax binade is 2^1 and the
  //     FLOOR scale 2^(1-2) (byte 126). Unrounded (2 - 2^-23) or truncated (bf16 0x3FFF, 1.99)
  //     the amax is in 2^0 and the scale would be 125. Its code: 2.0 / 2^-1 = 4 -> 0x18.
  //   - block 1: the largest float rounds to bf16 +Inf, so the block's scale is 0xFF and every
  //     code is sign|0x1F.
  KirBuilder b("cast_scale");
  b.tensor("x", Dtype::F32, {"T", 64});
  b.tensor("s", Dtype::U8, {"T", 2}, true);
  b.tensor("c", Dtype::U8, {"T", 64}, true);
  b.rows({"t"}, {"T"});
  const int t = b.rowIndex(0);
  const int v = b.cast(loadRow(b, 0, t, 64), Dtype::BF16);
  const int64_t variant = kir::mxVariant(kir::MxFormat::E2M3, kir::MxScaleMode::Floor);
  const int s = b.vectorOp(OpCode::MxScale, {v}, vectorType(Dtype::U8, 2), variant);
  storeRow(b, 1, t, 2, s);
  storeRow(b, 2, t, 64, b.vectorOp(OpCode::MxEncode, {v, s}, vectorType(Dtype::U8, 64), variant));

  std::vector<float> xs(64, 0.25f);
  xs[5] = std::bit_cast<float>(0x3FFFFFFFu);
  xs[32 + 7] = std::numeric_limits<float>::max();
  xs[32 + 8] = -1.0f;
  std::vector<uint8_t> sc(2), codes(64);
  std::vector<Arg> args = {view(xs, Dtype::F32, {1, 64}), view(sc, Dtype::U8, {1, 2}),
                           view(codes, Dtype::U8, {1, 64})};
  const Status st = run(b.kernel(), args);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(sc[0], 126);
  EXPECT_EQ(codes[5], 0x18);
  EXPECT_EQ(codes[0], 0x04);  // 0.25 / 2^-1 = 0.5: E2M3 subnormal 4 * 0.125
  EXPECT_EQ(sc[1], 0xFF);
  EXPECT_EQ(codes[32 + 7], 0x1F);
  EXPECT_EQ(codes[32 + 8], 0x3F);
  EXPECT_EQ(codes[32 + 0], 0x1F);
  // The same through the independent oracle on the RNE-rounded bits.
  uint16_t block0[32];
  for (int e = 0; e < 32; ++e) block0[e] = referenceBf16(xs[e]);
  EXPECT_EQ(block0[5], 0x4000);
  EXPECT_EQ(sc[0], referenceScale(block0, kir::MxFormat::E2M3, kir::MxScaleMode::Floor));
}

// ---------------------------------------------------------------------------------------------
// Validation before the first row

TEST(InterpRowBlocks, LengthRulesAreCheckedBeforeTheFirstRow) {
  // Each case builds one op over x: f32[T, 64] (v), its bf16 cast (h) and u8 vectors, with a
  // length or type its definition forbids.
  struct Case {
    const char* expected;
    OpCode code;
    std::vector<const char*> operands;  // "v" f32x64, "h" bf16x64, "q" u8x2, "u" u8x6, "w" u8x8,
                                        // "t" f32x3, "p" f32x32, "k" scalar f32
    kir::ValueType type;
    int64_t ival;
  };
  const Case cases[] = {
      {"Repeat: result length 20 should be 192", OpCode::Repeat, {"v"}, {Dtype::F32, 20}, 3},
      {"Repeat: count 0 is not positive", OpCode::Repeat, {"v"}, {Dtype::F32, 0}, 0},
      {"Repeat: operand 0 (value", OpCode::Repeat, {"k"}, {Dtype::F32, 3}, 3},
      {"GroupReduceSum: operand length 64 is not a multiple of the group size 24",
       OpCode::GroupReduceSum, {"v"}, {Dtype::F32, 2}, 24},
      {"GroupReduceMax: result length 4 should be 2", OpCode::GroupReduceMax, {"v"},
       {Dtype::F32, 4}, 32},
      {"GroupReduceMin: result type i32 should be f32", OpCode::GroupReduceMin, {"v"},
       {Dtype::I32, 2}, 32},
      {"RotatePairs: operand 1 is f32x3, expected f32x32", OpCode::RotatePairs, {"v", "t", "p"},
       {Dtype::F32, 64}, 0},
      {"RotatePairs: operand 0 (value", OpCode::RotatePairs, {"k", "p", "p"},
       {Dtype::F32, 64}, 0},
      {"expects 3 operands, has 2", OpCode::RotatePairs, {"v", "p"}, {Dtype::F32, 64}, 0},
      {"MxScale: operand is f32x64, expected a bf16 vector", OpCode::MxScale, {"v"},
       {Dtype::U8, 2}, 0},
      {"MxScale: result length 64 should be 2", OpCode::MxScale, {"h"}, {Dtype::U8, 64}, 0},
      {"MxScale: ival 3 is not an MX variant", OpCode::MxScale, {"h"}, {Dtype::U8, 2}, 3},
      {"MxEncode: operand 1 is u8x6, expected u8x2", OpCode::MxEncode, {"h", "u"},
       {Dtype::U8, 64}, 0},
      {"MxEncode: result type f32 should be u8", OpCode::MxEncode, {"h", "q"}, {Dtype::F32, 64}, 0},
      {"Pack6: operand is u8x6, expected a u8 vector whose length is a multiple of 4",
       OpCode::Pack6, {"u"}, {Dtype::U8, 4}, 0},
      {"Pack6: result length 8 should be 6", OpCode::Pack6, {"w"}, {Dtype::U8, 8}, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    KirBuilder b("malformed", "bad.mxk");
    b.tensor("x", Dtype::F32, {"T", 64});
    b.tensor("q8", Dtype::U8, {"T", 2});
    b.tensor("u8", Dtype::U8, {"T", 6});
    b.tensor("w8", Dtype::U8, {"T", 8});
    b.tensor("y", Dtype::F32, {"T", 1}, true);
    b.rows({"t"}, {"T"});
    const int t = b.rowIndex(0);
    const int v = loadRow(b, 0, t, 64);
    const int h = b.cast(v, Dtype::BF16);
    const int q = loadRow(b, 1, t, 2), u = loadRow(b, 2, t, 6), w = loadRow(b, 3, t, 8);
    const int three = b.vectorOp(OpCode::GroupReduceSum, {b.vectorOp(OpCode::Repeat, {v},
                                                                     vectorType(Dtype::F32, 192), 3)},
                                 vectorType(Dtype::F32, 3), 64);
    const int p = b.vectorOp(OpCode::GroupReduceMax, {v}, vectorType(Dtype::F32, 32), 2);
    const int k = b.reduce(OpCode::ReduceSum, v);
    // A valid store first: a validation error must stop the run before it executes.
    storeRow(b, 4, t, 1, b.vectorOp(OpCode::GroupReduceSum, {v}, vectorType(Dtype::F32, 1), 64));
    std::vector<int> ids;
    for (const char* o : c.operands) {
      const std::string n = o;
      ids.push_back(n == "v" ? v : n == "h" ? h : n == "q" ? q : n == "u" ? u : n == "w" ? w : n == "t" ? three
                    : n == "p" ? p : k);
    }
    b.at(4, 2);
    b.vectorOp(c.code, ids, c.type, c.ival);
    std::vector<float> x(64, 1.0f), y(1, -1.0f);
    std::vector<uint8_t> q8(2, 0x7F), u8(6, 1), w8(8, 1);
    std::vector<Arg> args = {view(x, Dtype::F32, {1, 64}), view(q8, Dtype::U8, {1, 2}),
                             view(u8, Dtype::U8, {1, 6}), view(w8, Dtype::U8, {1, 8}),
                             view(y, Dtype::F32, {1, 1})};
    const Status st = run(b.kernel(), args);
    ASSERT_FALSE(st.isOk());
    EXPECT_THAT(st.message(), HasSubstr(std::string("bad.mxk:4:2: error: invalid KIR: ") +
                                        c.expected));
    EXPECT_THAT(st.message(), HasSubstr(kir::opName(c.code)));
    EXPECT_EQ(y[0], -1.0f);
  }
}

}  // namespace
}  // namespace mxfp6::interp
