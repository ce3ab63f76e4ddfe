// libmxfp6rt: load compiled mxfp6c code objects and launch them, with no compiler in the process.
//
// The GPU driver (libcuda.so.1 or libamdhip64.so) is dlopen'ed when a Device is opened, so the
// same build runs on NVIDIA, on AMD, and on machines without a GPU, where Device::open returns a
// "no GPU driver found" / "no GPU device" error instead of failing to start. Every failure is a
// Status naming what failed (the driver function and its error name, the argument, the field).
// This is the one public C++ header; mxfp6rt.h is the same surface as a C ABI.
//
// Thread safety: a Device and a LoadedKernel may be used from several threads at once (they only
// call the driver, which is thread-safe); the driver's current context/device is set on every
// call, so a thread needs no setup. Buffers and kernels keep the driver alive, so they may
// outlive the Device they came from.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace mxfp6::rt {

class Driver;  // runtime/driver.h: the dlopen'ed CUDA or HIP driver behind a Device.
class Device;
class LoadedKernel;
struct KernelMetadata;

// ---------------------------------------------------------------------------------------------
// Devices and memory

enum class Platform { Auto, Cuda, Hip };

/// "auto", "cuda" or "hip".
const char* platformName(Platform platform);
/// Parses "auto"/"cuda"/"hip" (an empty string is "auto").
Expected<Platform> parsePlatform(std::string_view name);

struct DeviceOptions {
  Platform platform = Platform::Auto;
  /// A driver library to load instead of searching. When empty, the environment variable
  /// MXFP6_GPU_DRIVER (a path) is used if set, else defaultDriverSearchPaths(platform).
  /// With Platform::Auto the library's exports decide: cuInit means CUDA, hipInit means HIP.
  std::string driverPath;
  int deviceOrdinal = 0;
};

/// The libraries tried, in order, when no driver path is given: CUDA (libcuda.so.1, libcuda.so)
/// then HIP (libamdhip64.so, .so.6, .so.5, /opt/rocm/lib/libamdhip64.so), or one of the two.
std::vector<std::string> defaultDriverSearchPaths(Platform platform);

/// Device memory that frees itself. Move-only; an empty buffer (size 0) holds no memory.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  /// Gives up ownership: the caller frees the pointer with Device::free.
  void* release();

 private:
  friend class Device;
  DeviceBuffer(std::shared_ptr<Driver> driver, void* data, size_t size);

  std::shared_ptr<Driver> driver_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

class Device {
 public:
  /// Loads the driver and opens device `options.deviceOrdinal`. Errors: "no GPU driver found:
  /// tried <path> (<why>), ..." when no library loads, "no GPU device: ..." when a driver loads
  /// but has no usable device, "... lacks required symbol(s) ..." for a library that is not a
  /// GPU driver.
  static Expected<std::unique_ptr<Device>> open(const DeviceOptions& options = {});

  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();

  /// The device's marketing name, e.g. "NVIDIA H200".
  const std::string& name() const;
  Platform platform() const;
  /// "sm_90" on CUDA; on HIP the name the driver gives, or "" where it gives none.
  const std::string& arch() const;
  /// The driver library that was loaded.
  const std::string& driverPath() const;
  int ordinal() const;

  /// Allocates `bytes` of device memory (at least 256-byte aligned). 0 bytes gives an empty buffer.
  Expected<DeviceBuffer> allocate(size_t bytes);
  /// Frees memory released from a DeviceBuffer (nullptr is a no-op).
  Status free(void* deviceMemory);
  /// Synchronous copies between pageable host memory and device memory.
  Status copyToDevice(void* deviceDst, const void* hostSrc, size_t bytes);
  Status copyToHost(void* hostDst, const void* deviceSrc, size_t bytes);
  /// Sets `bytes` bytes to `value`, ordered on the default stream (asynchronous to the host).
  Status memset(void* deviceDst, uint8_t value, size_t bytes);
  /// Waits for `stream` (a CUstream / hipStream_t), or for the whole device when it is nullptr.
  Status synchronize(void* stream = nullptr);

 private:
  explicit Device(std::shared_ptr<Driver> driver);
  friend Expected<std::unique_ptr<LoadedKernel>> loadKernel(Device&, std::span<const std::byte>,
                                                            KernelMetadata);

  std::shared_ptr<Driver> driver_;
};

// ---------------------------------------------------------------------------------------------
// Kernel metadata: what the code generator writes next to each code object

/// The kinds of launch arguments (compiler/frontend/kir.h AbiKind). The values are the C API's
/// MXRT_ARG_* codes.
enum class ArgKind : int32_t { Pointer = 0, I32 = 1, I64 = 2, F32 = 3 };

/// "ptr", "i32", "i64" or "f32": the spelling used in metadata and in error messages.
const char* argKindName(ArgKind kind);

struct ArgSpec {
  ArgKind kind = ArgKind::Pointer;
  std::string name;
  /// Integer arguments only: the value must be a multiple of this (strides that vector accesses
  /// step by; the code generator assumed it when it chose the access width). 1 = any value.
  int64_t multipleOf = 1;
};

/// Parsed from JSON by parseKernelMetadata. The schema (every field required unless noted):
///   {
///     "kernel": "ln_modulate_fwd",          // the DSL kernel name, used in messages
///     "entry": "ln_modulate_fwd_kernel",    // the symbol in the code object
///     "target": "sm_90",                    // "sm_<N>[a]" (CUDA) or "gfx<N>" (HIP): sm_90, gfx942, gfx950
///     "abi": [{"kind": "ptr", "name": "x"}, {"kind": "f32", "name": "eps"}, ...],
///                                           // launch arguments in order; kind ptr|i32|i64|f32;
///                                           // optional "multiple_of": n on i32/i64 arguments
///     "block": [256, 1, 1],                 // threads per block, each >= 1, product <= 1024
///     "shared_bytes": 0,                    // DYNAMIC shared memory per block passed at launch
///                                           // (0 when the kernel only uses static shared memory)
///     "rows_per_program": 4,                // rows handled by one block (gridForRows)
///     "alignment": 16,                      // bytes every pointer argument must be aligned to
///                                           // (a power of two; 1 = no requirement)
///     "config": {"ROWS": 4, "THREADS": 64}  // optional: the bound specializations and tunables
///   }
/// Unknown fields are ignored so the code generator can add provenance without a runtime change.
struct KernelMetadata {
  std::string kernel;
  std::string entry;
  std::string target;
  std::vector<ArgSpec> abi;
  std::array<uint32_t, 3> block = {1, 1, 1};
  uint32_t sharedBytes = 0;
  int64_t rowsPerProgram = 1;
  uint32_t alignment = 1;
  std::map<std::string, int64_t> config;

  /// The platform the target runs on: sm_* is Cuda, gfx* is Hip.
  Platform platform() const;
};

/// Errors name the field: "kernel metadata: field 'block' must be an array of 3 integers >= 1".
Expected<KernelMetadata> parseKernelMetadata(std::string_view json);

// ---------------------------------------------------------------------------------------------
// Launching

/// One launch argument: a tagged value. Pointers are device addresses (DeviceBuffer::data(), or
/// a framework tensor's data pointer).
struct LaunchArg {
  ArgKind kind = ArgKind::Pointer;
  union Value {
    void* ptr;
    int32_t i32;
    int64_t i64;
    float f32;
  } value = {nullptr};

  static LaunchArg pointer(const void* p) {
    LaunchArg a;
    a.kind = ArgKind::Pointer;
    a.value.ptr = const_cast<void*>(p);
    return a;
  }
  static LaunchArg i32(int32_t v) {
    LaunchArg a;
    a.kind = ArgKind::I32;
    a.value.i32 = v;
    return a;
  }
  static LaunchArg i64(int64_t v) {
    LaunchArg a;
    a.kind = ArgKind::I64;
    a.value.i64 = v;
    return a;
  }
  static LaunchArg f32(float v) {
    LaunchArg a;
    a.kind = ArgKind::F32;
    a.value.f32 = v;
    return a;
  }
};

/// Checks `args` against the metadata's ABI before anything reaches the driver (a wrong argument
/// there is a silent wrong result or a device fault). Errors, first one wins:
///   "kernel ln_modulate_fwd takes 9 arguments, got 8"
///   "argument 7 'eps' is f32, got i64"
///   "argument 0 'x' is a null pointer"
///   "argument 0 'x' pointer 0x7f0000000004 is not 16-byte aligned"
///   "argument 8 'x_token_stride' is 1001, not a multiple of 8"
Status checkLaunchArgs(const KernelMetadata& metadata, std::span<const LaunchArg> args);

/// Grid dimensions must each be >= 1 (and y, z <= 65535, the limit both vendors share).
Status checkGrid(const std::array<uint32_t, 3>& grid);

/// The 1-D grid covering `rows` rows (the product of the kernel's row extents):
/// {ceil(rows / rows_per_program), 1, 1}. rows = 0 is an error, because no grid is empty; callers
/// that may see empty batches use LoadedKernel::launchRows, for which 0 rows is a no-op.
Expected<std::array<uint32_t, 3>> gridForRows(const KernelMetadata& metadata, int64_t rows);

/// A code object loaded on a device with its entry point resolved. Unloads on destruction.
class LoadedKernel {
 public:
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;
  ~LoadedKernel();

  const KernelMetadata& metadata() const { return metadata_; }

  /// Checks the grid and the arguments, then enqueues the kernel on `stream` (a CUstream /
  /// hipStream_t; nullptr is the default stream) with the metadata's block and shared bytes.
  /// Asynchronous: errors of the kernel itself surface at the next synchronize.
  Status launch(const std::array<uint32_t, 3>& grid, void* stream,
                std::span<const LaunchArg> args) const;

  /// launch() with gridForRows(metadata(), rows); rows = 0 checks the arguments and launches
  /// nothing.
  Status launchRows(int64_t rows, void* stream, std::span<const LaunchArg> args) const;

 private:
  friend Expected<std::unique_ptr<LoadedKernel>> loadKernel(Device&, std::span<const std::byte>,
                                                            KernelMetadata);
  LoadedKernel(std::shared_ptr<Driver> driver, void* module, void* function,
               KernelMetadata metadata);

  std::shared_ptr<Driver> driver_;
  void* module_;
  void* function_;
  KernelMetadata metadata_;
};

/// Loads a code object on `device` and resolves metadata.entry. `code` is a cubin or PTX text
/// (CUDA; PTX need not be NUL-terminated) or an HSACO (HIP). The metadata's target must be for
/// the device's platform; a code object the device cannot run is the driver's error, with the
/// kernel's target and the device's arch appended.
Expected<std::unique_ptr<LoadedKernel>> loadKernel(Device& device, std::span<const std::byte> code,
                                                   KernelMetadata metadata);

}  // namespace mxfp6::rt
