// The op table: every op of the Flux set, its plan families and their candidate configs.
//
// Candidates are the schedules the benchmark kept (bench/results/2026-12-06-h200.md is the
// standing they come from) plus their neighbours in each tunable, so the tuner chooses among
// configs that each led somewhere; the first config of a role is its default, the schedule that
// leads at T = 16384 on the H200. Candidates that a specialized size refuses (a packer tile that
// does not divide C) are pruned by precompile with the compiler's reason.
#include "ops/op_table.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "support/sha256.h"

namespace mxfp6::ops {
namespace {

const std::vector<int64_t> kPackerWidths = {3072, 9216, 12288, 15360, 21504};

// The codes are the compiler's (compiler/frontend/builtins.cpp kValueNames; ops_tests checks
// they agree): the client compares code objects' metadata with plans without the compiler.
VariantAxis formatAxis() { return {"FMT", {"E3M2", "E2M3"}, true, {1, 0}}; }
VariantAxis modeAxis() { return {"MODE", {"RCEIL", "EVEN", "FLOOR"}, true, {0, 1, 2}}; }
VariantAxis tokenLayout() { return {"layout", {"bsd", "sbd"}, false}; }
VariantAxis qkvLayout() { return {"layout", {"megatron", "blocked"}, false}; }

// The fp32 dw partials of the norm+RoPE backward passes, reduced by a tree of these launches.
RoleSpec dwTree() { return {"reduce", "norm_rope_dw_reduce", {"THREADS=32,VEC=4", "THREADS=16,VEC=4"}, false, "norm_rope.mxk"}; }

RoleSpec scalesTranspose() {
  return {"transpose", "mxfp6_scales_transpose",
          {"GB=32,THREADS=256,VEC=16,W=128", "GB=32,THREADS=256,VEC=16,W=64", "GB=4,THREADS=32,VEC=16,W=128",
           "GB=1,THREADS=32,VEC=4,W=128"},
          false, "mxfp6_pack.mxk"};
}

std::vector<OpSpec> buildTable() {
  std::vector<OpSpec> ops;

  ops.push_back({"ln_modulate_fwd", "ln_modulate.mxk",
                 "y = LN(x) * (1 + scale[b]) + shift[b], per-sample modulation; saves mean and rstd",
                 {tokenLayout()}, "D", {3072}, "tokens",
                 {{"rows",
                   {{"pass", "ln_modulate_fwd",
                     {"ANCHOR=1,ROWS=1,THREADS=128,VEC=8", "ROWS=1,THREADS=128,VEC=8", "ROWS=1,THREADS=192,VEC=8",
                      "ROWS=1,THREADS=384,VEC=8", "ROWS=2,THREADS=384,VEC=8", "ASYNC=1,ROWS=1,SERIAL=4,THREADS=128,VEC=8",
                      "ASYNC=2,ROWS=1,SERIAL=8,THREADS=192,VEC=8"}}}},
                  {"samples",
                   {{"pass", "ln_modulate_fwd_samples",
                     {"ASYNC=1,P=128,THREADS=128,VEC=8", "ASYNC=1,P=256,THREADS=128,VEC=8",
                      "ASYNC=2,P=128,THREADS=128,VEC=8", "ASYNC=1,P=128,THREADS=192,VEC=8"}}}}}});

  ops.push_back({"ln_modulate_fwd_per_token", "ln_modulate.mxk",
                 "LN-modulate forward with per-token scale and shift [T, D]", {}, "D", {3072}, "tokens",
                 {{"rows",
                   {{"pass", "ln_modulate_fwd_per_token",
                     {"ROWS=1,THREADS=192,VEC=8", "ROWS=1,THREADS=128,VEC=8", "ROWS=1,THREADS=384,VEC=8",
                      "ASYNC=1,ROWS=1,SERIAL=4,THREADS=128,VEC=8"}}}}}});

  ops.push_back({"ln_modulate_bwd", "ln_modulate.mxk",
                 "one-pass LN-modulate backward: dx, and dscale/dshift through P fp32 partials per sample",
                 {tokenLayout()}, "D", {3072}, "tokens",
                 {{"partials",
                   {{"pass", "ln_modulate_bwd",
                     {"ASYNC=1,PREFETCH=2,THREADS=384,VEC=8", "PREFETCH=2,THREADS=384,VEC=8", "THREADS=384,VEC=8",
                      "PREFETCH=2,THREADS=128,VEC=8", "PREFETCH=2,THREADS=768,VEC=4"}},
                    {"reduce", "ln_modulate_bwd_reduce",
                     {"THREADS=192,VEC=4,W=768", "THREADS=384,VEC=8,W=3072", "THREADS=64,VEC=2,W=384"}}},
                   Partials::PerSample, {8, 4, 16}}}});

  ops.push_back({"ln_modulate_bwd_per_token", "ln_modulate.mxk",
                 "LN-modulate backward with per-token modulation: dx, dscale, dshift elementwise", {}, "D",
                 {3072}, "tokens",
                 {{"rows",
                   {{"pass", "ln_modulate_bwd_per_token",
                     {"ROWS=1,THREADS=384,VEC=8", "ROWS=1,THREADS=128,VEC=8", "ROWS=2,THREADS=128,VEC=8"}}}}}});

  ops.push_back({"norm_rope_fwd", "norm_rope.mxk",
                 "per-tensor QK RMSNorm + interleaved RoPE of a [T, H, 128] view (any strides)", {}, "", {},
                 "rows",
                 {{"rows",
                   {{"pass", "norm_rope_fwd",
                     {"ANCHOR=1,INVARIANTS=1,PREDICATE=1,ROWS=8,THREADS=8,VEC=8", "ANCHOR=1,PREDICATE=1,ROWS=8,THREADS=8,VEC=8",
                      "PREDICATE=1,ROWS=8,THREADS=8,VEC=8", "ROWS=16,THREADS=8,VEC=8", "ROWS=16,THREADS=16,VEC=8",
                      "INTERLEAVE=2,ROWS=4,THREADS=16,VEC=8"}}}}}});

  ops.push_back({"norm_rope_qkv_fwd", "norm_rope.mxk",
                 "whole-QKV norm+RoPE forward: mixed_qkv to contiguous q, k, v and the rstd of q and k",
                 {qkvLayout()}, "", {}, "rows",
                 {{"rows",
                   {{"pass", "norm_rope_qkv_fwd",
                     {"ANCHOR=1,ROWS=16,SCALARS=1,THREADS=16,VEC=8", "ANCHOR=1,ROWS=16,THREADS=16,VEC=8",
                      "ROWS=16,THREADS=16,VEC=8", "ROWS=8,SCALARS=1,THREADS=16,VEC=8", "ROWS=32,THREADS=8,VEC=8",
                      "ASYNC=1,ROWS=8,SERIAL=4,THREADS=16,VEC=8"}}}}}});

  ops.push_back({"norm_rope_bwd", "norm_rope.mxk",
                 "per-tensor norm+RoPE backward: dx into its strided view, dw through fp32 partials", {}, "",
                 {}, "rows",
                 {{"rows",
                   {{"pass", "norm_rope_bwd",
                     {"ASYNC=1,PREFETCH=2,ROWS=8,THREADS=16,VEC=8", "PREFETCH=2,ROWS=16,THREADS=8,VEC=8",
                      "ROWS=16,THREADS=16,VEC=8", "PREFETCH=2,ROWS=16,THREADS=16,VEC=8"}},
                    dwTree()},
                   Partials::Tree}}});

  ops.push_back({"norm_rope_qkv_bwd", "norm_rope.mxk",
                 "whole-QKV norm+RoPE backward: d(mixed_qkv) written whole, dq_weight and dk_weight",
                 {qkvLayout()}, "", {}, "rows",
                 {{"rows",
                   {{"pass", "norm_rope_qkv_bwd",
                     {"ASYNC=1,PREFETCH=2,ROWS=8,THREADS=16,VEC=8", "ROWS=16,THREADS=16,VEC=8",
                      "PREFETCH=2,ROWS=16,THREADS=16,VEC=8", "ROWS=32,THREADS=16,VEC=8"}},
                    dwTree()},
                   Partials::Tree},
                  {"tiles",
                   {{"pass", "norm_rope_qkv_bwd_tiles",
                     {"THREADS=256,VEC=8", "THREADS=128,VEC=32", "THREADS=512,VEC=8", "THREADS=256,VEC=16"}},
                    dwTree()},
                   Partials::Tree, {}, 32}}});

  auto packer = [&](const std::string& name, std::string summary, std::vector<std::string> configs) {
    ops.push_back({name, "mxfp6_pack.mxk", std::move(summary),
                   {formatAxis(), modeAxis()}, "C", kPackerWidths, "tokens",
                   {{"rows", {{"pass", name, std::move(configs)}}}}});
  };
  packer("mxfp6_pack_rows", "MXFP6 packing along rows (the forward GEMM's operand)",
         {"ROWS=1,THREADS=192,VEC=16", "ROWS=2,THREADS=192,VEC=16", "ROWS=4,THREADS=32,VEC=32", "ROWS=1,THREADS=384,VEC=8",
          "ROWS=2,THREADS=384,VEC=8", "ROWS=4,THREADS=128,VEC=8"});
  packer("mxfp6_pack_cols", "MXFP6 packing along columns (the backward GEMMs' operands)",
         {"HB=4,ROWS=1,THREADS=256,VEC=32,W=64", "HB=4,ROWS=1,THREADS=256,VEC=32,W=128",
          "HB=4,ROWS=1,THREADS=128,VEC=32,W=64", "HB=8,ROWS=1,THREADS=256,VEC=32,W=64",
          "HB=2,ROWS=1,THREADS=256,VEC=16,W=128", "HB=1,ROWS=4,THREADS=64,VEC=32,W=64"});
  packer("mxfp6_pack_dual", "MXFP6 packing along rows and columns from one read",
         {"HB=4,ROWS=1,THREADS=256,VEC=32,W=128", "HB=4,ROWS=1,THREADS=256,VEC=32,W=64",
          "HB=4,MINPROGS=3,ROWS=1,THREADS=256,VEC=32,W=128", "HB=4,MINPROGS=2,ROWS=1,THREADS=512,VEC=32,W=256",
          "HB=4,ROWS=1,THREADS=128,VEC=32,W=64", "HB=1,ROWS=4,THREADS=64,VEC=32,W=64"});

  // The packer prologue: the whole-QKV backward fused into the dual packing of d(mixed_qkv),
  // Megatron layout, C = 3 * H * 128 (H = 24: 9216); its column scales come out token-major and
  // a second launch transposes them; the dw partials (one per 32-token block and head) go
  // through the tree.
  for (std::string name : {"norm_rope_qkv_bwd_pack", "norm_rope_qkv_bwd_pack_bf16"}) {
    bool bf16 = name.ends_with("_bf16");
    ops.push_back({name, "norm_rope_bwd_pack.mxk",
                   bf16 ? "the packer prologue with the bf16 d(mixed_qkv) as well"
                        : "norm+RoPE backward fused into the dual MXFP6 packing of d(mixed_qkv)",
                   {formatAxis(), modeAxis()}, "", {}, "rows",
                   {{"tiles",
                     {{"pass", name,
                       bf16 ? std::vector<std::string>{"THREADS=256,VEC=8", "THREADS=256,VEC=16", "THREADS=128,VEC=32",
                                                       "THREADS=512,VEC=8"}
                            : std::vector<std::string>{"MINPROGS=3,THREADS=256,VEC=16", "THREADS=256,VEC=8",
                                                       "THREADS=256,VEC=16", "MINPROGS=4,THREADS=128,VEC=32",
                                                       "THREADS=512,VEC=8"}},
                      scalesTranspose(), dwTree()},
                     Partials::Tree, {}, 32}}});
  }
  for (OpSpec& op : ops) {
    op.perSample = op.name == "ln_modulate_fwd" || op.name == "ln_modulate_bwd";
    if (op.name == "mxfp6_pack_cols" || op.name == "mxfp6_pack_dual" || op.name.starts_with("norm_rope_qkv_bwd_pack"))
      op.tokenMultiple = 32;
  }
  return ops;
}

}  // namespace

std::span<const OpSpec> opTable() {
  static const std::vector<OpSpec> table = buildTable();
  return table;
}

const OpSpec* findOp(std::string_view name) {
  for (const OpSpec& op : opTable())
    if (op.name == name) return &op;
  return nullptr;
}

std::string kernelFile(const OpSpec& op, std::string_view kernel) {
  for (const FamilySpec& family : op.families)
    for (const RoleSpec& role : family.roles)
      if (role.kernel == kernel) return role.file.empty() ? op.file : role.file;
  return "";
}

Expected<std::string> keyToolchain(const std::string& compiler, const OpSpec& op, const std::string& dslDir) {
  std::set<std::string> files;
  for (const FamilySpec& family : op.families)
    for (const RoleSpec& role : family.roles) files.insert(role.file.empty() ? op.file : role.file);
  Sha256 hash;
  for (const std::string& file : files) {
    std::ifstream in(dslDir + "/" + file, std::ios::binary);
    if (!in) return Status::error("cannot read " + dslDir + "/" + file + " (the kernels of " + op.name + ")");
    std::stringstream text;
    text << in.rdbuf();
    hash.update(file + '\0' + text.str() + '\0');
  }
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : hash.finish()) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return compiler + "; dsl " + hex.substr(0, 16);
}

std::string compilerOfToolchain(const std::string& keyToolchain) {
  size_t at = keyToolchain.rfind("; dsl ");
  return at == std::string::npos ? keyToolchain : keyToolchain.substr(0, at);
}

std::vector<int64_t> treeChunks(int64_t partials, int64_t fanIn) {
  std::vector<int64_t> chunks;
  int64_t left = partials;
  while (left > fanIn) {
    int64_t chunk = 1;
    for (int64_t d = fanIn; d >= 1; --d)
      if (left % d == 0) {
        chunk = d;
        break;
      }
    if (chunk < 4) break;
    chunks.push_back(chunk);
    left /= chunk;
  }
  chunks.push_back(left);
  return chunks;
}

}  // namespace mxfp6::ops
