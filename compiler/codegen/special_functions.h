// The math builtins tanh, sigmoid, erf, gelu_tanh and silu as MLIR ops: the fp32 algorithms of
// compiler/math/special_functions.h, instantiated with a policy that emits one arith (or
// llvm.intr.fma) op per step, so the GPU runs exactly the sequence the host test measures.
#pragma once

#include "compiler/frontend/kir.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mxfp6::codegen {

/// `code` (Tanh, Sigmoid, Erf, GeluTanh or Silu) of `x`, an f32 scalar or vector; null for any
/// other op.
mlir::Value emitSpecialFunction(mlir::ImplicitLocOpBuilder& b, kir::OpCode code, mlir::Value x);

}  // namespace mxfp6::codegen
