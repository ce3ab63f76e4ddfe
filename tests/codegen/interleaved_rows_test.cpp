// INTERLEAVE: the rewrite of a row body into side-by-side copies, one per row a thread holds
// (interleaved_rows.h), what it declines, and the launch shape the code generator gives it.
// Whether the copies compute their rows is the GPU tests' part (tests/gpu, against the
// interpreter).

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/interleaved_rows.h"
#include "tests/codegen/kernel_fixture.h"
#include "tests/frontend/kir_verify.h"

namespace mxfp6 {
namespace {

using kir::OpCode;
using testing::inlineKernel;
using testing::kernelAt;

codegen::TargetInfo target(const char* name) { return *codegen::findTarget(name); }

TEST(InterleavedRows, CountComesFromTheConfiguration) {
  EXPECT_EQ(codegen::interleavedRowCount(kernelAt("norm_rope.mxk", "norm_rope_fwd", {})), 1);
  EXPECT_EQ(codegen::interleavedRowCount(kernelAt("norm_rope.mxk", "norm_rope_fwd", {{"INTERLEAVE", 2}})), 2);
  EXPECT_EQ(codegen::interleavedRowCount(kernelAt("norm_rope.mxk", "norm_rope_qkv_fwd", {{"INTERLEAVE", 4}})), 4);
  // A kernel without the tunable holds one row per thread.
  EXPECT_EQ(codegen::interleavedRowCount(kernelAt("ln_modulate.mxk", "ln_modulate_fwd", {})), 1);
}

// Each slot's view of the rewrite -- the shared ops and that slot's copies, in order -- is the
// original body, op for op, with its references pointing at the same ops.
void expectEverySlotIsTheBody(const kir::Kernel& k, const codegen::InterleavedRows& r, int count) {
  ASSERT_EQ(r.slot.size(), r.kernel.ops.size());
  for (int s = 0; s < count; ++s) {
    SCOPED_TRACE("slot " + std::to_string(s));
    std::vector<int> original(r.kernel.ops.size(), -1);  // rewritten id -> original id in this view
    std::vector<int> view;
    for (size_t i = 0; i < r.kernel.ops.size(); ++i) {
      if (r.slot[i] != -1 && r.slot[i] != s) continue;
      original[i] = int(view.size());
      view.push_back(int(i));
    }
    ASSERT_EQ(view.size(), k.ops.size());
    auto same = [&](int rewritten, int expected) {
      if (rewritten < 0 || expected < 0) return rewritten == expected;
      return original[rewritten] == expected;
    };
    for (size_t j = 0; j < view.size(); ++j) {
      const kir::Op& a = r.kernel.ops[view[j]];
      const kir::Op& b = k.ops[j];
      SCOPED_TRACE("op %" + std::to_string(j) + " " + kir::opName(b.code));
      EXPECT_EQ(a.code, b.code);
      EXPECT_TRUE(a.type == b.type);
      EXPECT_EQ(a.param, b.param);
      EXPECT_EQ(a.ival, b.ival);
      EXPECT_EQ(a.slices, b.slices);
      ASSERT_EQ(a.operands.size(), b.operands.size());
      for (size_t o = 0; o < a.operands.size(); ++o) EXPECT_TRUE(same(a.operands[o], b.operands[o])) << "operand " << o;
      ASSERT_EQ(a.strides.size(), b.strides.size());
      for (size_t o = 0; o < a.strides.size(); ++o) EXPECT_TRUE(same(a.strides[o], b.strides[o])) << "stride " << o;
      if (b.code == OpCode::Store) EXPECT_TRUE(same(a.value, b.value));
    }
  }
}

TEST(InterleavedRows, EveryRowOpIsCopiedSideBySideAndTheRestShared) {
  for (const char* name : {"norm_rope_fwd", "norm_rope_qkv_fwd"}) {
    SCOPED_TRACE(name);
    kir::Kernel k = kernelAt("norm_rope.mxk", name, {{"INTERLEAVE", 2}});
    ASSERT_EQ(codegen::interleaveRefusal(k).reason, "");
    codegen::InterleavedRows r = codegen::interleaveRows(k, 2);
    EXPECT_EQ(frontend::test::verifyKir(r.kernel), "");
    expectEverySlotIsTheBody(k, r, 2);
    const std::vector<kir::Op>& ops = r.kernel.ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      SCOPED_TRACE("op %" + std::to_string(i) + " " + kir::opName(ops[i].code));
      // Copies sit next to each other: slot 1 right after slot 0 of the same op.
      if (r.slot[i] == 0) {
        ASSERT_LT(i + 1, ops.size());
        EXPECT_EQ(r.slot[i + 1], 1);
        EXPECT_EQ(ops[i + 1].code, ops[i].code);
      }
      // The row index, every store, and x and the table (read at the row's indices) are per
      // row; the weights (read whole) and the scalar arguments are read once.
      const kir::Op& op = ops[i];
      if (op.code == OpCode::RowIndex || op.code == OpCode::Store) EXPECT_GE(r.slot[i], 0);
      if (op.code == OpCode::ScalarArg) EXPECT_EQ(r.slot[i], -1);
      if (op.code == OpCode::Load) {
        const std::string& param = r.kernel.params[op.param].name;
        bool weight = param.find("weight") != std::string::npos;
        EXPECT_EQ(r.slot[i] == -1, weight) << param;
      }
    }
  }
}

TEST(InterleavedRows, FourRowsPerThread) {
  kir::Kernel k = kernelAt("norm_rope.mxk", "norm_rope_fwd", {{"INTERLEAVE", 4}});
  codegen::InterleavedRows r = codegen::interleaveRows(k, 4);
  EXPECT_EQ(frontend::test::verifyKir(r.kernel), "");
  expectEverySlotIsTheBody(k, r, 4);
}

TEST(InterleavedRows, AProgramCoversRowsTimesInterleaveRows) {
  for (const char* t : {"sm_90", "gfx942", "gfx950"}) {
    SCOPED_TRACE(t);
    kir::Kernel k = kernelAt("norm_rope.mxk", "norm_rope_fwd", {{"ROWS", 4}, {"THREADS", 16}, {"VEC", 8}, {"INTERLEAVE", 2}});
    bool nvidia = std::string(t) == "sm_90";
    Expected<codegen::CompiledKernel> c =
        codegen::compileKernel(k, target(t), nvidia ? codegen::Emit::Ptx : codegen::Emit::Hsaco);
    ASSERT_TRUE(c.isOk()) << c.status().message();
    nlohmann::json j = nlohmann::json::parse(c->metadataJson);
    EXPECT_EQ(j["rows_per_program"], 8);
    EXPECT_EQ(j["block"], nlohmann::json({64, 1, 1}));
    if (nvidia) {
      // At THREADS = 16, VEC = 8 a thread's part of a 128-element bf16 row, and of a 64-entry
      // f32 table row, is one 16-byte vector: x, cos and sin once per row, the weight once.
      auto count = [&](const std::string& what) {
        size_t n = 0;
        for (size_t at = 0; (at = c->bytes.find(what, at)) != std::string::npos; ++at) ++n;
        return n;
      };
      EXPECT_EQ(count("ld.global.v4.b32"), 2u * 3u + 1u) << c->bytes;
      EXPECT_EQ(count("st.global.v4.b32"), 2u) << c->bytes;  // y of each row
    }
  }
}

TEST(InterleavedRows, RowGroupsInSequenceHoldInterleavedRows) {
  // SERIAL = 4 groups of ROWS * INTERLEAVE = 16 rows, the next group's x copied ahead.
  kir::Kernel k = kernelAt("norm_rope.mxk", "norm_rope_fwd",
                           {{"ROWS", 8}, {"THREADS", 8}, {"VEC", 8}, {"SERIAL", 4}, {"ASYNC", 1}, {"INTERLEAVE", 2}});
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(k, target("sm_90"), codegen::Emit::Ptx);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  nlohmann::json j = nlohmann::json::parse(c->metadataJson);
  EXPECT_EQ(j["rows_per_program"], 64);
  EXPECT_EQ(j["block"], nlohmann::json({64, 1, 1}));
  // Both rows' x (256 bytes each, 32 per thread) in two ring slots: 2 * 2 * 8 * 8 * 32 bytes.
  EXPECT_NE(c->bytes.find("cp.async.cg.shared.global"), std::string::npos) << c->bytes;
  EXPECT_NE(c->bytes.find("__wg_norm_rope_fwd_0[" + std::to_string(2 * 2 * 8 * 8 * 32) + "]"), std::string::npos)
      << c->bytes;
  // In registers on AMD.
  kir::Kernel amd = kernelAt("norm_rope.mxk", "norm_rope_fwd", {{"SERIAL", 4}, {"INTERLEAVE", 2}});
  Expected<codegen::CompiledKernel> h = codegen::compileKernel(amd, target("gfx950"), codegen::Emit::Hsaco);
  ASSERT_TRUE(h.isOk()) << h.status().message();
  EXPECT_EQ(nlohmann::json::parse(h->metadataJson)["rows_per_program"], 16 * 4 * 2);
}

TEST(InterleavedRows, DeclinesWhatItCannotCopySideBySide) {
  kir::Kernel loop = inlineKernel(R"(
kernel sums(x: f32[T, 8], y: out f32[T], n: i32)
  tune INTERLEAVE in {2} = 2
{
  row t in T {
    var acc = 0.0
    for s in 0 .. n {
      acc = acc + sum(x[t, :])
    }
    y[t] = acc
  }
}
)", "sums");
  codegen::InterleaveRefusal r = codegen::interleaveRefusal(loop);
  EXPECT_NE(r.reason.find("without loops or variables"), std::string::npos) << r.reason;
  ASSERT_GE(r.op, 0);
  EXPECT_EQ(loop.ops[r.op].code, OpCode::VarInit);
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(loop, target("gfx942"), codegen::Emit::Hsaco);
  ASSERT_FALSE(c.isOk());
  // Located at the variable's line of the DSL.
  EXPECT_NE(c.status().message().find("inline.mxk:6:"), std::string::npos) << c.status().message();

  kir::Kernel tile = inlineKernel(R"(
kernel flip(x: f32[T, 4, 8], y: out f32[T, 8, 4])
  tune INTERLEAVE in {2} = 2, THREADS in {4} = 4, VEC in {8} = 8
{
  row t in T {
    y[t, :, :] = transpose(x[t, :, :], 4)
  }
}
)", "flip");
  r = codegen::interleaveRefusal(tile);
  EXPECT_NE(r.reason.find("without transposes"), std::string::npos) << r.reason;
}

}  // namespace
}  // namespace mxfp6
