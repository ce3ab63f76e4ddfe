// Selection that is stable (docs/architecture.md, "Tuning"): candidates whose timing is within
// noise of the best form an equivalence set, and the winner is picked from it by a fixed rule —
// the incumbent first, then the least resource use, then declaration order — so re-tuning a key
// whose best candidates differ by less than the noise gives the same winner every time.
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
  /// Candidates within this fraction of the best median are always equivalent: run-to-run
  /// drift on one GPU (1 %, measured in the benchmark's repeated runs).
  double noiseFloor = 0.01;
  /// Beyond the floor, a candidate is equivalent when its median minus this many of its
  /// standard errors is at most the best median plus as many of the best's ...
  double sigmas = 3.0;
  /// ... and its median is within this fraction of the best's: noisy samples never make a
  /// candidate slower than this equivalent, which bounds the regret of the rule's choice.
  double maxSpread = 0.02;
};

/// The median of samples (0 for none).
double median(std::vector<double> samples);

Choice select(const std::vector<Measured>& candidates, const std::optional<std::string>& incumbent,
              const SelectionOptions& options = {});

}  // namespace mxfp6::autotune
