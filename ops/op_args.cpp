#include "ops/op_args.h"

namespace mxfp6::ops {
namespace {

using rt::Dtype;
constexpr int64_t kHeadDim = 128, kPairs = 64;
/// Rotary table rows: one sample's positions (Flux: 256 image + 256 text tokens).
constexpr int64_t kPositions = 512;

TensorDecl in(std::string name, Dtype d, std::vector<int64_t> sizes, double lo = -2, double hi = 2) {
  TensorDecl t;
  t.name = std::move(name);
  t.dtype = d;
  t.storage = std::move(sizes);
  t.lo = lo;
  t.hi = hi;
  return t;
}

TensorDecl out(std::string name, Dtype d, std::vector<int64_t> sizes, Compare c) {
  TensorDecl t = in(std::move(name), d, std::move(sizes));
  t.output = true;
  t.compare = c;
  return t;
}

/// mixed_qkv [T, 3*H*128] seen as [T, 3, H, 128]: Megatron per-head [T, H, 3, 128] storage, or
/// blocked [T, 3, H, 128].
TensorDecl qkvView(TensorDecl t, int64_t T, int64_t H, bool megatron) {
  t.storage = {T, 3 * H * kHeadDim};
  t.viewSizes = {T, 3, H, kHeadDim};
  t.viewStrides = megatron ? std::vector<int64_t>{3 * H * kHeadDim, kHeadDim, 3 * kHeadDim, 1}
                           : std::vector<int64_t>{3 * H * kHeadDim, H * kHeadDim, kHeadDim, 1};
  return t;
}

/// K of a Megatron mixed_qkv: the [T, H, 128] slice at offset 128, head stride 3*128.
TensorDecl kSlice(TensorDecl t, int64_t T, int64_t H) {
  t.storage = {T, 3 * H * kHeadDim};
  t.viewSizes = {T, H, kHeadDim};
  t.viewStrides = {3 * H * kHeadDim, 3 * kHeadDim, 1};
  t.viewOffset = kHeadDim;
  return t;
}

void tables(OpArgs& a, const std::vector<std::string>& names) {
  for (const std::string& n : names) a.tensors.push_back(in(n, Dtype::F32, {kPositions, kPairs}, -1, 1));
}

}  // namespace

int64_t TensorDecl::elements() const {
  int64_t n = 1;
  for (int64_t s : storage) n *= s;
  return n;
}

OpArgs declareArgs(const Problem& p) {
  OpArgs a;
  const std::string& op = p.op->name;
  int64_t T = p.tokens, H = p.heads, D = p.size;
  if (op.starts_with("ln_modulate")) {
    bool perToken = !p.op->perSample;
    int64_t M = perToken ? T : T / p.tokensPerSample;  // modulation rows
    if (p.op->perSample) a.scalars["tokens_per_sample"] = double(p.tokensPerSample);
    if (op.starts_with("ln_modulate_fwd")) {
      a.tensors = {in("x", Dtype::BF16, {T, D}), in("scale", Dtype::BF16, {M, D}, -0.5, 0.5),
                   in("shift", Dtype::BF16, {M, D}), out("y", Dtype::BF16, {T, D}, Compare::Bf16),
                   out("mean", Dtype::F32, {T}, Compare::F32), out("rstd", Dtype::F32, {T}, Compare::F32)};
      a.scalars["eps"] = 1e-6;
    } else {
      a.tensors = {in("g", Dtype::BF16, {T, D}), in("x", Dtype::BF16, {T, D}), in("scale", Dtype::BF16, {M, D}, -0.5, 0.5),
                   in("mean", Dtype::F32, {T}, -0.1, 0.1), in("rstd", Dtype::F32, {T}, 0.5, 2),
                   out("dx", Dtype::BF16, {T, D}, Compare::Bf16), out("dscale", Dtype::BF16, {M, D}, Compare::Bf16),
                   out("dshift", Dtype::BF16, {M, D}, Compare::Bf16)};
    }
    return a;
  }
  if (op.starts_with("mxfp6_pack")) {
    a.tensors = {in("x", Dtype::BF16, {T, D}, -8, 8)};
    auto rows = [&](const std::string& prefix) {
      a.tensors.push_back(out(prefix + "data", Dtype::U8, {T, D * 3 / 4}, Compare::Exact));
      a.tensors.push_back(out(prefix + "scales", Dtype::U8, {T, D / 32}, Compare::Exact));
    };
    auto cols = [&](const std::string& prefix) {
      a.tensors.push_back(out(prefix + "data", Dtype::U8, {D, T * 3 / 4}, Compare::Exact));
      a.tensors.push_back(out(prefix + "scales", Dtype::U8, {D, T / 32}, Compare::Exact));
    };
    if (op == "mxfp6_pack_rows") rows("");
    if (op == "mxfp6_pack_cols") cols("");
    if (op == "mxfp6_pack_dual") {
      rows("row_");
      cols("col_");
    }
    return a;
  }
  a.scalars["pos_div"] = 1;
  bool megatron = !p.variant.count("layout") || p.variant.at("layout") == "megatron";
  if (op == "norm_rope_fwd" || op == "norm_rope_bwd") {
    bool forward = op == "norm_rope_fwd";
    if (!forward) a.tensors.push_back(in("dy", Dtype::BF16, {T, H, kHeadDim}));
    a.tensors.push_back(kSlice(in("x", Dtype::BF16, {}), T, H));
    a.tensors.push_back(in("weight", Dtype::BF16, {kHeadDim}, 0.5, 1.5));
    tables(a, {"cos", "sin"});
    if (forward) {
      a.tensors.push_back(out("y", Dtype::BF16, {T, H, kHeadDim}, Compare::Bf16));
      a.tensors.push_back(out("rstd", Dtype::F32, {T, H}, Compare::F32));
      a.scalars["eps"] = 1e-6;
    } else {
      a.tensors.push_back(in("rstd", Dtype::F32, {T, H}, 0.5, 2));
      a.tensors.push_back(kSlice(out("dx", Dtype::BF16, {}, Compare::Bf16), T, H));
      a.tensors.push_back(out("dw", Dtype::F32, {kHeadDim}, Compare::F32));
    }
    return a;
  }
  if (op == "norm_rope_qkv_fwd") {
    a.tensors = {qkvView(in("qkv", Dtype::BF16, {}), T, H, megatron), in("q_weight", Dtype::BF16, {kHeadDim}, 0.5, 1.5),
                 in("k_weight", Dtype::BF16, {kHeadDim}, 0.5, 1.5)};
    tables(a, {"q_cos", "q_sin", "k_cos", "k_sin"});
    for (const char* n : {"q", "k"}) a.tensors.push_back(out(n, Dtype::BF16, {T, H, kHeadDim}, Compare::Bf16));
    a.tensors.push_back(out("v", Dtype::BF16, {T, H, kHeadDim}, Compare::Exact));
    for (const char* n : {"q_rstd", "k_rstd"}) a.tensors.push_back(out(n, Dtype::F32, {T, H}, Compare::F32));
    a.scalars["eps"] = 1e-6;
    return a;
  }
  // The whole-QKV backward and the packer prologue (Megatron layout unless the variant says).
  for (const char* n : {"dq", "dk", "dv"}) a.tensors.push_back(in(n, Dtype::BF16, {T, H, kHeadDim}));
  a.tensors.push_back(qkvView(in("qkv", Dtype::BF16, {}), T, H, megatron));
  for (const char* n : {"q_weight", "k_weight"}) a.tensors.push_back(in(n, Dtype::BF16, {kHeadDim}, 0.5, 1.5));
  tables(a, {"q_cos", "q_sin", "k_cos", "k_sin"});
  for (const char* n : {"q_rstd", "k_rstd"}) a.tensors.push_back(in(n, Dtype::F32, {T, H}, 0.5, 2));
  bool prologue = op.starts_with("norm_rope_qkv_bwd_pack");
  if (!prologue || op.ends_with("_bf16"))
    a.tensors.push_back(qkvView(out("dqkv", Dtype::BF16, {}, Compare::Bf16), T, H, megatron));
  a.tensors.push_back(out("dw", Dtype::F32, {2, kHeadDim}, Compare::F32));
  if (prologue) {
    int64_t C = 3 * H * kHeadDim;
    a.tensors.push_back(out("row_data", Dtype::U8, {T, C * 3 / 4}, Compare::BlobsOfComputed));
    a.tensors.push_back(out("row_scales", Dtype::U8, {T, C / 32}, Compare::BlobsOfComputed));
    a.tensors.push_back(out("col_data", Dtype::U8, {C, T * 3 / 4}, Compare::BlobsOfComputed));
    a.tensors.push_back(out("col_scales", Dtype::U8, {C, T / 32}, Compare::BlobsOfComputed));
  }
  return a;
}

}  // namespace mxfp6::ops
