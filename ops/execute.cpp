#include "ops/execute.h"

namespace mxfp6::ops {

Expected<std::vector<rt::ParamArg>> bindParams(const rt::KernelMetadata& metadata, const Step& step) {
  if (!metadata.signature)
    return Status::error("kernel " + metadata.kernel + ": its metadata has no signature (compiled before launches "
                         "from tensors); recompile it");
  std::vector<rt::ParamArg> out;
  for (const rt::ParamSpec& param : metadata.signature->params) {
    auto it = step.args.find(param.name);
    if (it == step.args.end()) {
      if (!param.isTensor && param.defaultValue) {
        double v = *param.defaultValue;
        out.push_back(param.dtype == rt::Dtype::F32   ? rt::LaunchArg::f32(static_cast<float>(v))
                      : param.dtype == rt::Dtype::I32 ? rt::LaunchArg::i32(static_cast<int32_t>(v))
                                                      : rt::LaunchArg::i64(static_cast<int64_t>(v)));
        continue;
      }
      return Status::error("kernel " + metadata.kernel + ": the plan binds no argument '" + param.name + "'");
    }
    const StepValue& v = it->second;
    if (param.isTensor) {
      const auto* t = std::get_if<rt::TensorArg>(&v);
      if (!t) return Status::error("kernel " + metadata.kernel + ": argument '" + param.name + "' must be a tensor");
      out.emplace_back(*t);
      continue;
    }
    if (std::holds_alternative<rt::TensorArg>(v))
      return Status::error("kernel " + metadata.kernel + ": argument '" + param.name + "' must be a scalar");
    double d = std::holds_alternative<double>(v) ? std::get<double>(v) : static_cast<double>(std::get<int64_t>(v));
    int64_t i = std::holds_alternative<int64_t>(v) ? std::get<int64_t>(v) : static_cast<int64_t>(d);
    switch (param.dtype) {
      case rt::Dtype::F32: out.emplace_back(rt::LaunchArg::f32(static_cast<float>(d))); break;
      case rt::Dtype::I32:
        if (i < INT32_MIN || i > INT32_MAX)
          return Status::error("kernel " + metadata.kernel + ": argument '" + param.name + "' = " + std::to_string(i) +
                               " does not fit i32");
        out.emplace_back(rt::LaunchArg::i32(static_cast<int32_t>(i)));
        break;
      default: out.emplace_back(rt::LaunchArg::i64(i)); break;
    }
  }
  return out;
}

Status RuntimeLauncher::launch(const Plan& plan, const Step& step) {
  if (step.launch >= kernels_.size() || !kernels_[step.launch])
    return Status::error("plan " + plan.id() + ": no loaded kernel for launch " + std::to_string(step.launch));
  const rt::LoadedKernel& kernel = *kernels_[step.launch];
  ASSIGN_OR_RETURN(std::vector<rt::ParamArg> params, bindParams(kernel.metadata(), step));
  Status s = kernel.launchTensors(stream_, params);
  if (!s) return Status::error(plan.launches[step.launch].kernel + " (" + plan.launches[step.launch].role + "): " + s.message());
  return s;
}

}  // namespace mxfp6::ops
