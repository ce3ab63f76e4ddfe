#include "autotune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "autotune/compare.h"
#include "ops/compose.h"
#include "ops/execute.h"
#include "ops/interp_launcher.h"
#include "ops/op_args.h"

namespace mxfp6::autotune {
namespace {

/// The launch-metadata schema precompile writes (compiler/precompile/precompile.h); objects with
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

/// An op call's tensors in host memory: inputs random (fixed seed), outputs poisoned (0xFF:
/// NaN in bf16 and f32), so an output a plan never writes fails its comparison. Without
/// `hostOutputs` the outputs get no host storage: the calls the GPU runs poison theirs on the
/// device (upload, poison), and only the interpreter's reference writes host outputs.
struct HostCall {
  ops::OpArgs args;
  std::vector<std::vector<std::byte>> data;

  HostCall(const ops::Problem& problem, uint64_t seed, bool hostOutputs) : args(ops::declareArgs(problem)) {
    constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // splitmix's step
    uint64_t drawn = 0;  // values drawn for the inputs before this one, from one stream
    for (const ops::TensorDecl& t : args.tensors) {
      size_t bytes = size_t(t.elements()) * rt::dtypeBytes(t.dtype);
      if (t.output) {
        data.emplace_back(hostOutputs ? bytes : 0, std::byte{0xFF});
        continue;
      }
      data.emplace_back(bytes);
      std::byte* p = data.back().data();
      // The stream's k-th value is splitmix's of seed + k steps, so a chunk starts its state
      // where the one stream would be there: the same values on any number of threads, and
      // inputs of 10^8 elements drawn in a fraction of a second.
      uint64_t first = seed + drawn * kGolden;
      parallelChunks(t.elements(), Chunking{}, [&](int64_t begin, int64_t end) {
        uint64_t state = first + uint64_t(begin) * kGolden;
        for (int64_t i = begin; i < end; ++i) {
          double u = double(splitmix(state) >> 11) * 0x1.0p-53;
          float v = float(t.lo + (t.hi - t.lo) * u);
          if (t.dtype == rt::Dtype::BF16) {
            uint16_t b = toBf16(v);
            std::memcpy(p + 2 * i, &b, 2);
          } else {
            std::memcpy(p + 4 * i, &v, 4);
          }
        }
        return 0;
      });
      drawn += uint64_t(t.elements());
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
      const ops::TensorDecl& t = host.args.tensors[i];
      size_t bytes = size_t(t.elements()) * rt::dtypeBytes(t.dtype);
      ASSIGN_OR_RETURN(rt::DeviceBuffer b, device.allocate(bytes));
      if (t.output) RETURN_IF_ERROR(device.memset(b.data(), 0xFF, bytes));
      else RETURN_IF_ERROR(device.copyToDevice(b.data(), host.data[i].data(), bytes));
      bufs.push_back(std::move(b));
    }
    return bufs;
  }
  Status poison(const HostCall& host, std::vector<rt::DeviceBuffer>& bufs) {
    for (size_t i = 0; i < bufs.size(); ++i)
      if (host.args.tensors[i].output) RETURN_IF_ERROR(device.memset(bufs[i].data(), 0xFF, bufs[i].size()));
    return Status::ok();
  }
  /// The outputs into `out` (one entry per tensor; the inputs' stay empty). `out` is meant to be
  /// reused from call to call: at the key's shape an output is hundreds of MB, and fresh host
  /// memory costs a fill and a page fault per page, twice per candidate.
  Status download(const HostCall& host, std::vector<rt::DeviceBuffer>& bufs, std::vector<std::vector<std::byte>>& out) {
    RETURN_IF_ERROR(device.synchronize());
    out.resize(bufs.size());
    for (size_t i = 0; i < bufs.size(); ++i) {
      if (!host.args.tensors[i].output) continue;
      out[i].resize(bufs[i].size());
      RETURN_IF_ERROR(device.copyToHost(out[i].data(), bufs[i].data(), bufs[i].size()));
    }
    return Status::ok();
  }
  static std::vector<void*> bases(std::vector<rt::DeviceBuffer>& bufs) {
    std::vector<void*> out;
    for (auto& b : bufs) out.push_back(b.data());
    return out;
  }

  /// Gate step 1: the plan at its small shape on the GPU against the interpreter's run of the
  /// op there (cached per shape: every plan of an op computes the same math). The shape's
  /// inputs, on the device, and the host buffers its outputs download into serve every plan
  /// gated there: at a per-sample op's small shape they are tens of MB.
  struct SmallReference {
    std::unique_ptr<HostCall> call;  // the inputs, and the interpreter's outputs
    Status status;
    std::vector<double> scales;  // of the interpreter's outputs (compare.h)
    std::vector<rt::DeviceBuffer> bufs;  // the inputs on the device, once a plan has run there
    std::vector<std::vector<std::byte>> out;
  };
  std::map<int64_t, SmallReference> references;
  Chunking chunking;

  Status smallShapeGate(const ops::Plan& plan, const ops::Problem& key, const std::string& toolchain) {
    ops::Problem g = gateProblem(plan, key);
    SmallReference& ref = references[g.tokens];
    if (!ref.call) {
      ref.call = std::make_unique<HostCall>(g, 0x5EED + uint64_t(g.tokens), true);
      std::vector<void*> hb;
      for (auto& d : ref.call->data) hb.push_back(d.data());
      ops::OpCall call = callOn(ref.call->args, hb);
      std::vector<std::vector<std::byte>> scratch;
      ops::ScratchAllocator alloc = [&scratch](size_t bytes) -> Expected<void*> {
        scratch.emplace_back(bytes + 256);
        return static_cast<void*>(scratch.back().data());
      };
      auto steps = ops::compose(plan, g, call, alloc);
      ref.status = steps ? ops::runSteps(plan, *steps, interp) : steps.status();
      if (!ref.status)
        ref.status = Status::error("the interpreter's reference at T=" + std::to_string(g.tokens) + ": " +
                                   ref.status.message());
      else
        ref.scales = referenceScales(ref.call->args, ref.call->data, chunking);
    }
    if (!ref.status) return ref.status;
    if (ref.bufs.empty()) {
      ASSIGN_OR_RETURN(ref.bufs, upload(*ref.call));
    } else {
      RETURN_IF_ERROR(poison(*ref.call, ref.bufs));
    }
    ASSIGN_OR_RETURN(auto prepared, prepare(plan, g, callOn(ref.call->args, bases(ref.bufs)), toolchain));
    RETURN_IF_ERROR(prepared->run());
    RETURN_IF_ERROR(download(*ref.call, ref.bufs, ref.out));
    Status s = compareOutputs(ref.call->args, ref.call->data, ref.scales, ref.out, chunking);
    if (!s) return Status::error("at T=" + std::to_string(g.tokens) + " against the interpreter: " + s.message());
    return s;
  }
  /// After a plan fails its gate: it may have written where it should not, so the next plan's
  /// small shape starts from freshly uploaded inputs.
  void dropSmallShapeInputs() {
    for (auto& [tokens, ref] : references) ref.bufs.clear();
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
  auto secondsSince = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };

  // The key's inputs, on the device once; each candidate writes the same output buffers.
  auto phase = std::chrono::steady_clock::now();
  HostCall host(problem, 0xF1A5 + uint64_t(problem.tokens), false);
  ASSIGN_OR_RETURN(auto bufs, m.upload(host));
  ops::OpCall call = callOn(host.args, Impl::bases(bufs));
  outcome.inputSeconds = secondsSince(phase);

  phase = std::chrono::steady_clock::now();
  std::vector<PlanTiming> timings;
  std::vector<std::unique_ptr<Impl::Prepared>> passing;
  std::vector<const Candidate*> passingCandidates;
  std::vector<std::vector<std::byte>> reference;  // the first passing candidate's outputs
  std::vector<double> referenceScales;            // and their scales (compare.h), once per key
  std::string referenceId;
  std::vector<std::vector<std::byte>> runs[2];    // host buffers reused by every candidate
  for (const Candidate& c : candidates) {
    ASSIGN_OR_RETURN(ops::Plan plan, ops::parsePlan(c.planJson));
    if (!ops::planApplies(plan, problem)) continue;
    ++outcome.applicable;
    PlanTiming t{c.planId, false, "", {}};
    auto gate = [&]() -> Status {
      RETURN_IF_ERROR(m.smallShapeGate(plan, problem, toolchain));
      ASSIGN_OR_RETURN(auto prepared, m.prepare(plan, problem, call, toolchain));
      for (auto& r : runs) {
        RETURN_IF_ERROR(m.poison(host, bufs));
        RETURN_IF_ERROR(prepared->run());
        RETURN_IF_ERROR(m.download(host, bufs, r));
      }
      for (size_t i = 0; i < runs[0].size(); ++i)
        if (!sameBytes(runs[0][i], runs[1][i], m.chunking))
          return Status::error("two launches at the key's shape differ: not deterministic");
      if (reference.empty()) {
        // The first candidate is checked at the key's shape against the interpreter's bounds
        // only at its small shape; later ones are held to it here.
        reference = std::move(runs[0]);
        runs[0].clear();
        referenceScales = autotune::referenceScales(host.args, reference, m.chunking);
        referenceId = c.planId;
      } else if (Status s = compareOutputs(host.args, reference, referenceScales, runs[0], m.chunking); !s) {
        return Status::error("at the key's shape against " + referenceId + ": " + s.message());
      }
      passing.push_back(std::move(prepared));
      return Status::ok();
    };
    Status s = gate();
    if (!s) m.dropSmallShapeInputs();
    t.passedGate = s.isOk();
    t.gateMessage = s.isOk() ? "matched the interpreter at its small shape and the first candidate at the key's"
                             : s.message();
    if (!s) outcome.gateFailures.push_back(c.planId + ": " + s.message());
    else passingCandidates.push_back(&c);
    timings.push_back(std::move(t));
  }
  outcome.gateSeconds = secondsSince(phase);
  // The gate's device and host copies are not needed past it: timing runs without them.
  m.references.clear();
  reference = {};
  runs[0] = runs[1] = {};
  outcome.passed = int(passing.size());
  if (passing.empty())
    return Status::error(formatKey(outcome.key) + ": no candidate passed its correctness gate (first: " +
                         (outcome.gateFailures.empty() ? "none applies" : outcome.gateFailures.front()) + ")");

  // Timing: rounds of every passing candidate in a rotating order, L2 flushed before each run.
  phase = std::chrono::steady_clock::now();
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
  outcome.timingSeconds = secondsSince(phase);

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
  outcome.seconds = secondsSince(start);
  return outcome;
}

}  // namespace mxfp6::autotune
