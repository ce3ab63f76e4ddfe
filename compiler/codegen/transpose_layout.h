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

/// Whether the column reads of such a tile can be matrix loads (ldmatrix .trans, 8x8 matrices of
/// 16-bit elements, four per instruction): 2-byte elements, four threads per column, each holding
/// a multiple of 8 rows, whole 8-column groups, row vectors stored as 16-byte words.
bool matrixReadsFit(int64_t rows, int64_t cols, int64_t bytes, int64_t perThread);

/// The layout for matrix reads (matrixReadsFit): every 8-column group of a row 16-byte aligned;
/// the eight rows of each matrix -- rows E*b + 8m + 2i + d of band b (E = perThread, d = 0, 1),
/// the pair 8m + 2i of each of the four bands -- on eight different 16-byte units of the bank
/// row, and the lanes of each phase of the row writes too. Found by search over the paddings
/// (after every 128 bytes and at the row's end) and the band skew: the smallest region that
/// serves both without conflicts.
TransposeLayout matrixReadLayout(int64_t rows, int64_t cols, int64_t bytes, int64_t perThread);

/// The tile row of row 2 * band + half of matrix `matrix` (0..3) of matrix load `load`: the
/// thread holding rows E*band .. E*band + E - 1 of a column gets rows 8*load + 2*matrix + half of
/// them in register `matrix` of that load (half 0 in its low 16 bits).
inline int64_t matrixRow(int64_t perThread, int64_t band, int64_t load, int64_t matrix, int64_t half) {
  return perThread * band + 8 * load + 2 * matrix + half;
}

}  // namespace mxfp6::codegen
