#include "compiler/frontend/builtins.h"

#include <utility>

#include "compiler/frontend/kir.h"

namespace mxfp6::frontend {
namespace {

struct ValueName {
  std::string_view name;
  VariantKind kind;
  int64_t value;
};

constexpr ValueName kValueNames[] = {
    {"E2M3", VariantKind::Format, int64_t(kir::MxFormat::E2M3)},
    {"E3M2", VariantKind::Format, int64_t(kir::MxFormat::E3M2)},
    {"RCEIL", VariantKind::ScaleMode, int64_t(kir::MxScaleMode::Rceil)},
    {"EVEN", VariantKind::ScaleMode, int64_t(kir::MxScaleMode::Even)},
    {"FLOOR", VariantKind::ScaleMode, int64_t(kir::MxScaleMode::Floor)},
};

}  // namespace

std::optional<Builtin> findBuiltin(std::string_view name) {
  static constexpr std::pair<std::string_view, Builtin> kBuiltins[] = {
      {"f32", Builtin::CastF32},
      {"bf16", Builtin::CastBF16},
      {"f16", Builtin::CastF16},
      {"i32", Builtin::CastI32},
      {"i64", Builtin::CastI64},
      {"sqrt", Builtin::Sqrt},
      {"rsqrt", Builtin::Rsqrt},
      {"exp", Builtin::Exp},
      {"tanh", Builtin::Tanh},
      {"sigmoid", Builtin::Sigmoid},
      {"erf", Builtin::Erf},
      {"gelu_tanh", Builtin::GeluTanh},
      {"silu", Builtin::Silu},
      {"abs", Builtin::Abs},
      {"min", Builtin::Min},
      {"max", Builtin::Max},
      {"sum", Builtin::Sum},
      {"mean", Builtin::Mean},
      {"max_of", Builtin::MaxOf},
      {"min_of", Builtin::MinOf},
      {"repeat", Builtin::Repeat},
      {"group_sum", Builtin::GroupSum},
      {"group_max", Builtin::GroupMax},
      {"group_min", Builtin::GroupMin},
      {"rotate_pairs", Builtin::RotatePairs},
      {"mx_scale", Builtin::MxScale},
      {"mx_encode", Builtin::MxEncode},
      {"pack6", Builtin::Pack6},
      {"transpose", Builtin::Transpose},
      {"iota", Builtin::Iota},
      {"zeros", Builtin::Zeros},
      {"splat", Builtin::Splat},
  };
  for (const auto& [text, b] : kBuiltins)
    if (name == text) return b;
  return std::nullopt;
}

int builtinArity(Builtin b) {
  switch (b) {
    case Builtin::Min:
    case Builtin::Max:
    case Builtin::Repeat:
    case Builtin::GroupSum:
    case Builtin::GroupMax:
    case Builtin::GroupMin:
    case Builtin::Splat:
    case Builtin::Transpose:
      return 2;
    case Builtin::RotatePairs:
    case Builtin::MxScale:
    case Builtin::MxEncode:
      return 3;
    default:
      return 1;
  }
}

std::optional<VariantKind> builtinValueArg(Builtin b, size_t index) {
  if (b == Builtin::MxScale && index == 1) return VariantKind::Format;
  if (b == Builtin::MxScale && index == 2) return VariantKind::ScaleMode;
  if (b == Builtin::MxEncode && index == 2) return VariantKind::Format;
  return std::nullopt;
}

const char* argumentOrdinal(size_t index) {
  static constexpr const char* kOrdinals[] = {"first", "second", "third"};
  return index < 3 ? kOrdinals[index] : "next";
}

const char* variantKindName(VariantKind kind) {
  return kind == VariantKind::Format ? "format" : "scale mode";
}

const char* variantKindValues(VariantKind kind) {
  return kind == VariantKind::Format ? "E2M3, E3M2" : "RCEIL, EVEN, FLOOR";
}

std::optional<VariantValue> findVariantValue(std::string_view name) {
  for (const ValueName& v : kValueNames)
    if (v.name == name) return VariantValue{v.kind, v.value};
  return std::nullopt;
}

const char* variantValueName(VariantKind kind, int64_t value) {
  for (const ValueName& v : kValueNames)
    if (v.kind == kind && v.value == value) return v.name.data();
  return nullptr;
}

std::optional<VariantValue> decodeVariantNameCode(int64_t code) {
  if ((code & ~int64_t{0xffffffff}) != kVariantNameTag) return std::nullopt;
  int64_t kind = (code >> 8) & 0xffffff;
  int64_t value = code & 0xff;
  if (kind > int64_t(VariantKind::ScaleMode)) return std::nullopt;
  VariantValue v{VariantKind(kind), value};
  if (!variantValueName(v.kind, v.value)) return std::nullopt;
  return v;
}

}  // namespace mxfp6::frontend
