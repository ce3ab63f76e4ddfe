// The runtime on a real GPU (label `gpu`; skips where no driver loads). Loads the hand-written
// kernels of test_kernels.ptx as PTX and as a ptxas-built cubin, and checks results exactly: the
// kernels do integer adds and one fp32 fma, so the host computes the same bits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <random>
#include <vector>

#include "runtime/mxfp6rt.h"
#include "runtime/runtime.h"
#include "tests/runtime/test_kernels.h"

namespace mxfp6::rt {
namespace {

using ::testing::HasSubstr;

KernelMetadata metadata(const char* json) {
  auto parsed = parseKernelMetadata(json);
  EXPECT_TRUE(parsed.isOk()) << parsed.status().message();
  return *parsed;
}

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto device = Device::open();
    if (!device.isOk()) GTEST_SKIP() << device.status().message();
    device_ = device.take();
  }

  void requireCuda() {
    if (device_->platform() != Platform::Cuda) GTEST_SKIP() << "the test kernels are PTX";
  }

  /// Runs add_one over n elements from `code` and checks every element.
  void checkAddOne(std::span<const std::byte> code, int n) {
    std::vector<int32_t> host(n);
    std::iota(host.begin(), host.end(), -n / 2);
    auto x = device_->allocate(n * sizeof(int32_t));
    ASSERT_TRUE(x.isOk()) << x.status().message();
    ASSERT_TRUE(device_->copyToDevice(x->data(), host.data(), n * sizeof(int32_t)).isOk());
    auto kernel = loadKernel(*device_, code, metadata(testing::kAddOneMetadata));
    ASSERT_TRUE(kernel.isOk()) << kernel.status().message();
    LaunchArg args[] = {LaunchArg::pointer(x->data()), LaunchArg::i32(n)};
    Status launched = (*kernel)->launchRows(n, nullptr, args);
    ASSERT_TRUE(launched.isOk()) << launched.message();
    Status synced = device_->synchronize();
    ASSERT_TRUE(synced.isOk()) << synced.message();
    std::vector<int32_t> out(n);
    ASSERT_TRUE(device_->copyToHost(out.data(), x->data(), n * sizeof(int32_t)).isOk());
    for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], host[i] + 1) << "element " << i;
  }

  std::unique_ptr<Device> device_;
};

TEST_F(Gpu, DescribesItself) {
  EXPECT_FALSE(device_->name().empty());
  EXPECT_NE(device_->platform(), Platform::Auto);
  std::printf("device: %s, %s %s, driver %s\n", device_->name().c_str(),
              platformName(device_->platform()), device_->arch().c_str(),
              device_->driverPath().c_str());
}

TEST_F(Gpu, CopyAndMemsetRoundTrip) {
  constexpr size_t bytes = (1 << 20) + 3;  // not a multiple of anything convenient
  std::vector<uint8_t> in(bytes), out(bytes);
  std::mt19937 random(42);
  for (uint8_t& b : in) b = static_cast<uint8_t>(random());
  auto buffer = device_->allocate(bytes);
  ASSERT_TRUE(buffer.isOk()) << buffer.status().message();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % 256, 0u);
  ASSERT_TRUE(device_->copyToDevice(buffer->data(), in.data(), bytes).isOk());
  ASSERT_TRUE(device_->copyToHost(out.data(), buffer->data(), bytes).isOk());
  EXPECT_EQ(in, out);
  ASSERT_TRUE(device_->memset(buffer->data(), 0x5a, 1000).isOk());
  ASSERT_TRUE(device_->copyToHost(out.data(), buffer->data(), bytes).isOk());
  EXPECT_EQ(out[999], 0x5a);
  EXPECT_EQ(out[1000], in[1000]);
}

TEST_F(Gpu, AddOneFromPtx) {
  requireCuda();
  checkAddOne(testing::testPtx(), 1000);
  checkAddOne(testing::testPtx(), 1 << 20);
}

TEST_F(Gpu, AddOneFromCubin) {
  requireCuda();
  if (testing::testCubin().empty()) GTEST_SKIP() << "built without ptxas: no cubin";
  if (device_->arch() != "sm_90") GTEST_SKIP() << "the cubin is for sm_90";
  checkAddOne(testing::testCubin(), 4096);
}

TEST_F(Gpu, ScaleAddPassesFloatAndI64Arguments) {
  requireCuda();
  constexpr int64_t n = 100003;
  std::vector<float> hx(n), hy(n);
  std::mt19937 random(7);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (int64_t i = 0; i < n; ++i) {
    hx[i] = dist(random);
    hy[i] = dist(random);
  }
  auto x = device_->allocate(n * sizeof(float));
  auto y = device_->allocate(n * sizeof(float));
  ASSERT_TRUE(x.isOk() && y.isOk());
  ASSERT_TRUE(device_->copyToDevice(x->data(), hx.data(), n * sizeof(float)).isOk());
  ASSERT_TRUE(device_->copyToDevice(y->data(), hy.data(), n * sizeof(float)).isOk());
  auto kernel = loadKernel(*device_, testing::testPtx(), metadata(testing::kScaleAddMetadata));
  ASSERT_TRUE(kernel.isOk()) << kernel.status().message();
  const float a = 0.37f;
  LaunchArg args[] = {LaunchArg::pointer(y->data()), LaunchArg::pointer(x->data()),
                      LaunchArg::f32(a), LaunchArg::i64(n)};
  ASSERT_TRUE((*kernel)->launchRows(n, nullptr, args).isOk());
  ASSERT_TRUE(device_->synchronize().isOk());
  std::vector<float> out(n);
  ASSERT_TRUE(device_->copyToHost(out.data(), y->data(), n * sizeof(float)).isOk());
  // fma.rn.f32 is exactly std::fma on floats: the results must be bit-identical.
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], std::fma(a, hx[i], hy[i])) << "element " << i;
}

TEST_F(Gpu, BadPtxCarriesTheJitLog) {
  requireCuda();
  std::string_view bad = ".version 8.0\n.target sm_90\n.address_size 64\nsyntax error\n";
  auto kernel = loadKernel(*device_, std::as_bytes(std::span(bad.data(), bad.size())),
                           metadata(testing::kAddOneMetadata));
  ASSERT_FALSE(kernel.isOk());
  EXPECT_THAT(kernel.status().message(), HasSubstr("CUDA_ERROR_INVALID_PTX"));
  std::printf("%s\n", kernel.status().message().c_str());
}

TEST_F(Gpu, MissingEntryIsNamed) {
  requireCuda();
  KernelMetadata md = metadata(testing::kAddOneMetadata);
  md.entry = "add_two";
  auto kernel = loadKernel(*device_, testing::testPtx(), md);
  ASSERT_FALSE(kernel.isOk());
  EXPECT_THAT(kernel.status().message(),
              HasSubstr("cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND"));
  EXPECT_THAT(kernel.status().message(), HasSubstr("'add_two'"));
}

TEST_F(Gpu, CApiRoundTrip) {
  requireCuda();
  mxrt_device* device = nullptr;
  ASSERT_EQ(mxrt_device_open(nullptr, nullptr, 0, &device), MXRT_SUCCESS) << mxrt_last_error();
  constexpr int n = 777;
  std::vector<int32_t> host(n, 41);
  void* x = nullptr;
  ASSERT_EQ(mxrt_malloc(device, n * sizeof(int32_t), &x), MXRT_SUCCESS);
  ASSERT_EQ(mxrt_memcpy_htod(device, x, host.data(), n * sizeof(int32_t)), MXRT_SUCCESS);
  auto ptx = testing::testPtx();
  mxrt_kernel* kernel = nullptr;
  ASSERT_EQ(mxrt_kernel_load(device, ptx.data(), ptx.size(), testing::kAddOneMetadata, &kernel),
            MXRT_SUCCESS)
      << mxrt_last_error();
  uint32_t grid[3];
  ASSERT_EQ(mxrt_kernel_grid_for_rows(kernel, n, grid), MXRT_SUCCESS);
  mxrt_arg args[2];
  args[0].kind = MXRT_ARG_PTR;
  args[0].value.ptr = x;
  args[1].kind = MXRT_ARG_I32;
  args[1].value.i32 = n;
  ASSERT_EQ(mxrt_kernel_launch(kernel, grid, nullptr, args, 2), MXRT_SUCCESS) << mxrt_last_error();
  ASSERT_EQ(mxrt_synchronize(device, nullptr), MXRT_SUCCESS);
  ASSERT_EQ(mxrt_memcpy_dtoh(device, host.data(), x, n * sizeof(int32_t)), MXRT_SUCCESS);
  for (int i = 0; i < n; ++i) ASSERT_EQ(host[i], 42);
  EXPECT_EQ(mxrt_kernel_unload(kernel), MXRT_SUCCESS);
  EXPECT_EQ(mxrt_free(device, x), MXRT_SUCCESS);
  EXPECT_EQ(mxrt_device_close(device), MXRT_SUCCESS);
}

}  // namespace
}  // namespace mxfp6::rt
