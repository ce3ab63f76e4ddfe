// Opening a device where there is no usable GPU, or with a bad driver path, must return an error
// that says every library tried and why it was rejected; it must never crash. These run on the
// CPU build machine; where a GPU is present the "no GPU" cases skip.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/runtime.h"
#include "tests/runtime/scoped_env.h"

namespace mxfp6::rt {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using testing::ScopedEnv;

// A real shared library that is no GPU driver: present on every Linux machine.
constexpr const char* kNotADriver = "libz.so.1";

class DriverSearch : public ::testing::Test {
 protected:
  std::string openError(const DeviceOptions& options) {
    auto device = Device::open(options);
    if (device.isOk()) return "";
    return device.status().message();
  }

  ScopedEnv noOverride_{"MXFP6_GPU_DRIVER", nullptr};
};

bool canLoad(const char* library) {
  void* handle = dlopen(library, RTLD_LAZY | RTLD_LOCAL);
  if (handle != nullptr) dlclose(handle);
  return handle != nullptr;
}

TEST_F(DriverSearch, AutoListsEveryPathItTried) {
  auto device = Device::open();
  if (device.isOk()) GTEST_SKIP() << "a GPU is present: " << (*device)->name();
  const std::string& message = device.status().message();
  EXPECT_THAT(message, AnyOf(StartsWith("no GPU driver found: tried libcuda.so.1 ("),
                             StartsWith("no GPU device: tried libcuda.so.1 (")));
  for (const std::string& path : defaultDriverSearchPaths(Platform::Auto))
    EXPECT_THAT(message, HasSubstr(path + " (")) << "not reported: " << path;
}

TEST_F(DriverSearch, NoCudaDriverInstalledSaysNoDriverFound) {
  if (canLoad("libcuda.so.1") || canLoad("libcuda.so"))
    GTEST_SKIP() << "a CUDA driver is installed here";
  DeviceOptions options;
  options.platform = Platform::Cuda;
  std::string message = openError(options);
  EXPECT_THAT(message, StartsWith("no GPU driver found: tried libcuda.so.1 ("));
  EXPECT_THAT(message, HasSubstr(", libcuda.so ("));
  EXPECT_THAT(message, HasSubstr("No such file or directory"));
  // Only the CUDA libraries are searched when the platform is CUDA.
  EXPECT_THAT(message, Not(HasSubstr("amdhip64")));
}

TEST_F(DriverSearch, DefaultPathsAreCudaThenHip) {
  EXPECT_EQ(defaultDriverSearchPaths(Platform::Auto),
            (std::vector<std::string>{"libcuda.so.1", "libcuda.so", "libamdhip64.so",
                                      "libamdhip64.so.6", "libamdhip64.so.5",
                                      "/opt/rocm/lib/libamdhip64.so"}));
  EXPECT_EQ(defaultDriverSearchPaths(Platform::Cuda),
            (std::vector<std::string>{"libcuda.so.1", "libcuda.so"}));
  EXPECT_EQ(defaultDriverSearchPaths(Platform::Hip).size(), 4u);
}

TEST_F(DriverSearch, NonexistentExplicitPathIsNamed) {
  DeviceOptions options;
  options.driverPath = "/nonexistent/libcuda.so.1";
  EXPECT_EQ(openError(options),
            "no GPU driver found: tried /nonexistent/libcuda.so.1 (cannot open shared object "
            "file: No such file or directory)");
}

TEST_F(DriverSearch, LibraryThatIsNoDriverIsRejectedForItsMissingSymbols) {
  DeviceOptions options;
  options.driverPath = kNotADriver;
  EXPECT_EQ(openError(options),
            "no GPU driver found: tried libz.so.1 (not a GPU driver: exports neither cuInit "
            "(CUDA) nor hipInit (HIP))");

  options.platform = Platform::Cuda;
  std::string cuda = openError(options);
  EXPECT_THAT(cuda, StartsWith("no GPU driver found: tried libz.so.1 (lacks required CUDA driver "
                               "symbol(s) cuInit, cuGetErrorName, "));
  EXPECT_THAT(cuda, HasSubstr("cuLaunchKernel"));
  EXPECT_THAT(cuda, Not(HasSubstr("cuFuncSetAttribute")));  // optional: not a reason to reject

  options.platform = Platform::Hip;
  EXPECT_THAT(openError(options),
              StartsWith("no GPU driver found: tried libz.so.1 (lacks required HIP runtime "
                         "symbol(s) hipInit, "));
}

TEST_F(DriverSearch, EnvironmentVariableReplacesTheSearch) {
  ScopedEnv env("MXFP6_GPU_DRIVER", "/nonexistent/from-env.so");
  std::string message = openError({});
  EXPECT_THAT(message, StartsWith("no GPU driver found: tried MXFP6_GPU_DRIVER=/nonexistent/"
                                  "from-env.so (cannot open shared object file"));
  EXPECT_THAT(message, Not(HasSubstr("libcuda.so.1")));
}

TEST_F(DriverSearch, ExplicitPathBeatsTheEnvironment) {
  ScopedEnv env("MXFP6_GPU_DRIVER", "/nonexistent/from-env.so");
  DeviceOptions options;
  options.driverPath = "/nonexistent/explicit.so";
  std::string message = openError(options);
  EXPECT_THAT(message, HasSubstr("/nonexistent/explicit.so"));
  EXPECT_THAT(message, Not(HasSubstr("from-env")));
}

TEST(Platform, NamesRoundTrip) {
  for (Platform p : {Platform::Auto, Platform::Cuda, Platform::Hip}) {
    auto parsed = parsePlatform(platformName(p));
    ASSERT_TRUE(parsed.isOk());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(*parsePlatform(""), Platform::Auto);
  EXPECT_EQ(parsePlatform("opencl").status().message(),
            "unknown GPU platform 'opencl' (expected auto, cuda or hip)");
}

}  // namespace
}  // namespace mxfp6::rt
