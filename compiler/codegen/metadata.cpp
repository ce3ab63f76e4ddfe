#include "compiler/codegen/metadata.h"

#include <nlohmann/json.hpp>

namespace mxfp6::codegen {
namespace {

const char* abiKindName(kir::AbiKind k) {
  switch (k) {
    case kir::AbiKind::Pointer: return "ptr";
    case kir::AbiKind::I32: return "i32";
    case kir::AbiKind::I64: return "i64";
    case kir::AbiKind::F32: return "f32";
  }
  return "?";
}

}  // namespace

std::string launchMetadataJson(const kir::Kernel& kernel, const TargetInfo& target, const LaunchShape& shape,
                               const Resources& resources) {
  nlohmann::ordered_json j;
  j["kernel"] = kernel.name;
  j["entry"] = entryName(kernel);
  j["target"] = target.name;
  nlohmann::ordered_json abi = nlohmann::ordered_json::array();
  for (const kir::AbiArg& a : kernel.abi()) {
    nlohmann::ordered_json entry = {{"kind", abiKindName(a.kind)}, {"name", a.name}};
    if (auto m = shape.strideMultiples.find(a.param); a.param >= 0 && m != shape.strideMultiples.end() && m->second > 1)
      entry["multiple_of"] = m->second;
    abi.push_back(entry);
  }
  j["abi"] = abi;
  j["block"] = {shape.blockThreads, 1, 1};
  // Dynamic shared memory passed at launch: none, the reduction buffers are static.
  j["shared_bytes"] = 0;
  j["static_shared_bytes"] = shape.sharedBytes;
  j["rows_per_program"] = shape.rowsPerProgram;
  j["alignment"] = shape.pointerAlignment;
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  for (const auto& [k, v] : kernel.config) config[k] = v;
  j["config"] = config;
  nlohmann::ordered_json res = nlohmann::ordered_json::object();
  if (resources.registers) res["registers"] = *resources.registers;
  if (resources.sgprs) res["sgprs"] = *resources.sgprs;
  if (resources.sharedBytes) res["shared_bytes"] = *resources.sharedBytes;
  if (resources.stackBytes) res["stack_bytes"] = *resources.stackBytes;
  j["resources"] = res;
  return j.dump(2) + "\n";
}

}  // namespace mxfp6::codegen
