#include "compiler/frontend/builtins.h"

#include <utility>

namespace mxfp6::frontend {

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
      {"abs", Builtin::Abs},
      {"min", Builtin::Min},
      {"max", Builtin::Max},
      {"sum", Builtin::Sum},
      {"mean", Builtin::Mean},
      {"max_of", Builtin::MaxOf},
      {"min_of", Builtin::MinOf},
      {"group_sum", Builtin::Reserved},
      {"group_max", Builtin::Reserved},
      {"repeat", Builtin::Reserved},
      {"rotate_pairs", Builtin::Reserved},
      {"mx_scale", Builtin::Reserved},
      {"mx_encode", Builtin::Reserved},
      {"pack6", Builtin::Reserved},
  };
  for (const auto& [text, b] : kBuiltins)
    if (name == text) return b;
  return std::nullopt;
}

int builtinArity(Builtin b) { return b == Builtin::Min || b == Builtin::Max ? 2 : 1; }

}  // namespace mxfp6::frontend
