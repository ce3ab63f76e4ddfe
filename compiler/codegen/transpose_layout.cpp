#include "compiler/codegen/transpose_layout.h"

#include <algorithm>

namespace mxfp6::codegen {
namespace {

/// Whether two lanes of one 8-lane phase of a 16-byte store land on the same 16-byte unit of the
/// bank row, thread t's vector holding tile elements t*E .. t*E+E-1 (row-major), rows
/// `pitchBytes` apart.
bool storePhasesCollide(int64_t rows, int64_t cols, int64_t bytes, int64_t perThread, int64_t pitchBytes) {
  const int64_t threads = rows * cols / perThread, words = perThread * bytes / 16;
  for (int64_t phase = 0; phase * 8 < threads; ++phase)
    for (int64_t i = 0; i < words; ++i) {
      int units = 0;
      for (int64_t lane = phase * 8; lane < std::min(threads, phase * 8 + 8); ++lane) {
        int64_t first = lane * perThread * bytes + i * 16, r = first / (cols * bytes), w = first % (cols * bytes);
        int bit = 1 << ((r * pitchBytes + w) / 16 % 8);
        if (units & bit) return true;
        units |= bit;
      }
    }
  return false;
}

}  // namespace

TransposeLayout transposeLayout(int64_t rows, int64_t cols, int64_t bytes, int64_t perThread) {
  TransposeLayout t{};
  const int64_t rowBytes = cols * bytes, vectorBytes = perThread * bytes;
  bool wholeWords = rowBytes % 16 == 0;
  // A 16-byte store instruction goes out in phases of 8 lanes, one 16-byte unit of the 128-byte
  // bank row each. Where several threads share a row longer than 128 bytes, a phase's lanes may
  // sit 128 bytes apart within it (the four 64-byte vectors of a 256-byte row: two pairs on the
  // same units). There, 16 bytes of padding after every 128 move each 128 bytes of a row one
  // unit on, so the lanes of a phase land on distinct units -- where no thread's vector crosses
  // a padding. Rows whose phases do not collide keep the one padding at their end.
  bool segmented = wholeWords && rowBytes > 128 && rowBytes % 128 == 0 && vectorBytes % 16 == 0 &&
                   vectorBytes <= 128 && 128 % vectorBytes == 0 &&
                   storePhasesCollide(rows, cols, bytes, perThread, rowBytes + 16);
  t.segment = segmented ? 128 / bytes : cols;
  t.pad = segmented ? 16 / bytes : 0;
  t.pitch = cols + (segmented ? rowBytes / 128 * t.pad : wholeWords ? 16 / bytes : std::max<int64_t>(1, 4 / bytes));
  t.align = 1;
  while (t.align < 16 && t.pitch * bytes % (2 * t.align) == 0 && vectorBytes % (2 * t.align) == 0) t.align *= 2;
  t.band = perThread < rows && rows % perThread == 0 ? perThread : rows;
  int64_t bands = rows / t.band;
  t.skew = 0;
  if (bands > 1) {
    // Bands 128 / bands bytes apart modulo the 128 bytes of a bank row, in whole aligned steps.
    int64_t spacing = std::max(t.align, (128 / bands + t.align - 1) / t.align * t.align);
    int64_t skewBytes = ((spacing - t.band * t.pitch * bytes) % 128 + 128) % 128;
    t.skew = skewBytes / bytes;
  }
  int64_t alignElements = std::max<int64_t>(1, t.align / bytes);
  t.region = (rows * t.pitch + (bands - 1) * t.skew + alignElements - 1) / alignElements * alignElements;
  return t;
}

}  // namespace mxfp6::codegen
