// Shape sets: the ops and shapes a model runs, read from JSON (shapes/flux12b.json), from which
// precompile compiles, the tuner tunes and clients prefetch. Format:
//   {"model": "...", "entries": [
//     {"site": "LN-modulate, double blocks", "op": "ln_modulate_fwd",
//      "variant": {"layout": "bsd"},            // optional: the op's variant axes
//      "size": 3072,                            // the op's specialized size (D or C), if it has one
//      "heads": 24,                             // norm+RoPE ops
//      "tokens_per_sample": 256,                // per-sample LN-modulate ops
//      "tokens": [4096, 8192, 16384],           // one key per value
//      "calls_per_step": 76}, ...]}             // optional, informational
// Every entry is checked before anything is used: an unknown op, variant, size or an impossible
// shape is an error naming the file and the entry.
#pragma once

#include <string>
#include <vector>

#include "ops/plan.h"

namespace mxfp6::ops {

struct ShapeEntry {
  std::string site;
  Problem problem;
  int64_t callsPerStep = 0;
};

/// Each entry expanded to one ShapeEntry per token count, in file order.
Expected<std::vector<ShapeEntry>> parseShapeSet(std::string_view json, const std::string& fileName);
Expected<std::vector<ShapeEntry>> loadShapeSet(const std::string& path);

}  // namespace mxfp6::ops
