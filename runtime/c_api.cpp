// The C API over runtime.h. Each entry point converts Status to an mxrt_status once, records the
// message for mxrt_last_error, and catches everything so no exception unwinds into C.
#include "runtime/mxfp6rt.h"

#include <cstddef>
#include <exception>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "runtime/c_handles.h"
#include "runtime/runtime.h"

namespace {

using mxfp6::Status;
namespace rt = mxfp6::rt;

// The C struct and the C++ one carry the same data; their kinds use the same codes.
static_assert(static_cast<int32_t>(rt::ArgKind::Pointer) == MXRT_ARG_PTR);
static_assert(static_cast<int32_t>(rt::ArgKind::I32) == MXRT_ARG_I32);
static_assert(static_cast<int32_t>(rt::ArgKind::I64) == MXRT_ARG_I64);
static_assert(static_cast<int32_t>(rt::ArgKind::F32) == MXRT_ARG_F32);
static_assert(static_cast<int32_t>(rt::Dtype::BF16) == MXRT_DTYPE_BF16);
static_assert(static_cast<int32_t>(rt::Dtype::F16) == MXRT_DTYPE_F16);
static_assert(static_cast<int32_t>(rt::Dtype::F32) == MXRT_DTYPE_F32);
static_assert(static_cast<int32_t>(rt::Dtype::I32) == MXRT_DTYPE_I32);
static_assert(static_cast<int32_t>(rt::Dtype::I64) == MXRT_DTYPE_I64);
static_assert(static_cast<int32_t>(rt::Dtype::U8) == MXRT_DTYPE_U8);
static_assert(rt::kMaxTensorDims == MXRT_MAX_DIMS);

thread_local std::string lastError;

int fail(mxrt_status code, std::string message) {
  lastError = std::move(message);
  return code;
}

int fromStatus(const Status& status, mxrt_status code) {
  return status.isOk() ? MXRT_SUCCESS : fail(code, status.message());
}

/// Runs `body`, turning any escaping exception into MXRT_ERROR_INTERNAL.
template <typename Body>
int guarded(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(MXRT_ERROR_INTERNAL, std::string(function) + ": out of host memory");
  } catch (const std::exception& e) {
    return fail(MXRT_ERROR_INTERNAL, std::string(function) + ": " + e.what());
  } catch (...) {
    return fail(MXRT_ERROR_INTERNAL, std::string(function) + ": unknown exception");
  }
}

int nullArgument(const char* function, const char* name) {
  return fail(MXRT_ERROR_INVALID_ARGUMENT, std::string(function) + ": " + name + " is NULL");
}

/// The C++ form of a C parameter list; an unknown kind code is an error naming its index. An
/// unknown dtype code passes through, for prepareLaunch to name with the argument.
mxfp6::Expected<std::vector<rt::ParamArg>> convertParams(const mxrt_param* params, size_t n) {
  std::vector<rt::ParamArg> converted(n);
  for (size_t i = 0; i < n; ++i) {
    const mxrt_param& p = params[i];
    switch (p.kind) {
      case MXRT_PARAM_TENSOR: {
        const mxrt_tensor& t = p.value.tensor;
        rt::TensorArg tensor;
        tensor.data = t.data;
        tensor.dtype = static_cast<rt::Dtype>(t.dtype);
        tensor.ndim = t.ndim;
        for (int d = 0; d < MXRT_MAX_DIMS; ++d) {
          tensor.sizes[d] = t.sizes[d];
          tensor.strides[d] = t.strides[d];
        }
        converted[i] = tensor;
        break;
      }
      case MXRT_PARAM_I32: converted[i] = rt::LaunchArg::i32(p.value.i32); break;
      case MXRT_PARAM_I64: converted[i] = rt::LaunchArg::i64(p.value.i64); break;
      case MXRT_PARAM_F32: converted[i] = rt::LaunchArg::f32(p.value.f32); break;
      default:
        return Status::error("params[" + std::to_string(i) + "] has unknown kind " +
                             std::to_string(p.kind));
    }
  }
  return converted;
}

/// Checks a C parameter list; caller mistakes are MXRT_ERROR_INVALID_ARGUMENT.
int prepare(const char* function, const mxrt_kernel* kernel, const mxrt_param* params,
            size_t nparams, rt::PreparedLaunch& prepared) {
  if (kernel == nullptr) return nullArgument(function, "kernel");
  if (params == nullptr && nparams != 0) return nullArgument(function, "params");
  const rt::KernelMetadata& metadata = kernel->kernel->metadata();
  auto converted = convertParams(params, nparams);
  if (!converted.isOk())
    return fail(MXRT_ERROR_INVALID_ARGUMENT,
                "kernel " + metadata.kernel + ": " + converted.status().message());
  auto checked = rt::prepareLaunch(metadata, *converted);
  if (!checked.isOk()) return fromStatus(checked.status(), MXRT_ERROR_INVALID_ARGUMENT);
  prepared = checked.take();
  return MXRT_SUCCESS;
}

}  // namespace

extern "C" {

const char* mxrt_last_error(void) { return lastError.c_str(); }

int mxrt_device_open(const char* platform, const char* driver_path, int ordinal,
                     mxrt_device** device) {
  return guarded("mxrt_device_open", [&] {
    if (device == nullptr) return nullArgument("mxrt_device_open", "device");
    *device = nullptr;
    auto parsed = rt::parsePlatform(platform != nullptr ? platform : "");
    if (!parsed.isOk()) return fromStatus(parsed.status(), MXRT_ERROR_INVALID_ARGUMENT);
    rt::DeviceOptions options;
    options.platform = *parsed;
    if (driver_path != nullptr) options.driverPath = driver_path;
    options.deviceOrdinal = ordinal;
    auto opened = rt::Device::open(options);
    if (!opened.isOk()) return fromStatus(opened.status(), MXRT_ERROR_UNAVAILABLE);
    *device = new mxrt_device{opened.take()};
    return static_cast<int>(MXRT_SUCCESS);
  });
}

int mxrt_device_close(mxrt_device* device) {
  return guarded("mxrt_device_close", [&] {
    delete device;
    return static_cast<int>(MXRT_SUCCESS);
  });
}

const char* mxrt_device_name(const mxrt_device* device) {
  return device != nullptr ? device->device->name().c_str() : "";
}

const char* mxrt_device_platform(const mxrt_device* device) {
  return device != nullptr ? rt::platformName(device->device->platform()) : "";
}

int mxrt_device_overlaps_launches(const mxrt_device* device) {
  return device != nullptr && device->device->overlapsLaunches() ? 1 : 0;
}

int mxrt_malloc(mxrt_device* device, size_t bytes, void** ptr) {
  return guarded("mxrt_malloc", [&] {
    if (device == nullptr) return nullArgument("mxrt_malloc", "device");
    if (ptr == nullptr) return nullArgument("mxrt_malloc", "ptr");
    *ptr = nullptr;
    auto buffer = device->device->allocate(bytes);
    if (!buffer.isOk()) return fromStatus(buffer.status(), MXRT_ERROR_DRIVER);
    *ptr = buffer->release();
    return static_cast<int>(MXRT_SUCCESS);
  });
}

int mxrt_free(mxrt_device* device, void* ptr) {
  return guarded("mxrt_free", [&] {
    if (device == nullptr) return nullArgument("mxrt_free", "device");
    return fromStatus(device->device->free(ptr), MXRT_ERROR_DRIVER);
  });
}

int mxrt_memcpy_htod(mxrt_device* device, void* device_dst, const void* host_src, size_t bytes) {
  return guarded("mxrt_memcpy_htod", [&] {
    if (device == nullptr) return nullArgument("mxrt_memcpy_htod", "device");
    return fromStatus(device->device->copyToDevice(device_dst, host_src, bytes),
                      MXRT_ERROR_DRIVER);
  });
}

int mxrt_memcpy_dtoh(mxrt_device* device, void* host_dst, const void* device_src, size_t bytes) {
  return guarded("mxrt_memcpy_dtoh", [&] {
    if (device == nullptr) return nullArgument("mxrt_memcpy_dtoh", "device");
    return fromStatus(device->device->copyToHost(host_dst, device_src, bytes), MXRT_ERROR_DRIVER);
  });
}

int mxrt_memset(mxrt_device* device, void* device_dst, uint8_t value, size_t bytes) {
  return guarded("mxrt_memset", [&] {
    if (device == nullptr) return nullArgument("mxrt_memset", "device");
    return fromStatus(device->device->memset(device_dst, value, bytes), MXRT_ERROR_DRIVER);
  });
}

int mxrt_synchronize(mxrt_device* device, void* stream) {
  return guarded("mxrt_synchronize", [&] {
    if (device == nullptr) return nullArgument("mxrt_synchronize", "device");
    return fromStatus(device->device->synchronize(stream), MXRT_ERROR_DRIVER);
  });
}

int mxrt_kernel_load(mxrt_device* device, const void* code, size_t size,
                     const char* metadata_json, mxrt_kernel** kernel) {
  return guarded("mxrt_kernel_load", [&] {
    if (kernel == nullptr) return nullArgument("mxrt_kernel_load", "kernel");
    *kernel = nullptr;
    if (device == nullptr) return nullArgument("mxrt_kernel_load", "device");
    if (code == nullptr) return nullArgument("mxrt_kernel_load", "code");
    if (size == 0) return fail(MXRT_ERROR_INVALID_ARGUMENT, "mxrt_kernel_load: size is 0");
    if (metadata_json == nullptr) return nullArgument("mxrt_kernel_load", "metadata_json");
    auto metadata = rt::parseKernelMetadata(metadata_json);
    if (!metadata.isOk()) return fromStatus(metadata.status(), MXRT_ERROR_INVALID_ARGUMENT);
    if (metadata->platform() != device->device->platform())
      return fail(MXRT_ERROR_INVALID_ARGUMENT,
                  "kernel " + metadata->kernel + ": code object targets " + metadata->target +
                      " but the device is " + rt::platformName(device->device->platform()));
    auto loaded = rt::loadKernel(
        *device->device, std::span(static_cast<const std::byte*>(code), size), metadata.take());
    if (!loaded.isOk()) return fromStatus(loaded.status(), MXRT_ERROR_DRIVER);
    *kernel = new mxrt_kernel{loaded.take()};
    return static_cast<int>(MXRT_SUCCESS);
  });
}

int mxrt_kernel_unload(mxrt_kernel* kernel) {
  return guarded("mxrt_kernel_unload", [&] {
    delete kernel;
    return static_cast<int>(MXRT_SUCCESS);
  });
}

int mxrt_kernel_launch(const mxrt_kernel* kernel, const uint32_t grid[3], void* stream,
                       const mxrt_arg* args, size_t nargs) {
  return guarded("mxrt_kernel_launch", [&] {
    if (kernel == nullptr) return nullArgument("mxrt_kernel_launch", "kernel");
    if (grid == nullptr) return nullArgument("mxrt_kernel_launch", "grid");
    if (args == nullptr && nargs != 0) return nullArgument("mxrt_kernel_launch", "args");
    // Copied, not cast: the two structs match field for field but are distinct types.
    constexpr size_t kInline = 32;
    rt::LaunchArg inlineArgs[kInline];
    std::vector<rt::LaunchArg> heapArgs;
    rt::LaunchArg* converted = inlineArgs;
    if (nargs > kInline) {
      heapArgs.resize(nargs);
      converted = heapArgs.data();
    }
    for (size_t i = 0; i < nargs; ++i) {
      switch (args[i].kind) {
        case MXRT_ARG_PTR: converted[i] = rt::LaunchArg::pointer(args[i].value.ptr); break;
        case MXRT_ARG_I32: converted[i] = rt::LaunchArg::i32(args[i].value.i32); break;
        case MXRT_ARG_I64: converted[i] = rt::LaunchArg::i64(args[i].value.i64); break;
        case MXRT_ARG_F32: converted[i] = rt::LaunchArg::f32(args[i].value.f32); break;
        default:
          return fail(MXRT_ERROR_INVALID_ARGUMENT,
                      "argument " + std::to_string(i) + " has unknown kind " +
                          std::to_string(args[i].kind));
      }
    }
    std::span<const rt::LaunchArg> argSpan(converted, nargs);
    const rt::KernelMetadata& metadata = kernel->kernel->metadata();
    std::array<uint32_t, 3> dims = {grid[0], grid[1], grid[2]};
    // Caller mistakes are told apart from driver failures by checking first.
    Status checked = rt::checkGrid(dims);
    if (checked.isOk()) checked = rt::checkLaunchArgs(metadata, argSpan);
    if (!checked.isOk())
      return fail(MXRT_ERROR_INVALID_ARGUMENT,
                  checked.message().rfind("kernel ", 0) == 0
                      ? checked.message()
                      : "kernel " + metadata.kernel + ": " + checked.message());
    return fromStatus(kernel->kernel->launch(dims, stream, argSpan), MXRT_ERROR_DRIVER);
  });
}

int mxrt_kernel_launch_tensors(const mxrt_kernel* kernel, void* stream, const mxrt_param* params,
                               size_t nparams) {
  return guarded("mxrt_kernel_launch_tensors", [&] {
    rt::PreparedLaunch prepared;
    if (int status = prepare("mxrt_kernel_launch_tensors", kernel, params, nparams, prepared))
      return status;
    if (prepared.rows == 0) return static_cast<int>(MXRT_SUCCESS);  // an empty batch
    return fromStatus(kernel->kernel->launch(prepared.grid, stream, prepared.args),
                      MXRT_ERROR_DRIVER);
  });
}

int mxrt_kernel_prepare_tensors(const mxrt_kernel* kernel, const mxrt_param* params,
                                size_t nparams, mxrt_arg* args, size_t max_args, size_t* nargs,
                                uint32_t grid[3]) {
  return guarded("mxrt_kernel_prepare_tensors", [&] {
    const char* function = "mxrt_kernel_prepare_tensors";
    if (nargs == nullptr) return nullArgument(function, "nargs");
    if (grid == nullptr) return nullArgument(function, "grid");
    if (args == nullptr && max_args != 0) return nullArgument(function, "args");
    *nargs = 0;
    rt::PreparedLaunch prepared;
    if (int status = prepare(function, kernel, params, nparams, prepared)) return status;
    if (prepared.args.size() > max_args)
      return fail(MXRT_ERROR_INVALID_ARGUMENT,
                  std::string(function) + ": the kernel takes " +
                      std::to_string(prepared.args.size()) + " raw arguments, max_args is " +
                      std::to_string(max_args));
    for (size_t i = 0; i < prepared.args.size(); ++i) {
      const rt::LaunchArg& a = prepared.args[i];
      args[i].kind = static_cast<int32_t>(a.kind);
      switch (a.kind) {
        case rt::ArgKind::Pointer: args[i].value.ptr = a.value.ptr; break;
        case rt::ArgKind::I32: args[i].value.i32 = a.value.i32; break;
        case rt::ArgKind::I64: args[i].value.i64 = a.value.i64; break;
        case rt::ArgKind::F32: args[i].value.f32 = a.value.f32; break;
      }
    }
    *nargs = prepared.args.size();
    for (int i = 0; i < 3; ++i) grid[i] = prepared.grid[i];
    return static_cast<int>(MXRT_SUCCESS);
  });
}

int mxrt_kernel_grid_for_rows(const mxrt_kernel* kernel, int64_t rows, uint32_t grid[3]) {
  return guarded("mxrt_kernel_grid_for_rows", [&] {
    if (kernel == nullptr) return nullArgument("mxrt_kernel_grid_for_rows", "kernel");
    if (grid == nullptr) return nullArgument("mxrt_kernel_grid_for_rows", "grid");
    auto dims = rt::gridForRows(kernel->kernel->metadata(), rows);
    if (!dims.isOk()) return fromStatus(dims.status(), MXRT_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < 3; ++i) grid[i] = (*dims)[i];
    return static_cast<int>(MXRT_SUCCESS);
  });
}

}  // extern "C"
