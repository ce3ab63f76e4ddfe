#include "ops/plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <optional>
#include <sstream>

namespace mxfp6::ops {
namespace {

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string_view::npos ? "" : std::string(s.substr(b, e - b + 1));
}

std::string joinValues(const std::vector<std::string>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + values[i];
  return out;
}

const FamilySpec* findFamily(const OpSpec& op, std::string_view name) {
  for (const FamilySpec& f : op.families)
    if (f.name == name) return &f;
  return nullptr;
}

using Config = std::map<std::string, std::string>;

/// The full compile config of a role's candidate: its tunables, the op's compile-time variant
/// values and the specialized size.
Config fullConfig(const OpSpec& op, const std::map<std::string, std::string>& variant, int64_t size,
                  const RoleSpec& role, const std::string& tunables) {
  auto config = parseConfig(tunables);
  Config all = config ? *config : Config{};
  if (!role.specialized) return all;
  for (const VariantAxis& axis : op.variants)
    if (axis.compileTime) all[axis.name] = variant.at(axis.name);
  if (!op.sizeName.empty() && size > 0) all[op.sizeName] = std::to_string(size);
  return all;
}

std::string compileConfig(const OpSpec& op, const std::map<std::string, std::string>& variant, int64_t size,
                          const RoleSpec& role, const std::string& tunables) {
  return canonicalConfig(fullConfig(op, variant, size, role, tunables));
}

/// A config value as the integer a kernel is compiled with: a compile-time variant's name as its
/// code, a number as itself; nullopt for anything else.
std::optional<int64_t> compiledValue(const OpSpec& op, const std::string& key, const std::string& value) {
  for (const VariantAxis& axis : op.variants)
    if (axis.compileTime && axis.name == key)
      for (size_t i = 0; i < axis.values.size() && i < axis.codes.size(); ++i)
        if (axis.values[i] == value) return axis.codes[i];
  int64_t n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size()) return std::nullopt;
  return n;
}

/// Whether two spellings of a config value are one value ("E3M2" and "1" for FMT).
bool sameValue(const OpSpec& op, const std::string& key, const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::optional<int64_t> x = compiledValue(op, key, a), y = compiledValue(op, key, b);
  return x && y && *x == *y;
}

/// How many entries of `candidate` `config` has with the same values; -1 when it lacks one.
int matchedEntries(const OpSpec& op, const Config& candidate, const Config& config) {
  for (const auto& [key, value] : candidate) {
    auto it = config.find(key);
    if (it == config.end() || !sameValue(op, key, it->second, value)) return -1;
  }
  return static_cast<int>(candidate.size());
}

/// The configs of one kernel's objects that a role launches at the variant and size (canonical):
/// those that are the table's candidates first, in its order, then the others as given.
std::vector<std::string> roleConfigsOf(const OpSpec& op, const std::map<std::string, std::string>& variant,
                                       int64_t size, const RoleSpec& role, const std::vector<Config>& given) {
  std::vector<Config> candidates;
  for (const std::string& tunables : role.configs)
    candidates.push_back(fullConfig(op, variant, size, role, tunables));
  std::vector<std::pair<size_t, size_t>> ranked;  // (its candidate or candidates.size(), its index in `given`)
  for (size_t g = 0; g < given.size(); ++g) {
    // A specialized kernel's objects of another variant or size are other code.
    if (matchedEntries(op, fullConfig(op, variant, size, role, ""), given[g]) < 0) continue;
    // The candidate it matches most: one that adds a tunable is not taken for one without it.
    size_t rank = candidates.size();
    for (int c = 0, best = -1; c < int(candidates.size()); ++c)
      if (int n = matchedEntries(op, candidates[c], given[g]); n > best) best = n, rank = c;
    ranked.push_back({rank, g});
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (const auto& [rank, g] : ranked) out.push_back(canonicalConfig(given[g]));
  return out;
}

/// Appends a family's plans over its roles' full configs and its P choices: the cross product,
/// counted as a mixed-radix number whose last digit (the P, then the last role) varies fastest,
/// so every role's first config with the first P comes first.
void appendFamilyPlans(const OpSpec& op, const FamilySpec& family,
                       const std::vector<std::vector<std::string>>& roleConfigs, std::vector<Plan>& plans) {
  std::vector<int64_t> partials = family.partials == Partials::PerSample ? family.partialChoices
                                                                         : std::vector<int64_t>{0};
  size_t total = partials.size();
  for (const std::vector<std::string>& configs : roleConfigs) total *= configs.size();
  for (size_t n = 0; n < total; ++n) {
    size_t rest = n;
    Plan plan{op.name, family.name, partials[rest % partials.size()], {}};
    rest /= partials.size();
    std::vector<size_t> index(family.roles.size());
    for (size_t r = family.roles.size(); r-- > 0;) {
      index[r] = rest % roleConfigs[r].size();
      rest /= roleConfigs[r].size();
    }
    for (size_t r = 0; r < family.roles.size(); ++r)
      plan.launches.push_back({family.roles[r].role, family.roles[r].kernel, roleConfigs[r][index[r]], ""});
    plans.push_back(std::move(plan));
  }
}

}  // namespace

std::string Plan::id() const {
  std::string out = family;
  if (partials > 0) out += " P=" + std::to_string(partials);
  out += ":";
  for (size_t i = 0; i < launches.size(); ++i)
    out += (i ? " + " : " ") + launches[i].kernel + "[" + launches[i].config + "]";
  return out;
}

std::string canonicalConfig(const std::map<std::string, std::string>& config) {
  std::string out;
  for (const auto& [k, v] : config) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

Expected<std::map<std::string, std::string>> parseConfig(std::string_view text) {
  std::map<std::string, std::string> out;
  std::string s(text);
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::string entry = trim(item);
    if (entry.empty()) continue;
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size())
      return Status::error("config entry '" + entry + "' is not KEY=VALUE");
    std::string key = trim(entry.substr(0, eq)), value = trim(entry.substr(eq + 1));
    if (!out.emplace(key, value).second) return Status::error("config key '" + key + "' given twice");
  }
  return out;
}

Expected<std::map<std::string, std::string>> resolveVariant(const OpSpec& op,
                                                            const std::map<std::string, std::string>& given) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : given) {
    auto axis = std::find_if(op.variants.begin(), op.variants.end(), [&](const VariantAxis& a) { return a.name == name; });
    if (axis == op.variants.end()) {
      std::vector<std::string> names;
      for (const VariantAxis& a : op.variants) names.push_back(a.name);
      return Status::error(op.name + " has no variant '" + name + "'" +
                           (names.empty() ? " (it has none)" : " (its variants: " + joinValues(names) + ")"));
    }
    if (std::find(axis->values.begin(), axis->values.end(), value) == axis->values.end())
      return Status::error(op.name + ": " + name + " must be one of " + joinValues(axis->values) + ", got " + value);
    out[name] = value;
  }
  for (const VariantAxis& axis : op.variants) out.emplace(axis.name, axis.values.front());
  return out;
}

int64_t Problem::rows() const { return tokens * heads; }

std::string Problem::sizes() const {
  return op && !op->sizeName.empty() ? op->sizeName + "=" + std::to_string(size) : "";
}

namespace {
bool keyedByHeads(const OpSpec& op) { return op.rowsMeaning == "rows"; }
bool keyedBySample(const OpSpec& op) { return op.perSample; }
}  // namespace

std::string Problem::variantText() const {
  std::map<std::string, std::string> all = variant;
  if (op && keyedByHeads(*op)) all["H"] = std::to_string(heads);
  if (op && keyedBySample(*op)) all["S"] = std::to_string(tokensPerSample);
  return canonicalConfig(all);
}

Expected<Problem> problemFromKey(const std::string& opName, const std::string& variantText, const std::string& sizes,
                                 int64_t rows) {
  const OpSpec* op = findOp(opName);
  if (!op) {
    std::string names;
    for (const OpSpec& o : opTable()) names += (names.empty() ? "" : ", ") + o.name;
    return Status::error("unknown op '" + opName + "' (ops: " + names + ")");
  }
  ASSIGN_OR_RETURN(auto variant, parseConfig(variantText));
  Problem p;
  p.op = op;
  auto number = [&](const std::string& name, const std::string& text) -> Expected<int64_t> {
    try {
      size_t used = 0;
      int64_t v = std::stoll(text, &used);
      if (used != text.size()) throw std::invalid_argument(text);
      return v;
    } catch (const std::exception&) {
      return Status::error(opName + ": " + name + " must be an integer, got '" + text + "'");
    }
  };
  if (keyedByHeads(*op)) {
    if (!variant.count("H")) return Status::error(opName + ": the key's variant needs H (heads)");
    ASSIGN_OR_RETURN(p.heads, number("H", variant["H"]));
    variant.erase("H");
    if (p.heads < 1 || rows % p.heads != 0)
      return Status::error(opName + ": rows (" + std::to_string(rows) + ") must be a multiple of H (" +
                           std::to_string(p.heads) + ")");
  }
  if (keyedBySample(*op)) {
    if (!variant.count("S")) return Status::error(opName + ": the key's variant needs S (tokens per sample)");
    ASSIGN_OR_RETURN(p.tokensPerSample, number("S", variant["S"]));
    variant.erase("S");
  }
  ASSIGN_OR_RETURN(p.variant, resolveVariant(*op, variant));
  p.tokens = p.heads > 0 ? rows / p.heads : rows;
  if (!sizes.empty()) {
    ASSIGN_OR_RETURN(auto sz, parseConfig(sizes));
    if (sz.size() != 1 || sz.begin()->first != op->sizeName)
      return Status::error(opName + ": sizes must be " + (op->sizeName.empty() ? "empty" : op->sizeName + "=N") +
                           ", got '" + sizes + "'");
    ASSIGN_OR_RETURN(p.size, number(op->sizeName, sz.begin()->second));
  } else if (!op->sizeName.empty()) {
    return Status::error(opName + ": the key needs its size " + op->sizeName);
  }
  RETURN_IF_ERROR(validateProblem(p));
  return p;
}

Status validateProblem(const Problem& p) {
  if (!p.op) return Status::error("no op");
  const OpSpec& op = *p.op;
  if (!op.sizeName.empty() &&
      std::find(op.sizeValues.begin(), op.sizeValues.end(), p.size) == op.sizeValues.end()) {
    std::vector<std::string> sizes;
    for (int64_t s : op.sizeValues) sizes.push_back(std::to_string(s));
    return Status::error(op.name + ": " + op.sizeName + " must be one of " + joinValues(sizes) + ", got " +
                         std::to_string(p.size));
  }
  if (op.sizeName.empty() && p.size != 0)
    return Status::error(op.name + " has no specialized size, got " + std::to_string(p.size));
  if (p.tokens < 1) return Status::error(op.name + ": tokens must be >= 1, got " + std::to_string(p.tokens));
  if (p.heads < 1) return Status::error(op.name + ": heads must be >= 1, got " + std::to_string(p.heads));
  if (op.rowsMeaning == "tokens" && p.heads != 1)
    return Status::error(op.name + " has no heads (its rows are tokens), got heads = " + std::to_string(p.heads));
  if (p.tokens > INT32_MAX / p.heads)
    return Status::error(op.name + ": " + std::to_string(p.tokens) + " tokens x " + std::to_string(p.heads) +
                         " heads exceed the 2^31 - 1 rows the kernels index");
  if (op.perSample) {
    if (p.tokensPerSample < 1 || p.tokens % p.tokensPerSample != 0)
      return Status::error(op.name + ": tokens (" + std::to_string(p.tokens) +
                           ") must be a positive multiple of tokens_per_sample (" + std::to_string(p.tokensPerSample) +
                           ")");
  } else if (p.tokensPerSample != 0) {
    return Status::error(op.name + " takes no tokens_per_sample (its modulation is not per sample)");
  }
  if (p.tokens % op.tokenMultiple != 0)
    return Status::error(op.name + ": tokens (" + std::to_string(p.tokens) + ") must be a multiple of " +
                         std::to_string(op.tokenMultiple) + " (whole 32-row blocks)");
  return Status::ok();
}

std::vector<Plan> candidatePlans(const OpSpec& op, const std::map<std::string, std::string>& variant, int64_t size) {
  std::vector<Plan> plans;
  for (const FamilySpec& family : op.families) {
    std::vector<std::vector<std::string>> roleConfigs;
    for (const RoleSpec& role : family.roles) {
      roleConfigs.emplace_back();
      for (const std::string& tunables : role.configs)
        roleConfigs.back().push_back(compileConfig(op, variant, size, role, tunables));
    }
    appendFamilyPlans(op, family, roleConfigs, plans);
  }
  return plans;
}

Expected<std::vector<Plan>> plansOfConfigs(const OpSpec& op, const std::map<std::string, std::string>& variant,
                                           int64_t size,
                                           const std::map<std::string, std::vector<std::string>>& configsByKernel) {
  std::map<std::string, std::vector<Config>> given;
  for (const auto& [kernel, texts] : configsByKernel) {
    std::vector<Config>& configs = given[kernel];
    for (const std::string& text : texts) {
      auto config = parseConfig(text);
      if (!config) return Status::error(kernel + " config '" + text + "': " + config.status().message());
      if (std::find(configs.begin(), configs.end(), *config) == configs.end()) configs.push_back(config.take());
    }
  }
  std::vector<Plan> plans;
  for (const FamilySpec& family : op.families) {
    std::vector<std::vector<std::string>> roleConfigs;
    for (const RoleSpec& role : family.roles) {
      auto it = given.find(role.kernel);
      if (it == given.end()) break;
      roleConfigs.push_back(roleConfigsOf(op, variant, size, role, it->second));
      if (roleConfigs.back().empty()) break;
    }
    bool everyRole = roleConfigs.size() == family.roles.size() && !roleConfigs.back().empty();
    if (everyRole) appendFamilyPlans(op, family, roleConfigs, plans);
  }
  return plans;
}

Status checkCompiledConfig(const OpSpec& op, const std::string& config, const std::map<std::string, int64_t>& compiled,
                           const std::vector<std::string>& tunables) {
  ASSIGN_OR_RETURN(Config wanted, parseConfig(config));
  for (const auto& [key, value] : wanted) {
    auto it = compiled.find(key);
    if (it == compiled.end()) return Status::error("it has no " + key + " (the launch's " + key + "=" + value + ")");
    if (!sameValue(op, key, value, std::to_string(it->second)))
      return Status::error("its " + key + " is " + std::to_string(it->second) + ", the launch's " + value);
  }
  for (const auto& [key, value] : compiled)
    if (!wanted.count(key) && std::find(tunables.begin(), tunables.end(), key) == tunables.end())
      return Status::error("its " + key + "=" + std::to_string(value) +
                           " is not a tunable and the launch's config lacks it");
  return Status::ok();
}

Plan defaultPlan(const OpSpec& op, const std::map<std::string, std::string>& variant, int64_t size) {
  return candidatePlans(op, variant, size).front();
}

Status planApplies(const Plan& plan, const Problem& problem) {
  const FamilySpec* family = problem.op ? findFamily(*problem.op, plan.family) : nullptr;
  if (!family) return Status::error("plan " + plan.id() + " is not of op " + (problem.op ? problem.op->name : "?"));
  if (problem.tokens % family->tokenMultiple != 0)
    return Status::error("family " + family->name + " needs tokens in multiples of " +
                         std::to_string(family->tokenMultiple));
  if (family->partials == Partials::PerSample && plan.partials > problem.tokensPerSample)
    return Status::error("P = " + std::to_string(plan.partials) + " exceeds the " +
                         std::to_string(problem.tokensPerSample) + " tokens of a sample");
  for (const PlanLaunch& launch : plan.launches) {
    auto config = parseConfig(launch.config);
    if (!config) return config.status();
    auto get = [&](const char* k) -> int64_t {
      auto it = config->find(k);
      return it == config->end() ? 0 : std::stoll(it->second);
    };
    if (launch.role == "transpose") {
      int64_t blocks = problem.tokens / 32, cols = 3 * problem.heads * 128;
      if (get("GB") > 0 && blocks % get("GB") != 0)
        return Status::error("the scales transpose's GB = " + std::to_string(get("GB")) + " does not divide the " +
                             std::to_string(blocks) + " token blocks");
      if (get("W") > 0 && cols % get("W") != 0)
        return Status::error("the scales transpose's W = " + std::to_string(get("W")) + " does not divide C = " +
                             std::to_string(cols));
    }
    if ((launch.kernel == "mxfp6_pack_cols" || launch.kernel == "mxfp6_pack_dual") && get("HB") > 0 &&
        problem.tokens % (32 * get("HB")) != 0)
      return Status::error(launch.kernel + " with HB = " + std::to_string(get("HB")) + " needs tokens in multiples of " +
                           std::to_string(32 * get("HB")));
  }
  return Status::ok();
}

std::string planToJson(const Plan& plan) {
  nlohmann::json launches = nlohmann::json::array();
  for (const PlanLaunch& l : plan.launches)
    launches.push_back({{"role", l.role}, {"kernel", l.kernel}, {"config", l.config}, {"object", l.object}});
  nlohmann::json j = {{"op", plan.op}, {"family", plan.family}, {"partials", plan.partials}, {"launches", launches}};
  return j.dump();
}

Expected<Plan> parsePlan(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::error("plan: not a JSON object");
  try {
    Plan plan;
    plan.op = j.at("op").get<std::string>();
    plan.family = j.at("family").get<std::string>();
    plan.partials = j.value("partials", int64_t{0});
    for (const auto& l : j.at("launches"))
      plan.launches.push_back({l.at("role").get<std::string>(), l.at("kernel").get<std::string>(),
                               l.at("config").get<std::string>(), l.value("object", std::string())});
    const OpSpec* op = findOp(plan.op);
    if (!op) return Status::error("plan: unknown op '" + plan.op + "'");
    const FamilySpec* family = findFamily(*op, plan.family);
    if (!family) return Status::error("plan: op " + plan.op + " has no family '" + plan.family + "'");
    if (family->roles.size() != plan.launches.size())
      return Status::error("plan: family " + plan.family + " has " + std::to_string(family->roles.size()) +
                           " launch roles, the plan " + std::to_string(plan.launches.size()));
    for (size_t i = 0; i < plan.launches.size(); ++i)
      if (plan.launches[i].role != family->roles[i].role || plan.launches[i].kernel != family->roles[i].kernel)
        return Status::error("plan: launch " + std::to_string(i) + " is " + plan.launches[i].kernel + " as " +
                             plan.launches[i].role + ", the family declares " + family->roles[i].kernel + " as " +
                             family->roles[i].role);
    return plan;
  } catch (const nlohmann::json::exception& e) {
    return Status::error(std::string("plan: ") + e.what());
  }
}

}  // namespace mxfp6::ops
