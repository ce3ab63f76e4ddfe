#include "autotune/selection.h"

#include <algorithm>
#include <cstdio>

namespace mxfp6::autotune {
namespace {

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %%", 100 * x);
  return buf;
}

}  // namespace

double median(std::vector<double> s) {
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  size_t n = s.size();
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

Choice select(const std::vector<Measured>& candidates, const std::optional<std::string>& incumbent,
              const SelectionOptions& options) {
  struct Row {
    const Measured* m;
    double med;
  };
  std::vector<Row> rows;
  for (const Measured& m : candidates)
    if (m.passedGate && !m.samplesUs.empty()) rows.push_back({&m, median(m.samplesUs)});
  Choice choice;
  if (rows.empty()) {
    choice.rule = "no candidate passed its correctness gate";
    return choice;
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.med < b.med; });
  const Row& best = rows.front();
  std::vector<const Row*> set;
  for (const Row& r : rows)
    if (r.med <= best.med * (1 + options.band)) set.push_back(&r);
  for (const Row* r : set) choice.equivalent.push_back(r->m->planId);
  double spread = set.back()->med / best.med - 1;
  std::string within = std::to_string(set.size()) + " candidate" + (set.size() == 1 ? "" : "s") +
                       " within " + percent(options.band) + " of the best (medians within " +
                       percent(spread) + ")";
  if (incumbent) {
    for (const Row& r : rows)
      if (r.m->planId == *incumbent && r.med <= best.med * (1 + options.incumbentBand)) {
        if (std::find(set.begin(), set.end(), &r) == set.end()) choice.equivalent.push_back(r.m->planId);
        choice.winner = *incumbent;
        choice.rule = "incumbent: " + percent(r.med / best.med - 1) + " from the best, within " +
                      percent(options.incumbentBand);
        return choice;
      }
  }
  if (set.size() == 1) {
    choice.winner = best.m->planId;
    choice.rule = "fastest, alone within " + percent(options.band) + " of its median";
    return choice;
  }
  const Row* pick = *std::min_element(set.begin(), set.end(), [](const Row* a, const Row* b) {
    if (a->m->resourceCost != b->m->resourceCost) return a->m->resourceCost < b->m->resourceCost;
    return a->m->ordinal < b->m->ordinal;
  });
  bool byResources = std::count_if(set.begin(), set.end(), [&](const Row* r) {
                       return r->m->resourceCost == pick->m->resourceCost;
                     }) == 1;
  choice.winner = pick->m->planId;
  choice.rule = (byResources ? "least resource use among " : "first in declaration order among ") + within;
  return choice;
}

}  // namespace mxfp6::autotune
