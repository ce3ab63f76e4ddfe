// LN-modulate forward (kernels_dsl/ln_modulate.mxk) as KIR built by hand, op for op what the
// frontend lowers the file's body to at `specialize D`:
//
//   row t in T {
//     v = f32(x[t, :]); mu = mean(v); d = v - mu; r = rsqrt(mean(d * d) + eps)
//     b = (t / sample_div) % B
//     y[t, :] = bf16(d * r * (1.0 + f32(scale[b, :])) + f32(shift[b, :]))
//     mean[t] = mu; rstd[t] = r
//   }
#pragma once

#include "tests/interp/kir_builder.h"

namespace mxfp6::interp::testing {

/// Param indices of ln_modulate_fwd, in declaration order.
enum LnParam { kX, kScale, kShift, kY, kMean, kRstd, kSampleDiv, kEps, kLnParamCount };

inline kir::Kernel buildLnModulate(int64_t D) {
  KirBuilder b("ln_modulate_fwd", "ln_modulate.mxk");
  const KirBuilder::DimSpec dimD("D", D);
  b.at(5, 24);
  b.tensor("x", Dtype::BF16, {"T", dimD});
  b.tensor("scale", Dtype::BF16, {"B", dimD});
  b.tensor("shift", Dtype::BF16, {"B", dimD});
  b.tensor("y", Dtype::BF16, {"T", dimD}, /*out=*/true);
  b.tensor("mean", Dtype::F32, {"T"}, true);
  b.tensor("rstd", Dtype::F32, {"T"}, true);
  b.scalar("sample_div", Dtype::I32);
  b.scalar("eps", Dtype::F32, 1e-6);
  b.rows({"t"}, {"T"});
  constexpr int kColon = KirBuilder::kColon;

  b.at(13, 3);
  const int strideRow = b.constInt(D);
  const int strideOne = b.constInt(1);
  const int t = b.rowIndex(0);
  b.name(t, "t");
  b.at(14, 9);
  const int xRow = b.load(kX, {t, kColon}, {strideRow, strideOne});
  const int v = b.cast(xRow, Dtype::F32);
  b.name(v, "v");
  b.at(15, 10);
  const int dF = b.constFloat(static_cast<double>(D));
  const int mu = b.op(OpCode::Div, {b.reduce(OpCode::ReduceSum, v), dF});
  b.name(mu, "mu");
  b.at(16, 9);
  const int d = b.op(OpCode::Sub, {v, mu});
  b.name(d, "d");
  b.at(17, 9);
  const int var = b.op(OpCode::Div, {b.reduce(OpCode::ReduceSum, b.op(OpCode::Mul, {d, d})), dF});
  const int r = b.op(OpCode::Rsqrt, {b.op(OpCode::Add, {var, b.scalarArg(kEps)})});
  b.name(r, "r");
  b.at(18, 9);
  const int div = b.cast(b.scalarArg(kSampleDiv), Dtype::I64);
  const int q = b.op(OpCode::Div, {t, div});
  const int s = b.op(OpCode::Rem, {q, b.dimArg("B")});
  b.name(s, "b");
  b.at(19, 5);
  const int sc = b.cast(b.load(kScale, {s, kColon}, {strideRow, strideOne}), Dtype::F32);
  const int sh = b.cast(b.load(kShift, {s, kColon}, {strideRow, strideOne}), Dtype::F32);
  const int mod = b.op(OpCode::Add, {b.constFloat(1.0), sc});
  const int yv = b.op(OpCode::Add, {b.op(OpCode::Mul, {b.op(OpCode::Mul, {d, r}), mod}), sh});
  b.store(kY, {t, kColon}, {strideRow, strideOne}, b.cast(yv, Dtype::BF16));
  b.at(20, 5);
  b.store(kMean, {t}, {strideOne}, mu);
  b.at(21, 5);
  b.store(kRstd, {t}, {strideOne}, r);
  kir::Kernel k = b.take();
  k.runtimeDimUsedByBody = {true, true};  // T: the rows; B: the sample index
  k.config = {{"D", D}, {"ROWS", 1}, {"THREADS", 384}, {"VEC", 8}};
  k.threadsPerRow = 384;
  k.vectorWidth = 8;
  return k;
}

}  // namespace mxfp6::interp::testing
