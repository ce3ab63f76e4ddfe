// parallelChunks: one pass over the items [0, n) split into contiguous chunks, each on its own
// thread, the results returned in chunk order.
//
// Why: the tuner's gate compares outputs of up to 10^8 elements per tensor for every candidate
// of a key, on a host with many cores; one thread made the comparison the bulk of a key's time.
// Results come back in chunk order, so a caller that wants the first item (in index order) with
// some property takes the first chunk that found one: the answer does not depend on the number
// of threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace mxfp6 {

/// The threads a pass may use: the hardware's, at least 1.
inline int hardwareWorkers() { return int(std::max(1u, std::thread::hardware_concurrency())); }

struct Chunking {
  int workers = hardwareWorkers();
  /// Fewer items than this per thread are not worth a thread's start (tens of microseconds):
  /// small passes run on fewer threads, the smallest on the caller's alone.
  int64_t minChunk = int64_t{1} << 18;
};

/// Calls f(begin, end) once per chunk of [0, n) (chunk i is [i n / k, (i + 1) n / k) for k
/// chunks, k at most `workers` and at most n / minChunk, at least 1) and returns the results in
/// chunk order. Chunk 0 runs on the calling thread; f runs on several threads at once, so it
/// only reads shared state. It must not throw (the tuner's callers are plain loops over memory).
template <typename F>
auto parallelChunks(int64_t n, const Chunking& chunking, F&& f) -> std::vector<std::invoke_result_t<F&, int64_t, int64_t>> {
  using R = std::invoke_result_t<F&, int64_t, int64_t>;
  static_assert(!std::is_same_v<R, bool>, "std::vector<bool> packs its elements into shared words: return an int");
  int64_t k = std::max<int64_t>(1, std::min<int64_t>(chunking.workers, n / std::max<int64_t>(1, chunking.minChunk)));
  std::vector<R> results(size_t(k), R{});
  auto bound = [&](int64_t i) { return i * n / k; };  // n < 2^40 items and k < 2^20 threads: no overflow
  std::vector<std::thread> threads;
  threads.reserve(size_t(k - 1));
  for (int64_t i = 1; i < k; ++i)
    threads.emplace_back([&, i] { results[size_t(i)] = f(bound(i), bound(i + 1)); });
  results[0] = f(bound(0), bound(1));
  for (std::thread& t : threads) t.join();
  return results;
}

}  // namespace mxfp6
