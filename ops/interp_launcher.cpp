#include "ops/interp_launcher.h"

#include "compiler/interp/interpreter.h"

namespace mxfp6::ops {
namespace {

kir::Dtype kirDtype(rt::Dtype d) {
  switch (d) {
    case rt::Dtype::BF16: return kir::Dtype::BF16;
    case rt::Dtype::F16: return kir::Dtype::F16;
    case rt::Dtype::F32: return kir::Dtype::F32;
    case rt::Dtype::I32: return kir::Dtype::I32;
    case rt::Dtype::I64: return kir::Dtype::I64;
    case rt::Dtype::U8: return kir::Dtype::U8;
  }
  return kir::Dtype::F32;
}

}  // namespace

Expected<const kir::Kernel*> InterpLauncher::kernel(const std::string& file, const std::string& name,
                                                    const std::string& config) {
  std::string key = name + "[" + config + "]";
  if (auto it = kernels_.find(key); it != kernels_.end()) return it->second.get();
  frontend::DiagnosticEngine diags;
  auto& module = modules_[file];
  if (!module) {
    auto parsed = frontend::parseFile(dslDir_ + "/" + file, diags);
    if (!parsed || diags.hasErrors()) return Status::error(diags.render());
    module = std::make_unique<frontend::Module>(std::move(*parsed));
  }
  std::string error;
  auto values = frontend::parseConfigString(config, error);
  if (!values) return Status::error(name + ": config '" + config + "': " + error);
  auto k = frontend::instantiate(*module, name, *values, diags);
  if (!k || diags.hasErrors()) return Status::error(diags.render());
  auto& slot = kernels_[key];
  slot = std::make_unique<kir::Kernel>(std::move(*k));
  return slot.get();
}

Status InterpLauncher::launch(const Plan& plan, const Step& step) {
  const OpSpec* op = findOp(plan.op);
  if (!op) return Status::error("unknown op " + plan.op);
  const PlanLaunch& launch = plan.launches.at(step.launch);
  ASSIGN_OR_RETURN(const kir::Kernel* k, kernel(kernelFile(*op, launch.kernel), launch.kernel, launch.config));
  std::vector<interp::Arg> args;
  for (const kir::Param& param : k->params) {
    auto it = step.args.find(param.name);
    if (it == step.args.end()) {
      if (param.kind == kir::ParamKind::Scalar && param.hasDefault) {
        args.emplace_back(std::monostate{});
        continue;
      }
      return Status::error("kernel " + k->name + ": the plan binds no argument '" + param.name + "'");
    }
    if (const auto* t = std::get_if<rt::TensorArg>(&it->second)) {
      interp::TensorArg a;
      a.data = const_cast<void*>(t->data);
      a.dtype = kirDtype(t->dtype);
      int64_t extent = 1;
      for (int i = 0; i < t->ndim; ++i) {
        a.shape.push_back(t->sizes[i]);
        extent += (t->sizes[i] - 1) * t->strides[i];
      }
      a.extentElements = extent;
      args.emplace_back(a);
    } else if (const auto* i = std::get_if<int64_t>(&it->second)) {
      args.emplace_back(*i);
    } else {
      args.emplace_back(std::get<double>(it->second));
    }
  }
  interp::RunOptions options;
  options.threads = threads_;
  Status s = interp::run(*k, args, options);
  if (!s) return Status::error(launch.kernel + " (" + launch.role + "): " + s.message());
  return s;
}

}  // namespace mxfp6::ops
