#include "tools/mxfp6c/run.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "compiler/codegen/codegen.h"
#include "compiler/frontend/frontend.h"
#include "compiler/interp/float_formats.h"
#include "compiler/interp/interpreter.h"
#include "runtime/runtime.h"
#include "tools/mxfp6c/npy.h"

namespace mxfp6::cli {
namespace {

constexpr int kOk = 0, kUserError = 1, kUsage = 2;

int fail(const std::string& message) {
  std::cerr << "mxfp6c: error: " << message << "\n";
  return kUserError;
}

/// "a=x.npy,b=2.5" as name -> text.
std::map<std::string, std::string> splitPairs(const std::string& text) {
  std::map<std::string, std::string> out;
  std::stringstream s(text);
  for (std::string entry; std::getline(s, entry, ',');) {
    size_t eq = entry.find('=');
    if (eq != std::string::npos) out[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return out;
}

/// The host arrays of one run: inputs read from files, outputs sized from the inputs' shapes.
struct HostTensors {
  std::vector<NpyArray> arrays;  // per param (empty for scalars)
  std::vector<interp::Arg> args;
};

Expected<HostTensors> prepare(const kir::Kernel& k, const std::map<std::string, std::string>& inputs) {
  HostTensors h;
  h.arrays.resize(k.params.size());
  std::vector<int64_t> runtime(k.runtimeDims.size(), -1);
  for (const auto& [name, _] : inputs) {
    bool known = false;
    for (const kir::Param& p : k.params) known |= p.name == name && !p.isOutput;
    if (!known) return Status::error("--in names '" + name + "', which is no input of kernel '" + k.name + "'");
  }
  for (size_t i = 0; i < k.params.size(); ++i) {
    const kir::Param& p = k.params[i];
    if (p.kind != kir::ParamKind::Tensor || p.isOutput) continue;
    auto in = inputs.find(p.name);
    if (in == inputs.end()) return Status::error("input tensor '" + p.name + "' has no --in " + p.name + "=FILE.npy");
    ASSIGN_OR_RETURN(h.arrays[i], readNpy(in->second, p.dtype));
    const std::vector<int64_t>& shape = h.arrays[i].shape;
    for (size_t d = 0; d < p.dims.size() && d < shape.size(); ++d)
      if (p.dims[d].runtimeDim >= 0 && runtime[p.dims[d].runtimeDim] < 0) runtime[p.dims[d].runtimeDim] = shape[d];
  }
  for (size_t i = 0; i < k.params.size(); ++i) {
    const kir::Param& p = k.params[i];
    if (p.kind != kir::ParamKind::Tensor || !p.isOutput) continue;
    NpyArray& a = h.arrays[i];
    a.dtype = p.dtype;
    int64_t count = 1;
    for (const kir::Dim& d : p.dims) {
      int64_t n = d.constant >= 0 ? d.constant : runtime[d.runtimeDim];
      if (n < 0) return Status::error("size '" + d.name + "' of output '" + p.name + "' is no input's size");
      a.shape.push_back(n);
      count *= n;
    }
    a.bytes.assign(size_t(count) * kir::dtypeBytes(p.dtype), 0);
  }
  for (size_t i = 0; i < k.params.size(); ++i) {
    const kir::Param& p = k.params[i];
    if (p.kind == kir::ParamKind::Tensor) {
      NpyArray& a = h.arrays[i];
      h.args.push_back(interp::TensorArg{a.bytes.data(), a.dtype, a.shape,
                                         int64_t(a.bytes.size() / kir::dtypeBytes(a.dtype))});
      continue;
    }
    auto in = inputs.find(p.name);
    if (in == inputs.end()) {
      h.args.push_back(std::monostate{});
    } else if (p.dtype == kir::Dtype::F32) {
      h.args.push_back(std::strtod(in->second.c_str(), nullptr));
    } else {
      h.args.push_back(int64_t(std::strtoll(in->second.c_str(), nullptr, 10)));
    }
  }
  return h;
}

/// Points the tensor arguments at `h`'s own arrays (after a copy or a move).
void repoint(HostTensors& h) {
  for (size_t i = 0; i < h.args.size(); ++i)
    if (auto* t = std::get_if<interp::TensorArg>(&h.args[i])) t->data = h.arrays[i].bytes.data();
}

/// The rows a launch covers: the product of the row variables' extents.
int64_t rowCount(const kir::Kernel& k, const interp::BoundArgs& bound) {
  int64_t rows = 1;
  for (size_t i = 0; i < k.rowDims.size(); ++i)
    rows *= k.rowDims[i] >= 0 ? bound.runtimeDims[k.rowDims[i]] : k.rowConstExtents[i];
  return rows;
}

/// Runs the compiled kernel on the device: inputs uploaded, outputs downloaded into `h`.
Status runOnDevice(const kir::Kernel& k, const std::string& targetName, int ordinal, HostTensors& h) {
  std::optional<codegen::TargetInfo> target = codegen::findTarget(targetName);
  if (!target) return Status::error("unknown target '" + targetName + "'");
  // Open the device first: without one there is nothing to compile for.
  rt::DeviceOptions options;
  options.deviceOrdinal = ordinal;
  Expected<std::unique_ptr<rt::Device>> dev = rt::Device::open(options);
  if (!dev) return Status::error("--device " + std::to_string(ordinal) + ": no device: " + dev.status().message());
  codegen::Emit emit = target->backend == codegen::Backend::NVVM ? codegen::Emit::Cubin : codegen::Emit::Hsaco;
  Expected<codegen::CompiledKernel> compiled = codegen::compileKernel(k, *target, emit);
  if (!compiled && emit == codegen::Emit::Cubin) compiled = codegen::compileKernel(k, *target, codegen::Emit::Ptx);
  if (!compiled) return compiled.status();
  ASSIGN_OR_RETURN(rt::KernelMetadata metadata, rt::parseKernelMetadata(compiled->metadataJson));
  ASSIGN_OR_RETURN(auto loaded, rt::loadKernel(**dev, std::as_bytes(std::span(compiled->bytes.data(),
                                                                                compiled->bytes.size())),
                                               metadata));
  std::vector<rt::DeviceBuffer> buffers(k.params.size());
  std::vector<interp::Arg> args = h.args;
  for (size_t i = 0; i < k.params.size(); ++i) {
    if (k.params[i].kind != kir::ParamKind::Tensor) continue;
    const NpyArray& a = h.arrays[i];
    ASSIGN_OR_RETURN(buffers[i], (*dev)->allocate(std::max<size_t>(a.bytes.size(), 1)));
    RETURN_IF_ERROR((*dev)->copyToDevice(buffers[i].data(), a.bytes.data(), a.bytes.size()));
    std::get<interp::TensorArg>(args[i]).data = buffers[i].data();
  }
  ASSIGN_OR_RETURN(interp::BoundArgs bound, interp::bindArguments(k, args));
  std::vector<rt::LaunchArg> launch;
  for (const kir::AbiArg& a : k.abi()) {
    switch (a.kind) {
      case kir::AbiKind::Pointer: launch.push_back(rt::LaunchArg::pointer(bound.tensors[a.param].data)); break;
      case kir::AbiKind::I32: launch.push_back(rt::LaunchArg::i32(int32_t(bound.intScalars[a.param]))); break;
      case kir::AbiKind::I64:
        launch.push_back(rt::LaunchArg::i64(a.param >= 0 ? bound.intScalars[a.param] : bound.runtimeDims[a.runtimeDim]));
        break;
      case kir::AbiKind::F32: launch.push_back(rt::LaunchArg::f32(float(bound.floatScalars[a.param]))); break;
    }
  }
  RETURN_IF_ERROR(loaded->launchRows(rowCount(k, bound), nullptr, launch));
  RETURN_IF_ERROR((*dev)->synchronize());
  for (size_t i = 0; i < k.params.size(); ++i)
    if (k.params[i].isOutput)
      RETURN_IF_ERROR((*dev)->copyToHost(h.arrays[i].bytes.data(), buffers[i].data(), h.arrays[i].bytes.size()));
  return Status::ok();
}

/// An element as a double, and the distance in units of the output dtype's last place.
double valueAt(const NpyArray& a, size_t i) {
  switch (a.dtype) {
    case kir::Dtype::BF16: { uint16_t b; std::memcpy(&b, &a.bytes[2 * i], 2); return interp::bf16ToDouble(b); }
    case kir::Dtype::F16: { uint16_t b; std::memcpy(&b, &a.bytes[2 * i], 2); return interp::f16ToDouble(b); }
    case kir::Dtype::F32: { float f; std::memcpy(&f, &a.bytes[4 * i], 4); return f; }
    case kir::Dtype::I32: { int32_t v; std::memcpy(&v, &a.bytes[4 * i], 4); return v; }
    case kir::Dtype::U8: return a.bytes[i];
    default: return 0;
  }
}
double ulpOf(kir::Dtype t, double ref) {
  int mantissa = t == kir::Dtype::BF16 ? 8 : t == kir::Dtype::F16 ? 11 : t == kir::Dtype::F32 ? 24 : 0;
  if (mantissa == 0) return 1;
  int minExp = t == kir::Dtype::BF16 || t == kir::Dtype::F32 ? -126 : -14;
  int e = 0;
  std::frexp(std::fabs(ref), &e);
  return std::ldexp(1.0, std::max(e - 1, minExp) - (mantissa - 1));
}

void compare(const kir::Kernel& k, const HostTensors& reference, const HostTensors& device) {
  for (size_t i = 0; i < k.params.size(); ++i) {
    if (!k.params[i].isOutput) continue;
    const NpyArray& r = reference.arrays[i];
    const NpyArray& d = device.arrays[i];
    size_t n = r.bytes.size() / kir::dtypeBytes(r.dtype), differ = 0;
    double worst = 0;
    for (size_t j = 0; j < n; ++j) {
      size_t w = kir::dtypeBytes(r.dtype);
      if (std::memcmp(&r.bytes[j * w], &d.bytes[j * w], w) == 0) continue;
      ++differ;
      double a = valueAt(r, j), b = valueAt(d, j);
      double e = std::isnan(a) || std::isnan(b) ? INFINITY : std::fabs(a - b) / ulpOf(r.dtype, a);
      worst = std::max(worst, e);
    }
    std::printf("%s: %s, max error %.3g ulp of %s, %zu of %zu elements differ\n", k.params[i].name.c_str(),
                differ == 0 ? "bit-exact" : "not bit-exact", worst, kir::dtypeName(r.dtype), differ, n);
  }
}

}  // namespace

int runCommand(const std::vector<std::string>& positional, const std::map<std::string, std::string>& flags) {
  if (positional.size() != 1 || !flags.count("--kernel") || !flags.count("--in") ||
      (!flags.count("--out") && !flags.count("--compare")))
    return kUsage;
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = frontend::parseFile(positional[0], diags);
  if (!m || diags.hasErrors()) return std::cerr << diags.render(), kUserError;
  const std::string& name = flags.at("--kernel");
  if (!m->findKernel(name)) return fail("no kernel '" + name + "' in " + positional[0]);
  std::map<std::string, int64_t> config;
  if (flags.count("--config")) {
    std::string error;
    auto parsed = frontend::parseKernelConfig(*m, name, flags.at("--config"), diags, error);
    if (!parsed) return error.empty() ? (std::cerr << diags.render(), kUserError) : fail("--config: " + error);
    config = *parsed;
  }
  std::optional<kir::Kernel> k = frontend::instantiate(*m, name, config, diags);
  if (!k) return std::cerr << diags.render(), kUserError;

  bool onDevice = flags.count("--device") || flags.count("--compare");
  if (onDevice && !flags.count("--target")) return fail("--device and --compare need --target sm_90|gfx942|gfx950");
  Expected<HostTensors> host = prepare(*k, splitPairs(flags.at("--in")));
  if (!host) return fail(host.status().message());
  repoint(*host);
  HostTensors reference = *host;
  repoint(reference);
  if (!onDevice || flags.count("--compare")) {
    interp::RunOptions options;
    options.threads = int(std::max(1u, std::thread::hardware_concurrency()));
    Status s = interp::run(*k, reference.args, options);
    if (!s) return fail(diags.annotate(s.message()));
  }
  HostTensors& result = onDevice ? *host : reference;
  if (onDevice) {
    int ordinal = flags.count("--device") ? std::atoi(flags.at("--device").c_str()) : 0;
    Status s = runOnDevice(*k, flags.at("--target"), ordinal, *host);
    if (!s) return fail(diags.annotate(s.message()));
  }
  if (flags.count("--compare")) compare(*k, reference, *host);
  if (flags.count("--out")) {
    std::filesystem::path dir = flags.at("--out");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    for (size_t i = 0; i < k->params.size(); ++i) {
      if (!k->params[i].isOutput) continue;
      Status s = writeNpy((dir / (k->params[i].name + ".npy")).string(), result.arrays[i]);
      if (!s) return fail(s.message());
    }
  }
  return kOk;
}

}  // namespace mxfp6::cli
