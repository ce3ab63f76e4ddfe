#include "tools/kernel_run/kernel_run.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <thread>

#include "compiler/frontend/frontend.h"
#include "compiler/interp/float_formats.h"
#include "compiler/interp/interpreter.h"
#include "runtime/runtime.h"
#include "tools/kernel_run/npy.h"

namespace mxfp6::cli {
namespace {

constexpr int kOk = 0, kUserError = 1;

/// "a=x.npy,b=2.5" as name -> text; an entry without '=' is an error.
Expected<std::map<std::string, std::string>> splitPairs(const std::string& text) {
  std::map<std::string, std::string> out;
  std::stringstream s(text);
  for (std::string entry; std::getline(s, entry, ',');) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::error("--in entry '" + entry + "' is not NAME=FILE.npy or NAME=VALUE");
    out[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return out;
}

/// A scalar argument's text as the parameter's type; the whole text must be the number.
Expected<interp::Arg> parseScalar(const kir::Param& p, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  if (p.dtype == kir::Dtype::F32) {
    double v = std::strtod(text.c_str(), &end);
    if (!text.empty() && *end == '\0' && errno == 0) return interp::Arg(v);
  } else {
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (!text.empty() && *end == '\0' && errno == 0) return interp::Arg(int64_t(v));
  }
  return Status::error("--in " + p.name + "=" + text + ": scalar '" + p.name + "' is " + kir::dtypeName(p.dtype) +
                       ", '" + text + "' is not a number of that type");
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
      continue;
    }
    ASSIGN_OR_RETURN(interp::Arg value, parseScalar(p, in->second));
    h.args.push_back(value);
  }
  return h;
}

/// Points the tensor arguments at `h`'s own arrays (after a copy or a move).
void repoint(HostTensors& h) {
  for (size_t i = 0; i < h.args.size(); ++i)
    if (auto* t = std::get_if<interp::TensorArg>(&h.args[i])) t->data = h.arrays[i].bytes.data();
}

/// The runtime's spelling of a tensor's element type.
Expected<rt::Dtype> runtimeDtype(kir::Dtype t) {
  for (int i = 0; i <= int(rt::Dtype::U8); ++i)
    if (std::string(rt::dtypeName(rt::Dtype(i))) == kir::dtypeName(t)) return rt::Dtype(i);
  return Status::error(std::string("no launch from tensors of ") + kir::dtypeName(t));
}

/// The code object must be of this kernel at this configuration: its metadata names the kernel
/// and binds every config key to the same value (an object compiled with another --config fails
/// here instead of computing something else; the launch checks every argument against the
/// metadata's parameters).
Status checkObjectMatches(const kir::Kernel& k, const rt::KernelMetadata& metadata) {
  if (metadata.kernel != k.name)
    return Status::error("the code object is of kernel '" + metadata.kernel + "', not '" + k.name + "'");
  for (const auto& [key, value] : metadata.config) {
    int64_t here = k.configValue(key, std::numeric_limits<int64_t>::min());
    if (here != value)
      return Status::error("the code object was compiled with " + key + "=" + std::to_string(value) + ", this run has " +
                           (here == std::numeric_limits<int64_t>::min() ? "no " + key : key + "=" + std::to_string(here)) +
                           " (pass the object's configuration with --config)");
  }
  return Status::ok();
}

/// Runs the kernel's code object on `device`: inputs uploaded, outputs downloaded into `h`.
Status runOnDevice(const kir::Kernel& k, const CodeSource& source, rt::Device& device, HostTensors& h) {
  ASSIGN_OR_RETURN(CodeObject code, source(k));
  ASSIGN_OR_RETURN(rt::KernelMetadata metadata, rt::parseKernelMetadata(code.metadataJson));
  RETURN_IF_ERROR(checkObjectMatches(k, metadata));
  ASSIGN_OR_RETURN(auto loaded,
                   rt::loadKernel(device, std::as_bytes(std::span(code.bytes.data(), code.bytes.size())), metadata));
  ASSIGN_OR_RETURN(interp::BoundArgs bound, interp::bindArguments(k, h.args));
  std::vector<rt::DeviceBuffer> buffers(k.params.size());
  std::vector<rt::ParamArg> params;
  for (size_t i = 0; i < k.params.size(); ++i) {
    const kir::Param& p = k.params[i];
    if (p.kind == kir::ParamKind::Tensor) {
      const NpyArray& a = h.arrays[i];
      ASSIGN_OR_RETURN(buffers[i], device.allocate(std::max<size_t>(a.bytes.size(), 1)));
      RETURN_IF_ERROR(device.copyToDevice(buffers[i].data(), a.bytes.data(), a.bytes.size()));
      ASSIGN_OR_RETURN(rt::Dtype dtype, runtimeDtype(a.dtype));
      params.push_back(rt::TensorArg::contiguous(buffers[i].data(), dtype, a.shape));
    } else if (p.dtype == kir::Dtype::F32) {
      params.push_back(rt::LaunchArg::f32(float(bound.floatScalars[i])));
    } else if (p.dtype == kir::Dtype::I32) {
      params.push_back(rt::LaunchArg::i32(int32_t(bound.intScalars[i])));
    } else {
      params.push_back(rt::LaunchArg::i64(bound.intScalars[i]));
    }
  }
  RETURN_IF_ERROR(loaded->launchTensors(nullptr, params));
  RETURN_IF_ERROR(device.synchronize());
  for (size_t i = 0; i < k.params.size(); ++i)
    if (k.params[i].isOutput)
      RETURN_IF_ERROR(device.copyToHost(h.arrays[i].bytes.data(), buffers[i].data(), h.arrays[i].bytes.size()));
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

/// Per output: "y: bit-exact, max error 0 ulp of bf16, 0 of 12288 elements differ"; for byte
/// outputs (packed codes) only "data: not bit-exact, 30 of 2359296 bytes differ".
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
    if (r.dtype == kir::Dtype::U8) {
      // Bytes of packed codes (MXFP6 blobs): a byte's numeric difference measures nothing, so
      // only how many differ.
      std::printf("%s: %s, %zu of %zu bytes differ (packed: compared bit for bit only)\n", k.params[i].name.c_str(),
                  differ == 0 ? "bit-exact" : "not bit-exact", differ, n);
      continue;
    }
    std::printf("%s: %s, max error %.3g ulp of %s, %zu of %zu elements differ\n", k.params[i].name.c_str(),
                differ == 0 ? "bit-exact" : "not bit-exact", worst, kir::dtypeName(r.dtype), differ, n);
  }
  std::fflush(stdout);
}

}  // namespace

int runKernel(const RunRequest& request) {
  auto fail = [&](const std::string& message) {
    std::cerr << request.tool << ": error: " << message << "\n";
    return kUserError;
  };
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = frontend::parseFile(request.file, diags);
  if (!m || diags.hasErrors()) return std::cerr << diags.render(), kUserError;
  const std::string& name = request.kernel;
  if (!m->findKernel(name)) return fail("no kernel '" + name + "' in " + request.file);
  std::map<std::string, int64_t> config;
  if (!request.config.empty()) {
    std::string error;
    auto parsed = frontend::parseKernelConfig(*m, name, request.config, diags, error);
    if (!parsed) return error.empty() ? (std::cerr << diags.render(), kUserError) : fail("--config: " + error);
    config = *parsed;
  }
  std::optional<kir::Kernel> k = frontend::instantiate(*m, name, config, diags);
  if (!k) return std::cerr << diags.render(), kUserError;

  bool onDevice = request.device || request.compare;
  Expected<std::map<std::string, std::string>> inputs = splitPairs(request.inputs);
  if (!inputs) return fail(inputs.status().message());
  Expected<HostTensors> host = prepare(*k, *inputs);
  if (!host) return fail(host.status().message());
  repoint(*host);
  // Shapes and scalars checked against the kernel before any device or interpreter time.
  if (Expected<interp::BoundArgs> bound = interp::bindArguments(*k, host->args); !bound)
    return fail(diags.annotate(bound.status().message()));
  std::unique_ptr<rt::Device> device;
  if (onDevice) {
    rt::DeviceOptions options;
    options.deviceOrdinal = request.ordinal;
    Expected<std::unique_ptr<rt::Device>> opened = rt::Device::open(options);
    if (!opened) return fail("--device " + std::to_string(request.ordinal) + ": " + opened.status().message());
    device = std::move(*opened);
  }
  HostTensors reference = *host;
  repoint(reference);
  if (!onDevice || request.compare) {
    interp::RunOptions options;
    options.threads = int(std::max(1u, std::thread::hardware_concurrency()));
    Status s = interp::run(*k, reference.args, options);
    if (!s) return fail(diags.annotate(s.message()));
  }
  if (onDevice) {
    Status s = runOnDevice(*k, request.code, *device, *host);
    if (!s) return fail(diags.annotate(s.message()));
  }
  if (request.compare) compare(*k, reference, *host);
  if (!request.outDir.empty()) {
    const HostTensors& result = onDevice ? *host : reference;
    std::filesystem::path dir = request.outDir;
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
