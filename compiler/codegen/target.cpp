#include "compiler/codegen/target.h"

namespace mxfp6::codegen {
namespace {

const std::vector<TargetInfo>& allTargets() {
  static const std::vector<TargetInfo> targets = {
      {"sm_90", Backend::NVVM, 32, "sm_90", 48 * 1024, 227 * 1024, 228 * 1024, 1024, 64, 32},
      // CDNA allocates all of a program's LDS statically: 64 KB per CU on gfx942, 160 on gfx950.
      {"gfx942", Backend::ROCDL, 64, "gfx942", 64 * 1024, 64 * 1024, 64 * 1024, 0, 32, 32},
      {"gfx950", Backend::ROCDL, 64, "gfx950", 160 * 1024, 160 * 1024, 160 * 1024, 0, 32, 32},
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
