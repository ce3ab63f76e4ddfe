// An op's plans, composed and run on the CPU through the reference interpreter, against each
// other and against fp64 formulas written here from docs/architecture.md ("Kernel math"): the
// views, strides, scratch buffers and reduction trees of every composition are exercised.
//
// Bounds: bf16 outputs within 0.5 bf16 ulp of the fp64 value plus 2^-20 x the magnitude of the
// last operation's terms (cancellation), or 1 ulp where fp32 partials are summed; fp32 sums of
// partials within 1e-5 relative of the fp64 sum; packer blobs bit for bit between plans.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ops/compose.h"
#include "ops/interp_launcher.h"

namespace mxfp6::ops {
namespace {

uint16_t toBf16(double v) {
  float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
double fromBf16(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
double ulpBf16(double v) {
  int e;
  std::frexp(std::max(std::fabs(v), 1e-30), &e);
  return std::ldexp(1.0, e - 8);
}

/// Host memory that a TensorArg views; allocations for scratch too.
struct Host {
  std::vector<std::vector<std::byte>> blocks;
  void* alloc(size_t bytes) {
    blocks.emplace_back(bytes + 256);
    return blocks.back().data();
  }
  rt::TensorArg tensor(rt::Dtype d, std::vector<int64_t> sizes) {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return rt::TensorArg::contiguous(alloc(n * rt::dtypeBytes(d)), d, sizes);
  }
  rt::TensorArg random(rt::Dtype d, std::vector<int64_t> sizes, std::mt19937& g, double lo = -2, double hi = 2) {
    rt::TensorArg t = tensor(d, sizes);
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    std::uniform_real_distribution<double> u(lo, hi);
    for (int64_t i = 0; i < n; ++i) {
      if (d == rt::Dtype::BF16) static_cast<uint16_t*>(const_cast<void*>(t.data))[i] = toBf16(u(g));
      else static_cast<float*>(const_cast<void*>(t.data))[i] = static_cast<float>(u(g));
    }
    return t;
  }
  ScratchAllocator scratch() {
    return [this](size_t bytes) -> Expected<void*> { return alloc(bytes); };
  }
};

int64_t count(const rt::TensorArg& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.sizes[i];
  return n;
}
double bf(const rt::TensorArg& t, int64_t i) { return fromBf16(static_cast<const uint16_t*>(t.data)[i]); }
double f32(const rt::TensorArg& t, int64_t i) { return static_cast<const float*>(t.data)[i]; }
bool sameBytes(const rt::TensorArg& a, const rt::TensorArg& b) {
  return count(a) == count(b) && std::memcmp(a.data, b.data, count(a) * rt::dtypeBytes(a.dtype)) == 0;
}

/// Runs a plan on the interpreter; `variant` holds the runtime axes (layout), the compile-time
/// ones are read off the plan's config.
Status runPlan(const Plan& plan, const OpCall& call, Host& host, std::map<std::string, std::string> variant = {}) {
  const OpSpec* op = findOp(plan.op);
  for (const VariantAxis& axis : op->variants) {
    if (axis.compileTime) {
      auto config = *parseConfig(plan.launches[0].config);
      variant[axis.name] = config.at(axis.name);
    }
  }
  ASSIGN_OR_RETURN(Problem problem, problemOf(*op, variant, call));
  ASSIGN_OR_RETURN(auto steps, compose(plan, problem, call, host.scratch()));
  InterpLauncher launcher(MXFP6_DSL_DIR);
  return runSteps(plan, steps, launcher);
}

std::vector<Plan> plansOf(const std::string& op, std::map<std::string, std::string> variant, int64_t size) {
  const OpSpec* spec = findOp(op);
  return candidatePlans(*spec, *resolveVariant(*spec, variant), size);
}

// LN-modulate: every forward family, both token layouts, against the fp64 formula -----------

TEST(PlansInterp, LnModulateForwardFamiliesMatchTheFormula) {
  std::mt19937 g(1);
  Host host;
  const int64_t B = 2, S = 8, T = B * S, D = 3072;
  rt::TensorArg x = host.random(rt::Dtype::BF16, {T, D}, g), scale = host.random(rt::Dtype::BF16, {B, D}, g, -0.5, 0.5),
                shift = host.random(rt::Dtype::BF16, {B, D}, g);
  for (bool bsd : {true, false}) {
    std::set<std::string> families;
    for (const Plan& plan : plansOf("ln_modulate_fwd", {}, D)) {
      if (!families.insert(plan.family).second) continue;  // each family's default
      OpCall call;
      rt::TensorArg y = host.tensor(rt::Dtype::BF16, {T, D}), mean = host.tensor(rt::Dtype::F32, {T}),
                    rstd = host.tensor(rt::Dtype::F32, {T});
      call.tensors = {{"x", x}, {"scale", scale}, {"shift", shift}, {"y", y}, {"mean", mean}, {"rstd", rstd}};
      call.scalars = {{"tokens_per_sample", S}, {"eps", 1e-6}};
      Status s = runPlan(plan, call, host, {{"layout", bsd ? "bsd" : "sbd"}});
      ASSERT_TRUE(s) << plan.id() << ": " << s.message();
      for (int64_t t = 0; t < T; ++t) {
        int64_t b = bsd ? t / S : t % B;
        double mu = 0, var = 0;
        for (int64_t d = 0; d < D; ++d) mu += bf(x, t * D + d);
        mu /= D;
        for (int64_t d = 0; d < D; ++d) var += (bf(x, t * D + d) - mu) * (bf(x, t * D + d) - mu);
        double r = 1 / std::sqrt(var / D + double(float(1e-6)));
        ASSERT_NEAR(f32(mean, t), mu, 1e-6 * (std::fabs(mu) + 1)) << plan.id();
        ASSERT_NEAR(f32(rstd, t), r, 1e-5 * r) << plan.id();
        for (int64_t d = 0; d < D; ++d) {
          double xh = (bf(x, t * D + d) - mu) * r, gain = xh * (1 + bf(scale, b * D + d));
          double ref = gain + bf(shift, b * D + d);
          double bound = 0.5 * ulpBf16(ref) + std::ldexp(std::fabs(gain) + std::fabs(bf(shift, b * D + d)), -20);
          ASSERT_LE(std::fabs(bf(y, t * D + d) - ref), bound) << plan.id() << (bsd ? " bsd" : " sbd") << " t=" << t;
        }
      }
    }
    EXPECT_EQ(families.size(), 2u);
  }
}

TEST(PlansInterp, LnModulateBackwardEveryPartialsChoiceAndReduction) {
  std::mt19937 g(2);
  Host host;
  const int64_t B = 2, S = 16, T = B * S, D = 3072;
  rt::TensorArg gr = host.random(rt::Dtype::BF16, {T, D}, g), x = host.random(rt::Dtype::BF16, {T, D}, g),
                scale = host.random(rt::Dtype::BF16, {B, D}, g, -0.5, 0.5);
  rt::TensorArg mean = host.tensor(rt::Dtype::F32, {T}), rstd = host.tensor(rt::Dtype::F32, {T});
  for (int64_t t = 0; t < T; ++t) {
    double mu = 0, var = 0;
    for (int64_t d = 0; d < D; ++d) mu += bf(x, t * D + d);
    mu /= D;
    for (int64_t d = 0; d < D; ++d) var += std::pow(bf(x, t * D + d) - mu, 2);
    static_cast<float*>(const_cast<void*>(mean.data))[t] = float(mu);
    static_cast<float*>(const_cast<void*>(rstd.data))[t] = float(1 / std::sqrt(var / D + 1e-6));
  }
  // fp64 references of dscale and dshift (bsd: sample b holds tokens b*S .. b*S+S-1).
  std::vector<double> dscale(B * D), dshift(B * D), magScale(B * D);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t d = 0; d < D; ++d) {
      double xh = (bf(x, t * D + d) - f32(mean, t)) * f32(rstd, t), gv = bf(gr, t * D + d);
      dscale[t / S * D + d] += gv * xh;
      magScale[t / S * D + d] += std::fabs(gv * xh);
      dshift[t / S * D + d] += gv;
    }
  int tried = 0;
  std::set<std::string> seen;
  for (const Plan& plan : plansOf("ln_modulate_bwd", {}, D)) {
    // every P with the default pass, and every reduction at the first P
    std::string key = std::to_string(plan.partials) + plan.launches[1].config;
    if (plan.launches[0].config != plansOf("ln_modulate_bwd", {}, D)[0].launches[0].config || !seen.insert(key).second)
      continue;
    OpCall call;
    rt::TensorArg dx = host.tensor(rt::Dtype::BF16, {T, D}), ds = host.tensor(rt::Dtype::BF16, {B, D}),
                  dh = host.tensor(rt::Dtype::BF16, {B, D});
    call.tensors = {{"g", gr}, {"x", x}, {"scale", scale}, {"mean", mean}, {"rstd", rstd},
                    {"dx", dx}, {"dscale", ds}, {"dshift", dh}};
    call.scalars = {{"tokens_per_sample", S}};
    Status s = runPlan(plan, call, host, {{"layout", "bsd"}});
    ASSERT_TRUE(s) << plan.id() << ": " << s.message();
    for (int64_t i = 0; i < B * D; ++i) {
      ASSERT_LE(std::fabs(bf(ds, i) - dscale[i]), ulpBf16(dscale[i]) + std::ldexp(magScale[i], -20)) << plan.id() << " " << i;
      ASSERT_LE(std::fabs(bf(dh, i) - dshift[i]), ulpBf16(dshift[i]) + std::ldexp(double(S) * 2, -20)) << plan.id();
    }
    ++tried;
  }
  EXPECT_GE(tried, 5);
}

// norm+RoPE whole-QKV backward: the per-row and the tiled families, and the packer prologue ---

struct QkvBackward {
  int64_t T, H;
  Host host;
  rt::TensorArg dq, dk, dv, qkv, qw, kw, qc, qs, kc, ks, qr, kr;
  explicit QkvBackward(int64_t T_, int64_t H_, unsigned seed) : T(T_), H(H_) {
    std::mt19937 g(seed);
    const int64_t S = 16;
    dq = host.random(rt::Dtype::BF16, {T, H, 128}, g);
    dk = host.random(rt::Dtype::BF16, {T, H, 128}, g);
    dv = host.random(rt::Dtype::BF16, {T, H, 128}, g);
    // Megatron mixed_qkv [T, H, 3, 128] viewed as [T, 3, H, 128].
    rt::TensorArg mixed = host.random(rt::Dtype::BF16, {T, H, 3, 128}, g);
    std::vector<int64_t> sizes = {T, 3, H, 128}, strides = {H * 3 * 128, 128, 3 * 128, 1};
    qkv = rt::TensorArg::view(mixed.data, rt::Dtype::BF16, sizes, strides);
    qw = host.random(rt::Dtype::BF16, {128}, g, 0.5, 1.5);
    kw = host.random(rt::Dtype::BF16, {128}, g, 0.5, 1.5);
    for (rt::TensorArg* t : {&qc, &qs, &kc, &ks}) *t = host.random(rt::Dtype::F32, {S, 64}, g, -1, 1);
    qr = host.random(rt::Dtype::F32, {T, H}, g, 0.5, 2);
    kr = host.random(rt::Dtype::F32, {T, H}, g, 0.5, 2);
  }
  OpCall call() const {
    OpCall c;
    c.tensors = {{"dq", dq}, {"dk", dk}, {"dv", dv}, {"qkv", qkv}, {"q_weight", qw}, {"k_weight", kw},
                 {"q_cos", qc}, {"q_sin", qs}, {"k_cos", kc}, {"k_sin", ks}, {"q_rstd", qr}, {"k_rstd", kr}};
    c.scalars = {{"pos_div", 1}};
    return c;
  }
  rt::TensorArg dqkvLike() {
    rt::TensorArg m = host.tensor(rt::Dtype::BF16, {T, H, 3, 128});
    std::vector<int64_t> sizes = {T, 3, H, 128}, strides = {H * 3 * 128, 128, 3 * 128, 1};
    return rt::TensorArg::view(m.data, rt::Dtype::BF16, sizes, strides);
  }
  /// dw[x][i] = sum over rows of dn * u (docs/architecture.md, norm+RoPE backward), fp64.
  double dwRef(int part, int i) const {
    const rt::TensorArg& gr = part == 0 ? dq : dk;
    const rt::TensorArg& c = part == 0 ? qc : kc;
    const rt::TensorArg& s = part == 0 ? qs : ks;
    const rt::TensorArg& r = part == 0 ? qr : kr;
    double sum = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        int64_t row = (t * H + h) * 128, pair = i / 2, pos = t % 16;
        double ci = f32(c, pos * 64 + pair), si = f32(s, pos * 64 + pair);
        double g0 = bf(gr, row + 2 * pair), g1 = bf(gr, row + 2 * pair + 1);
        double dn = i % 2 == 0 ? ci * g0 + si * g1 : -si * g0 + ci * g1;
        double x = bf(qkv, t * qkv.strides[0] + part * qkv.strides[1] + h * qkv.strides[2] + i);
        sum += dn * x * f32(r, t * H + h);
      }
    return sum;
  }
};

TEST(PlansInterp, NormRopeQkvBackwardRowsAndTilesAgree) {
  QkvBackward p(64, 2, 3);
  std::vector<rt::TensorArg> results;
  std::set<std::string> families;
  for (const Plan& plan : plansOf("norm_rope_qkv_bwd", {}, 0)) {
    if (!families.insert(plan.family).second) continue;
    OpCall call = p.call();
    rt::TensorArg dqkv = p.dqkvLike(), dw = p.host.tensor(rt::Dtype::F32, {2, 128});
    call.tensors["dqkv"] = dqkv;
    call.tensors["dw"] = dw;
    Status s = runPlan(plan, call, p.host);
    ASSERT_TRUE(s) << plan.id() << ": " << s.message();
    for (int part = 0; part < 2; ++part)
      for (int i = 0; i < 128; ++i) {
        double ref = p.dwRef(part, i);
        ASSERT_NEAR(f32(dw, part * 128 + i), ref, 1e-5 * (std::fabs(ref) + 1)) << plan.id() << " dw[" << part << "][" << i << "]";
      }
    results.push_back(dqkv);
  }
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(sameBytes(results[0], results[1])) << "d(mixed_qkv) of the per-row and the tiled pass differ";
}

TEST(PlansInterp, PackerProloguePacksTheBackwardItComputes) {
  // H = 8: C = 3072, a width the dual packer is specialized to, so its blobs of the bf16
  // d(mixed_qkv) are the reference for the prologue's; T = 128 covers the packer's HB = 4 tiles.
  QkvBackward p(128, 8, 4);
  const int64_t T = 128, C = 3072;
  auto blobs = [&](Host& h) {
    return std::vector<rt::TensorArg>{h.tensor(rt::Dtype::U8, {T, C * 3 / 4}), h.tensor(rt::Dtype::U8, {T, C / 32}),
                                      h.tensor(rt::Dtype::U8, {C, T * 3 / 4}), h.tensor(rt::Dtype::U8, {C, T / 32})};
  };
  const char* names[] = {"row_data", "row_scales", "col_data", "col_scales"};
  // The _bf16 prologue: blobs, dw and d(mixed_qkv).
  OpCall call = p.call();
  auto withBf16 = blobs(p.host);
  rt::TensorArg dqkv = p.dqkvLike(), dw = p.host.tensor(rt::Dtype::F32, {2, 128});
  for (int i = 0; i < 4; ++i) call.tensors[names[i]] = withBf16[i];
  call.tensors["dqkv"] = dqkv;
  call.tensors["dw"] = dw;
  // T = 128 is 4 token blocks: the first plan whose scales transpose tiles them (GB = 4).
  Plan bf16Plan;
  for (const Plan& plan : plansOf("norm_rope_qkv_bwd_pack_bf16", {}, 0)) {
    Problem problem{findOp(plan.op), *resolveVariant(*findOp(plan.op), {}), 0, T, 8};
    if (planApplies(plan, problem)) {
      bf16Plan = plan;
      break;
    }
  }
  ASSERT_FALSE(bf16Plan.launches.empty());
  Status s = runPlan(bf16Plan, call, p.host);
  ASSERT_TRUE(s) << bf16Plan.id() << ": " << s.message();
  // The prologue without bf16 output, at two transposes: the same blobs.
  int checked = 0;
  for (const Plan& plan : plansOf("norm_rope_qkv_bwd_pack", {}, 0)) {
    if (plan.launches[0].config != plansOf("norm_rope_qkv_bwd_pack", {}, 0)[0].launches[0].config ||
        plan.launches[2].config != bf16Plan.launches[2].config)
      continue;
    OpCall c = p.call();
    auto out = blobs(p.host);
    for (int i = 0; i < 4; ++i) c.tensors[names[i]] = out[i];
    c.tensors["dw"] = p.host.tensor(rt::Dtype::F32, {2, 128});
    Status st = runPlan(plan, c, p.host);
    if (!st && st.message().find("does not divide") != std::string::npos) continue;  // GB = 32 vs 4 token blocks
    ASSERT_TRUE(st) << plan.id() << ": " << st.message();
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(sameBytes(out[i], withBf16[i])) << plan.id() << " " << names[i];
    ++checked;
  }
  EXPECT_EQ(checked, 2);  // the transposes of GB = 4 and GB = 1
  // The dual packer on the bf16 d(mixed_qkv) [T, C]: the prologue's blobs bit for bit.
  OpCall packCall;
  auto ref = blobs(p.host);
  packCall.tensors["x"] = rt::TensorArg::contiguous(dqkv.data, rt::Dtype::BF16, std::vector<int64_t>{T, C});
  for (int i = 0; i < 4; ++i) packCall.tensors[names[i]] = ref[i];
  Plan dual = plansOf("mxfp6_pack_dual", {}, C).front();
  s = runPlan(dual, packCall, p.host);
  ASSERT_TRUE(s) << dual.id() << ": " << s.message();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(sameBytes(ref[i], withBf16[i])) << names[i] << " of the prologue vs the dual packer";
}

// Packers: every column tiling gives the same blobs; dual = rows + columns -------------------

TEST(PlansInterp, PackerPlansAgreeBitForBit) {
  std::mt19937 g(5);
  Host host;
  const int64_t R = 256, C = 3072;
  rt::TensorArg x = host.random(rt::Dtype::BF16, {R, C}, g, -8, 8);
  auto run = [&](const Plan& plan, std::vector<std::string> names, std::vector<std::vector<int64_t>> shapes) {
    OpCall call;
    call.tensors["x"] = x;
    std::vector<rt::TensorArg> outs;
    for (size_t i = 0; i < names.size(); ++i) {
      outs.push_back(host.tensor(rt::Dtype::U8, shapes[i]));
      call.tensors[names[i]] = outs.back();
    }
    Status s = runPlan(plan, call, host);
    EXPECT_TRUE(s) << plan.id() << ": " << s.message();
    return outs;
  };
  std::vector<std::vector<int64_t>> rowShapes = {{R, C * 3 / 4}, {R, C / 32}}, colShapes = {{C, R * 3 / 4}, {C, R / 32}};
  auto rows = run(plansOf("mxfp6_pack_rows", {}, C).front(), {"data", "scales"}, rowShapes);
  std::vector<rt::TensorArg> cols;
  for (const Plan& plan : plansOf("mxfp6_pack_cols", {}, C)) {
    auto out = run(plan, {"data", "scales"}, colShapes);
    if (cols.empty()) cols = out;
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(sameBytes(out[i], cols[i])) << plan.id();
  }
  for (const Plan& plan : plansOf("mxfp6_pack_dual", {}, C)) {
    if (plan.launches[0].config.find("W=256") != std::string::npos) continue;  // the 512-thread tile is slow here
    auto out = run(plan, {"row_data", "row_scales", "col_data", "col_scales"},
                   {rowShapes[0], rowShapes[1], colShapes[0], colShapes[1]});
    EXPECT_TRUE(sameBytes(out[0], rows[0]) && sameBytes(out[1], rows[1])) << plan.id() << " rows";
    EXPECT_TRUE(sameBytes(out[2], cols[0]) && sameBytes(out[3], cols[1])) << plan.id() << " columns";
  }
}

TEST(PlansInterp, MissingAndMisshapenArgumentsAreNamed) {
  Host host;
  OpCall call;
  call.tensors["x"] = host.tensor(rt::Dtype::BF16, {64, 3072});
  Plan plan = plansOf("mxfp6_pack_rows", {}, 3072).front();
  Status s = runPlan(plan, call, host);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("'data'"), std::string::npos) << s.message();
  call.tensors["x"] = host.tensor(rt::Dtype::BF16, {64, 3, 1024});
  s = runPlan(plan, call, host);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("'x' must have 2 dims"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace mxfp6::ops
