/* libmxfp6rt C API: the runtime (runtime.h) for callers that are not C++ (Python ctypes/cffi,
 * other languages, other C++ ABIs). Handles are opaque; every function returns MXRT_SUCCESS (0)
 * or a nonzero mxrt_status, and on failure mxrt_last_error() gives the message on the calling
 * thread. No C++ exception crosses this boundary. */
#ifndef MXFP6_RUNTIME_MXFP6RT_H_
#define MXFP6_RUNTIME_MXFP6RT_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define MXRT_API __attribute__((visibility("default")))
#else
#define MXRT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mxrt_status {
  MXRT_SUCCESS = 0,
  MXRT_ERROR_INVALID_ARGUMENT = 1, /* caught before the driver: bad handle, metadata, launch args */
  MXRT_ERROR_UNAVAILABLE = 2,      /* mxrt_device_open: no GPU driver or no GPU device */
  MXRT_ERROR_DRIVER = 3,           /* a driver call failed; the message names it */
  MXRT_ERROR_INTERNAL = 4          /* out of host memory or another unexpected failure */
} mxrt_status;

typedef struct mxrt_device mxrt_device;
typedef struct mxrt_kernel mxrt_kernel;

/* Launch argument kinds, as in the metadata's "abi" ("ptr", "i32", "i64", "f32"). */
typedef enum mxrt_arg_kind {
  MXRT_ARG_PTR = 0,
  MXRT_ARG_I32 = 1,
  MXRT_ARG_I64 = 2,
  MXRT_ARG_F32 = 3
} mxrt_arg_kind;

typedef struct mxrt_arg {
  int32_t kind; /* an mxrt_arg_kind */
  union {
    void* ptr; /* a device address */
    int32_t i32;
    int64_t i64;
    float f32;
  } value;
} mxrt_arg;

/* Element types, as in the metadata's "params" ("bf16", "f16", "f32", "i32", "i64", "u8"). */
typedef enum mxrt_dtype {
  MXRT_DTYPE_BF16 = 0,
  MXRT_DTYPE_F16 = 1,
  MXRT_DTYPE_F32 = 2,
  MXRT_DTYPE_I32 = 3,
  MXRT_DTYPE_I64 = 4,
  MXRT_DTYPE_U8 = 5
} mxrt_dtype;

#define MXRT_MAX_DIMS 8

/* A tensor argument: device memory viewed with sizes and strides counted in elements (as
 * torch's size() and stride() give them). Entries past ndim are ignored. */
typedef struct mxrt_tensor {
  void* data;     /* a device address */
  int32_t dtype;  /* an mxrt_dtype */
  int32_t ndim;
  int64_t sizes[MXRT_MAX_DIMS];
  int64_t strides[MXRT_MAX_DIMS];
} mxrt_tensor;

/* What an mxrt_param holds: a tensor, or a scalar of the kind's type (the mxrt_arg_kind codes). */
typedef enum mxrt_param_kind {
  MXRT_PARAM_TENSOR = 0,
  MXRT_PARAM_I32 = 1,
  MXRT_PARAM_I64 = 2,
  MXRT_PARAM_F32 = 3
} mxrt_param_kind;

/* One declared kernel parameter's argument. */
typedef struct mxrt_param {
  int32_t kind; /* an mxrt_param_kind */
  union {
    mxrt_tensor tensor;
    int32_t i32;
    int64_t i64;
    float f32;
  } value;
} mxrt_param;

/* The message of the last failing call on this thread ("" if none). Valid until the next
 * failing call on this thread. Successful calls leave it unchanged. */
MXRT_API const char* mxrt_last_error(void);

/* platform: "auto", "cuda", "hip" or NULL (= auto). driver_path: a driver library to load, or
 * NULL to use $MXFP6_GPU_DRIVER or the default search. Returns MXRT_ERROR_UNAVAILABLE when no
 * driver loads or it has no device. */
MXRT_API int mxrt_device_open(const char* platform, const char* driver_path, int ordinal,
                              mxrt_device** device);
/* Buffers and kernels stay usable after their device is closed; NULL is a no-op. */
MXRT_API int mxrt_device_close(mxrt_device* device);
/* The device's name, owned by the device; "" for NULL. */
MXRT_API const char* mxrt_device_name(const mxrt_device* device);
/* "cuda" or "hip"; "" for NULL. */
MXRT_API const char* mxrt_device_platform(const mxrt_device* device);
/* 1 when kernels whose metadata has "waits_for_previous_grid" launch overlapping the previous grid
 * in their stream (CUDA 12 driver, sm_90 or later), 0 when they launch in stream order or for NULL. */
MXRT_API int mxrt_device_overlaps_launches(const mxrt_device* device);

/* Device memory. 0 bytes gives *ptr = NULL; mxrt_free(NULL) is a no-op. */
MXRT_API int mxrt_malloc(mxrt_device* device, size_t bytes, void** ptr);
MXRT_API int mxrt_free(mxrt_device* device, void* ptr);
MXRT_API int mxrt_memcpy_htod(mxrt_device* device, void* device_dst, const void* host_src,
                              size_t bytes);
MXRT_API int mxrt_memcpy_dtoh(mxrt_device* device, void* host_dst, const void* device_src,
                              size_t bytes);
MXRT_API int mxrt_memset(mxrt_device* device, void* device_dst, uint8_t value, size_t bytes);
/* Waits for stream (CUstream / hipStream_t), or the whole device when stream is NULL. */
MXRT_API int mxrt_synchronize(mxrt_device* device, void* stream);

/* Loads a code object (cubin, PTX text or HSACO; size bytes at code) described by
 * metadata_json (see runtime.h, KernelMetadata, for the schema). */
MXRT_API int mxrt_kernel_load(mxrt_device* device, const void* code, size_t size,
                              const char* metadata_json, mxrt_kernel** kernel);
/* NULL is a no-op. */
MXRT_API int mxrt_kernel_unload(mxrt_kernel* kernel);
/* Checks grid and args against the kernel's metadata, then enqueues it on stream (NULL: the
 * default stream). args are the metadata's "abi" entries in order, except the "derived" ones (a
 * divisor's multiplier and shift), which the runtime computes and appends. The generated code
 * divides indices in 32 bits: where the metadata has "params", runtime sizes above 2^31 - 1, or
 * a row space of more rows, are refused. */
MXRT_API int mxrt_kernel_launch(const mxrt_kernel* kernel, const uint32_t grid[3], void* stream,
                                const mxrt_arg* args, size_t nargs);
/* grid[0] = ceil(rows / rows_per_program), grid[1] = grid[2] = 1; rows must be in
 * [1, 2^31 - 1]. */
MXRT_API int mxrt_kernel_grid_for_rows(const mxrt_kernel* kernel, int64_t rows, uint32_t grid[3]);
/* Launches from tensors: params holds one argument per declared parameter, in declaration order
 * (mxfp6c list shows them). Each is checked against the kernel's declaration (dtype, ndim,
 * sizes, strides, scalar kinds; runtime sizes such as T must agree across tensors), then the
 * runtime sizes and the grid are derived from the shapes (runtime.h, prepareLaunch, lists every
 * check). Any mismatch is MXRT_ERROR_INVALID_ARGUMENT with a message naming the argument. An
 * empty row space (T = 0) launches nothing and succeeds. Metadata written without "params" is
 * an error: use mxrt_kernel_launch. */
MXRT_API int mxrt_kernel_launch_tensors(const mxrt_kernel* kernel, void* stream,
                                        const mxrt_param* params, size_t nparams);
/* The same checks, without launching: writes the raw arguments (*nargs of them; at most
 * max_args, else MXRT_ERROR_INVALID_ARGUMENT) and the grid for mxrt_kernel_launch, so a loop
 * that launches the same tensors again checks them once. grid[0] = 0 (an empty row space)
 * means there is nothing to launch. */
MXRT_API int mxrt_kernel_prepare_tensors(const mxrt_kernel* kernel, const mxrt_param* params,
                                         size_t nparams, mxrt_arg* args, size_t max_args,
                                         size_t* nargs, uint32_t grid[3]);

#ifdef __cplusplus
}
#endif

#endif /* MXFP6_RUNTIME_MXFP6RT_H_ */
