// Selection that is stable (docs/architecture.md, "Tuning"): candidates whose median is within a
// fixed band of the best form an equivalence set, and the winner is picked from it by a fixed rule —
// the incumbent first, then the least resource use, then declaration order — so re-tuning a key
// whose best candidates differ by less than the band gives the same winner every time.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mxfp6::autotune {

struct Measured {
  std::string planId;
  bool passedGate = false;
  std::vector<double> samplesUs;
  double resourceCost = 0;  // lower is better (registers x threads, shared memory ...)
  int ordinal = 0;          // declaration order in the op table
};

struct Choice {
  std::string winner;                  // empty when no candidate passed its gate
  std::vector<std::string> equivalent; // the equivalence set, best median first
  std::string rule;                    // why the winner, in words
};

struct SelectionOptions {
  /// Candidates whose median is within this fraction of the best median are equivalent, and the
  /// rule picks the winner among them. A fixed band rather than one drawn from each run's sample
  /// spread, so that membership moves only where a candidate's true gap is at the band's edge;
  /// the tuner re-times the contenders until their medians are precise enough that this is
  /// rare (autotune/tuner.h).
  double band = 0.015;
  /// The incumbent (the key's current winner) stays while its median is within this fraction of
  /// the best: wider than `band`, so that a re-tune does not drop a winner whose gap sits at the
  /// band's edge (hysteresis). It is the rule's regret bound: no winner is measured slower.
  double incumbentBand = 0.02;
};

/// The median of samples (0 for none).
double median(std::vector<double> samples);

Choice select(const std::vector<Measured>& candidates, const std::optional<std::string>& incumbent,
              const SelectionOptions& options = {});

}  // namespace mxfp6::autotune
