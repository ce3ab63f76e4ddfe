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
#include <limits>
#include <map>
#include <memory>
#include <optional>
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
  /// How many devices this device's driver sees, this one included (ordinals 0 .. count-1).
  int deviceCount() const;
  /// Whether kernels whose metadata says they wait for the previous grid are launched overlapping
  /// it (programmatic dependent launch: a CUDA 12 driver and sm_90 or later). Where not, they
  /// launch in stream order, as every other kernel does, and lose the overlap's time.
  bool overlapsLaunches() const;

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
  friend class Event;

  std::shared_ptr<Driver> driver_;
};

/// A point in a stream, for device-side timing: record two, then elapsedMs between them. Move-only;
/// keeps the driver alive.
class Event {
 public:
  /// Error where the driver has no event functions (named in the message).
  static Expected<Event> create(Device& device);
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  /// Enqueues the event on `stream` (nullptr: the default stream).
  Status record(void* stream = nullptr);
  /// Milliseconds of device time from `start` to `end`, both recorded; waits for `end`.
  static Expected<float> elapsedMs(const Event& start, const Event& end);

 private:
  Event(std::shared_ptr<Driver> driver, void* event) : driver_(std::move(driver)), event_(event) {}
  std::shared_ptr<Driver> driver_;
  void* event_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Kernel metadata: what the code generator writes next to each code object

/// The kinds of launch arguments (compiler/frontend/kir.h AbiKind). The values are the C API's
/// MXRT_ARG_* codes.
enum class ArgKind : int32_t { Pointer = 0, I32 = 1, I64 = 2, F32 = 3 };

/// "ptr", "i32", "i64" or "f32": the spelling used in metadata and in error messages.
const char* argKindName(ArgKind kind);

/// Element types, spelled as in the DSL: of tensors, and (i32, i64, f32) of scalar parameters.
/// The values are the C API's MXRT_DTYPE_* codes.
enum class Dtype : int32_t { BF16 = 0, F16 = 1, F32 = 2, I32 = 3, I64 = 4, U8 = 5 };

/// "bf16", "f16", "f32", "i32", "i64" or "u8" ("unknown" for a value outside the enum).
const char* dtypeName(Dtype dtype);
/// Bytes per element; 0 for a value outside the enum.
int dtypeBytes(Dtype dtype);

struct ArgSpec {
  ArgKind kind = ArgKind::Pointer;
  std::string name;
  /// Integer arguments only: the value must be a multiple of this (strides that vector accesses
  /// step by; the code generator assumed it when it chose the access width). 1 = any value.
  int64_t multipleOf = 1;
  /// Integer arguments only: the least value the generated code is correct for (1 for a scalar
  /// it divides indices by, which it does unsigned).
  int64_t minimum = std::numeric_limits<int64_t>::min();
  /// Integer arguments only: the largest value it is correct for (2^31 - 1 for a divisor the
  /// kernel divides by through the multiplier the runtime derives from it).
  int64_t maximum = std::numeric_limits<int64_t>::max();
};

/// An argument the runtime computes at every launch from an argument the caller passes, and
/// passes after all of those (the caller never does): a runtime divisor's multiplier and shift,
/// with which the kernel divides by it with a multiply-high, an add and a shift
/// (compiler/codegen/index_math.cpp).
struct DerivedArg {
  enum class Kind { DivisorMultiplier, DivisorShift };
  Kind kind = Kind::DivisorMultiplier;
  std::string name;
  size_t source = 0;  // index into KernelMetadata::abi: an i32/i64 argument with a minimum >= 1
};

/// For a divisor 1 <= d <= 2^31 - 1, with l = ceil(log2 d): multiplier m = floor(2^32 (2^l - d) / d)
/// + 1 and shift l, so that n / d = (mulhi(m, n) + n) >> l for every 0 <= n < 2^31 (Granlund and
/// Montgomery 1994, theorem 4.2; mulhi is the high 32 bits of the 64-bit product; the sum does not
/// wrap for such n). Both 0 for any other d, which no launch passes: the divisor's ABI entry has a
/// minimum of 1 and, as the source of derived arguments, a maximum of 2^31 - 1.
uint32_t divisorMultiplier(int64_t d);
uint32_t divisorShift(int64_t d);

/// A tensor dimension or a row extent: a compile-time size, or a runtime size that is the same
/// wherever its name appears (every use of "T" in one launch is one value).
struct SizeSpec {
  int64_t constant = -1;  // >= 0: the size the kernel was compiled for
  std::string name;       // the runtime size's name; for a constant, how the kernel spells it
                          // ("D", "(C * 3 / 4)"), or empty for a literal
  int runtimeDim = -1;    // runtime sizes: index into KernelSignature::runtimeDims
  bool isConstant() const { return constant >= 0; }
};

/// The stride (in elements) a tensor dimension was compiled for.
struct StrideSpec {
  enum class Kind {
    Constant,  // exactly `constant`
    Param,     // the value passed for the integer scalar parameter `param`
    RowMajor,  // the product of the sizes of the inner dimensions (a contiguous tensor)
    Any,       // the kernel never accesses the tensor, so any layout will do
  };
  Kind kind = Kind::RowMajor;
  int64_t constant = 0;
  std::string param;
  int paramIndex = -1;  // Param: index into KernelSignature::params
};

/// A declared kernel parameter.
struct ParamSpec {
  std::string name;
  bool isTensor = false;
  Dtype dtype = Dtype::F32;           // element type (tensor) or type (scalar: i32, i64 or f32)
  bool isOutput = false;              // tensors: written by the kernel, never read
  std::vector<SizeSpec> dims;         // tensors
  std::vector<StrideSpec> strides;    // tensors: one per dim
  int64_t multipleOf = 1;             // integer scalars: the ABI's multiple_of
  std::optional<double> defaultValue; // scalars, for bindings that fill omitted arguments; a
                                      // launch itself takes every value explicitly
};

/// What a launch from tensors needs to know: the parameters in declaration order, the extents of
/// the row space, and where each ABI argument comes from.
struct KernelSignature {
  std::vector<ParamSpec> params;
  std::vector<SizeSpec> rows;               // one per row variable; their product is the row count
  std::vector<std::string> runtimeDims;     // the runtime sizes, first-appearance order in params
  std::vector<int> abiDims;                 // for abi[params.size() + i]: the runtime dim it carries
  std::vector<int64_t> dimMultiples;        // per runtime dim: the ABI argument's multiple_of (or 1)
  /// Products of sizes and constants that indices the generated code divides in 32 bits stay
  /// below (a loop's bound such as T * H, the prologue's token positions below TB * 32): each
  /// must be at most 2^31 - 1, like the row count.
  std::vector<std::vector<SizeSpec>> indexBounds;
};

/// Parsed from JSON by parseKernelMetadata. The schema (every field required unless noted):
///   {
///     "kernel": "ln_modulate_fwd",          // the DSL kernel name, used in messages
///     "entry": "ln_modulate_fwd_kernel",    // the symbol in the code object
///     "target": "sm_90",                    // "sm_<N>[a]" (CUDA) or "gfx<N>" (HIP): sm_90, gfx942, gfx950
///     "abi": [{"kind": "ptr", "name": "x"}, {"kind": "f32", "name": "eps"}, ...],
///                                           // launch arguments in order; kind ptr|i32|i64|f32;
///                                           // optional "multiple_of": n and "minimum": n on
///                                           // i32/i64 arguments. Last, the derived ones (i32):
///                                           // {"kind": "i32", "name": "divisor_shift(H)",
///                                           //  "derived": "divisor_multiplier"|"divisor_shift",
///                                           //  "of": "H"}, "of" naming an earlier i32/i64
///                                           // argument with "minimum" >= 1; the caller passes
///                                           // the others (KernelMetadata::abi), the runtime
///                                           // computes these (KernelMetadata::derived)
///     "block": [256, 1, 1],                 // threads per block, each >= 1, product <= 1024
///     "shared_bytes": 0,                    // DYNAMIC shared memory per block passed at launch
///                                           // (0 when the kernel only uses static shared memory)
///     "rows_per_program": 4,                // rows handled by one block (gridForRows)
///     "alignment": 16,                      // bytes every pointer argument must be aligned to
///                                           // (a power of two; 1 = no requirement)
///     "config": {"ROWS": 4, "THREADS": 64}, // optional: the bound specializations and tunables
///     "tunables": ["ROWS", "THREADS"],      // optional, informational: which keys of config are
///                                           // tunables, in declaration order
///     "params": [                           // optional (absent in metadata written before
///                                           // launches from tensors): every parameter in
///                                           // declaration order; "abi" must be these (ptr for a
///                                           // tensor) followed by i64 runtime sizes
///       {"name": "x", "kind": "tensor", "dtype": "bf16", "output": false,
///        "dims": [{"dim": "T"}, {"const": 3072, "name": "D"}],   // "name" optional
///        "strides": [{"row_major": true}, {"row_major": true}]},
///                                           // per dim: {"const": n}, {"param": "x_stride"} (an
///                                           // i32/i64 scalar), {"row_major": true} or
///                                           // {"any": true} (tensor never accessed)
///       {"name": "eps", "kind": "scalar", "dtype": "f32", "default": 1e-6}, ...],
///                                           // dtype i32|i64|f32; "default" optional
///     "rows": [{"dim": "T"}],               // required with "params": the row variables'
///                                           // extents, {"dim": name} or {"const": n}
///     "index_bounds": [[{"dim": "T"}, {"dim": "H"}]]
///                                           // optional, with "params": products of sizes (and
///                                           // {"const": n}) that must each be at most 2^31 - 1
///                                           // (a loop's bound, the range of a divided index)
///   }
/// Unknown fields are ignored so the code generator can add provenance without a runtime change.
struct KernelMetadata {
  std::string kernel;
  std::string entry;
  std::string target;
  std::vector<ArgSpec> abi;        // the arguments a launch takes
  std::vector<DerivedArg> derived; // passed after them, computed by the runtime at every launch
  std::array<uint32_t, 3> block = {1, 1, 1};
  uint32_t sharedBytes = 0;
  int64_t rowsPerProgram = 1;
  uint32_t alignment = 1;
  std::map<std::string, int64_t> config;
  /// "waits_for_previous_grid" (optional, default false): the kernel waits for the stream's
  /// previous grid before touching memory, so the runtime launches it overlapping that grid where
  /// the device can (Device::overlapsLaunches()).
  bool waitsForPreviousGrid = false;
  /// From "params" and "rows"; absent for metadata without them (raw launches only).
  std::optional<KernelSignature> signature;

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
/// and, where the metadata has a signature (which says which arguments are runtime sizes), the
/// 32-bit index range the generated code divides in:
///   "argument 12 'S' is 2147483648: runtime sizes must be in [0, 2^31 - 1] (...)"
///   "the row space T * H = 65536 * 32768 exceeds 2^31 - 1 rows (...)"
///   "the index bound T * H = 65536 * 32768 exceeds 2^31 - 1 (...)"
///   "argument 8 'pos_div' is 0, must be >= 1 (the kernel divides indices by it)"
/// (the last two only where rows run: checkLaunchSizes)
Status checkLaunchArgs(const KernelMetadata& metadata, std::span<const LaunchArg> args);
/// The part of checkLaunchArgs that applies where rows run (with a signature; without one the
/// minimums are checked on every launch): integer arguments at least their ABI minimum (a scalar
/// or size the kernel divides by: "argument 12 'S' is 0, must be >= 1 (...)") and at most their
/// maximum (a divisor with a multiplier: "... must be <= 2147483647 (...)"), and the
/// signature's index_bounds (such as a loop's T * H) at most 2^31 - 1. `args` complete, in
/// ABI order.
Status checkLaunchSizes(const KernelMetadata& metadata, std::span<const LaunchArg> args);

/// Grid dimensions must each be >= 1 (and y, z <= 65535, the limit both vendors share).
Status checkGrid(const std::array<uint32_t, 3>& grid);

/// The 1-D grid covering `rows` rows (the product of the kernel's row extents):
/// {ceil(rows / rows_per_program), 1, 1}. rows = 0 is an error, because no grid is empty; callers
/// that may see empty batches use LoadedKernel::launchRows, for which 0 rows is a no-op. More than
/// 2^31 - 1 rows is an error: the generated code indexes rows in 32 bits.
Expected<std::array<uint32_t, 3>> gridForRows(const KernelMetadata& metadata, int64_t rows);

// ---------------------------------------------------------------------------------------------
// Launching from tensors: every argument checked against the kernel's declaration

inline constexpr int kMaxTensorDims = 8;

/// A tensor argument: device memory viewed with sizes and strides in elements, as a framework
/// tensor describes itself (torch: data_ptr(), size(), stride()).
struct TensorArg {
  const void* data = nullptr;
  Dtype dtype = Dtype::F32;
  int32_t ndim = 0;
  std::array<int64_t, kMaxTensorDims> sizes{};
  std::array<int64_t, kMaxTensorDims> strides{};

  /// A view with the given sizes and strides (at most kMaxTensorDims of each, as many strides as
  /// sizes); excess entries are dropped, so the result then fails the launch checks.
  static TensorArg view(const void* data, Dtype dtype, std::span<const int64_t> sizes,
                        std::span<const int64_t> strides);
  /// A contiguous row-major tensor.
  static TensorArg contiguous(const void* data, Dtype dtype, std::span<const int64_t> sizes);
};

/// One declared parameter's argument: a tensor for a tensor parameter, a scalar (LaunchArg of
/// kind I32, I64 or F32) for a scalar one. Converts implicitly from either, so a list reads
/// `{x, scale, LaunchArg::i32(1), LaunchArg::f32(1e-6f)}`.
struct ParamArg {
  bool isTensor = false;
  TensorArg tensor;
  LaunchArg scalar;

  ParamArg() = default;
  ParamArg(const TensorArg& t) : isTensor(true), tensor(t) {}  // NOLINT: implicit by design
  ParamArg(const LaunchArg& s) : scalar(s) {}                  // NOLINT: implicit by design
};

/// The raw launch that a checked list of parameters turns into.
struct PreparedLaunch {
  std::vector<LaunchArg> args;               // in ABI order; passes checkLaunchArgs when rows > 0
  int64_t rows = 0;                          // the product of the row extents
  std::array<uint32_t, 3> grid = {0, 1, 1};  // gridForRows(rows); {0, 1, 1}: nothing to launch
};

/// Checks one argument per declared parameter (declaration order) against the metadata's
/// signature, derives the runtime sizes from the tensors' shapes, and builds the ABI arguments
/// and the grid. Checked, first failure wins, each naming the argument and its index:
///   kind, dtype and ndim: "argument 'scale' (1): expected bf16[B, 3072], got f32[4, 3072]"
///   constant dims: "argument 'x' (0): dim 1 is 4096, the kernel was compiled for D = 3072
///     (bf16[T, 3072])"
///   runtime sizes agree: "argument 'y' (3): dim 0 is 4095, but T is 4096 from argument 'x' (0)
///     dim 0", and are multiples of their multiple_of: "argument 'x' (0): dim 1 is 2, not a
///     multiple of 4: the kernel steps vector accesses by H (bf16[T, H, 128])"
///   strides (dims of size 1 and tensors without elements are exempt, their strides are never
///     multiplied by a nonzero index): row-major tensors contiguous, constant strides equal, a
///     stride carried by a scalar parameter equal to that argument and a multiple of its
///     multiple_of: "argument 'x' (0): stride 0 is 6144, expected 3072: the kernel reads it as
///     a contiguous row-major bf16[T, 3072] (strides [6144, 1])";
///   integer scalars' multiple_of;
///   when rows > 0: pointers non-null and aligned, and no output overlapping another tensor
///     argument's memory range (see tensor_launch.cpp).
/// Zero rows (an empty batch) is not an error: grid {0, 1, 1}, and launchTensors launches
/// nothing. Metadata without a signature is an error that says so.
Expected<PreparedLaunch> prepareLaunch(const KernelMetadata& metadata,
                                       std::span<const ParamArg> params);

/// A code object loaded on a device with its entry point resolved. Unloads on destruction.
class LoadedKernel {
 public:
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;
  ~LoadedKernel();

  const KernelMetadata& metadata() const { return metadata_; }

  /// Checks the grid and the arguments, then enqueues the kernel on `stream` (a CUstream /
  /// hipStream_t; nullptr is the default stream) with the metadata's block and shared bytes.
  /// Where the metadata has a signature and a runtime row extent among `args` is 0, nothing is
  /// launched (an empty row space; the kernel would clamp its rows to row -1).
  /// Asynchronous: errors of the kernel itself surface at the next synchronize.
  Status launch(const std::array<uint32_t, 3>& grid, void* stream,
                std::span<const LaunchArg> args) const;

  /// launch() with gridForRows(metadata(), rows); rows = 0 checks the arguments and launches
  /// nothing.
  Status launchRows(int64_t rows, void* stream, std::span<const LaunchArg> args) const;

  /// prepareLaunch(metadata(), params), then launch() with its arguments and grid; zero rows
  /// launches nothing.
  Status launchTensors(void* stream, std::span<const ParamArg> params) const;

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
