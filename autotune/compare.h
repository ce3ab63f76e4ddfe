// The gate's comparison of a candidate's outputs with a reference's (the interpreter's at the
// small shape, the first passing candidate's at the key's), by each output's declared rule
// (ops/op_args.h's Compare), over host copies.
//
// Outputs reach 10^8 elements and a key tens of candidates, so each pass is split over threads
// (support/parallel.h) and a reference's scales are computed once, not per candidate. Neither
// changes a verdict or a message: the failure named is the first in the view's index order,
// whatever the number of threads.
#pragma once

#include <cstddef>
#include <vector>

#include "ops/op_args.h"
#include "support/parallel.h"
#include "support/status.h"

namespace mxfp6::autotune {

/// Per tensor of `args`: the largest |value| of `ref` over the tensor's view for the outputs
/// compared within bounds (Bf16, F32), the scale of their bounds; 0 for every other tensor.
std::vector<double> referenceScales(const ops::OpArgs& args, const std::vector<std::vector<std::byte>>& ref,
                                    const Chunking& chunking = {});

/// Compares every output of `out` with `ref` by its declared rule; the first failing output, and
/// in it the first failing element in index order, named. `scales` is referenceScales(args, ref).
Status compareOutputs(const ops::OpArgs& args, const std::vector<std::vector<std::byte>>& ref,
                      const std::vector<double>& scales, const std::vector<std::vector<std::byte>>& out,
                      const Chunking& chunking = {});

/// Whether two byte strings are identical (sizes included).
bool sameBytes(const std::vector<std::byte>& a, const std::vector<std::byte>& b, const Chunking& chunking = {});

}  // namespace mxfp6::autotune
