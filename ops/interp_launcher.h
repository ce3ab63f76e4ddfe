// Running composed plans on the CPU through the fp64 reference interpreter: the tuner's
// correctness oracle and the tests' way to check an op's plans against its reference without a
// GPU. Tensors are host memory (the same element layouts as on the device).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "compiler/frontend/frontend.h"
#include "compiler/frontend/kir.h"
#include "ops/compose.h"

namespace mxfp6::ops {

class InterpLauncher final : public Launcher {
 public:
  /// Kernels are read from `dslDir`/<op file> (kernels_dsl/) on first use.
  explicit InterpLauncher(std::string dslDir, int threads = 1) : dslDir_(std::move(dslDir)), threads_(threads) {}
  Status launch(const Plan& plan, const Step& step) override;

  /// The instantiated kernel of a plan launch (parsed and cached).
  Expected<const kir::Kernel*> kernel(const std::string& file, const std::string& name, const std::string& config);

 private:
  std::string dslDir_;
  int threads_;
  std::map<std::string, std::unique_ptr<frontend::Module>> modules_;
  std::map<std::string, std::unique_ptr<kir::Kernel>> kernels_;
};

}  // namespace mxfp6::ops
