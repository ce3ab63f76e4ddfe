// bindArguments: checks host arguments against a kernel's signature and derives the runtime sizes.
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "compiler/interp/interpreter.h"

namespace mxfp6::interp {
namespace {

std::string tensorTypeText(const kir::Param& p) {
  std::string s = std::string(p.isOutput ? "out " : "") + kir::dtypeName(p.dtype) + "[";
  for (size_t d = 0; d < p.dims.size(); ++d) {
    if (d) s += ", ";
    s += p.dims[d].name;
  }
  return s + "]";
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d) s += ", ";
    s += std::to_string(shape[d]);
  }
  return s + "]";
}

std::string argKindText(const Arg& a) {
  if (std::holds_alternative<std::monostate>(a)) return "nothing (omitted)";
  if (const auto* t = std::get_if<TensorArg>(&a))
    return std::string("a tensor (") + kir::dtypeName(t->dtype) + ", shape " + shapeText(t->shape) + ")";
  if (const auto* i = std::get_if<int64_t>(&a)) return "an integer scalar (" + std::to_string(*i) + ")";
  std::ostringstream os;
  os.precision(17);
  os << "a float scalar (" << std::get<double>(a) << ")";
  return os.str();
}

std::string argName(const kir::Param& p) { return "argument '" + p.name + "'"; }

Status bindTensor(const kir::Kernel& kernel, int index, const Arg& arg, BoundArgs& out,
                  std::vector<std::pair<int, int>>& dimSource) {
  const kir::Param& p = kernel.params[index];
  const auto* t = std::get_if<TensorArg>(&arg);
  if (!t) {
    return Status::error(argName(p) + " is a tensor " + tensorTypeText(p) + ", got " +
                         argKindText(arg));
  }
  if (t->dtype != p.dtype) {
    return Status::error(argName(p) + " has dtype " + kir::dtypeName(t->dtype) + ", expected " +
                         kir::dtypeName(p.dtype) + " (" + tensorTypeText(p) + ")");
  }
  if (t->shape.size() != p.dims.size()) {
    return Status::error(argName(p) + " has rank " + std::to_string(t->shape.size()) +
                         " (shape " + shapeText(t->shape) + "), expected " +
                         std::to_string(p.dims.size()) + " (" + tensorTypeText(p) + ")");
  }
  if (t->extentElements < 0) {
    return Status::error(argName(p) + " has a negative extent (" +
                         std::to_string(t->extentElements) + " elements)");
  }
  if (t->extentElements > 0 && t->data == nullptr) {
    return Status::error(argName(p) + " has a null data pointer and extent " +
                         std::to_string(t->extentElements));
  }
  for (size_t d = 0; d < p.dims.size(); ++d) {
    const kir::Dim& dim = p.dims[d];
    const int64_t got = t->shape[d];
    const std::string where = argName(p) + " dim " + std::to_string(d) + " (" + dim.name + ")";
    if (got < 0) return Status::error(where + " is negative (" + std::to_string(got) + ")");
    if (dim.constant >= 0) {
      if (got != dim.constant) {
        return Status::error(where + " is " + std::to_string(got) + ", expected " +
                             std::to_string(dim.constant));
      }
      continue;
    }
    if (dim.runtimeDim < 0 || dim.runtimeDim >= static_cast<int>(kernel.runtimeDims.size())) {
      return Status::error("kernel '" + kernel.name + "': " + where +
                           " has neither a constant nor a valid runtime-dim index");
    }
    auto& [srcParam, srcDim] = dimSource[dim.runtimeDim];
    int64_t& value = out.runtimeDims[dim.runtimeDim];
    if (srcParam < 0) {
      value = got;
      srcParam = index;
      srcDim = static_cast<int>(d);
    } else if (value != got) {
      return Status::error(where + " is " + std::to_string(got) + ", but " +
                           argName(kernel.params[srcParam]) + " dim " + std::to_string(srcDim) +
                           " gives " + kernel.runtimeDims[dim.runtimeDim] + " = " +
                           std::to_string(value));
    }
  }
  out.tensors[index] = *t;
  return Status::ok();
}

Status bindIntScalar(const kir::Param& p, int64_t v, BoundArgs& out, int index) {
  if (p.dtype == kir::Dtype::I32 && (v < std::numeric_limits<int32_t>::min() ||
                                     v > std::numeric_limits<int32_t>::max())) {
    return Status::error(argName(p) + " is i32, got " + std::to_string(v) + " (out of range)");
  }
  out.intScalars[index] = v;
  return Status::ok();
}

Status bindFloatScalar(const kir::Param& p, double v, BoundArgs& out, int index) {
  const float f = static_cast<float>(v);
  if (std::isfinite(v) && !std::isfinite(f)) {
    std::ostringstream os;
    os.precision(17);
    os << argName(p) << " is f32, got " << v << " (out of range)";
    return Status::error(os.str());
  }
  out.floatScalars[index] = f;
  return Status::ok();
}

Status bindScalar(const kir::Param& p, int index, const Arg& arg, BoundArgs& out) {
  const bool intParam = p.dtype == kir::Dtype::I32 || p.dtype == kir::Dtype::I64;
  if (!intParam && p.dtype != kir::Dtype::F32) {
    return Status::error(argName(p) + " has unsupported scalar type " + kir::dtypeName(p.dtype));
  }
  const std::string typeText = std::string(kir::dtypeName(p.dtype)) + " scalar";
  if (std::holds_alternative<std::monostate>(arg)) {
    if (!p.hasDefault) {
      return Status::error(argName(p) + " (" + typeText + ") was omitted and has no default");
    }
    if (!intParam) return bindFloatScalar(p, p.defaultValue, out, index);
    const double d = p.defaultValue;
    if (!(std::trunc(d) == d && std::fabs(d) < 0x1p63)) {
      return Status::error(argName(p) + " has a non-integral default for an " + typeText);
    }
    return bindIntScalar(p, static_cast<int64_t>(d), out, index);
  }
  if (std::holds_alternative<TensorArg>(arg)) {
    return Status::error(argName(p) + " is an " + typeText + ", got " + argKindText(arg));
  }
  if (const auto* i = std::get_if<int64_t>(&arg)) {
    if (intParam) return bindIntScalar(p, *i, out, index);
    return bindFloatScalar(p, static_cast<double>(*i), out, index);
  }
  const double d = std::get<double>(arg);
  if (intParam) {
    return Status::error(argName(p) + " is an " + typeText + ", got " + argKindText(arg));
  }
  return bindFloatScalar(p, d, out, index);
}

}  // namespace

Expected<BoundArgs> bindArguments(const kir::Kernel& kernel, std::span<const Arg> args) {
  if (args.size() != kernel.params.size()) {
    std::string names;
    for (size_t i = 0; i < kernel.params.size(); ++i) {
      if (i) names += ", ";
      names += kernel.params[i].name;
    }
    return Status::error("kernel '" + kernel.name + "' takes " +
                         std::to_string(kernel.params.size()) + " arguments (" + names +
                         "), got " + std::to_string(args.size()));
  }
  BoundArgs out;
  out.runtimeDims.assign(kernel.runtimeDims.size(), -1);
  out.tensors.resize(kernel.params.size());
  out.intScalars.assign(kernel.params.size(), 0);
  out.floatScalars.assign(kernel.params.size(), 0.0);
  std::vector<std::pair<int, int>> dimSource(kernel.runtimeDims.size(), {-1, -1});

  for (size_t i = 0; i < kernel.params.size(); ++i) {
    const kir::Param& p = kernel.params[i];
    const int index = static_cast<int>(i);
    if (p.kind == kir::ParamKind::Tensor) {
      RETURN_IF_ERROR(bindTensor(kernel, index, args[i], out, dimSource));
    } else {
      RETURN_IF_ERROR(bindScalar(p, index, args[i], out));
    }
  }
  for (size_t d = 0; d < kernel.runtimeDims.size(); ++d) {
    if (dimSource[d].first < 0) {
      return Status::error("kernel '" + kernel.name + "': runtime dim '" +
                           kernel.runtimeDims[d] + "' is the size of no tensor argument");
    }
  }
  return out;
}

}  // namespace mxfp6::interp
