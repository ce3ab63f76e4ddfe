#include "compiler/codegen/interleaved_rows.h"

#include "compiler/frontend/knobs.h"

namespace mxfp6::codegen {

using kir::OpCode;

int64_t interleavedRowCount(const kir::Kernel& kernel) { return frontend::knobValue(kernel, frontend::Knob::Interleave); }

InterleaveRefusal interleaveRefusal(const kir::Kernel& kernel) {
  for (size_t i = 0; i < kernel.ops.size(); ++i) {
    switch (kernel.ops[i].code) {
      case OpCode::ForBegin: case OpCode::ForEnd: case OpCode::VarInit: case OpCode::VarRead:
      case OpCode::VarWrite:
        return {"INTERLEAVE > 1 needs a row body without loops or variables", int(i)};
      case OpCode::Transpose:
        return {"INTERLEAVE > 1 needs a row body without transposes (each row would need its own shared tile)", int(i)};
      default: break;
    }
  }
  return {};
}

InterleavedRows interleaveRows(const kir::Kernel& kernel, int64_t count) {
  const std::vector<kir::Op>& ops = kernel.ops;
  const int n = int(ops.size());
  // An op is per row when it is the row index, a store, or reads a per-row value.
  std::vector<bool> perRow(n, false);
  for (int i = 0; i < n; ++i) {
    const kir::Op& op = ops[i];
    bool p = op.code == OpCode::RowIndex || op.code == OpCode::Store;
    for (int o : op.operands) p = p || (o >= 0 && perRow[o]);
    for (int s : op.strides) p = p || perRow[s];
    if (op.code == OpCode::Store) p = p || perRow[op.value];
    perRow[i] = p;
  }

  InterleavedRows out;
  out.kernel = kernel;
  out.kernel.ops.clear();
  std::vector<std::vector<int>> newId(n);  // one id per copy (one copy for a row-invariant op)
  for (int i = 0; i < n; ++i) {
    const int copies = perRow[i] ? int(count) : 1;
    for (int s = 0; s < copies; ++s) {
      // References to earlier ops: the same row's copy, or the one shared op.
      auto mapped = [&](int ref) { return perRow[ref] ? newId[ref][s] : newId[ref][0]; };
      kir::Op op = ops[i];
      for (int& o : op.operands)
        if (o >= 0) o = mapped(o);
      for (int& st : op.strides) st = mapped(st);
      if (op.code == OpCode::Store) op.value = mapped(op.value);
      newId[i].push_back(int(out.kernel.ops.size()));
      out.kernel.ops.push_back(std::move(op));
      out.slot.push_back(perRow[i] ? s : -1);
    }
  }
  return out;
}

}  // namespace mxfp6::codegen
