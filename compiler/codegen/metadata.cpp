#include "compiler/codegen/metadata.h"

#include "compiler/codegen/occupancy.h"

#include <optional>
#include <string>

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

using Json = nlohmann::ordered_json;

/// {"const": 3072, "name": "D"} or {"dim": "T"}; the name of a constant is kept where the kernel
/// spells it otherwise than as the number, so launch errors can say "D = 3072".
Json sizeEntry(const kir::Dim& dim, const kir::Kernel& kernel) {
  if (dim.constant < 0) return {{"dim", kernel.runtimeDims.at(dim.runtimeDim)}};
  Json entry = {{"const", dim.constant}};
  if (!dim.name.empty() && dim.name != std::to_string(dim.constant)) entry["name"] = dim.name;
  return entry;
}

/// The stride one access uses for one dimension, as the frontend lowered it: an explicit
/// strides(...) entry is an integer constant or (an i64 cast of) an integer scalar parameter;
/// anything else (runtime sizes, their products) is the row-major default computed from sizes.
Json strideEntry(const kir::Kernel& kernel, int id) {
  const kir::Op& op = kernel.ops.at(id);
  switch (op.code) {
    case kir::OpCode::ConstInt: return {{"const", op.ival}};
    case kir::OpCode::ScalarArg: return {{"param", kernel.params.at(op.param).name}};
    case kir::OpCode::Cast: return strideEntry(kernel, op.operands.at(0));
    default: return {{"row_major", true}};
  }
}

/// Whether `strides` are those of a row-major layout: each is the product of the sizes inside
/// it, computed from runtime sizes or (when those are all constants) a constant equal to it.
bool isRowMajor(const kir::Param& param, const Json& strides) {
  int64_t inner = 1;
  bool innerConstant = true;
  for (size_t d = param.dims.size(); d-- > 0;) {
    const Json& s = strides[d];
    bool matches = innerConstant ? s.contains("const") && s["const"] == inner
                                 : s.contains("row_major");
    if (!matches) return false;
    const kir::Dim& dim = param.dims[d];
    if (dim.constant < 0 || __builtin_mul_overflow(inner, dim.constant, &inner))
      innerConstant = false;
  }
  return true;
}

/// Per dimension of tensor `p`: the stride its accesses use (they all use the same ones). A
/// row-major layout is written as such, even when its strides happen to be constants, so the
/// runtime checks contiguity against the actual sizes. A tensor the body never accesses takes
/// any layout.
Json tensorStrides(const kir::Kernel& kernel, int p) {
  const kir::Param& param = kernel.params[p];
  Json strides = Json::array();
  for (const kir::Op& op : kernel.ops) {
    if ((op.code != kir::OpCode::Load && op.code != kir::OpCode::Store) || op.param != p) continue;
    for (int id : op.strides) strides.push_back(strideEntry(kernel, id));
    break;
  }
  if (strides.size() != param.dims.size() || isRowMajor(param, strides)) {
    Json any = strides.empty() ? Json{{"any", true}} : Json{{"row_major", true}};
    strides = Json::array();
    for (size_t d = 0; d < param.dims.size(); ++d) strides.push_back(any);
  }
  return strides;
}

/// Every parameter in declaration order, with what a launch from tensors checks (runtime.h,
/// KernelMetadata, has the schema).
Json paramsEntry(const kir::Kernel& kernel) {
  Json params = Json::array();
  for (size_t p = 0; p < kernel.params.size(); ++p) {
    const kir::Param& param = kernel.params[p];
    Json entry = {{"name", param.name}};
    if (param.kind == kir::ParamKind::Scalar) {
      entry["kind"] = "scalar";
      entry["dtype"] = kir::dtypeName(param.dtype);
      if (param.hasDefault) entry["default"] = param.defaultValue;
      params.push_back(entry);
      continue;
    }
    entry["kind"] = "tensor";
    entry["dtype"] = kir::dtypeName(param.dtype);
    entry["output"] = param.isOutput;
    Json dims = Json::array();
    for (const kir::Dim& dim : param.dims) dims.push_back(sizeEntry(dim, kernel));
    entry["dims"] = dims;
    entry["strides"] = tensorStrides(kernel, static_cast<int>(p));
    params.push_back(entry);
  }
  return params;
}

/// The row variables' extents: a runtime size, or the constant of kir::Kernel::rowConstExtents
/// where rowDims is -1. nullopt for a KIR that gives a constant extent no value: the metadata
/// then has no signature and the runtime refuses launches from tensors, rather than derive a
/// wrong grid.
std::optional<Json> rowsEntry(const kir::Kernel& kernel) {
  Json rows = Json::array();
  for (size_t i = 0; i < kernel.rowDims.size(); ++i) {
    int dim = kernel.rowDims[i];
    if (dim >= 0) {
      rows.push_back({{"dim", kernel.runtimeDims.at(dim)}});
    } else if (i < kernel.rowConstExtents.size()) {
      rows.push_back({{"const", kernel.rowConstExtents[i]}});
    } else {
      return std::nullopt;
    }
  }
  return rows;
}

}  // namespace

std::string launchMetadataJson(const kir::Kernel& kernel, const TargetInfo& target, const LaunchShape& shape,
                               const Resources& resources) {
  nlohmann::ordered_json j;
  j["kernel"] = kernel.name;
  j["entry"] = entryName(kernel);
  j["target"] = target.name;
  nlohmann::ordered_json abi = nlohmann::ordered_json::array();
  const std::vector<kir::AbiArg> abiArgs = kernel.abi();
  for (const kir::AbiArg& a : abiArgs) {
    nlohmann::ordered_json entry = {{"kind", abiKindName(a.kind)}, {"name", a.name}};
    const std::map<int, int64_t>& multiples = a.param >= 0 ? shape.strideMultiples : shape.dimMultiples;
    if (auto m = multiples.find(a.param >= 0 ? a.param : a.runtimeDim); m != multiples.end() && m->second > 1)
      entry["multiple_of"] = m->second;
    if (a.param >= 0 ? shape.positiveParams.count(a.param) > 0 : shape.positiveDims.count(a.runtimeDim) > 0)
      entry["minimum"] = 1;
    abi.push_back(entry);
  }
  // The runtime divisors' multipliers and shifts, which the runtime computes from the divisor's
  // value at every launch and passes after the arguments above (index_math.cpp). A runtime that
  // does not know "derived" takes them for arguments like the others, so it never launches the
  // kernel without them: it refuses metadata with a signature (whose ABI is params then sizes),
  // and a launch that does not pass them (the argument count).
  for (int divisor : shape.magicDivisors) {
    const std::string& of = abiArgs.at(divisor).name;
    for (const char* derived : {"divisor_multiplier", "divisor_shift"})
      abi.push_back({{"kind", "i32"}, {"name", std::string(derived) + "(" + of + ")"}, {"derived", derived}, {"of", of}});
  }
  j["abi"] = abi;
  j["block"] = {shape.blockThreads, 1, 1};
  // Shared memory passed at launch, where the buffers do not fit the static allocation.
  j["shared_bytes"] = shape.dynamicSharedBytes;
  j["static_shared_bytes"] = shape.sharedBytes - shape.dynamicSharedBytes;
  j["rows_per_program"] = shape.rowsPerProgram;
  j["alignment"] = shape.pointerAlignment;
  // The kernel starts by waiting for the previous grid in the stream (griddepcontrol.wait), so the
  // runtime may launch it overlapping that grid's tail (programmatic dependent launch).
  j["waits_for_previous_grid"] = shape.waitsForPreviousGrid;
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  for (const auto& [k, v] : kernel.config) config[k] = v;
  j["config"] = config;
  // Which of config's keys are tunables (the rest are specialized sizes and variants): what a
  // schedule's label shows.
  j["tunables"] = kernel.tunables;
  if (std::optional<Json> rows = rowsEntry(kernel)) {
    j["params"] = paramsEntry(kernel);
    j["rows"] = *rows;
    if (!shape.indexBounds.empty()) {
      Json bounds = Json::array();
      for (const std::vector<kir::Dim>& factors : shape.indexBounds) {
        Json product = Json::array();
        for (const kir::Dim& f : factors) product.push_back(sizeEntry(f, kernel));
        bounds.push_back(product);
      }
      j["index_bounds"] = bounds;
    }
  }
  nlohmann::ordered_json res = nlohmann::ordered_json::object();
  if (resources.registers) res["registers"] = *resources.registers;
  if (resources.sgprs) res["sgprs"] = *resources.sgprs;
  if (resources.sharedBytes) res["shared_bytes"] = *resources.sharedBytes;
  if (resources.stackBytes) res["stack_bytes"] = *resources.stackBytes;
  if (std::optional<Occupancy> o = estimateOccupancy(target, resources, shape.blockThreads))
    res["occupancy"] = {{"programs_per_unit", o->programsPerUnit}, {"fraction", o->fraction}, {"limit", o->limit}};
  j["resources"] = res;
  return j.dump(2) + "\n";
}

}  // namespace mxfp6::codegen
