#include "autotune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "ops/compose.h"
#include "ops/execute.h"
#include "ops/interp_launcher.h"
#include "ops/op_args.h"

namespace mxfp6::autotune {
namespace {

/// The launch-metadata schema precompile writes (tools/mxfp6c/precompile_db.cpp); objects with
/// another are stale and never loaded as current.
constexpr int kMetadataSchema = 1;

uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

double load(const std::byte* base, rt::Dtype d, int64_t i) {
  switch (d) {
    case rt::Dtype::BF16: {
      uint16_t b;
      std::memcpy(&b, base + 2 * i, 2);
      uint32_t u = uint32_t(b) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case rt::Dtype::F32: {
      float f;
      std::memcpy(&f, base + 4 * i, 4);
      return f;
    }
    case rt::Dtype::U8: return double(uint8_t(base[i]));
    default: return 0;
  }
}

double ulpBf16(double v) {
  int e;
  std::frexp(std::max(std::fabs(v), 1e-38), &e);
  return std::ldexp(1.0, e - 8);
}

/// Calls f(offset) for the element offset of every element of a declared tensor's view (the
/// whole storage when it has none), without materializing them: outputs reach 10^8 elements.
template <typename F>
void forEachOffset(const ops::TensorDecl& t, F&& f) {
  if (t.viewSizes.empty()) {
    for (int64_t i = 0, n = t.elements(); i < n; ++i) f(i);
    return;
  }
  // The innermost dimension is a run of unit stride in every view the ops declare.
  size_t dims = t.viewSizes.size();
  int64_t inner = t.viewSizes.back(), innerStride = t.viewStrides.back();
  std::vector<int64_t> idx(dims - 1, 0);
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < dims; ++d) outer *= t.viewSizes[d];
  for (int64_t k = 0; k < outer; ++k) {
    int64_t base = t.viewOffset;
    for (size_t d = 0; d + 1 < dims; ++d) base += idx[d] * t.viewStrides[d];
    for (int64_t i = 0; i < inner; ++i) f(base + i * innerStride);
    for (size_t d = dims - 1; d-- > 0;) {
      if (++idx[d] < t.viewSizes[d]) break;
      idx[d] = 0;
    }
  }
}

int64_t viewElements(const ops::TensorDecl& t) {
  if (t.viewSizes.empty()) return t.elements();
  int64_t n = 1;
  for (int64_t s : t.viewSizes) n *= s;
  return n;
}

/// An op call's tensors in host memory: inputs random (fixed seed), outputs poisoned (0xFF:
/// NaN in bf16 and f32), so an output a plan never writes fails its comparison.
struct HostCall {
  ops::OpArgs args;
  std::vector<std::vector<std::byte>> data;

  HostCall(const ops::Problem& problem, uint64_t seed) : args(ops::declareArgs(problem)) {
    for (const ops::TensorDecl& t : args.tensors) {
      data.emplace_back(size_t(t.elements()) * rt::dtypeBytes(t.dtype), std::byte{0xFF});
      if (t.output) continue;
      std::byte* p = data.back().data();
      for (int64_t i = 0; i < t.elements(); ++i) {
        double u = double(splitmix(seed) >> 11) * 0x1.0p-53;
        float v = float(t.lo + (t.hi - t.lo) * u);
        if (t.dtype == rt::Dtype::BF16) {
          uint16_t b = toBf16(v);
          std::memcpy(p + 2 * i, &b, 2);
        } else {
          std::memcpy(p + 4 * i, &v, 4);
        }
      }
    }
  }
};

ops::OpCall callOn(const ops::OpArgs& args, const std::vector<void*>& bases) {
  ops::OpCall call;
  call.scalars = args.scalars;
  for (size_t i = 0; i < args.tensors.size(); ++i) {
    const ops::TensorDecl& t = args.tensors[i];
    if (t.viewSizes.empty()) {
      call.tensors[t.name] = rt::TensorArg::contiguous(bases[i], t.dtype, t.storage);
    } else {
      auto* first = static_cast<std::byte*>(bases[i]) + t.viewOffset * rt::dtypeBytes(t.dtype);
      call.tensors[t.name] = rt::TensorArg::view(first, t.dtype, t.viewSizes, t.viewStrides);
    }
  }
  return call;
}

/// Compares every output of `out` with `ref` by its declared rule; the first failure, named.
Status compareOutputs(const ops::OpArgs& args, const std::vector<std::vector<std::byte>>& ref,
                      const std::vector<std::vector<std::byte>>& out) {
  for (size_t i = 0; i < args.tensors.size(); ++i) {
    const ops::TensorDecl& t = args.tensors[i];
    if (!t.output) continue;
    const std::byte *r = ref[i].data(), *o = out[i].data();
    if (ref[i] == out[i]) continue;  // identical storage: nothing to bound
    if (t.compare == ops::Compare::Exact || t.compare == ops::Compare::BlobsOfComputed) {
      int64_t bytes = rt::dtypeBytes(t.dtype), differing = 0, first = -1;
      forEachOffset(t, [&](int64_t off) {
        if (std::memcmp(r + off * bytes, o + off * bytes, bytes) != 0) {
          if (first < 0) first = off;
          ++differing;
        }
      });
      int64_t allowed = t.compare == ops::Compare::Exact ? 0 : viewElements(t) / 1000;
      if (differing > allowed)
        return Status::error(t.name + ": " + std::to_string(differing) + " of " + std::to_string(viewElements(t)) +
                             " elements differ (first at " + std::to_string(first) + ": " +
                             std::to_string(load(o, t.dtype, first)) + " vs " + std::to_string(load(r, t.dtype, first)) +
                             "), " + (allowed ? "at most " + std::to_string(allowed) + " may" : "none may"));
      continue;
    }
    double scale = 0;
    forEachOffset(t, [&](int64_t off) { scale = std::max(scale, std::fabs(load(r, t.dtype, off))); });
    std::string failure;
    forEachOffset(t, [&](int64_t off) {
      if (!failure.empty()) return;
      double a = load(o, t.dtype, off), b = load(r, t.dtype, off);
      double bound = t.compare == ops::Compare::Bf16 ? ulpBf16(b) + std::ldexp(scale, -16)
                                                     : std::ldexp(std::fabs(b), -18) + std::ldexp(scale, -20);
      if (!(std::fabs(a - b) <= bound))  // NaN (an unwritten, poisoned element) fails too
        failure = t.name + ": element " + std::to_string(off) + " is " + std::to_string(a) + ", the reference " +
                  std::to_string(b) + " (bound " + std::to_string(bound) + ")";
    });
    if (!failure.empty()) return Status::error(failure);
  }
  return Status::ok();
}

/// The fewest tokens (doubling from the op's minimum) at which the plan applies: the gate's
/// small shape, where the interpreter is the oracle.
ops::Problem gateProblem(const ops::Plan& plan, const ops::Problem& key) {
  ops::Problem g = key;
  int64_t start = key.op->perSample ? 2 * key.tokensPerSample : std::max<int64_t>(32, key.op->tokenMultiple);
  for (int64_t t = start; t < key.tokens; t *= 2) {
    g.tokens = t;
    if (ops::validateProblem(g) && ops::planApplies(plan, g)) return g;
  }
  return key;
}

}  // namespace

struct Tuner::Impl {
  rt::Device& device;
  KernelDb& db;
  TuneOptions options;
  std::map<std::string, std::unique_ptr<rt::LoadedKernel>> kernels;  // by object sha256
  ops::InterpLauncher interp;

  Impl(rt::Device& d, KernelDb& k, TuneOptions o)
      : device(d), db(k), options(std::move(o)), interp(options.dslDir, int(std::max(1u, std::thread::hardware_concurrency()))) {}

  Expected<const rt::LoadedKernel*> kernel(const std::string& sha, const std::string& toolchain) {
    if (auto it = kernels.find(sha); it != kernels.end()) return it->second.get();
    ASSIGN_OR_RETURN(CodeObject object, db.object(sha));
    nlohmann::json meta = nlohmann::json::parse(object.metadata, nullptr, false);
    if (meta.is_discarded() || meta.value("metadata_schema", 0) != kMetadataSchema ||
        meta.value("toolchain", std::string()) != ops::compilerOfToolchain(toolchain))
      return Status::error("code object " + sha + " (" + object.kernel + ") is stale: its metadata is not schema " +
                           std::to_string(kMetadataSchema) + " of compiler " + ops::compilerOfToolchain(toolchain) +
                           "; precompile again");
    ASSIGN_OR_RETURN(rt::KernelMetadata metadata, rt::parseKernelMetadata(object.metadata));
    std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(object.bytes.data()), object.bytes.size());
    ASSIGN_OR_RETURN(auto loaded, rt::loadKernel(device, bytes, std::move(metadata)));
    return (kernels[sha] = std::move(loaded)).get();
  }

  /// A plan composed on device tensors, ready to launch repeatedly.
  struct Prepared {
    ops::Plan plan;
    std::vector<const rt::LoadedKernel*> kernels;
    std::vector<rt::DeviceBuffer> scratch;
    std::vector<ops::Step> steps;
    Status run() {
      ops::RuntimeLauncher launcher(kernels, nullptr);
      return ops::runSteps(plan, steps, launcher);
    }
  };

  Expected<std::unique_ptr<Prepared>> prepare(const ops::Plan& plan, const ops::Problem& problem,
                                              const ops::OpCall& call, const std::string& toolchain) {
    auto p = std::make_unique<Prepared>();
    p->plan = plan;
    for (const ops::PlanLaunch& l : plan.launches) {
      ASSIGN_OR_RETURN(const rt::LoadedKernel* k, kernel(l.object, toolchain));
      p->kernels.push_back(k);
    }
    Prepared* raw = p.get();
    ops::ScratchAllocator scratch = [this, raw](size_t bytes) -> Expected<void*> {
      ASSIGN_OR_RETURN(rt::DeviceBuffer b, device.allocate(bytes));
      raw->scratch.push_back(std::move(b));
      return raw->scratch.back().data();
    };
    ASSIGN_OR_RETURN(p->steps, ops::compose(plan, problem, call, scratch));
    return p;
  }

  /// The call's tensors on the device, inputs copied from `host`, outputs poisoned.
  Expected<std::vector<rt::DeviceBuffer>> upload(const HostCall& host) {
    std::vector<rt::DeviceBuffer> bufs;
    for (size_t i = 0; i < host.data.size(); ++i) {
      ASSIGN_OR_RETURN(rt::DeviceBuffer b, device.allocate(host.data[i].size()));
      RETURN_IF_ERROR(device.copyToDevice(b.data(), host.data[i].data(), host.data[i].size()));
      bufs.push_back(std::move(b));
    }
    return bufs;
  }
  Status poison(const HostCall& host, std::vector<rt::DeviceBuffer>& bufs) {
    for (size_t i = 0; i < bufs.size(); ++i)
      if (host.args.tensors[i].output) RETURN_IF_ERROR(device.memset(bufs[i].data(), 0xFF, bufs[i].size()));
    return Status::ok();
  }
  Expected<std::vector<std::vector<std::byte>>> download(const HostCall& host, std::vector<rt::DeviceBuffer>& bufs) {
    RETURN_IF_ERROR(device.synchronize());
    std::vector<std::vector<std::byte>> out(bufs.size());
    for (size_t i = 0; i < bufs.size(); ++i) {
      if (!host.args.tensors[i].output) continue;
      out[i].resize(bufs[i].size());
      RETURN_IF_ERROR(device.copyToHost(out[i].data(), bufs[i].data(), bufs[i].size()));
    }
    return out;
  }
  static std::vector<void*> bases(std::vector<rt::DeviceBuffer>& bufs) {
    std::vector<void*> out;
    for (auto& b : bufs) out.push_back(b.data());
    return out;
  }

  /// Gate step 1: the plan at its small shape on the GPU against the interpreter's run of the
  /// op there (cached per shape: every plan of an op computes the same math).
  std::map<int64_t, std::pair<std::unique_ptr<HostCall>, Status>> references;

  Status smallShapeGate(const ops::Plan& plan, const ops::Problem& key, const std::string& toolchain) {
    ops::Problem g = gateProblem(plan, key);
    auto& [ref, refStatus] = references[g.tokens];
    if (!ref) {
      ref = std::make_unique<HostCall>(g, 0x5EED + uint64_t(g.tokens));
      std::vector<void*> hb;
      for (auto& d : ref->data) hb.push_back(d.data());
      ops::OpCall call = callOn(ref->args, hb);
      std::vector<std::vector<std::byte>> scratch;
      ops::ScratchAllocator alloc = [&scratch](size_t bytes) -> Expected<void*> {
        scratch.emplace_back(bytes + 256);
        return static_cast<void*>(scratch.back().data());
      };
      auto steps = ops::compose(plan, g, call, alloc);
      refStatus = steps ? ops::runSteps(plan, *steps, interp) : steps.status();
      if (!refStatus) refStatus = Status::error("the interpreter's reference at T=" + std::to_string(g.tokens) + ": " +
                                                refStatus.message());
    }
    if (!refStatus) return refStatus;
    HostCall input(g, 0x5EED + uint64_t(g.tokens));  // the same inputs as the reference's
    ASSIGN_OR_RETURN(auto bufs, upload(input));
    ASSIGN_OR_RETURN(auto prepared, prepare(plan, g, callOn(input.args, bases(bufs)), toolchain));
    RETURN_IF_ERROR(prepared->run());
    ASSIGN_OR_RETURN(auto out, download(input, bufs));
    Status s = compareOutputs(input.args, ref->data, out);
    if (!s) return Status::error("at T=" + std::to_string(g.tokens) + " against the interpreter: " + s.message());
    return s;
  }
};

Tuner::Tuner(rt::Device& device, KernelDb& db, TuneOptions options)
    : impl_(std::make_unique<Impl>(device, db, std::move(options))) {}
Tuner::~Tuner() = default;

Expected<KeyOutcome> Tuner::tune(const ops::Problem& problem, const std::string& target, const std::string& toolchain) {
  Impl& m = *impl_;
  auto start = std::chrono::steady_clock::now();
  KeyOutcome outcome;
  outcome.key = {{problem.op->name, problem.variantText(), target, problem.sizes(), toolchain}, problem.rows()};
  ASSIGN_OR_RETURN(std::vector<Candidate> candidates, m.db.candidates(outcome.key.family));
  if (candidates.empty())
    return Status::error(formatKey(outcome.key) + ": nothing precompiled for this family and toolchain");
  outcome.candidates = int(candidates.size());
  m.references.clear();

  // The key's inputs, on the device once; each candidate writes the same output buffers.
  HostCall host(problem, 0xF1A5 + uint64_t(problem.tokens));
  ASSIGN_OR_RETURN(auto bufs, m.upload(host));
  ops::OpCall call = callOn(host.args, Impl::bases(bufs));

  std::vector<PlanTiming> timings;
  std::vector<std::unique_ptr<Impl::Prepared>> passing;
  std::vector<const Candidate*> passingCandidates;
  std::vector<std::vector<std::byte>> reference;  // the first passing candidate's outputs
  std::string referenceId;
  for (const Candidate& c : candidates) {
    ASSIGN_OR_RETURN(ops::Plan plan, ops::parsePlan(c.planJson));
    if (!ops::planApplies(plan, problem)) continue;
    ++outcome.applicable;
    PlanTiming t{c.planId, false, "", {}};
    auto gate = [&]() -> Status {
      RETURN_IF_ERROR(m.smallShapeGate(plan, problem, toolchain));
      ASSIGN_OR_RETURN(auto prepared, m.prepare(plan, problem, call, toolchain));
      std::vector<std::vector<std::byte>> runs[2];
      for (auto& r : runs) {
        RETURN_IF_ERROR(m.poison(host, bufs));
        RETURN_IF_ERROR(prepared->run());
        ASSIGN_OR_RETURN(r, m.download(host, bufs));
      }
      if (runs[0] != runs[1]) return Status::error("two launches at the key's shape differ: not deterministic");
      if (reference.empty()) {
        // The first candidate is checked at the key's shape against the interpreter's bounds
        // only at its small shape; later ones are held to it here.
        reference = std::move(runs[0]);
        referenceId = c.planId;
      } else if (Status s = compareOutputs(host.args, reference, runs[0]); !s) {
        return Status::error("at the key's shape against " + referenceId + ": " + s.message());
      }
      passing.push_back(std::move(prepared));
      return Status::ok();
    };
    Status s = gate();
    t.passedGate = s.isOk();
    t.gateMessage = s.isOk() ? "matched the interpreter at its small shape and the first candidate at the key's"
                             : s.message();
    if (!s) outcome.gateFailures.push_back(c.planId + ": " + s.message());
    else passingCandidates.push_back(&c);
    timings.push_back(std::move(t));
  }
  outcome.passed = int(passing.size());
  if (passing.empty())
    return Status::error(formatKey(outcome.key) + ": no candidate passed its correctness gate (first: " +
                         (outcome.gateFailures.empty() ? "none applies" : outcome.gateFailures.front()) + ")");

  // Timing: rounds of every passing candidate in a rotating order, L2 flushed before each run.
  ASSIGN_OR_RETURN(rt::DeviceBuffer flush, m.device.allocate(m.options.flushBytes));
  size_t n = passing.size();
  std::vector<rt::Event> starts, ends;
  for (size_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(rt::Event a, rt::Event::create(m.device));
    ASSIGN_OR_RETURN(rt::Event b, rt::Event::create(m.device));
    starts.push_back(std::move(a));
    ends.push_back(std::move(b));
  }
  for (int w = 0; w < m.options.warmup; ++w)
    for (auto& p : passing) RETURN_IF_ERROR(p->run());
  std::vector<std::vector<double>> samples(n);
  auto timeRounds = [&](const std::vector<size_t>& who, int rounds) -> Status {
    for (int r = 0; r < rounds; ++r) {
      for (size_t j = 0; j < who.size(); ++j) {
        size_t c = who[(j + size_t(r)) % who.size()];
        RETURN_IF_ERROR(m.device.memset(flush.data(), uint8_t(r), flush.size()));
        RETURN_IF_ERROR(starts[c].record());
        RETURN_IF_ERROR(passing[c]->run());
        RETURN_IF_ERROR(ends[c].record());
      }
      for (size_t c : who) {
        ASSIGN_OR_RETURN(float ms, rt::Event::elapsedMs(starts[c], ends[c]));
        samples[c].push_back(double(ms) * 1000.0);
      }
    }
    return Status::ok();
  };
  // Where the key's tensors and each plan's scratch land in memory moves a plan's time by a few
  // percent, differently for different plans; so the rounds are spread over placements: before
  // each later one, every buffer is allocated anew (while the old ones are still held, so the
  // addresses change) and every plan composed on the new ones. Samples of all placements pool.
  auto relocate = [&]() -> Status {
    ASSIGN_OR_RETURN(auto fresh, m.upload(host));
    ops::OpCall freshCall = callOn(host.args, Impl::bases(fresh));
    std::vector<std::unique_ptr<Impl::Prepared>> moved;
    for (auto& p : passing) {
      ASSIGN_OR_RETURN(auto q, m.prepare(p->plan, problem, freshCall, toolchain));
      moved.push_back(std::move(q));
    }
    passing = std::move(moved);
    bufs = std::move(fresh);
    for (auto& p : passing) RETURN_IF_ERROR(p->run());  // warm the new placement
    return Status::ok();
  };
  int placements = std::max(1, m.options.placements);
  auto timePlaced = [&](const std::vector<size_t>& who, int rounds) -> Status {
    for (int e = 0; e < placements; ++e) {
      if (e > 0) RETURN_IF_ERROR(relocate());
      RETURN_IF_ERROR(timeRounds(who, (rounds + placements - 1) / placements));
    }
    return Status::ok();
  };
  std::vector<size_t> everyone(n);
  for (size_t c = 0; c < n; ++c) everyone[c] = c;
  RETURN_IF_ERROR(timePlaced(everyone, m.options.rounds));
  double best = 0;
  for (size_t c = 0; c < n; ++c) best = c ? std::min(best, median(samples[c])) : median(samples[c]);
  std::vector<size_t> contenders;
  for (size_t c = 0; c < n; ++c)
    if (median(samples[c]) <= best * (1 + 2 * m.options.selection.incumbentBand)) contenders.push_back(c);
  if (contenders.size() > 1) RETURN_IF_ERROR(timePlaced(contenders, m.options.confirmRounds));

  std::vector<Measured> measured;
  for (size_t c = 0; c < n; ++c) {
    const Candidate& cand = *passingCandidates[c];
    measured.push_back({cand.planId, true, samples[c], cand.resourceCost, cand.ordinal});
    for (PlanTiming& t : timings)
      if (t.planId == cand.planId) t.samplesUs = samples[c];
  }
  ASSIGN_OR_RETURN(std::optional<Selection> incumbent, m.db.selection(outcome.key));
  Choice choice = select(measured, incumbent ? std::optional<std::string>(incumbent->winner) : std::nullopt,
                         m.options.selection);
  TuningRun run;
  run.key = outcome.key;
  run.timings = std::move(timings);
  run.selection = {outcome.key, choice.winner, choice.equivalent, choice.rule, utcNow(),
                   m.options.tuner + " on " + m.device.name(), 0};
  RETURN_IF_ERROR(m.db.recordTuning(run));
  outcome.winner = choice.winner;
  outcome.rule = choice.rule;
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

}  // namespace mxfp6::autotune
