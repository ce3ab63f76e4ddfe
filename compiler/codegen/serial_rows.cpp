#include "compiler/codegen/serial_rows.h"

#include "compiler/frontend/knobs.h"

#include <vector>

namespace mxfp6::codegen {
namespace {

using kir::OpCode;

/// Ops that may move before the loop when their inputs do: scalar math and loads. Vector math
/// and reductions stay in it (hoisted, their results would hold registers for the whole loop;
/// recomputed from a hoisted load, they cost a few instructions per trip).
bool hoistable(const kir::Op& op) {
  switch (op.code) {
    case OpCode::Load: return true;
    case OpCode::RowIndex: case OpCode::Store: case OpCode::VarInit: case OpCode::VarRead:
    case OpCode::VarWrite: case OpCode::ForBegin: case OpCode::ForEnd: case OpCode::ReduceSum:
    case OpCode::ReduceMax: case OpCode::ReduceMin:
      return false;
    default: return !op.type.isVector();
  }
}

kir::Op constant(int64_t v, const kir::SourceLoc& loc) {
  kir::Op op;
  op.code = OpCode::ConstInt;
  op.type = {kir::Dtype::I64, 0};
  op.ival = v;
  op.loc = loc;
  return op;
}

}  // namespace

int64_t serialSteps(const kir::Kernel& kernel) { return frontend::knobValue(kernel, frontend::Knob::Serial); }

SerialRows serializeRows(const kir::Kernel& kernel, int64_t steps) {
  const std::vector<kir::Op>& ops = kernel.ops;
  int n = int(ops.size());
  // An op is invariant when it is hoistable, outside the body's own loops, and reads only
  // invariant values: the same for every row group of the program.
  std::vector<bool> invariant(n, false);
  int depth = 0;
  for (int i = 0; i < n; ++i) {
    const kir::Op& op = ops[i];
    if (op.code == OpCode::ForEnd) --depth;
    bool inv = depth == 0 && hoistable(op);
    for (int o : op.operands) inv = inv && (o < 0 || invariant[o]);
    for (int s : op.strides) inv = inv && invariant[s];
    invariant[i] = inv;
    if (op.code == OpCode::ForBegin) ++depth;
  }

  SerialRows out;
  out.kernel = kernel;
  out.kernel.ops.clear();
  std::vector<kir::Op>& rewritten = out.kernel.ops;
  kir::SourceLoc loc = n > 0 ? ops[0].loc : kernel.loc;
  rewritten.push_back(constant(0, loc));
  rewritten.push_back(constant(steps, loc));
  rewritten.push_back(constant(1, loc));
  std::vector<int>& newId = out.newId;
  newId.assign(n, -1);
  auto place = [&](int i) {
    newId[i] = int(rewritten.size());
    rewritten.push_back(ops[i]);
  };
  for (int i = 0; i < n; ++i)
    if (invariant[i]) place(i);
  kir::Op begin;
  begin.code = OpCode::ForBegin;
  begin.type = {kir::Dtype::I64, 0};
  begin.operands = {0, 1, 2};
  begin.name = "row_group";
  begin.loc = loc;
  out.loop = int(rewritten.size());
  rewritten.push_back(begin);
  for (int i = 0; i < n; ++i)
    if (!invariant[i]) place(i);
  kir::Op end;
  end.code = OpCode::ForEnd;
  end.ival = out.loop;
  end.loc = loc;
  rewritten.push_back(end);

  // Renumber the references (all to earlier ops, so every one is placed by now).
  for (int i = 0; i < n; ++i) {
    kir::Op& op = rewritten[newId[i]];
    for (int& o : op.operands)
      if (o >= 0) o = newId[o];
    for (int& s : op.strides) s = newId[s];
    if (op.code == OpCode::Store) op.value = newId[op.value];
    if (op.code == OpCode::VarRead || op.code == OpCode::VarWrite || op.code == OpCode::ForEnd)
      op.ival = newId[op.ival];
    if (op.code == OpCode::RowIndex) op.operands = {out.loop};
  }
  return out;
}

}  // namespace mxfp6::codegen
