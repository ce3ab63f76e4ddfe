// The C API's handle structs (runtime/mxfp6rt.h), shared with the libraries built on the runtime
// that take its handles (the client's op launches take an mxrt_device*), so those reach the C++
// object behind a handle instead of redefining the struct. Internal: not part of the C API.
#pragma once

#include <memory>

#include "runtime/mxfp6rt.h"
#include "runtime/runtime.h"

struct mxrt_device {
  std::unique_ptr<mxfp6::rt::Device> device;
};

struct mxrt_kernel {
  std::unique_ptr<mxfp6::rt::LoadedKernel> kernel;
};
