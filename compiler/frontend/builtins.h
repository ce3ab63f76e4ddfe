// The builtin functions of the language. A name followed by '(' is always a builtin call: the
// language has no user functions, so `mean(v)` and a tensor `mean[t]` never collide.
#pragma once

#include <optional>
#include <string_view>

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
  Abs,
  Min,
  Max,
  Sum,
  Mean,
  MaxOf,
  MinOf,
  Reserved,  // named in the language reference for later kernels, not yet lowered
};

std::optional<Builtin> findBuiltin(std::string_view name);
int builtinArity(Builtin b);

}  // namespace mxfp6::frontend
