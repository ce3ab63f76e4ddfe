#include "tools/mxfp6c/resource_report.h"

#include "compiler/codegen/occupancy.h"

namespace mxfp6::cli {

std::string resourceReport(const std::string& kernel, const codegen::TargetInfo& target,
                           const codegen::CompiledKernel& compiled) {
  const codegen::Resources& r = compiled.resources;
  auto n = [](const std::optional<int>& v, const char* unit) {
    return (v ? std::to_string(*v) : std::string("?")) + unit;
  };
  const bool amd = target.backend == codegen::Backend::ROCDL;
  std::string line = "mxfp6c: " + kernel + " for " + target.name + ": " + n(r.registers, amd ? " VGPRs" : " registers");
  if (amd) line += ", " + n(r.sgprs, " SGPRs");
  line += ", " + n(r.sharedBytes, amd ? " B LDS" : " B shared") + ", " + n(r.stackBytes, " B spilled");
  std::optional<codegen::Occupancy> occ = codegen::estimateOccupancy(target, r, compiled.blockThreads);
  line += occ ? ", occupancy " + std::to_string(int(occ->fraction * 100 + 0.5)) + "% (" +
                    std::to_string(occ->programsPerUnit) + " programs per " + (amd ? "CU" : "SM") + ", bound by " +
                    occ->limit + ")"
              : std::string(", occupancy ?");
  line += ", " + std::to_string(compiled.blockThreads) + " threads per program\n";
  if (r.stackBytes && *r.stackBytes > 0)
    line += "mxfp6c: warning: " + kernel + " for " + target.name + " spills " + std::to_string(*r.stackBytes) +
            " bytes per thread to the stack; a smaller VEC or THREADS * VEC per row, or MINPROGS = 0, may avoid it\n";
  return line;
}

}  // namespace mxfp6::cli
