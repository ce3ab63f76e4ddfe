#include "tests/gpu/gpu_harness.h"

#include "compiler/frontend/frontend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "compiler/interp/float_formats.h"

namespace mxfp6::gputest {
namespace fs = std::filesystem;

namespace {

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string sourceRoot() {
  std::string root = envOr("MXFP6_SOURCE_ROOT", MXFP6_DEFAULT_SOURCE_ROOT);
  return fs::exists(fs::path(root) / "kernels_dsl") ? root : ".";
}

std::string gpuKernelsDir() {
  std::string dir = envOr("MXFP6_GPU_KERNELS", MXFP6_DEFAULT_GPU_KERNELS);
  return fs::exists(dir) ? dir : "build/gpu_kernels";
}

std::string configTag(const rt::KernelMetadata& metadata) {
  std::string tag;
  for (const auto& [key, value] : metadata.config) tag += (tag.empty() ? "" : ",") + key + "=" + std::to_string(value);
  return tag;
}

std::string benchKernelsDir() { return (fs::path(gpuKernelsDir()) / "bench").string(); }

std::string candidatesDir() { return (fs::path(gpuKernelsDir()) / "candidates").string(); }

std::vector<CodeObject> findCodeObjects(const std::string& kernel, const std::vector<std::string>& dirs) {
  std::vector<CodeObject> found;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() != ".json") continue;
      Expected<rt::KernelMetadata> meta = rt::parseKernelMetadata(readFile(entry.path()));
      if (!meta || meta->kernel != kernel) continue;
      fs::path code = entry.path();
      code.replace_extension();  // "<file>.json" -> "<file>"
      found.push_back({code.string(), readFile(code), *meta});
    }
  }
  std::sort(found.begin(), found.end(), [](const CodeObject& a, const CodeObject& b) { return a.path < b.path; });
  return found;
}

rt::Device* device(std::string* whyNot) {
  static std::unique_ptr<rt::Device> dev;
  static std::string error;
  static bool tried = false;
  if (!tried) {
    tried = true;
    Expected<std::unique_ptr<rt::Device>> opened = rt::Device::open();
    if (opened) dev = opened.take();
    else error = opened.status().message();
  }
  if (!dev && whyNot) *whyNot = error;
  return dev.get();
}

int hostThreads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

interp::RunOptions referenceOptions() {
  interp::RunOptions opts;
  opts.threads = hostThreads();
  return opts;
}

std::optional<kir::Kernel> instantiateDsl(const std::string& file, const std::string& kernel,
                                          const std::map<std::string, int64_t>& config, std::string& error) {
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = frontend::parseFile(sourceRoot() + "/" + file, diags);
  std::optional<kir::Kernel> k;
  if (m) k = frontend::instantiate(*m, kernel, config, diags);
  if (!k) error = diags.render();
  return k;
}

std::vector<rt::LaunchArg> launchArgs(const kir::Kernel& kernel, const interp::BoundArgs& bound) {
  std::vector<rt::LaunchArg> launch;
  for (const kir::AbiArg& a : kernel.abi()) {
    switch (a.kind) {
      case kir::AbiKind::Pointer: launch.push_back(rt::LaunchArg::pointer(bound.tensors[a.param].data)); break;
      case kir::AbiKind::I32: launch.push_back(rt::LaunchArg::i32(int32_t(bound.intScalars[a.param]))); break;
      case kir::AbiKind::I64:
        launch.push_back(rt::LaunchArg::i64(a.param >= 0 ? bound.intScalars[a.param] : bound.runtimeDims[a.runtimeDim]));
        break;
      case kir::AbiKind::F32: launch.push_back(rt::LaunchArg::f32(float(bound.floatScalars[a.param]))); break;
    }
  }
  return launch;
}

void Bf16Check::add(uint16_t gpuBits, double ref, double boundExtra) {
  addLazily(gpuBits, ref, [boundExtra] { return boundExtra; });
}

std::string Bf16Check::summary() const {
  char buf[200];
  std::snprintf(buf, sizeof buf, "max_ulp=%.3g beyond_1ulp=%lld (max %.2f of bound, beyond=%lld) nonfinite=%lld", maxUlp,
                (long long)beyondOneUlp, maxBoundFraction, (long long)beyondBound, (long long)nonFinite);
  return buf;
}

void Bf16Check::merge(const Bf16Check& other) {
  maxUlp = std::max(maxUlp, other.maxUlp);
  maxBoundFraction = std::max(maxBoundFraction, other.maxBoundFraction);
  beyondOneUlp += other.beyondOneUlp;
  beyondBound += other.beyondBound;
  nonFinite += other.nonFinite;
}

void Bf16Check::expectOk(const char* what) const {
  EXPECT_EQ(nonFinite, 0) << what;
  EXPECT_EQ(beyondBound, 0) << what;
}

Expected<void*> DeviceArgs::upload(rt::Device& dev, const void* data, size_t bytes) {
  ASSIGN_OR_RETURN(rt::DeviceBuffer b, dev.allocate(bytes));
  RETURN_IF_ERROR(dev.copyToDevice(b.data(), data, bytes));
  buffers.push_back(std::move(b));
  return buffers.back().data();
}

Expected<void*> DeviceArgs::output(rt::Device& dev, size_t bytes) {
  ASSIGN_OR_RETURN(rt::DeviceBuffer b, dev.allocate(bytes));
  RETURN_IF_ERROR(dev.memset(b.data(), 0xFF, bytes));
  buffers.push_back(std::move(b));
  return buffers.back().data();
}

Status launch(rt::Device& dev, const CodeObject& obj, const kir::Kernel& kernel, const std::vector<interp::Arg>& args,
              int64_t rows) {
  ASSIGN_OR_RETURN(auto loaded, rt::loadKernel(dev, std::as_bytes(std::span(obj.bytes.data(), obj.bytes.size())),
                                               obj.metadata));
  ASSIGN_OR_RETURN(interp::BoundArgs bound, interp::bindArguments(kernel, args));
  RETURN_IF_ERROR(loaded->launchRows(rows, nullptr, launchArgs(kernel, bound)));
  return dev.synchronize();
}

uint16_t toBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return uint16_t((bits + rounding) >> 16);
}

void fillNormalBf16(std::vector<uint16_t>& out, size_t begin, size_t count, float mean, float stddev,
                    std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < count; ++i) out[begin + i] = toBf16(mean + stddev * normal(rng));
}

}  // namespace mxfp6::gputest
