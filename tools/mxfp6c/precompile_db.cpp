#include "tools/mxfp6c/precompile_db.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "autotune/db.h"
#include "compiler/codegen/codegen.h"
#include "compiler/codegen/toolchain.h"
#include "compiler/frontend/frontend.h"
#include "llvm/Config/llvm-config.h"
#include "ops/shape_set.h"
#include "support/sha256.h"

#ifndef MXFP6_COMPILER_HASH
#define MXFP6_COMPILER_HASH "unknown"
#endif
#ifndef MXFP6_DSL_DIR
#define MXFP6_DSL_DIR "kernels_dsl"
#endif

namespace mxfp6::cli {
namespace {

using autotune::CodeObject;
using autotune::FamilyKey;

/// Bumped when the launch metadata's meaning changes: loaders refuse other versions.
constexpr int kMetadataSchema = 1;

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

std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

/// Compiles one job (thread-safe: every compile has its own MLIR and LLVM contexts).
void compileJob(Job& job, const std::string& sourceText, const std::string& sourceHash, const std::string& toolchain) {
  frontend::DiagnosticEngine diags;
  auto module = frontend::parseSource(job.file, sourceText, diags);
  if (!module) {
    job.refusal = diags.render();
    return;
  }
  std::string error;
  auto config = frontend::parseConfigString(job.config, error);
  if (!config) {
    job.refusal = error;
    return;
  }
  auto kernel = frontend::instantiate(*module, job.kernel, *config, diags);
  if (!kernel || diags.hasErrors()) {
    job.refusal = diags.render();
    return;
  }
  auto target = codegen::findTarget(job.target);
  codegen::Emit emit = target->backend == codegen::Backend::ROCDL ? codegen::Emit::Hsaco
                       : codegen::findPtxas()                      ? codegen::Emit::Cubin
                                                                   : codegen::Emit::Ptx;
  auto compiled = codegen::compileKernel(*kernel, *target, emit);
  if (!compiled) {
    job.refusal = compiled.status().message();
    return;
  }
  nlohmann::json meta = nlohmann::json::parse(compiled->metadataJson, nullptr, false);
  if (meta.is_discarded()) {
    job.refusal = "the compiler wrote unreadable launch metadata";
    return;
  }
  meta["metadata_schema"] = kMetadataSchema;
  meta["toolchain"] = toolchain;
  job.object = {sha256Hex(compiled->bytes), job.kernel, job.target, codegen::emitName(emit), job.config,
                sourceHash, toolchain, meta.dump(), compiled->bytes};
  const codegen::Resources& r = compiled->resources;
  job.resourceCost = double(r.registers.value_or(0)) * compiled->blockThreads + r.sharedBytes.value_or(0);
  job.stackBytes = r.stackBytes.value_or(0);
  job.ok = true;
}

std::string duration(double seconds) {
  char buf[32];
  if (seconds < 60) std::snprintf(buf, sizeof buf, "%.0fs", seconds);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", int(seconds) / 60, int(seconds) % 60);
  return buf;
}

}  // namespace

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

int precompileIntoDb(const std::map<std::string, std::string>& flags) {
  auto shapes = ops::loadShapeSet(flags.at("--shapes"));
  if (!shapes) return std::cerr << "mxfp6c: error: " << shapes.status().message() << "\n", 1;
  std::vector<std::string> targets;
  std::string list = flags.count("--targets") ? flags.at("--targets") : "sm_90,gfx942,gfx950";
  std::stringstream ts(list);
  for (std::string t; std::getline(ts, t, ',');) {
    if (!codegen::findTarget(t)) {
      std::cerr << "mxfp6c: error: unknown target '" << t << "' in --targets (valid: sm_90, gfx942, gfx950)\n";
      return 1;
    }
    targets.push_back(t);
  }
  auto db = autotune::KernelDb::open(flags.at("--db"));
  if (!db) return std::cerr << "mxfp6c: error: " << db.status().message() << "\n", 1;
  const std::string toolchain = toolchainFingerprint();
  const std::string dslDir = flags.count("--dsl-dir") ? flags.at("--dsl-dir") : MXFP6_DSL_DIR;

  // The families the shape set needs (op, variant, target, sizes), those not yet precompiled.
  std::vector<FamilyWork> families;
  std::set<FamilyKey> seen;
  int skipped = 0;
  for (const ops::ShapeEntry& e : *shapes)
    for (const std::string& target : targets) {
      auto keyToolchain = ops::keyToolchain(toolchain, *e.problem.op, dslDir);
      if (!keyToolchain) return std::cerr << "mxfp6c: error: " << keyToolchain.status().message() << "\n", 1;
      FamilyKey key{e.problem.op->name, e.problem.variantText(), target, e.problem.sizes(), *keyToolchain};
      if (!seen.insert(key).second) continue;
      auto existing = (*db)->candidates(key);
      if (!existing) return std::cerr << "mxfp6c: error: " << existing.status().message() << "\n", 1;
      if (!existing->empty() && !flags.count("--force")) {
        ++skipped;
        continue;
      }
      families.push_back({key, ops::candidatePlans(*e.problem.op, e.problem.variant, e.problem.size), {}});
    }

  // Distinct compiles: a kernel at one config serves every family that launches it.
  std::vector<Job> jobs;
  std::map<std::string, size_t> jobIndex;
  std::map<std::string, std::pair<std::string, std::string>> sources;  // file -> (text, hash)
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
        if (!sources.count(file)) {
          std::string text = readText(dslDir + "/" + file);
          if (text.empty()) return std::cerr << "mxfp6c: error: cannot read " << dslDir << "/" << file << "\n", 1;
          sources[file] = {text, sha256Hex(text)};
        }
      }
      f.jobs.push_back(std::move(launchJobs));
    }
  }

  unsigned workers = flags.count("--jobs") ? std::max(1, std::atoi(flags.at("--jobs").c_str()))
                                           : std::max(1u, std::thread::hardware_concurrency());
  std::atomic<size_t> next{0}, done{0};
  std::mutex printMutex;
  bool tty = isatty(STDERR_FILENO);
  auto start = std::chrono::steady_clock::now();
  auto worker = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      auto& [text, hash] = sources[jobs[i].file];
      compileJob(jobs[i], text, hash, toolchain);
      size_t n = ++done;
      if (tty) {
        std::lock_guard<std::mutex> lock(printMutex);
        double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        double eta = elapsed / n * (jobs.size() - n);
        int width = 30, filled = int(width * n / jobs.size());
        std::fprintf(stderr, "\r[%s%s] %zu/%zu compiles, %s elapsed, ETA %s   ", std::string(filled, '#').c_str(),
                     std::string(width - filled, '.').c_str(), n, jobs.size(), duration(elapsed).c_str(),
                     duration(eta).c_str());
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < std::min<size_t>(workers, std::max<size_t>(jobs.size(), 1)); ++w) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  if (tty && !jobs.empty()) std::fprintf(stderr, "\n");

  // Prune what cannot win, then write each family in one transaction.
  int written = 0, pruned = 0, objectsStored = 0;
  std::map<std::string, std::string> refusals;
  for (FamilyWork& f : families) {
    std::vector<autotune::Candidate> candidates;
    for (size_t p = 0; p < f.plans.size(); ++p) {
      ops::Plan plan = f.plans[p];
      std::string why;
      double cost = 0;
      std::vector<std::string> objects;
      for (size_t l = 0; l < plan.launches.size(); ++l) {
        const Job& job = jobs[f.jobs[p][l]];
        if (!job.ok) why = job.kernel + "[" + job.config + "] refused: " + job.refusal;
        else if (job.stackBytes > 0) why = job.kernel + "[" + job.config + "] spills " + std::to_string(job.stackBytes) + " bytes of stack";
        if (!why.empty()) break;
        plan.launches[l].object = job.object.sha256;
        objects.push_back(job.object.sha256);
        cost += job.resourceCost;
      }
      if (!why.empty()) {
        ++pruned;
        std::replace(why.begin(), why.end(), '\n', ' ');
        refusals.emplace(why.substr(0, 240), f.key.op + " for " + f.key.target);
        continue;
      }
      candidates.push_back({f.key, plan.id(), ops::planToJson(plan), objects, int(p), cost});
    }
    if (candidates.empty()) {
      std::cerr << "mxfp6c: error: every candidate of " << f.key.op << " (" << f.key.variant << " " << f.key.sizes
                << ") for " << f.key.target << " was pruned\n";
      return 1;
    }
    std::set<std::string> needed;
    for (const auto& c : candidates) needed.insert(c.objects.begin(), c.objects.end());
    for (const Job& job : jobs) {
      if (!job.ok || !needed.count(job.object.sha256)) continue;
      auto has = (*db)->hasObject(job.object.sha256);
      if (has && *has) continue;
      auto& [text, hash] = sources[job.file];
      if (auto s = (*db)->putSource(job.file, text); !s) return std::cerr << "mxfp6c: error: " << s.status().message() << "\n", 1;
      if (auto s = (*db)->putObject(job.object); !s) return std::cerr << "mxfp6c: error: " << s.message() << "\n", 1;
      ++objectsStored;
    }
    if (auto s = (*db)->putCandidates(candidates); !s) return std::cerr << "mxfp6c: error: " << s.message() << "\n", 1;
    ++written;
  }
  for (const auto& [why, where] : refusals) std::cerr << "mxfp6c: note: pruned (" << where << "): " << why << "\n";
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("precompile: %zu keys in %zu families x targets: %d precompiled now, %d already in %s; %zu compiles, "
              "%d objects stored, %d plans pruned, %s\n",
              shapes->size(), seen.size(), written, skipped, (*db)->path().c_str(), jobs.size(), objectsStored, pruned,
              duration(elapsed).c_str());
  std::printf("toolchain: %s\n", toolchain.c_str());
  return 0;
}

}  // namespace mxfp6::cli
