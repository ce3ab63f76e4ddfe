// The C API: status codes, the thread-local last error, and that every failure, including a bad
// driver path, comes back as a code and a message rather than a crash or an exception.
#include "runtime/mxfp6rt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "tests/runtime/scoped_env.h"
#include "tests/runtime/tensor_kernels.h"
#include "tests/runtime/test_kernels.h"

namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using mxfp6::rt::testing::ScopedEnv;

constexpr const char* kFakeDriver = FAKE_CUDA_DRIVER_PATH;

class CApi : public ::testing::Test {
 protected:
  ScopedEnv noOverride_{"MXFP6_GPU_DRIVER", nullptr};
};

TEST_F(CApi, NoGpuIsUnavailableWithTheSearchInTheMessage) {
  mxrt_device* device = nullptr;
  int status = mxrt_device_open(nullptr, nullptr, 0, &device);
  if (status == MXRT_SUCCESS) {
    std::string name = mxrt_device_name(device);
    mxrt_device_close(device);
    GTEST_SKIP() << "a GPU is present: " << name;
  }
  EXPECT_EQ(status, MXRT_ERROR_UNAVAILABLE);
  EXPECT_EQ(device, nullptr);
  EXPECT_THAT(mxrt_last_error(), HasSubstr("tried libcuda.so.1 ("));
}

TEST_F(CApi, NonexistentDriverPathIsNamed) {
  mxrt_device* device = nullptr;
  EXPECT_EQ(mxrt_device_open("auto", "/nonexistent/libcuda.so.1", 0, &device),
            MXRT_ERROR_UNAVAILABLE);
  EXPECT_EQ(device, nullptr);
  EXPECT_THAT(mxrt_last_error(),
              StartsWith("no GPU driver found: tried /nonexistent/libcuda.so.1 ("));
}

TEST_F(CApi, NonDriverLibraryNamesTheMissingSymbol) {
  mxrt_device* device = nullptr;
  EXPECT_EQ(mxrt_device_open("cuda", "libz.so.1", 0, &device), MXRT_ERROR_UNAVAILABLE);
  EXPECT_THAT(mxrt_last_error(), HasSubstr("lacks required CUDA driver symbol(s) cuInit"));
  EXPECT_EQ(mxrt_device_open("hip", "libz.so.1", 0, &device), MXRT_ERROR_UNAVAILABLE);
  EXPECT_THAT(mxrt_last_error(), HasSubstr("lacks required HIP runtime symbol(s) hipInit"));
}

TEST_F(CApi, CallerMistakesAreInvalidArguments) {
  mxrt_device* device = nullptr;
  EXPECT_EQ(mxrt_device_open("opencl", nullptr, 0, &device), MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mxrt_last_error(), "unknown GPU platform 'opencl' (expected auto, cuda or hip)");
  EXPECT_EQ(mxrt_device_open(nullptr, nullptr, 0, nullptr), MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mxrt_last_error(), "mxrt_device_open: device is NULL");
  void* ptr = nullptr;
  EXPECT_EQ(mxrt_malloc(nullptr, 16, &ptr), MXRT_ERROR_INVALID_ARGUMENT);
  uint32_t grid[3] = {1, 1, 1};
  EXPECT_EQ(mxrt_kernel_launch(nullptr, grid, nullptr, nullptr, 0), MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mxrt_device_close(nullptr), MXRT_SUCCESS);
  EXPECT_EQ(mxrt_kernel_unload(nullptr), MXRT_SUCCESS);
  EXPECT_STREQ(mxrt_device_name(nullptr), "");
  EXPECT_EQ(mxrt_device_overlaps_launches(nullptr), 0);
}

TEST_F(CApi, LastErrorIsPerThread) {
  mxrt_device* device = nullptr;
  mxrt_device_open("opencl", nullptr, 0, &device);
  std::string mine = mxrt_last_error();
  std::thread([] {
    EXPECT_STREQ(mxrt_last_error(), "");
    mxrt_device* other = nullptr;
    mxrt_device_open("auto", "/nonexistent/x.so", 0, &other);
  }).join();
  EXPECT_EQ(mxrt_last_error(), mine);
}

// The whole flow a training process follows, against the fake driver.
TEST_F(CApi, LoadAndLaunchThroughTheFakeDriver) {
  mxrt_device* device = nullptr;
  ASSERT_EQ(mxrt_device_open("cuda", kFakeDriver, 0, &device), MXRT_SUCCESS) << mxrt_last_error();
  EXPECT_STREQ(mxrt_device_name(device), "Fake GPU");
  EXPECT_STREQ(mxrt_device_platform(device), "cuda");
  EXPECT_EQ(mxrt_device_overlaps_launches(device), 1);  // the fake is an sm_90 with cuLaunchKernelEx

  constexpr int n = 300;
  std::vector<int32_t> host(n);
  std::iota(host.begin(), host.end(), 0);
  void* x = nullptr;
  ASSERT_EQ(mxrt_malloc(device, n * sizeof(int32_t), &x), MXRT_SUCCESS) << mxrt_last_error();
  ASSERT_EQ(mxrt_memcpy_htod(device, x, host.data(), n * sizeof(int32_t)), MXRT_SUCCESS);

  auto ptx = mxfp6::rt::testing::testPtx();
  mxrt_kernel* kernel = nullptr;
  ASSERT_EQ(mxrt_kernel_load(device, ptx.data(), ptx.size(), mxfp6::rt::testing::kAddOneMetadata,
                             &kernel),
            MXRT_SUCCESS)
      << mxrt_last_error();

  uint32_t grid[3] = {0, 0, 0};
  ASSERT_EQ(mxrt_kernel_grid_for_rows(kernel, n, grid), MXRT_SUCCESS);
  EXPECT_EQ(grid[0], 3u);
  EXPECT_EQ(mxrt_kernel_grid_for_rows(kernel, 0, grid), MXRT_ERROR_INVALID_ARGUMENT);

  mxrt_arg args[2];
  args[0].kind = MXRT_ARG_PTR;
  args[0].value.ptr = x;
  args[1].kind = MXRT_ARG_I32;
  args[1].value.i32 = n;
  ASSERT_EQ(mxrt_kernel_launch(kernel, grid, nullptr, args, 2), MXRT_SUCCESS) << mxrt_last_error();
  ASSERT_EQ(mxrt_synchronize(device, nullptr), MXRT_SUCCESS);
  std::vector<int32_t> out(n);
  ASSERT_EQ(mxrt_memcpy_dtoh(device, out.data(), x, n * sizeof(int32_t)), MXRT_SUCCESS);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], i + 1);

  EXPECT_EQ(mxrt_kernel_launch(kernel, grid, nullptr, args, 1), MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mxrt_last_error(), "kernel add_one takes 2 arguments, got 1");
  args[1].kind = MXRT_ARG_F32;
  EXPECT_EQ(mxrt_kernel_launch(kernel, grid, nullptr, args, 2), MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mxrt_last_error(), "kernel add_one: argument 1 'n' is i32, got f32");
  args[1].kind = 9;
  EXPECT_EQ(mxrt_kernel_launch(kernel, grid, nullptr, args, 2), MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mxrt_last_error(), "argument 1 has unknown kind 9");
  uint32_t zeroGrid[3] = {0, 1, 1};
  args[1].kind = MXRT_ARG_I32;
  EXPECT_EQ(mxrt_kernel_launch(kernel, zeroGrid, nullptr, args, 2), MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(mxrt_last_error(), StartsWith("kernel add_one: grid (0, 1, 1) has a zero"));

  mxrt_kernel* bad = nullptr;
  EXPECT_EQ(mxrt_kernel_load(device, ptx.data(), ptx.size(), "{}", &bad),
            MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mxrt_last_error(), "kernel metadata: missing field 'kernel'");
  EXPECT_EQ(mxrt_kernel_load(device, "garbage", 7, mxfp6::rt::testing::kAddOneMetadata, &bad),
            MXRT_ERROR_DRIVER);
  EXPECT_THAT(mxrt_last_error(), HasSubstr("cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_IMAGE"));
  EXPECT_EQ(bad, nullptr);

  EXPECT_EQ(mxrt_kernel_unload(kernel), MXRT_SUCCESS);
  EXPECT_EQ(mxrt_free(device, x), MXRT_SUCCESS);
  EXPECT_EQ(mxrt_device_close(device), MXRT_SUCCESS);
}

mxrt_param tensorParam(void* data, int32_t dtype, std::vector<int64_t> sizes) {
  mxrt_param p = {};
  p.kind = MXRT_PARAM_TENSOR;
  p.value.tensor.data = data;
  p.value.tensor.dtype = dtype;
  p.value.tensor.ndim = static_cast<int32_t>(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    p.value.tensor.sizes[d] = sizes[d];
    p.value.tensor.strides[d] = stride;
    stride *= sizes[d];
  }
  return p;
}

// Launches from tensors through the C API: checked (a mismatch is INVALID_ARGUMENT naming the
// argument), launched, or prepared once into raw arguments for mxrt_kernel_launch.
TEST_F(CApi, LaunchFromTensors) {
  mxrt_device* device = nullptr;
  ASSERT_EQ(mxrt_device_open("cuda", kFakeDriver, 0, &device), MXRT_SUCCESS) << mxrt_last_error();
  const char* ptx = mxfp6::rt::testing::kTensorKernelsPtx;
  mxrt_kernel* kernel = nullptr;
  ASSERT_EQ(mxrt_kernel_load(device, ptx, std::strlen(ptx),
                             mxfp6::rt::testing::kLnModulateFwdMetadata, &kernel),
            MXRT_SUCCESS)
      << mxrt_last_error();
  // Addresses the fake driver never reads: its ln_modulate_fwd does nothing.
  auto at = [](uintptr_t mib) { return reinterpret_cast<void*>(mib << 20); };
  std::vector<mxrt_param> params = {
      tensorParam(at(1), MXRT_DTYPE_BF16, {5, 3072}), tensorParam(at(2), MXRT_DTYPE_BF16, {2, 3072}),
      tensorParam(at(3), MXRT_DTYPE_BF16, {2, 3072}), tensorParam(at(4), MXRT_DTYPE_BF16, {5, 3072}),
      tensorParam(at(5), MXRT_DTYPE_F32, {5}),        tensorParam(at(6), MXRT_DTYPE_F32, {5}),
      mxrt_param{}, mxrt_param{}};
  params[6].kind = MXRT_PARAM_I32;
  params[6].value.i32 = 5;
  params[7].kind = MXRT_PARAM_F32;
  params[7].value.f32 = 1e-6f;
  EXPECT_EQ(mxrt_kernel_launch_tensors(kernel, nullptr, params.data(), params.size()),
            MXRT_SUCCESS)
      << mxrt_last_error();

  mxrt_arg args[16];
  size_t nargs = 0;
  uint32_t grid[3] = {0, 0, 0};
  ASSERT_EQ(mxrt_kernel_prepare_tensors(kernel, params.data(), params.size(), args, 16, &nargs,
                                        grid),
            MXRT_SUCCESS)
      << mxrt_last_error();
  ASSERT_EQ(nargs, 10u);
  EXPECT_EQ(args[0].kind, MXRT_ARG_PTR);
  EXPECT_EQ(args[0].value.ptr, at(1));
  EXPECT_EQ(args[8].kind, MXRT_ARG_I64);
  EXPECT_EQ(args[8].value.i64, 5);
  EXPECT_EQ(args[9].value.i64, 2);
  EXPECT_EQ(grid[0], 3u);
  EXPECT_EQ(mxrt_kernel_launch(kernel, grid, nullptr, args, nargs), MXRT_SUCCESS)
      << mxrt_last_error();
  EXPECT_EQ(mxrt_kernel_prepare_tensors(kernel, params.data(), params.size(), args, 4, &nargs,
                                        grid),
            MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mxrt_last_error(),
               "mxrt_kernel_prepare_tensors: the kernel takes 10 raw arguments, max_args is 4");

  params[1].value.tensor.dtype = MXRT_DTYPE_F32;
  EXPECT_EQ(mxrt_kernel_launch_tensors(kernel, nullptr, params.data(), params.size()),
            MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mxrt_last_error(), "kernel ln_modulate_fwd: argument 'scale' (1): expected "
                                  "bf16[B, 3072], got f32[2, 3072]");
  params[1].value.tensor.dtype = MXRT_DTYPE_BF16;
  params[7].kind = 7;
  EXPECT_EQ(mxrt_kernel_launch_tensors(kernel, nullptr, params.data(), params.size()),
            MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mxrt_last_error(), "kernel ln_modulate_fwd: params[7] has unknown kind 7");
  EXPECT_EQ(mxrt_kernel_launch_tensors(nullptr, nullptr, params.data(), params.size()),
            MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mxrt_last_error(), "mxrt_kernel_launch_tensors: kernel is NULL");

  EXPECT_EQ(mxrt_kernel_unload(kernel), MXRT_SUCCESS);
  EXPECT_EQ(mxrt_device_close(device), MXRT_SUCCESS);
}

}  // namespace
