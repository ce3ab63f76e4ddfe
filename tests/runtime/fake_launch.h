// The record fake_cuda_driver.cpp keeps of its last cuLaunchKernel(Ex), exported as the C symbol
// fake_cuda_last_launch so a test can check what the runtime passed to the driver.
#pragma once

#include <cstdint>

inline constexpr int kFakeMaxParams = 64;

struct FakeLaunch {
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedBytes;
  void* stream;
  int maxDynamicShared;
  int launches;
  // Launched through cuLaunchKernelEx with programmatic stream serialization allowed.
  bool overlapsPrevious;
  // The kernel's arguments as the driver copies them: sized by the entry's PTX `.param`
  // declarations (4 or 8 bytes), each zero-extended to 64 bits.
  int paramCount;
  uint64_t params[kFakeMaxParams];
};

/// The latest launches, each at index (its FakeLaunch::launches - 1) % kFakeLaunchLog, exported
/// as the C symbol fake_cuda_launch_log: a test of several launches reads them all.
inline constexpr int kFakeLaunchLog = 64;
