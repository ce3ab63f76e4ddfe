// SERIAL: the rewrite of a row body into a loop over a program's row groups (serial_rows.h), and
// what the code generator makes of it: the launch covers ROWS * SERIAL rows per program, and
// ASYNC copies the streamed rows ahead through shared memory on NVIDIA only.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/serial_rows.h"
#include "tests/codegen/kernel_fixture.h"
#include "tests/frontend/kir_verify.h"

namespace mxfp6 {
namespace {

using kir::OpCode;
using testing::inlineKernel;
using testing::kernelAt;

std::multiset<OpCode> opcodes(const kir::Kernel& k) {
  std::multiset<OpCode> codes;
  for (const kir::Op& op : k.ops) codes.insert(op.code);
  return codes;
}

TEST(SerialRows, StepsComeFromTheConfiguration) {
  EXPECT_EQ(codegen::serialSteps(kernelAt("ln_modulate.mxk", "ln_modulate_fwd", {})), 1);
  EXPECT_EQ(codegen::serialSteps(kernelAt("ln_modulate.mxk", "ln_modulate_fwd", {{"SERIAL", 8}})), 8);
  // A kernel without the tunable walks one group.
  EXPECT_EQ(codegen::serialSteps(kernelAt("ln_modulate.mxk", "ln_modulate_bwd", {})), 1);
}

TEST(SerialRows, TheBodyBecomesOneLoopOverTheRowGroups) {
  kir::Kernel k = kernelAt("ln_modulate.mxk", "ln_modulate_fwd", {{"SERIAL", 4}});
  codegen::SerialRows s = codegen::serializeRows(k, 4);
  const std::vector<kir::Op>& ops = s.kernel.ops;
  EXPECT_EQ(frontend::test::verifyKir(s.kernel), "");
  // Three bounds, the loop and its end are all that is added.
  std::multiset<OpCode> before = opcodes(k), after = opcodes(s.kernel);
  before.insert({OpCode::ConstInt, OpCode::ConstInt, OpCode::ConstInt, OpCode::ForBegin, OpCode::ForEnd});
  EXPECT_EQ(before, after);
  ASSERT_GE(ops.size(), 5u);
  EXPECT_EQ(ops[0].ival, 0);
  EXPECT_EQ(ops[1].ival, 4);
  EXPECT_EQ(ops[2].ival, 1);
  ASSERT_EQ(ops[s.loop].code, OpCode::ForBegin);
  EXPECT_EQ(ops[s.loop].operands, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(ops.back().code, OpCode::ForEnd);
  EXPECT_EQ(ops.back().ival, s.loop);
  for (size_t i = 0; i < ops.size(); ++i) {
    SCOPED_TRACE("op %" + std::to_string(i) + " " + kir::opName(ops[i].code));
    bool inLoop = int(i) > s.loop && i + 1 < ops.size();
    // The row index takes the trip; everything per row (stores, reductions) is inside.
    if (ops[i].code == OpCode::RowIndex) {
      EXPECT_TRUE(inLoop);
      EXPECT_EQ(ops[i].operands, (std::vector<int>{s.loop}));
    }
    if (ops[i].code == OpCode::Store || ops[i].code == OpCode::ReduceSum) EXPECT_TRUE(inLoop);
  }
  // The stores keep their order and their values' kinds.
  std::vector<std::string> storedBefore, storedAfter;
  for (const kir::Op& op : k.ops)
    if (op.code == OpCode::Store) storedBefore.push_back(k.params[op.param].name + ":" + kir::opName(k.ops[op.value].code));
  for (const kir::Op& op : ops)
    if (op.code == OpCode::Store) storedAfter.push_back(s.kernel.params[op.param].name + ":" + kir::opName(ops[op.value].code));
  EXPECT_EQ(storedBefore, storedAfter);
}

TEST(SerialRows, RowInvariantLoadsMoveBeforeTheLoop) {
  // norm_rope_fwd reads the weight at a fixed index (the same for every row) and x and the
  // rotary table at indices derived from the row.
  kir::Kernel k = kernelAt("norm_rope.mxk", "norm_rope_fwd", {{"SERIAL", 4}});
  codegen::SerialRows s = codegen::serializeRows(k, 4);
  EXPECT_EQ(frontend::test::verifyKir(s.kernel), "");
  std::map<std::string, std::vector<int>> loadsOf;
  for (size_t i = 0; i < s.kernel.ops.size(); ++i)
    if (s.kernel.ops[i].code == OpCode::Load) loadsOf[s.kernel.params[s.kernel.ops[i].param].name].push_back(int(i));
  ASSERT_EQ(loadsOf["weight"].size(), 1u);
  EXPECT_LT(loadsOf["weight"][0], s.loop);
  for (const char* perRow : {"x", "rope_cos", "rope_sin"}) {
    ASSERT_FALSE(loadsOf[perRow].empty()) << perRow;
    for (int id : loadsOf[perRow]) EXPECT_GT(id, s.loop) << perRow;
  }
  // The weight's conversion to f32 is vector math: it stays in the loop (no registers held).
  for (size_t i = 0; i < s.kernel.ops.size(); ++i) {
    const kir::Op& op = s.kernel.ops[i];
    if (op.code == OpCode::Cast && op.type.isVector()) EXPECT_GT(int(i), s.loop);
  }
}

codegen::TargetInfo target(const char* name) { return *codegen::findTarget(name); }

TEST(SerialRows, AProgramCoversRowsTimesSerialRows) {
  kir::Kernel k = kernelAt("ln_modulate.mxk", "ln_modulate_fwd",
                           {{"ROWS", 2}, {"THREADS", 192}, {"VEC", 8}, {"SERIAL", 4}, {"ASYNC", 2}});
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(k, target("sm_90"), codegen::Emit::Ptx);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  nlohmann::json j = nlohmann::json::parse(c->metadataJson);
  EXPECT_EQ(j["rows_per_program"], 8);
  EXPECT_EQ(j["block"], nlohmann::json({384, 1, 1}));
  // The copies ahead: x's row of each of the two rows, in three ring slots (scale and shift,
  // shared by a sample's rows, are not staged), one shared buffer.
  int64_t staged = 3 * 2 * 3072 * 2;
  EXPECT_NE(c->bytes.find(".shared .align 16 .b8 __wg_ln_modulate_fwd_1[" + std::to_string(staged) + "]"),
            std::string::npos)
      << c->bytes;
  EXPECT_NE(c->bytes.find("cp.async.cg.shared.global"), std::string::npos);
  size_t wait = c->bytes.find("cp.async.wait_group");
  ASSERT_NE(wait, std::string::npos);
  EXPECT_EQ(c->bytes.substr(wait, c->bytes.find(';', wait) - wait), "cp.async.wait_group \t2");
}

TEST(SerialRows, AsynchronousCopiesAreRefusedWithoutThem) {
  kir::Kernel k = kernelAt("ln_modulate.mxk", "ln_modulate_fwd", {{"SERIAL", 4}, {"ASYNC", 1}});
  for (const char* amd : {"gfx942", "gfx950"}) {
    Expected<codegen::CompiledKernel> c = codegen::compileKernel(k, target(amd), codegen::Emit::Hsaco);
    ASSERT_FALSE(c.isOk()) << amd;
    EXPECT_NE(c.status().message().find("ASYNC = 1 stages loads through asynchronous copies"), std::string::npos)
        << c.status().message();
    EXPECT_NE(c.status().message().find(std::string(amd) + " does not have"), std::string::npos);
  }
  // Without the copies, the row groups compile there (carried in registers).
  kir::Kernel plain = kernelAt("ln_modulate.mxk", "ln_modulate_fwd", {{"SERIAL", 4}});
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(plain, target("gfx942"), codegen::Emit::Hsaco);
  EXPECT_TRUE(c.isOk()) << c.status().message();
}

std::string compiled(const kir::Kernel& k, codegen::Emit emit) {
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(k, target("sm_90"), emit);
  EXPECT_TRUE(c.isOk()) << c.status().message();
  return c.isOk() ? c->bytes : "";
}

TEST(SerialRows, EveryCopyDestinationIs16ByteAligned) {
  // Two threads per row: a's 4-byte parts take 8 bytes of a slot, b's 16-byte parts 32. Packed
  // back to back, b's part would start 8 bytes into the slot, misaligned for 16-byte copies:
  // each load's part starts on a 16-byte boundary, so a slot is 16 + 32 bytes, two slots.
  kir::Kernel k = inlineKernel(R"(
kernel mix(a: bf16[T, 4], b: f32[T, 8], ya: out bf16[T, 4], yb: out f32[T, 8])
  tune THREADS in {2} = 2, VEC in {4} = 4, SERIAL in {4} = 4, ASYNC in {1} = 1
{
  row t in T {
    ya[t, :] = a[t, :]
    yb[t, :] = b[t, :] * 2.0
  }
}
)", "mix");
  std::string ptx = compiled(k, codegen::Emit::Ptx);
  EXPECT_NE(ptx.find(".shared .align 16 .b8 __wg_mix_0[96];"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("cp.async.cg.shared.global"), std::string::npos);
  EXPECT_NE(ptx.find("cp.async.ca.shared.global"), std::string::npos);
}

TEST(SerialRows, AnInnerLoopWithReductionsWaitsForTheOuterTripsReads) {
  // The inner loop alternates its reduction slots by its own parity, restarting on every row
  // group; the reductions after it read slots the inner loop's first trip of the next group
  // writes. A barrier before the inner loop keeps the next group's writes after those reads.
  kir::Kernel k = inlineKernel(R"(
kernel nest(g: bf16[T, D], o: out f32[R], n: i32)
  specialize D = 1024
  tune THREADS in {128} = 128, VEC in {8} = 8, SERIAL in {4} = 4
{
  row j in R {
    var acc = 0.0
    for s in j .. n step 7 {
      acc = acc + mean(f32(g[s, :]))
    }
    v = f32(g[j, :])
    o[j] = acc + mean(v) + mean(v * v) + mean(v * 3.0)
  }
}
)", "nest");
  std::string mlir = compiled(k, codegen::Emit::Mlir);
  size_t outer = mlir.find("scf.for");
  ASSERT_NE(outer, std::string::npos);
  size_t inner = mlir.find("scf.for", outer + 1);
  ASSERT_NE(inner, std::string::npos) << mlir;
  size_t barrier = mlir.find("gpu.barrier", outer);
  EXPECT_LT(barrier, inner) << "no barrier between the row-group loop and the inner loop";
}

TEST(SerialRows, ATransposeWaitsForTheLastTripsReads) {
  // One transpose per row group, its buffer reused by every group: each group's writes to it
  // wait at a barrier until every thread has read the previous group's tile.
  kir::Kernel k = inlineKernel(R"(
kernel cols(x: bf16[RG, 32, 64], y: out bf16[RG, 64, 32])
  tune THREADS in {64} = 64, VEC in {8} = 8, SERIAL in {4} = 4
{
  row rg in RG {
    y[rg, :, :] = transpose(x[rg, :, :], 32)
  }
}
)", "cols");
  std::string mlir = compiled(k, codegen::Emit::Mlir);
  size_t loop = mlir.find("scf.for");
  ASSERT_NE(loop, std::string::npos) << mlir;
  size_t write = mlir.find("vector.store", loop);
  ASSERT_NE(write, std::string::npos) << mlir;
  size_t barrier = mlir.find("gpu.barrier", loop);
  EXPECT_LT(barrier, write) << "the group's tile is written before the previous group's reads are done";
}

TEST(SerialRows, CopiesWithoutALoopAreAnError) {
  // The DSL kernels forbid this by a require; a kernel without one gets the compiler's error.
  kir::Kernel k = inlineKernel(R"(
kernel copy(x: bf16[T, 64], y: out bf16[T, 64])
  tune THREADS in {8} = 8, VEC in {8} = 8, ASYNC in {1} = 1
{
  row t in T {
    y[t, :] = x[t, :]
  }
}
)", "copy");
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(k, target("sm_90"), codegen::Emit::Ptx);
  ASSERT_FALSE(c.isOk());
  EXPECT_NE(c.status().message().find("ASYNC = 1 copies rows ahead in pipelined loops, and this configuration has none"),
            std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace mxfp6
