// Plans: one concrete way to run an op (ops/op_table.h), as stored in the database and served.
//
// A plan names its family, the P of a per-sample partials family, and per launch role the
// kernel and the full config it is compiled with (tunables, the op's compile-time variants and
// the specialized size). Everything else a launch needs (the reduction tree's levels, grids,
// views) is derived from the call's shape when it runs (ops/compose.h), so one plan serves every
// M of its key family.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ops/op_table.h"
#include "support/status.h"

namespace mxfp6::ops {

struct PlanLaunch {
  std::string role;
  std::string kernel;
  std::string config;  // canonical "K=V,..." (sorted by K): exactly what the object is compiled with
  std::string object;  // the code object's sha256 for one target, once precompiled ("" before)
};

struct Plan {
  std::string op;
  std::string family;
  int64_t partials = 0;  // P of a Partials::PerSample family; 0 otherwise
  std::vector<PlanLaunch> launches;

  /// The plan's canonical text, unique within a key family and independent of the target:
  /// "partials P=8: ln_modulate_bwd[THREADS=384,VEC=8] + ln_modulate_bwd_reduce[...]".
  std::string id() const;
};

/// "K=V,..." with keys sorted, from a map (the database's and the command line's spelling).
std::string canonicalConfig(const std::map<std::string, std::string>& config);
/// Parses "K=V,K=V" (spaces ignored); error on a malformed entry or a repeated key.
Expected<std::map<std::string, std::string>> parseConfig(std::string_view text);

/// The caller's choices of an op's variant axes, validated and with defaults filled: error for
/// an axis the op lacks or a value outside the axis ("mxfp6_pack_rows: FMT must be one of
/// E2M3, E3M2, got E4M3").
Expected<std::map<std::string, std::string>> resolveVariant(const OpSpec& op,
                                                            const std::map<std::string, std::string>& given);

/// What selects a key besides target and toolchain, and what plans derive sizes from.
struct Problem {
  const OpSpec* op = nullptr;
  std::map<std::string, std::string> variant;  // complete (resolveVariant)
  int64_t size = 0;              // the specialized size (D or C); 0 for ops without one
  int64_t tokens = 0;            // T (R for the packers)
  int64_t heads = 1;             // H of norm+RoPE ops; 1 otherwise
  int64_t tokensPerSample = 0;   // S of per-sample LN-modulate ops; 0 otherwise

  /// The key's M: tokens, or tokens * heads for ops whose rows are (token, head) pairs.
  int64_t rows() const;
  /// Canonical "D=3072" / "C=9216" / "".
  std::string sizes() const;
  /// The key's variant: the variant axes, plus H for norm+RoPE ops (the heads change the best
  /// plan and, for the prologue, the packed width) and S for per-sample LN-modulate ops (it bounds
  /// P and sets the sample walk), canonical "K=V,...".
  std::string variantText() const;
};

/// The problem of a key: op, variant text (variantText's spelling), sizes ("D=3072"), rows M.
/// Errors name the field that does not fit the op.
Expected<Problem> problemFromKey(const std::string& op, const std::string& variantText, const std::string& sizes,
                                 int64_t rows);

/// Checks a problem's sizes against its op: the size in the op's list, tokens >= 1 and within
/// the 32-bit row space, heads >= 1, the per-sample ops' tokens a multiple of S, the packers'
/// rows whole 32-row blocks where the columns are packed, ... Errors name the field.
Status validateProblem(const Problem& problem);

/// Every plan of the op at a variant and size (the cross product of each family's role configs
/// and partial choices), in declaration order: the default plan first. Shape-free: whether one
/// applies to a given M is planApplies.
std::vector<Plan> candidatePlans(const OpSpec& op, const std::map<std::string, std::string>& variant,
                                 int64_t size);
/// The plans that a set of code objects makes for the op at a variant and size. configsByKernel:
/// per kernel, the full configs its objects are compiled with ("K=V,..." in any key order; a
/// compile-time variant by name or by the code launch metadata reports, ops/op_table.h
/// VariantAxis::codes). A specialized role takes the configs of the variant and size, a shared
/// helper any of its kernel's; a family with a role without configs makes none. Each role's
/// configs in the table's order first (those that are a candidate's compileConfig, the one whose
/// keys they match most; a config may add tunables at the kernel's defaults, as launch metadata
/// spells them), then the others in the order given, so the default plan comes first where its
/// objects are given; the plans are candidatePlans' cross product over these, each launch's
/// config the one given (canonical, duplicates dropped). Error: a malformed config, naming it.
Expected<std::vector<Plan>> plansOfConfigs(const OpSpec& op, const std::map<std::string, std::string>& variant,
                                           int64_t size,
                                           const std::map<std::string, std::vector<std::string>>& configsByKernel);
/// Whether a code object compiled as `compiled` (its launch metadata's "config": every
/// specialization and tunable with defaults included, compile-time variants by code) with
/// `tunables` (the metadata's "tunables") is launch config `config`: each key of `config` has its
/// value there, and every other key there is a tunable `config` leaves to the kernel's default
/// (whose value only the compiler knows, so it is not checked). When not, the first difference.
Status checkCompiledConfig(const OpSpec& op, const std::string& config, const std::map<std::string, int64_t>& compiled,
                           const std::vector<std::string>& tunables);
/// The op's default plan at a variant and size (candidatePlans' first).
Plan defaultPlan(const OpSpec& op, const std::map<std::string, std::string>& variant, int64_t size);
/// Whether the plan can run this problem (its tiles divide the tokens, its P the samples' tokens,
/// ...); the reason when not.
Status planApplies(const Plan& plan, const Problem& problem);

/// The plan as JSON ({"op", "family", "partials", "launches": [{"role", "kernel", "config",
/// "object"}]}) and back; parsePlan checks the op, family and roles against the op table.
std::string planToJson(const Plan& plan);
Expected<Plan> parsePlan(std::string_view json);

}  // namespace mxfp6::ops
