// The CPU reference interpreter: executes a kir::Kernel on host buffers in fp64. It is the oracle
// of every GPU test and lets CI check kernel semantics without a GPU. Plain C++ (no LLVM).
//
// Semantics (what "the exact value of the DSL's math" means here):
//   - Integers are int64, exactly. Division and remainder truncate toward zero. Division by zero,
//     int64 overflow, and a result outside its declared type (i32, u8) are errors naming the op's
//     source location; nothing wraps.
//   - Bool is bool. Comparisons of two integer values compare exactly; otherwise in fp64.
//   - All float arithmetic is fp64, including ops typed f32/bf16/f16. Casts between float types do
//     not round: the interpreter carries the exact fp64 value of the math the DSL describes.
//     Float -> int casts truncate toward zero; NaN, inf or out of range is an error.
//   - Loads convert exactly from the tensor's dtype. A store rounds the fp64 value once to the
//     tensor's dtype: bf16/f16 to nearest even straight from double (never via float), f32 to
//     nearest float; integer dtypes take the value exactly (a non-integral or out-of-range value
//     is an error).
//   - f32 scalar arguments (and their defaults) are rounded to float when bound: that is the value
//     a compiled kernel receives. Float constants in the KIR keep their fp64 value.
//   - ReduceSum adds in fp64 (int64 for integer vectors) in ascending index order. ReduceMax/Min,
//     Min/Max: a NaN operand gives NaN; among equal values the earlier one is kept.
//   - Repeat(v, k): element j is v[j / k], copied exactly. GroupReduceSum/Max/Min(v, G) reduce
//     each run v[g*G .. g*G+G) exactly like ReduceSum/Max/Min reduce a row: fp64 (int64, exact,
//     overflow an error, for integer vectors) from the group's first element in ascending order;
//     max/min propagate NaN and keep the earlier of equal values (so -0 vs +0 keeps the first).
//   - RotatePairs: y[2i] = c_i*v[2i] - s_i*v[2i+1], y[2i+1] = s_i*v[2i] + c_i*v[2i+1] in fp64,
//     each product rounded to fp64 and then added or subtracted (no FMA), no narrower rounding.
//   - MxScale / MxEncode quantize the bf16 value the GPU holds: their bf16 operand's fp64 values
//     (exact after a bf16 load, but NOT rounded by a bf16(...) cast, see above) are first rounded
//     once to bf16, to nearest even (doubleToBf16: overflow gives +-inf, NaN stays NaN). On those
//     bits they are mx::encodeBlock / mx::encodeBf16Element of compiler/interp/mxfp6.h
//     (docs/mxfp6-format.md), with the format and scale mode of Op::ival: MxScale gives each
//     32-element block's E8M0 byte (amax on the bf16 magnitude bits, 0xFF for a block holding a
//     NaN or Inf), MxEncode each element's 6-bit code under its block's scale byte (sign|0x1F
//     under 0xFF). Pack6 packs four codes into three bytes, LSB first (mx::pack4); a code outside
//     0..63 is an error. Their results are u8 values held exactly, like every integer (0..255);
//     a store of them into a u8 tensor writes the bytes.
//   - Before the first row every op is validated (operand ids, kinds, and each op's length rule
//     of kir.h, e.g. GroupReduce needs L % G == 0 and gives L/G); a violation is an
//     "invalid KIR" error naming the op.
//   - Div of floats is IEEE (x/0 = +-inf), Rem of floats is fmod, Rsqrt is 1/sqrt in fp64.
//   - Tanh and Erf are std::tanh and std::erf; Sigmoid is 1/(1+e^-x) (e^x/(1+e^x) for x < 0,
//     which neither overflows nor cancels); Silu is x * sigmoid(x); GeluTanh is
//     0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated as x * sigmoid(2 sqrt(2/pi)
//     (x + 0.044715 x^3)), the same value without the cancellation for negative x. All in fp64;
//     silu(-inf) and gelu_tanh(-inf) are -0 (the limit). The GPU's fp32 algorithms and their
//     bounds in ulps are compiler/math/special_functions.h.
//   - Every load/store checks each index against its dimension and the linear offset
//     (sum of index * stride) against [0, extentElements): an out-of-range access is an error
//     naming the tensor, the indices, the row and the op's source location.
//   - Splat(x): a vector of type.length copies of the scalar x (same element type), exactly.
//   - Variables: VarInit allocates the variable's storage and copies its initial value into it;
//     VarRead copies the current value out (a later VarWrite does not change an earlier read);
//     VarWrite replaces it. Values of the variable's exact type (element and length) only, no
//     conversion. Variables belong to the row: every row starts them afresh from its VarInit, and
//     a VarInit inside a loop body starts the variable afresh on every trip.
//   - Loops: ForBegin evaluates its start, end and step (integer scalars, exact int64) once, when
//     it is reached; a step <= 0 is an error naming the ForBegin. The body (the ops up to the
//     matching ForEnd) then runs with the induction value start, start+step, ... while < end, and
//     not at all when start >= end; ForEnd jumps back to the op after its ForBegin or falls
//     through. A nested loop re-evaluates its bounds every time it is reached. Every value defined
//     in a body is recomputed on each trip. An induction value that would overflow int64 when
//     stepped past the last trip is an error (the GPU's increment would wrap), reported by the
//     ForBegin before its first trip, and so is a row whose loops would run more than
//     RunOptions::maxLoopTripsPerRow trips in all (counted at each ForBegin, before its first
//     trip), so a bad kernel cannot hang the oracle. Errors inside a loop name the induction
//     values of the open loops next to the row.
//   - Validation of the structure (before the first row, "invalid KIR" naming the op): every
//     ForBegin has exactly one later ForEnd whose ival names it and loops nest (a ForEnd names the
//     innermost open ForBegin); VarRead/VarWrite name an earlier VarInit whose scope (the
//     innermost loop around the VarInit, or the whole row) is still open; VarInit, VarRead and
//     VarWrite types equal the variable's; a value defined in a body (the induction value
//     included) is used only before its ForEnd; a VarInit, VarWrite, ForEnd or Store is not a
//     value and cannot be an operand.
//   - Rows iterate over the product of the row variables' extents, the last variable fastest;
//     each row evaluates Kernel::ops in order (loops as above). An error stops the run; outputs
//     written by earlier rows (and earlier trips) stay written.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "compiler/frontend/kir.h"
#include "support/status.h"

namespace mxfp6::interp {

/// A view of a host tensor. `data` points at element [0, ..., 0] of the view; the linear offsets
/// [0, extentElements) relative to `data` are valid memory (for a strided view into a larger
/// buffer, such as Q as a slice of mixed_qkv, pass the extent remaining after `data`).
/// Element layout in memory: bf16/f16 as uint16 bits, f32 float, i32 int32, i64 int64, u8 uint8.
struct TensorArg {
  void* data = nullptr;
  kir::Dtype dtype = kir::Dtype::F32;
  std::vector<int64_t> shape;
  int64_t extentElements = 0;
};

/// One argument, in the order of Kernel::params: a tensor, an integer scalar (i32/i64 params), or
/// a float scalar (f32 params; an integer is accepted and converted). std::monostate omits a
/// scalar, which then takes its declared default (omitting one without a default is an error).
using Arg = std::variant<std::monostate, TensorArg, int64_t, double>;

/// Arguments checked against a kernel's signature. Indexed by param index (tensors/scalars) and by
/// runtime-dim index (runtimeDims), so a GPU test can build the launch ABI (kir::Kernel::abi())
/// from it: Pointer -> tensors[param].data, I32/I64 -> intScalars[param],
/// F32 -> floatScalars[param], runtime dim -> runtimeDims[runtimeDim].
struct BoundArgs {
  std::vector<int64_t> runtimeDims;   // parallel to Kernel::runtimeDims
  std::vector<TensorArg> tensors;     // per param; empty TensorArg for scalar params
  std::vector<int64_t> intScalars;    // per param; the value of i32/i64 scalar params
  std::vector<double> floatScalars;   // per param; f32 scalar params, already rounded to float
};

/// Checks the argument count and kinds (tensor vs scalar, dtype equal to the param's dtype), each
/// tensor's rank, compile-time dims equal to their constants, and runtime dims consistent across
/// tensors (each runtime dim takes its value from the first tensor that has it); fills defaults of
/// omitted scalars. Errors name the argument, e.g.
///   "argument 'scale' dim 1 (D) is 4096, expected 3072".
Expected<BoundArgs> bindArguments(const kir::Kernel& kernel, std::span<const Arg> args);

struct RunOptions {
  /// fp64 shadows of output tensors: param index -> a vector the caller sized to hold every linear
  /// offset the kernel stores to (normally the tensor's element count, in its own layout). Every
  /// store also writes its unrounded fp64 value there at the same linear offset.
  std::map<int, std::vector<double>*> fp64Outputs;

  /// The most loop trips one row may run, all loops of the row together (nested trips count
  /// once each); a row that would run more is an error before the offending loop starts.
  int64_t maxLoopTripsPerRow = int64_t{1} << 31;

  /// Rows run on this many threads, contiguous ranges each (rows are independent: every row
  /// writes its own elements, so the results equal a run on one thread). 1: the caller's thread.
  int threads = 1;
};

/// Binds `args` (see bindArguments) and runs the kernel over every row.
Status run(const kir::Kernel& kernel, std::span<const Arg> args, const RunOptions& options = {});

/// Runs with already-bound arguments.
Status run(const kir::Kernel& kernel, const BoundArgs& args, const RunOptions& options = {});

}  // namespace mxfp6::interp
