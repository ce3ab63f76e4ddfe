// Loading code objects and launching them. Arguments are checked against the metadata's ABI
// before the driver sees them: the driver cannot check kernel arguments, so a wrong one would be
// a silent wrong result or a device fault instead of an error.
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "runtime/driver.h"
#include "runtime/runtime.h"

namespace mxfp6::rt {
namespace {

std::string hexAddress(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(p));
  return text;
}

std::string plural(size_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

Status withKernel(const KernelMetadata& metadata, Status status) {
  if (status.isOk()) return status;
  return Status::error("kernel " + metadata.kernel + ": " + status.message());
}

/// Binary images (ELF: cubin or HSACO; CUDA fatbin) go to the driver as they are. Anything else
/// is PTX text, which the CUDA driver reads as a C string, so it must end in a NUL byte.
bool isBinaryImage(std::span<const std::byte> code) {
  static constexpr unsigned char kElf[] = {0x7f, 'E', 'L', 'F'};
  static constexpr unsigned char kFatbin[] = {0x50, 0xed, 0x55, 0xba};
  auto startsWith = [&](const unsigned char(&magic)[4]) {
    return code.size() >= 4 && std::memcmp(code.data(), magic, 4) == 0;
  };
  return startsWith(kElf) || startsWith(kFatbin);
}

/// The largest row count and runtime size a launch may have: the generated code divides row
/// indices and sizes in 32 bits (compiler/codegen/index_math.cpp).
constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();

/// The value of a size among the raw arguments (the signature says which argument carries each
/// runtime size); -1 for a runtime size the ABI does not carry.
int64_t sizeValue(const KernelSignature& sig, std::span<const LaunchArg> args, const SizeSpec& size) {
  if (size.isConstant()) return size.constant;
  for (size_t j = 0; j < sig.abiDims.size(); ++j)
    if (sig.abiDims[j] == size.runtimeDim) return args[sig.params.size() + j].value.i64;
  return -1;
}

/// The values of `sizes`. Runs on every launch: no allocation beyond the result.
std::vector<int64_t> sizeValues(const KernelSignature& sig, std::span<const LaunchArg> args,
                                const std::vector<SizeSpec>& sizes) {
  std::vector<int64_t> values;
  values.reserve(sizes.size());
  for (const SizeSpec& size : sizes) values.push_back(sizeValue(sig, args, size));
  return values;
}

/// What an integer argument outside its ABI minimum and maximum is told; empty where it is
/// inside (the message is built only on failure).
std::string outsideRange(int64_t value, const ArgSpec& spec) {
  if (value < spec.minimum)
    return "is " + std::to_string(value) + ", must be >= " + std::to_string(spec.minimum) +
           " (the kernel divides indices by it)";
  if (value > spec.maximum)
    return "is " + std::to_string(value) + ", must be <= " + std::to_string(spec.maximum) +
           " (the kernel divides by it in 32 bits)";
  return {};
}

/// Whether the product of `values` (each >= 0) exceeds kMaxIndex.
bool productExceedsIndex(const std::vector<int64_t>& values) {
  int64_t product = 1;
  for (int64_t n : values)
    if (__builtin_mul_overflow(product, n, &product) || product > kMaxIndex) return true;
  return false;
}

/// The same for the product of `sizes` among the raw arguments, without allocating (this runs on
/// every launch of a kernel with index bounds).
bool productExceedsIndex(const KernelSignature& sig, std::span<const LaunchArg> args,
                         const std::vector<SizeSpec>& sizes) {
  int64_t product = 1;
  for (const SizeSpec& size : sizes)
    if (__builtin_mul_overflow(product, sizeValue(sig, args, size), &product) || product > kMaxIndex)
      return true;
  return false;
}

/// "T * H = 65536 * 32768", for a product of sizes that is too large (built only on failure).
std::string productText(const std::vector<SizeSpec>& sizes, const std::vector<int64_t>& values) {
  std::string names, numbers;
  for (size_t v = 0; v < sizes.size(); ++v) {
    const std::string& name = sizes[v].name;
    names += (v ? " * " : "") + (name.empty() ? std::to_string(values[v]) : name);
    numbers += (v ? " * " : "") + std::to_string(values[v]);
  }
  return names + " = " + numbers;
}

/// The runtime sizes among `args` and the row count they make, against kMaxIndex (known where the
/// metadata has a signature; without one, gridForRows still bounds the rows of launchRows and
/// launchTensors). `empty` (if given) says whether a row extent is 0.
Status checkIndexRange(const KernelMetadata& metadata, std::span<const LaunchArg> args, bool* empty) {
  if (empty) *empty = false;
  if (!metadata.signature) return Status::ok();
  const KernelSignature& sig = *metadata.signature;
  for (size_t j = 0; j < sig.abiDims.size(); ++j) {
    size_t i = sig.params.size() + j;
    int64_t value = args[i].value.i64;
    if (value < 0 || value > kMaxIndex)
      return withKernel(metadata, Status::error("argument " + std::to_string(i) + " '" + metadata.abi[i].name +
                                                "' is " + std::to_string(value) +
                                                ": runtime sizes must be in [0, 2^31 - 1] (the "
                                                "generated code divides indices in 32 bits)"));
  }
  std::vector<int64_t> extents = sizeValues(sig, args, sig.rows);
  for (int64_t n : extents) {
    if (n == 0 && empty) *empty = true;
    if (n <= 0) return Status::ok();  // an empty row space, or an extent the code object does not take
  }
  if (productExceedsIndex(extents))
    return withKernel(metadata, Status::error("the row space " + productText(sig.rows, extents) +
                                              " exceeds 2^31 - 1 rows (the generated code indexes "
                                              "rows in 32 bits)"));
  return checkLaunchSizes(metadata, args);
}

/// checkLaunchArgs; `empty` (if given) says whether the row space is known to be empty.
Status checkArgs(const KernelMetadata& metadata, std::span<const LaunchArg> args, bool* empty) {
  if (args.size() != metadata.abi.size())
    return Status::error("kernel " + metadata.kernel + " takes " +
                         plural(metadata.abi.size(), "argument") + ", got " +
                         std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgSpec& spec = metadata.abi[i];
    const LaunchArg& arg = args[i];
    // Built only on failure: this runs on every launch, whose host time is budgeted in microseconds.
    auto fail = [&](const std::string& problem) {
      return withKernel(metadata, Status::error("argument " + std::to_string(i) + " '" +
                                                spec.name + "' " + problem));
    };
    if (arg.kind != spec.kind)
      return fail(std::string("is ") + argKindName(spec.kind) + ", got " + argKindName(arg.kind));
    if (spec.kind != ArgKind::Pointer) {
      int64_t value = spec.kind == ArgKind::I32 ? arg.value.i32 : spec.kind == ArgKind::I64 ? arg.value.i64 : 0;
      if (spec.multipleOf > 1 && value % spec.multipleOf != 0)
        return fail("is " + std::to_string(value) + ", not a multiple of " + std::to_string(spec.multipleOf));
      // With a signature, minimums and maximums are held only where rows run (checkLaunchSizes): an empty
      // batch divides nothing, and may pass a batch size of 0 as pos_div.
      if (!metadata.signature && (value < spec.minimum || value > spec.maximum)) return fail(outsideRange(value, spec));
      continue;
    }
    if (arg.value.ptr == nullptr) return fail("is a null pointer");
    // The generated code issues vector loads/stores of `alignment` bytes on every pointer.
    if (reinterpret_cast<uintptr_t>(arg.value.ptr) % metadata.alignment != 0)
      return fail("pointer " + hexAddress(arg.value.ptr) + " is not " +
                  std::to_string(metadata.alignment) + "-byte aligned");
  }
  return checkIndexRange(metadata, args, empty);
}

/// The value of a derived argument for the arguments `args` (checked: rows run, so the divisor is
/// at least its minimum of 1).
int32_t derivedValue(const DerivedArg& arg, std::span<const LaunchArg> args) {
  const LaunchArg& source = args[arg.source];
  int64_t d = source.kind == ArgKind::I32 ? source.value.i32 : source.value.i64;
  uint32_t value = arg.kind == DerivedArg::Kind::DivisorMultiplier ? divisorMultiplier(d) : divisorShift(d);
  return static_cast<int32_t>(value);
}

}  // namespace

uint32_t divisorShift(int64_t d) {
  if (d < 1 || d > kMaxIndex) return 0;
  return static_cast<uint32_t>(std::bit_width(uint64_t(d - 1)));  // ceil(log2 d)
}

uint32_t divisorMultiplier(int64_t d) {
  if (d < 1 || d > kMaxIndex) return 0;
  // 2^l - d <= d - 2 unless d is a power of two (then 0), and d < 2^31, so the quotient is below
  // 2^32 - 1 and the result fits 32 bits; the shifted excess is below 2^62.
  uint64_t excess = (uint64_t{1} << divisorShift(d)) - uint64_t(d);
  return static_cast<uint32_t>((excess << 32) / uint64_t(d) + 1);
}

Status checkLaunchSizes(const KernelMetadata& metadata, std::span<const LaunchArg> args) {
  if (!metadata.signature) return Status::ok();
  const KernelSignature& sig = *metadata.signature;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgSpec& spec = metadata.abi[i];
    if (spec.kind != ArgKind::I32 && spec.kind != ArgKind::I64) continue;
    int64_t value = spec.kind == ArgKind::I32 ? args[i].value.i32 : args[i].value.i64;
    if (value < spec.minimum || value > spec.maximum)
      return withKernel(metadata, Status::error("argument " + std::to_string(i) + " '" + spec.name + "' " +
                                                outsideRange(value, spec)));
  }
  for (const std::vector<SizeSpec>& bound : sig.indexBounds) {  // each size carried (parseSignature)
    if (productExceedsIndex(sig, args, bound))
      return withKernel(metadata, Status::error("the index bound " +
                                                productText(bound, sizeValues(sig, args, bound)) +
                                                " exceeds 2^31 - 1 (the generated code divides the "
                                                "indices below it in 32 bits)"));
  }
  return Status::ok();
}

Status checkLaunchArgs(const KernelMetadata& metadata, std::span<const LaunchArg> args) {
  return checkArgs(metadata, args, nullptr);
}

Status checkGrid(const std::array<uint32_t, 3>& grid) {
  auto text = [&] {
    return "grid (" + std::to_string(grid[0]) + ", " + std::to_string(grid[1]) + ", " +
           std::to_string(grid[2]) + ")";
  };
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
    return Status::error(text() + " has a zero dimension; every grid dimension must be >= 1");
  if (grid[0] > static_cast<uint32_t>(std::numeric_limits<int32_t>::max()) ||
      grid[1] > 65535 || grid[2] > 65535)
    return Status::error(text() + " exceeds the launch limits (x <= 2^31-1, y and z <= 65535)");
  return Status::ok();
}

Expected<std::array<uint32_t, 3>> gridForRows(const KernelMetadata& metadata, int64_t rows) {
  if (rows < 1)
    return withKernel(metadata, Status::error("cannot make a grid for " + std::to_string(rows) +
                                              " rows (launchRows treats 0 rows as a no-op)"));
  if (rows > kMaxIndex)
    return withKernel(metadata, Status::error(std::to_string(rows) + " rows exceed 2^31 - 1 (the generated "
                                              "code indexes rows in 32 bits)"));
  int64_t per = metadata.rowsPerProgram;
  int64_t programs = rows / per + (rows % per != 0 ? 1 : 0);
  return std::array<uint32_t, 3>{static_cast<uint32_t>(programs), 1, 1};
}

LoadedKernel::LoadedKernel(std::shared_ptr<Driver> driver, void* module, void* function,
                           KernelMetadata metadata)
    : driver_(std::move(driver)),
      module_(module),
      function_(function),
      metadata_(std::move(metadata)) {}

LoadedKernel::~LoadedKernel() {
  // Nothing to report to; the module's memory goes with the context at the latest.
  driver_->unloadModule(module_);
}

Status LoadedKernel::launch(const std::array<uint32_t, 3>& grid, void* stream,
                            std::span<const LaunchArg> args) const {
  RETURN_IF_ERROR(withKernel(metadata_, checkGrid(grid)));
  bool empty = false;
  RETURN_IF_ERROR(checkArgs(metadata_, args, &empty));
  // An empty row space (a runtime extent of 0) has no row to compute, and the kernel's last row
  // would be row -1: nothing is launched, whatever the grid.
  if (empty) return Status::ok();
  // The driver wants a pointer to each argument's value; every member of the union starts at its
  // first byte, so the value itself serves. The derived arguments follow the caller's. Kernels
  // have few arguments: no heap on this path.
  constexpr size_t kInline = 64;  // the packer prologue has 34 with its divisors' multipliers
  const size_t count = args.size() + metadata_.derived.size();
  void* inlineParams[kInline];
  int32_t inlineDerived[kInline];
  std::vector<void*> heapParams;
  std::vector<int32_t> heapDerived;
  void** params = inlineParams;
  int32_t* derived = inlineDerived;
  if (count > kInline) {
    heapParams.resize(count);
    heapDerived.resize(metadata_.derived.size());
    params = heapParams.data();
    derived = heapDerived.data();
  }
  for (size_t i = 0; i < args.size(); ++i)
    params[i] = const_cast<LaunchArg::Value*>(&args[i].value);
  for (size_t k = 0; k < metadata_.derived.size(); ++k) {
    derived[k] = derivedValue(metadata_.derived[k], args);
    params[args.size() + k] = &derived[k];
  }
  return withKernel(metadata_, driver_->launch(function_, grid, metadata_.block,
                                               metadata_.sharedBytes, stream, params,
                                               metadata_.waitsForPreviousGrid));
}

Status LoadedKernel::launchRows(int64_t rows, void* stream, std::span<const LaunchArg> args) const {
  if (rows == 0) return checkLaunchArgs(metadata_, args);  // an empty batch: nothing to do
  ASSIGN_OR_RETURN(auto grid, gridForRows(metadata_, rows));
  return launch(grid, stream, args);
}

Expected<std::unique_ptr<LoadedKernel>> loadKernel(Device& device, std::span<const std::byte> code,
                                                   KernelMetadata metadata) {
  Driver& driver = *device.driver_;
  if (code.empty()) return withKernel(metadata, Status::error("empty code object"));
  if (metadata.platform() != driver.platform())
    return withKernel(metadata, Status::error(std::string("code object targets ") +
                                              metadata.target + " (" +
                                              platformName(metadata.platform()) +
                                              ") but the device is " + driver.deviceName() +
                                              " (" + platformName(driver.platform()) + ")"));
  std::vector<std::byte> terminated;
  if (!isBinaryImage(code) && code.back() != std::byte{0}) {
    terminated.assign(code.begin(), code.end());
    terminated.push_back(std::byte{0});
    code = terminated;
  }
  auto module = driver.loadModule(code);
  if (!module.isOk()) {
    std::string onDevice = driver.arch().empty() ? driver.deviceName() : driver.arch();
    return withKernel(metadata, Status::error(module.status().message() + " (code object for " +
                                              metadata.target + ", device " + onDevice + ")"));
  }
  auto unloadOnError = [&](const Status& status) {
    driver.unloadModule(*module);
    return withKernel(metadata, status);
  };
  auto function = driver.getFunction(*module, metadata.entry);
  if (!function.isOk()) return unloadOnError(function.status());
  Status shared = driver.reserveDynamicSharedMemory(*function, metadata.sharedBytes);
  if (!shared.isOk()) return unloadOnError(shared);
  return std::unique_ptr<LoadedKernel>(
      new LoadedKernel(device.driver_, *module, *function, std::move(metadata)));
}

}  // namespace mxfp6::rt
