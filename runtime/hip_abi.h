// The slice of the HIP runtime API (hip_runtime_api.h) that the runtime calls, declared here so
// the runtime builds without HIP headers. Only calls whose signatures are the same in ROCm 5 and 6
// are used; in particular no hipDeviceProp_t, whose layout (and exported symbol) changed in 6.0.
#pragma once

namespace mxfp6::rt::hip {

using hipError_t = int;
using hipDevice_t = int;
using hipDeviceptr_t = void*;
using hipModule_t = struct ihipModule_t*;
using hipFunction_t = struct ihipModuleSymbol_t*;
using hipStream_t = struct ihipStream_t*;
using hipEvent_t = struct ihipEvent_t*;

inline constexpr hipError_t hipSuccess = 0;

}  // namespace mxfp6::rt::hip
