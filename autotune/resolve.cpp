#include "autotune/resolve.h"

#include <cmath>

namespace mxfp6::autotune {

const char* ruleName(Rule rule) {
  switch (rule) {
    case Rule::Pinned: return "pinned";
    case Rule::Exact: return "exact";
    case Rule::Nearest: return "nearest";
    case Rule::Default: return "default";
  }
  return "?";
}

namespace {

Expected<ops::Plan> planOf(const std::vector<Candidate>& candidates, const std::string& planId, const Key& key) {
  for (const Candidate& c : candidates)
    if (c.planId == planId) return ops::parsePlan(c.planJson);
  return Status::error(formatKey(key) + ": plan '" + planId + "' is not among the family's precompiled candidates");
}

}  // namespace

Expected<Resolution> resolve(KernelDb& db, const Key& key, const ResolveOptions& options) {
  ASSIGN_OR_RETURN(ops::Problem problem,
                   ops::problemFromKey(key.family.op, key.family.variant, key.family.sizes, key.rows));
  ASSIGN_OR_RETURN(std::vector<Candidate> candidates, db.candidates(key.family));
  if (candidates.empty())
    return Status::error("no plan for " + formatKey(key) + ": nothing precompiled for this op, variant, target and "
                         "toolchain (run `mxfp6c precompile --shapes FILE --db " + db.path() + "` with this shape)");
  Resolution r;
  r.key = key;
  bool found = false;
  ASSIGN_OR_RETURN(std::optional<Pin> pin, db.pinFor(key));
  if (pin) {
    ASSIGN_OR_RETURN(r.plan, planOf(candidates, pin->planId, key));
    r.rule = Rule::Pinned;
    r.why = "pinned by " + pin->who + " at " + pin->createdAt + ": " + pin->why;
    found = true;
  }
  if (!found) {
    ASSIGN_OR_RETURN(std::optional<Selection> sel, db.selection(key));
    if (sel) {
      ASSIGN_OR_RETURN(r.plan, planOf(candidates, sel->winner, key));
      r.rule = Rule::Exact;
      r.why = "tuned at this shape (" + sel->tunedAt + "): " + sel->rule;
      found = true;
    }
  }
  if (!found) {
    ASSIGN_OR_RETURN(std::vector<Selection> tuned, db.selections(key.family));
    const Selection* nearest = nullptr;
    double bestDistance = 0;
    std::string skipped;
    for (const Selection& s : tuned) {
      double distance = std::fabs(std::log(double(s.key.rows)) - std::log(double(key.rows)));
      if (nearest && distance >= bestDistance) continue;
      auto plan = planOf(candidates, s.winner, key);
      if (!plan) continue;
      if (Status applies = ops::planApplies(*plan, problem); !applies) {
        skipped += " (M=" + std::to_string(s.key.rows) + "'s winner does not apply: " + applies.message() + ")";
        continue;
      }
      nearest = &s;
      bestDistance = distance;
    }
    if (nearest) {
      ASSIGN_OR_RETURN(r.plan, planOf(candidates, nearest->winner, key));
      r.rule = Rule::Nearest;
      r.fromRows = nearest->key.rows;
      r.why = "not tuned at M=" + std::to_string(key.rows) + "; the winner at the nearest tuned M=" +
              std::to_string(nearest->key.rows) + skipped;
      found = true;
    }
  }
  if (!found) {
    for (const Candidate& c : candidates) {  // ordinal order: the op's default first
      auto plan = ops::parsePlan(c.planJson);
      if (plan && ops::planApplies(*plan, problem)) {
        r.plan = *plan;
        break;
      }
    }
    if (r.plan.launches.empty())
      return Status::error("no precompiled plan of " + formatKey(key) + " applies to M=" + std::to_string(key.rows));
    r.rule = Rule::Default;
    r.why = "no tuned M in this family; the op's default plan";
  }
  if ((r.rule == Rule::Nearest || r.rule == Rule::Default) && options.recordMiss && !db.readOnly())
    RETURN_IF_ERROR(db.recordMiss(key, ruleName(r.rule)));
  if (options.withObjects) {
    for (const ops::PlanLaunch& launch : r.plan.launches) {
      ASSIGN_OR_RETURN(CodeObject object, db.object(launch.object));
      r.objects.push_back(std::move(object));
    }
  }
  return r;
}

}  // namespace mxfp6::autotune
