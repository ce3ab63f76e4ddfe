// How many programs of a compiled kernel fit on one SM (NVIDIA) or CU (AMD) at once, from its
// resources and block size: the occupancy a tuner compares schedules by, reported beside the
// registers so AMD code objects, which we cannot run, can be judged against the sm_90 ones we
// measure. An estimate from the published per-SM/CU limits, not a measurement.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/target.h"

namespace mxfp6::codegen {

struct Occupancy {
  int programsPerUnit = 0;  // resident programs per SM / CU
  double fraction = 0;      // resident warps (waves) / the hardware maximum
  std::string limit;        // what bounds it: "registers", "sgprs", "shared", "threads", "programs"
};

/// How many programs of `blockThreads` threads one SM (CU) of `target` holds at once by its warp
/// (wave) and program limits alone.
int threadResidentPrograms(const TargetInfo& target, int blockThreads);

/// How many programs of `sharedBytes` of shared memory (LDS) one SM (CU) of `target` holds at once
/// (a large number where they use none).
int sharedResidentPrograms(const TargetInfo& target, int64_t sharedBytes);

/// nullopt when the resources needed are unknown (PTX without ptxas).
std::optional<Occupancy> estimateOccupancy(const TargetInfo& target, const Resources& resources, int blockThreads);

}  // namespace mxfp6::codegen
