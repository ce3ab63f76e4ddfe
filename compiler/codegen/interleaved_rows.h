// Interleaved rows (the INTERLEAVE schedule): each thread holds INTERLEAVE rows of its program,
// rows ROWS apart, and computes them side by side: every op of the row body that depends on the
// row is emitted once per row, the copies next to each other, so the rows' loads issue together
// and their reductions and math form independent chains the scheduler can overlap. One row per
// thread leaves a short kernel (load, a few shuffles, math, store) one dependent chain deep, and
// the second memory latency of a row (its rotary table, behind the row's own load and
// reduction) uncovered; Triton's norm+RoPE layout holds two rows per thread the same way.
//
// It is a KIR-to-KIR rewrite that only code generation sees (the interpreter runs the DSL rows
// as written): ops that do not depend on the row (weights, scalar arguments, constants) stay
// once, every other op and every store becomes INTERLEAVE consecutive copies, and `slot` says
// which row each op computes. The emitter maps row slot s of a thread to row
// `program * ROWS * INTERLEAVE + s * ROWS + the thread's place in the program` (clamped for loads,
// masked for stores, as for any row past the end). Under SERIAL the rewritten body becomes the
// body of the row-group loop (serial_rows.h): each trip covers ROWS * INTERLEAVE rows.
//
// Row bodies with loops or variables are declined: a loop's copies cannot sit op by op next to
// each other. So are transposes (their shared tiles would multiply).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/frontend/kir.h"

namespace mxfp6::codegen {

/// The INTERLEAVE tunable of a kernel's configuration (1 when it has none).
int64_t interleavedRowCount(const kir::Kernel& kernel);

/// Why `kernel` cannot interleave its rows, with the op that stops it (-1: the configuration);
/// an empty reason when it can.
struct InterleaveRefusal {
  std::string reason;
  int op = -1;
};
InterleaveRefusal interleaveRefusal(const kir::Kernel& kernel);

struct InterleavedRows {
  kir::Kernel kernel;     // the rewritten kernel
  std::vector<int> slot;  // per op of `kernel`: the row slot it computes, or -1 (row-invariant)
};

/// The rewrite above, for `count` >= 2 rows per thread; interleaveRefusal(kernel) must be empty.
InterleavedRows interleaveRows(const kir::Kernel& kernel, int64_t count);

}  // namespace mxfp6::codegen
