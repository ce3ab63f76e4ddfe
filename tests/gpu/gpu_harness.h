// Shared pieces of the GPU tests: where the DSL sources and the precompiled code objects are,
// one opened device per process (tests skip when none opens), and deterministic random data.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "compiler/frontend/kir.h"
#include "compiler/interp/float_formats.h"
#include "compiler/interp/interpreter.h"
#include "compiler/interp/ranges.h"
#include "runtime/runtime.h"

namespace mxfp6::gputest {

/// The repository root: $MXFP6_SOURCE_ROOT, else the build's source folder, else ".".
std::string sourceRoot();
/// The folder of precompiled code objects: $MXFP6_GPU_KERNELS, else build/gpu_kernels.
std::string gpuKernelsDir();

struct CodeObject {
  std::string path;
  std::string bytes;
  rt::KernelMetadata metadata;
};

/// The benchmark's schedules that are not among the GPU tests' own (bench/CMakeLists.txt):
/// gpuKernelsDir()/bench. The tests check them at shapes of their own, smaller than Flux's where
/// the Flux shapes would take a device call's time.
std::string benchKernelsDir();

/// The op table's candidates for the Flux shape set (`mxfp6c precompile --shapes -o`, built by
/// cmake/Mxfp6Kernels.cmake): gpuKernelsDir()/candidates.
std::string candidatesDir();

/// Every code object in the folders whose metadata names `kernel` (sorted by path). Each is a
/// file with its metadata in `<file>.json`. By default the GPU tests' own objects and the op
/// table's candidates; the benchmark's (benchKernelsDir()) only where a test names them.
std::vector<CodeObject> findCodeObjects(const std::string& kernel,
                                        const std::vector<std::string>& dirs = {gpuKernelsDir(), candidatesDir()});

/// A code object's configuration as "KEY=value,..." (every bound size and tunable, sorted by
/// key): the schedule column of the tests' RESULT lines.
std::string configTag(const rt::KernelMetadata& metadata);

/// The process's device, or nullptr with `whyNot` set (no driver, no device).
rt::Device* device(std::string* whyNot);

/// Parses <file> (a path under the repository root) and instantiates `kernel` at `config`; nullopt with the rendered
/// diagnostics in `error` when either fails.
std::optional<kir::Kernel> instantiateDsl(const std::string& file, const std::string& kernel,
                                          const std::map<std::string, int64_t>& config, std::string& error);

/// The machine's cores: the threads of every host-side reference (the reference, not the GPU,
/// is most of a GPU test's time).
int hostThreads();

/// Options for the fp64 reference runs: the rows on hostThreads() threads.
interp::RunOptions referenceOptions();

/// The launch arguments of `kernel` in its ABI order, filled from arguments bound by the
/// interpreter's bindArguments (device pointers in the tensors, runtime sizes, scalars).
std::vector<rt::LaunchArg> launchArgs(const kir::Kernel& kernel, const interp::BoundArgs& bound);

/// One bf16 output against its fp64 reference: within 1 bf16 ulp of bf16(ref), or else within
/// 0.5*ulp_bf16(ref) + boundExtra (the cancellation/accumulation bound each test states).
struct Bf16Check {
  double maxUlp = 0, maxBoundFraction = 0;
  int64_t beyondOneUlp = 0, beyondBound = 0, nonFinite = 0;
  void add(uint16_t gpuBits, double ref, double boundExtra);
  /// The same, with the bound's extra term computed only for an output beyond 1 ulp (most are
  /// not, and a term per element would dominate a check of tens of millions of them).
  template <typename BoundExtra>
  void addLazily(uint16_t gpuBits, double ref, const BoundExtra& boundExtra) {
    double g = interp::bf16ToDouble(gpuBits);
    if (!std::isfinite(g)) {
      ++nonFinite;
      return;
    }
    double rounded = interp::roundToBf16(ref);
    double ulps = std::fabs(g - rounded) / interp::ulpBf16(rounded);
    maxUlp = std::max(maxUlp, ulps);
    if (ulps <= 1.0) return;
    ++beyondOneUlp;
    double bound = 0.5 * interp::ulpBf16(ref) + boundExtra();
    maxBoundFraction = std::max(maxBoundFraction, std::fabs(g - ref) / bound);
    if (std::fabs(g - ref) > bound) ++beyondBound;
  }
  std::string summary() const;
  /// Fails the current test (gtest) on a non-finite output or one beyond its bound.
  void expectOk(const char* what) const;
  /// Adds another part's counts and maxima (the order of the parts does not matter).
  void merge(const Bf16Check& other);
};

template <typename Part>
void mergeInto(Part& into, const Part& from) {
  into.merge(from);
}
template <typename Part, size_t N>
void mergeInto(std::array<Part, N>& into, const std::array<Part, N>& from) {
  for (size_t i = 0; i < N; ++i) into[i].merge(from[i]);
}

/// Runs check(begin, end, part) over contiguous ranges of [0, n) on every core, each range into
/// its own default-constructed Part, and merges the parts (Part::merge, or each element of a
/// std::array of them). Checks of tens of millions of elements against their fp64 references,
/// once per code object, are otherwise a large share of a GPU test's time. `check` may only
/// write to its part.
template <typename Part, typename Check>
Part checkInParallel(int64_t n, const Check& check) {
  std::vector<Part> parts(hostThreads());
  parts.resize(interp::inRanges(n, int64_t(parts.size()), [&](int64_t part, int64_t begin, int64_t end) {
    check(begin, end, parts[part]);
  }));
  Part total{};
  for (const Part& part : parts) mergeInto(total, part);
  return total;
}

/// Device memory for one launch: uploaded inputs and NaN-poisoned (0xFF bytes) outputs, freed
/// together.
struct DeviceArgs {
  std::vector<rt::DeviceBuffer> buffers;
  Expected<void*> upload(rt::Device& dev, const void* data, size_t bytes);
  Expected<void*> output(rt::Device& dev, size_t bytes);
};

/// Loads `obj`, binds interpreter-style arguments (tensors pointing at device memory), launches
/// over `rows` rows and synchronizes.
Status launch(rt::Device& dev, const CodeObject& obj, const kir::Kernel& kernel, const std::vector<interp::Arg>& args,
              int64_t rows);

template <typename T>
Expected<std::vector<T>> download(rt::Device& dev, const void* ptr, size_t count) {
  std::vector<T> host(count);
  RETURN_IF_ERROR(dev.copyToHost(host.data(), ptr, count * sizeof(T)));
  return host;
}

/// bf16 bits of a float (round to nearest even).
uint16_t toBf16(float x);

/// Normally distributed bf16 values: mean + stddev * N(0, 1), rounded to bf16.
void fillNormalBf16(std::vector<uint16_t>& out, size_t begin, size_t count, float mean, float stddev,
                    std::mt19937_64& rng);

}  // namespace mxfp6::gputest
