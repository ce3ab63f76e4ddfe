// QK RMSNorm + interleaved RoPE (docs/architecture.md section 4.1) on the GPU against the fp64 interpreter
// running the same DSL kernels: the whole-QKV forward and backward (norm_rope_qkv_fwd/_bwd) in
// both mixed_qkv layouts, and the per-tensor entry points (norm_rope_fwd/_bwd) reading one part
// of mixed_qkv through its strides -- K of a Megatron per-head [T, H, 3, 128] buffer (token
// stride 3*H*128, head stride 3*128, base pointer at the K part) and Q of a blocked
// [T, 3, H, 128] one (token stride 3*H*128, head stride 128, base pointer at the buffer).
// Every backward is followed by norm_rope_dw_reduce.
//
// Reference: compiler/interp at fp64 (fp64 shadows of every output it stores).
// Forward metrics and bounds (whole-QKV q, k and per-tensor y alike):
//   rstd:     relative error <= 1e-5.
//   q, k, y:  within 1 bf16 ulp of bf16(ref), except where the rotation cancels
//             (y[2i] = c*n[2i] - s*n[2i+1]): there |gpu - ref| <= 0.5*ulp_bf16(ref) + 2^-20 *
//             (|c*n[2i]| + |s*n[2i+1]|), n = x*rstd*w (docs/architecture.md section 4.5's bound, terms = the
//             addends of the last operation). Elements beyond 1 ulp are counted and reported.
//   v:        bit-exact copy.
// Backward bounds: see the backward section below. Every output bit-identical across two
// launches; outputs poisoned (NaN) before each launch.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "compiler/interp/float_formats.h"
#include "compiler/interp/interpreter.h"
#include "compiler/interp/mxfp6.h"
#include "tests/gpu/gpu_harness.h"

namespace mxfp6 {
namespace {

constexpr int64_t kDh = 128, kPairs = 64;

struct Shape {
  int64_t tokens, heads, positions, posDiv;
};

enum class Layout { Megatron, Blocked };

/// Host data of one problem: mixed_qkv, weights and tables; the fp64 reference outputs.
struct Problem {
  Shape shape;
  Layout layout;
  std::vector<uint16_t> qkv, qWeight, kWeight;
  std::vector<float> qCos, qSin, kCos, kSin;
  int64_t tokenStride, partStride, headStride;  // the [T, 3, H, 128] view's strides
};

Problem makeProblem(const Shape& s, Layout layout, uint64_t seed) {
  Problem p{s, layout};
  std::mt19937_64 rng(seed);
  int64_t n = s.tokens * 3 * s.heads * kDh;
  p.qkv.resize(n);
  // Per-row scales vary so rstd varies; values straddle zero so the rotation cancels sometimes.
  std::uniform_real_distribution<float> spread(0.25f, 4.0f);
  for (int64_t row = 0; row < 3 * s.tokens * s.heads; ++row)
    gputest::fillNormalBf16(p.qkv, row * kDh, kDh, 0.0f, spread(rng), rng);
  p.qWeight.resize(kDh);
  p.kWeight.resize(kDh);
  gputest::fillNormalBf16(p.qWeight, 0, kDh, 1.0f, 0.2f, rng);
  gputest::fillNormalBf16(p.kWeight, 0, kDh, 1.0f, 0.2f, rng);
  std::uniform_real_distribution<float> angle(-3.14159f, 3.14159f);
  for (auto* table : {&p.qCos, &p.kCos}) table->resize(s.positions * kPairs);
  for (auto* table : {&p.qSin, &p.kSin}) table->resize(s.positions * kPairs);
  for (int64_t i = 0; i < s.positions * kPairs; ++i) {
    float a = angle(rng), b = angle(rng);
    p.qCos[i] = std::cos(a);
    p.qSin[i] = std::sin(a);
    p.kCos[i] = std::cos(b);
    p.kSin[i] = std::sin(b);
  }
  int64_t H = s.heads;
  p.tokenStride = 3 * H * kDh;
  p.partStride = layout == Layout::Megatron ? kDh : H * kDh;
  p.headStride = layout == Layout::Megatron ? 3 * kDh : kDh;
  return p;
}

constexpr const char* kDsl = "kernels_dsl/norm_rope.mxk";

const char* layoutName(Layout layout) { return layout == Layout::Megatron ? "megatron" : "blocked"; }

/// Every test's parameters: 16384 tokens x 24 heads = 393216 QK rows (Flux double blocks at B=64,
/// or single blocks at B=32) and two ragged shapes with a sequence-major position divisor (15
/// rows: fewer than one program; 999: an odd number, so the last program of every schedule,
/// SERIAL row groups included, is partly past the end), each in both layouts.
using ShapeAndLayout = std::tuple<Shape, Layout>;

auto shapesAndLayouts() {
  return ::testing::Combine(::testing::Values(Shape{16384, 24, 512, 1}, Shape{5, 3, 4, 2}, Shape{333, 3, 40, 2}),
                            ::testing::Values(Layout::Megatron, Layout::Blocked));
}

/// Test names of the whole-QKV tests: T16384_megatron, T5_blocked, ...
std::string layoutTestName(const ::testing::TestParamInfo<ShapeAndLayout>& info) {
  return "T" + std::to_string(std::get<0>(info.param).tokens) + "_" + layoutName(std::get<1>(info.param));
}

/// Offset in mixed_qkv (and d(mixed_qkv)) of the 128 elements of `part` (0 = Q, 1 = K, 2 = V) in
/// row r = token * H + head.
int64_t rowBase(const Problem& p, int64_t r, int part) {
  return (r / p.shape.heads) * p.tokenStride + part * p.partStride + (r % p.shape.heads) * p.headStride;
}

interp::TensorArg tensor(const void* data, kir::Dtype dtype, std::vector<int64_t> shape, int64_t extent) {
  return {const_cast<void*>(data), dtype, std::move(shape), extent};
}

/// Pointers of one problem's buffers, on the host (interpreter) or the device.
struct Buffers {
  const void *qkv, *qWeight, *kWeight, *qCos, *qSin, *kCos, *kSin;
  void *q, *k, *v, *qRstd, *kRstd;
};

std::vector<interp::Arg> qkvArgs(const Problem& p, const Buffers& b) {
  const Shape& s = p.shape;
  int64_t rows = s.tokens * s.heads, table = s.positions * kPairs;
  return {tensor(b.qkv, kir::Dtype::BF16, {s.tokens, 3, s.heads, kDh}, int64_t(p.qkv.size())),
          tensor(b.qWeight, kir::Dtype::BF16, {kDh}, kDh),
          tensor(b.kWeight, kir::Dtype::BF16, {kDh}, kDh),
          tensor(b.qCos, kir::Dtype::F32, {s.positions, kPairs}, table),
          tensor(b.qSin, kir::Dtype::F32, {s.positions, kPairs}, table),
          tensor(b.kCos, kir::Dtype::F32, {s.positions, kPairs}, table),
          tensor(b.kSin, kir::Dtype::F32, {s.positions, kPairs}, table),
          tensor(b.q, kir::Dtype::BF16, {s.tokens, s.heads, kDh}, rows * kDh),
          tensor(b.k, kir::Dtype::BF16, {s.tokens, s.heads, kDh}, rows * kDh),
          tensor(b.v, kir::Dtype::BF16, {s.tokens, s.heads, kDh}, rows * kDh),
          tensor(b.qRstd, kir::Dtype::F32, {s.tokens, s.heads}, rows),
          tensor(b.kRstd, kir::Dtype::F32, {s.tokens, s.heads}, rows),
          p.tokenStride, p.partStride, p.headStride, s.posDiv, std::monostate{}};
}

/// Outputs of one run: q, k, v (bf16 bits) and the two rstd arrays.
struct Outputs {
  std::vector<uint16_t> q, k, v;
  std::vector<float> qRstd, kRstd;
  bool operator==(const Outputs& o) const {
    return q == o.q && k == o.k && v == o.v &&
           std::memcmp(qRstd.data(), o.qRstd.data(), qRstd.size() * 4) == 0 &&
           std::memcmp(kRstd.data(), o.kRstd.data(), kRstd.size() * 4) == 0;
  }
};

/// A host run's input pointers into `p`; the outputs are null (a caller sets those it has).
Buffers hostInputs(const Problem& p) {
  return {p.qkv.data(), p.qWeight.data(), p.kWeight.data(), p.qCos.data(), p.qSin.data(), p.kCos.data(),
          p.kSin.data(), nullptr, nullptr, nullptr, nullptr, nullptr};
}

/// Where a code object's time goes: its two runs (uploads, launches, downloads), the comparison
/// of their outputs and the check against the reference, printed after its RESULT line. At
/// T = 16384 the runs take about 70 % of an object's 1.1-1.4 s and the check a quarter.
class ObjectTimes {
 public:
  void mark(double& into) {
    auto now = std::chrono::steady_clock::now();
    into += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  void print(const char* kernel, const std::string& what) const {
    std::printf("TIME %s %s runs=%.2fs compare=%.2fs check=%.2fs\n", kernel, what.c_str(), runs, compare, check);
  }
  double runs = 0, compare = 0, check = 0;

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

/// Runs `run()` (an Expected of outputs that compare with ==) twice and hands the first outputs
/// and whether both runs were bit-identical to `check(outputs, identical)`, then prints the
/// TIME line of `kernel` at `what`. False, with the test failed, where a run fails.
template <typename Run, typename Check>
bool runTwiceAndCheck(const char* kernel, const std::string& what, Run run, Check check) {
  ObjectTimes times;
  auto first = run();
  if (!first.isOk()) {
    ADD_FAILURE() << first.status().message();
    return false;
  }
  auto second = run();
  if (!second.isOk()) {
    ADD_FAILURE() << second.status().message();
    return false;
  }
  times.mark(times.runs);
  bool identical = *first == *second;
  times.mark(times.compare);
  check(*first, identical);
  times.mark(times.check);
  times.print(kernel, what);
  return true;
}

/// For each code object of `kernel`: instantiates the DSL kernel at its configuration, runs
/// `run(obj, kernel)` (an Expected of outputs that compare with ==) twice, and hands the first
/// outputs and whether both runs were bit-identical to `check(obj, outputs, identical)`. A failed
/// instantiation or run ends the test.
template <typename Run, typename Check>
void forEachCodeObject(const std::vector<gputest::CodeObject>& objects, const char* kernel, Run run, Check check) {
  std::string error;
  for (const gputest::CodeObject& obj : objects) {
    SCOPED_TRACE(obj.path);
    auto instance = gputest::instantiateDsl(kDsl, kernel, obj.metadata.config, error);
    ASSERT_TRUE(instance) << error;
    if (!runTwiceAndCheck(kernel, gputest::configTag(obj.metadata), [&] { return run(obj, *instance); },
                          [&](const auto& outputs, bool identical) { check(obj, outputs, identical); }))
      return;
  }
}

/// The same for every pair of a backward code object of `bwdKernel` and a norm_rope_dw_reduce
/// one: `run(bwdObj, bwd, reduceObj, reduce)`, `check(bwdObj, outputs, identical)`.
template <typename Run, typename Check>
void forEachBwdPair(const std::vector<gputest::CodeObject>& bwdObjects, const char* bwdKernel,
                    const std::vector<gputest::CodeObject>& reduceObjects, Run run, Check check) {
  std::string error;
  for (const gputest::CodeObject& bwdObj : bwdObjects)
    for (const gputest::CodeObject& reduceObj : reduceObjects) {
      SCOPED_TRACE(bwdObj.path + " + " + reduceObj.path);
      auto bwd = gputest::instantiateDsl(kDsl, bwdKernel, bwdObj.metadata.config, error);
      ASSERT_TRUE(bwd) << error;
      auto reduce = gputest::instantiateDsl(kDsl, "norm_rope_dw_reduce", reduceObj.metadata.config, error);
      ASSERT_TRUE(reduce) << error;
      if (!runTwiceAndCheck(bwdKernel,
                            gputest::configTag(bwdObj.metadata) + " + " + gputest::configTag(reduceObj.metadata),
                            [&] { return run(bwdObj, *bwd, reduceObj, *reduce); },
                            [&](const auto& outputs, bool identical) { check(bwdObj, outputs, identical); }))
        return;
    }
}

Outputs sized(const Shape& s) {
  int64_t rows = s.tokens * s.heads;
  Outputs o;
  o.q.resize(rows * kDh);
  o.k.resize(rows * kDh);
  o.v.resize(rows * kDh);
  o.qRstd.resize(rows);
  o.kRstd.resize(rows);
  return o;
}

/// Uploads one problem's inputs (mixed_qkv, weights, tables) into `d`, which keeps the device
/// memory alive; the output pointers of the result are null. Shared by every GPU run below.
Expected<Buffers> uploadProblem(rt::Device& dev, gputest::DeviceArgs& d, const Problem& p) {
  auto up = [&](const auto& v) { return d.upload(dev, v.data(), v.size() * sizeof(v[0])); };
  Buffers b{};
  ASSIGN_OR_RETURN(b.qkv, up(p.qkv));
  ASSIGN_OR_RETURN(b.qWeight, up(p.qWeight));
  ASSIGN_OR_RETURN(b.kWeight, up(p.kWeight));
  ASSIGN_OR_RETURN(b.qCos, up(p.qCos));
  ASSIGN_OR_RETURN(b.qSin, up(p.qSin));
  ASSIGN_OR_RETURN(b.kCos, up(p.kCos));
  ASSIGN_OR_RETURN(b.kSin, up(p.kSin));
  return b;
}

Expected<Outputs> runQkvOnGpu(rt::Device& dev, const gputest::CodeObject& obj, const kir::Kernel& kernel,
                              const Problem& p) {
  Outputs out = sized(p.shape);
  size_t rowsBytes = out.q.size() * 2, statBytes = out.qRstd.size() * 4;
  gputest::DeviceArgs d;
  ASSIGN_OR_RETURN(Buffers b, uploadProblem(dev, d, p));
  ASSIGN_OR_RETURN(b.q, d.output(dev, rowsBytes));
  ASSIGN_OR_RETURN(b.k, d.output(dev, rowsBytes));
  ASSIGN_OR_RETURN(b.v, d.output(dev, rowsBytes));
  ASSIGN_OR_RETURN(b.qRstd, d.output(dev, statBytes));
  ASSIGN_OR_RETURN(b.kRstd, d.output(dev, statBytes));
  RETURN_IF_ERROR(gputest::launch(dev, obj, kernel, qkvArgs(p, b), p.shape.tokens * p.shape.heads));
  ASSIGN_OR_RETURN(out.q, gputest::download<uint16_t>(dev, b.q, out.q.size()));
  ASSIGN_OR_RETURN(out.k, gputest::download<uint16_t>(dev, b.k, out.k.size()));
  ASSIGN_OR_RETURN(out.v, gputest::download<uint16_t>(dev, b.v, out.v.size()));
  ASSIGN_OR_RETURN(out.qRstd, gputest::download<float>(dev, b.qRstd, out.qRstd.size()));
  ASSIGN_OR_RETURN(out.kRstd, gputest::download<float>(dev, b.kRstd, out.kRstd.size()));
  return out;
}

/// A forward's outputs: the rotated rows (q and k together for the whole-QKV kernel) and their
/// rstd; v of the whole-QKV kernel is compared bit for bit.
struct Errors {
  double rstdRel = 0;
  int64_t vMismatches = 0, rstdNonFinite = 0;
  gputest::Bf16Check y;
  void merge(const Errors& o) {
    rstdRel = std::max(rstdRel, o.rstdRel);
    vMismatches += o.vMismatches;
    rstdNonFinite += o.rstdNonFinite;
    y.merge(o.y);
  }
};

/// Tokens [begin, end) of one rotated output (q or k) against its fp64 shadow with the bound of
/// the header.
void compareRotatedTokens(const Problem& p, int part, const std::vector<uint16_t>& gpu, const std::vector<double>& ref,
                          const std::vector<double>& rstd64, const std::vector<uint16_t>& weight,
                          const std::vector<float>& cosTable, const std::vector<float>& sinTable, int64_t begin,
                          int64_t end, Errors& e) {
  const Shape& s = p.shape;
  for (int64_t t = begin; t < end; ++t) {
    int64_t pos = (t / s.posDiv) % s.positions;
    for (int64_t h = 0; h < s.heads; ++h) {
      int64_t row = t * s.heads + h;
      const uint16_t* x = &p.qkv[rowBase(p, row, part)];
      for (int64_t j = 0; j < kDh; ++j) {
        int64_t i = row * kDh + j;
        e.y.addLazily(gpu[i], ref[i], [&] {
          int64_t pair = j / 2, even = j - j % 2;
          auto n = [&](int64_t jj) { return interp::bf16ToDouble(x[jj]) * rstd64[row] * interp::bf16ToDouble(weight[jj]); };
          double c = cosTable[pos * kPairs + pair], sn = sinTable[pos * kPairs + pair];
          double terms = std::fabs(c * n(j)) + std::fabs(sn * n(j % 2 ? even : even + 1));
          return std::ldexp(terms, -20);
        });
      }
    }
  }
}

/// Compares one rotated output (q or k), all tokens on every core, adding to `e`.
void compareRotated(const Problem& p, int part, const std::vector<uint16_t>& gpu, const std::vector<double>& ref,
                    const std::vector<double>& rstd64, const std::vector<uint16_t>& weight,
                    const std::vector<float>& cosTable, const std::vector<float>& sinTable, Errors& e) {
  e.merge(gputest::checkInParallel<Errors>(p.shape.tokens, [&](int64_t begin, int64_t end, Errors& into) {
    compareRotatedTokens(p, part, gpu, ref, rstd64, weight, cosTable, sinTable, begin, end, into);
  }));
}

/// A forward RESULT line: `label` (the layout, or the part and layout) padded to `labelWidth`;
/// `extra` goes before nonfinite (the whole-QKV v check).
void printFwdResult(const char* kernel, int labelWidth, const std::string& label, const gputest::CodeObject& obj,
                    const Shape& s, const Errors& e, const std::string& extra, bool identical) {
  std::printf("RESULT %s %-*s %-24s T=%-6lld H=%-3lld S=%-4lld pos_div=%lld rstd_rel=%.3g max_ulp=%.3g "
              "beyond_1ulp=%lld (max %.2f of bound, beyond=%lld)%s nonfinite=%lld deterministic=%s\n",
              kernel, labelWidth, label.c_str(), gputest::configTag(obj.metadata).c_str(), (long long)s.tokens, (long long)s.heads,
              (long long)s.positions, (long long)s.posDiv, e.rstdRel, e.y.maxUlp, (long long)e.y.beyondOneUlp,
              e.y.maxBoundFraction, (long long)e.y.beyondBound, extra.c_str(), (long long)(e.y.nonFinite + e.rstdNonFinite),
              identical ? "yes" : "NO");
}

/// Every test's fixture: `dev` is the process's device; a test skips where none opens.
class NormRopeGpu : public ::testing::TestWithParam<ShapeAndLayout> {
 protected:
  void SetUp() override {
    std::string whyNot;
    dev = gputest::device(&whyNot);
    if (!dev) GTEST_SKIP() << whyNot;
  }
  rt::Device* dev = nullptr;
};

class NormRopeQkvGpu : public NormRopeGpu {};

TEST_P(NormRopeQkvGpu, MatchesFp64InterpreterAndIsDeterministic) {
  auto objects = gputest::findCodeObjects("norm_rope_qkv_fwd");
  ASSERT_FALSE(objects.empty()) << "no norm_rope_qkv_fwd code objects in " << gputest::gpuKernelsDir();
  std::string error;
  auto reference = gputest::instantiateDsl(kDsl, "norm_rope_qkv_fwd", {}, error);
  ASSERT_TRUE(reference) << error;

  auto [shape, layout] = GetParam();
  Problem p = makeProblem(shape, layout, 7 + shape.tokens + int(layout));
  Outputs host = sized(shape);
  int64_t rows = shape.tokens * shape.heads;
  std::vector<double> q64(rows * kDh), k64(rows * kDh), qr64(rows), kr64(rows);
  Buffers hb = hostInputs(p);
  hb.q = host.q.data();
  hb.k = host.k.data();
  hb.v = host.v.data();
  hb.qRstd = host.qRstd.data();
  hb.kRstd = host.kRstd.data();
  interp::RunOptions opts = gputest::referenceOptions();
  opts.fp64Outputs = {{7, &q64}, {8, &k64}, {10, &qr64}, {11, &kr64}};
  Status ran = interp::run(*reference, qkvArgs(p, hb), opts);
  ASSERT_TRUE(ran.isOk()) << ran.message();

  forEachCodeObject(
      objects, "norm_rope_qkv_fwd",
      [&](const gputest::CodeObject& obj, const kir::Kernel& kernel) { return runQkvOnGpu(*dev, obj, kernel, p); },
      [&](const gputest::CodeObject& obj, const Outputs& out, bool identical) {
        Errors e;
        compareRotated(p, 0, out.q, q64, qr64, p.qWeight, p.qCos, p.qSin, e);
        compareRotated(p, 1, out.k, k64, kr64, p.kWeight, p.kCos, p.kSin, e);
        for (int64_t r = 0; r < rows; ++r) {
          if (!std::isfinite(out.qRstd[r]) || !std::isfinite(out.kRstd[r])) ++e.rstdNonFinite;
          e.rstdRel = std::max({e.rstdRel, std::fabs(out.qRstd[r] - qr64[r]) / qr64[r],
                                std::fabs(out.kRstd[r] - kr64[r]) / kr64[r]});
          e.vMismatches += std::memcmp(&p.qkv[rowBase(p, r, 2)], &out.v[r * kDh], kDh * 2) != 0;
        }
        printFwdResult("norm_rope_qkv_fwd", 8, layoutName(layout), obj, shape, e,
                       " v_mismatch_rows=" + std::to_string(e.vMismatches), identical);
        EXPECT_EQ(e.rstdNonFinite, 0);
        EXPECT_LE(e.rstdRel, 1e-5);
        e.y.expectOk("rotated rows");
        EXPECT_EQ(e.vMismatches, 0);
        EXPECT_TRUE(identical);
      });
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormRopeQkvGpu, shapesAndLayouts(), layoutTestName);


// ---------------------------------------------------------------------------------------------
// Per-tensor forward: norm_rope_fwd on one part of mixed_qkv read through its strides (K of a
// Megatron buffer, Q of a blocked one), y and rstd written contiguous. Bounds as above.

/// The part of mixed_qkv the per-tensor tests read: K of a Megatron buffer, Q of a blocked one.
int tensorPart(Layout layout) { return layout == Layout::Megatron ? 1 : 0; }

std::string partTag(Layout layout) {
  return std::string(tensorPart(layout) == 0 ? "Q" : "K") + "_of_" + layoutName(layout);
}

/// Elements of mixed_qkv from the part's first element to the end of the buffer: the extent of
/// the strided [T, H, 128] view whose base pointer is at the part.
int64_t partExtent(const Problem& p, int part) { return int64_t(p.qkv.size()) - part * p.partStride; }

/// `base` (mixed_qkv or d(mixed_qkv), on the host or the device) advanced to the part's first
/// element: the base pointer of the part's strided view.
const void* atPart(const void* base, const Problem& p, int part) {
  return static_cast<const uint16_t*>(base) + part * p.partStride;
}
void* atPart(void* base, const Problem& p, int part) { return static_cast<uint16_t*>(base) + part * p.partStride; }

/// Test names of the per-tensor tests: T16384_K_of_megatron, T5_Q_of_blocked, ...
std::string partTestName(const ::testing::TestParamInfo<ShapeAndLayout>& info) {
  return "T" + std::to_string(std::get<0>(info.param).tokens) + "_" + partTag(std::get<1>(info.param));
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

/// norm_rope_fwd's arguments: x = the part's strided view of b.qkv with that part's weight and
/// table (a per-tensor caller passes whichever it has; here Q's for Q and K's for K).
std::vector<interp::Arg> fwdArgs(const Problem& p, int part, const Buffers& b, void* y, void* rstd) {
  const Shape& s = p.shape;
  int64_t rows = s.tokens * s.heads, table = s.positions * kPairs;
  return {tensor(atPart(b.qkv, p, part), kir::Dtype::BF16, {s.tokens, s.heads, kDh}, partExtent(p, part)),
          tensor(part == 0 ? b.qWeight : b.kWeight, kir::Dtype::BF16, {kDh}, kDh),
          tensor(part == 0 ? b.qCos : b.kCos, kir::Dtype::F32, {s.positions, kPairs}, table),
          tensor(part == 0 ? b.qSin : b.kSin, kir::Dtype::F32, {s.positions, kPairs}, table),
          tensor(y, kir::Dtype::BF16, {s.tokens, s.heads, kDh}, rows * kDh),
          tensor(rstd, kir::Dtype::F32, {s.tokens, s.heads}, rows),
          p.tokenStride, p.headStride, s.posDiv, std::monostate{}};
}

struct FwdOutputs {
  std::vector<uint16_t> y;
  std::vector<float> rstd;
  bool operator==(const FwdOutputs& o) const { return y == o.y && sameBits(rstd, o.rstd); }
};

Expected<FwdOutputs> runFwdOnGpu(rt::Device& dev, const gputest::CodeObject& obj, const kir::Kernel& kernel,
                                 const Problem& p, int part) {
  int64_t rows = p.shape.tokens * p.shape.heads;
  gputest::DeviceArgs d;
  ASSIGN_OR_RETURN(Buffers b, uploadProblem(dev, d, p));
  ASSIGN_OR_RETURN(void* y, d.output(dev, rows * kDh * 2));
  ASSIGN_OR_RETURN(void* rstd, d.output(dev, rows * 4));
  RETURN_IF_ERROR(gputest::launch(dev, obj, kernel, fwdArgs(p, part, b, y, rstd), rows));
  FwdOutputs out;
  ASSIGN_OR_RETURN(out.y, gputest::download<uint16_t>(dev, y, rows * kDh));
  ASSIGN_OR_RETURN(out.rstd, gputest::download<float>(dev, rstd, rows));
  return out;
}

class NormRopeFwdGpu : public NormRopeGpu {};

TEST_P(NormRopeFwdGpu, StridedSliceMatchesFp64InterpreterAndIsDeterministic) {
  auto objects = gputest::findCodeObjects("norm_rope_fwd");
  ASSERT_FALSE(objects.empty()) << "no norm_rope_fwd code objects in " << gputest::gpuKernelsDir();
  std::string error;
  auto reference = gputest::instantiateDsl(kDsl, "norm_rope_fwd", {}, error);
  ASSERT_TRUE(reference) << error;

  auto [shape, layout] = GetParam();
  int part = tensorPart(layout);
  Problem p = makeProblem(shape, layout, 17 + shape.tokens + int(layout));
  int64_t rows = shape.tokens * shape.heads;
  std::vector<uint16_t> y(rows * kDh);
  std::vector<float> rstd(rows);
  std::vector<double> y64(rows * kDh), rstd64(rows);
  interp::RunOptions opts = gputest::referenceOptions();
  opts.fp64Outputs = {{4, &y64}, {5, &rstd64}};
  Status ran = interp::run(*reference, fwdArgs(p, part, hostInputs(p), y.data(), rstd.data()), opts);
  ASSERT_TRUE(ran.isOk()) << ran.message();

  forEachCodeObject(
      objects, "norm_rope_fwd",
      [&](const gputest::CodeObject& obj, const kir::Kernel& kernel) { return runFwdOnGpu(*dev, obj, kernel, p, part); },
      [&](const gputest::CodeObject& obj, const FwdOutputs& out, bool identical) {
        Errors e;
        compareRotated(p, part, out.y, y64, rstd64, part == 0 ? p.qWeight : p.kWeight, part == 0 ? p.qCos : p.kCos,
                       part == 0 ? p.qSin : p.kSin, e);
        for (int64_t r = 0; r < rows; ++r) {
          if (!std::isfinite(out.rstd[r])) ++e.rstdNonFinite;
          e.rstdRel = std::max(e.rstdRel, std::fabs(out.rstd[r] - rstd64[r]) / rstd64[r]);
        }
        printFwdResult("norm_rope_fwd", 13, partTag(layout), obj, shape, e, "", identical);
        EXPECT_EQ(e.rstdNonFinite, 0);
        EXPECT_LE(e.rstdRel, 1e-5);
        e.y.expectOk("rotated rows");
        EXPECT_TRUE(identical);
      });
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormRopeFwdGpu, shapesAndLayouts(), partTestName);

// ---------------------------------------------------------------------------------------------
// Whole-QKV backward: norm_rope_qkv_bwd (d(mixed_qkv) + dw partials) then norm_rope_dw_reduce.
// With dn = the inverse rotation of g, u = x*rstd, du = dn*w:
//   dq, dk:  1 ulp, or 0.5*ulp_bf16(ref) + 2^-20 * rstd*(|du|~ + |u| * sum(|du|~*|u|)/128),
//            |du|~ = (|c*g[2i]| + |s*g[2i+1]|) * |w| (the rotation's addends);
//   dv:      bit-exact copy into its strided columns;
//   dw (f32): |gpu - ref| <= (rows/P + P + 8) * 2^-24 * sum over rows of |dn|~ * |u|.

struct BwdInputs {
  std::vector<uint16_t> dq, dk, dv;
  std::vector<float> qRstd, kRstd;
};

BwdInputs makeBwdInputs(const Problem& p, uint64_t seed) {
  const Shape& s = p.shape;
  int64_t rows = s.tokens * s.heads;
  BwdInputs in;
  std::mt19937_64 rng(seed);
  for (auto* g : {&in.dq, &in.dk, &in.dv}) {
    g->resize(rows * kDh);
    gputest::fillNormalBf16(*g, 0, rows * kDh, 0.0f, 1.0f, rng);
  }
  for (auto [part, rstd] : {std::pair{0, &in.qRstd}, std::pair{1, &in.kRstd}}) {
    rstd->resize(rows);
    for (int64_t r = 0; r < rows; ++r) {
      const uint16_t* x = &p.qkv[rowBase(p, r, part)];
      double sq = 0;
      for (int64_t j = 0; j < kDh; ++j) sq += std::pow(interp::bf16ToDouble(x[j]), 2);
      (*rstd)[r] = float(1.0 / std::sqrt(sq / kDh + 1e-6));
    }
  }
  return in;
}

/// The magnitudes that bound the backward of one part (0 = Q, 1 = K) of mixed_qkv, given its
/// gradient g [T, H, 128] and rstd [T, H]: terms[i] = rstd*(|du|~ + |u| * sum(|du|~*|u|)/128) for
/// each element i of the part, indexed like p.qkv (the d(mixed_qkv) layout), and
/// dwMag[c] += sum over rows of |dn|~[c] * |u[c]|, with |dn|~ = the rotation's addends
/// (|c*g[2i]| + |s*g[2i+1]|, resp. |s*g[2i]| + |c*g[2i+1]|), |du|~ = |dn|~ * |w|.
void addBwdMagnitudes(const Problem& p, int part, const std::vector<uint16_t>& grad, const std::vector<float>& rstd,
                      std::vector<double>& terms, double* dwMag) {
  const Shape& s = p.shape;
  const auto& w = part == 0 ? p.qWeight : p.kWeight;
  const auto& cosT = part == 0 ? p.qCos : p.kCos;
  const auto& sinT = part == 0 ? p.qSin : p.kSin;
  for (int64_t r = 0; r < s.tokens * s.heads; ++r) {
    int64_t pos = (r / s.heads / s.posDiv) % s.positions, base = rowBase(p, r, part);
    double dn[kDh], u[kDh], sumDuU = 0;
    for (int64_t c = 0; c < kDh; ++c) {
      int64_t i = c / 2, even = c - c % 2;
      double co = std::fabs(cosT[pos * kPairs + i]), si = std::fabs(sinT[pos * kPairs + i]);
      double g0 = std::fabs(interp::bf16ToDouble(grad[r * kDh + even]));
      double g1 = std::fabs(interp::bf16ToDouble(grad[r * kDh + even + 1]));
      dn[c] = c % 2 ? si * g0 + co * g1 : co * g0 + si * g1;
      u[c] = std::fabs(interp::bf16ToDouble(p.qkv[base + c])) * rstd[r];
      sumDuU += dn[c] * std::fabs(interp::bf16ToDouble(w[c])) * u[c];
      dwMag[c] += dn[c] * u[c];
    }
    for (int64_t c = 0; c < kDh; ++c)
      terms[base + c] = rstd[r] * (dn[c] * std::fabs(interp::bf16ToDouble(w[c])) + u[c] * sumDuU / kDh);
  }
}

std::vector<interp::Arg> bwdArgs(const Problem& p, const BwdInputs& in, const Buffers& b, const void* dq,
                                 const void* dk, const void* dv, const void* qr, const void* kr, void* dqkv,
                                 void* dwPart, int64_t partials) {
  const Shape& s = p.shape;
  int64_t rows = s.tokens * s.heads, table = s.positions * kPairs;
  return {tensor(dq, kir::Dtype::BF16, {s.tokens, s.heads, kDh}, rows * kDh),
          tensor(dk, kir::Dtype::BF16, {s.tokens, s.heads, kDh}, rows * kDh),
          tensor(dv, kir::Dtype::BF16, {s.tokens, s.heads, kDh}, rows * kDh),
          tensor(b.qkv, kir::Dtype::BF16, {s.tokens, 3, s.heads, kDh}, int64_t(p.qkv.size())),
          tensor(b.qWeight, kir::Dtype::BF16, {kDh}, kDh),
          tensor(b.kWeight, kir::Dtype::BF16, {kDh}, kDh),
          tensor(b.qCos, kir::Dtype::F32, {s.positions, kPairs}, table),
          tensor(b.qSin, kir::Dtype::F32, {s.positions, kPairs}, table),
          tensor(b.kCos, kir::Dtype::F32, {s.positions, kPairs}, table),
          tensor(b.kSin, kir::Dtype::F32, {s.positions, kPairs}, table),
          tensor(qr, kir::Dtype::F32, {s.tokens, s.heads}, rows),
          tensor(kr, kir::Dtype::F32, {s.tokens, s.heads}, rows),
          tensor(dqkv, kir::Dtype::BF16, {s.tokens, 3, s.heads, kDh}, int64_t(p.qkv.size())),
          tensor(dwPart, kir::Dtype::F32, {2, partials, kDh}, 2 * partials * kDh),
          p.tokenStride, p.partStride, p.headStride, s.posDiv};
}

struct BwdOutputs {
  std::vector<uint16_t> dqkv;
  std::vector<float> dw;
  bool operator==(const BwdOutputs& o) const { return dqkv == o.dqkv && sameBits(dw, o.dw); }
};

/// A backward problem's inputs on the device: the problem's buffers and the gradients and rstd.
struct BwdDeviceInputs {
  Buffers b;
  void *dq, *dk, *dv, *qr, *kr;
};

Expected<BwdDeviceInputs> uploadBwdInputs(rt::Device& dev, gputest::DeviceArgs& d, const Problem& p,
                                          const BwdInputs& in) {
  BwdDeviceInputs u;
  ASSIGN_OR_RETURN(u.b, uploadProblem(dev, d, p));
  auto up = [&](const auto& v) { return d.upload(dev, v.data(), v.size() * sizeof(v[0])); };
  ASSIGN_OR_RETURN(u.dq, up(in.dq));
  ASSIGN_OR_RETURN(u.dk, up(in.dk));
  ASSIGN_OR_RETURN(u.dv, up(in.dv));
  ASSIGN_OR_RETURN(u.qr, up(in.qRstd));
  ASSIGN_OR_RETURN(u.kr, up(in.kRstd));
  return u;
}

Expected<BwdOutputs> runBwdOnGpu(rt::Device& dev, const gputest::CodeObject& bwdObj, const kir::Kernel& bwd,
                                 const gputest::CodeObject& reduceObj, const kir::Kernel& reduce, const Problem& p,
                                 const BwdInputs& in, int64_t partials) {
  gputest::DeviceArgs d;
  ASSIGN_OR_RETURN(BwdDeviceInputs u, uploadBwdInputs(dev, d, p, in));
  auto [b, dq, dk, dv, qr, kr] = u;
  ASSIGN_OR_RETURN(void* dqkv, d.output(dev, p.qkv.size() * 2));
  ASSIGN_OR_RETURN(void* dwPart, d.output(dev, 2 * partials * kDh * 4));
  ASSIGN_OR_RETURN(void* dw, d.output(dev, 2 * kDh * 4));
  RETURN_IF_ERROR(gputest::launch(dev, bwdObj, bwd, bwdArgs(p, in, b, dq, dk, dv, qr, kr, dqkv, dwPart, partials),
                                  partials));
  std::vector<interp::Arg> reduceArgs = {tensor(dwPart, kir::Dtype::F32, {2, partials, kDh}, 2 * partials * kDh),
                                         tensor(dw, kir::Dtype::F32, {2, kDh}, 2 * kDh)};
  RETURN_IF_ERROR(gputest::launch(dev, reduceObj, reduce, reduceArgs, 2));
  BwdOutputs out;
  ASSIGN_OR_RETURN(out.dqkv, gputest::download<uint16_t>(dev, dqkv, p.qkv.size()));
  ASSIGN_OR_RETURN(out.dw, gputest::download<float>(dev, dw, 2 * kDh));
  return out;
}

/// Exact dw (groups x 128, fp64) from the fp64 shadow of dw_part [groups, P, 128], each column
/// summed over the partials in order.
std::vector<double> sumPartials(const std::vector<double>& dwPart64, int groups, int64_t partials) {
  std::vector<double> dw64(groups * kDh, 0.0);
  for (int g = 0; g < groups; ++g)
    for (int64_t j = 0; j < partials; ++j)
      for (int64_t c = 0; c < kDh; ++c) dw64[g * kDh + c] += dwPart64[(g * partials + j) * kDh + c];
  return dw64;
}

/// The 128 gradient elements at `base` of d(mixed_qkv) against their fp64 shadow (`ref`, indexed
/// from `refOffset`), each with the bound 2^-20 * terms[i] of addBwdMagnitudes.
void addGradRow(gputest::Bf16Check& check, const std::vector<uint16_t>& dqkv, const std::vector<double>& ref,
                int64_t refOffset, const std::vector<double>& terms, int64_t base) {
  for (int64_t c = 0; c < kDh; ++c) check.add(dqkv[base + c], ref[base - refOffset + c], std::ldexp(terms[base + c], -20));
}

/// dq and dk of a whole d(mixed_qkv) against their fp64 shadow (indexed like it), and the rows
/// whose dV is not a bit-exact copy of `dv`.
struct QkvGradCheck {
  gputest::Bf16Check dqk;
  int64_t dvMismatchRows = 0;
  void merge(const QkvGradCheck& o) {
    dqk.merge(o.dqk);
    dvMismatchRows += o.dvMismatchRows;
  }
};

QkvGradCheck checkQkvGrad(const Problem& p, const std::vector<uint16_t>& dqkv, const std::vector<double>& dqkv64,
                          const std::vector<double>& terms, const std::vector<uint16_t>& dv) {
  int64_t rows = p.shape.tokens * p.shape.heads;
  return gputest::checkInParallel<QkvGradCheck>(rows, [&](int64_t begin, int64_t end, QkvGradCheck& c) {
    for (int64_t r = begin; r < end; ++r) {
      for (int part = 0; part < 2; ++part) addGradRow(c.dqk, dqkv, dqkv64, 0, terms, rowBase(p, r, part));
      c.dvMismatchRows += std::memcmp(&dqkv[rowBase(p, r, 2)], &dv[r * kDh], kDh * 2) != 0;
    }
  });
}

/// dw (f32) against exact dw64: |gpu - ref| <= accumulation * dwMag (a NaN counts as beyond).
struct DwCheck {
  double maxFraction = 0;
  int64_t beyond = 0;
};

DwCheck checkDw(const std::vector<float>& dw, const std::vector<double>& dw64, const std::vector<double>& dwMag,
                double accumulation) {
  DwCheck check;
  for (size_t i = 0; i < dw64.size(); ++i) {
    double bound = accumulation * dwMag[i] + 1e-30, err = std::fabs(dw[i] - dw64[i]);
    check.maxFraction = std::max(check.maxFraction, err / bound);
    check.beyond += !(err <= bound);
  }
  return check;
}

/// Prints a backward RESULT line (`label` padded to `labelWidth`, the gradient check named
/// `gradName`, a count of wrongly written columns named `columnsName`) and expects all within bounds.
void reportBwd(const char* kernel, int labelWidth, const std::string& label, const gputest::CodeObject& bwdObj,
                    const Shape& s, int64_t partials, const char* gradName, const gputest::Bf16Check& grad,
                    const char* columnsName, int64_t columns, const DwCheck& dw, bool identical) {
  std::printf("RESULT %s+dw_reduce %-*s %-24s T=%-6lld H=%lld P=%lld %s: %s | %s=%lld | dw: max %.2f of bound, "
              "beyond=%lld | deterministic=%s\n",
              kernel, labelWidth, label.c_str(), gputest::configTag(bwdObj.metadata).c_str(), (long long)s.tokens, (long long)s.heads,
              (long long)partials, gradName, grad.summary().c_str(), columnsName, (long long)columns, dw.maxFraction,
              (long long)dw.beyond, identical ? "yes" : "NO");
  grad.expectOk(gradName);
  EXPECT_EQ(columns, 0) << columnsName;
  EXPECT_EQ(dw.beyond, 0);
  EXPECT_TRUE(identical);
}

class NormRopeQkvBwdGpu : public NormRopeGpu {};

TEST_P(NormRopeQkvBwdGpu, MatchesFp64InterpreterAndIsDeterministic) {
  auto bwdObjects = gputest::findCodeObjects("norm_rope_qkv_bwd");
  auto reduceObjects = gputest::findCodeObjects("norm_rope_dw_reduce");
  ASSERT_FALSE(bwdObjects.empty() || reduceObjects.empty()) << "missing code objects in " << gputest::gpuKernelsDir();
  std::string error;
  auto reference = gputest::instantiateDsl(kDsl, "norm_rope_qkv_bwd", {}, error);
  ASSERT_TRUE(reference) << error;

  auto [shape, layout] = GetParam();
  Problem p = makeProblem(shape, layout, 77 + shape.tokens + int(layout));
  BwdInputs in = makeBwdInputs(p, 88 + shape.tokens);
  int64_t rows = shape.tokens * shape.heads;
  int64_t partials = std::min<int64_t>(8192, rows);
  std::vector<uint16_t> dqkv(p.qkv.size(), 0);
  std::vector<float> dwPart(2 * partials * kDh);
  std::vector<double> dqkv64(p.qkv.size()), dwPart64(2 * partials * kDh);
  interp::RunOptions opts = gputest::referenceOptions();
  opts.fp64Outputs = {{12, &dqkv64}, {13, &dwPart64}};
  Status ran = interp::run(*reference, bwdArgs(p, in, hostInputs(p), in.dq.data(), in.dk.data(), in.dv.data(),
                                              in.qRstd.data(), in.kRstd.data(), dqkv.data(), dwPart.data(), partials),
                           opts);
  ASSERT_TRUE(ran.isOk()) << ran.message();

  // Exact dw and the magnitudes bounding its fp32 accumulation; the dq/dk bound terms per element.
  std::vector<double> dw64 = sumPartials(dwPart64, 2, partials), dwMag(2 * kDh, 0.0);
  std::vector<double> terms(p.qkv.size(), 0.0);
  addBwdMagnitudes(p, 0, in.dq, in.qRstd, terms, &dwMag[0]);
  addBwdMagnitudes(p, 1, in.dk, in.kRstd, terms, &dwMag[kDh]);
  double accumulation = std::ldexp(double(rows / partials + partials + 8), -24);

  forEachBwdPair(
      bwdObjects, "norm_rope_qkv_bwd", reduceObjects,
      [&](const gputest::CodeObject& bwdObj, const kir::Kernel& bwd, const gputest::CodeObject& reduceObj,
          const kir::Kernel& reduce) { return runBwdOnGpu(*dev, bwdObj, bwd, reduceObj, reduce, p, in, partials); },
      [&](const gputest::CodeObject& bwdObj, const BwdOutputs& out, bool identical) {
        QkvGradCheck grad = checkQkvGrad(p, out.dqkv, dqkv64, terms, in.dv);
        reportBwd("norm_rope_qkv_bwd", 8, layoutName(layout), bwdObj, shape, partials, "dq/dk", grad.dqk, "dv_mismatch_rows",
                  grad.dvMismatchRows, checkDw(out.dw, dw64, dwMag, accumulation), identical);
      });
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormRopeQkvBwdGpu, shapesAndLayouts(), layoutTestName);

// ---------------------------------------------------------------------------------------------
// Per-tensor backward: norm_rope_bwd on one part of mixed_qkv (K of a Megatron buffer, Q of a
// blocked one, as in the per-tensor forward), dx written through the d(mixed_qkv) strides
// straight into the part's columns of a whole d(mixed_qkv) buffer, then norm_rope_dw_reduce with
// G = 1 (dw_part [P, 128] viewed as [1, P, 128]). Bounds as in the whole-QKV backward:
//   dx:       like dq/dk there (1 ulp, or 0.5*ulp_bf16(ref) + 2^-20 * terms);
//   dw (f32): |gpu - ref| <= (ceil(rows/P) + P + 8) * 2^-24 * sum over rows of |dn|~ * |u|;
//   other columns: the whole d(mixed_qkv) buffer is poisoned (0xFF bytes) before the launch and
//             every element outside the part's columns must still hold 0xFFFF after it.

std::vector<interp::Arg> bwdPartArgs(const Problem& p, int part, const Buffers& b, const void* dy, const void* rstd,
                                     void* dqkv, void* dwPart, int64_t partials) {
  const Shape& s = p.shape;
  int64_t rows = s.tokens * s.heads, table = s.positions * kPairs;
  return {tensor(dy, kir::Dtype::BF16, {s.tokens, s.heads, kDh}, rows * kDh),
          tensor(atPart(b.qkv, p, part), kir::Dtype::BF16, {s.tokens, s.heads, kDh}, partExtent(p, part)),
          tensor(part == 0 ? b.qWeight : b.kWeight, kir::Dtype::BF16, {kDh}, kDh),
          tensor(part == 0 ? b.qCos : b.kCos, kir::Dtype::F32, {s.positions, kPairs}, table),
          tensor(part == 0 ? b.qSin : b.kSin, kir::Dtype::F32, {s.positions, kPairs}, table),
          tensor(rstd, kir::Dtype::F32, {s.tokens, s.heads}, rows),
          tensor(atPart(dqkv, p, part), kir::Dtype::BF16, {s.tokens, s.heads, kDh}, partExtent(p, part)),
          tensor(dwPart, kir::Dtype::F32, {partials, kDh}, partials * kDh),
          p.tokenStride, p.headStride, p.tokenStride, p.headStride, s.posDiv};
}

struct BwdPartOutputs {
  std::vector<uint16_t> dqkv;  // the whole d(mixed_qkv) buffer, not only the part's columns
  std::vector<float> dw;
  bool operator==(const BwdPartOutputs& o) const { return dqkv == o.dqkv && sameBits(dw, o.dw); }
};

Expected<BwdPartOutputs> runBwdPartOnGpu(rt::Device& dev, const gputest::CodeObject& bwdObj, const kir::Kernel& bwd,
                                         const gputest::CodeObject& reduceObj, const kir::Kernel& reduce,
                                         const Problem& p, int part, const std::vector<uint16_t>& dy,
                                         const std::vector<float>& rstd, int64_t partials) {
  gputest::DeviceArgs d;
  ASSIGN_OR_RETURN(Buffers b, uploadProblem(dev, d, p));
  ASSIGN_OR_RETURN(void* dyDev, d.upload(dev, dy.data(), dy.size() * 2));
  ASSIGN_OR_RETURN(void* rstdDev, d.upload(dev, rstd.data(), rstd.size() * 4));
  ASSIGN_OR_RETURN(void* dqkv, d.output(dev, p.qkv.size() * 2));  // all of it poisoned: bf16 0xFFFF
  ASSIGN_OR_RETURN(void* dwPart, d.output(dev, partials * kDh * 4));
  ASSIGN_OR_RETURN(void* dw, d.output(dev, kDh * 4));
  RETURN_IF_ERROR(gputest::launch(dev, bwdObj, bwd, bwdPartArgs(p, part, b, dyDev, rstdDev, dqkv, dwPart, partials),
                                  partials));
  std::vector<interp::Arg> reduceArgs = {tensor(dwPart, kir::Dtype::F32, {1, partials, kDh}, partials * kDh),
                                         tensor(dw, kir::Dtype::F32, {1, kDh}, kDh)};
  RETURN_IF_ERROR(gputest::launch(dev, reduceObj, reduce, reduceArgs, 1));
  BwdPartOutputs out;
  ASSIGN_OR_RETURN(out.dqkv, gputest::download<uint16_t>(dev, dqkv, p.qkv.size()));
  ASSIGN_OR_RETURN(out.dw, gputest::download<float>(dev, dw, kDh));
  return out;
}

class NormRopeBwdGpu : public NormRopeGpu {};

TEST_P(NormRopeBwdGpu, StridedDxIntoMixedQkvMatchesFp64InterpreterAndIsDeterministic) {
  auto bwdObjects = gputest::findCodeObjects("norm_rope_bwd");
  auto reduceObjects = gputest::findCodeObjects("norm_rope_dw_reduce");
  ASSERT_FALSE(bwdObjects.empty() || reduceObjects.empty()) << "missing code objects in " << gputest::gpuKernelsDir();
  std::string error;
  auto reference = gputest::instantiateDsl(kDsl, "norm_rope_bwd", {}, error);
  ASSERT_TRUE(reference) << error;

  auto [shape, layout] = GetParam();
  int part = tensorPart(layout);
  Problem p = makeProblem(shape, layout, 99 + shape.tokens + int(layout));
  BwdInputs in = makeBwdInputs(p, 111 + shape.tokens);
  const std::vector<uint16_t>& dy = part == 0 ? in.dq : in.dk;
  const std::vector<float>& rstd = part == 0 ? in.qRstd : in.kRstd;
  int64_t rows = shape.tokens * shape.heads;
  // 48 rows per partial at 393216 rows; 15 rows over 4 partials (4, 4, 4, 3) for the ragged shape.
  int64_t partials = rows > 8192 ? 8192 : (rows + 3) / 4;
  int64_t offset = part * p.partStride;  // of the part's first element in mixed_qkv / d(mixed_qkv)
  std::vector<uint16_t> dqkv(p.qkv.size(), 0xFFFF);
  std::vector<float> dwPart(partials * kDh);
  // Shadows indexed by the linear offsets of the stores: dx relative to its base pointer (the
  // part's first element of d(mixed_qkv)), dw_part contiguous.
  std::vector<double> dx64(partExtent(p, part)), dwPart64(partials * kDh);
  interp::RunOptions opts = gputest::referenceOptions();
  opts.fp64Outputs = {{6, &dx64}, {7, &dwPart64}};
  Status ran = interp::run(
      *reference, bwdPartArgs(p, part, hostInputs(p), dy.data(), rstd.data(), dqkv.data(), dwPart.data(), partials),
      opts);
  ASSERT_TRUE(ran.isOk()) << ran.message();

  std::vector<double> dw64 = sumPartials(dwPart64, 1, partials), dwMag(kDh, 0.0);
  std::vector<double> terms(p.qkv.size(), 0.0);
  addBwdMagnitudes(p, part, dy, rstd, terms, dwMag.data());
  double accumulation = std::ldexp(double((rows + partials - 1) / partials + partials + 8), -24);

  forEachBwdPair(
      bwdObjects, "norm_rope_bwd", reduceObjects,
      [&](const gputest::CodeObject& bwdObj, const kir::Kernel& bwd, const gputest::CodeObject& reduceObj,
          const kir::Kernel& reduce) {
        return runBwdPartOnGpu(*dev, bwdObj, bwd, reduceObj, reduce, p, part, dy, rstd, partials);
      },
      [&](const gputest::CodeObject& bwdObj, const BwdPartOutputs& out, bool identical) {
        gputest::Bf16Check dx = gputest::checkInParallel<gputest::Bf16Check>(
            rows, [&](int64_t begin, int64_t end, gputest::Bf16Check& check) {
              for (int64_t r = begin; r < end; ++r) addGradRow(check, out.dqkv, dx64, offset, terms, rowBase(p, r, part));
            });
        // Element i of d(mixed_qkv) belongs to part ((i % token stride) / part stride) % 3: Megatron
        // (i % (3*H*128)) / 128 = 3h + part, blocked (i % (3*H*128)) / (H*128) = part.
        int64_t otherChanged = 0;
        for (int64_t i = 0; i < int64_t(out.dqkv.size()); ++i)
          otherChanged += (i % p.tokenStride) / p.partStride % 3 != part && out.dqkv[i] != 0xFFFF;
        reportBwd("norm_rope_bwd", 13, partTag(layout), bwdObj, shape, partials, "dx", dx, "other_columns_changed",
                  otherChanged, checkDw(out.dw, dw64, dwMag, accumulation), identical);
      });
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormRopeBwdGpu, shapesAndLayouts(), partTestName);

// ---------------------------------------------------------------------------------------------
// The packer prologue (kernels_dsl/norm_rope_bwd_pack.mxk): the whole-QKV backward computed per
// 32-token x head tile and packed into the row and column MXFP6 blobs of d(mixed_qkv) [T, C],
// its column scales token-major, turned into the blob's [C, T/32] by mxfp6_scales_transpose, then
// norm_rope_dw_reduce over P = T/32 * H partials. Bounds:
//   bf16 d(mixed_qkv) of norm_rope_qkv_bwd_pack_bf16: dq/dk as the whole-QKV backward above (1 ulp,
//            or 0.5*ulp_bf16(ref) + 2^-20 * terms), dv bit-exact;
//   blobs:   bit-exact against the CPU encoder's packDual of that bf16 d(mixed_qkv), for both
//            kernels (the one without the bf16 output computes the same bits);
//   dw (f32): |gpu - ref| <= (32 + P + 8) * 2^-24 * sum over rows of |dn|~ * |u|;
//   every output bit-identical across two runs.

constexpr const char* kPrologueDsl = "kernels_dsl/norm_rope_bwd_pack.mxk";

struct PrologueOutputs {
  std::vector<uint8_t> rowData, rowScales, colData, colScales;
  std::vector<uint16_t> dqkv;  // empty without the bf16 output
  std::vector<float> dw;
  bool operator==(const PrologueOutputs& o) const {
    return rowData == o.rowData && rowScales == o.rowScales && colData == o.colData && colScales == o.colScales &&
           dqkv == o.dqkv && sameBits(dw, o.dw);
  }
};

/// A launch after the pass: its code object and kernel.
struct Stage {
  const gputest::CodeObject* obj = nullptr;
  const kir::Kernel* kernel = nullptr;
};

/// Runs the prologue (`blobs`; with the bf16 output when `withBf16`) and the transpose of its
/// column scales (`scales`) or, without `blobs`, the tiled backward norm_rope_qkv_bwd_tiles (bf16
/// output and partials), then the dw reduction.
Expected<PrologueOutputs> runTilesOnGpu(rt::Device& dev, const gputest::CodeObject& obj, const kir::Kernel& kernel,
                                        const gputest::CodeObject& reduceObj, const kir::Kernel& reduce,
                                        const Problem& p, const BwdInputs& in, bool blobs, bool withBf16,
                                        Stage scales = {}) {
  const Shape& s = p.shape;
  int64_t TB = s.tokens / 32, H = s.heads, C = p.tokenStride, partials = TB * H, table = s.positions * kPairs;
  gputest::DeviceArgs d;
  ASSIGN_OR_RETURN(BwdDeviceInputs u, uploadBwdInputs(dev, d, p, in));
  auto [b, dq, dk, dv, qr, kr] = u;
  ASSIGN_OR_RETURN(void* rowData, d.output(dev, s.tokens * C * 3 / 4));
  ASSIGN_OR_RETURN(void* rowScales, d.output(dev, s.tokens * C / 32));
  ASSIGN_OR_RETURN(void* colData, d.output(dev, C * TB * 24));
  ASSIGN_OR_RETURN(void* colScales, d.output(dev, C * TB));
  ASSIGN_OR_RETURN(void* colScalesByToken, d.output(dev, TB * C));
  ASSIGN_OR_RETURN(void* dwPart, d.output(dev, 2 * partials * kDh * 4));
  ASSIGN_OR_RETURN(void* dw, d.output(dev, 2 * kDh * 4));
  void* dqkv = nullptr;
  if (withBf16) {
    ASSIGN_OR_RETURN(dqkv, d.output(dev, p.qkv.size() * 2));
  }
  std::vector<interp::Arg> args = {
      tensor(dq, kir::Dtype::BF16, {TB, 32, H, kDh}, s.tokens * H * kDh),
      tensor(dk, kir::Dtype::BF16, {TB, 32, H, kDh}, s.tokens * H * kDh),
      tensor(dv, kir::Dtype::BF16, {TB, 32, H, kDh}, s.tokens * H * kDh),
      tensor(b.qkv, kir::Dtype::BF16, {TB, 32, 3, H, kDh}, int64_t(p.qkv.size())),
      tensor(b.qWeight, kir::Dtype::BF16, {32, kDh}, kDh),  // expanded over the tile's rows (stride 0)
      tensor(b.kWeight, kir::Dtype::BF16, {32, kDh}, kDh),
      tensor(b.qCos, kir::Dtype::F32, {s.positions, kPairs}, table),
      tensor(b.qSin, kir::Dtype::F32, {s.positions, kPairs}, table),
      tensor(b.kCos, kir::Dtype::F32, {s.positions, kPairs}, table),
      tensor(b.kSin, kir::Dtype::F32, {s.positions, kPairs}, table),
      tensor(qr, kir::Dtype::F32, {TB, 32, H}, s.tokens * H),
      tensor(kr, kir::Dtype::F32, {TB, 32, H}, s.tokens * H)};
  interp::TensorArg dqkvArg = tensor(dqkv, kir::Dtype::BF16, {TB, 32, 3, H, kDh}, int64_t(p.qkv.size()));
  interp::TensorArg dwArg = tensor(dwPart, kir::Dtype::F32, {2, TB, H, kDh}, 2 * partials * kDh);
  if (blobs) {
    args.push_back(tensor(rowData, kir::Dtype::U8, {TB, 32, C * 3 / 4}, s.tokens * C * 3 / 4));
    args.push_back(tensor(rowScales, kir::Dtype::U8, {TB, 32, C / 32}, s.tokens * C / 32));
    args.push_back(tensor(colData, kir::Dtype::U8, {C, TB, 24}, C * TB * 24));
    args.push_back(tensor(colScalesByToken, kir::Dtype::U8, {TB, C}, TB * C));
    args.push_back(dwArg);
    if (withBf16) args.push_back(dqkvArg);
  } else {
    args.push_back(dqkvArg);
    args.push_back(dwArg);
  }
  for (int64_t v : {32 * p.tokenStride, p.tokenStride, p.partStride, p.headStride, s.posDiv}) args.push_back(v);
  RETURN_IF_ERROR(gputest::launch(dev, obj, kernel, args, partials));
  if (blobs) {
    if (!scales.obj || !scales.kernel) return Status::error("the prologue's column scales need their transpose");
    int64_t GB = scales.kernel->config.at("GB"), W = scales.kernel->config.at("W");
    std::vector<interp::Arg> scalesArgs = {tensor(colScalesByToken, kir::Dtype::U8, {TB / GB, GB, C / W, W}, TB * C),
                                           tensor(colScales, kir::Dtype::U8, {C / W, W, TB / GB, GB}, C * TB)};
    RETURN_IF_ERROR(gputest::launch(dev, *scales.obj, *scales.kernel, scalesArgs, TB / GB * (C / W)));
  }
  std::vector<interp::Arg> reduceArgs = {tensor(dwPart, kir::Dtype::F32, {2, partials, kDh}, 2 * partials * kDh),
                                         tensor(dw, kir::Dtype::F32, {2, kDh}, 2 * kDh)};
  RETURN_IF_ERROR(gputest::launch(dev, reduceObj, reduce, reduceArgs, 2));
  PrologueOutputs out;
  ASSIGN_OR_RETURN(out.rowData, gputest::download<uint8_t>(dev, rowData, s.tokens * C * 3 / 4));
  ASSIGN_OR_RETURN(out.rowScales, gputest::download<uint8_t>(dev, rowScales, s.tokens * C / 32));
  ASSIGN_OR_RETURN(out.colData, gputest::download<uint8_t>(dev, colData, C * TB * 24));
  ASSIGN_OR_RETURN(out.colScales, gputest::download<uint8_t>(dev, colScales, C * TB));
  ASSIGN_OR_RETURN(out.dw, gputest::download<float>(dev, dw, 2 * kDh));
  if (withBf16) {
    ASSIGN_OR_RETURN(out.dqkv, gputest::download<uint16_t>(dev, dqkv, p.qkv.size()));
  }
  return out;
}

int64_t differingBytes(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return int64_t(std::max(a.size(), b.size()));
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

/// The fp64 reference of a tiled test: norm_rope_qkv_bwd on the interpreter (its own partials;
/// only the fp64 values and dw's exact sum are used), the dq/dk bound terms and dw's magnitudes.
struct TileReference {
  std::vector<double> dqkv64, dw64, dwMag, terms;
};

TileReference tileReference(const Problem& p, const BwdInputs& in) {
  std::string error;
  auto reference = gputest::instantiateDsl(kDsl, "norm_rope_qkv_bwd", {}, error);
  EXPECT_TRUE(reference) << error;
  TileReference ref;
  if (!reference) return ref;
  int64_t rows = p.shape.tokens * p.shape.heads, refPartials = std::min<int64_t>(8192, rows);
  std::vector<uint16_t> dqkv(p.qkv.size(), 0);
  std::vector<float> dwPart(2 * refPartials * kDh);
  std::vector<double> dwPart64(2 * refPartials * kDh);
  ref.dqkv64.resize(p.qkv.size());
  interp::RunOptions opts = gputest::referenceOptions();
  opts.fp64Outputs = {{12, &ref.dqkv64}, {13, &dwPart64}};
  Status ran = interp::run(*reference, bwdArgs(p, in, hostInputs(p), in.dq.data(), in.dk.data(), in.dv.data(),
                                              in.qRstd.data(), in.kRstd.data(), dqkv.data(), dwPart.data(), refPartials),
                           opts);
  EXPECT_TRUE(ran.isOk()) << ran.message();
  ref.dw64 = sumPartials(dwPart64, 2, refPartials);
  ref.dwMag.assign(2 * kDh, 0.0);
  ref.terms.assign(p.qkv.size(), 0.0);
  addBwdMagnitudes(p, 0, in.dq, in.qRstd, ref.terms, &ref.dwMag[0]);
  addBwdMagnitudes(p, 1, in.dk, in.kRstd, ref.terms, &ref.dwMag[kDh]);
  return ref;
}

/// Checks every prologue code object in `dirs` (both kernels: each schedule's kernel without the
/// bf16 output against its _bf16 twin, which must be in `dirs` too) at `shape` and `layout`; the
/// column scales' transpose and the dw reduction are the GPU tests' own objects and the
/// candidates.
void checkPrologueObjects(rt::Device& dev, const std::vector<std::string>& dirs, const Shape& shape, Layout layout) {
  auto withBf16 = gputest::findCodeObjects("norm_rope_qkv_bwd_pack_bf16", dirs);
  auto withoutBf16 = gputest::findCodeObjects("norm_rope_qkv_bwd_pack", dirs);
  auto reduceObjects = gputest::findCodeObjects("norm_rope_dw_reduce");
  auto scalesObjects = gputest::findCodeObjects("mxfp6_scales_transpose");
  ASSERT_FALSE(withBf16.empty() || withoutBf16.empty()) << "missing prologue code objects in " << dirs.front();
  ASSERT_FALSE(reduceObjects.empty() || scalesObjects.empty()) << "missing code objects in " << gputest::gpuKernelsDir();
  std::string error;
  auto reduce = gputest::instantiateDsl(kDsl, "norm_rope_dw_reduce", reduceObjects.front().metadata.config, error);
  ASSERT_TRUE(reduce) << error;

  // The column scales' transpose with the most token blocks per program that divides T/32 (the
  // objects hold 32 and 1), as the benchmark chooses.
  const gputest::CodeObject* scalesObj = nullptr;
  for (const gputest::CodeObject& obj : scalesObjects) {
    int64_t GB = obj.metadata.config.at("GB");
    if (shape.tokens / 32 % GB == 0 && (!scalesObj || GB > scalesObj->metadata.config.at("GB"))) scalesObj = &obj;
  }
  ASSERT_NE(scalesObj, nullptr) << "no mxfp6_scales_transpose object whose GB divides T/32 = " << shape.tokens / 32;
  auto scales = gputest::instantiateDsl("kernels_dsl/mxfp6_pack.mxk", "mxfp6_scales_transpose",
                                        scalesObj->metadata.config, error);
  ASSERT_TRUE(scales) << error;
  Problem p = makeProblem(shape, layout, 99 + shape.tokens + int(layout));
  BwdInputs in = makeBwdInputs(p, 111 + shape.tokens);
  int64_t rows = shape.tokens * shape.heads, C = p.tokenStride, partials = rows / 32;
  TileReference ref = tileReference(p, in);
  ASSERT_FALSE(ref.dqkv64.empty());
  double accumulation = std::ldexp(double(32 + partials + 8), -24);

  // The _bf16 kernel's outputs by configuration: the kernel without the bf16 output must produce
  // the same blobs at the same configuration (schedules may sum in different orders).
  std::map<std::map<std::string, int64_t>, PrologueOutputs> bf16KernelOutputs;
  for (const auto* objects : {&withBf16, &withoutBf16}) {
    bool bf16Out = objects == &withBf16;
    const char* name = bf16Out ? "norm_rope_qkv_bwd_pack_bf16" : "norm_rope_qkv_bwd_pack";
    for (const gputest::CodeObject& obj : *objects) {
      SCOPED_TRACE(obj.path);
      auto kernel = gputest::instantiateDsl(kPrologueDsl, name, obj.metadata.config, error);
      ASSERT_TRUE(kernel) << error;
      Stage scalesStage{scalesObj, &*scales};
      auto run = [&] {
        return runTilesOnGpu(dev, obj, *kernel, reduceObjects.front(), *reduce, p, in, true, bf16Out, scalesStage);
      };
      auto check = [&](const PrologueOutputs& out, bool identical) {
        auto format = mx::ElementFormat(kernel->config.at("FMT"));
        auto mode = mx::ScaleMode(kernel->config.at("MODE"));
        QkvGradCheck grad;
        int64_t blobBytes = 0;
        if (bf16Out) {
          grad = checkQkvGrad(p, out.dqkv, ref.dqkv64, ref.terms, in.dv);
          Expected<mx::DualBlobs> blobs = mx::packDual(out.dqkv, shape.tokens, C, format, mode, gputest::hostThreads());
          ASSERT_TRUE(blobs.isOk()) << blobs.status().message();
          blobBytes = differingBytes(out.rowData, blobs->rows.data) +
                      differingBytes(out.rowScales, blobs->rows.scales) +
                      differingBytes(out.colData, blobs->columns.data) +
                      differingBytes(out.colScales, blobs->columns.scales);
          bf16KernelOutputs[kernel->config] = out;
        } else {
          auto same = bf16KernelOutputs.find(kernel->config);
          ASSERT_NE(same, bf16KernelOutputs.end()) << "no code object of the _bf16 kernel at " << gputest::configTag(obj.metadata);
          blobBytes = differingBytes(out.rowData, same->second.rowData) +
                      differingBytes(out.rowScales, same->second.rowScales) +
                      differingBytes(out.colData, same->second.colData) +
                      differingBytes(out.colScales, same->second.colScales);
        }
        DwCheck dw = checkDw(out.dw, ref.dw64, ref.dwMag, accumulation);
        std::printf("RESULT %s+scales_transpose(GB=%lld)+dw_reduce %-8s %-40s T=%-6lld H=%lld P=%lld %s/%s blob_bytes_differing=%lld "
                    "(vs %s) | dq/dk: %s | dv_mismatch_rows=%lld | dw: max %.2f of bound, beyond=%lld | "
                    "deterministic=%s\n",
                    name, (long long)scales->config.at("GB"), layoutName(layout), gputest::configTag(obj.metadata).c_str(),
                    (long long)shape.tokens, (long long)shape.heads,
                    (long long)partials, mx::elementFormatName(format), mx::scaleModeName(mode), (long long)blobBytes,
                    bf16Out ? "packDual of its bf16 output" : "the _bf16 kernel's blobs",
                    bf16Out ? grad.dqk.summary().c_str() : "-", (long long)grad.dvMismatchRows, dw.maxFraction,
                    (long long)dw.beyond, identical ? "yes" : "NO");
        if (bf16Out) grad.dqk.expectOk("dq/dk");
        EXPECT_EQ(blobBytes, 0);
        EXPECT_EQ(grad.dvMismatchRows, 0);
        EXPECT_EQ(dw.beyond, 0);
        EXPECT_TRUE(identical);
      };
      if (!runTwiceAndCheck(name, gputest::configTag(obj.metadata), run, check)) return;
    }
  }
}

// T multiple of 32: 16384 tokens x 24 heads (Flux), and 96 tokens x 3 heads with 5 positions and
// pos_div 2 (positions wrap inside a tile).
auto tileShapesAndLayouts() {
  return ::testing::Combine(::testing::Values(Shape{16384, 24, 512, 1}, Shape{96, 3, 5, 2}),
                            ::testing::Values(Layout::Megatron, Layout::Blocked));
}

class NormRopePrologueGpu : public NormRopeGpu {};

TEST_P(NormRopePrologueGpu, PacksTheBackwardBitExactlyAndIsDeterministic) {
  auto [shape, layout] = GetParam();
  checkPrologueObjects(*dev, {gputest::gpuKernelsDir()}, shape, layout);
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormRopePrologueGpu, tileShapesAndLayouts(), layoutTestName);

// The benchmark's other prologue schedules (build/gpu_kernels/bench) and the op table's
// candidates (build/gpu_kernels/candidates; their _bf16 twins are among the benchmark's), at 2048
// tokens x 24 heads (1536 tiles: every SM busy) and the wrapping small shape: at T = 16384 their
// objects would take most of a device call.
class NormRopePrologueBenchGpu : public NormRopeGpu {};

TEST_P(NormRopePrologueBenchGpu, PacksTheBackwardBitExactlyAndIsDeterministic) {
  auto [shape, layout] = GetParam();
  checkPrologueObjects(*dev, {gputest::benchKernelsDir(), gputest::candidatesDir()}, shape, layout);
}

INSTANTIATE_TEST_SUITE_P(BenchSchedules, NormRopePrologueBenchGpu,
                         ::testing::Combine(::testing::Values(Shape{2048, 24, 512, 1}, Shape{96, 3, 5, 2}),
                                            ::testing::Values(Layout::Megatron, Layout::Blocked)),
                         layoutTestName);

// The tiled whole-QKV backward norm_rope_qkv_bwd_tiles: the bounds of the whole-QKV backward
// (dq/dk 1 ulp or the cancellation bound, dv bit-exact), dw within (32 + P + 8) * 2^-24 * the
// magnitudes, P = T/32 * H, deterministic.
class NormRopeQkvBwdTilesGpu : public NormRopeGpu {};

TEST_P(NormRopeQkvBwdTilesGpu, MatchesFp64InterpreterAndIsDeterministic) {
  auto objects = gputest::findCodeObjects("norm_rope_qkv_bwd_tiles");
  auto reduceObjects = gputest::findCodeObjects("norm_rope_dw_reduce");
  ASSERT_FALSE(objects.empty() || reduceObjects.empty()) << "missing code objects in " << gputest::gpuKernelsDir();
  std::string error;
  auto reduce = gputest::instantiateDsl(kDsl, "norm_rope_dw_reduce", reduceObjects.front().metadata.config, error);
  ASSERT_TRUE(reduce) << error;
  auto [shape, layout] = GetParam();
  Problem p = makeProblem(shape, layout, 77 + shape.tokens + int(layout));
  BwdInputs in = makeBwdInputs(p, 88 + shape.tokens);
  int64_t rows = shape.tokens * shape.heads, partials = rows / 32;
  TileReference ref = tileReference(p, in);
  ASSERT_FALSE(ref.dqkv64.empty());
  double accumulation = std::ldexp(double(32 + partials + 8), -24);
  forEachCodeObject(
      objects, "norm_rope_qkv_bwd_tiles",
      [&](const gputest::CodeObject& obj, const kir::Kernel& kernel) {
        return runTilesOnGpu(*dev, obj, kernel, reduceObjects.front(), *reduce, p, in, false, true);
      },
      [&](const gputest::CodeObject& obj, const PrologueOutputs& out, bool identical) {
        QkvGradCheck grad = checkQkvGrad(p, out.dqkv, ref.dqkv64, ref.terms, in.dv);
        reportBwd("norm_rope_qkv_bwd_tiles", 8, layoutName(layout), obj, shape, partials, "dq/dk", grad.dqk,
                  "dv_mismatch_rows", grad.dvMismatchRows, checkDw(out.dw, ref.dw64, ref.dwMag, accumulation), identical);
      });
}

INSTANTIATE_TEST_SUITE_P(Shapes, NormRopeQkvBwdTilesGpu, tileShapesAndLayouts(), layoutTestName);

}  // namespace
}  // namespace mxfp6
