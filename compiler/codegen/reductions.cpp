// Reductions of a row vector to a scalar: in the thread, across the lanes of a warp, and across
// the warps of a row through shared memory and a barrier.
//
// Each warp's partial goes to a slot of a ring in shared memory (kReductionSlots slots, twice the
// largest batch), so a reduction never overwrites a slot that a slower thread may still read:
// between the last read of a slot and its next write there is always another batch's barrier.
// A loop body runs the same slots every trip, so loops with such reductions alternate between
// two rings by trip parity, and a barrier follows the loop (it may have run no trip, or, nested,
// restart its parity on the next outer trip).
//
// The barrier is the expensive part (a row's warps wait for the slowest), so reductions whose
// operands are ready together share one: emissionOrder's batchReductions moves a reduction up
// next to an earlier one when its operand does not depend on it (LN-modulate backward's
// mean(gh) and mean(gh * xh)), emitReduce writes the warps' partials and leaves the result
// pending, and the first op that needs a pending result (or a loop boundary) emits the barrier
// and the reads of every pending one.

#include "compiler/codegen/kernel_emitter.h"

#include <algorithm>
#include <set>

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mxfp6::codegen::detail {

bool KernelEmitter::reducesAcrossWarps(const kir::Op& op) const {
  return warpsPerRow_ > 1 &&
         (op.code == OpCode::ReduceSum || op.code == OpCode::ReduceMax || op.code == OpCode::ReduceMin);
}

bool KernelEmitter::reducesAcrossWarpsIn(int forId) const {
  int depth = 0;
  for (size_t i = forId; i < k_.ops.size(); ++i) {
    depth += k_.ops[i].code == OpCode::ForBegin ? 1 : k_.ops[i].code == OpCode::ForEnd ? -1 : 0;
    if (depth == 0) return false;
    if (reducesAcrossWarps(k_.ops[i])) return true;
  }
  return false;
}

std::vector<int> inputsOf(const kir::Op& op) {
  std::vector<int> in;
  for (int d : op.operands)
    if (d >= 0) in.push_back(d);
  in.insert(in.end(), op.strides.begin(), op.strides.end());
  if (op.value >= 0) in.push_back(op.value);
  return in;
}

namespace {

/// Ops that cannot move up past others: they write memory or variables, read variables, or
/// shape control flow and shared buffers.
bool pinned(const kir::Op& op) {
  switch (op.code) {
    case OpCode::Store: case OpCode::VarInit: case OpCode::VarRead: case OpCode::VarWrite:
    case OpCode::ForBegin: case OpCode::ForEnd: case OpCode::Transpose:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::vector<int> KernelEmitter::batchReductions(std::vector<int> order) const {
  for (size_t p = 0; p < order.size(); ++p) {
    if (!reducesAcrossWarps(k_.ops[order[p]])) continue;
    // The next reduction, and what it needs from between the two: moved up right after this
    // one if none of it depends on this reduction or is pinned.
    std::set<int> dependsOnFirst{order[p]};
    for (size_t q = p + 1; q < order.size(); ++q) {
      const kir::Op& op = k_.ops[order[q]];
      if (op.code == OpCode::ForBegin || op.code == OpCode::ForEnd) break;
      bool tainted = false;
      for (int d : inputsOf(op)) tainted |= dependsOnFirst.count(d) > 0;
      if (!reducesAcrossWarps(op)) {
        if (tainted) dependsOnFirst.insert(order[q]);
        continue;
      }
      if (tainted) break;
      // Its inputs among order[p+1 .. q), transitively.
      std::set<int> needed{order[q]};
      bool movable = true;
      for (size_t r = q; r-- > p + 1;) {
        int id = order[r];
        bool used = false;
        for (int u : needed)
          for (int d : inputsOf(k_.ops[u])) used |= d == id;
        if (!used) continue;
        if (pinned(k_.ops[id]) || dependsOnFirst.count(id)) movable = false;
        needed.insert(id);
      }
      if (!movable) break;
      std::vector<int> moved, rest;
      for (size_t r = p + 1; r <= q; ++r) (needed.count(order[r]) ? moved : rest).push_back(order[r]);
      std::copy(moved.begin(), moved.end(), order.begin() + p + 1);
      std::copy(rest.begin(), rest.end(), order.begin() + p + 1 + moved.size());
      p += moved.size();  // the pair is a batch; the next batch starts after it
      break;
    }
  }
  return order;
}

bool KernelEmitter::needsPendingReductions(const kir::Op& op) const {
  if (pendingReductions_.empty()) return false;
  if (op.code == OpCode::ForBegin || op.code == OpCode::ForEnd) return true;
  for (int d : inputsOf(op))
    for (const PendingReduction& r : pendingReductions_)
      if (r.id == d) return true;
  return false;
}

void KernelEmitter::flushReductions() {
  if (pendingReductions_.empty()) return;
  gpu::BarrierOp::create(b_);
  for (const PendingReduction& r : pendingReductions_) {
    Value total;
    for (int64_t w = 0; w < warpsPerRow_; ++w) {
      Value slot = arith::AddIOp::create(b_, r.slots, constI64(w));
      Value x = memref::LoadOp::create(b_, sharedBuf_, ValueRange{arith::IndexCastOp::create(b_, b_.getIndexType(), slot)});
      total = w == 0 ? x : combine(r.code, total, x);
    }
    values_[r.id].scalar = total;
  }
  pendingReductions_.clear();
}

LogicalResult KernelEmitter::emitReduce(const kir::Op& op, int id) {
  const RegValue& in = values_[op.operands[0]];
  Layout l = layoutFor(k_.ops[op.operands[0]].type.length);
  // 1. Chunks, then the elements of the thread's vector, in index order. A replicated element
  //    counts once: only the first lane of those sharing it contributes.
  Value acc = in.chunks[0];
  for (size_t c = 1; c < in.chunks.size(); ++c) acc = combine(op.code, acc, in.chunks[c]);
  Value partial = vector::ExtractOp::create(b_, acc, ArrayRef<int64_t>{0});
  for (int64_t i = 1; i < l.perThread; ++i)
    partial = combine(op.code, partial, vector::ExtractOp::create(b_, acc, ArrayRef<int64_t>{i}));
  if (l.replicas > 1) {
    Value owner = arith::CmpIOp::create(b_, arith::CmpIPredicate::eq,
                                        arith::RemUIOp::create(b_, lane_, constI64(l.replicas)), constI64(0));
    partial = arith::SelectOp::create(b_, owner, partial, identityFor(op.code));
  }
  if (anchorsLoads()) partial = anchorLoads(partial);
  // 2. Butterfly across the threads of the row that share a warp.
  for (int64_t off = std::min(threads_, warp_) / 2; off >= 1; off /= 2) {
    auto shuffled = gpu::ShuffleOp::create(b_, partial, int32_t(off), int32_t(warp_), gpu::ShuffleMode::XOR);
    partial = combineLanes(op.code, partial, shuffled.getShuffleResult());
  }
  if (!reducesAcrossWarps(op)) {
    values_[id].scalar = partial;
    return success();
  }
  // 3. Across the warps of the row: each warp's first lane writes its partial to the next slot
  //    of the ring; the sum waits for the batch's barrier (flushReductions).
  if (int(pendingReductions_.size()) == kMaxBatchedReductions) flushReductions();
  Value slotBase = constI64(int64_t(reductionSlot_) * rows_ * warpsPerRow_);
  reductionSlot_ = (reductionSlot_ + 1) % kReductionSlots;
  // In a loop, odd trips use the second half: the ring's order holds within a trip, and the
  // next trip's writes go to slots this trip does not read.
  if (!reductionHalves_.empty() && reductionHalves_.back())
    slotBase = arith::AddIOp::create(
        b_, slotBase, arith::MulIOp::create(b_, reductionHalves_.back(), constI64(kReductionSlots * rows_ * warpsPerRow_)));
  Value rowBase = arith::AddIOp::create(b_, slotBase, arith::MulIOp::create(b_, rowInBlock_, constI64(warpsPerRow_)));
  Value firstLane = arith::CmpIOp::create(b_, arith::CmpIPredicate::eq, laneInWarp_, constI64(0));
  {
    auto ifOp = scf::IfOp::create(b_, firstLane, false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
    Value slot = arith::AddIOp::create(b_, rowBase, warpInRow_);
    memref::StoreOp::create(b_, partial, sharedBuf_, ValueRange{arith::IndexCastOp::create(b_, b_.getIndexType(), slot)});
  }
  pendingReductions_.push_back({id, op.code, rowBase});
  return success();
}

}  // namespace mxfp6::codegen::detail
