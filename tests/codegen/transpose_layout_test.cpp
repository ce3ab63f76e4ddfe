// The shared-memory layout of transposes (compiler/codegen/transpose_layout.h), checked as a
// layout and against a model of the 32 four-byte banks:
//  - every tile element has its own slot inside the region, and each thread's row vector (the
//    write phase) starts at a multiple of the alignment the emitter promises its vector store;
//  - the column reads of a warp (thread t holds elements t*E .. t*E+E-1 of the [W, R] transpose:
//    column (t*E + e) / R, row (t*E + e) % R at step e) touch each bank at most once -- one
//    shared-memory wavefront per read instruction -- at the schedules the packers and the
//    prologue run (a band count of at most 8: 128 / bands bytes of spacing per band);
//  - the row writes of a warp (thread t stores elements t*E .. t*E+E-1 of the tile as 16-byte
//    words, each store instruction in phases of 8 lanes) put the 8 lanes of a phase on 8
//    different 16-byte units of the bank row.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "compiler/codegen/transpose_layout.h"

namespace mxfp6::codegen {
namespace {

std::string describe(int64_t rows, int64_t cols, int64_t bytes, int64_t perThread) {
  return std::to_string(rows) + "x" + std::to_string(cols) + " of " + std::to_string(bytes) + "-byte elements, " +
         std::to_string(perThread) + " per thread";
}

TEST(TransposeLayout, SlotsAreDistinctInsideTheRegionAndRowVectorsAligned) {
  for (int64_t bytes : {1, 2, 4})
    for (int64_t rows : {1, 3, 8, 32, 64, 96, 128, 256})
      for (int64_t cols : {1, 5, 8, 32, 64, 100, 128})
        for (int64_t perThread : {1, 2, 4, 8, 12, 16, 32, 64}) {
          if (rows * cols % perThread != 0) continue;
          SCOPED_TRACE(describe(rows, cols, bytes, perThread));
          TransposeLayout t = transposeLayout(rows, cols, bytes, perThread);
          ASSERT_EQ(t.region * bytes % t.align, 0);
          std::set<int64_t> used;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t w = 0; w < cols; ++w) {
              int64_t s = t.slot(r, w);
              ASSERT_TRUE(s >= 0 && s < t.region) << "(" << r << ", " << w << ") at " << s;
              ASSERT_TRUE(used.insert(s).second) << "(" << r << ", " << w << ") shares slot " << s;
            }
          if (cols % perThread != 0) continue;  // stored element by element
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t w = 0; w < cols; w += perThread) ASSERT_EQ(t.slot(r, w) * bytes % t.align, 0);
        }
}

/// The most distinct 4-byte words that one bank serves for one read step of one warp.
int64_t worstBankLoad(const TransposeLayout& t, int64_t rows, int64_t cols, int64_t bytes, int64_t perThread,
                      int64_t threads) {
  int64_t worst = 0;
  for (int64_t warp = 0; warp * 32 < threads; ++warp)
    for (int64_t e = 0; e < perThread; ++e) {
      std::map<int64_t, std::set<int64_t>> words;  // bank -> words read from it
      for (int64_t lane = 0; lane < 32; ++lane) {
        int64_t k = ((warp * 32 + lane) * perThread + e) % (rows * cols);
        int64_t word = t.slot(k % rows, k / rows) * bytes / 4;
        words[word % 32].insert(word);
      }
      for (const auto& [bank, ws] : words) worst = std::max<int64_t>(worst, int64_t(ws.size()));
    }
  return worst;
}

struct Schedule {
  int64_t rows, cols, bytes, perThread, threads;
};

// Column and dual packers: [HB*32, W] bf16 tiles at their benchmarked VEC and THREADS, among them
// the 256-byte rows where four 64-byte vectors (the dual packer's 128-column tiles) or eight
// 32-byte ones (VEC = 16) share a row; the prologue: [32, 128] bf16 and f32 tiles at VEC = 8, 16.
constexpr Schedule kSchedules[] = {{128, 64, 2, 32, 256}, {128, 64, 2, 32, 128}, {64, 64, 2, 32, 128},
                                   {256, 64, 2, 32, 256}, {128, 128, 2, 32, 512}, {128, 128, 2, 32, 256},
                                   {64, 128, 2, 16, 256}, {128, 64, 2, 16, 512},  {256, 32, 2, 32, 256},
                                   {32, 128, 2, 8, 512},  {32, 128, 4, 8, 512},   {32, 128, 2, 16, 256},
                                   {32, 128, 4, 16, 256}, {32, 64, 2, 32, 64}};

TEST(TransposeLayout, ColumnReadsOfAWarpHitEachBankOnce) {
  for (const Schedule& s : kSchedules) {
    SCOPED_TRACE(describe(s.rows, s.cols, s.bytes, s.perThread));
    TransposeLayout t = transposeLayout(s.rows, s.cols, s.bytes, s.perThread);
    EXPECT_EQ(worstBankLoad(t, s.rows, s.cols, s.bytes, s.perThread, s.threads), 1);
  }
}

/// The most of 8 accesses of one phase (byte offsets `byteOf(0..7)`) that share a 16-byte unit
/// of the bank row (1: one wavefront).
template <typename ByteOf>
int64_t mostOnOneUnit(ByteOf byteOf) {
  std::map<int64_t, int64_t> onUnit;
  int64_t most = 0;
  for (int64_t k = 0; k < 8; ++k) most = std::max(most, ++onUnit[byteOf(k) / 16 % 8]);
  return most;
}

/// The most lanes of one 8-lane phase of a 16-byte store instruction that share a 16-byte unit
/// of the bank row (1: one wavefront per phase). Thread t's vector covers tile elements t*E ..;
/// instruction i of it stores its 16 bytes at i*16.
int64_t worstStorePhase(const TransposeLayout& t, int64_t cols, int64_t bytes, int64_t perThread, int64_t threads) {
  int64_t worst = 0;
  const int64_t words = perThread * bytes / 16;
  for (int64_t phase = 0; phase * 8 < threads; ++phase)
    for (int64_t i = 0; i < words; ++i)
      worst = std::max(worst, mostOnOneUnit([&](int64_t k) {
                         int64_t first = (phase * 8 + k) * perThread + i * 16 / bytes;
                         return t.slot(first / cols, first % cols) * bytes;
                       }));
  return worst;
}

TEST(TransposeLayout, RowWritesOfAPhaseHitEachUnitOnce) {
  for (const Schedule& s : kSchedules) {
    SCOPED_TRACE(describe(s.rows, s.cols, s.bytes, s.perThread));
    TransposeLayout t = transposeLayout(s.rows, s.cols, s.bytes, s.perThread);
    EXPECT_EQ(worstStorePhase(t, s.cols, s.bytes, s.perThread, s.threads), 1);
  }
}

// One padding per row: the 128-column tile's four 64-byte vectors pair up on the same units, the
// two-way conflict Nsight Compute measured on the dual packer (4.4 wavefronts per store request
// where 4 would do).
TEST(TransposeLayout, WithoutThePaddingInsideTheRowItsVectorsCollide) {
  TransposeLayout t = transposeLayout(128, 128, 2, 32);
  ASSERT_GT(t.pad, 0);
  t.pitch = 128 + 8;
  t.pad = 0;
  t.skew = ((32 - 32 * t.pitch * 2) % 128 + 128) % 128 / 2;
  EXPECT_EQ(worstStorePhase(t, 128, 2, 32, 256), 2);
  EXPECT_EQ(worstBankLoad(t, 128, 128, 2, 32, 256), 1);
}

// Without the skew (bands a multiple of 128 bytes apart), the same reads would queue: the model
// sees the 4-way conflict of the 128 x 64 tile that Nsight Compute measured before the layout.
TEST(TransposeLayout, WithoutTheSkewTheBandsCollide) {
  TransposeLayout t = transposeLayout(128, 64, 2, 32);
  ASSERT_GT(t.skew, 0);
  t.skew = 0;
  EXPECT_EQ(worstBankLoad(t, 128, 64, 2, 32, 256), 4);
}

// Matrix reads (ldmatrix .x4 .trans of 8x8 matrices of 16-bit elements, four threads of E rows
// per column). A model of the instruction from the PTX ISA: lane 8i + j supplies the address of
// row j of matrix i (8 consecutive elements); with .trans, lane t receives in register i the
// elements at column t/4 of rows 2(t%4) and 2(t%4)+1 of matrix i. Against it:
//  - each lane receives its own rows in order: register i of load m holds rows
//    E*(t%4) + 8m + 2i + {0, 1} of column t/4 of its warp's 8-column group, so the emitter's
//    addresses (matrixRow, and the 8 columns of a group contiguous from its first) give the
//    thread the transpose's elements;
//  - the 8 rows of each matrix fall on 8 different 16-byte units (one wavefront per matrix), and
//    the row writes' phases too.
constexpr Schedule kMatrixSchedules[] = {{128, 128, 2, 32, 256}, {128, 64, 2, 32, 256}, {128, 64, 2, 32, 128},
                                         {128, 32, 2, 32, 128},  {64, 64, 2, 16, 128},  {64, 128, 2, 16, 256},
                                         {32, 64, 2, 8, 64},     {32, 128, 2, 8, 512},  {32, 128, 2, 8, 256},
                                         {256, 64, 2, 64, 256}};

TEST(MatrixReadLayout, EachLaneReceivesItsRowsInOrder) {
  for (const Schedule& s : kMatrixSchedules) {
    SCOPED_TRACE(describe(s.rows, s.cols, s.bytes, s.perThread));
    ASSERT_TRUE(matrixReadsFit(s.rows, s.cols, s.bytes, s.perThread));
    TransposeLayout t = matrixReadLayout(s.rows, s.cols, s.bytes, s.perThread);
    std::set<int64_t> used;
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t w = 0; w < s.cols; ++w) {
        ASSERT_TRUE(t.slot(r, w) >= 0 && t.slot(r, w) < t.region);
        ASSERT_TRUE(used.insert(t.slot(r, w)).second);
      }
    for (int64_t w0 = 0; w0 < s.cols; w0 += 8)
      for (int64_t load = 0; load < s.perThread / 8; ++load)
        for (int64_t i = 0; i < 4; ++i) {
          // The 8 addresses of matrix i: each a 16-byte aligned run of 8 elements.
          int64_t address[8];
          for (int64_t j = 0; j < 8; ++j) {
            address[j] = t.slot(matrixRow(s.perThread, j / 2, load, i, j % 2), w0);
            ASSERT_EQ(address[j] * s.bytes % 16, 0);
          }
          for (int64_t lane = 0; lane < 32; ++lane)
            for (int64_t half = 0; half < 2; ++half) {
              int64_t received = address[2 * (lane % 4) + half] + lane / 4;
              int64_t wanted = t.slot(s.perThread * (lane % 4) + 8 * load + 2 * i + half, w0 + lane / 4);
              ASSERT_EQ(received, wanted) << "lane " << lane << " load " << load << " matrix " << i;
            }
        }
  }
}

/// The most rows of one matrix that share a 16-byte unit of the bank row.
int64_t worstMatrixPhase(const TransposeLayout& t, int64_t cols, int64_t bytes, int64_t perThread) {
  int64_t worst = 0;
  for (int64_t w0 = 0; w0 < cols; w0 += 8)
    for (int64_t load = 0; load < perThread / 8; ++load)
      for (int64_t i = 0; i < 4; ++i)
        worst = std::max(worst, mostOnOneUnit([&](int64_t j) {
                           return t.slot(perThread * (j / 2) + 8 * load + 2 * i + j % 2, w0) * bytes;
                         }));
  return worst;
}

TEST(MatrixReadLayout, MatricesAndRowWritesHitEachUnitOnce) {
  for (const Schedule& s : kMatrixSchedules) {
    SCOPED_TRACE(describe(s.rows, s.cols, s.bytes, s.perThread));
    TransposeLayout t = matrixReadLayout(s.rows, s.cols, s.bytes, s.perThread);
    EXPECT_EQ(worstMatrixPhase(t, s.cols, s.bytes, s.perThread), 1);
    EXPECT_EQ(worstStorePhase(t, s.cols, s.bytes, s.perThread, s.threads), 1);
    // At most one 16-byte unit per row more than the plain layout's.
    EXPECT_LE(t.region, transposeLayout(s.rows, s.cols, s.bytes, s.perThread).region + s.rows * 8) << t.region;
  }
}

// The plain layout's 128 x 128 tile (16 bytes after every 128 of a row) puts adjacent rows two
// units apart, so two of the four bands' row pairs meet: matrix reads need the search's layout.
TEST(MatrixReadLayout, ThePlainLayoutWouldConflict) {
  EXPECT_EQ(worstMatrixPhase(transposeLayout(128, 128, 2, 32), 128, 2, 32), 2);
}

TEST(MatrixReadLayout, FitsFourThreadsPerColumnOfWholeMatrices) {
  EXPECT_TRUE(matrixReadsFit(32, 128, 2, 8));
  EXPECT_FALSE(matrixReadsFit(32, 128, 2, 16));  // two threads per column
  EXPECT_FALSE(matrixReadsFit(32, 128, 4, 8));   // f32 elements
  EXPECT_FALSE(matrixReadsFit(16, 128, 2, 4));   // half matrices
  EXPECT_FALSE(matrixReadsFit(32, 4, 2, 8));     // not a whole 8-column group
}

}  // namespace
}  // namespace mxfp6::codegen
