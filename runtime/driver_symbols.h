// The textual symbol table of every GPU driver function the runtime calls. The drivers are
// dlopen'ed, never linked, so this list is the runtime's whole dependency on them.
//
// Include this file (it has no include guard, on purpose) after defining either or both of
//   MXFP6_CUDA_SYMBOL(requirement, return_type, name, parameter_types)
//   MXFP6_HIP_SYMBOL(requirement, return_type, name, parameter_types)
// where requirement is REQUIRED (the library is rejected when the symbol is missing) or OPTIONAL
// (the pointer stays null and the caller has a fallback). The types come from cuda_abi.h and
// hip_abi.h. A macro left undefined expands its entries to nothing.
//
// Names are the exported symbols, not the cuda.h macros: cuMemAlloc is exported as cuMemAlloc_v2
// (64-bit sizes), and cuDevicePrimaryCtxRelease_v2 replaced the original in CUDA 11.

#ifndef MXFP6_CUDA_SYMBOL
#define MXFP6_CUDA_SYMBOL(requirement, return_type, name, params)
#define MXFP6_CUDA_SYMBOL_DEFAULTED
#endif
#ifndef MXFP6_HIP_SYMBOL
#define MXFP6_HIP_SYMBOL(requirement, return_type, name, params)
#define MXFP6_HIP_SYMBOL_DEFAULTED
#endif

// NVIDIA driver API (libcuda.so.1).
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuInit, (unsigned int))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuGetErrorName, (CUresult, const char**))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuGetErrorString, (CUresult, const char**))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuDeviceGet, (CUdevice*, int))
// How many devices are visible (the tuner spreads keys over them); one is assumed without it.
MXFP6_CUDA_SYMBOL(OPTIONAL, CUresult, cuDeviceGetCount, (int*))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuDeviceGetName, (char*, int, CUdevice))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuDeviceGetAttribute, (int*, CUdevice_attribute, CUdevice))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuDevicePrimaryCtxRetain, (CUcontext*, CUdevice))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuCtxSetCurrent, (CUcontext))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuCtxSynchronize, ())
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuModuleLoadData, (CUmodule*, const void*))
// Preferred over cuModuleLoadData when present: it returns the PTX JIT's error log.
MXFP6_CUDA_SYMBOL(OPTIONAL, CUresult, cuModuleLoadDataEx,
                  (CUmodule*, const void*, unsigned int, CUjit_option*, void**))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuModuleUnload, (CUmodule))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuModuleGetFunction, (CUfunction*, CUmodule, const char*))
// Needed only for kernels asking for more than 48 KiB of dynamic shared memory.
MXFP6_CUDA_SYMBOL(OPTIONAL, CUresult, cuFuncSetAttribute, (CUfunction, CUfunction_attribute, int))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuLaunchKernel,
                  (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                   unsigned int, unsigned int, CUstream, void**, void**))
// CUDA 12.0+: launches that may overlap the previous grid in the stream (programmatic dependent
// launch); without it every launch goes through cuLaunchKernel in stream order.
MXFP6_CUDA_SYMBOL(OPTIONAL, CUresult, cuLaunchKernelEx,
                  (const CUlaunchConfig*, CUfunction, void**, void**))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuMemAlloc_v2, (CUdeviceptr*, size_t))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuMemFree_v2, (CUdeviceptr))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuMemcpyHtoD_v2, (CUdeviceptr, const void*, size_t))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuMemcpyDtoH_v2, (void*, CUdeviceptr, size_t))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuMemsetD8_v2, (CUdeviceptr, unsigned char, size_t))
MXFP6_CUDA_SYMBOL(REQUIRED, CUresult, cuStreamSynchronize, (CUstream))
// Device-side timing (the tuner, the launch benchmarks): without them Event::create says so.
MXFP6_CUDA_SYMBOL(OPTIONAL, CUresult, cuEventCreate, (CUevent*, unsigned int))
MXFP6_CUDA_SYMBOL(OPTIONAL, CUresult, cuEventDestroy_v2, (CUevent))
MXFP6_CUDA_SYMBOL(OPTIONAL, CUresult, cuEventRecord, (CUevent, CUstream))
MXFP6_CUDA_SYMBOL(OPTIONAL, CUresult, cuEventSynchronize, (CUevent))
MXFP6_CUDA_SYMBOL(OPTIONAL, CUresult, cuEventElapsedTime, (float*, CUevent, CUevent))

// HIP runtime (libamdhip64.so).
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipInit, (unsigned int))
MXFP6_HIP_SYMBOL(REQUIRED, const char*, hipGetErrorName, (hipError_t))
MXFP6_HIP_SYMBOL(REQUIRED, const char*, hipGetErrorString, (hipError_t))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipGetDeviceCount, (int*))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipSetDevice, (int))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipDeviceGet, (hipDevice_t*, int))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipDeviceGetName, (char*, int, hipDevice_t))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipDeviceSynchronize, ())
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipModuleLoadData, (hipModule_t*, const void*))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipModuleUnload, (hipModule_t))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipModuleGetFunction,
                 (hipFunction_t*, hipModule_t, const char*))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipModuleLaunchKernel,
                 (hipFunction_t, unsigned int, unsigned int, unsigned int, unsigned int,
                  unsigned int, unsigned int, unsigned int, hipStream_t, void**, void**))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipMalloc, (void**, size_t))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipFree, (void*))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipMemcpyHtoD, (hipDeviceptr_t, void*, size_t))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipMemcpyDtoH, (void*, hipDeviceptr_t, size_t))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipMemset, (void*, int, size_t))
MXFP6_HIP_SYMBOL(REQUIRED, hipError_t, hipStreamSynchronize, (hipStream_t))
MXFP6_HIP_SYMBOL(OPTIONAL, hipError_t, hipEventCreate, (hipEvent_t*))
MXFP6_HIP_SYMBOL(OPTIONAL, hipError_t, hipEventDestroy, (hipEvent_t))
MXFP6_HIP_SYMBOL(OPTIONAL, hipError_t, hipEventRecord, (hipEvent_t, hipStream_t))
MXFP6_HIP_SYMBOL(OPTIONAL, hipError_t, hipEventSynchronize, (hipEvent_t))
MXFP6_HIP_SYMBOL(OPTIONAL, hipError_t, hipEventElapsedTime, (float*, hipEvent_t, hipEvent_t))

#ifdef MXFP6_CUDA_SYMBOL_DEFAULTED
#undef MXFP6_CUDA_SYMBOL
#undef MXFP6_CUDA_SYMBOL_DEFAULTED
#endif
#ifdef MXFP6_HIP_SYMBOL_DEFAULTED
#undef MXFP6_HIP_SYMBOL
#undef MXFP6_HIP_SYMBOL_DEFAULTED
#endif
