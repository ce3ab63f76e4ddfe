// Serial rows (the SERIAL schedule): a program walks SERIAL groups of ROWS rows one after the
// other instead of handling one group, so that the next group's loads are in flight while this
// group reduces, computes and stores (the loop is pipelined like PREFETCH = 2, pipeline.cpp).
// A kernel of one row per program with a long dependent tail (load, reductions behind barriers,
// math, stores) otherwise waits a full memory latency per row.
//
// It is a KIR-to-KIR rewrite that only code generation sees (the interpreter runs the DSL rows
// as written): the row body becomes the body of a counted loop of SERIAL trips,
//
//   c0 = 0; cS = SERIAL; c1 = 1
//   the body's row-invariant scalars and loads (weights, tables at a fixed index, scalar args)
//   trip = ForBegin(c0, cS, c1)
//     the rest of the body, its RowIndex ops taking `trip` as their operand
//   ForEnd(trip)
//
// and the emitter maps RowIndex(trip) to row `program * ROWS * SERIAL + trip * ROWS + the row's
// place in the program` (clamped for loads, masked for stores, as for any row past the end). The
// trip count is the same for every thread, so barriers inside stay uniform.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/frontend/kir.h"

namespace mxfp6::codegen {

/// The SERIAL tunable of a kernel's configuration (1 when it has none).
int64_t serialSteps(const kir::Kernel& kernel);

struct SerialRows {
  kir::Kernel kernel;  // the rewritten kernel
  int loop = -1;       // the id of its ForBegin over the row groups
  std::vector<int> newId;  // per op of the input: its id in the rewrite
};

/// The rewrite above, for SERIAL = `steps` >= 2.
SerialRows serializeRows(const kir::Kernel& kernel, int64_t steps);

}  // namespace mxfp6::codegen
