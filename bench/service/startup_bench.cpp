// startup_bench: many training processes starting at once against one server, each resolving
// a model's startup set through the client library into its node cache (bench/service_bench.py
// drives it and records the run).
//
//   startup_bench --server ADDR --shapes FILE [--target T] --processes N --cache-root DIR
//                 [--shared-cache] [--fresh-for SECONDS]
//   startup_bench --db DB --shapes FILE [--target T] --list-objects
//
// Each process is a fork()ed child that has not touched gRPC before the fork (gRPC does not
// survive one): the parent parses the shape set, forks N children, which wait on a pipe so they
// all start together, then connect, resolve every key in one call, and report their latency.
// --shared-cache: every child uses DIR/shared (a warm node cache the caller filled first);
// otherwise child i gets its own empty DIR/p<i>. --fresh-for: the client's freshFor (answers the
// node cache got less than that long ago are used without a call). Prints one JSON object.
// --list-objects: the distinct code objects the set resolves to in DB (kernel, config, target,
// op), for the compile-from-source baseline.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/client.h"
#include "ops/shape_set.h"

namespace {

using namespace mxfp6;
using Clock = std::chrono::steady_clock;

struct ChildReport {
  double connectMs = 0, resolveMs = 0, totalMs = 0, cpuMs = 0;
  int64_t ops = 0, errors = 0, objectsFromServer = 0, bytesFromServer = 0, objectsFromCache = 0;
  int ok = 0, source = -1;
};

ChildReport fetchOnce(const client::ClientOptions& options, const std::vector<client::OpKey>& keys) {
  ChildReport r;
  auto t0 = Clock::now();
  auto c = client::Client::connect(options);
  auto t1 = Clock::now();
  r.connectMs = std::chrono::duration<double, std::milli>(t1 - t0).count();
  if (!c) return r;
  auto res = (*c)->resolve(keys);
  auto t2 = Clock::now();
  r.resolveMs = std::chrono::duration<double, std::milli>(t2 - t1).count();
  r.totalMs = std::chrono::duration<double, std::milli>(t2 - t0).count();
  if (!res) return r;
  r.ok = res->errors.empty() ? 1 : 0;
  r.ops = int64_t(res->ops.size());
  r.errors = int64_t(res->errors.size());
  r.objectsFromServer = res->objectsFromServer;
  r.bytesFromServer = res->bytesFromServer;
  r.objectsFromCache = res->objectsFromCache;
  r.source = int(res->source);
  return r;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5));
  return v[i];
}

int usage(const std::string& m) {
  std::cerr << "startup_bench: error: " << m << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--shared-cache" || a == "--list-objects") flags[a] = "1";
    else if (i + 1 < argc) flags[a] = argv[++i];
    else return usage(a + " needs a value");
  }
  if (!flags.count("--shapes")) return usage("--shapes is required");
  auto shapes = ops::loadShapeSet(flags["--shapes"]);
  if (!shapes) return usage(shapes.status().message());
  std::string target = flags.count("--target") ? flags["--target"] : "sm_90";
  std::vector<client::OpKey> keys;
  std::set<std::string> seen;
  for (const auto& e : *shapes) {
    auto k = client::keyOf(e.problem, target);
    if (seen.insert(k.text()).second) keys.push_back(k);
  }

  if (flags.count("--list-objects")) {
    auto c = client::Client::connect({{}, flags["--db"], "", std::chrono::seconds(60), 0});
    if (!c) return usage(c.status().message());
    auto r = (*c)->resolve(keys);
    if (!r) return usage(r.status().message());
    nlohmann::json out = nlohmann::json::array();
    std::set<std::string> listed;
    for (const auto& op : r->ops)
      for (size_t l = 0; l < op.objects.size(); ++l) {
        const auto* o = op.objects[l];
        if (!listed.insert(o->sha256).second) continue;
        out.push_back({{"op", op.key.op}, {"kernel", o->kernel}, {"config", o->config}, {"target", o->target},
                       {"file", ops::kernelFile(*ops::findOp(op.key.op), o->kernel)}});
      }
    std::cout << out.dump(1) << "\n";
    return 0;
  }

  if (!flags.count("--server") || !flags.count("--processes") || !flags.count("--cache-root"))
    return usage("--server, --processes and --cache-root are required");
  int n = std::max(1, std::atoi(flags["--processes"].c_str()));
  bool shared = flags.count("--shared-cache") > 0;
  int go[2], results[2];
  if (pipe(go) != 0 || pipe(results) != 0) return usage("pipe failed");
  std::vector<pid_t> children;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      close(go[1]);
      close(results[0]);
      char c;
      if (read(go[0], &c, 1) < 0) _exit(1);  // returns at EOF: all start together
      client::ClientOptions options;
      options.servers = {flags["--server"]};
      options.cacheDir = flags["--cache-root"] + (shared ? "/shared" : "/p" + std::to_string(i));
      options.deadline = std::chrono::seconds(60);
      if (flags.count("--fresh-for")) options.freshFor = std::chrono::seconds(std::atoll(flags["--fresh-for"].c_str()));
      ChildReport r = fetchOnce(options, keys);
      rusage usage{};
      getrusage(RUSAGE_SELF, &usage);  // the child's own CPU, all its threads, since the fork
      r.cpuMs = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 +
                (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3;
      if (write(results[1], &r, sizeof r) != ssize_t(sizeof r)) _exit(1);
      _exit(0);
    }
    children.push_back(pid);
  }
  close(go[0]);
  close(results[1]);
  auto start = Clock::now();
  close(go[1]);  // EOF wakes every child at once
  std::vector<ChildReport> reports;
  ChildReport r;
  while (read(results[0], &r, sizeof r) == ssize_t(sizeof r)) reports.push_back(r);
  double wallMs = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  for (pid_t pid : children) waitpid(pid, nullptr, 0);

  std::vector<double> total, connect, resolve, cpu;
  int64_t ok = 0, bytes = 0, fromServer = 0, fromCache = 0, errors = 0;
  std::map<std::string, int> sources;
  for (const auto& x : reports) {
    total.push_back(x.totalMs);
    connect.push_back(x.connectMs);
    resolve.push_back(x.resolveMs);
    cpu.push_back(x.cpuMs);
    ok += x.ok;
    bytes += x.bytesFromServer;
    fromServer += x.objectsFromServer;
    fromCache += x.objectsFromCache;
    errors += x.errors;
    ++sources[x.source >= 0 ? client::sourceName(client::Source(x.source)) : "failed"];
  }
  nlohmann::json out = {{"processes", n},
                        {"reported", reports.size()},
                        {"all_keys_resolved", ok},
                        {"key_errors", errors},
                        {"keys_per_process", keys.size()},
                        {"wall_ms", wallMs},
                        {"latency_ms", {{"p50", percentile(total, 0.5)}, {"p99", percentile(total, 0.99)},
                                        {"max", percentile(total, 1.0)}}},
                        {"connect_ms_p50", percentile(connect, 0.5)},
                        {"resolve_ms_p50", percentile(resolve, 0.5)},
                        {"cpu_ms_p50", percentile(cpu, 0.5)},
                        {"objects_from_server", fromServer},
                        {"bytes_from_server", bytes},
                        {"objects_from_cache", fromCache},
                        {"shared_cache", shared},
                        {"answered_by", sources}};
  std::cout << out.dump() << "\n";
  return ok == n ? 0 : 1;
}
