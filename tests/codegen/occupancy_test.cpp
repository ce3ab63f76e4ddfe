// The occupancy estimate against residency worked out by hand from the published limits
// (sm_90: 64K registers per SM in four 16K sub-partition files, 256-register warp units, 64 warps, 32 blocks, 228 KB shared
// with 1 KB per block; CDNA: 4 SIMDs x 8 waves, 512 VGPRs per lane in units of 8, 800 SGPRs per
// SIMD in units of 16, LDS 64 KB per CU on gfx942 and 160 KB on gfx950).
#include <gtest/gtest.h>

#include "compiler/codegen/occupancy.h"

namespace mxfp6::codegen {
namespace {

Resources res(int registers, int shared = 0, std::optional<int> sgprs = std::nullopt) {
  Resources r;
  r.registers = registers;
  r.sharedBytes = shared;
  r.sgprs = sgprs;
  return r;
}

void expectOccupancy(const char* target, const Resources& r, int threads, int programs, double fraction,
                     const char* limit) {
  auto o = estimateOccupancy(*findTarget(target), r, threads);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->programsPerUnit, programs);
  EXPECT_DOUBLE_EQ(o->fraction, fraction);
  EXPECT_EQ(o->limit, limit);
}

TEST(Occupancy, Hopper) {
  // 8 warps of 64 registers: 8 * 2048 = 16K registers per block, 4 blocks, 32 of 64 warps.
  expectOccupancy("sm_90", res(64), 256, 4, 0.5, "registers");
  // 40 registers round to 1280 per warp: 65536 / (1280 * 12) = 4 blocks of 12 warps.
  expectOccupancy("sm_90", res(40), 384, 4, 0.75, "registers");
  // Registers are allocated per sub-partition: 48 registers (1536 a warp) give 4 * 10 warps, 20
  // programs of 64 threads, and 54 (1792) 4 * 9, 18 programs, as Nsight Compute's "Block Limit
  // Registers" reports for them (b1bc92a:bench/results/2026-12-06-h100-10-ncu-source.tgz).
  expectOccupancy("sm_90", res(48), 64, 20, 0.625, "registers");
  expectOccupancy("sm_90", res(54), 64, 18, 0.5625, "registers");
  // 32 registers, 1024 threads: 2 blocks by registers and by threads; registers named first.
  expectOccupancy("sm_90", res(32), 1024, 2, 1.0, "registers");
  // One warp per block: at most 32 blocks.
  expectOccupancy("sm_90", res(16), 32, 32, 0.5, "programs");
  // 100 KB of shared memory: 233472 / (102400 + 1024) = 2 blocks.
  expectOccupancy("sm_90", res(32, 102400), 128, 2, 0.125, "shared");
}

TEST(Occupancy, Cdna) {
  // 4 waves of 128 VGPRs: 4 waves per SIMD, 16 per CU = 4 workgroups, half of 32.
  expectOccupancy("gfx942", res(128, 0, 32), 256, 4, 0.5, "registers");
  // 40 KB of LDS: one workgroup on gfx942 (64 KB), four on gfx950 (160 KB).
  expectOccupancy("gfx942", res(32, 40960, 32), 256, 1, 0.125, "shared");
  expectOccupancy("gfx950", res(32, 40960, 32), 256, 4, 0.5, "shared");
  // 112 SGPRs: 800 / 112 = 7 waves per SIMD: 28 one-wave workgroups of the 32 waves a CU holds.
  expectOccupancy("gfx942", res(16, 0, 112), 64, 28, 28.0 / 32, "sgprs");
}

TEST(Occupancy, ProgramsThatTheSharedMemoryHolds) {
  // sm_90: 228 KB = 233472 bytes, 1 KB more per program: 84064 + 1024 = 85088, 2 of them.
  EXPECT_EQ(sharedResidentPrograms(*findTarget("sm_90"), 84064), 2);
  // 45152 + 1024 = 46176: 5 in 233472 (5 * 46176 = 230880).
  EXPECT_EQ(sharedResidentPrograms(*findTarget("sm_90"), 45152), 5);
  // gfx942's 65536 bytes hold 2 of 30848, gfx950's 163840 hold 5; nothing reserved per program.
  EXPECT_EQ(sharedResidentPrograms(*findTarget("gfx942"), 30848), 2);
  EXPECT_EQ(sharedResidentPrograms(*findTarget("gfx950"), 30848), 5);
  // Exactly a half: 32768 bytes twice in gfx942's 64 KB.
  EXPECT_EQ(sharedResidentPrograms(*findTarget("gfx942"), 32768), 2);
  // The reservation at the boundary: 2 * (115712 + 1024) = 233472 exactly; one byte more fits once.
  EXPECT_EQ(sharedResidentPrograms(*findTarget("sm_90"), 115712), 2);
  EXPECT_EQ(sharedResidentPrograms(*findTarget("sm_90"), 115713), 1);
  // What a target lets one program use, one program of it always holds.
  for (const std::string& name : targetNames())
    EXPECT_GE(sharedResidentPrograms(*findTarget(name), findTarget(name)->maxSharedBytes), 1) << name;
  // A program without shared memory is bounded elsewhere (threads, registers, programs).
  EXPECT_GT(sharedResidentPrograms(*findTarget("gfx942"), 0), 32);
}

TEST(Occupancy, UnknownRegistersGiveNoEstimate) {
  EXPECT_FALSE(estimateOccupancy(*findTarget("sm_90"), Resources{}, 256));
}

}  // namespace
}  // namespace mxfp6::codegen
