#include "compiler/codegen/transpose_layout.h"

#include <algorithm>

namespace mxfp6::codegen {

TransposeLayout transposeLayout(int64_t rows, int64_t cols, int64_t bytes, int64_t perThread) {
  TransposeLayout t{};
  bool wholeWords = cols * bytes % 16 == 0;
  t.pitch = cols + (wholeWords ? 16 / bytes : std::max<int64_t>(1, 4 / bytes));
  t.align = 1;
  while (t.align < 16 && t.pitch * bytes % (2 * t.align) == 0 && perThread * bytes % (2 * t.align) == 0) t.align *= 2;
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
