// The GPU driver behind a Device: one interface, implemented over the NVIDIA driver API
// (cuda_driver.cpp) and over HIP (hip_driver.cpp), both reached through dlopen and the symbol
// table in driver_symbols.h. Internal to the runtime; the public surface is runtime.h.
//
// Every method makes the device current on the calling thread first, so callers need no setup
// and may call from any thread. Every failing driver call becomes a Status of the form
// "<function> failed: <ERROR_NAME> (<error string>)".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "runtime/dynamic_library.h"
#include "runtime/runtime.h"
#include "support/status.h"

// For expanding driver_symbols.h: MXFP6_SYMBOL_IS_REQUIRED(requirement) is true for REQUIRED.
#define MXFP6_SYMBOL_IS_REQUIRED(requirement) MXFP6_SYMBOL_IS_REQUIRED_##requirement
#define MXFP6_SYMBOL_IS_REQUIRED_REQUIRED true
#define MXFP6_SYMBOL_IS_REQUIRED_OPTIONAL false

namespace mxfp6::rt {

class Driver {
 public:
  virtual ~Driver() = default;

  virtual Platform platform() const = 0;
  const std::string& libraryPath() const { return libraryPath_; }
  const std::string& deviceName() const { return deviceName_; }
  const std::string& arch() const { return arch_; }
  int ordinal() const { return ordinal_; }
  /// How many devices the driver sees (this one included).
  int deviceCount() const { return deviceCount_; }

  virtual Expected<void*> allocate(size_t bytes) = 0;
  virtual Status free(void* deviceMemory) = 0;
  virtual Status copyToDevice(void* deviceDst, const void* hostSrc, size_t bytes) = 0;
  virtual Status copyToHost(void* hostDst, const void* deviceSrc, size_t bytes) = 0;
  virtual Status memset(void* deviceDst, uint8_t value, size_t bytes) = 0;
  virtual Status synchronize(void* stream) = 0;

  /// Device-side timing: events recorded in a stream and the milliseconds between two of them
  /// (elapsedMs waits for `end`). An error naming the missing symbol where the driver lacks them.
  virtual Expected<void*> createEvent() = 0;
  virtual Status destroyEvent(void* event) = 0;
  virtual Status recordEvent(void* event, void* stream) = 0;
  virtual Expected<float> elapsedMs(void* start, void* end) = 0;

  /// `image` is a complete code object; PTX text must already end with a NUL byte.
  virtual Expected<void*> loadModule(std::span<const std::byte> image) = 0;
  virtual Status unloadModule(void* module) = 0;
  virtual Expected<void*> getFunction(void* module, const std::string& entry) = 0;
  /// Lets `function` use `dynamicBytes` of dynamic shared memory (CUDA caps it at 48 KiB unless
  /// the kernel opts in).
  virtual Status reserveDynamicSharedMemory(void* function, uint32_t dynamicBytes) = 0;
  /// Whether launch(..., overlapPrevious = true) lets a grid start while the previous one in its
  /// stream is still running (programmatic dependent launch: CUDA 12 on sm_90 and later).
  virtual bool overlapsLaunches() const = 0;
  /// `params[i]` points at the value of argument i, as cuLaunchKernel/hipModuleLaunchKernel take.
  /// `overlapPrevious`: the kernel waits for the previous grid itself (griddepcontrol.wait), so
  /// it may be launched overlapping that grid where overlapsLaunches(); in stream order elsewhere.
  virtual Status launch(void* function, const std::array<uint32_t, 3>& grid,
                        const std::array<uint32_t, 3>& block, uint32_t sharedBytes, void* stream,
                        void** params, bool overlapPrevious) = 0;

 protected:
  std::string libraryPath_;
  std::string deviceName_;
  std::string arch_;
  int ordinal_ = 0;
  int deviceCount_ = 1;
};

/// How far opening one driver library got before it failed. A search that got some library to
/// DeviceInit reports "no GPU device" (a driver is installed, the machine has no usable GPU)
/// rather than "no GPU driver found".
enum class OpenStage { Load, Symbols, DeviceInit };

/// Resolves the CUDA symbol table in `library` and opens device `ordinal` on its primary
/// context. On failure `*failedAt` says where, and the message has no prefix (the caller adds
/// the path and the "no GPU ..." summary).
Expected<std::shared_ptr<Driver>> openCudaDriver(DynamicLibrary library, int ordinal,
                                                 OpenStage* failedAt);
/// Same for HIP.
Expected<std::shared_ptr<Driver>> openHipDriver(DynamicLibrary library, int ordinal,
                                                OpenStage* failedAt);

/// Picks and opens the driver for `options` (explicit path, else MXFP6_GPU_DRIVER, else the
/// default search) and reports every library it tried when none works.
Expected<std::shared_ptr<Driver>> openDriver(const DeviceOptions& options);

}  // namespace mxfp6::rt
