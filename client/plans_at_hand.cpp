// Plans of code objects at hand (client/mxfp6_client.h, mxc_key_plans and mxc_op_from_plan): for
// callers that hold code objects themselves (the benchmark harness times every plan of a folder)
// rather than resolving keys. The plans come from the op table (ops::plansOfConfigs), the op is
// made as a resolved one is (client::makeOp), so a plan timed here runs exactly as it would when
// served.
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/c_handles.h"
#include "client/client.h"
#include "client/mxfp6_client.h"
#include "ops/plan.h"
#include "support/sha256.h"

namespace {

using mxfp6::Expected;
using mxfp6::Status;
using mxfp6::client::setError;
namespace client = mxfp6::client;
namespace ops = mxfp6::ops;

/// configs_json: {"KERNEL": ["K=V,...", ...], ...}; errors name what is malformed.
Expected<std::map<std::string, std::vector<std::string>>> parseConfigsByKernel(const char* text) {
  nlohmann::json j = nlohmann::json::parse(text ? text : "", nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::error("configs_json is not a JSON object of kernel names to lists of configs");
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [kernel, configs] : j.items()) {
    if (!configs.is_array()) return Status::error("configs_json: \"" + kernel + "\" is not a list of configs");
    for (const auto& config : configs) {
      if (!config.is_string())
        return Status::error("configs_json: \"" + kernel + "\" has " + config.dump() + ", not a \"K=V,...\" string");
      out[kernel].push_back(config.get<std::string>());
    }
  }
  return out;
}

/// The launch metadata's "tunables" (the keys of its "config" a launch config may leave at their
/// defaults).
std::vector<std::string> tunablesOf(const std::string& metadataJson) {
  nlohmann::json j = nlohmann::json::parse(metadataJson, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> out;
  if (!j.is_object() || !j.contains("tunables") || !j["tunables"].is_array()) return out;
  for (const auto& t : j["tunables"])
    if (t.is_string()) out.push_back(t.get<std::string>());
  return out;
}

/// A launch metadata's "config" as "K=V,...".
std::string spelled(const std::map<std::string, int64_t>& config) {
  std::map<std::string, std::string> text;
  for (const auto& [k, v] : config) text[k] = std::to_string(v);
  return ops::canonicalConfig(text);
}

/// Whether each launch's object is of its kernel and config, naming both when not.
Status checkObjects(const mxc_op& op) {
  for (size_t i = 0; i < op.plan.launches.size(); ++i) {
    const ops::PlanLaunch& launch = op.plan.launches[i];
    const mxfp6::rt::KernelMetadata& metadata = op.metadata[i];
    std::string which = "launch " + std::to_string(i) + " (" + launch.role + ")";
    if (metadata.kernel != launch.kernel)
      return Status::error(which + " runs " + launch.kernel + " but its code object is of kernel " + metadata.kernel);
    Status same = ops::checkCompiledConfig(*op.problem.op, launch.config, metadata.config,
                                           tunablesOf(op.objects[i].metadataJson));
    if (!same)
      return Status::error(which + " runs " + launch.kernel + "[" + launch.config +
                           "] but its code object is compiled with [" + spelled(metadata.config) +
                           "]: " + same.message());
  }
  return Status::ok();
}

}  // namespace

extern "C" {

size_t mxc_key_plans(const char* key, const char* configs_json, char* out, size_t out_size, char* error,
                     size_t error_size) {
  try {
    std::string keyText = key ? key : "";
    auto k = client::parseOpKey(keyText);
    if (!k) return setError(error, error_size, k.status().message()), 0;
    auto problem = ops::problemFromKey(k->op, k->variant, k->sizes, k->rows);
    if (!problem) return setError(error, error_size, keyText + ": " + problem.status().message()), 0;
    auto configs = parseConfigsByKernel(configs_json);
    if (!configs) return setError(error, error_size, configs.status().message()), 0;
    auto plans = ops::plansOfConfigs(*problem->op, problem->variant, problem->size, *configs);
    if (!plans) return setError(error, error_size, "configs_json: " + plans.status().message()), 0;
    std::string text = "[";
    for (const ops::Plan& plan : *plans)
      if (ops::planApplies(plan, *problem)) text += (text.size() > 1 ? "," : "") + ops::planToJson(plan);
    return client::copyOut(text + "]", out, out_size);
  } catch (const std::exception& e) {
    return setError(error, error_size, e.what()), 0;
  }
}

mxc_op* mxc_op_from_plan(const char* key, const char* plan_json, size_t n_objects, const void* const* objects,
                         const size_t* sizes, const char* const* metadata_json, char* error, size_t error_size) {
  try {
    std::string keyText = key ? key : "";
    auto k = client::parseOpKey(keyText);
    if (!k) return setError(error, error_size, k.status().message()), nullptr;
    auto plan = ops::parsePlan(plan_json ? plan_json : "");
    if (!plan) return setError(error, error_size, keyText + ": " + plan.status().message()), nullptr;
    if (plan->op != k->op) return setError(error, error_size, keyText + ": the plan is of op " + plan->op), nullptr;
    if (n_objects > 0 && (objects == nullptr || sizes == nullptr || metadata_json == nullptr))
      return setError(error, error_size, "mxc_op_from_plan: objects, sizes or metadata_json is NULL"), nullptr;
    std::vector<client::Object> given;
    for (size_t i = 0; i < n_objects; ++i) {
      if (objects[i] == nullptr || metadata_json[i] == nullptr)
        return setError(error, error_size, "mxc_op_from_plan: object " + std::to_string(i) + " is NULL"), nullptr;
      client::Object o;
      o.bytes.assign(static_cast<const char*>(objects[i]), sizes[i]);
      o.sha256 = mxfp6::sha256Hex(o.bytes);
      o.target = k->target;
      o.metadataJson = metadata_json[i];
      if (i < plan->launches.size()) {
        o.kernel = plan->launches[i].kernel;
        o.config = plan->launches[i].config;
        plan->launches[i].object = o.sha256;
      }
      given.push_back(std::move(o));
    }
    auto op = client::makeOp(keyText, *k, *plan, "", std::move(given));
    if (!op) return setError(error, error_size, keyText + ": " + op.status().message()), nullptr;
    if (Status applies = ops::planApplies((*op)->plan, (*op)->problem); !applies)
      return setError(error, error_size, keyText + ": plan " + (*op)->planId + " cannot run it: " + applies.message()),
             nullptr;
    if (Status s = checkObjects(**op); !s) return setError(error, error_size, keyText + ": " + s.message()), nullptr;
    return op.take().release();
  } catch (const std::exception& e) {
    return setError(error, error_size, e.what()), nullptr;
  }
}

}  // extern "C"
