#include "compiler/frontend/knobs.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <vector>

namespace mxfp6::frontend {
namespace {

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

constexpr KnobInfo kKnobs[] = {
    {Knob::Rows, "ROWS", 1, 1, kNoMax, "rows per program"},
    {Knob::Threads, "THREADS", 1, 1, kNoMax,
     "threads per row: a multiple of the subgroup size, or a power of two below it"},
    {Knob::Vec, "VEC", 1, 1, kNoMax, "elements per vector access of a thread"},
    {Knob::Prefetch, "PREFETCH", 1, 0, 2,
     "0: loads where the body reads them; 1: a row's loads before its first reduction; "
     "2: also pipelines loops one trip ahead"},
    {Knob::Stage, "STAGE", 1, 0, 1, "packed-byte stores through the warp's staging buffer"},
    {Knob::Serial, "SERIAL", 1, 1, kNoMax, "row groups of ROWS rows one program walks in a loop"},
    {Knob::Async, "ASYNC", 0, 0, kNoMax,
     "trips ahead that pipelined loops copy rows to shared memory asynchronously (NVIDIA)"},
    {Knob::Predicate, "PREDICATE", 0, 0, 1, "predicated stores instead of a branch around them (NVIDIA)"},
    {Knob::Interleave, "INTERLEAVE", 1, 1, kNoMax, "rows each thread computes side by side"},
    {Knob::Anchor, "ANCHOR", 0, 0, 1, "loads issued before a reduction are made inputs of it"},
    {Knob::Invariants, "INVARIANTS", 0, 0, 1, "row-invariant loads staged once in shared memory"},
    {Knob::Scalars, "SCALARS", 0, 0, 1, "per-row scalar stores gathered into whole sectors"},
    {Knob::Overlap, "OVERLAP", 0, 0, 1,
     "wait for the previous grid at entry (programmatic dependent launch, NVIDIA)"},
    {Knob::MinProgs, "MINPROGS", 0, 0, kNoMax,
     "resident programs per SM/CU asked of the register allocator (0: the compiler's choice)"},
};

/// Levenshtein distance, small strings only.
size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::span<const KnobInfo> knobTable() { return kKnobs; }

const KnobInfo& knobInfo(Knob knob) { return kKnobs[static_cast<int>(knob)]; }

const KnobInfo* findKnob(std::string_view name) {
  for (const KnobInfo& k : kKnobs)
    if (name == k.name) return &k;
  return nullptr;
}

const KnobInfo* nearestKnob(std::string_view name) {
  const KnobInfo* best = nullptr;
  size_t bestDistance = 3;
  for (const KnobInfo& k : kKnobs) {
    size_t d = editDistance(name, k.name);
    if (d < bestDistance) best = &k, bestDistance = d;
  }
  return best;
}

std::string legalValuesText(const KnobInfo& info) {
  if (info.max == kNoMax) return "at least " + std::to_string(info.min);
  std::string s;
  for (int64_t v = info.min; v <= info.max; ++v)
    s += (v == info.min ? "" : v == info.max ? " or " : ", ") + std::to_string(v);
  return s;
}

int64_t knobValue(const kir::Kernel& kernel, Knob knob) {
  const KnobInfo& info = knobInfo(knob);
  return kernel.configValue(info.name, info.absent);
}

const kir::SourceLoc& knobLoc(const kir::Kernel& kernel, Knob knob) {
  auto it = kernel.configLocs.find(knobInfo(knob).name);
  return it == kernel.configLocs.end() ? kernel.loc : it->second;
}

std::string knobTableText() {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-11s %-7s %-12s %s\n", "knob", "default", "legal", "meaning");
  out += line;
  for (const KnobInfo& k : kKnobs) {
    std::snprintf(line, sizeof line, "%-11s %-7lld %-12s %s\n", k.name, static_cast<long long>(k.absent),
                  legalValuesText(k).c_str(), k.meaning);
    out += line;
  }
  return out;
}

}  // namespace mxfp6::frontend
