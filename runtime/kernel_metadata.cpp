// Parsing the launch metadata the code generator writes next to each code object. Every error
// names the field, since a bad field here would otherwise be a wrong launch later.
#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/runtime.h"

namespace mxfp6::rt {
namespace {

using nlohmann::json;

Status fieldError(const std::string& field, const std::string& problem) {
  return Status::error("kernel metadata: field '" + field + "' " + problem);
}

/// "got number" etc., for ill-typed fields.
std::string got(const json& value) { return std::string("got ") + value.type_name(); }

/// `key` of `object`; `field` is how messages name it ("abi[2].kind" for a nested key).
Expected<const json*> requireField(const json& object, const std::string& key,
                                   const std::string& field) {
  auto it = object.find(key);
  if (it == object.end()) return Status::error("kernel metadata: missing field '" + field + "'");
  return &*it;
}

Expected<const json*> requireField(const json& object, const std::string& key) {
  return requireField(object, key, key);
}

Expected<std::string> nonEmptyString(const json& value, const std::string& field) {
  if (!value.is_string()) return fieldError(field, "must be a string, " + got(value));
  std::string text = value.get<std::string>();
  if (text.empty()) return fieldError(field, "must not be empty");
  return text;
}

Expected<int64_t> integerInRange(const json& value, const std::string& field, int64_t lo,
                                 int64_t hi) {
  if (!value.is_number_integer()) return fieldError(field, "must be an integer, " + got(value));
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return fieldError(field, "is out of range");
  int64_t n = value.get<int64_t>();
  if (n < lo || n > hi)
    return fieldError(field, "is " + std::to_string(n) + ", must be in [" + std::to_string(lo) +
                                 ", " + std::to_string(hi) + "]");
  return n;
}

Expected<std::string> stringField(const json& object, const std::string& field) {
  ASSIGN_OR_RETURN(const json* value, requireField(object, field));
  return nonEmptyString(*value, field);
}

Expected<int64_t> integerField(const json& object, const std::string& field, int64_t lo,
                               int64_t hi) {
  ASSIGN_OR_RETURN(const json* value, requireField(object, field));
  return integerInRange(*value, field, lo, hi);
}

/// sm_<digits>[a] or gfx<digits/lowercase letters>: the two spellings the code generator emits.
bool isKnownTargetSpelling(const std::string& target) {
  auto allOf = [](const std::string& s, auto pred) {
    if (s.empty()) return false;
    for (char c : s)
      if (!pred(c)) return false;
    return true;
  };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  auto alnum = [&](char c) { return digit(c) || (c >= 'a' && c <= 'z'); };
  if (target.rfind("sm_", 0) == 0) {
    std::string rest = target.substr(3);
    if (!rest.empty() && rest.back() == 'a') rest.pop_back();
    return allOf(rest, digit);
  }
  if (target.rfind("gfx", 0) == 0) return allOf(target.substr(3), alnum);
  return false;
}

Expected<ArgKind> parseArgKind(const std::string& text, const std::string& field) {
  if (text == "ptr") return ArgKind::Pointer;
  if (text == "i32") return ArgKind::I32;
  if (text == "i64") return ArgKind::I64;
  if (text == "f32") return ArgKind::F32;
  return fieldError(field, "is '" + text + "', expected ptr, i32, i64 or f32");
}

Expected<std::vector<ArgSpec>> parseAbi(const json& object) {
  ASSIGN_OR_RETURN(const json* abi, requireField(object, "abi"));
  if (!abi->is_array()) return fieldError("abi", "must be an array, " + got(*abi));
  std::vector<ArgSpec> specs;
  for (size_t i = 0; i < abi->size(); ++i) {
    const json& entry = (*abi)[i];
    std::string field = "abi[" + std::to_string(i) + "]";
    if (!entry.is_object())
      return fieldError(field, "must be an object {\"kind\", \"name\"}, " + got(entry));
    ASSIGN_OR_RETURN(const json* kindValue, requireField(entry, "kind", field + ".kind"));
    ASSIGN_OR_RETURN(std::string kindText, nonEmptyString(*kindValue, field + ".kind"));
    ASSIGN_OR_RETURN(ArgKind kind, parseArgKind(kindText, field + ".kind"));
    ASSIGN_OR_RETURN(const json* name, requireField(entry, "name", field + ".name"));
    ASSIGN_OR_RETURN(std::string nameText, nonEmptyString(*name, field + ".name"));
    int64_t multipleOf = 1;
    if (auto m = entry.find("multiple_of"); m != entry.end()) {
      ASSIGN_OR_RETURN(multipleOf, integerInRange(*m, field + ".multiple_of", 1, int64_t{1} << 30));
      if (kind != ArgKind::I32 && kind != ArgKind::I64)
        return fieldError(field + ".multiple_of", "applies to i32/i64 arguments only");
    }
    specs.push_back({kind, std::move(nameText), multipleOf});
  }
  return specs;
}

Expected<std::array<uint32_t, 3>> parseBlock(const json& object) {
  ASSIGN_OR_RETURN(const json* block, requireField(object, "block"));
  if (!block->is_array() || block->size() != 3)
    return fieldError("block", "must be an array of 3 integers >= 1, " + got(*block) +
                                   (block->is_array() ? " of size " + std::to_string(block->size())
                                                      : ""));
  std::array<uint32_t, 3> dims{};
  int64_t threads = 1;
  for (size_t i = 0; i < 3; ++i) {
    ASSIGN_OR_RETURN(int64_t d,
                     integerInRange((*block)[i], "block[" + std::to_string(i) + "]", 1, 1024));
    dims[i] = static_cast<uint32_t>(d);
    threads *= d;
  }
  // Both vendors cap a block at 1024 threads.
  if (threads > 1024)
    return fieldError("block", "has " + std::to_string(threads) + " threads, at most 1024");
  return dims;
}

Expected<std::map<std::string, int64_t>> parseConfig(const json& object) {
  std::map<std::string, int64_t> config;
  auto it = object.find("config");
  if (it == object.end()) return config;  // informational; a kernel may have nothing to bind
  if (!it->is_object()) return fieldError("config", "must be an object, " + got(*it));
  for (const auto& item : it->items()) {
    ASSIGN_OR_RETURN(int64_t n, integerInRange(item.value(), "config." + item.key(),
                                               std::numeric_limits<int64_t>::min(),
                                               std::numeric_limits<int64_t>::max()));
    config[item.key()] = n;
  }
  return config;
}

}  // namespace

const char* argKindName(ArgKind kind) {
  switch (kind) {
    case ArgKind::Pointer: return "ptr";
    case ArgKind::I32: return "i32";
    case ArgKind::I64: return "i64";
    case ArgKind::F32: return "f32";
  }
  return "unknown";
}

Platform KernelMetadata::platform() const {
  if (target.rfind("sm_", 0) == 0) return Platform::Cuda;
  if (target.rfind("gfx", 0) == 0) return Platform::Hip;
  return Platform::Auto;
}

Expected<KernelMetadata> parseKernelMetadata(std::string_view text) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    // e.what() starts with "[json.exception.parse_error.101] "; the rest says where and why.
    std::string why = e.what();
    if (auto pos = why.find("] "); why.rfind("[json.exception", 0) == 0 && pos != std::string::npos)
      why.erase(0, pos + 2);
    return Status::error("kernel metadata: invalid JSON: " + why);
  }
  if (!root.is_object())
    return Status::error("kernel metadata: expected a JSON object, " + got(root));

  KernelMetadata md;
  ASSIGN_OR_RETURN(md.kernel, stringField(root, "kernel"));
  ASSIGN_OR_RETURN(md.entry, stringField(root, "entry"));
  ASSIGN_OR_RETURN(md.target, stringField(root, "target"));
  if (!isKnownTargetSpelling(md.target))
    return fieldError("target", "is '" + md.target +
                                    "', expected sm_<N> or gfx<N> (e.g. sm_90, gfx942, gfx950)");
  ASSIGN_OR_RETURN(md.abi, parseAbi(root));
  ASSIGN_OR_RETURN(md.block, parseBlock(root));
  ASSIGN_OR_RETURN(int64_t shared,
                   integerField(root, "shared_bytes", 0, std::numeric_limits<uint32_t>::max()));
  md.sharedBytes = static_cast<uint32_t>(shared);
  ASSIGN_OR_RETURN(md.rowsPerProgram, integerField(root, "rows_per_program", 1,
                                                   std::numeric_limits<int32_t>::max()));
  ASSIGN_OR_RETURN(int64_t alignment, integerField(root, "alignment", 1, 4096));
  if ((alignment & (alignment - 1)) != 0)
    return fieldError("alignment", "is " + std::to_string(alignment) + ", must be a power of two");
  md.alignment = static_cast<uint32_t>(alignment);
  ASSIGN_OR_RETURN(md.config, parseConfig(root));
  return md;
}

}  // namespace mxfp6::rt
