// The record fake_cuda_driver.cpp keeps of its last cuLaunchKernel, exported as the C symbol
// fake_cuda_last_launch so a test can check what the runtime passed to the driver.
#pragma once

struct FakeLaunch {
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedBytes;
  void* stream;
  int maxDynamicShared;
  int launches;
};
