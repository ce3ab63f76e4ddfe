#include "compiler/codegen/occupancy.h"

#include <algorithm>

namespace mxfp6::codegen {
namespace {

int roundUp(int x, int to) { return (x + to - 1) / to * to; }

/// The limits that bound residency, smallest first wins; ties keep the earlier name.
struct Bound {
  int programs;
  const char* name;
};

Occupancy pick(std::initializer_list<Bound> bounds, int warpsPerProgram, int maxWarps) {
  Bound best = *bounds.begin();
  for (const Bound& b : bounds)
    if (b.programs < best.programs) best = b;
  Occupancy o;
  o.programsPerUnit = std::max(0, best.programs);
  o.fraction = double(o.programsPerUnit * warpsPerProgram) / maxWarps;
  o.limit = best.name;
  return o;
}

// sm_90 (H100/H200): 64K 32-bit registers in four 16K files, one per sub-partition, each
// holding its own warps, allocated per warp in units of 256 (so 48 registers hold 4 * 10 warps,
// not 65536 / 1536 = 42: Nsight Compute's register limit, 20 programs of 2 warps); its warps,
// programs and shared memory (target.h).
Occupancy hopper(const TargetInfo& target, const Resources& r, int blockThreads) {
  int warps = (blockThreads + 31) / 32;
  int regsPerWarp = roundUp(std::max(1, *r.registers) * 32, 256);
  return pick({{4 * (16384 / regsPerWarp) / warps, "registers"},
               {target.maxWarpsPerUnit / warps, "threads"},
               {target.maxProgramsPerUnit, "programs"},
               {sharedResidentPrograms(target, r.sharedBytes.value_or(0)), "shared"}},
              warps, target.maxWarpsPerUnit);
}

// CDNA3/4 (gfx942, gfx950): a CU has 4 SIMDs of at most 8 wave64s; 512 VGPRs per lane of a SIMD
// in units of 8, 800 SGPRs per SIMD in units of 16; its LDS (target.h).
Occupancy cdna(const TargetInfo& target, const Resources& r, int blockThreads) {
  int waves = (blockThreads + 63) / 64;
  int vgprWaves = std::min(8, 512 / roundUp(std::max(1, *r.registers), 8));
  int sgprWaves = r.sgprs ? std::min(8, 800 / roundUp(std::max(1, *r.sgprs), 16)) : 8;
  return pick({{4 * vgprWaves / waves, "registers"},
               {4 * sgprWaves / waves, "sgprs"},
               {target.maxWarpsPerUnit / waves, "threads"},
               {sharedResidentPrograms(target, r.sharedBytes.value_or(0)), "shared"}},
              waves, target.maxWarpsPerUnit);
}

}  // namespace

int threadResidentPrograms(const TargetInfo& target, int blockThreads) {
  int warps = (blockThreads + target.subgroupSize - 1) / target.subgroupSize;
  return std::min(target.maxProgramsPerUnit, target.maxWarpsPerUnit / warps);
}

int sharedResidentPrograms(const TargetInfo& target, int64_t sharedBytes) {
  int64_t perProgram = sharedBytes + target.sharedBytesReservedPerProgram;
  return perProgram > 0 ? int(target.sharedBytesPerUnit / perProgram) : 1 << 20;
}

std::optional<Occupancy> estimateOccupancy(const TargetInfo& target, const Resources& resources, int blockThreads) {
  if (!resources.registers || blockThreads <= 0) return std::nullopt;
  if (target.backend == Backend::ROCDL) return cdna(target, resources, blockThreads);
  return hopper(target, resources, blockThreads);
}

}  // namespace mxfp6::codegen
