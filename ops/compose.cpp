#include "ops/compose.h"

#include <algorithm>

namespace mxfp6::ops {
namespace {

constexpr int64_t kHeadDim = 128;

std::string shapeText(const rt::TensorArg& t) {
  std::string out = "[";
  for (int i = 0; i < t.ndim; ++i) out += (i ? ", " : "") + std::to_string(t.sizes[i]);
  return out + "]";
}

rt::TensorArg make(const void* data, rt::Dtype dtype, std::vector<int64_t> sizes) {
  return rt::TensorArg::contiguous(data, dtype, sizes);
}

Expected<rt::TensorArg> splitDim(const rt::TensorArg& t, int dim, int64_t a, int64_t b, const std::string& name) {
  if (dim >= t.ndim || t.sizes[dim] != a * b)
    return Status::error("argument '" + name + "' " + shapeText(t) + ": dim " + std::to_string(dim) +
                         " must be " + std::to_string(a) + " x " + std::to_string(b));
  if (t.ndim + 1 > rt::kMaxTensorDims) return Status::error("argument '" + name + "' has too many dims");
  rt::TensorArg out = t;
  out.ndim = t.ndim + 1;
  for (int i = t.ndim; i > dim + 1; --i) {
    out.sizes[i] = t.sizes[i - 1];
    out.strides[i] = t.strides[i - 1];
  }
  out.sizes[dim] = a;
  out.strides[dim] = t.strides[dim] * b;
  out.sizes[dim + 1] = b;
  out.strides[dim + 1] = t.strides[dim];
  return out;
}

/// The named tensor of the call, with the rank the op takes.
Expected<rt::TensorArg> tensor(const OpCall& call, const std::string& name, int ndim) {
  auto it = call.tensors.find(name);
  if (it == call.tensors.end()) return Status::error("missing tensor argument '" + name + "'");
  if (it->second.ndim != ndim)
    return Status::error("argument '" + name + "' must have " + std::to_string(ndim) + " dims, got " +
                         shapeText(it->second));
  return it->second;
}

Expected<double> scalar(const OpCall& call, const std::string& name, std::optional<double> fallback = {}) {
  auto it = call.scalars.find(name);
  if (it != call.scalars.end()) return it->second;
  if (fallback) return *fallback;
  return Status::error("missing scalar argument '" + name + "'");
}

int64_t configValue(const PlanLaunch& launch, const char* key) {
  auto config = parseConfig(launch.config);
  if (!config) return 0;
  auto it = config->find(key);
  return it == config->end() ? 0 : std::stoll(it->second);
}

/// Builds the steps of one plan: the arguments every launch shares are copied in by `with`.
class Builder {
 public:
  Builder(const Plan& plan, const ScratchAllocator& scratch) : plan_(plan), scratch_(scratch) {}

  Step& add(size_t launch) {
    steps_.push_back({launch, plan_.launches.at(launch).kernel, {}});
    return steps_.back();
  }
  Expected<rt::TensorArg> alloc(rt::Dtype dtype, std::vector<int64_t> sizes) {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    ASSIGN_OR_RETURN(void* p, scratch_(static_cast<size_t>(n) * rt::dtypeBytes(dtype)));
    return make(p, dtype, sizes);
  }

  /// The fixed-order tree reduction of [G, P, 128] f32 partials into `dest` ([G, 128] f32),
  /// launched as launch `launch` once per level: level i sums runs of chunks[i] consecutive
  /// partials (ascending) into [G, P / chunks[0..i], 128].
  Status tree(size_t launch, const rt::TensorArg& partials, int64_t G, int64_t P, const rt::TensorArg& dest) {
    rt::TensorArg in = partials;
    int64_t left = P;
    std::vector<int64_t> chunks = treeChunks(P);
    for (size_t level = 0; level < chunks.size(); ++level) {
      int64_t chunk = chunks[level];
      left /= chunk;
      int64_t programs = G * left;
      bool last = level + 1 == chunks.size();
      rt::TensorArg out;
      if (last) {
        out = make(dest.data, rt::Dtype::F32, {programs, kHeadDim});
      } else {
        ASSIGN_OR_RETURN(out, alloc(rt::Dtype::F32, {programs, kHeadDim}));
      }
      Step& s = add(launch);
      s.args["dw_part"] = make(in.data, rt::Dtype::F32, {programs, chunk, kHeadDim});
      s.args["dw"] = out;
      in = out;
    }
    return Status::ok();
  }

  std::vector<Step> take() { return std::move(steps_); }

 private:
  const Plan& plan_;
  const ScratchAllocator& scratch_;
  std::vector<Step> steps_;
};

void copyArgs(Step& step, const std::map<std::string, StepValue>& shared) {
  for (const auto& [k, v] : shared) step.args[k] = v;
}

/// The whole-QKV backward's inputs (both the per-row and the tiled passes, and the prologue).
Expected<std::map<std::string, StepValue>> qkvBackwardInputs(const OpCall& call) {
  std::map<std::string, StepValue> a;
  for (const char* name : {"dq", "dk", "dv"}) {
    ASSIGN_OR_RETURN(a[name], tensor(call, name, 3));
  }
  ASSIGN_OR_RETURN(a["qkv"], tensor(call, "qkv", 4));
  for (const char* name : {"q_weight", "k_weight"}) {
    ASSIGN_OR_RETURN(a[name], tensor(call, name, 1));
  }
  for (const char* name : {"q_cos", "q_sin", "k_cos", "k_sin", "q_rstd", "k_rstd"}) {
    ASSIGN_OR_RETURN(a[name], tensor(call, name, 2));
  }
  ASSIGN_OR_RETURN(double posDiv, scalar(call, "pos_div", 1.0));
  a["pos_div"] = static_cast<int64_t>(posDiv);
  return a;
}

/// The tiled views of the whole-QKV backward's inputs: [T, ...] as [T/32, 32, ...], the weights
/// broadcast over the 32 tokens of a tile.
Status tileInputs(std::map<std::string, StepValue>& a, int64_t TB) {
  for (const char* name : {"dq", "dk", "dv", "qkv", "q_rstd", "k_rstd"}) {
    ASSIGN_OR_RETURN(a[name], splitDim(std::get<rt::TensorArg>(a[name]), 0, TB, 32, name));
  }
  for (const char* name : {"q_weight", "k_weight"}) a[name] = broadcastRows(std::get<rt::TensorArg>(a[name]), 32);
  const rt::TensorArg& qkv = std::get<rt::TensorArg>(a["qkv"]);
  a["qkv_block_stride"] = qkv.strides[0];
  a["qkv_token_stride"] = qkv.strides[1];
  a["qkv_part_stride"] = qkv.strides[2];
  a["qkv_head_stride"] = qkv.strides[3];
  return Status::ok();
}

void qkvStrides(std::map<std::string, StepValue>& a, const rt::TensorArg& qkv) {
  a["qkv_token_stride"] = qkv.strides[0];
  a["qkv_part_stride"] = qkv.strides[1];
  a["qkv_head_stride"] = qkv.strides[2];
}

Expected<std::vector<Step>> composeLnModulate(const Plan& plan, const Problem& p, const OpCall& call, Builder& b) {
  bool backward = plan.op.starts_with("ln_modulate_bwd");
  std::map<std::string, StepValue> a;
  std::vector<std::string> names = backward ? std::vector<std::string>{"g", "x", "scale", "mean", "rstd", "dx"}
                                            : std::vector<std::string>{"x", "scale", "shift", "y", "mean", "rstd"};
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(a[name], tensor(call, name, name == "mean" || name == "rstd" ? 1 : 2));
  }
  if (!backward) {
    ASSIGN_OR_RETURN(double eps, scalar(call, "eps", 1e-6));
    a["eps"] = eps;
  }
  bool perToken = plan.op.ends_with("per_token");
  if (perToken && backward) {
    for (const char* name : {"dscale", "dshift"}) {
      ASSIGN_OR_RETURN(a[name], tensor(call, name, 2));
    }
  }
  if (!perToken) {
    int64_t S = p.tokensPerSample, B = p.tokens / S;
    bool sampleMajor = p.variant.at("layout") == "bsd";  // [B, S, D]: a sample's tokens are adjacent
    if (plan.family == "rows") {
      a["sample_div"] = sampleMajor ? S : int64_t{1};
    } else {
      a["tokens_per_sample"] = S;
      a["sample_stride"] = sampleMajor ? S : int64_t{1};
      a["token_stride"] = sampleMajor ? int64_t{1} : B;
    }
    if (backward) {
      int64_t P = plan.partials, D = p.size;
      ASSIGN_OR_RETURN(rt::TensorArg dscalePart, b.alloc(rt::Dtype::F32, {B, P, D}));
      ASSIGN_OR_RETURN(rt::TensorArg dshiftPart, b.alloc(rt::Dtype::F32, {B, P, D}));
      a["dscale_part"] = dscalePart;
      a["dshift_part"] = dshiftPart;
      copyArgs(b.add(0), a);
      Step& r = b.add(1);
      r.args["dscale_part"] = dscalePart;
      r.args["dshift_part"] = dshiftPart;
      ASSIGN_OR_RETURN(r.args["dscale"], tensor(call, "dscale", 2));
      ASSIGN_OR_RETURN(r.args["dshift"], tensor(call, "dshift", 2));
      return b.take();
    }
  }
  copyArgs(b.add(0), a);
  return b.take();
}

Expected<std::vector<Step>> composeNormRope(const Plan& plan, const Problem& p, const OpCall& call, Builder& b) {
  std::map<std::string, StepValue> a;
  ASSIGN_OR_RETURN(double posDiv, scalar(call, "pos_div", 1.0));
  if (plan.op == "norm_rope_fwd" || plan.op == "norm_rope_bwd") {
    bool forward = plan.op == "norm_rope_fwd";
    ASSIGN_OR_RETURN(rt::TensorArg x, tensor(call, "x", 3));
    a["x"] = x;
    ASSIGN_OR_RETURN(a["weight"], tensor(call, "weight", 1));
    ASSIGN_OR_RETURN(a["rope_cos"], tensor(call, "cos", 2));
    ASSIGN_OR_RETURN(a["rope_sin"], tensor(call, "sin", 2));
    ASSIGN_OR_RETURN(a["rstd"], tensor(call, "rstd", 2));
    a["x_token_stride"] = x.strides[0];
    a["x_head_stride"] = x.strides[1];
    a["pos_div"] = static_cast<int64_t>(posDiv);
    if (forward) {
      ASSIGN_OR_RETURN(a["y"], tensor(call, "y", 3));
      ASSIGN_OR_RETURN(double eps, scalar(call, "eps", 1e-6));
      a["eps"] = eps;
      copyArgs(b.add(0), a);
      return b.take();
    }
    ASSIGN_OR_RETURN(a["dy"], tensor(call, "dy", 3));
    ASSIGN_OR_RETURN(rt::TensorArg dx, tensor(call, "dx", 3));
    a["dx"] = dx;
    a["dx_token_stride"] = dx.strides[0];
    a["dx_head_stride"] = dx.strides[1];
    ASSIGN_OR_RETURN(rt::TensorArg dw, tensor(call, "dw", 1));
    int64_t P = std::min(kNormRopeRowPartials, p.rows());
    ASSIGN_OR_RETURN(rt::TensorArg parts, b.alloc(rt::Dtype::F32, {P, kHeadDim}));
    a["dw_part"] = parts;
    copyArgs(b.add(0), a);
    RETURN_IF_ERROR(b.tree(1, parts, 1, P, dw));
    return b.take();
  }
  if (plan.op == "norm_rope_qkv_fwd") {
    ASSIGN_OR_RETURN(rt::TensorArg qkv, tensor(call, "qkv", 4));
    a["qkv"] = qkv;
    for (const char* name : {"q_weight", "k_weight"}) {
      ASSIGN_OR_RETURN(a[name], tensor(call, name, 1));
    }
    for (const char* name : {"q_cos", "q_sin", "k_cos", "k_sin", "q_rstd", "k_rstd"}) {
      ASSIGN_OR_RETURN(a[name], tensor(call, name, 2));
    }
    for (const char* name : {"q", "k", "v"}) {
      ASSIGN_OR_RETURN(a[name], tensor(call, name, 3));
    }
    qkvStrides(a, qkv);
    a["pos_div"] = static_cast<int64_t>(posDiv);
    ASSIGN_OR_RETURN(double eps, scalar(call, "eps", 1e-6));
    a["eps"] = eps;
    copyArgs(b.add(0), a);
    return b.take();
  }
  // The whole-QKV backward passes and the packer prologue.
  ASSIGN_OR_RETURN(a, qkvBackwardInputs(call));
  ASSIGN_OR_RETURN(rt::TensorArg dw, tensor(call, "dw", 2));
  int64_t T = p.tokens, H = p.heads;
  bool prologue = plan.op.starts_with("norm_rope_qkv_bwd_pack");
  bool wantsDqkv = !prologue || plan.op.ends_with("_bf16");
  rt::TensorArg dqkv;
  if (wantsDqkv) {
    ASSIGN_OR_RETURN(dqkv, tensor(call, "dqkv", 4));
  }
  if (plan.family == "rows") {
    int64_t P = std::min(kNormRopeRowPartials, p.rows());
    ASSIGN_OR_RETURN(rt::TensorArg parts, b.alloc(rt::Dtype::F32, {2, P, kHeadDim}));
    a["dw_part"] = parts;
    a["dqkv"] = dqkv;
    qkvStrides(a, std::get<rt::TensorArg>(a["qkv"]));
    copyArgs(b.add(0), a);
    RETURN_IF_ERROR(b.tree(1, parts, 2, P, dw));
    return b.take();
  }
  int64_t TB = T / 32, P = TB * H;
  RETURN_IF_ERROR(tileInputs(a, TB));
  ASSIGN_OR_RETURN(rt::TensorArg parts, b.alloc(rt::Dtype::F32, {2, TB, H, kHeadDim}));
  a["dw_part"] = parts;
  if (wantsDqkv) {
    ASSIGN_OR_RETURN(a["dqkv"], splitDim(dqkv, 0, TB, 32, "dqkv"));
  }
  if (!prologue) {
    copyArgs(b.add(0), a);
    RETURN_IF_ERROR(b.tree(1, make(parts.data, rt::Dtype::F32, {2, P, kHeadDim}), 2, P, dw));
    return b.take();
  }
  int64_t C = 3 * H * kHeadDim;
  ASSIGN_OR_RETURN(rt::TensorArg rowData, tensor(call, "row_data", 2));
  ASSIGN_OR_RETURN(rt::TensorArg rowScales, tensor(call, "row_scales", 2));
  ASSIGN_OR_RETURN(rt::TensorArg colData, tensor(call, "col_data", 2));
  ASSIGN_OR_RETURN(rt::TensorArg colScales, tensor(call, "col_scales", 2));
  ASSIGN_OR_RETURN(a["row_data"], splitDim(rowData, 0, TB, 32, "row_data"));
  ASSIGN_OR_RETURN(a["row_scales"], splitDim(rowScales, 0, TB, 32, "row_scales"));
  ASSIGN_OR_RETURN(a["col_data"], splitDim(colData, 1, TB, 24, "col_data"));
  ASSIGN_OR_RETURN(rt::TensorArg scalesT, b.alloc(rt::Dtype::U8, {TB, C}));
  a["col_scales_t"] = scalesT;
  copyArgs(b.add(0), a);
  // The transpose of the token-major column scales [T/32, C] into [C, T/32], in tiles of GB token
  // blocks by W columns.
  int64_t GB = configValue(plan.launches[1], "GB"), W = configValue(plan.launches[1], "W");
  if (GB <= 0 || W <= 0 || TB % GB != 0 || C % W != 0)
    return Status::error("the scales transpose's tile (GB = " + std::to_string(GB) + ", W = " + std::to_string(W) +
                         ") does not divide " + std::to_string(TB) + " token blocks x " + std::to_string(C) +
                         " columns");
  Step& t = b.add(1);
  t.args["src"] = make(scalesT.data, rt::Dtype::U8, {TB / GB, GB, C / W, W});
  ASSIGN_OR_RETURN(rt::TensorArg dst, reshaped(colScales, {C / W, W, TB / GB, GB}, "col_scales"));
  t.args["dst"] = dst;
  RETURN_IF_ERROR(b.tree(2, make(parts.data, rt::Dtype::F32, {2, P, kHeadDim}), 2, P, dw));
  return b.take();
}

Expected<std::vector<Step>> composePacker(const Plan& plan, const Problem& p, const OpCall& call, Builder& b) {
  std::map<std::string, StepValue> a;
  ASSIGN_OR_RETURN(rt::TensorArg x, tensor(call, "x", 2));
  if (plan.op == "mxfp6_pack_rows") {
    a["x"] = x;
    ASSIGN_OR_RETURN(a["data"], tensor(call, "data", 2));
    ASSIGN_OR_RETURN(a["scales"], tensor(call, "scales", 2));
    copyArgs(b.add(0), a);
    return b.take();
  }
  // Column packing: rows in groups of HB blocks of 32, x as [RG, HB, 32, C].
  int64_t HB = configValue(plan.launches[0], "HB"), R = p.tokens;
  if (HB <= 0 || R % (32 * HB) != 0)
    return Status::error(plan.op + ": " + std::to_string(R) + " rows are not whole groups of HB = " +
                         std::to_string(HB) + " blocks of 32");
  int64_t RG = R / (32 * HB);
  auto rowBlocks = [&](const rt::TensorArg& t, const std::string& name) -> Expected<rt::TensorArg> {
    ASSIGN_OR_RETURN(rt::TensorArg g, splitDim(t, 0, RG, HB * 32, name));
    return splitDim(g, 1, HB, 32, name);
  };
  auto colBlocks = [&](const rt::TensorArg& t, int64_t inner, const std::string& name) -> Expected<rt::TensorArg> {
    ASSIGN_OR_RETURN(rt::TensorArg g, splitDim(t, 1, RG, HB * inner, name));
    if (inner == 1) return g;
    return splitDim(g, 2, HB, inner, name);
  };
  ASSIGN_OR_RETURN(a["x"], rowBlocks(x, "x"));
  bool dual = plan.op == "mxfp6_pack_dual";
  std::string data = dual ? "col_data" : "data", scales = dual ? "col_scales" : "scales";
  ASSIGN_OR_RETURN(rt::TensorArg colData, tensor(call, data, 2));
  ASSIGN_OR_RETURN(rt::TensorArg colScales, tensor(call, scales, 2));
  ASSIGN_OR_RETURN(a[data], colBlocks(colData, 24, data));
  ASSIGN_OR_RETURN(a[scales], colBlocks(colScales, 1, scales));
  if (dual) {
    ASSIGN_OR_RETURN(rt::TensorArg rowData, tensor(call, "row_data", 2));
    ASSIGN_OR_RETURN(rt::TensorArg rowScales, tensor(call, "row_scales", 2));
    ASSIGN_OR_RETURN(a["row_data"], rowBlocks(rowData, "row_data"));
    ASSIGN_OR_RETURN(a["row_scales"], rowBlocks(rowScales, "row_scales"));
  }
  copyArgs(b.add(0), a);
  return b.take();
}

}  // namespace

Expected<rt::TensorArg> reshaped(const rt::TensorArg& t, std::vector<int64_t> sizes, const std::string& name) {
  int64_t expect = 1, n = 1, m = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.sizes[i] != 1 && t.strides[i] != expect)
      return Status::error("argument '" + name + "' must be contiguous");
    expect *= t.sizes[i];
    n *= t.sizes[i];
  }
  for (int64_t s : sizes) m *= s;
  if (n != m)
    return Status::error("argument '" + name + "' " + shapeText(t) + " has " + std::to_string(n) + " elements, " +
                         std::to_string(m) + " expected");
  return make(t.data, t.dtype, sizes);
}

Expected<rt::TensorArg> splitFirst(const rt::TensorArg& t, int64_t a, int64_t b, const std::string& name) {
  return splitDim(t, 0, a, b, name);
}

rt::TensorArg broadcastRows(const rt::TensorArg& t, int64_t rows) {
  std::vector<int64_t> sizes = {rows, t.sizes[0]}, strides = {0, t.strides[0]};
  return rt::TensorArg::view(t.data, t.dtype, sizes, strides);
}

Expected<Problem> problemOf(const OpSpec& op, const std::map<std::string, std::string>& variant, const OpCall& call) {
  Problem p;
  p.op = &op;
  ASSIGN_OR_RETURN(p.variant, resolveVariant(op, variant));
  if (op.name.starts_with("ln_modulate")) {
    std::string first = op.name.starts_with("ln_modulate_bwd") ? "g" : "x";
    ASSIGN_OR_RETURN(rt::TensorArg x, tensor(call, first, 2));
    p.tokens = x.sizes[0];
    p.size = x.sizes[1];
    if (op.perSample) {
      ASSIGN_OR_RETURN(double S, scalar(call, "tokens_per_sample"));
      p.tokensPerSample = static_cast<int64_t>(S);
    }
  } else if (op.name.starts_with("mxfp6_pack")) {
    ASSIGN_OR_RETURN(rt::TensorArg x, tensor(call, "x", 2));
    p.tokens = x.sizes[0];
    p.size = x.sizes[1];
  } else if (op.name == "norm_rope_fwd" || op.name == "norm_rope_bwd") {
    ASSIGN_OR_RETURN(rt::TensorArg x, tensor(call, "x", 3));
    p.tokens = x.sizes[0];
    p.heads = x.sizes[1];
  } else {
    ASSIGN_OR_RETURN(rt::TensorArg qkv, tensor(call, "qkv", 4));
    p.tokens = qkv.sizes[0];
    p.heads = qkv.sizes[2];
  }
  RETURN_IF_ERROR(validateProblem(p));
  return p;
}

Expected<std::vector<Step>> compose(const Plan& plan, const Problem& problem, const OpCall& call,
                                    const ScratchAllocator& scratch) {
  RETURN_IF_ERROR(planApplies(plan, problem));
  Builder b(plan, scratch);
  if (plan.op.starts_with("ln_modulate")) return composeLnModulate(plan, problem, call, b);
  if (plan.op.starts_with("mxfp6_pack")) return composePacker(plan, problem, call, b);
  if (plan.op.starts_with("norm_rope")) return composeNormRope(plan, problem, call, b);
  return Status::error("no composition for op '" + plan.op + "'");
}

Status runSteps(const Plan& plan, const std::vector<Step>& steps, Launcher& launcher) {
  for (const Step& step : steps) RETURN_IF_ERROR(launcher.launch(plan, step));
  return Status::ok();
}

}  // namespace mxfp6::ops
