#include "tools/mxfp6c/precompile_db.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "autotune/db.h"
#include "compiler/codegen/codegen.h"
#include "compiler/precompile/precompile.h"
#include "ops/shape_set.h"

#ifndef MXFP6_DSL_DIR
#define MXFP6_DSL_DIR "kernels_dsl"
#endif

namespace mxfp6::cli {
namespace {

std::string duration(double seconds) {
  char buf[32];
  if (seconds < 60) std::snprintf(buf, sizeof buf, "%.0fs", seconds);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", int(seconds) / 60, int(seconds) % 60);
  return buf;
}

}  // namespace

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

  std::vector<precompile::FamilyRequest> requests;
  for (const ops::ShapeEntry& e : *shapes)
    for (const std::string& target : targets) requests.push_back({e.problem, target});
  precompile::Options options;
  options.force = flags.count("--force") > 0;
  options.jobs = flags.count("--jobs") ? unsigned(std::max(1, std::atoi(flags.at("--jobs").c_str()))) : 0;
  options.dslDir = flags.count("--dsl-dir") ? flags.at("--dsl-dir") : MXFP6_DSL_DIR;
  bool tty = isatty(STDERR_FILENO);
  auto start = std::chrono::steady_clock::now();
  if (tty)
    options.progress = [&](size_t n, size_t total) {
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      double eta = elapsed / double(n) * double(total - n);
      int width = 30, filled = int(width * n / total);
      std::fprintf(stderr, "\r[%s%s] %zu/%zu compiles, %s elapsed, ETA %s   ", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), n, total, duration(elapsed).c_str(),
                   duration(eta).c_str());
      if (n == total) std::fprintf(stderr, "\n");
    };
  auto report = precompile::precompileFamilies(**db, requests, options);
  if (!report) return std::cerr << "mxfp6c: error: " << report.status().message() << "\n", 1;
  for (const auto& [why, where] : report->pruneReasons) std::cerr << "mxfp6c: note: pruned (" << where << "): " << why << "\n";
  std::printf("precompile: %zu keys in %zu families x targets: %d precompiled now, %d already in %s; %zu compiles, "
              "%d objects stored, %d plans pruned, %s\n",
              shapes->size(), report->families.size(), report->written, report->skipped, (*db)->path().c_str(),
              report->compiles, report->objectsStored, report->pruned, duration(report->seconds).c_str());
  std::printf("toolchain: %s\n", report->toolchain.c_str());
  return 0;
}

}  // namespace mxfp6::cli
