// ANCHOR = 1: a row's loads issued with its first reduction's operand.
//
// emissionOrder issues every load of a row near the top, but ptxas schedules the loads of values
// needed only after a reduction (the norm+RoPE forward's rotary table, needed after the row's
// rsqrt) after that reduction, whatever the PTX order: each row then waits two memory latencies
// in sequence, its x, then its table. Making every such load an input of the reduction pins it
// before the reduction: the in-thread partial becomes select(p == null, tie, partial), where tie
// sums one element of every 16 bytes (one load instruction) of each load emitted so far in the
// same loop body and p is the first such load's base pointer. The select never picks the tie (the
// load itself would have faulted on a null pointer), and neither LLVM (a null global-space
// pointer is defined) nor ptxas can prove that, so the partial's bits are unchanged and the loads
// are in flight together with the row's own. One select over a sum, not a select per element:
// LLVM folds nested selects on one condition down to the outermost.

#include "compiler/codegen/kernel_emitter.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mxfp6::codegen::detail {

bool KernelEmitter::anchorsLoads() const { return knob(Knob::Anchor) == 1; }

void KernelEmitter::noteEmittedLoad(int id) {
  // A load staged in shared memory (INVARIANTS) is read after a barrier, not held from here.
  if (!anchorsLoads() || !k_.ops[id].type.isVector() || invariantLoads_.count(id)) return;
  unanchoredLoads_.push_back({id, openLoops_.empty() ? nullptr : openLoops_.back()});
}

Value KernelEmitter::anchorLoads(Value partial) {
  auto f32 = b_.getF32Type();
  if (partial.getType() != f32) return partial;
  Operation* loop = openLoops_.empty() ? nullptr : openLoops_.back();
  std::vector<UnanchoredLoad> elsewhere;  // emitted in another loop body: not visible here
  Value tie, never;
  for (const UnanchoredLoad& load : unanchoredLoads_) {
    if (load.loop != loop) {
      elsewhere.push_back(load);
      continue;
    }
    const kir::Op& op = k_.ops[load.id];
    if (!kir::isFloat(op.type.elem)) continue;
    if (!never) {
      Value base = paramArgs_[op.param];
      Value null = LLVM::ZeroOp::create(b_, base.getType());
      never = LLVM::ICmpOp::create(b_, LLVM::ICmpPredicate::eq, base, null);
    }
    const int64_t perAccess = kMaxAccessBytes / kir::dtypeBytes(k_.params[op.param].dtype);
    for (Value chunk : values_[load.id].chunks) {
      int64_t length = cast<VectorType>(chunk.getType()).getNumElements();
      for (int64_t e = 0; e < length; e += perAccess) {
        Value element = vector::ExtractOp::create(b_, chunk, ArrayRef<int64_t>{e});
        if (element.getType() != f32) element = arith::ExtFOp::create(b_, f32, element);
        tie = tie ? arith::AddFOp::create(b_, tie, element).getResult() : element;
      }
    }
  }
  unanchoredLoads_ = std::move(elsewhere);
  if (!tie) return partial;
  return arith::SelectOp::create(b_, never, tie, partial);
}

}  // namespace mxfp6::codegen::detail
