#include "autotune/key_text.h"

#include <set>
#include <sstream>

#include "ops/plan.h"

namespace mxfp6::autotune {

Expected<Key> parseKeyText(KernelDb& db, const std::string& text, const std::optional<std::string>& toolchain,
                           KeyTextError& error) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, '/');) parts.push_back(part);
  if (!text.empty() && text.back() == '/') parts.push_back("");
  error.usage = true;
  if (parts.size() != 5) return Status::error("key '" + text + "' is not op/variant/target/sizes/M");
  Key key;
  key.family = FamilyKey{parts[0], parts[1], parts[2], parts[3], ""};
  try {
    size_t used = 0;
    key.rows = std::stoll(parts[4], &used);
    if (used != parts[4].size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    return Status::error("key '" + text + "': M '" + parts[4] + "' is not an integer");
  }
  error.usage = false;
  if (toolchain) {
    key.family.toolchain = *toolchain;
    return key;
  }
  ASSIGN_OR_RETURN(std::vector<FamilyKey> families, db.families());
  std::vector<std::string> toolchains;
  for (const FamilyKey& f : families)
    if (f.op == key.family.op && f.variant == key.family.variant && f.target == key.family.target &&
        f.sizes == key.family.sizes)
      toolchains.push_back(f.toolchain);
  if (toolchains.empty())
    return Status::error("no key family " + parts[0] + "/" + parts[1] + "/" + parts[2] + "/" + parts[3] + " in " +
                         db.path());
  if (toolchains.size() > 1) {
    std::string list;
    for (const std::string& t : toolchains) list += (list.empty() ? "" : ", ") + t;
    error.usage = true;
    return Status::error("key " + text + " exists for " + std::to_string(toolchains.size()) +
                         " toolchains; pick one with --toolchain: " + list);
  }
  key.family.toolchain = toolchains[0];
  return key;
}

Expected<Candidate> findCandidate(KernelDb& db, const FamilyKey& family, const std::string& planId,
                                  const std::string& config) {
  ASSIGN_OR_RETURN(std::vector<Candidate> candidates, db.candidates(family));
  if (!planId.empty()) {
    for (const Candidate& c : candidates)
      if (c.planId == planId) return c;
    return Status::error("no candidate '" + planId + "' in this family (" + std::to_string(candidates.size()) +
                         " candidates: mxfp6-db show lists them)");
  }
  ASSIGN_OR_RETURN(auto wanted, ops::parseConfig(config));
  if (wanted.empty()) return Status::error("give the plan with --plan ID or --config K=V,...");
  std::vector<const Candidate*> matches;
  for (const Candidate& c : candidates) {
    ASSIGN_OR_RETURN(ops::Plan plan, ops::parsePlan(c.planJson));
    std::set<std::string> has;
    if (plan.partials > 0) has.insert("P=" + std::to_string(plan.partials));
    for (const ops::PlanLaunch& l : plan.launches) {
      ASSIGN_OR_RETURN(auto kv, ops::parseConfig(l.config));
      for (const auto& [k, v] : kv) has.insert(k + "=" + v);
    }
    bool all = true;
    for (const auto& [k, v] : wanted) all = all && has.count(k + "=" + v);
    if (all) matches.push_back(&c);
  }
  if (matches.size() == 1) return *matches[0];
  if (matches.empty()) return Status::error("no candidate has " + config);
  std::string list;
  for (size_t i = 0; i < matches.size() && i < 8; ++i) list += "\n  " + matches[i]->planId;
  return Status::error(std::to_string(matches.size()) + " candidates have " + config +
                       "; name one with --plan or add keys:" + list);
}

}  // namespace mxfp6::autotune
