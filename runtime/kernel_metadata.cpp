// Parsing the launch metadata the code generator writes next to each code object. Every error
// names the field, since a bad field here would otherwise be a wrong launch later.
#include <algorithm>
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

/// A derived entry of "abi" (runtime.h, DerivedArg): `specs` are the entries before it; its
/// source gets the maximum its multiplier is exact for.
Expected<DerivedArg> parseDerivedArg(const json& entry, const std::string& field, ArgKind kind,
                                     std::string name, std::vector<ArgSpec>& specs) {
  ASSIGN_OR_RETURN(std::string what, nonEmptyString(entry["derived"], field + ".derived"));
  DerivedArg arg;
  arg.name = std::move(name);
  if (what == "divisor_multiplier") arg.kind = DerivedArg::Kind::DivisorMultiplier;
  else if (what == "divisor_shift") arg.kind = DerivedArg::Kind::DivisorShift;
  else return fieldError(field + ".derived", "is '" + what + "', expected divisor_multiplier or divisor_shift");
  if (kind != ArgKind::I32) return fieldError(field + ".kind", "of a derived argument must be i32");
  ASSIGN_OR_RETURN(const json* ofValue, requireField(entry, "of", field + ".of"));
  ASSIGN_OR_RETURN(std::string of, nonEmptyString(*ofValue, field + ".of"));
  auto source = std::find_if(specs.begin(), specs.end(), [&](const ArgSpec& s) { return s.name == of; });
  if (source == specs.end())
    return fieldError(field + ".of", "is '" + of + "', which names no argument before it");
  // The multiplier is defined for divisors >= 1: the launch must refuse the others.
  if ((source->kind != ArgKind::I32 && source->kind != ArgKind::I64) || source->minimum < 1)
    return fieldError(field + ".of", "'" + of + "' must be an i32/i64 argument with a minimum >= 1");
  arg.source = size_t(source - specs.begin());
  // The multiplier divides exactly below 2^31 (runtime.h, divisorMultiplier).
  source->maximum = std::numeric_limits<int32_t>::max();
  return arg;
}

Expected<std::vector<ArgSpec>> parseAbi(const json& object, std::vector<DerivedArg>& derived) {
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
    if (entry.contains("derived")) {
      ASSIGN_OR_RETURN(DerivedArg arg, parseDerivedArg(entry, field, kind, std::move(nameText), specs));
      derived.push_back(std::move(arg));
      continue;
    }
    if (!derived.empty()) return fieldError(field, "follows a derived argument; derived arguments come last");
    int64_t multipleOf = 1;
    if (auto m = entry.find("multiple_of"); m != entry.end()) {
      ASSIGN_OR_RETURN(multipleOf, integerInRange(*m, field + ".multiple_of", 1, int64_t{1} << 30));
      if (kind != ArgKind::I32 && kind != ArgKind::I64)
        return fieldError(field + ".multiple_of", "applies to i32/i64 arguments only");
    }
    int64_t minimum = std::numeric_limits<int64_t>::min();
    if (auto m = entry.find("minimum"); m != entry.end()) {
      ASSIGN_OR_RETURN(minimum, integerInRange(*m, field + ".minimum", std::numeric_limits<int64_t>::min(),
                                               std::numeric_limits<int64_t>::max()));
      if (kind != ArgKind::I32 && kind != ArgKind::I64)
        return fieldError(field + ".minimum", "applies to i32/i64 arguments only");
    }
    specs.push_back({kind, std::move(nameText), multipleOf, minimum});
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

// ---- "params" and "rows": the signature that launches from tensors are checked against ----

Expected<Dtype> parseDtype(const json& value, const std::string& field, bool scalar) {
  ASSIGN_OR_RETURN(std::string text, nonEmptyString(value, field));
  static constexpr Dtype kAll[] = {Dtype::BF16, Dtype::F16, Dtype::F32,
                                   Dtype::I32,  Dtype::I64, Dtype::U8};
  for (Dtype d : kAll) {
    bool allowed = !scalar || d == Dtype::I32 || d == Dtype::I64 || d == Dtype::F32;
    if (allowed && text == dtypeName(d)) return d;
  }
  return fieldError(field, "is '" + text + "', expected " +
                               (scalar ? "i32, i64 or f32" : "bf16, f16, f32, i32, i64 or u8"));
}

/// The one key of `entry` among `keys`; an error (listing the accepted shapes) when there is
/// none or more than one.
Expected<std::string> onlyKey(const json& entry, const std::string& field,
                              std::initializer_list<const char*> keys, const std::string& shapes) {
  if (!entry.is_object()) return fieldError(field, "must be " + shapes + ", " + got(entry));
  std::string found;
  for (const char* key : keys) {
    if (!entry.contains(key)) continue;
    if (!found.empty())
      return fieldError(field, "has both '" + found + "' and '" + key + "', must be " + shapes);
    found = key;
  }
  if (found.empty()) return fieldError(field, "must be " + shapes + ", got " + entry.dump());
  return found;
}

/// {"const": n, "name": "D"?} or {"dim": "T"}. Runtime sizes are numbered as they first appear.
Expected<SizeSpec> parseSize(const json& entry, const std::string& field,
                             std::vector<std::string>& runtimeDims) {
  ASSIGN_OR_RETURN(std::string key,
                   onlyKey(entry, field, {"const", "dim"}, "{\"const\": n} or {\"dim\": name}"));
  SizeSpec size;
  if (key == "dim") {
    ASSIGN_OR_RETURN(size.name, nonEmptyString(entry["dim"], field + ".dim"));
    auto it = std::find(runtimeDims.begin(), runtimeDims.end(), size.name);
    size.runtimeDim = static_cast<int>(it - runtimeDims.begin());
    if (it == runtimeDims.end()) runtimeDims.push_back(size.name);
    return size;
  }
  ASSIGN_OR_RETURN(size.constant, integerInRange(entry["const"], field + ".const", 0,
                                                 std::numeric_limits<int64_t>::max()));
  if (auto name = entry.find("name"); name != entry.end()) {
    ASSIGN_OR_RETURN(size.name, nonEmptyString(*name, field + ".name"));
  }
  return size;
}

/// {"const": n}, {"param": name}, {"row_major": true} or {"any": true}. A parameter's index is
/// resolved once all parameters are known (resolveStrideParams).
Expected<StrideSpec> parseStride(const json& entry, const std::string& field) {
  ASSIGN_OR_RETURN(std::string key,
                   onlyKey(entry, field, {"const", "param", "row_major", "any"},
                           "{\"const\": n}, {\"param\": name}, {\"row_major\": true} or "
                           "{\"any\": true}"));
  StrideSpec stride;
  const json& value = entry[key];
  if (key == "const") {
    stride.kind = StrideSpec::Kind::Constant;
    ASSIGN_OR_RETURN(stride.constant, integerInRange(value, field + ".const", 0,
                                                     std::numeric_limits<int64_t>::max()));
  } else if (key == "param") {
    stride.kind = StrideSpec::Kind::Param;
    ASSIGN_OR_RETURN(stride.param, nonEmptyString(value, field + ".param"));
  } else {
    stride.kind = key == "any" ? StrideSpec::Kind::Any : StrideSpec::Kind::RowMajor;
    if (value != true) return fieldError(field + "." + key, "must be true, " + got(value));
  }
  return stride;
}

Expected<bool> booleanField(const json& object, const std::string& key, const std::string& field) {
  ASSIGN_OR_RETURN(const json* value, requireField(object, key, field));
  if (!value->is_boolean()) return fieldError(field, "must be true or false, " + got(*value));
  return value->get<bool>();
}

Status parseTensor(const json& entry, const std::string& field, ParamSpec& param,
                   std::vector<std::string>& runtimeDims) {
  ASSIGN_OR_RETURN(const json* dtype, requireField(entry, "dtype", field + ".dtype"));
  ASSIGN_OR_RETURN(param.dtype, parseDtype(*dtype, field + ".dtype", /*scalar=*/false));
  ASSIGN_OR_RETURN(param.isOutput, booleanField(entry, "output", field + ".output"));
  ASSIGN_OR_RETURN(const json* dims, requireField(entry, "dims", field + ".dims"));
  if (!dims->is_array() || dims->empty() || dims->size() > kMaxTensorDims)
    return fieldError(field + ".dims", "must be an array of 1 to " +
                                           std::to_string(kMaxTensorDims) + " sizes, " +
                                           got(*dims) +
                                           (dims->is_array() ? " of size " +
                                                                   std::to_string(dims->size())
                                                             : ""));
  for (size_t d = 0; d < dims->size(); ++d) {
    ASSIGN_OR_RETURN(SizeSpec size, parseSize((*dims)[d],
                                              field + ".dims[" + std::to_string(d) + "]",
                                              runtimeDims));
    param.dims.push_back(std::move(size));
  }
  ASSIGN_OR_RETURN(const json* strides, requireField(entry, "strides", field + ".strides"));
  if (!strides->is_array() || strides->size() != dims->size())
    return fieldError(field + ".strides", "must be an array with one stride per dim (" +
                                              std::to_string(dims->size()) + "), " +
                                              got(*strides) +
                                              (strides->is_array()
                                                   ? " of size " + std::to_string(strides->size())
                                                   : ""));
  for (size_t d = 0; d < strides->size(); ++d) {
    ASSIGN_OR_RETURN(StrideSpec stride,
                     parseStride((*strides)[d], field + ".strides[" + std::to_string(d) + "]"));
    param.strides.push_back(std::move(stride));
  }
  return Status::ok();
}

Status parseScalar(const json& entry, const std::string& field, ParamSpec& param) {
  ASSIGN_OR_RETURN(const json* dtype, requireField(entry, "dtype", field + ".dtype"));
  ASSIGN_OR_RETURN(param.dtype, parseDtype(*dtype, field + ".dtype", /*scalar=*/true));
  if (auto d = entry.find("default"); d != entry.end()) {
    if (!d->is_number()) return fieldError(field + ".default", "must be a number, " + got(*d));
    param.defaultValue = d->get<double>();
  }
  return Status::ok();
}

/// A stride parameter must be an integer scalar among the params.
Status resolveStrideParams(KernelSignature& signature) {
  for (size_t i = 0; i < signature.params.size(); ++i) {
    std::vector<StrideSpec>& strides = signature.params[i].strides;
    for (size_t d = 0; d < strides.size(); ++d) {
      StrideSpec& stride = strides[d];
      if (stride.kind != StrideSpec::Kind::Param) continue;
      auto& params = signature.params;
      auto it = std::find_if(params.begin(), params.end(),
                             [&](const ParamSpec& p) { return p.name == stride.param; });
      if (it == params.end() || it->isTensor || it->dtype == Dtype::F32)
        return fieldError("params[" + std::to_string(i) + "].strides[" + std::to_string(d) +
                              "].param",
                          "is '" + stride.param + "', which is not an i32 or i64 parameter");
      stride.paramIndex = static_cast<int>(it - params.begin());
    }
  }
  return Status::ok();
}

ArgKind abiKindOf(const ParamSpec& param) {
  if (param.isTensor) return ArgKind::Pointer;
  return param.dtype == Dtype::I32 ? ArgKind::I32
         : param.dtype == Dtype::I64 ? ArgKind::I64
                                     : ArgKind::F32;
}

/// The launch arguments are the params (a pointer per tensor) then i64 runtime sizes: the
/// contract that lets a launch from tensors build them. Copies multiple_of onto the params.
Status matchAbi(KernelSignature& signature, const std::vector<ArgSpec>& abi) {
  auto mismatch = [](const std::string& problem) {
    return fieldError("params", "does not match 'abi': " + problem);
  };
  const std::vector<ParamSpec>& params = signature.params;
  if (abi.size() < params.size())
    return mismatch(std::to_string(params.size()) + " params but " + std::to_string(abi.size()) +
                    " ABI arguments");
  for (size_t i = 0; i < params.size(); ++i) {
    ArgKind kind = abiKindOf(params[i]);
    if (abi[i].name != params[i].name || abi[i].kind != kind)
      return mismatch("params[" + std::to_string(i) + "] is " + argKindName(kind) + " '" +
                      params[i].name + "', abi[" + std::to_string(i) + "] is " +
                      argKindName(abi[i].kind) + " '" + abi[i].name + "'");
    signature.params[i].multipleOf = abi[i].multipleOf;
  }
  signature.dimMultiples.assign(signature.runtimeDims.size(), 1);
  for (size_t i = params.size(); i < abi.size(); ++i) {
    const std::vector<std::string>& dims = signature.runtimeDims;
    auto it = std::find(dims.begin(), dims.end(), abi[i].name);
    if (abi[i].kind != ArgKind::I64 || it == dims.end())
      return mismatch("abi[" + std::to_string(i) + "] (" + argKindName(abi[i].kind) + " '" +
                      abi[i].name + "') follows the params but is not one of their runtime sizes");
    signature.abiDims.push_back(static_cast<int>(it - dims.begin()));
    signature.dimMultiples[it - dims.begin()] = abi[i].multipleOf;
  }
  return Status::ok();
}

Expected<std::optional<KernelSignature>> parseSignature(const json& object,
                                                        const std::vector<ArgSpec>& abi) {
  auto paramsIt = object.find("params");
  auto rowsIt = object.find("rows");
  if (paramsIt == object.end() && rowsIt == object.end())
    return std::optional<KernelSignature>();  // metadata from before launches from tensors
  if (paramsIt == object.end()) return Status::error("kernel metadata: missing field 'params'");
  if (rowsIt == object.end()) return Status::error("kernel metadata: missing field 'rows'");
  if (!paramsIt->is_array()) return fieldError("params", "must be an array, " + got(*paramsIt));
  KernelSignature signature;
  for (size_t i = 0; i < paramsIt->size(); ++i) {
    const json& entry = (*paramsIt)[i];
    std::string field = "params[" + std::to_string(i) + "]";
    if (!entry.is_object())
      return fieldError(field, "must be an object {\"name\", \"kind\", ...}, " + got(entry));
    ParamSpec param;
    ASSIGN_OR_RETURN(const json* name, requireField(entry, "name", field + ".name"));
    ASSIGN_OR_RETURN(param.name, nonEmptyString(*name, field + ".name"));
    for (const ParamSpec& earlier : signature.params)
      if (earlier.name == param.name)
        return fieldError(field + ".name", "is '" + param.name + "', a name already taken");
    ASSIGN_OR_RETURN(const json* kind, requireField(entry, "kind", field + ".kind"));
    ASSIGN_OR_RETURN(std::string kindText, nonEmptyString(*kind, field + ".kind"));
    if (kindText == "tensor") {
      param.isTensor = true;
      RETURN_IF_ERROR(parseTensor(entry, field, param, signature.runtimeDims));
    } else if (kindText == "scalar") {
      RETURN_IF_ERROR(parseScalar(entry, field, param));
    } else {
      return fieldError(field + ".kind", "is '" + kindText + "', expected tensor or scalar");
    }
    signature.params.push_back(std::move(param));
  }
  RETURN_IF_ERROR(resolveStrideParams(signature));
  if (!rowsIt->is_array()) return fieldError("rows", "must be an array, " + got(*rowsIt));
  size_t dimsOfParams = signature.runtimeDims.size();
  // A launch learns runtime sizes from the tensors' shapes only.
  auto sizeOfParams = [&](const json& entry, const std::string& field) -> Expected<SizeSpec> {
    ASSIGN_OR_RETURN(SizeSpec size, parseSize(entry, field, signature.runtimeDims));
    if (!size.isConstant() && size.runtimeDim >= static_cast<int>(dimsOfParams))
      return fieldError(field + ".dim", "is '" + size.name + "', which is the size of no tensor parameter");
    return size;
  };
  for (size_t i = 0; i < rowsIt->size(); ++i) {
    ASSIGN_OR_RETURN(SizeSpec extent, sizeOfParams((*rowsIt)[i], "rows[" + std::to_string(i) + "]"));
    signature.rows.push_back(std::move(extent));
  }
  if (auto boundsIt = object.find("index_bounds"); boundsIt != object.end()) {
    if (!boundsIt->is_array()) return fieldError("index_bounds", "must be an array, " + got(*boundsIt));
    for (size_t i = 0; i < boundsIt->size(); ++i) {
      std::string field = "index_bounds[" + std::to_string(i) + "]";
      const json& product = (*boundsIt)[i];
      if (!product.is_array() || product.empty())
        return fieldError(field, "must be a non-empty array of sizes, " + got(product));
      std::vector<SizeSpec> factors;
      for (size_t f = 0; f < product.size(); ++f) {
        ASSIGN_OR_RETURN(SizeSpec factor, sizeOfParams(product[f], field + "[" + std::to_string(f) + "]"));
        factors.push_back(std::move(factor));
      }
      signature.indexBounds.push_back(std::move(factors));
    }
  }
  RETURN_IF_ERROR(matchAbi(signature, abi));
  // A bound is checked against the launch's arguments: each of its sizes must be one of them.
  for (size_t i = 0; i < signature.indexBounds.size(); ++i)
    for (const SizeSpec& factor : signature.indexBounds[i])
      if (!factor.isConstant() && std::find(signature.abiDims.begin(), signature.abiDims.end(),
                                            factor.runtimeDim) == signature.abiDims.end())
        return fieldError("index_bounds[" + std::to_string(i) + "]",
                          "names '" + factor.name + "', which no ABI argument carries");
  return std::optional<KernelSignature>(std::move(signature));
}

}  // namespace

const char* dtypeName(Dtype dtype) {
  switch (dtype) {
    case Dtype::BF16: return "bf16";
    case Dtype::F16: return "f16";
    case Dtype::F32: return "f32";
    case Dtype::I32: return "i32";
    case Dtype::I64: return "i64";
    case Dtype::U8: return "u8";
  }
  return "unknown";
}

int dtypeBytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::BF16: case Dtype::F16: return 2;
    case Dtype::F32: case Dtype::I32: return 4;
    case Dtype::I64: return 8;
    case Dtype::U8: return 1;
  }
  return 0;
}

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
  ASSIGN_OR_RETURN(md.abi, parseAbi(root, md.derived));
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
  // Absent from metadata written before the field existed: such a kernel launches in stream order.
  if (root.contains("waits_for_previous_grid")) {
    ASSIGN_OR_RETURN(md.waitsForPreviousGrid,
                     booleanField(root, "waits_for_previous_grid", "waits_for_previous_grid"));
  }
  ASSIGN_OR_RETURN(md.signature, parseSignature(root, md.abi));
  return md;
}

}  // namespace mxfp6::rt
