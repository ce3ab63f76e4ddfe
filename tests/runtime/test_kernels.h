// Hand-written PTX kernels (test_kernels.ptx) with their launch metadata, used by the
// fake-driver tests on the CPU and by the GPU tests on the H200, so both exercise the same code
// object and the same ABI.
//
//   add_one(x: ptr i32, n: i32):            x[i] += 1           for i < n
//   scale_add(y: ptr f32, x: ptr f32, a: f32, n: i64): y[i] = a * x[i] + y[i]   for i < n
// with i = blockIdx.x * blockDim.x + threadIdx.x: one "row" per thread, 128 threads a block.
#pragma once

#include <cstddef>
#include <span>

namespace mxfp6::rt::testing {

/// test_kernels.ptx, embedded at build time (no NUL terminator: loadKernel must add one).
std::span<const std::byte> testPtx();
/// test_kernels.ptx assembled for sm_90 by ptxas at build time; empty where ptxas is missing.
std::span<const std::byte> testCubin();

inline constexpr const char* kAddOneMetadata = R"({
  "kernel": "add_one", "entry": "add_one", "target": "sm_90",
  "abi": [{"kind": "ptr", "name": "x"}, {"kind": "i32", "name": "n"}],
  "block": [128, 1, 1], "shared_bytes": 0, "rows_per_program": 128, "alignment": 4,
  "config": {}
})";

inline constexpr const char* kScaleAddMetadata = R"({
  "kernel": "scale_add", "entry": "scale_add", "target": "sm_90",
  "abi": [{"kind": "ptr", "name": "y"}, {"kind": "ptr", "name": "x"},
          {"kind": "f32", "name": "a"}, {"kind": "i64", "name": "n"}],
  "block": [128, 1, 1], "shared_bytes": 0, "rows_per_program": 128, "alignment": 16,
  "config": {}
})";

}  // namespace mxfp6::rt::testing
