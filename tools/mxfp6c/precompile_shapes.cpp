#include "tools/mxfp6c/precompile_shapes.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
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

namespace fs = std::filesystem;

std::string duration(double seconds) {
  char buf[32];
  if (seconds < 60) std::snprintf(buf, sizeof buf, "%.0fs", seconds);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", int(seconds) / 60, int(seconds) % 60);
  return buf;
}

/// What both outputs start from: the shape set's families for each target, and the compile
/// options. Errors are printed; nullopt then.
struct Setup {
  std::vector<ops::ShapeEntry> shapes;
  std::vector<precompile::FamilyRequest> requests;
  precompile::Options options;
};

std::optional<Setup> setUp(const std::map<std::string, std::string>& flags) {
  auto shapes = ops::loadShapeSet(flags.at("--shapes"));
  if (!shapes) return std::cerr << "mxfp6c: error: " << shapes.status().message() << "\n", std::nullopt;
  std::vector<std::string> targets;
  std::string list = flags.count("--targets") ? flags.at("--targets") : "sm_90,gfx942,gfx950";
  std::stringstream ts(list);
  for (std::string t; std::getline(ts, t, ',');) {
    if (!codegen::findTarget(t)) {
      std::cerr << "mxfp6c: error: unknown target '" << t << "' in --targets (valid: sm_90, gfx942, gfx950)\n";
      return std::nullopt;
    }
    targets.push_back(t);
  }
  Setup setup;
  setup.shapes = shapes.take();
  for (const ops::ShapeEntry& e : setup.shapes)
    for (const std::string& target : targets) setup.requests.push_back({e.problem, target});
  precompile::Options& options = setup.options;
  options.force = flags.count("--force") > 0;
  options.jobs = flags.count("--jobs") ? unsigned(std::max(1, std::atoi(flags.at("--jobs").c_str()))) : 0;
  options.dslDir = flags.count("--dsl-dir") ? flags.at("--dsl-dir") : MXFP6_DSL_DIR;
  if (isatty(STDERR_FILENO)) {
    auto start = std::chrono::steady_clock::now();
    options.progress = [start](size_t n, size_t total) {
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      double eta = elapsed / double(n) * double(total - n);
      int width = 30, filled = int(width * n / total);
      std::fprintf(stderr, "\r[%s%s] %zu/%zu compiles, %s elapsed, ETA %s   ", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), n, total, duration(elapsed).c_str(),
                   duration(eta).c_str());
      if (n == total) std::fprintf(stderr, "\n");
    };
  }
  return setup;
}

void printPruned(const precompile::Report& report) {
  for (const auto& [why, where] : report.pruneReasons) std::cerr << "mxfp6c: note: pruned (" << where << "): " << why << "\n";
}

/// mxfp6_code_objects()'s file name: the config with "," -> "_" and "=" dropped.
std::string objectFileName(const autotune::CodeObject& object) {
  std::string tag;
  for (char c : object.config)
    if (c != '=') tag += c == ',' ? '_' : c;
  return object.kernel + "." + object.target + "." + tag + ".code";
}

/// Writes `bytes` to `path` unless the file already holds exactly them (its timestamp then
/// stays); a new file goes through a temporary and a rename, so a reader never sees half of it.
/// Whether it wrote.
Expected<bool> writeIfChanged(const fs::path& path, const std::string& bytes) {
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (old == bytes) return false;
    }
  }
  fs::path temp = path;
  temp += ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(temp, std::ios::binary);
    out << bytes;
    if (!out) return Status::error("cannot write " + temp.string());
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) return Status::error("cannot rename " + temp.string() + " to " + path.string() + ": " + ec.message());
  return true;
}

}  // namespace

int precompileIntoDb(const std::map<std::string, std::string>& flags) {
  std::optional<Setup> setup = setUp(flags);
  if (!setup) return 1;
  auto db = autotune::KernelDb::open(flags.at("--db"));
  if (!db) return std::cerr << "mxfp6c: error: " << db.status().message() << "\n", 1;
  auto report = precompile::precompileFamilies(**db, setup->requests, setup->options);
  if (!report) return std::cerr << "mxfp6c: error: " << report.status().message() << "\n", 1;
  printPruned(*report);
  std::printf("precompile: %zu keys in %zu families x targets: %d precompiled now, %d already in %s; %zu compiles, "
              "%d objects stored, %d plans pruned, %s\n",
              setup->shapes.size(), report->families.size(), report->written, report->skipped, (*db)->path().c_str(),
              report->compiles, report->objectsStored, report->pruned, duration(report->seconds).c_str());
  std::printf("toolchain: %s\n", report->toolchain.c_str());
  return 0;
}

int precompileIntoFolder(const std::map<std::string, std::string>& flags) {
  std::optional<Setup> setup = setUp(flags);
  if (!setup) return 1;
  precompile::Report report;
  auto compiled = precompile::compileFamilies(setup->requests, setup->options, report);
  if (!compiled) return std::cerr << "mxfp6c: error: " << compiled.status().message() << "\n", 1;
  printPruned(report);

  fs::path dir = flags.at("-o");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return std::cerr << "mxfp6c: error: cannot create " << dir << ": " << ec.message() << "\n", 1;
  int written = 0;
  for (const autotune::CodeObject& object : compiled->objects) {
    fs::path code = dir / objectFileName(object);
    fs::path meta = code;
    meta += ".json";
    // The metadata last: a loader finds an object by its .json.
    for (const auto& [path, bytes] : {std::pair{code, &object.bytes}, std::pair{meta, &object.metadata}}) {
      Expected<bool> wrote = writeIfChanged(path, *bytes);
      if (!wrote) return std::cerr << "mxfp6c: error: " << wrote.status().message() << "\n", 1;
      written += *wrote;
    }
  }
  std::printf("precompile: %zu keys in %zu families x targets; %zu compiles, %d plans pruned; %zu objects in %s, "
              "%d files written, %s\n",
              setup->shapes.size(), report.families.size(), report.compiles, report.pruned, compiled->objects.size(),
              dir.string().c_str(), written, duration(report.seconds).c_str());
  std::printf("toolchain: %s\n", report.toolchain.c_str());
  return 0;
}

}  // namespace mxfp6::cli
