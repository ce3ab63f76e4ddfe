// Where a transpose keeps its tile in shared memory (tile_ops.cpp's header says why): rows padded
// to 16-byte multiples, rows longer than 128 bytes padded by 16 bytes after every 128, and each
// band of rows that one thread's column vector spans shifted so that the column reads of a warp
// fall into different banks. Plain arithmetic, no MLIR: the emitter and its tests share it.
#pragma once

#include <cstdint>

namespace mxfp6::codegen {

struct TransposeLayout {
  int64_t pitch;    // elements from one tile row to the next
  int64_t segment;  // elements of a row between two paddings (the whole row when it has none)
  int64_t pad;      // elements of padding after each segment inside a row (0: none)
  int64_t band;     // rows that share one skew: the rows one thread's column vector spans
  int64_t skew;     // elements added per band
  int64_t align;    // bytes every thread's row vector is aligned to
  int64_t region;   // elements of one program row's tile (a multiple of align)

  /// Element offset of tile element (r, w) within the region.
  int64_t slot(int64_t r, int64_t w) const { return r * pitch + w + w / segment * pad + r / band * skew; }
};

/// The layout of an [rows, cols] tile of `bytes`-byte elements whose threads hold `perThread`
/// consecutive elements (of a row when written, of a column when read).
TransposeLayout transposeLayout(int64_t rows, int64_t cols, int64_t bytes, int64_t perThread);

}  // namespace mxfp6::codegen
