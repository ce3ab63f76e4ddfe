// Driver over the HIP runtime (libamdhip64.so). HIP keeps a current device per thread, so every
// call selects this driver's device first.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/driver.h"
#include "runtime/hip_abi.h"

namespace mxfp6::rt {
namespace {

using namespace hip;  // NOLINT: the driver's own spellings read best here

struct HipSymbols {
#define MXFP6_HIP_SYMBOL(requirement, return_type, name, params) \
  return_type(*name) params = nullptr;
#include "runtime/driver_symbols.h"
#undef MXFP6_HIP_SYMBOL
};

/// Fills `symbols` from `library`; returns the REQUIRED names it lacks.
std::vector<std::string> resolveSymbols(const DynamicLibrary& library, HipSymbols& symbols) {
  std::vector<std::string> missing;
#define MXFP6_HIP_SYMBOL(requirement, return_type, name, params)                    \
  symbols.name = reinterpret_cast<decltype(symbols.name)>(library.symbol(#name)); \
  if (symbols.name == nullptr && MXFP6_SYMBOL_IS_REQUIRED(requirement)) missing.push_back(#name);
#include "runtime/driver_symbols.h"
#undef MXFP6_HIP_SYMBOL
  return missing;
}

/// "hipModuleLoadData failed: hipErrorInvalidImage (invalid kernel file)".
Status hipStatus(const HipSymbols& sym, hipError_t result, const char* function) {
  if (result == hipSuccess) return Status::ok();
  const char* name = sym.hipGetErrorName(result);
  const char* text = sym.hipGetErrorString(result);
  std::string message = std::string(function) + " failed: ";
  message += name != nullptr ? name : "hipError_t " + std::to_string(result);
  // Some ROCm releases return the name again as the description; say it once.
  if (text != nullptr && (name == nullptr || std::string_view(text) != name))
    message += std::string(" (") + text + ")";
  return Status::error(std::move(message));
}

// Calls sym_.fn(args...) and returns its error, named after fn, from the enclosing function.
#define HIP_RETURN_IF_ERROR(fn, ...) RETURN_IF_ERROR(hipStatus(sym_, sym_.fn(__VA_ARGS__), #fn))

class HipDriver final : public Driver {
 public:
  HipDriver(DynamicLibrary library, const HipSymbols& sym)
      : library_(std::move(library)), sym_(sym) {}

  /// hipInit, device count, the device and its name. Every failure here means "no usable
  /// device" (`*failedAt` = DeviceInit).
  Status init(int ordinal) {
    library_.keepLoaded();  // hipInit starts runtime threads: never unmap the library after it.
    ordinal_ = ordinal;
    libraryPath_ = library_.path();
    HIP_RETURN_IF_ERROR(hipInit, 0);
    int count = 0;
    HIP_RETURN_IF_ERROR(hipGetDeviceCount, &count);
    if (ordinal < 0 || ordinal >= count)
      return Status::error("device ordinal " + std::to_string(ordinal) + " requested, " +
                           std::to_string(count) + " HIP device(s) present");
    deviceCount_ = count;
    HIP_RETURN_IF_ERROR(hipSetDevice, ordinal);
    hipDevice_t device = 0;
    HIP_RETURN_IF_ERROR(hipDeviceGet, &device, ordinal);
    char name[256] = {};
    HIP_RETURN_IF_ERROR(hipDeviceGetName, name, static_cast<int>(sizeof(name) - 1), device);
    deviceName_ = name;
    // The gfx name lives only in hipDeviceProp_t, whose layout differs between ROCm releases;
    // the arch stays unknown rather than read at a guessed offset.
    return Status::ok();
  }

  Platform platform() const override { return Platform::Hip; }

  Expected<void*> allocate(size_t bytes) override {
    RETURN_IF_ERROR(makeCurrent());
    void* ptr = nullptr;
    HIP_RETURN_IF_ERROR(hipMalloc, &ptr, bytes);
    return ptr;
  }

  Status free(void* deviceMemory) override {
    RETURN_IF_ERROR(makeCurrent());
    HIP_RETURN_IF_ERROR(hipFree, deviceMemory);
    return Status::ok();
  }

  Status copyToDevice(void* deviceDst, const void* hostSrc, size_t bytes) override {
    RETURN_IF_ERROR(makeCurrent());
    // hipMemcpyHtoD takes a non-const source but only reads it.
    HIP_RETURN_IF_ERROR(hipMemcpyHtoD, deviceDst, const_cast<void*>(hostSrc), bytes);
    return Status::ok();
  }

  Status copyToHost(void* hostDst, const void* deviceSrc, size_t bytes) override {
    RETURN_IF_ERROR(makeCurrent());
    HIP_RETURN_IF_ERROR(hipMemcpyDtoH, hostDst, const_cast<void*>(deviceSrc), bytes);
    return Status::ok();
  }

  Status memset(void* deviceDst, uint8_t value, size_t bytes) override {
    RETURN_IF_ERROR(makeCurrent());
    HIP_RETURN_IF_ERROR(hipMemset, deviceDst, value, bytes);
    return Status::ok();
  }

  Expected<void*> createEvent() override {
    if (!sym_.hipEventCreate || !sym_.hipEventDestroy || !sym_.hipEventRecord || !sym_.hipEventSynchronize ||
        !sym_.hipEventElapsedTime)
      return Status::error(libraryPath_ + " lacks the hipEvent* functions: no device-side timing");
    RETURN_IF_ERROR(makeCurrent());
    hipEvent_t event = nullptr;
    HIP_RETURN_IF_ERROR(hipEventCreate, &event);
    return static_cast<void*>(event);
  }
  Status destroyEvent(void* event) override {
    RETURN_IF_ERROR(makeCurrent());
    HIP_RETURN_IF_ERROR(hipEventDestroy, static_cast<hipEvent_t>(event));
    return Status::ok();
  }
  Status recordEvent(void* event, void* stream) override {
    RETURN_IF_ERROR(makeCurrent());
    HIP_RETURN_IF_ERROR(hipEventRecord, static_cast<hipEvent_t>(event), static_cast<hipStream_t>(stream));
    return Status::ok();
  }
  Expected<float> elapsedMs(void* start, void* end) override {
    RETURN_IF_ERROR(makeCurrent());
    HIP_RETURN_IF_ERROR(hipEventSynchronize, static_cast<hipEvent_t>(end));
    float ms = 0;
    HIP_RETURN_IF_ERROR(hipEventElapsedTime, &ms, static_cast<hipEvent_t>(start), static_cast<hipEvent_t>(end));
    return ms;
  }

  Status synchronize(void* stream) override {
    RETURN_IF_ERROR(makeCurrent());
    if (stream == nullptr) {
      HIP_RETURN_IF_ERROR(hipDeviceSynchronize);
    } else {
      HIP_RETURN_IF_ERROR(hipStreamSynchronize, static_cast<hipStream_t>(stream));
    }
    return Status::ok();
  }

  Expected<void*> loadModule(std::span<const std::byte> image) override {
    RETURN_IF_ERROR(makeCurrent());
    hipModule_t module = nullptr;
    HIP_RETURN_IF_ERROR(hipModuleLoadData, &module, image.data());
    return static_cast<void*>(module);
  }

  Status unloadModule(void* module) override {
    RETURN_IF_ERROR(makeCurrent());
    HIP_RETURN_IF_ERROR(hipModuleUnload, static_cast<hipModule_t>(module));
    return Status::ok();
  }

  Expected<void*> getFunction(void* module, const std::string& entry) override {
    RETURN_IF_ERROR(makeCurrent());
    hipFunction_t function = nullptr;
    Status status = hipStatus(
        sym_,
        sym_.hipModuleGetFunction(&function, static_cast<hipModule_t>(module), entry.c_str()),
        "hipModuleGetFunction");
    if (!status.isOk()) return Status::error(status.message() + " for entry '" + entry + "'");
    return static_cast<void*>(function);
  }

  Status reserveDynamicSharedMemory(void*, uint32_t) override {
    // AMD has no opt-in: a block may use the whole LDS, and the launch fails if it asks for more.
    return Status::ok();
  }

  // HIP has no programmatic dependent launch: every grid starts after the previous one.
  bool overlapsLaunches() const override { return false; }

  Status launch(void* function, const std::array<uint32_t, 3>& grid,
                const std::array<uint32_t, 3>& block, uint32_t sharedBytes, void* stream,
                void** params, bool /*overlapPrevious*/) override {
    RETURN_IF_ERROR(makeCurrent());
    HIP_RETURN_IF_ERROR(hipModuleLaunchKernel, static_cast<hipFunction_t>(function), grid[0],
                        grid[1], grid[2], block[0], block[1], block[2], sharedBytes,
                        static_cast<hipStream_t>(stream), params, nullptr);
    return Status::ok();
  }

 private:
  Status makeCurrent() {
    HIP_RETURN_IF_ERROR(hipSetDevice, ordinal_);
    return Status::ok();
  }

  DynamicLibrary library_;
  HipSymbols sym_;
};

}  // namespace

Expected<std::shared_ptr<Driver>> openHipDriver(DynamicLibrary library, int ordinal,
                                                OpenStage* failedAt) {
  HipSymbols symbols;
  std::vector<std::string> missing = resolveSymbols(library, symbols);
  if (!missing.empty()) {
    *failedAt = OpenStage::Symbols;
    std::string list;
    for (const std::string& name : missing) list += (list.empty() ? "" : ", ") + name;
    return Status::error("lacks required HIP runtime symbol(s) " + list);
  }
  auto driver = std::make_shared<HipDriver>(std::move(library), symbols);
  Status status = driver->init(ordinal);
  if (!status.isOk()) {
    *failedAt = OpenStage::DeviceInit;
    return status;
  }
  return std::shared_ptr<Driver>(std::move(driver));
}

}  // namespace mxfp6::rt
