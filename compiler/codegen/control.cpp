// Mutable variables and counted loops.
//
//   var x = init   ->  one llvm.alloca per chunk in the entry block (or one for a scalar),
//                      stored at the declaration; reads and writes are loads and stores
//   for i in a..b step c { body }  ->  scf.for %i = a to b step c : i64 { body }
//
// LLVM's SROA promotes the allocas back to registers (whole-value loads and stores of one type),
// so the variables cost nothing, while the emitter stays a single forward walk over the ops.

#include "compiler/codegen/kernel_emitter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mxfp6::codegen::detail {
namespace {

/// Private memory: address space 5 on AMDGPU (its data layout puts allocas there), the generic
/// space on NVPTX.
unsigned privateAddressSpace(const TargetInfo& t) { return t.backend == Backend::ROCDL ? 5 : 0; }

}  // namespace

LogicalResult KernelEmitter::emitVarInit(const kir::Op& op, int id) {
  const RegValue& init = values_[op.operands[0]];
  SmallVector<Value> initial = init.isVector() ? init.chunks : SmallVector<Value>{init.scalar};
  auto ptrType = LLVM::LLVMPointerType::get(&ctx_, privateAddressSpace(target_));
  SmallVector<Value>& slots = varSlots_[id];
  for (Value v : initial) {
    Value slot;
    {
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(entryBlock_);
      Value one = arith::ConstantIntOp::create(b_, 1, 32);
      slot = LLVM::AllocaOp::create(b_, ptrType, v.getType(), one, 16);
    }
    LLVM::StoreOp::create(b_, v, slot);
    slots.push_back(slot);
  }
  values_[id] = init;  // reading the declaration's own id is never needed, but keep it defined
  return success();
}

LogicalResult KernelEmitter::emitVarRead(const kir::Op& op, int id) {
  const SmallVector<Value>& slots = varSlots_.at(int(op.ival));
  Type elem = scalarType(&ctx_, op.type.elem);
  RegValue& out = values_[id];
  if (!op.type.isVector()) {
    out.scalar = LLVM::LoadOp::create(b_, elem, slots[0]);
    return success();
  }
  Type chunk = chunkType(op.type.elem, layoutFor(op.type.length).perThread);
  for (Value slot : slots) out.chunks.push_back(LLVM::LoadOp::create(b_, chunk, slot));
  return success();
}

LogicalResult KernelEmitter::emitVarWrite(const kir::Op& op) {
  const SmallVector<Value>& slots = varSlots_.at(int(op.ival));
  const RegValue& v = values_[op.operands[0]];
  if (!v.isVector()) {
    LLVM::StoreOp::create(b_, v.scalar, slots[0]);
    return success();
  }
  for (size_t c = 0; c < slots.size(); ++c) LLVM::StoreOp::create(b_, v.chunks[c], slots[c]);
  return success();
}

LogicalResult KernelEmitter::emitForBegin(const kir::Op& op, int id) {
  Value start = toI64(values_[op.operands[0]].scalar);
  Value end = toI64(values_[op.operands[1]].scalar);
  Value step = toI64(values_[op.operands[2]].scalar);
  // The row-group loop of SERIAL is always pipelined: its point is the next group's loads.
  PipelinePlan plan;
  if (pipelines(id)) plan = pipelinePlans_.at(id);
  plan.end = end;
  // A loop with reductions across warps alternates between two halves of their shared slots,
  // trip by trip (reductions.cpp): a parity carried as the last loop value.
  bool alternates = reducesAcrossWarpsIn(id);
  // Nested in a loop that alternates too, this loop restarts its parity on every outer trip, so
  // its first trip could write a slot that the outer trip before read after it (a reduction
  // past this loop): every thread is past those reads after this barrier.
  bool nestedInAlternating = false;
  for (Value half : reductionHalves_) nestedInAlternating |= bool(half);
  if (alternates && nestedInAlternating) gpu::BarrierOp::create(b_);
  // The loads that read the same elements every trip, once, where the loop runs at all.
  if (!plan.invariant.empty()) {
    bindLoads(plan.invariant, emitLoadsAtTrip(plan, plan.invariant, start));
    prefetched_.insert(plan.invariant.begin(), plan.invariant.end());
  }
  SmallVector<Value> carried;
  // The first trip's loads before the loop; each trip starts the next trip's loads before its
  // own work and carries them over (pipeline.cpp).
  bool staged = !plan.staged.empty();
  if (!plan.loads.empty()) {
    carried = emitPrefetch(plan, start);
    for (int64_t ahead = 0; staged && ahead < asyncDepth(); ++ahead)
      emitCopies(plan, arith::AddIOp::create(b_, start, arith::MulIOp::create(b_, step, constI64(ahead))),
                 constI64(ahead));
  }
  size_t registerCarried = carried.size();
  if (staged) carried.push_back(constI64(0));  // the first trip's ring slot
  if (alternates) carried.push_back(constI64(0));
  auto loop = scf::ForOp::create(b_, start, end, step, carried);
  openLoops_.push_back(loop);
  Value iv = loop.getInductionVar();
  values_[id].scalar = iv;
  ValueRange iterArgs = loop.getRegionIterArgs();
  reductionHalves_.push_back(alternates ? iterArgs.back() : Value());
  if (carried.empty()) b_.setInsertionPoint(loop.getBody()->getTerminator());
  else b_.setInsertionPointToEnd(loop.getBody());
  // Stores of this row group are masked by its own rows' range.
  if (id == serialLoop_) bindRows(iv);
  if (plan.loads.empty()) return success();
  plan.next = emitPrefetch(plan, arith::AddIOp::create(b_, iv, step));
  if (staged) {
    // Ring slots advance by one per trip, modulo d + 1: the copies d trips ahead go to the slot
    // this trip's came from one trip ago, (slot + d) mod (d + 1).
    Value ringSize = constI64(asyncDepth() + 1);
    plan.slot = iterArgs[registerCarried];
    auto wrap = [&](Value v) {
      Value past = arith::CmpIOp::create(b_, arith::CmpIPredicate::sge, v, ringSize);
      return arith::SelectOp::create(b_, past, arith::SubIOp::create(b_, v, ringSize), v).getResult();
    };
    plan.nextSlot = wrap(arith::AddIOp::create(b_, plan.slot, constI64(1)));
    emitCopies(plan, arith::AddIOp::create(b_, iv, arith::MulIOp::create(b_, step, constI64(asyncDepth()))),
               wrap(arith::AddIOp::create(b_, plan.slot, constI64(asyncDepth()))));
  }
  values_[id].scalar = iv;
  bindPrefetched(plan, iterArgs.take_front(registerCarried));
  prefetched_.insert(plan.loads.begin(), plan.loads.end());
  pipelined_[id] = plan;
  return success();
}

LogicalResult KernelEmitter::emitForEnd(const kir::Op& op) {
  auto loop = cast<scf::ForOp>(openLoops_.pop_back_val());
  SmallVector<Value> next;
  if (auto plan = pipelined_.find(int(op.ival)); plan != pipelined_.end()) {
    next = plan->second.next;
    if (plan->second.nextSlot) next.push_back(plan->second.nextSlot);
    pipelined_.erase(plan);
  }
  Value half = reductionHalves_.pop_back_val();
  if (half) next.push_back(arith::SubIOp::create(b_, constI64(1), half));
  if (!next.empty()) scf::YieldOp::create(b_, next);
  b_.setInsertionPointAfter(loop);
  // The slots' order assumes the body ran in sequence (reductions.cpp): a loop that ran no trip,
  // or an odd number inside an outer loop's trip, would let the next reduction write a slot a
  // slower thread still reads. Every thread is past the loop's reads after this barrier.
  if (half) gpu::BarrierOp::create(b_);
  return success();
}

}  // namespace mxfp6::codegen::detail
