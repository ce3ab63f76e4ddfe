// Splitting [0, n) into contiguous ranges run on threads: the interpreter's rows, the reference
// encoder's blocks and the GPU tests' element checks, each of which writes only its own range.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace mxfp6::interp {

/// Runs body(part, first, last) for the ranges part = 0 .. parts - 1 of [0, n), range `part` being
/// [n * part / parts, n * (part + 1) / parts), on up to `threads` threads, the calling one among
/// them (parts = threads, clamped to [1, max(n, 1)]). Returns parts. Each range must write only
/// what is its own: no locking is done.
template <typename Body>
int64_t inRanges(int64_t n, int64_t threads, const Body& body) {
  const int64_t parts = std::clamp<int64_t>(threads, 1, std::max<int64_t>(n, 1));
  std::vector<std::thread> workers;
  for (int64_t p = 1; p < parts; ++p)
    workers.emplace_back([&, p] { body(p, n * p / parts, n * (p + 1) / parts); });
  body(int64_t{0}, int64_t{0}, n / parts);
  for (std::thread& w : workers) w.join();
  return parts;
}

}  // namespace mxfp6::interp
