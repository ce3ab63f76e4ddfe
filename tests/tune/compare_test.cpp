// The gate's comparison split over threads gives the verdict and the message of one serial pass
// over the view in index order: for each rule, with failures planted in the first chunk, at the
// last element, and in two chunks at once (the lower one is named), over several thread counts.
//
// Reference: the comparison as one serial pass (serialCompare below, the rule of ops/op_args.h
// written out plainly). Metric: the status's verdict and its whole message. Bound: equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>

#include "autotune/compare.h"

namespace mxfp6::autotune {
namespace {

using Bytes = std::vector<std::vector<std::byte>>;

// ---- The serial reference: one pass over the view in index order ----

double loadAt(const std::byte* base, rt::Dtype d, int64_t i) {
  if (d == rt::Dtype::BF16) {
    uint16_t b;
    std::memcpy(&b, base + 2 * i, 2);
    uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  if (d == rt::Dtype::F32) {
    float f;
    std::memcpy(&f, base + 4 * i, 4);
    return f;
  }
  return double(uint8_t(base[i]));
}

/// The storage offsets of a tensor's view in index order (of the whole storage without one).
std::vector<int64_t> viewOffsets(const ops::TensorDecl& t) {
  std::vector<int64_t> out;
  if (t.viewSizes.empty()) {
    for (int64_t i = 0; i < t.elements(); ++i) out.push_back(i);
    return out;
  }
  std::vector<int64_t> idx(t.viewSizes.size(), 0);
  while (true) {
    int64_t off = t.viewOffset;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.viewStrides[d];
    out.push_back(off);
    size_t d = idx.size();
    while (d-- > 0) {
      if (++idx[d] < t.viewSizes[d]) break;
      idx[d] = 0;
    }
    if (d == size_t(-1)) return out;
  }
}

Status serialCompare(const ops::OpArgs& args, const Bytes& ref, const Bytes& out) {
  for (size_t i = 0; i < args.tensors.size(); ++i) {
    const ops::TensorDecl& t = args.tensors[i];
    if (!t.output || ref[i] == out[i]) continue;
    const std::byte *r = ref[i].data(), *o = out[i].data();
    std::vector<int64_t> offs = viewOffsets(t);
    int64_t n = int64_t(offs.size());
    if (t.compare == ops::Compare::Exact || t.compare == ops::Compare::BlobsOfComputed) {
      int64_t bytes = rt::dtypeBytes(t.dtype), differing = 0, first = -1;
      for (int64_t off : offs)
        if (std::memcmp(r + off * bytes, o + off * bytes, bytes) != 0) {
          if (first < 0) first = off;
          ++differing;
        }
      int64_t allowed = t.compare == ops::Compare::Exact ? 0 : n / 1000;
      if (differing > allowed)
        return Status::error(t.name + ": " + std::to_string(differing) + " of " + std::to_string(n) +
                             " elements differ (first at " + std::to_string(first) + ": " +
                             std::to_string(loadAt(o, t.dtype, first)) + " vs " +
                             std::to_string(loadAt(r, t.dtype, first)) + "), " +
                             (allowed ? "at most " + std::to_string(allowed) + " may" : "none may"));
      continue;
    }
    double scale = 0;
    for (int64_t off : offs) scale = std::max(scale, std::fabs(loadAt(r, t.dtype, off)));
    for (int64_t off : offs) {
      double a = loadAt(o, t.dtype, off), b = loadAt(r, t.dtype, off);
      int e;
      std::frexp(std::max(std::fabs(b), 1e-38), &e);
      double bound = t.compare == ops::Compare::Bf16 ? std::ldexp(1.0, e - 8) + std::ldexp(scale, -16)
                                                     : std::ldexp(std::fabs(b), -18) + std::ldexp(scale, -20);
      if (!(std::fabs(a - b) <= bound))
        return Status::error(t.name + ": element " + std::to_string(off) + " is " + std::to_string(a) +
                             ", the reference " + std::to_string(b) + " (bound " + std::to_string(bound) + ")");
    }
  }
  return Status::ok();
}

// ---- Tensors: one input (never compared), then one output of the rule under test ----

constexpr int64_t kRows = 8, kCols = 1250;  // 10^4 elements: 10 may differ under BlobsOfComputed

ops::OpArgs argsFor(rt::Dtype dtype, ops::Compare compare, bool view) {
  ops::OpArgs args;
  ops::TensorDecl in;
  in.name = "x";
  in.storage = {kRows, kCols};
  args.tensors.push_back(in);
  ops::TensorDecl t;
  t.name = "y";
  t.dtype = dtype;
  t.output = true;
  t.compare = compare;
  if (view) {  // the middle kCols of rows three times as wide, as Q/K/V slices of mixed_qkv are
    t.storage = {kRows, 3 * kCols};
    t.viewSizes = {kRows, kCols};
    t.viewStrides = {3 * kCols, 1};
    t.viewOffset = kCols;
  } else {
    t.storage = {kRows, kCols};
  }
  args.tensors.push_back(t);
  return args;
}

void store(std::vector<std::byte>& v, rt::Dtype d, int64_t i, double x) {
  if (d == rt::Dtype::BF16) {
    float f = float(x);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    uint16_t b = uint16_t(u >> 16);
    std::memcpy(v.data() + 2 * i, &b, 2);
  } else if (d == rt::Dtype::F32) {
    float f = float(x);
    std::memcpy(v.data() + 4 * i, &f, 4);
  } else {
    v[size_t(i)] = std::byte(uint8_t(x));
  }
}

/// A reference of random values, and an output that differs from it within every rule's bound
/// where it may (one bf16 ulp, 2^-20 relative in f32; nothing for the byte rules), so every
/// element is examined.
struct Case {
  ops::OpArgs args;
  Bytes ref, out;
  std::vector<int64_t> offsets;  // the view's, in index order

  Case(rt::Dtype dtype, ops::Compare compare, bool view) : args(argsFor(dtype, compare, view)) {
    std::mt19937 g(42);
    std::uniform_real_distribution<double> u(-3, 3);
    for (const ops::TensorDecl& t : args.tensors) {
      size_t bytes = size_t(t.elements()) * rt::dtypeBytes(t.dtype);
      ref.emplace_back(bytes, std::byte{0x11});
      out.emplace_back(bytes, std::byte{0x11});
    }
    const ops::TensorDecl& y = args.tensors[1];
    offsets = viewOffsets(y);
    for (int64_t off : offsets) {
      double v = dtype == rt::Dtype::U8 ? double(g() % 256) : u(g);
      store(ref[1], dtype, off, v);
      store(out[1], dtype, off, v);
      if (compare == ops::Compare::Bf16 && off % 3 == 0) {
        uint16_t b;
        std::memcpy(&b, out[1].data() + 2 * off, 2);
        b ^= 1;  // one ulp
        std::memcpy(out[1].data() + 2 * off, &b, 2);
      } else if (compare == ops::Compare::F32 && off % 3 == 0) {
        store(out[1], dtype, off, loadAt(ref[1].data(), dtype, off) * (1 + std::ldexp(1.0, -20)));
      }
    }
  }

  /// Puts a failure at the view's element `index` (in index order).
  void plant(int64_t index) {
    const ops::TensorDecl& y = args.tensors[1];
    int64_t off = offsets[size_t(index)];
    double r = loadAt(ref[1].data(), y.dtype, off);
    store(out[1], y.dtype, off, y.dtype == rt::Dtype::U8 ? double((uint8_t(r) + 1) % 256) : r + 1.5);
  }
};

const std::vector<Chunking> kChunkings = {
    {1, int64_t{1} << 18},  // one thread: the serial pass
    {2, 16},
    {3, 16},                // chunks that end inside a row
    {7, 16},
    {16, 1},
    {hardwareWorkers(), int64_t{1} << 18},  // the tuner's own: one chunk at this size
};

/// Every chunking gives the serial pass's verdict and message; returns that message.
std::string expectSameAsSerial(const Case& c) {
  Status serial = serialCompare(c.args, c.ref, c.out);
  std::vector<double> scales = referenceScales(c.args, c.ref, kChunkings[0]);
  for (const Chunking& k : kChunkings) {
    EXPECT_EQ(referenceScales(c.args, c.ref, k), scales) << k.workers << " workers";
    Status s = compareOutputs(c.args, c.ref, scales, c.out, k);
    EXPECT_EQ(s.isOk(), serial.isOk()) << k.workers << " workers: " << s.message();
    EXPECT_EQ(s.message(), serial.message()) << k.workers << " workers";
  }
  return serial.isOk() ? "" : serial.message();
}

struct Rule {
  rt::Dtype dtype;
  ops::Compare compare;
  bool view;
};

void PrintTo(const Rule& r, std::ostream* os) {
  *os << rt::dtypeName(r.dtype) << " compare " << int(r.compare) << (r.view ? " over a view" : "");
}

class CompareRules : public ::testing::TestWithParam<Rule> {};

TEST_P(CompareRules, WithinTheBoundPasses) {
  Case c(GetParam().dtype, GetParam().compare, GetParam().view);
  EXPECT_EQ(expectSameAsSerial(c), "");
}

/// Whether a failure message names the element at storage offset `off` as its (first) failure.
bool names(const std::string& message, int64_t off) {
  return message.find("element " + std::to_string(off) + " ") != std::string::npos ||
         message.find("first at " + std::to_string(off) + ":") != std::string::npos;
}

bool countsDiffering(ops::Compare c) { return c == ops::Compare::Exact || c == ops::Compare::BlobsOfComputed; }

TEST_P(CompareRules, AFailureInTheFirstChunkIsNamed) {
  Case c(GetParam().dtype, GetParam().compare, GetParam().view);
  for (int64_t i = 0; i < 11; ++i) c.plant(3 + i);  // 11: more than BlobsOfComputed's 10
  std::string m = expectSameAsSerial(c);
  EXPECT_TRUE(names(m, c.offsets[3])) << m;
}

TEST_P(CompareRules, AFailureAtTheLastElementIsFound) {
  Case c(GetParam().dtype, GetParam().compare, GetParam().view);
  int64_t n = int64_t(c.offsets.size());
  if (GetParam().compare == ops::Compare::BlobsOfComputed) {
    for (int64_t i = 0; i < 10; ++i) c.plant(n / 3 + i);
    EXPECT_EQ(expectSameAsSerial(c), "") << "10 bytes in 10^4 may differ";
  }
  c.plant(n - 1);
  std::string m = expectSameAsSerial(c);
  if (GetParam().compare == ops::Compare::BlobsOfComputed)
    EXPECT_NE(m.find("11 of 10000 elements differ"), std::string::npos) << m;
  else
    EXPECT_TRUE(names(m, c.offsets[size_t(n - 1)])) << m;
}

TEST_P(CompareRules, OfFailuresInTwoChunksTheLowerIsNamed) {
  Case c(GetParam().dtype, GetParam().compare, GetParam().view);
  int64_t n = int64_t(c.offsets.size());
  // In the last chunk, and in a middle one for 3, 7 and 16 chunks (the same as the last for 2).
  for (int64_t i = 0; i < 6; ++i) c.plant(n - 20 + i);
  for (int64_t i = 0; i < 6; ++i) c.plant(n / 2 + 100 + i);
  std::string m = expectSameAsSerial(c);
  EXPECT_TRUE(names(m, c.offsets[size_t(n / 2 + 100)])) << m;
  if (countsDiffering(GetParam().compare)) EXPECT_NE(m.find("12 of 10000 elements differ"), std::string::npos) << m;
}

TEST_P(CompareRules, AnUnwrittenOutputFails) {
  Case c(GetParam().dtype, GetParam().compare, GetParam().view);
  std::fill(c.out[1].begin(), c.out[1].end(), std::byte{0xFF});  // the tuner's poison
  EXPECT_NE(expectSameAsSerial(c), "");
}

std::string ruleName(const ::testing::TestParamInfo<Rule>& info) {
  const std::vector<std::string> rules = {"Exact", "Bf16", "F32", "BlobsOfComputed"};
  return rules[size_t(info.param.compare)] + (info.param.view ? "View" : "Whole");
}

INSTANTIATE_TEST_SUITE_P(
    Rules, CompareRules,
    ::testing::Values(Rule{rt::Dtype::BF16, ops::Compare::Bf16, false}, Rule{rt::Dtype::BF16, ops::Compare::Bf16, true},
                      Rule{rt::Dtype::F32, ops::Compare::F32, false}, Rule{rt::Dtype::F32, ops::Compare::F32, true},
                      Rule{rt::Dtype::BF16, ops::Compare::Exact, false}, Rule{rt::Dtype::BF16, ops::Compare::Exact, true},
                      Rule{rt::Dtype::U8, ops::Compare::BlobsOfComputed, false},
                      Rule{rt::Dtype::U8, ops::Compare::BlobsOfComputed, true}),
    ruleName);

TEST(Compare, ANaNInTheReferenceDoesNotSetTheScale) {
  Case c(rt::Dtype::F32, ops::Compare::F32, false);
  store(c.ref[1], rt::Dtype::F32, 5000, std::nan(""));
  store(c.out[1], rt::Dtype::F32, 5000, std::nan(""));
  for (const Chunking& k : kChunkings) {
    std::vector<double> s = referenceScales(c.args, c.ref, k);
    EXPECT_EQ(s[0], 0) << "an input has no scale";
    EXPECT_LE(s[1], 3.0);
    EXPECT_GT(s[1], 2.9);
  }
  EXPECT_NE(expectSameAsSerial(c).find("element 5000 "), std::string::npos) << "NaN is never within a bound";
}

TEST(Compare, SameBytes) {
  std::vector<std::byte> a(100000, std::byte{1}), b = a;
  for (const Chunking& k : kChunkings) EXPECT_TRUE(sameBytes(a, b, k));
  for (size_t at : {size_t(0), size_t(49999), size_t(99999)}) {
    std::vector<std::byte> d = a;
    d[at] = std::byte{2};
    for (const Chunking& k : kChunkings) EXPECT_FALSE(sameBytes(a, d, k)) << at;
  }
  b.pop_back();
  EXPECT_FALSE(sameBytes(a, b));
}

TEST(ParallelChunks, CoverEveryItemOnceInOrder) {
  for (int64_t n : {0, 1, 5, 16, 17, 1000, 1001}) {
    for (const Chunking& k : kChunkings) {
      auto ranges = parallelChunks(n, k, [](int64_t b, int64_t e) { return std::pair<int64_t, int64_t>(b, e); });
      ASSERT_FALSE(ranges.empty());
      EXPECT_LE(int64_t(ranges.size()), std::max(1, k.workers));
      EXPECT_EQ(ranges.front().first, 0);
      EXPECT_EQ(ranges.back().second, n);
      for (size_t i = 1; i < ranges.size(); ++i) EXPECT_EQ(ranges[i].first, ranges[i - 1].second);
      if (n < k.minChunk * 2) EXPECT_EQ(ranges.size(), 1u) << "a small pass stays on one thread";
    }
  }
}

}  // namespace
}  // namespace mxfp6::autotune
