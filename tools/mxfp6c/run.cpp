#include "tools/mxfp6c/run.h"

#include <cstdlib>
#include <iostream>
#include <optional>

#include "compiler/codegen/codegen.h"
#include "tools/kernel_run/kernel_run.h"

namespace mxfp6::cli {

int runCommand(const std::vector<std::string>& positional, const std::map<std::string, std::string>& flags) {
  constexpr int kUserError = 1, kUsage = 2;
  if (positional.size() != 1 || !flags.count("--kernel") || !flags.count("--in") ||
      (!flags.count("--out") && !flags.count("--compare")))
    return kUsage;
  auto flag = [&](const char* name) { return flags.count(name) ? flags.at(name) : std::string(); };
  RunRequest request{"mxfp6c", positional[0], flag("--kernel"), flag("--config"), flag("--in"), flag("--out")};
  request.device = flags.count("--device");
  request.compare = flags.count("--compare");
  request.ordinal = request.device ? std::atoi(flags.at("--device").c_str()) : 0;
  if (request.device || request.compare) {
    if (!flags.count("--target"))
      return std::cerr << "mxfp6c: error: --device and --compare need --target sm_90|gfx942|gfx950\n", kUserError;
    std::optional<codegen::TargetInfo> target = codegen::findTarget(flags.at("--target"));
    if (!target) return std::cerr << "mxfp6c: error: unknown target '" << flags.at("--target") << "'\n", kUserError;
    // sm_90 gets a cubin where ptxas is installed, PTX otherwise (the driver JITs it).
    request.code = [target](const kir::Kernel& k) -> Expected<CodeObject> {
      codegen::Emit emit = target->backend == codegen::Backend::NVVM ? codegen::Emit::Cubin : codegen::Emit::Hsaco;
      Expected<codegen::CompiledKernel> compiled = codegen::compileKernel(k, *target, emit);
      if (!compiled && emit == codegen::Emit::Cubin) compiled = codegen::compileKernel(k, *target, codegen::Emit::Ptx);
      if (!compiled) return compiled.status();
      return CodeObject{compiled->bytes, compiled->metadataJson};
    };
  }
  return runKernel(request);
}

}  // namespace mxfp6::cli
