// The tuner: for one key, every precompiled candidate plan that applies passes a correctness
// gate, then is timed with the others, interleaved; the selection rule picks the winner and the
// run (every sample) is recorded (docs/architecture.md, "Tuning").
//
// Gate, per candidate:
//   1. at a small shape of the same family (the fewest tokens the plan applies to), its GPU
//      outputs against the reference interpreter's run of the same op (ops/op_args.h's Compare
//      per output: bit for bit for the packers' blobs);
//   2. at the key's shape, launched twice: bit-identical (deterministic), and within the same
//      bounds of the first candidate that passed (bit for bit for the packers).
// Timing: each round runs every passing candidate once, in a rotating order, each run preceded
// by an L2 flush (a memset larger than the L2) and bracketed by device events; samples are kept.
// A second phase re-times only the contenders, for precise medians where the choice is made.
// Both phases spread their rounds over several placements of the buffers in device memory.
// No LLVM: the candidates' code objects come from the database.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "autotune/db.h"
#include "autotune/selection.h"
#include "ops/plan.h"
#include "runtime/runtime.h"

namespace mxfp6::autotune {

struct TuneOptions {
  int warmup = 2;                          // untimed runs of each candidate
  int rounds = 25;                         // timed samples per candidate
  /// Then the contenders (medians within twice the selection band of the best) are timed for
  /// this many more rounds, among themselves: selection then compares precise medians, so a
  /// candidate's membership of the band moves between tunes only where its true gap is at the
  /// band's edge. The samples of both phases are kept.
  int confirmRounds = 60;
  /// Each phase's rounds are spread over this many placements of the key's buffers and the
  /// plans' scratch in device memory (allocated anew for each): a plan's time depends on where
  /// its data lands, and one placement per process made tunes in different processes disagree.
  int placements = 4;
  size_t flushBytes = size_t{256} << 20;   // above every supported GPU's L2
  std::string dslDir = "kernels_dsl";      // the interpreter's kernels (the gate's oracle)
  std::string tuner = "mxfp6-tune";        // recorded with the selection
  SelectionOptions selection;
};

struct KeyOutcome {
  Key key;
  int candidates = 0, applicable = 0, passed = 0;
  std::string winner, rule;
  double seconds = 0;
  /// Where the seconds went: drawing the key's inputs and uploading them; the gate (the small
  /// shape's references and runs, two runs of each candidate at the key's shape, downloads and
  /// comparisons); timing (both phases, relocations included). The rest is loading and recording.
  double inputSeconds = 0, gateSeconds = 0, timingSeconds = 0;
  std::vector<std::string> gateFailures;  // "plan id: why", for the report
};

class Tuner {
 public:
  Tuner(rt::Device& device, KernelDb& db, TuneOptions options);
  ~Tuner();
  /// Tunes one key and records it. Errors: nothing precompiled for the family, a stale code
  /// object, no candidate passing its gate (nothing is recorded then).
  Expected<KeyOutcome> tune(const ops::Problem& problem, const std::string& target, const std::string& toolchain);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mxfp6::autotune
