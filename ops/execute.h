// Running composed plans on a GPU through the runtime: parameters bound by name in the kernel's
// declaration order and checked against its signature (runtime/runtime.h, launchTensors), so a
// wrong tensor is an error naming the kernel's argument before anything launches.
#pragma once

#include <memory>
#include <vector>

#include "ops/compose.h"
#include "runtime/runtime.h"

namespace mxfp6::ops {

/// The step's arguments in the kernel's declaration order; a parameter the step lacks is an
/// error naming it (scalars with a default take it). Integer scalars become i32/i64 as declared.
Expected<std::vector<rt::ParamArg>> bindParams(const rt::KernelMetadata& metadata, const Step& step);

/// Launches each step with the loaded kernel of its plan launch, on `stream`.
class RuntimeLauncher final : public Launcher {
 public:
  /// kernels[i] runs Plan::launches[i]; the pointers must outlive the launcher.
  RuntimeLauncher(std::vector<const rt::LoadedKernel*> kernels, void* stream)
      : kernels_(std::move(kernels)), stream_(stream) {}
  Status launch(const Plan& plan, const Step& step) override;

 private:
  std::vector<const rt::LoadedKernel*> kernels_;
  void* stream_;
};

}  // namespace mxfp6::ops
