// The builtin functions of the language. A name followed by '(' is a builtin call or a fn's
// (whose calls are expanded before the checks, fn_expand.h), so `mean(v)` and a tensor `mean[t]`
// never collide; a fn may not take a builtin's name.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "compiler/frontend/frontend.h"

namespace mxfp6::frontend {

enum class Builtin {
  CastF32,
  CastBF16,
  CastF16,
  CastI32,
  CastI64,
  Sqrt,
  Rsqrt,
  Exp,
  Tanh,
  Sigmoid,
  Erf,
  GeluTanh,
  Silu,
  Abs,
  Min,
  Max,
  Sum,
  Mean,
  MaxOf,
  MinOf,
  Repeat,
  GroupSum,
  GroupMax,
  GroupMin,
  RotatePairs,
  MxScale,
  MxEncode,
  Pack6,
  Transpose,
  Iota,
  Zeros,
  Splat,
};

std::optional<Builtin> findBuiltin(std::string_view name);
int builtinArity(Builtin b);

/// When argument `index` of `b` is a format or a scale mode (a value name or a variant naming
/// one, never a value), the kind it takes; nullopt for an ordinary argument.
std::optional<VariantKind> builtinValueArg(Builtin b, size_t index);

/// "first", "second", "third" for argument 0, 1, 2 ("next" beyond), for messages.
const char* argumentOrdinal(size_t index);

/// "format" or "scale mode", and the names of that kind: "E2M3, E3M2".
const char* variantKindName(VariantKind kind);
const char* variantKindValues(VariantKind kind);

}  // namespace mxfp6::frontend
