// The runtime end to end, from Device::open to cuLaunchKernel, against fake_cuda_driver (a
// stand-in libcuda that runs kernels on the host). Covers what a no-GPU machine otherwise cannot:
// driver detection by exports, error formatting, the current-context discipline on new threads,
// argument marshalling of every kind, grid computation, and object lifetimes.
#include <chrono>
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "runtime/runtime.h"
#include "tests/runtime/fake_launch.h"
#include "tests/runtime/scoped_env.h"
#include "tests/runtime/tensor_kernels.h"
#include "tests/runtime/test_kernels.h"

namespace mxfp6::rt {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::ScopedEnv;

constexpr const char* kFakeDriver = FAKE_CUDA_DRIVER_PATH;

std::span<const std::byte> bytesOf(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

KernelMetadata metadata(const char* json) {
  auto parsed = parseKernelMetadata(json);
  EXPECT_TRUE(parsed.isOk()) << parsed.status().message();
  return *parsed;
}

class FakeCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    DeviceOptions options;
    options.driverPath = kFakeDriver;
    auto device = Device::open(options);
    ASSERT_TRUE(device.isOk()) << device.status().message();
    device_ = device.take();
    // Already loaded by the runtime; RTLD_NOLOAD just returns that handle.
    void* handle = dlopen(kFakeDriver, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(handle, nullptr);
    lastLaunch_ = static_cast<FakeLaunch*>(dlsym(handle, "fake_cuda_last_launch"));
    ASSERT_NE(lastLaunch_, nullptr);
  }

  std::unique_ptr<LoadedKernel> load(const char* metadataJson) {
    auto kernel = loadKernel(*device_, testing::testPtx(), metadata(metadataJson));
    EXPECT_TRUE(kernel.isOk()) << kernel.status().message();
    return kernel.isOk() ? kernel.take() : nullptr;
  }

  std::unique_ptr<Device> device_;
  FakeLaunch* lastLaunch_ = nullptr;
};

TEST_F(FakeCuda, IsRecognisedAsCudaByItsExports) {
  EXPECT_EQ(device_->platform(), Platform::Cuda);
  EXPECT_EQ(device_->name(), "Fake GPU");
  EXPECT_EQ(device_->arch(), "sm_90");
  EXPECT_EQ(device_->driverPath(), kFakeDriver);
  EXPECT_EQ(device_->ordinal(), 0);
}

TEST(FakeCudaOpen, DriverWithoutDeviceSaysNoGpuDevice) {
  ScopedEnv noDevices("FAKE_CUDA_DEVICES", "0");
  DeviceOptions options;
  options.driverPath = kFakeDriver;
  auto device = Device::open(options);
  ASSERT_FALSE(device.isOk());
  EXPECT_EQ(device.status().message(),
            std::string("no GPU device: tried ") + kFakeDriver +
                " (cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected))");
}

TEST(FakeCudaOpen, CountsTheVisibleDevices) {
  ScopedEnv twoDevices("FAKE_CUDA_DEVICES", "2");
  DeviceOptions options;
  options.driverPath = kFakeDriver;
  options.deviceOrdinal = 1;
  auto device = Device::open(options);
  ASSERT_TRUE(device.isOk()) << device.status().message();
  EXPECT_EQ((*device)->ordinal(), 1);
  EXPECT_EQ((*device)->deviceCount(), 2);
}

TEST(FakeCudaOpen, MissingOrdinalIsNamed) {
  DeviceOptions options;
  options.driverPath = kFakeDriver;
  options.platform = Platform::Cuda;
  options.deviceOrdinal = 3;
  auto device = Device::open(options);
  ASSERT_FALSE(device.isOk());
  EXPECT_THAT(device.status().message(),
              HasSubstr("(cuDeviceGet(3) failed: CUDA_ERROR_INVALID_DEVICE (invalid device "
                        "ordinal))"));
}

TEST(FakeCudaOpen, EnvironmentVariableSelectsTheDriver) {
  ScopedEnv env("MXFP6_GPU_DRIVER", kFakeDriver);
  auto device = Device::open();
  ASSERT_TRUE(device.isOk()) << device.status().message();
  EXPECT_EQ((*device)->name(), "Fake GPU");
}

TEST_F(FakeCuda, MemoryRoundTripFromAThreadWithNoContext) {
  // A fresh thread has no current context; the runtime must make its own current.
  std::thread([&] {
    std::vector<uint8_t> in(1000), out(1000, 0);
    std::iota(in.begin(), in.end(), 0);
    auto buffer = device_->allocate(in.size());
    ASSERT_TRUE(buffer.isOk()) << buffer.status().message();
    EXPECT_EQ(buffer->size(), in.size());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % 256, 0u);
    ASSERT_TRUE(device_->copyToDevice(buffer->data(), in.data(), in.size()).isOk());
    ASSERT_TRUE(device_->copyToHost(out.data(), buffer->data(), out.size()).isOk());
    EXPECT_EQ(in, out);
    ASSERT_TRUE(device_->memset(buffer->data(), 0xab, 10).isOk());
    ASSERT_TRUE(device_->copyToHost(out.data(), buffer->data(), out.size()).isOk());
    EXPECT_EQ(out[9], 0xab);
    EXPECT_EQ(out[10], 10);
    EXPECT_TRUE(device_->synchronize().isOk());
  }).join();
}

TEST_F(FakeCuda, EventsMeasureTheTimeBetweenTheirRecords) {
  auto start = Event::create(*device_);
  auto end = Event::create(*device_);
  ASSERT_TRUE(start.isOk()) << start.status().message();
  ASSERT_TRUE(end.isOk());
  ASSERT_TRUE(start->record().isOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(end->record().isOk());
  auto ms = Event::elapsedMs(*start, *end);
  ASSERT_TRUE(ms.isOk()) << ms.status().message();
  EXPECT_GE(*ms, 19.0f);  // the fake's events read the host clock
  EXPECT_LT(*ms, 2000.0f);
  Event moved = std::move(*start);  // moved-from events are not destroyed twice
  EXPECT_TRUE(moved.record().isOk());
}

TEST_F(FakeCuda, ZeroBytesIsAnEmptyBuffer) {
  auto buffer = device_->allocate(0);
  ASSERT_TRUE(buffer.isOk()) << buffer.status().message();
  EXPECT_EQ(buffer->data(), nullptr);
  EXPECT_TRUE(device_->copyToDevice(nullptr, nullptr, 0).isOk());
}

TEST_F(FakeCuda, ReleasedMemoryIsFreedThroughTheDevice) {
  auto buffer = device_->allocate(64);
  ASSERT_TRUE(buffer.isOk());
  void* raw = buffer->release();
  EXPECT_EQ(buffer->data(), nullptr);
  EXPECT_TRUE(device_->free(raw).isOk());
  EXPECT_TRUE(device_->free(nullptr).isOk());
}

TEST_F(FakeCuda, BuffersAndKernelsOutliveTheirDevice) {
  auto buffer = device_->allocate(128 * sizeof(int32_t));
  ASSERT_TRUE(buffer.isOk());
  std::unique_ptr<LoadedKernel> kernel = load(testing::kAddOneMetadata);
  ASSERT_NE(kernel, nullptr);
  device_.reset();
  LaunchArg args[] = {LaunchArg::pointer(buffer->data()), LaunchArg::i32(128)};
  EXPECT_TRUE(kernel->launchRows(128, nullptr, args).isOk());
}

TEST_F(FakeCuda, LaunchesAddOneOverAPartialLastBlock) {
  constexpr int n = 1000;  // 7 full blocks of 128 and a partial one
  std::vector<int32_t> host(n);
  std::iota(host.begin(), host.end(), -500);
  auto x = device_->allocate(n * sizeof(int32_t));
  ASSERT_TRUE(x.isOk());
  ASSERT_TRUE(device_->copyToDevice(x->data(), host.data(), n * sizeof(int32_t)).isOk());
  std::unique_ptr<LoadedKernel> kernel = load(testing::kAddOneMetadata);
  ASSERT_NE(kernel, nullptr);

  void* stream = reinterpret_cast<void*>(0x5000);  // passed through untouched
  LaunchArg args[] = {LaunchArg::pointer(x->data()), LaunchArg::i32(n)};
  Status launched = kernel->launchRows(n, stream, args);
  ASSERT_TRUE(launched.isOk()) << launched.message();
  EXPECT_EQ(lastLaunch_->grid[0], 8u);
  EXPECT_EQ(lastLaunch_->grid[1], 1u);
  EXPECT_EQ(lastLaunch_->block[0], 128u);
  EXPECT_EQ(lastLaunch_->sharedBytes, 0u);
  EXPECT_EQ(lastLaunch_->stream, stream);

  std::vector<int32_t> out(n);
  ASSERT_TRUE(device_->copyToHost(out.data(), x->data(), n * sizeof(int32_t)).isOk());
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], host[i] + 1) << "element " << i;
}

TEST_F(FakeCuda, MarshalsPointerFloatAndI64Arguments) {
  constexpr int64_t n = 300;
  std::vector<float> hx(n), hy(n);
  for (int64_t i = 0; i < n; ++i) {
    hx[i] = static_cast<float>(i);
    hy[i] = 1.0f;
  }
  auto x = device_->allocate(n * sizeof(float));
  auto y = device_->allocate(n * sizeof(float));
  ASSERT_TRUE(x.isOk() && y.isOk());
  ASSERT_TRUE(device_->copyToDevice(x->data(), hx.data(), n * sizeof(float)).isOk());
  ASSERT_TRUE(device_->copyToDevice(y->data(), hy.data(), n * sizeof(float)).isOk());
  std::unique_ptr<LoadedKernel> kernel = load(testing::kScaleAddMetadata);
  ASSERT_NE(kernel, nullptr);
  LaunchArg args[] = {LaunchArg::pointer(y->data()), LaunchArg::pointer(x->data()),
                      LaunchArg::f32(0.5f), LaunchArg::i64(n)};
  ASSERT_TRUE(kernel->launch({3, 1, 1}, nullptr, args).isOk());
  ASSERT_TRUE(device_->copyToHost(hy.data(), y->data(), n * sizeof(float)).isOk());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hy[i], 0.5f * static_cast<float>(i) + 1.0f);
}

TEST_F(FakeCuda, BadArgumentsNeverReachTheDriver) {
  std::unique_ptr<LoadedKernel> kernel = load(testing::kAddOneMetadata);
  ASSERT_NE(kernel, nullptr);
  int before = lastLaunch_->launches;
  LaunchArg wrongKind[] = {LaunchArg::pointer(reinterpret_cast<void*>(0x1000)),
                           LaunchArg::i64(5)};
  EXPECT_EQ(kernel->launch({1, 1, 1}, nullptr, wrongKind).message(),
            "kernel add_one: argument 1 'n' is i32, got i64");
  LaunchArg ok[] = {LaunchArg::pointer(reinterpret_cast<void*>(0x1000)), LaunchArg::i32(5)};
  EXPECT_EQ(kernel->launch({0, 1, 1}, nullptr, ok).message(),
            "kernel add_one: grid (0, 1, 1) has a zero dimension; every grid dimension must be "
            ">= 1");
  EXPECT_EQ(lastLaunch_->launches, before);
}

TEST_F(FakeCuda, ZeroRowsLaunchesNothing) {
  std::unique_ptr<LoadedKernel> kernel = load(testing::kAddOneMetadata);
  ASSERT_NE(kernel, nullptr);
  int before = lastLaunch_->launches;
  LaunchArg args[] = {LaunchArg::pointer(reinterpret_cast<void*>(0x1000)), LaunchArg::i32(0)};
  EXPECT_TRUE(kernel->launchRows(0, nullptr, args).isOk());
  EXPECT_EQ(lastLaunch_->launches, before);
  // ...but its arguments are still checked.
  EXPECT_FALSE(kernel->launchRows(0, nullptr, std::span(args, 1)).isOk());
}

TEST_F(FakeCuda, InvalidImageNamesTheDriverCallAndError) {
  auto kernel = loadKernel(*device_, bytesOf("\x7f" "ELF not really"),
                           metadata(testing::kAddOneMetadata));
  ASSERT_FALSE(kernel.isOk());
  EXPECT_EQ(kernel.status().message(),
            "kernel add_one: cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_IMAGE (device kernel "
            "image is invalid) (code object for sm_90, device sm_90)");
}

TEST_F(FakeCuda, PtxJitLogIsPartOfTheError) {
  auto kernel = loadKernel(*device_, bytesOf(".version 8.0\n.target sm_90\nsyntax error"),
                           metadata(testing::kAddOneMetadata));
  ASSERT_FALSE(kernel.isOk());
  EXPECT_THAT(kernel.status().message(),
              StartsWith("kernel add_one: cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (a "
                         "PTX JIT compilation failed): ptxas fatal   : syntax error at line 3"));
}

TEST_F(FakeCuda, MissingEntryIsNamed) {
  KernelMetadata md = metadata(testing::kAddOneMetadata);
  md.entry = "add_two";
  auto kernel = loadKernel(*device_, testing::testPtx(), md);
  ASSERT_FALSE(kernel.isOk());
  EXPECT_EQ(kernel.status().message(),
            "kernel add_one: cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND (named symbol not "
            "found) for entry 'add_two'");
}

TEST_F(FakeCuda, AmdCodeObjectIsRefusedOnACudaDevice) {
  KernelMetadata md = metadata(testing::kAddOneMetadata);
  md.target = "gfx942";
  auto kernel = loadKernel(*device_, testing::testPtx(), md);
  ASSERT_FALSE(kernel.isOk());
  EXPECT_EQ(kernel.status().message(),
            "kernel add_one: code object targets gfx942 (hip) but the device is Fake GPU (cuda)");
  EXPECT_FALSE(loadKernel(*device_, {}, metadata(testing::kAddOneMetadata)).isOk());
}

// A kernel that waits for the previous grid (griddepcontrol.wait at its entry, metadata
// "waits_for_previous_grid") goes through cuLaunchKernelEx with programmatic stream serialization
// allowed, so it may start during the previous grid's tail; any other kernel through
// cuLaunchKernel, in stream order. Both compute the same.
TEST_F(FakeCuda, KernelsThatWaitForThePreviousGridLaunchOverlappingIt) {
  EXPECT_TRUE(device_->overlapsLaunches());
  std::vector<int32_t> host(4, 7);
  auto x = device_->allocate(host.size() * sizeof(int32_t));
  ASSERT_TRUE(x.isOk());
  ASSERT_TRUE(device_->copyToDevice(x->data(), host.data(), host.size() * sizeof(int32_t)).isOk());
  LaunchArg args[] = {LaunchArg::pointer(x->data()), LaunchArg::i32(4)};
  KernelMetadata md = metadata(testing::kAddOneMetadata);
  ASSERT_FALSE(md.waitsForPreviousGrid);
  for (bool waits : {true, false}) {
    md.waitsForPreviousGrid = waits;
    auto kernel = loadKernel(*device_, testing::testPtx(), md);
    ASSERT_TRUE(kernel.isOk()) << kernel.status().message();
    int before = lastLaunch_->launches;
    ASSERT_TRUE((*kernel)->launchRows(4, nullptr, args).isOk());
    EXPECT_EQ(lastLaunch_->launches, before + 1);
    EXPECT_EQ(lastLaunch_->overlapsPrevious, waits);
    EXPECT_EQ(lastLaunch_->grid[0], 1u);
    EXPECT_EQ(lastLaunch_->block[0], 128u);
  }
  ASSERT_TRUE(device_->copyToHost(host.data(), x->data(), host.size() * sizeof(int32_t)).isOk());
  EXPECT_EQ(host, std::vector<int32_t>(4, 9));
}

// Before sm_90 there is no programmatic dependent launch: the device says so, and a kernel that
// waits for the previous grid launches in stream order (its wait then returns at once).
TEST(FakeCudaOpen, WithoutDependentLaunchesEveryKernelLaunchesInStreamOrder) {
  ScopedEnv a100("FAKE_CUDA_CC", "80");
  DeviceOptions options;
  options.driverPath = kFakeDriver;
  auto device = Device::open(options);
  ASSERT_TRUE(device.isOk()) << device.status().message();
  EXPECT_EQ((*device)->arch(), "sm_80");
  EXPECT_FALSE((*device)->overlapsLaunches());
  KernelMetadata md = metadata(testing::kAddOneMetadata);
  md.waitsForPreviousGrid = true;
  auto kernel = loadKernel(**device, testing::testPtx(), md);
  ASSERT_TRUE(kernel.isOk()) << kernel.status().message();
  auto x = (*device)->allocate(4 * sizeof(int32_t));
  ASSERT_TRUE(x.isOk());
  LaunchArg args[] = {LaunchArg::pointer(x->data()), LaunchArg::i32(4)};
  ASSERT_TRUE((*kernel)->launchRows(4, nullptr, args).isOk());
  void* handle = dlopen(kFakeDriver, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  auto* last = static_cast<FakeLaunch*>(dlsym(handle, "fake_cuda_last_launch"));
  ASSERT_NE(last, nullptr);
  EXPECT_FALSE(last->overlapsPrevious);
  EXPECT_EQ(last->block[0], 128u);
}

TEST_F(FakeCuda, LargeDynamicSharedMemoryIsOptedInto) {
  KernelMetadata md = metadata(testing::kAddOneMetadata);
  md.sharedBytes = 100 * 1024;
  auto kernel = loadKernel(*device_, testing::testPtx(), md);
  ASSERT_TRUE(kernel.isOk()) << kernel.status().message();
  std::vector<int32_t> host(4, 0);
  auto x = device_->allocate(host.size() * sizeof(int32_t));
  ASSERT_TRUE(x.isOk());
  LaunchArg args[] = {LaunchArg::pointer(x->data()), LaunchArg::i32(4)};
  ASSERT_TRUE((*kernel)->launchRows(4, nullptr, args).isOk());
  EXPECT_EQ(lastLaunch_->sharedBytes, 100u * 1024);
  EXPECT_EQ(lastLaunch_->maxDynamicShared, 100 * 1024);

  md.sharedBytes = 300 * 1024;
  auto tooMuch = loadKernel(*device_, testing::testPtx(), md);
  ASSERT_FALSE(tooMuch.isOk());
  EXPECT_EQ(tooMuch.status().message(),
            "kernel add_one: needs 307200 bytes of dynamic shared memory; sm_90 allows at most "
            "232448");
}

// A launch from tensors reaches the driver as the raw ABI the compiler declared: the tensors'
// pointers, the scalars, then the runtime sizes the body uses (T, B), with the grid derived from
// the row space (T = 5 rows, 2 per program).
TEST_F(FakeCuda, LaunchFromTensorsPassesTheDerivedArgumentsAndGrid) {
  auto kernel = loadKernel(*device_, bytesOf(testing::kTensorKernelsPtx),
                           metadata(testing::kLnModulateFwdMetadata));
  ASSERT_TRUE(kernel.isOk()) << kernel.status().message();
  constexpr int64_t T = 5, B = 2, D = 3072;
  std::vector<DeviceBuffer> buffers;
  auto tensor = [&](Dtype dtype, std::vector<int64_t> sizes) {
    int64_t elements = 1;
    for (int64_t n : sizes) elements *= n;
    auto buffer = device_->allocate(static_cast<size_t>(elements * dtypeBytes(dtype)));
    EXPECT_TRUE(buffer.isOk()) << buffer.status().message();
    buffers.push_back(buffer.take());
    return TensorArg::contiguous(buffers.back().data(), dtype, sizes);
  };
  std::vector<ParamArg> params = {
      tensor(Dtype::BF16, {T, D}), tensor(Dtype::BF16, {B, D}), tensor(Dtype::BF16, {B, D}),
      tensor(Dtype::BF16, {T, D}), tensor(Dtype::F32, {T}),     tensor(Dtype::F32, {T}),
      LaunchArg::i32(T),           LaunchArg::f32(1e-6f)};
  void* stream = reinterpret_cast<void*>(0x5000);
  Status launched = (*kernel)->launchTensors(stream, params);
  ASSERT_TRUE(launched.isOk()) << launched.message();

  EXPECT_EQ(lastLaunch_->grid[0], 3u);
  EXPECT_EQ(lastLaunch_->grid[1], 1u);
  EXPECT_EQ(lastLaunch_->block[0], 384u);
  EXPECT_EQ(lastLaunch_->stream, stream);
  ASSERT_EQ(lastLaunch_->paramCount, 14);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(lastLaunch_->params[i], reinterpret_cast<uintptr_t>(buffers[i].data())) << i;
  EXPECT_EQ(lastLaunch_->params[6], uint64_t{T});  // sample_div, 4 bytes
  float eps = 0;
  std::memcpy(&eps, &lastLaunch_->params[7], sizeof(eps));
  EXPECT_EQ(eps, 1e-6f);
  EXPECT_EQ(lastLaunch_->params[8], uint64_t{T});
  EXPECT_EQ(lastLaunch_->params[9], uint64_t{B});
  // Then the runtime's multiplier and shift of sample_div (= T) and of B: each pair divides
  // like the division it replaces.
  const int64_t divisors[] = {T, B};
  for (int k = 0; k < 2; ++k) {
    uint64_t m = lastLaunch_->params[10 + 2 * k], l = lastLaunch_->params[11 + 2 * k];
    for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{4}, uint64_t{5}, uint64_t{6}, uint64_t{1} << 30, uint64_t{INT32_MAX}})
      EXPECT_EQ((((m * n) >> 32) + n) >> l, n / uint64_t(divisors[k])) << "n " << n << " d " << divisors[k];
  }

  // A checked mistake never reaches the driver; nor does an empty batch.
  int before = lastLaunch_->launches;
  params[2] = tensor(Dtype::BF16, {B + 1, D});
  EXPECT_EQ((*kernel)->launchTensors(stream, params).message(),
            "kernel ln_modulate_fwd: argument 'shift' (2): dim 0 is 3, but B is 2 from argument "
            "'scale' (1) dim 0");
  std::vector<ParamArg> empty = {
      tensor(Dtype::BF16, {0, D}), tensor(Dtype::BF16, {B, D}), tensor(Dtype::BF16, {B, D}),
      tensor(Dtype::BF16, {0, D}), tensor(Dtype::F32, {0}),     tensor(Dtype::F32, {0}),
      LaunchArg::i32(1),           LaunchArg::f32(1e-6f)};
  EXPECT_TRUE((*kernel)->launchTensors(stream, empty).isOk());
  EXPECT_EQ(lastLaunch_->launches, before);
}

// A raw launch over an empty row space (T = 0 among the arguments) launches nothing whatever the
// grid: the kernel's rows past the end are clamped to the last row, which would be row -1.
TEST_F(FakeCuda, RawLaunchOverAnEmptyRowSpaceLaunchesNothing) {
  auto kernel = loadKernel(*device_, bytesOf(testing::kTensorKernelsPtx),
                           metadata(testing::kLnModulateFwdMetadata));
  ASSERT_TRUE(kernel.isOk()) << kernel.status().message();
  std::vector<LaunchArg> args;
  for (int i = 0; i < 6; ++i) args.push_back(LaunchArg::pointer(reinterpret_cast<void*>(0x10000 + 0x1000 * i)));
  args.push_back(LaunchArg::i32(1));
  args.push_back(LaunchArg::f32(1e-6f));
  args.push_back(LaunchArg::i64(0));  // T
  args.push_back(LaunchArg::i64(2));  // B
  int before = lastLaunch_->launches;
  EXPECT_TRUE((*kernel)->launch({4, 1, 1}, nullptr, args).isOk());
  EXPECT_EQ(lastLaunch_->launches, before);
  args[8] = LaunchArg::i64(5);
  EXPECT_TRUE((*kernel)->launch({3, 1, 1}, nullptr, args).isOk());
  EXPECT_EQ(lastLaunch_->launches, before + 1);
}

}  // namespace
}  // namespace mxfp6::rt
