#include "ops/shape_set.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace mxfp6::ops {

Expected<std::vector<ShapeEntry>> parseShapeSet(std::string_view text, const std::string& file) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::error(file + ": not valid JSON");
  if (!j.is_object() || !j.contains("entries") || !j["entries"].is_array())
    return Status::error(file + ": expected an object with an \"entries\" array");
  std::vector<ShapeEntry> out;
  size_t index = 0;
  for (const nlohmann::json& e : j["entries"]) {
    std::string where = file + ": entries[" + std::to_string(index++) + "]";
    try {
      if (!e.is_object()) return Status::error(where + ": not an object");
      std::string site = e.value("site", std::string());
      if (!site.empty()) where += " (" + site + ")";
      std::string opName = e.at("op").get<std::string>();
      const OpSpec* op = findOp(opName);
      if (!op) {
        std::string names;
        for (const OpSpec& o : opTable()) names += (names.empty() ? "" : ", ") + o.name;
        return Status::error(where + ": unknown op '" + opName + "' (ops: " + names + ")");
      }
      std::map<std::string, std::string> given;
      if (e.contains("variant"))
        for (const auto& [k, v] : e["variant"].items()) given[k] = v.get<std::string>();
      auto variant = resolveVariant(*op, given);
      if (!variant) return Status::error(where + ": " + variant.status().message());
      for (const auto& [k, v] : e.items())
        if (k != "site" && k != "op" && k != "variant" && k != "size" && k != "heads" && k != "tokens_per_sample" &&
            k != "tokens" && k != "calls_per_step")
          return Status::error(where + ": unknown field '" + k + "'");
      if (!e.contains("tokens") || !e["tokens"].is_array() || e["tokens"].empty())
        return Status::error(where + ": \"tokens\" must be a non-empty array of token counts");
      for (const nlohmann::json& t : e["tokens"]) {
        Problem p;
        p.op = op;
        p.variant = *variant;
        p.size = e.value("size", int64_t{0});
        p.heads = e.value("heads", int64_t{1});
        p.tokensPerSample = e.value("tokens_per_sample", int64_t{0});
        p.tokens = t.get<int64_t>();
        if (Status s = validateProblem(p); !s) return Status::error(where + ": " + s.message());
        out.push_back({site, p, e.value("calls_per_step", int64_t{0})});
      }
    } catch (const nlohmann::json::exception& ex) {
      return Status::error(where + ": " + ex.what());
    }
  }
  if (out.empty()) return Status::error(file + ": no entries");
  return out;
}

Expected<std::vector<ShapeEntry>> loadShapeSet(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot read the shape file");
  std::stringstream buf;
  buf << in.rdbuf();
  return parseShapeSet(buf.str(), path);
}

}  // namespace mxfp6::ops
