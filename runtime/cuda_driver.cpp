// Driver over the NVIDIA driver API (libcuda.so.1). Uses the device's primary context, the one
// the CUDA runtime and PyTorch use, so pointers and streams from the framework are valid here.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/cuda_abi.h"
#include "runtime/driver.h"

namespace mxfp6::rt {
namespace {

using namespace cuda;  // NOLINT: the driver's own spellings read best here

struct CudaSymbols {
#define MXFP6_CUDA_SYMBOL(requirement, return_type, name, params) \
  return_type(*name) params = nullptr;
#include "runtime/driver_symbols.h"
#undef MXFP6_CUDA_SYMBOL
};

/// Fills `symbols` from `library`; returns the REQUIRED names it lacks.
std::vector<std::string> resolveSymbols(const DynamicLibrary& library, CudaSymbols& symbols) {
  std::vector<std::string> missing;
#define MXFP6_CUDA_SYMBOL(requirement, return_type, name, params)                   \
  symbols.name = reinterpret_cast<decltype(symbols.name)>(library.symbol(#name)); \
  if (symbols.name == nullptr && MXFP6_SYMBOL_IS_REQUIRED(requirement)) missing.push_back(#name);
#include "runtime/driver_symbols.h"
#undef MXFP6_CUDA_SYMBOL
  return missing;
}

/// "cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (device kernel image is invalid)".
Status cudaStatus(const CudaSymbols& sym, CUresult result, const char* function) {
  if (result == CUDA_SUCCESS) return Status::ok();
  const char* name = nullptr;
  const char* text = nullptr;
  if (sym.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = nullptr;
  if (sym.cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) text = nullptr;
  std::string message = std::string(function) + " failed: ";
  message += name != nullptr ? name : "CUresult " + std::to_string(result);
  if (text != nullptr && (name == nullptr || std::string_view(text) != name))
    message += std::string(" (") + text + ")";
  return Status::error(std::move(message));
}

// Calls sym_.fn(args...) and returns its error, named after fn, from the enclosing function.
#define CU_RETURN_IF_ERROR(fn, ...) RETURN_IF_ERROR(cudaStatus(sym_, sym_.fn(__VA_ARGS__), #fn))

CUdeviceptr toDevicePtr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

class CudaDriver final : public Driver {
 public:
  CudaDriver(DynamicLibrary library, const CudaSymbols& sym)
      : library_(std::move(library)), sym_(sym) {}

  ~CudaDriver() override {
    // Nothing to report to from a destructor; a driver already shut down at exit errors harmlessly.
    if (context_ != nullptr) sym_.cuDevicePrimaryCtxRelease_v2(device_);
  }

  /// cuInit, the device, its primary context, name and arch. Failures before the context exists
  /// mean "no usable device" (`*failedAt` = DeviceInit).
  Status init(int ordinal) {
    library_.keepLoaded();  // cuInit starts driver threads: never unmap the library after it.
    ordinal_ = ordinal;
    libraryPath_ = library_.path();
    CU_RETURN_IF_ERROR(cuInit, 0);
    RETURN_IF_ERROR(cudaStatus(sym_, sym_.cuDeviceGet(&device_, ordinal),
                               ("cuDeviceGet(" + std::to_string(ordinal) + ")").c_str()));
    if (sym_.cuDeviceGetCount != nullptr) CU_RETURN_IF_ERROR(cuDeviceGetCount, &deviceCount_);
    CU_RETURN_IF_ERROR(cuDevicePrimaryCtxRetain, &context_, device_);
    char name[256] = {};
    CU_RETURN_IF_ERROR(cuDeviceGetName, name, static_cast<int>(sizeof(name) - 1), device_);
    deviceName_ = name;
    int major = 0, minor = 0;
    CU_RETURN_IF_ERROR(cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                       device_);
    CU_RETURN_IF_ERROR(cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                       device_);
    computeCapability_ = major * 10 + minor;
    arch_ = "sm_" + std::to_string(computeCapability_);
    return Status::ok();
  }

  Platform platform() const override { return Platform::Cuda; }

  Expected<void*> allocate(size_t bytes) override {
    RETURN_IF_ERROR(makeCurrent());
    CUdeviceptr ptr = 0;
    CU_RETURN_IF_ERROR(cuMemAlloc_v2, &ptr, bytes);
    return reinterpret_cast<void*>(ptr);
  }

  Status free(void* deviceMemory) override {
    RETURN_IF_ERROR(makeCurrent());
    CU_RETURN_IF_ERROR(cuMemFree_v2, toDevicePtr(deviceMemory));
    return Status::ok();
  }

  Status copyToDevice(void* deviceDst, const void* hostSrc, size_t bytes) override {
    RETURN_IF_ERROR(makeCurrent());
    CU_RETURN_IF_ERROR(cuMemcpyHtoD_v2, toDevicePtr(deviceDst), hostSrc, bytes);
    return Status::ok();
  }

  Status copyToHost(void* hostDst, const void* deviceSrc, size_t bytes) override {
    RETURN_IF_ERROR(makeCurrent());
    CU_RETURN_IF_ERROR(cuMemcpyDtoH_v2, hostDst, toDevicePtr(deviceSrc), bytes);
    return Status::ok();
  }

  Status memset(void* deviceDst, uint8_t value, size_t bytes) override {
    RETURN_IF_ERROR(makeCurrent());
    CU_RETURN_IF_ERROR(cuMemsetD8_v2, toDevicePtr(deviceDst), value, bytes);
    return Status::ok();
  }

  Expected<void*> createEvent() override {
    if (!sym_.cuEventCreate || !sym_.cuEventDestroy_v2 || !sym_.cuEventRecord || !sym_.cuEventSynchronize ||
        !sym_.cuEventElapsedTime)
      return Status::error(libraryPath_ + " lacks the cuEvent* functions: no device-side timing");
    RETURN_IF_ERROR(makeCurrent());
    CUevent event = nullptr;
    CU_RETURN_IF_ERROR(cuEventCreate, &event, 0);
    return static_cast<void*>(event);
  }
  Status destroyEvent(void* event) override {
    RETURN_IF_ERROR(makeCurrent());
    CU_RETURN_IF_ERROR(cuEventDestroy_v2, static_cast<CUevent>(event));
    return Status::ok();
  }
  Status recordEvent(void* event, void* stream) override {
    RETURN_IF_ERROR(makeCurrent());
    CU_RETURN_IF_ERROR(cuEventRecord, static_cast<CUevent>(event), static_cast<CUstream>(stream));
    return Status::ok();
  }
  Expected<float> elapsedMs(void* start, void* end) override {
    RETURN_IF_ERROR(makeCurrent());
    CU_RETURN_IF_ERROR(cuEventSynchronize, static_cast<CUevent>(end));
    float ms = 0;
    CU_RETURN_IF_ERROR(cuEventElapsedTime, &ms, static_cast<CUevent>(start), static_cast<CUevent>(end));
    return ms;
  }

  Status synchronize(void* stream) override {
    RETURN_IF_ERROR(makeCurrent());
    if (stream == nullptr) {
      CU_RETURN_IF_ERROR(cuCtxSynchronize);
    } else {
      CU_RETURN_IF_ERROR(cuStreamSynchronize, static_cast<CUstream>(stream));
    }
    return Status::ok();
  }

  Expected<void*> loadModule(std::span<const std::byte> image) override {
    RETURN_IF_ERROR(makeCurrent());
    CUmodule module = nullptr;
    if (sym_.cuModuleLoadDataEx == nullptr) {
      CU_RETURN_IF_ERROR(cuModuleLoadData, &module, image.data());
      return static_cast<void*>(module);
    }
    // The PTX JIT explains a rejected module only through its error log.
    std::string log(8192, '\0');
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log.data(), reinterpret_cast<void*>(log.size())};
    Status status = cudaStatus(
        sym_, sym_.cuModuleLoadDataEx(&module, image.data(), 2, options, values),
        "cuModuleLoadDataEx");
    if (!status.isOk()) {
      log.resize(log.find('\0'));
      while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
      if (log.empty()) return status;
      return Status::error(status.message() + ": " + log);
    }
    return static_cast<void*>(module);
  }

  Status unloadModule(void* module) override {
    RETURN_IF_ERROR(makeCurrent());
    CU_RETURN_IF_ERROR(cuModuleUnload, static_cast<CUmodule>(module));
    return Status::ok();
  }

  Expected<void*> getFunction(void* module, const std::string& entry) override {
    RETURN_IF_ERROR(makeCurrent());
    CUfunction function = nullptr;
    Status status = cudaStatus(
        sym_, sym_.cuModuleGetFunction(&function, static_cast<CUmodule>(module), entry.c_str()),
        "cuModuleGetFunction");
    if (!status.isOk()) return Status::error(status.message() + " for entry '" + entry + "'");
    return static_cast<void*>(function);
  }

  Status reserveDynamicSharedMemory(void* function, uint32_t dynamicBytes) override {
    // Up to 48 KiB needs no opt-in on any architecture.
    if (dynamicBytes <= 48 * 1024) return Status::ok();
    if (sym_.cuFuncSetAttribute == nullptr)
      return Status::error("needs " + std::to_string(dynamicBytes) +
                           " bytes of dynamic shared memory, but " + libraryPath_ +
                           " lacks cuFuncSetAttribute to allow more than 48 KiB");
    RETURN_IF_ERROR(makeCurrent());
    int limit = 0;
    CU_RETURN_IF_ERROR(cuDeviceGetAttribute, &limit,
                       CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device_);
    if (dynamicBytes > static_cast<uint32_t>(limit))
      return Status::error("needs " + std::to_string(dynamicBytes) +
                           " bytes of dynamic shared memory; " + arch_ + " allows at most " +
                           std::to_string(limit));
    CU_RETURN_IF_ERROR(cuFuncSetAttribute, static_cast<CUfunction>(function),
                       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                       static_cast<int>(dynamicBytes));
    return Status::ok();
  }

  bool overlapsLaunches() const override {
    return sym_.cuLaunchKernelEx != nullptr && computeCapability_ >= 90;
  }

  Status launch(void* function, const std::array<uint32_t, 3>& grid,
                const std::array<uint32_t, 3>& block, uint32_t sharedBytes, void* stream,
                void** params, bool overlapPrevious) override {
    RETURN_IF_ERROR(makeCurrent());
    if (overlapPrevious && overlapsLaunches()) {
      CUlaunchAttribute overlap = {};
      overlap.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      overlap.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig config = {};
      config.gridDimX = grid[0];
      config.gridDimY = grid[1];
      config.gridDimZ = grid[2];
      config.blockDimX = block[0];
      config.blockDimY = block[1];
      config.blockDimZ = block[2];
      config.sharedMemBytes = sharedBytes;
      config.hStream = static_cast<CUstream>(stream);
      config.attrs = &overlap;
      config.numAttrs = 1;
      CU_RETURN_IF_ERROR(cuLaunchKernelEx, &config, static_cast<CUfunction>(function), params,
                         nullptr);
      return Status::ok();
    }
    CU_RETURN_IF_ERROR(cuLaunchKernel, static_cast<CUfunction>(function), grid[0], grid[1],
                       grid[2], block[0], block[1], block[2], sharedBytes,
                       static_cast<CUstream>(stream), params, nullptr);
    return Status::ok();
  }

 private:
  // Cheap (a thread-local store in the driver), and needed because the caller's thread may have
  // another context current, or none.
  Status makeCurrent() {
    CU_RETURN_IF_ERROR(cuCtxSetCurrent, context_);
    return Status::ok();
  }

  DynamicLibrary library_;
  CudaSymbols sym_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  int computeCapability_ = 0;
};

}  // namespace

Expected<std::shared_ptr<Driver>> openCudaDriver(DynamicLibrary library, int ordinal,
                                                 OpenStage* failedAt) {
  CudaSymbols symbols;
  std::vector<std::string> missing = resolveSymbols(library, symbols);
  if (!missing.empty()) {
    *failedAt = OpenStage::Symbols;
    std::string list;
    for (const std::string& name : missing) list += (list.empty() ? "" : ", ") + name;
    return Status::error("lacks required CUDA driver symbol(s) " + list);
  }
  auto driver = std::make_shared<CudaDriver>(std::move(library), symbols);
  Status status = driver->init(ordinal);
  if (!status.isOk()) {
    *failedAt = OpenStage::DeviceInit;
    return status;
  }
  return std::shared_ptr<Driver>(std::move(driver));
}

}  // namespace mxfp6::rt
