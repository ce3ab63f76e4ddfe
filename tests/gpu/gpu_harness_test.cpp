// The GPU tests' harness on the CPU: checkInParallel visits every index of [0, n) exactly once,
// whatever n against the number of cores, and Bf16Check::merge gives the counts and maxima of
// one check over all the elements; its lazy bound counts what the eager one counts.

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "compiler/interp/float_formats.h"
#include "tests/gpu/gpu_harness.h"

namespace mxfp6 {
namespace {

struct Visits {
  int64_t count = 0, sum = 0, max = -1;
  void merge(const Visits& o) {
    count += o.count;
    sum += o.sum;
    max = std::max(max, o.max);
  }
};

TEST(CheckInParallel, VisitsEveryIndexOnce) {
  const int64_t cores = std::thread::hardware_concurrency();
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, cores - 1, cores, cores + 1, int64_t{1000003}}) {
    if (n < 0) continue;
    SCOPED_TRACE(n);
    std::vector<uint8_t> seen(n, 0);
    Visits v = gputest::checkInParallel<Visits>(n, [&](int64_t begin, int64_t end, Visits& part) {
      for (int64_t i = begin; i < end; ++i) {
        ++seen[i];  // ranges are disjoint: no two threads touch one index
        ++part.count;
        part.sum += i;
        part.max = std::max(part.max, i);
      }
    });
    EXPECT_EQ(v.count, n);
    EXPECT_EQ(v.sum, n * (n - 1) / 2);
    EXPECT_EQ(v.max, n - 1);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "index " << i;
  }
}

// References 1 bf16 ulp apart, 3 ulp apart with a bound that holds and one that does not, and a
// NaN: one Bf16Check over all of them against the merge of checks over the parallel ranges.
TEST(CheckInParallel, MergedChecksEqualOneCheck) {
  const int64_t n = 100001;
  std::vector<uint16_t> gpu(n);
  std::vector<double> ref(n), extra(n);
  for (int64_t i = 0; i < n; ++i) {
    double r = 1.0 + double(i % 977) / 977.0;
    uint16_t rounded = interp::doubleToBf16(r);
    int kind = int(i % 7);
    gpu[i] = kind == 0 ? uint16_t(rounded + 1) : kind == 1 ? uint16_t(rounded + 3) : rounded;
    if (i % 1009 == 0) gpu[i] = 0x7FC0;  // NaN
    ref[i] = r;
    extra[i] = kind == 1 && i % 2 ? 1.0 : 0.0;  // half of the 3-ulp elements within their bound
  }
  gputest::Bf16Check whole;
  for (int64_t i = 0; i < n; ++i) whole.add(gpu[i], ref[i], extra[i]);
  auto parts = gputest::checkInParallel<std::array<gputest::Bf16Check, 2>>(
      n, [&](int64_t begin, int64_t end, std::array<gputest::Bf16Check, 2>& c) {
        for (int64_t i = begin; i < end; ++i) {
          c[0].add(gpu[i], ref[i], extra[i]);
          c[1].add(gpu[i], ref[i], 0.0);
        }
      });
  EXPECT_GT(whole.beyondBound, 0);
  EXPECT_GT(whole.nonFinite, 0);
  EXPECT_EQ(parts[0].beyondOneUlp, whole.beyondOneUlp);
  EXPECT_EQ(parts[0].beyondBound, whole.beyondBound);
  EXPECT_EQ(parts[0].nonFinite, whole.nonFinite);
  EXPECT_EQ(parts[0].maxUlp, whole.maxUlp);
  EXPECT_EQ(parts[0].maxBoundFraction, whole.maxBoundFraction);
  // Without the extra bound every element beyond 1 ulp is beyond its bound.
  EXPECT_EQ(parts[1].beyondBound, parts[1].beyondOneUlp);
}

// The lazy form computes the bound's extra term only for the elements beyond 1 ulp, and counts
// exactly what the eager form counts with every term computed up front.
TEST(Bf16Check, LazyBoundEqualsEagerBound) {
  const int64_t n = 20011;
  gputest::Bf16Check eager, lazy;
  int64_t termsComputed = 0, beyondOneUlp = 0;
  for (int64_t i = 0; i < n; ++i) {
    double ref = 0.5 + double(i % 613) / 613.0;
    uint16_t rounded = interp::doubleToBf16(ref);
    uint16_t gpu = i % 5 == 0 ? uint16_t(rounded + 2) : i % 11 == 0 ? uint16_t(0xFF80) : rounded;  // 2 ulp, -inf
    double extra = i % 3 == 0 ? 1.0 : 0.0;
    double g = interp::bf16ToDouble(gpu);
    if (std::isfinite(g) && std::fabs(g - interp::roundToBf16(ref)) > interp::ulpBf16(interp::roundToBf16(ref)))
      ++beyondOneUlp;
    eager.add(gpu, ref, extra);
    lazy.addLazily(gpu, ref, [&] {
      ++termsComputed;
      return extra;
    });
  }
  EXPECT_GT(beyondOneUlp, 0);
  EXPECT_EQ(termsComputed, beyondOneUlp);
  EXPECT_EQ(lazy.beyondOneUlp, beyondOneUlp);
  EXPECT_EQ(lazy.beyondBound, eager.beyondBound);
  EXPECT_GT(lazy.beyondBound, 0);
  EXPECT_LT(lazy.beyondBound, beyondOneUlp);  // the elements with extra = 1 are within it
  EXPECT_EQ(lazy.nonFinite, eager.nonFinite);
  EXPECT_GT(lazy.nonFinite, 0);
  EXPECT_EQ(lazy.maxUlp, eager.maxUlp);
  EXPECT_EQ(lazy.maxBoundFraction, eager.maxBoundFraction);
}

}  // namespace
}  // namespace mxfp6
