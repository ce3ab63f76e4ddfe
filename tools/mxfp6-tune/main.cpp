// mxfp6-tune: tunes the keys of a shape set on this node's GPU and records the winners in the
// kernel database (autotune/tuner.h). Needs the runtime and the database, never LLVM: the
// candidates' code objects were precompiled into the database (`mxfp6c precompile --shapes`).
//
//   mxfp6-tune --db DB --shapes FILE [--target T] [--toolchain COMPILER] [--shard K/N] [--device N]
//              [--budget SECONDS] [--rounds N] [--confirm-rounds N] [--placements N] [--op OP] [--dsl-dir DIR]
//
// --shard K/N tunes the keys whose index in the shape set is K modulo N, so N processes (a Slurm
// array, torchrun, one per node) split a set; their databases merge with `mxfp6-db merge`, or they
// share one file (each key is one transaction). Without --device, every visible GPU takes part:
// with G of them, this process starts G copies of itself, copy i on GPU i with shard
// (K + N i)/(N G), all writing the same file, and waits for them. --budget stops starting keys
// after that many seconds. Exit status: 0 every key tuned, 1 a key failed or was left by the
// budget, 2 bad usage.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "autotune/tuner.h"
#include "ops/shape_set.h"

#ifndef MXFP6_DSL_DIR
#define MXFP6_DSL_DIR "kernels_dsl"
#endif

namespace {

using namespace mxfp6;

const char* kUsage =
    "usage: mxfp6-tune --db DB --shapes FILE [--target T] [--toolchain COMPILER] [--shard K/N] [--device N]\n"
    "                  [--budget SECONDS] [--rounds N] [--confirm-rounds N] [--placements N] [--op OP] [--dsl-dir DIR]\n";

int usage(const std::string& message) {
  std::cerr << "mxfp6-tune: error: " << message << "\n" << kUsage;
  return 2;
}

/// One copy of this program per visible GPU, each on its own GPU and its own slice of shard K/N,
/// sharing the database file; returns the worst exit status. Children are separate processes,
/// not threads: each owns its driver context, and one that crashes takes no other GPU's keys
/// with it.
int tuneOnEveryGpu(int argc, char** argv, int gpus, int shardK, int shardN) {
  std::printf("spreading over %d GPUs: one mxfp6-tune per GPU, sharing the database\n", gpus);
  std::fflush(stdout);
  auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> children;
  for (int i = 0; i < gpus; ++i) {
    std::vector<std::string> args;
    for (int a = 0; a < argc; ++a) {
      if (std::strcmp(argv[a], "--shard") == 0) {
        ++a;
        continue;
      }
      args.push_back(argv[a]);
    }
    args.insert(args.end(), {"--device", std::to_string(i), "--shard",
                             std::to_string(shardK + shardN * i) + "/" + std::to_string(shardN * gpus)});
    pid_t pid = fork();
    if (pid < 0) return std::perror("mxfp6-tune: fork"), 1;
    if (pid == 0) {
      std::vector<char*> cargs;
      for (std::string& a : args) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      execv("/proc/self/exe", cargs.data());
      std::perror("mxfp6-tune: exec");
      _exit(1);
    }
    children.push_back(pid);
  }
  int worst = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (!WIFEXITED(status)) std::printf("the tuner of one GPU (pid %d) was killed by signal %d\n", pid, WTERMSIG(status));
    worst = std::max(worst, code);
  }
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d GPUs done in %.1f s%s\n", gpus, total, worst ? ", with failures (above)" : "");
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  const std::set<std::string> known = {"--db", "--shapes", "--target", "--toolchain", "--shard", "--device",
                                       "--budget", "--rounds", "--confirm-rounds", "--placements", "--op", "--dsl-dir"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return std::cout << kUsage, 0;
    if (!known.count(a)) return usage("unknown argument '" + a + "'");
    if (i + 1 >= argc) return usage(a + " needs a value");
    flags[a] = argv[++i];
  }
  if (!flags.count("--db") || !flags.count("--shapes")) return usage("--db and --shapes are required");
  int shardK = 0, shardN = 1;
  if (flags.count("--shard") && (std::sscanf(flags["--shard"].c_str(), "%d/%d", &shardK, &shardN) != 2 ||
                                 shardN < 1 || shardK < 0 || shardK >= shardN))
    return usage("--shard must be K/N with 0 <= K < N, got '" + flags["--shard"] + "'");
  double budget = flags.count("--budget") ? std::atof(flags["--budget"].c_str()) : 0;

  auto shapes = ops::loadShapeSet(flags["--shapes"]);
  if (!shapes) return std::cerr << "mxfp6-tune: error: " << shapes.status().message() << "\n", 1;
  auto db = autotune::KernelDb::open(flags["--db"]);
  if (!db) return std::cerr << "mxfp6-tune: error: " << db.status().message() << "\n", 1;
  rt::DeviceOptions deviceOptions;
  deviceOptions.deviceOrdinal = flags.count("--device") ? std::atoi(flags["--device"].c_str()) : 0;
  auto device = rt::Device::open(deviceOptions);
  if (!device) return std::cerr << "mxfp6-tune: error: " << device.status().message() << "\n", 1;
  if (!flags.count("--device") && (*device)->deviceCount() > 1) {
    int gpus = (*device)->deviceCount();
    device->reset();  // the children open their own; nothing of the driver crosses the fork
    db->reset();
    return tuneOnEveryGpu(argc, argv, gpus, shardK, shardN);
  }
  std::string target = flags.count("--target") ? flags["--target"] : (*device)->arch();

  // The compiler of the candidates: given, or the one the database holds this target's families
  // under. Each key's toolchain adds the hash of its op's kernels (ops::keyToolchain), read from
  // the same .mxk files the interpreter checks against.
  std::string compiler = flags.count("--toolchain") ? flags["--toolchain"] : "";
  if (compiler.empty()) {
    auto families = (*db)->families();
    if (!families) return std::cerr << "mxfp6-tune: error: " << families.status().message() << "\n", 1;
    std::set<std::string> compilers;
    for (const auto& f : *families)
      if (f.target == target) compilers.insert(ops::compilerOfToolchain(f.toolchain));
    if (compilers.size() != 1) {
      std::string list;
      for (const auto& t : compilers) list += "\n  " + t;
      std::cerr << "mxfp6-tune: error: " << flags["--db"] << " holds " << compilers.size() << " compilers' objects for "
                << target << (compilers.empty() ? " (precompile the shape set for it first)" : "; pick one with --toolchain:")
                << list << "\n";
      return 1;
    }
    compiler = *compilers.begin();
  }

  // This shard's keys, each once, in shape-set order.
  std::vector<ops::Problem> keys;
  std::set<std::string> seen;
  size_t index = 0;
  for (const ops::ShapeEntry& e : *shapes) {
    if (flags.count("--op") && e.problem.op->name != flags["--op"]) continue;
    std::string id = e.problem.op->name + "/" + e.problem.variantText() + "/" + e.problem.sizes() + "/" +
                     std::to_string(e.problem.rows());
    if (!seen.insert(id).second) continue;
    if (index++ % size_t(shardN) == size_t(shardK)) keys.push_back(e.problem);
  }

  autotune::TuneOptions options;
  options.dslDir = flags.count("--dsl-dir") ? flags["--dsl-dir"] : MXFP6_DSL_DIR;
  std::map<std::string, std::string> toolchains;  // per op
  for (const ops::Problem& p : keys) {
    if (toolchains.count(p.op->name)) continue;
    auto t = ops::keyToolchain(compiler, *p.op, options.dslDir);
    if (!t) return std::cerr << "mxfp6-tune: error: " << t.status().message() << "\n", 1;
    toolchains[p.op->name] = *t;
  }
  if (flags.count("--rounds")) options.rounds = std::max(3, std::atoi(flags["--rounds"].c_str()));
  if (flags.count("--placements")) options.placements = std::max(1, std::atoi(flags["--placements"].c_str()));
  if (flags.count("--confirm-rounds"))
    options.confirmRounds = std::max(0, std::atoi(flags["--confirm-rounds"].c_str()));
  options.tuner = "mxfp6-tune shard " + std::to_string(shardK) + "/" + std::to_string(shardN);
  autotune::Tuner tuner(**device, **db, options);

  std::printf("tuning %zu keys for %s on %s (%s), compiler %s\n", keys.size(), target.c_str(),
              (*device)->name().c_str(), options.tuner.c_str(), compiler.c_str());
  std::fflush(stdout);
  auto start = std::chrono::steady_clock::now();
  int failed = 0;
  size_t done = 0, left = 0;  // keys attempted; keys the budget left unstarted
  bool tty = isatty(STDERR_FILENO);
  for (const ops::Problem& problem : keys) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (budget > 0 && elapsed > budget) {
      left = keys.size() - done;
      std::printf("budget of %.0f s spent: %zu of %zu keys left untuned\n", budget, left, keys.size());
      break;
    }
    if (tty && done > 0)
      std::fprintf(stderr, "\r[%zu/%zu] %.0f s elapsed, ETA %.0f s   ", done, keys.size(), elapsed,
                   elapsed / double(done) * double(keys.size() - done));
    auto outcome = tuner.tune(problem, target, toolchains[problem.op->name]);
    ++done;
    if (tty) std::fprintf(stderr, "\r\033[K");
    if (!outcome) {
      ++failed;
      std::printf("[%zu/%zu] FAILED %s\n", done, keys.size(), outcome.status().message().c_str());
    } else {
      std::printf("[%zu/%zu] %s: %s (%d of %d applicable passed; %s) %.2f s (inputs %.2f, gate %.2f, timing %.2f)\n",
                  done, keys.size(), autotune::formatKey(outcome->key).c_str(), outcome->winner.c_str(),
                  outcome->passed, outcome->applicable, outcome->rule.c_str(), outcome->seconds,
                  outcome->inputSeconds, outcome->gateSeconds, outcome->timingSeconds);
      for (const std::string& f : outcome->gateFailures) std::printf("    gate: %s\n", f.c_str());
    }
    std::fflush(stdout);
  }
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("tuned %zu keys in %.1f s (%.2f s per key), %d failed%s\n", done - failed, total,
              done ? total / double(done) : 0.0, failed,
              left ? (", " + std::to_string(left) + " left by the budget").c_str() : "");
  return failed || left ? 1 : 0;
}
