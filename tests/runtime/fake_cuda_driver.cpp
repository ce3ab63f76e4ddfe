// A stand-in for libcuda.so.1 that runs on any machine, so the runtime's path from the public API
// through dlopen, the symbol table, context handling and argument marshalling to cuLaunchKernel is
// tested without a GPU. "Device memory" is host memory; the two kernels it knows (add_one and
// scale_add, declared by `.entry` in PTX text) execute on the host, block by block, exactly as
// the grid and block dimensions say. Every call but cuInit/cuGetError*/cuDevice* requires the
// fake context to be current on the calling thread, as the real driver does.
//
// Like the real driver, it copies each kernel argument by the size its entry declares: the
// `.param .u64/.b64/.s64/.f64` (8 bytes) and `.param .u32/.b32/.s32/.f32` (4 bytes) of the PTX,
// and records the copies (fake_launch.h) for every entry, known or not.
//
// Environment: FAKE_CUDA_DEVICES=<n> sets the device count (default 1; 0 makes cuInit fail with
// CUDA_ERROR_NO_DEVICE like a driver on a machine without a GPU).
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tests/runtime/fake_launch.h"

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;  // NOLINT: the driver's type

constexpr CUresult kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2, kNotInitialized = 3,
                   kNoDevice = 100, kInvalidDevice = 101, kInvalidImage = 200,
                   kInvalidContext = 201, kInvalidPtx = 218, kInvalidHandle = 400,
                   kNotFound = 500;

struct Module {
  std::map<std::string, std::vector<int>> entries;  // name -> the byte size of each parameter
};
struct Function {
  std::string name;
  std::vector<int> paramBytes;
  int maxDynamicShared = 48 * 1024;
};

/// The sizes of the `.param` declarations between `(` and `)` of the entry starting at `p`.
std::vector<int> paramSizes(const char* p) {
  std::vector<int> sizes;
  const char* open = std::strchr(p, '(');
  const char* close = open != nullptr ? std::strchr(open, ')') : nullptr;
  if (close == nullptr) return sizes;
  std::string list(open + 1, close);
  for (size_t at = list.find(".param"); at != std::string::npos;
       at = list.find(".param", at + 1)) {
    size_t type = list.find('.', at + 6);
    if (type == std::string::npos) break;
    sizes.push_back(list.compare(type + 2, 2, "64") == 0 ? 8 : 4);
  }
  return sizes;
}

int fakeContextTag;  // its address is the one context
thread_local void* currentContext = nullptr;
bool initialized = false;
std::mutex mutex;
std::set<Function*> functions;

int deviceCount() {
  const char* env = std::getenv("FAKE_CUDA_DEVICES");
  return env != nullptr ? std::atoi(env) : 1;
}

/// sm_90 unless FAKE_CUDA_CC says otherwise ("80": an A100, which has no dependent launches).
int computeCapability() {
  const char* env = std::getenv("FAKE_CUDA_CC");
  return env != nullptr ? std::atoi(env) : 90;
}

CUresult requireContext() {
  if (!initialized) return kNotInitialized;
  return currentContext == &fakeContextTag ? kSuccess : kInvalidContext;
}

}  // namespace

extern "C" {

/// What the last cuLaunchKernel was asked to do; tests read it through dlsym (fake_launch.h).
FakeLaunch fake_cuda_last_launch = {};
/// The latest kFakeLaunchLog launches (fake_launch.h).
FakeLaunch fake_cuda_launch_log[kFakeLaunchLog] = {};

CUresult cuInit(unsigned flags) {
  if (flags != 0) return kInvalidValue;
  if (deviceCount() == 0) return kNoDevice;
  initialized = true;
  return kSuccess;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  switch (error) {
    case kSuccess: *name = "CUDA_SUCCESS"; return kSuccess;
    case kInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; return kSuccess;
    case kOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return kSuccess;
    case kNotInitialized: *name = "CUDA_ERROR_NOT_INITIALIZED"; return kSuccess;
    case kNoDevice: *name = "CUDA_ERROR_NO_DEVICE"; return kSuccess;
    case kInvalidDevice: *name = "CUDA_ERROR_INVALID_DEVICE"; return kSuccess;
    case kInvalidImage: *name = "CUDA_ERROR_INVALID_IMAGE"; return kSuccess;
    case kInvalidContext: *name = "CUDA_ERROR_INVALID_CONTEXT"; return kSuccess;
    case kInvalidPtx: *name = "CUDA_ERROR_INVALID_PTX"; return kSuccess;
    case kInvalidHandle: *name = "CUDA_ERROR_INVALID_HANDLE"; return kSuccess;
    case kNotFound: *name = "CUDA_ERROR_NOT_FOUND"; return kSuccess;
  }
  *name = nullptr;
  return kInvalidValue;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  switch (error) {
    case kSuccess: *text = "no error"; return kSuccess;
    case kInvalidValue: *text = "invalid argument"; return kSuccess;
    case kOutOfMemory: *text = "out of memory"; return kSuccess;
    case kNotInitialized: *text = "initialization error"; return kSuccess;
    case kNoDevice: *text = "no CUDA-capable device is detected"; return kSuccess;
    case kInvalidDevice: *text = "invalid device ordinal"; return kSuccess;
    case kInvalidImage: *text = "device kernel image is invalid"; return kSuccess;
    case kInvalidContext: *text = "invalid device context"; return kSuccess;
    case kInvalidPtx: *text = "a PTX JIT compilation failed"; return kSuccess;
    case kInvalidHandle: *text = "invalid resource handle"; return kSuccess;
    case kNotFound: *text = "named symbol not found"; return kSuccess;
  }
  *text = nullptr;
  return kInvalidValue;
}

CUresult cuDeviceGet(int* device, int ordinal) {
  if (!initialized) return kNotInitialized;
  if (ordinal < 0 || ordinal >= deviceCount()) return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

CUresult cuDeviceGetCount(int* count) {
  if (!initialized) return kNotInitialized;
  *count = deviceCount();
  return kSuccess;
}

CUresult cuDeviceGetName(char* name, int len, int) {
  std::strncpy(name, "Fake GPU", static_cast<size_t>(len));
  return kSuccess;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, int) {
  switch (attribute) {
    case 75: *value = computeCapability() / 10; return kSuccess;  // compute capability major
    case 76: *value = computeCapability() % 10; return kSuccess;  // minor
    case 97: *value = 227 * 1024; return kSuccess;  // max opt-in shared memory per block
  }
  return kInvalidValue;
}

CUresult cuDevicePrimaryCtxRetain(void** context, int) {
  if (!initialized) return kNotInitialized;
  *context = &fakeContextTag;
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRelease_v2(int) { return kSuccess; }

CUresult cuCtxSetCurrent(void* context) {
  currentContext = context;
  return kSuccess;
}

CUresult cuCtxSynchronize() { return requireContext(); }

CUresult cuStreamSynchronize(void*) { return requireContext(); }

// Events: the host clock at record time (the fake runs launches synchronously).
CUresult cuEventCreate(void** event, unsigned) {
  if (CUresult r = requireContext(); r != kSuccess) return r;
  *event = new std::chrono::steady_clock::time_point();
  return kSuccess;
}
CUresult cuEventDestroy_v2(void* event) {
  delete static_cast<std::chrono::steady_clock::time_point*>(event);
  return kSuccess;
}
CUresult cuEventRecord(void* event, void*) {
  *static_cast<std::chrono::steady_clock::time_point*>(event) = std::chrono::steady_clock::now();
  return kSuccess;
}
CUresult cuEventSynchronize(void*) { return requireContext(); }
CUresult cuEventElapsedTime(float* ms, void* start, void* end) {
  auto* a = static_cast<std::chrono::steady_clock::time_point*>(start);
  auto* b = static_cast<std::chrono::steady_clock::time_point*>(end);
  *ms = std::chrono::duration<float, std::milli>(*b - *a).count();
  return kSuccess;
}

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  if (CUresult r = requireContext(); r != kSuccess) return r;
  if (bytes == 0) return kInvalidValue;
  // The real driver aligns allocations to at least 256 bytes.
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (p == nullptr) return kOutOfMemory;
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  return kSuccess;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  if (CUresult r = requireContext(); r != kSuccess) return r;
  std::free(reinterpret_cast<void*>(ptr));
  return kSuccess;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  if (CUresult r = requireContext(); r != kSuccess) return r;
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return kSuccess;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  if (CUresult r = requireContext(); r != kSuccess) return r;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t bytes) {
  if (CUresult r = requireContext(); r != kSuccess) return r;
  std::memset(reinterpret_cast<void*>(dst), value, bytes);
  return kSuccess;
}

CUresult cuModuleLoadDataEx(void** module, const void* image, unsigned numOptions, int* options,
                            void** values) {
  if (CUresult r = requireContext(); r != kSuccess) return r;
  const char* text = static_cast<const char*>(image);
  if (std::strncmp(text, ".version", 8) != 0) return kInvalidImage;
  if (std::strstr(text, "syntax error") != nullptr) {
    for (unsigned i = 0; i < numOptions; ++i) {
      if (options[i] != 5) continue;  // CU_JIT_ERROR_LOG_BUFFER
      size_t size = 0;
      for (unsigned j = 0; j < numOptions; ++j)
        if (options[j] == 6) size = reinterpret_cast<size_t>(values[j]);
      std::strncpy(static_cast<char*>(values[i]), "ptxas fatal   : syntax error at line 3\n",
                   size);
    }
    return kInvalidPtx;
  }
  auto* m = new Module;
  for (const char* p = std::strstr(text, ".entry "); p != nullptr;
       p = std::strstr(p + 1, ".entry ")) {
    const char* name = p + 7;
    m->entries[std::string(name, std::strcspn(name, "( \n"))] = paramSizes(name);
  }
  *module = m;
  return kSuccess;
}

CUresult cuModuleLoadData(void** module, const void* image) {
  return cuModuleLoadDataEx(module, image, 0, nullptr, nullptr);
}

CUresult cuModuleUnload(void* module) {
  if (CUresult r = requireContext(); r != kSuccess) return r;
  delete static_cast<Module*>(module);
  return kSuccess;
}

CUresult cuModuleGetFunction(void** function, void* module, const char* name) {
  if (CUresult r = requireContext(); r != kSuccess) return r;
  auto& entries = static_cast<Module*>(module)->entries;
  auto entry = entries.find(name);
  if (entry == entries.end()) return kNotFound;
  // Leaked like the driver's: functions live with the module.
  auto* f = new Function{name, entry->second};
  std::lock_guard<std::mutex> lock(mutex);
  functions.insert(f);
  *function = f;
  return kSuccess;
}

CUresult cuFuncSetAttribute(void* function, int attribute, int value) {
  if (CUresult r = requireContext(); r != kSuccess) return r;
  if (attribute != 8 || value > 227 * 1024) return kInvalidValue;
  static_cast<Function*>(function)->maxDynamicShared = value;
  return kSuccess;
}

}  // extern "C"

namespace {

CUresult launch(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, unsigned shared, void* stream, void** params, void** extra,
                bool overlapsPrevious) {
  if (CUresult r = requireContext(); r != kSuccess) return r;
  auto* f = static_cast<Function*>(function);
  if (extra != nullptr || params == nullptr || gx == 0 || bx == 0) return kInvalidValue;
  if (static_cast<int>(shared) > f->maxDynamicShared) return kInvalidValue;
  if (f->paramBytes.size() > kFakeMaxParams) return kInvalidValue;
  fake_cuda_last_launch = {{gx, gy, gz}, {bx, by, bz}, shared, stream, f->maxDynamicShared,
                           fake_cuda_last_launch.launches + 1, overlapsPrevious,
                           static_cast<int>(f->paramBytes.size()), {}};
  for (size_t i = 0; i < f->paramBytes.size(); ++i)
    std::memcpy(&fake_cuda_last_launch.params[i], params[i], f->paramBytes[i]);
  fake_cuda_launch_log[(fake_cuda_last_launch.launches - 1) % kFakeLaunchLog] = fake_cuda_last_launch;
  // One thread index per (block, thread) along x, as the PTX versions of these kernels compute.
  for (uint64_t i = 0; i < uint64_t{gx} * bx; ++i) {
    if (f->name == "add_one") {  // (int32* x, int32 n)
      auto* x = *static_cast<int32_t**>(params[0]);
      int32_t n = *static_cast<int32_t*>(params[1]);
      if (i < static_cast<uint64_t>(n)) x[i] += 1;
    } else if (f->name == "scale_add") {  // (float* y, const float* x, float a, int64 n)
      auto* y = *static_cast<float**>(params[0]);
      auto* x = *static_cast<const float**>(params[1]);
      float a = *static_cast<float*>(params[2]);
      int64_t n = *static_cast<int64_t*>(params[3]);
      if (i < static_cast<uint64_t>(n)) y[i] = a * x[i] + y[i];
    }
  }
  return kSuccess;
}

}  // namespace

extern "C" {

CUresult cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void* stream, void** params,
                        void** extra) {
  return launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra, false);
}

/// The driver's CUlaunchAttribute: an id padded to 8 bytes, then a 64-byte value union.
struct FakeLaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmaticStreamSerializationAllowed;
  } value;
};

struct FakeLaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  void* hStream;
  FakeLaunchAttribute* attrs;
  unsigned numAttrs;
};

/// Takes only the attribute the runtime sets (programmatic stream serialization, id 6), which a
/// real driver refuses before sm_90.
CUresult cuLaunchKernelEx(const FakeLaunchConfig* config, void* function, void** params,
                          void** extra) {
  if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr)) return kInvalidValue;
  bool overlaps = false;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id != 6 || computeCapability() < 90) return kInvalidValue;
    overlaps = config->attrs[i].value.programmaticStreamSerializationAllowed != 0;
  }
  return launch(function, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                config->blockDimY, config->blockDimZ, config->sharedMemBytes, config->hStream,
                params, extra, overlaps);
}

}  // extern "C"
