// One DSL kernel run on .npy inputs: through the fp64 reference interpreter, through a code
// object launched on a GPU by the runtime, or both with a per-output comparison. Shared by
// `mxfp6c run` (which compiles the code object) and mxfp6-run (which loads a precompiled one on a
// GPU node without LLVM), so this library links the frontend, the interpreter and the runtime
// only.
#pragma once

#include <functional>
#include <string>

#include "compiler/frontend/kir.h"
#include "support/status.h"

namespace mxfp6::cli {

/// A code object of the kernel being run and its metadata JSON (what `mxfp6c compile -o OUT`
/// writes to OUT and OUT.json).
struct CodeObject {
  std::string bytes;
  std::string metadataJson;
};

/// Where the device path's code object comes from: compiled from the instantiated kernel, or read
/// from files. Called after the device has opened, so a machine without a GPU says so before any
/// compile.
using CodeSource = std::function<Expected<CodeObject>(const kir::Kernel& kernel)>;

struct RunRequest {
  std::string tool;     // the program, as error messages begin: "<tool>: error: ..."
  std::string file;     // the .mxk source
  std::string kernel;   // the kernel's name in it
  std::string config;   // --config K=V,... (empty: the defaults)
  std::string inputs;   // --in NAME=FILE.npy,NAME=VALUE,... (tensors from files, scalars by value)
  std::string outDir;   // --out: each output as DIR/NAME.npy (empty: not written)
  bool device = false;  // run the code object on GPU `ordinal` instead of the interpreter
  bool compare = false; // run both and print, per output, bit-exactness and the max ulp error
  int ordinal = 0;
  CodeSource code;      // needed when device or compare
};

/// Exit status: 0 ok, 1 a user error (a message, or located diagnostics with the source line, on
/// stderr): a missing, unknown or ill-formed input, a file of the wrong dtype or shape, no GPU
/// driver or device, a code object that is not of this kernel and configuration.
int runKernel(const RunRequest& request);

}  // namespace mxfp6::cli
