#include "compiler/codegen/target.h"

namespace mxfp6::codegen {
namespace {

const std::vector<TargetInfo>& allTargets() {
  static const std::vector<TargetInfo> targets = {
      {"sm_90", Backend::NVVM, 32, "sm_90"},
      {"gfx942", Backend::ROCDL, 64, "gfx942"},
      {"gfx950", Backend::ROCDL, 64, "gfx950"},
  };
  return targets;
}

}  // namespace

std::optional<TargetInfo> findTarget(const std::string& name) {
  for (const TargetInfo& t : allTargets())
    if (t.name == name) return t;
  return std::nullopt;
}

std::vector<std::string> targetNames() {
  std::vector<std::string> names;
  for (const TargetInfo& t : allTargets()) names.push_back(t.name);
  return names;
}

}  // namespace mxfp6::codegen
