#include "compiler/precompile/precompile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/toolchain.h"
#include "compiler/frontend/frontend.h"
#include "llvm/Config/llvm-config.h"
#include "support/sha256.h"

#ifndef MXFP6_COMPILER_HASH
#define MXFP6_COMPILER_HASH "unknown"
#endif

namespace mxfp6::precompile {
namespace {

using autotune::CodeObject;
using autotune::FamilyKey;

struct Job {
  std::string file, kernel, config, target;
  // results
  bool ok = false;
  std::string refusal;
  CodeObject object;
  double resourceCost = 0;
  int stackBytes = 0;
};

struct FamilyWork {
  FamilyKey key;
  std::vector<ops::Plan> plans;
  std::vector<std::vector<size_t>> jobs;  // per plan, per launch: index into the job list
};

struct Resources {
  double cost = 0;  // registers x threads + shared bytes: the selection rule's "resource use"
  int stackBytes = 0;
};

Expected<CodeObject> compileWithResources(const std::string& fileName, const std::string& source,
                                          const std::string& kernelName, const std::string& configText,
                                          const std::string& targetName, const std::string& toolchain,
                                          Resources* resources) {
  auto target = codegen::findTarget(targetName);
  if (!target) return Status::error("unknown target '" + targetName + "' (valid: sm_90, gfx942, gfx950)");
  frontend::DiagnosticEngine diags;
  auto module = frontend::parseSource(fileName, source, diags);
  if (!module) return Status::error(diags.render());
  std::string error;
  auto config = frontend::parseConfigString(configText, error);
  if (!config) return Status::error(error);
  auto kernel = frontend::instantiate(*module, kernelName, *config, diags);
  if (!kernel || diags.hasErrors()) return Status::error(diags.render());
  codegen::Emit emit = target->backend == codegen::Backend::ROCDL ? codegen::Emit::Hsaco
                       : codegen::findPtxas()                      ? codegen::Emit::Cubin
                                                                   : codegen::Emit::Ptx;
  auto compiled = codegen::compileKernel(*kernel, *target, emit);
  if (!compiled) return compiled.status();
  ASSIGN_OR_RETURN(std::string meta, stampedMetadata(compiled->metadataJson, toolchain));
  const codegen::Resources& r = compiled->resources;
  if (resources) {
    resources->cost = double(r.registers.value_or(0)) * compiled->blockThreads + r.sharedBytes.value_or(0);
    resources->stackBytes = r.stackBytes.value_or(0);
  }
  return CodeObject{sha256Hex(compiled->bytes), kernelName, targetName, codegen::emitName(emit), configText,
                    sha256Hex(source), toolchain, std::move(meta), compiled->bytes};
}

Expected<std::string> readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

/// Compiles one job, keeping the resources pruning needs.
void compileJob(Job& job, const std::string& sourceText, const std::string& toolchain) {
  Resources resources;
  auto object = compileWithResources(job.file, sourceText, job.kernel, job.config, job.target, toolchain, &resources);
  if (!object) {
    job.refusal = object.status().message();
    return;
  }
  job.object = object.take();
  job.resourceCost = resources.cost;
  job.stackBytes = resources.stackBytes;
  job.ok = true;
}

/// Runs every job on `workers` threads.
void compileAll(std::vector<Job>& jobs, const std::map<std::string, std::pair<std::string, std::string>>& sources,
                const std::string& toolchain, unsigned workers, const std::function<void(size_t, size_t)>& progress) {
  std::atomic<size_t> next{0}, done{0};
  std::mutex progressMutex;
  auto worker = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      compileJob(jobs[i], sources.at(jobs[i].file).first, toolchain);
      size_t n = ++done;
      if (progress) {
        std::lock_guard<std::mutex> lock(progressMutex);
        progress(n, jobs.size());
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < std::min<size_t>(workers, jobs.size()); ++w) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
}

}  // namespace

Expected<std::string> stampedMetadata(const std::string& metadataJson, const std::string& toolchain, int indent) {
  nlohmann::json meta = nlohmann::json::parse(metadataJson, nullptr, false);
  if (meta.is_discarded()) return Status::error("the compiler wrote unreadable launch metadata");
  meta["metadata_schema"] = kMetadataSchema;
  meta["toolchain"] = toolchain;
  return indent < 0 ? meta.dump() : meta.dump(indent) + "\n";
}

Expected<CodeObject> compileKernelObject(const std::string& fileName, const std::string& source,
                                         const std::string& kernel, const std::string& config,
                                         const std::string& target, const std::string& toolchain) {
  return compileWithResources(fileName, source, kernel, config, target, toolchain, nullptr);
}

std::string toolchainFingerprint() {
  std::string ptxas = "no ptxas";
  if (auto path = codegen::findPtxas()) {
    std::string out;
    auto rc = codegen::runProgram(*path, {"--version"}, out);
    std::string last;
    std::stringstream lines(out);
    for (std::string line; std::getline(lines, line);)
      if (line.find("release") != std::string::npos) last = line.substr(line.find("release"));
    ptxas = "ptxas " + (rc && *rc == 0 && !last.empty() ? last : std::string("unknown"));
  }
  return std::string("mxfp6c ") + MXFP6_COMPILER_HASH + "; LLVM " + LLVM_VERSION_STRING + "; " + ptxas;
}

namespace {

/// The families asked for (duplicates dropped, every one listed in the report), those `wanted`
/// says to compile with their candidate plans.
Expected<std::vector<FamilyWork>> collectFamilies(const std::vector<FamilyRequest>& requests, const Options& options,
                                                  Report& report,
                                                  const std::function<Expected<bool>(const FamilyKey&)>& wanted) {
  std::vector<FamilyWork> families;
  std::set<FamilyKey> seen;
  for (const FamilyRequest& r : requests) {
    if (!codegen::findTarget(r.target))
      return Status::error("unknown target '" + r.target + "' (valid: sm_90, gfx942, gfx950)");
    ASSIGN_OR_RETURN(std::string keyToolchain, ops::keyToolchain(report.toolchain, *r.problem.op, options.dslDir));
    FamilyKey key{r.problem.op->name, r.problem.variantText(), r.target, r.problem.sizes(), keyToolchain};
    if (!seen.insert(key).second) continue;
    report.families.push_back(key);
    ASSIGN_OR_RETURN(bool compile, wanted(key));
    if (compile) families.push_back({key, ops::candidatePlans(*r.problem.op, r.problem.variant, r.problem.size), {}});
  }
  return families;
}

/// The families' compiles, and each family's candidates that survive pruning.
struct Compiled {
  std::vector<Job> jobs;
  std::map<std::string, std::pair<std::string, std::string>> sources;  // file -> (text, hash)
  std::vector<std::pair<FamilyKey, std::vector<autotune::Candidate>>> families;
};

Expected<Compiled> compileAndPrune(std::vector<FamilyWork>& families, const Options& options, Report& report) {
  Compiled out;
  std::vector<Job>& jobs = out.jobs;
  // Distinct compiles: a kernel at one config serves every family that launches it.
  std::map<std::string, size_t> jobIndex;
  for (FamilyWork& f : families) {
    const ops::OpSpec* op = ops::findOp(f.key.op);
    for (const ops::Plan& plan : f.plans) {
      std::vector<size_t> launchJobs;
      for (const ops::PlanLaunch& l : plan.launches) {
        std::string file = ops::kernelFile(*op, l.kernel);
        std::string id = l.kernel + "|" + l.config + "|" + f.key.target;
        auto [it, inserted] = jobIndex.emplace(id, jobs.size());
        if (inserted) jobs.push_back({file, l.kernel, l.config, f.key.target});
        launchJobs.push_back(it->second);
        if (!out.sources.count(file)) {
          ASSIGN_OR_RETURN(std::string text, readText(options.dslDir + "/" + file));
          out.sources[file] = {text, sha256Hex(text)};
        }
      }
      f.jobs.push_back(std::move(launchJobs));
    }
  }
  report.compiles = jobs.size();
  unsigned workers = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  compileAll(jobs, out.sources, report.toolchain, workers, options.progress);

  // Prune what cannot win.
  for (FamilyWork& f : families) {
    std::vector<autotune::Candidate> candidates;
    std::map<std::vector<std::string>, std::string> byObjects;  // code objects -> first plan's id
    for (size_t p = 0; p < f.plans.size(); ++p) {
      ops::Plan plan = f.plans[p];
      std::string why;
      double cost = 0;
      std::vector<std::string> objects;
      for (size_t l = 0; l < plan.launches.size(); ++l) {
        const Job& job = jobs[f.jobs[p][l]];
        if (!job.ok) why = job.kernel + "[" + job.config + "] refused: " + job.refusal;
        else if (job.stackBytes > 0)
          why = job.kernel + "[" + job.config + "] spills " + std::to_string(job.stackBytes) + " bytes of stack";
        if (!why.empty()) break;
        plan.launches[l].object = job.object.sha256;
        objects.push_back(job.object.sha256);
        cost += job.resourceCost;
      }
      // Same code objects in the same roles and the same P: the same launches, the same time.
      std::vector<std::string> identity = objects;
      identity.push_back(plan.family + " P=" + std::to_string(plan.partials));
      if (why.empty()) {
        auto [it, fresh] = byObjects.emplace(identity, plan.id());
        if (!fresh) why = "the same code as " + it->second;
      }
      if (!why.empty()) {
        ++report.pruned;
        std::replace(why.begin(), why.end(), '\n', ' ');
        report.pruneReasons.emplace(why.substr(0, 240), f.key.op + " for " + f.key.target);
        continue;
      }
      candidates.push_back({f.key, plan.id(), ops::planToJson(plan), objects, int(p), cost});
    }
    if (candidates.empty())
      return Status::error("every candidate of " + f.key.op + " (" + f.key.variant + " " + f.key.sizes + ") for " +
                           f.key.target + " was pruned" +
                           (report.pruneReasons.empty() ? "" : ": " + report.pruneReasons.rbegin()->first));
    out.families.emplace_back(f.key, std::move(candidates));
  }
  return out;
}

/// The objects the candidates launch.
std::set<std::string> launchedObjects(const std::vector<autotune::Candidate>& candidates) {
  std::set<std::string> needed;
  for (const auto& c : candidates) needed.insert(c.objects.begin(), c.objects.end());
  return needed;
}

}  // namespace

Expected<Report> precompileFamilies(autotune::KernelDb& db, const std::vector<FamilyRequest>& requests,
                                    const Options& options) {
  auto start = std::chrono::steady_clock::now();
  Report report;
  report.toolchain = toolchainFingerprint();
  // The families not yet precompiled.
  auto absent = [&](const FamilyKey& key) -> Expected<bool> {
    ASSIGN_OR_RETURN(std::vector<autotune::Candidate> existing, db.candidates(key));
    if (existing.empty() || options.force) return true;
    ++report.skipped;
    return false;
  };
  ASSIGN_OR_RETURN(std::vector<FamilyWork> families, collectFamilies(requests, options, report, absent));
  ASSIGN_OR_RETURN(Compiled compiled, compileAndPrune(families, options, report));

  // Each family in one transaction, with the objects its candidates launch.
  for (const auto& [key, candidates] : compiled.families) {
    std::set<std::string> needed = launchedObjects(candidates);
    for (const Job& job : compiled.jobs) {
      if (!job.ok || !needed.count(job.object.sha256)) continue;
      ASSIGN_OR_RETURN(bool has, db.hasObject(job.object.sha256));
      if (has) continue;
      const auto& [text, hash] = compiled.sources.at(job.file);
      RETURN_IF_ERROR(db.putSource(job.file, text).status());
      RETURN_IF_ERROR(db.putObject(job.object));
      ++report.objectsStored;
    }
    RETURN_IF_ERROR(db.putCandidates(candidates));
    ++report.written;
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

Expected<CompiledFamilies> compileFamilies(const std::vector<FamilyRequest>& requests, const Options& options,
                                           Report& report) {
  auto start = std::chrono::steady_clock::now();
  report = Report{};
  report.toolchain = toolchainFingerprint();
  auto every = [](const FamilyKey&) -> Expected<bool> { return true; };
  ASSIGN_OR_RETURN(std::vector<FamilyWork> families, collectFamilies(requests, options, report, every));
  ASSIGN_OR_RETURN(Compiled compiled, compileAndPrune(families, options, report));
  CompiledFamilies out;
  std::set<std::string> needed;
  for (auto& family : compiled.families) {
    std::set<std::string> launched = launchedObjects(family.second);
    needed.insert(launched.begin(), launched.end());
    out.families.push_back(std::move(family));
  }
  std::set<std::string> taken;
  for (Job& job : compiled.jobs)
    if (job.ok && needed.count(job.object.sha256) && taken.insert(job.object.sha256).second)
      out.objects.push_back(std::move(job.object));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace mxfp6::precompile
