#include "compiler/codegen/transpose_layout.h"

#include <algorithm>
#include <optional>

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

/// Whether the 16-byte units (of the 8 in a bank row) that `units` yields for the lanes of one
/// phase repeat.
template <typename UnitOf>
bool phaseRepeats(int64_t lanes, UnitOf unitOf) {
  int seen = 0;
  for (int64_t lane = 0; lane < lanes; ++lane) {
    int bit = 1 << (unitOf(lane) % 8);
    if (seen & bit) return true;
    seen |= bit;
  }
  return false;
}

/// Whether the row writes of the matrix-read layout `t` (16-byte words, thread t's vector holding
/// tile elements t*E ..) or its matrix loads meet on a unit within a phase.
bool matrixLayoutCollides(const TransposeLayout& t, int64_t rows, int64_t cols, int64_t bytes, int64_t perThread) {
  auto unit = [&](int64_t r, int64_t w) { return t.slot(r, w) * bytes / 16; };
  const int64_t threads = rows * cols / perThread, words = perThread * bytes / 16;
  for (int64_t phase = 0; phase * 8 < threads; ++phase)
    for (int64_t i = 0; i < words; ++i)
      if (phaseRepeats(8, [&](int64_t lane) {
            int64_t first = (phase * 8 + lane) * perThread + i * 16 / bytes;
            return unit(first / cols, first % cols);
          }))
        return true;
  for (int64_t w0 = 0; w0 < cols; w0 += 8)
    for (int64_t load = 0; load < perThread / 8; ++load)
      for (int64_t matrix = 0; matrix < 4; ++matrix)
        if (phaseRepeats(8, [&](int64_t j) { return unit(matrixRow(perThread, j / 2, load, matrix, j % 2), w0); }))
          return true;
  return false;
}

}  // namespace

bool matrixReadsFit(int64_t rows, int64_t cols, int64_t bytes, int64_t perThread) {
  return bytes == 2 && perThread % 8 == 0 && rows == 4 * perThread && cols % 8 == 0 && cols % perThread == 0;
}

TransposeLayout matrixReadLayout(int64_t rows, int64_t cols, int64_t bytes, int64_t perThread) {
  const int64_t rowBytes = cols * bytes, unitElements = 16 / bytes;
  auto layout = [&](int64_t pad, int64_t tail, int64_t skew) {
    TransposeLayout t{};
    t.segment = rowBytes > 128 ? 128 / bytes : cols;
    t.pad = pad * unitElements;
    t.pitch = cols + (cols - 1) / t.segment * t.pad + tail * unitElements;
    t.band = perThread;
    t.skew = skew * unitElements;
    t.align = 16;
    t.region = rows * t.pitch + (rows / t.band - 1) * t.skew;
    return t;
  };
  // Paddings of 0..3 units after every 128 bytes of a longer row, 0..7 more at its end, skews of
  // 0..7 units per band: every offset stays a whole unit, so each 8-column group is 16-byte aligned.
  std::optional<TransposeLayout> best;
  for (int64_t pad = 0; pad < (rowBytes > 128 ? 4 : 1); ++pad)
    for (int64_t tail = 0; tail < 8; ++tail)
      for (int64_t skew = 0; skew < 8; ++skew) {
        TransposeLayout t = layout(pad, tail, skew);
        if ((!best || t.region < best->region) && !matrixLayoutCollides(t, rows, cols, bytes, perThread)) best = t;
      }
  // The packers' schedules all have a conflict-free layout here (tests/codegen checks them); a
  // tile without one is still read correctly, at the cost of repeated wavefronts.
  return best ? *best : layout(0, 0, 0);
}

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
