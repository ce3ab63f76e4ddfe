// Choosing the driver library: an explicit path, else MXFP6_GPU_DRIVER, else the default search.
// Every library tried is reported with the reason it was rejected, so "why is there no GPU" is
// answered by the error alone.
#include "runtime/driver.h"

#include <cstdlib>
#include <utility>
#include <vector>

namespace mxfp6::rt {
namespace {

struct Candidate {
  std::string path;
  Platform platform;  // Auto: decided by what the library exports
  std::string origin;  // how the path was chosen, when not by the default search
};

Expected<std::shared_ptr<Driver>> tryOpen(const Candidate& candidate, int ordinal,
                                          OpenStage* failedAt) {
  *failedAt = OpenStage::Load;
  auto library = DynamicLibrary::open(candidate.path);
  if (!library.isOk()) return library.status();
  Platform platform = candidate.platform;
  if (platform == Platform::Auto) {
    if (library->symbol("cuInit") != nullptr) {
      platform = Platform::Cuda;
    } else if (library->symbol("hipInit") != nullptr) {
      platform = Platform::Hip;
    } else {
      *failedAt = OpenStage::Symbols;
      return Status::error("not a GPU driver: exports neither cuInit (CUDA) nor hipInit (HIP)");
    }
  }
  return platform == Platform::Cuda ? openCudaDriver(library.take(), ordinal, failedAt)
                                    : openHipDriver(library.take(), ordinal, failedAt);
}

std::vector<Candidate> candidatesFor(const DeviceOptions& options) {
  if (!options.driverPath.empty()) return {{options.driverPath, options.platform, ""}};
  // An explicit path in code beats the environment: the caller chose it deliberately.
  if (const char* env = std::getenv("MXFP6_GPU_DRIVER"); env != nullptr && *env != '\0')
    return {{env, options.platform, "MXFP6_GPU_DRIVER="}};
  std::vector<Candidate> candidates;
  for (Platform platform : {Platform::Cuda, Platform::Hip}) {
    if (options.platform != Platform::Auto && options.platform != platform) continue;
    for (std::string& path : defaultDriverSearchPaths(platform))
      candidates.push_back({std::move(path), platform, ""});
  }
  return candidates;
}

}  // namespace

std::vector<std::string> defaultDriverSearchPaths(Platform platform) {
  std::vector<std::string> paths;
  if (platform != Platform::Hip) {
    // libcuda.so.1 is what the driver package installs; libcuda.so only comes with dev packages
    // or containers that symlink it.
    paths.insert(paths.end(), {"libcuda.so.1", "libcuda.so"});
  }
  if (platform != Platform::Cuda) {
    paths.insert(paths.end(), {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5",
                               "/opt/rocm/lib/libamdhip64.so"});
  }
  return paths;
}

Expected<std::shared_ptr<Driver>> openDriver(const DeviceOptions& options) {
  std::string tried;
  bool driverLoaded = false;  // some library was a driver but had no usable device
  for (const Candidate& candidate : candidatesFor(options)) {
    OpenStage failedAt = OpenStage::Load;
    auto driver = tryOpen(candidate, options.deviceOrdinal, &failedAt);
    if (driver.isOk()) return driver;
    if (failedAt == OpenStage::DeviceInit) driverLoaded = true;
    if (!tried.empty()) tried += ", ";
    tried += candidate.origin + candidate.path + " (" + driver.status().message() + ")";
  }
  return Status::error(std::string(driverLoaded ? "no GPU device" : "no GPU driver found") +
                       ": tried " + tried);
}

}  // namespace mxfp6::rt
