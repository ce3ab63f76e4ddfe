#include "tools/mxfp6c/fetch.h"

#include <cstdio>
#include <iostream>
#include <set>

#include "client/client.h"
#include "ops/shape_set.h"

namespace mxfp6::cli {

int fetchCommand(const std::map<std::string, std::string>& flags) {
  if (!flags.count("--shapes") || flags.count("--server") == flags.count("--db")) {
    std::cerr << "mxfp6c: error: fetch needs --shapes FILE and one of --server HOST:PORT[,...] or --db DB\n";
    return 2;
  }
  auto shapes = ops::loadShapeSet(flags.at("--shapes"));
  if (!shapes) return std::cerr << "mxfp6c: error: " << shapes.status().message() << "\n", 1;
  std::string target = flags.count("--target") ? flags.at("--target") : "sm_90";
  auto options = client::parseUri(flags.count("--db") ? "sqlite://" + flags.at("--db") : "grpc://" + flags.at("--server"));
  if (!options) return std::cerr << "mxfp6c: error: " << options.status().message() << "\n", 1;
  if (flags.count("--cache")) options->cacheDir = flags.at("--cache");
  if (flags.count("--fresh-for")) options->freshFor = std::chrono::seconds(std::atoll(flags.at("--fresh-for").c_str()));
  if (flags.count("--deadline-ms")) options->deadline = std::chrono::milliseconds(std::atoll(flags.at("--deadline-ms").c_str()));

  std::vector<client::OpKey> keys;
  std::set<std::string> seen;
  for (const ops::ShapeEntry& e : *shapes) {
    client::OpKey k = client::keyOf(e.problem, target);
    if (seen.insert(k.text()).second) keys.push_back(k);
  }
  auto connectStart = std::chrono::steady_clock::now();
  auto c = client::Client::connect(*options);
  if (!c) return std::cerr << "mxfp6c: error: " << c.status().message() << "\n", 1;
  double connectMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - connectStart).count();
  auto r = (*c)->resolve(keys);
  if (!r) return std::cerr << "mxfp6c: error: " << r.status().message() << "\n", 1;

  std::map<std::string, int> byRule;
  int compiledNow = 0;
  for (const client::ResolvedOp& op : r->ops) {
    ++byRule[op.rule];
    compiledNow += op.compiledNow;
  }
  int64_t objectBytes = 0;
  for (const auto& o : r->objects) objectBytes += int64_t(o->bytes.size());
  std::printf("fetch: %zu keys of %s for %s: %s\n", keys.size(), flags.at("--shapes").c_str(), target.c_str(),
              r->status.c_str());
  std::printf("  resolved %zu: %d exact, %d nearest, %d default, %d pinned%s; %zu failed\n", r->ops.size(),
              byRule["exact"], byRule["nearest"], byRule["default"], byRule["pinned"],
              compiledNow ? (" (" + std::to_string(compiledNow) + " compiled by the server now)").c_str() : "",
              r->errors.size());
  std::printf("  code objects: %zu (%lld bytes); %lld over the wire (%lld bytes), %lld from the node cache\n",
              r->objects.size(), (long long)objectBytes, (long long)r->objectsFromServer,
              (long long)r->bytesFromServer, (long long)r->objectsFromCache);
  std::printf("  time: connect %.1f ms, resolve %.1f ms\n", connectMs, r->seconds * 1000);
  for (const auto& [key, why] : r->errors) std::printf("  FAILED %s: %s\n", key.text().c_str(), why.c_str());
  return r->errors.empty() ? 0 : 1;
}

}  // namespace mxfp6::cli
