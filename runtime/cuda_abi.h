// The slice of the NVIDIA driver API (cuda.h) that the runtime calls, declared here so the runtime
// builds without CUDA headers. Values are the driver's ABI and never change between releases:
// handles are opaque pointers, CUdeviceptr is 64-bit, every call returns a CUresult.
#pragma once

#include <cstdint>

namespace mxfp6::rt::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // NOLINT: the driver's type (64-bit on every ABI we use)
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUdevice_attribute = int;
using CUfunction_attribute = int;
using CUjit_option = int;

inline constexpr CUresult CUDA_SUCCESS = 0;

inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr CUdevice_attribute CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

inline constexpr CUfunction_attribute CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

inline constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER = 5;
inline constexpr CUjit_option CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

// cuLaunchKernelEx (CUDA 12.0): a launch configuration with attributes.
using CUlaunchAttributeID = int;
inline constexpr CUlaunchAttributeID CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;

struct CUlaunchAttribute {
  CUlaunchAttributeID id;
  char pad[8 - sizeof(CUlaunchAttributeID)];
  union {
    char pad[64];
    int programmaticStreamSerializationAllowed;
    void* alignAsPointer;  // the driver's union holds pointers: 8-byte aligned, 64 bytes
  } value;
};
static_assert(sizeof(CUlaunchAttribute) == 72, "the driver's CUlaunchAttribute is 72 bytes");

struct CUlaunchConfig {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
};

}  // namespace mxfp6::rt::cuda
