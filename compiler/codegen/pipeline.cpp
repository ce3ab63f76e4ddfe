// Loop software pipelining (PREFETCH = 2): the loads of a loop body whose addresses depend only on
// the induction value (through scalar integer math) and on values from before the loop are issued
// one trip ahead. Trip i's values arrive as loop-carried values; trip i starts by sending out the
// loads of trip i + step (guarded by i + step < end) and carries them to the next trip; the first
// trip's loads go out before the loop. So a body that waits on reductions (barriers) has the next
// trip's rows in flight, instead of starting each trip with a full memory latency. The price is
// registers: two trips' loads are live at once.
//
//   prefetch(start) -> scf.for %i = start to end step s iter_args(%v = prefetched) {
//                        %n = prefetch(%i + s)
//                        body, reading %v instead of loading
//                        scf.yield %n
//                      }
//   prefetch(j) = scf.if (j < end) { the loads at trip j } else { zeros }
//
// ASYNC = d >= 1 (NVIDIA) keeps the streamed vector loads out of registers and d trips ahead:
// they are copied to shared memory (cp.async, one commit group per trip) into a ring of d + 1
// slots per loop, trip j's slot being ((j - start) / step) % (d + 1), carried by the loop as a
// counter (a runtime step would cost a division per trip). Before the loop the copies of the
// first d trips go out; trip i sends those of trip i + d*step, waits until at most d groups are
// pending (its own copies have landed, the next d trips' stay in flight) and reads its slot.
// Each thread reads back only what it copied itself, so no barrier is needed: the wait makes a
// thread's own copies visible to it. Registers then hold one trip's rows, as without
// pipelining; shared memory holds the rows in flight.
//
// Staged are the loads whose address moves with every trip (an index that is the trip's row, or
// the induction value, through sums, products and remainders): a different row each trip, read
// once. Loads through a quotient (t / pos_div: rows sharing a table row, or a sample's
// parameters) hit the caches and are issued in their own trip, early in the body; scalar loads,
// and streamed vector loads that cannot be copied (chunks of 32 or 2 bytes), are carried in
// registers one trip ahead.

#include "compiler/codegen/kernel_emitter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mxfp6::codegen::detail {

bool KernelEmitter::pipelinesLoops() const {
  return knob(Knob::Prefetch) == 2;
}

int64_t KernelEmitter::asyncDepth() const {
  return knob(Knob::Async);
}

bool KernelEmitter::advancesWithTrip(int id, int forId) const {
  if (id < 0) return false;
  if (id == forId) return true;
  const kir::Op& op = k_.ops[id];
  switch (op.code) {
    case OpCode::RowIndex: return op.operands.size() == 1 && op.operands[0] == forId;
    case OpCode::Cast: case OpCode::Rem: return advancesWithTrip(op.operands[0], forId);
    case OpCode::Add: case OpCode::Sub: case OpCode::Mul:
      return advancesWithTrip(op.operands[0], forId) || advancesWithTrip(op.operands[1], forId);
    default: return false;
  }
}

bool KernelEmitter::copiesAsynchronously(const kir::Op& load) {
  if (!load.type.isVector() || gatherDim(load) >= 0 || !isContiguous(load)) return false;
  Layout l = layoutFor(load.type.length);
  int64_t bytes = l.perThread * kir::dtypeBytes(k_.params[load.param].dtype);
  if (l.replicas > 1 || (bytes != 4 && bytes != 8 && bytes != 16)) return false;
  // chunkAlignment records stride requirements: the same the load itself records.
  return chunkAlignment(load) >= bytes;
}

KernelEmitter::PipelinePlan KernelEmitter::planPipeline(int forId) {
  PipelinePlan plan;
  plan.forId = forId;
  int depth = 0, end = int(k_.ops.size());
  for (int i = forId + 1; i < int(k_.ops.size()); ++i) {
    if (k_.ops[i].code == OpCode::ForBegin) ++depth;
    if (k_.ops[i].code == OpCode::ForEnd && depth-- == 0) {
      end = i;
      break;
    }
  }
  std::vector<int> depthOf(k_.ops.size(), -1);
  depth = 0;
  for (int i = forId + 1; i < end; ++i) {
    if (k_.ops[i].code == OpCode::ForEnd) --depth;
    depthOf[i] = depth;
    if (k_.ops[i].code == OpCode::ForBegin) ++depth;
  }
  // Whether `id` can be recomputed for another trip: defined before the loop, the induction
  // value, or pure scalar math in the loop's own body over such values.
  std::set<int> slice;
  std::function<bool(int)> recomputable = [&](int id) {
    if (id < 0 || id <= forId) return true;
    if (id >= end || depthOf[id] != 0) return false;
    const kir::Op& op = k_.ops[id];
    bool pure = !op.type.isVector() && op.code != OpCode::Load && op.code != OpCode::VarRead &&
                op.code != OpCode::VarInit && op.code != OpCode::ForBegin && op.code != OpCode::Store &&
                op.code != OpCode::VarWrite && op.code != OpCode::ReduceSum && op.code != OpCode::ReduceMax &&
                op.code != OpCode::ReduceMin;
    if (!pure) return false;
    for (int o : op.operands)
      if (!recomputable(o)) return false;
    slice.insert(id);
    return true;
  };
  for (int i = forId + 1; i < end; ++i) {
    const kir::Op& op = k_.ops[i];
    if (op.code != OpCode::Load || depthOf[i] != 0) continue;
    std::set<int> before = slice;
    bool ok = true;
    for (int o : op.operands) ok = ok && (o < 0 || recomputable(o));
    for (int s : op.strides) ok = ok && recomputable(s);
    if (!ok) {
      slice = before;
      continue;
    }
    plan.loads.push_back(i);
  }
  plan.slice.assign(slice.begin(), slice.end());
  // A load whose address does not depend on the trip reads the same elements on every trip:
  // issued once before the loop, it costs one trip's registers and no traffic per trip.
  std::map<int, bool> tripDependent;
  std::function<bool(int)> dependsOnTrip = [&](int id) {
    if (id == forId) return true;
    if (id < forId) return false;
    if (auto known = tripDependent.find(id); known != tripDependent.end()) return known->second;
    bool depends = false;
    for (int o : k_.ops[id].operands) depends = depends || (o >= 0 && dependsOnTrip(o));
    return tripDependent[id] = depends;
  };
  std::erase_if(plan.loads, [&](int id) {
    const kir::Op& op = k_.ops[id];
    bool depends = false;
    for (int o : op.operands) depends = depends || (o >= 0 && dependsOnTrip(o));
    for (int s : op.strides) depends = depends || dependsOnTrip(s);
    if (!depends) plan.invariant.push_back(id);
    return !depends;
  });
  if (asyncDepth() > 0) {
    for (int id : plan.loads) {
      const kir::Op& op = k_.ops[id];
      bool advances = false;
      for (int o : op.operands) advances = advances || advancesWithTrip(o, forId);
      if (!advances || !copiesAsynchronously(op)) continue;
      plan.staged[id] = plan.stagedBytes;
      int64_t bytes = layoutFor(op.type.length).perThread * kir::dtypeBytes(k_.params[op.param].dtype);
      // Every load's part of a slot starts 16-byte aligned, as 16-byte copies need.
      plan.stagedBytes += (chunks_ * rows_ * threads_ * bytes + 15) / 16 * 16;
    }
    // The vector loads that do not move with the trip (cache hits) are issued in their own trip,
    // early in the body (emissionOrder), rather than held in registers for a trip; streamed ones
    // that cannot be copied (32-byte or 2-byte chunks) stay register-carried.
    std::erase_if(plan.loads, [&](int id) {
      const kir::Op& op = k_.ops[id];
      if (!op.type.isVector() || plan.staged.count(id)) return false;
      for (int o : op.operands)
        if (advancesWithTrip(o, forId)) return false;
      return true;
    });
  }
  for (int id : plan.loads)
    if (!plan.staged.count(id)) plan.carried.push_back(id);
  return plan;
}

SmallVector<Type> KernelEmitter::loadTypes(ArrayRef<int> loads) {
  SmallVector<Type> types;
  for (int id : loads) {
    const kir::Op& op = k_.ops[id];
    Type elem = scalarType(&ctx_, k_.params[op.param].dtype);
    if (!op.type.isVector()) {
      types.push_back(elem);
      continue;
    }
    Layout l = layoutFor(op.type.length);
    for (int64_t c = 0; c < chunks_; ++c) types.push_back(chunkType(k_.params[op.param].dtype, l.perThread));
  }
  return types;
}

Value KernelEmitter::stagedChunkPointer(const PipelinePlan& plan, int id, int64_t c, Value slot) {
  const kir::Op& op = k_.ops[id];
  int64_t bytes = layoutFor(op.type.length).perThread * kir::dtypeBytes(k_.params[op.param].dtype);
  Value thread = arith::AddIOp::create(b_, arith::MulIOp::create(b_, rowInBlock_, constI64(threads_)), lane_);
  Value place = arith::AddIOp::create(b_, constI64(c * rows_ * threads_), thread);
  Value region = constI64(asyncRegion_.at(plan.forId) + plan.staged.at(id));
  Value slotStart = arith::MulIOp::create(b_, slot, constI64(plan.stagedBytes));
  Value inSlot = arith::MulIOp::create(b_, place, constI64(bytes));
  Value offset = arith::AddIOp::create(b_, region, arith::AddIOp::create(b_, slotStart, inSlot));
  auto sharedPtr = LLVM::LLVMPointerType::get(&ctx_, kSharedAddressSpace);
  return LLVM::GEPOp::create(b_, sharedPtr, b_.getI8Type(), asyncBuffer_, ValueRange{offset});
}

void KernelEmitter::bindTrip(const PipelinePlan& plan, Value trip) {
  values_[plan.forId].scalar = trip;
  for (int id : plan.slice) {
    values_[id] = RegValue();
    (void)emitOp(k_.ops[id], id);  // pure scalar math: cannot fail where the body's copy did not
  }
}

SmallVector<Value> KernelEmitter::emitLoadsAtTrip(const PipelinePlan& plan, ArrayRef<int> loads, Value trip) {
  SmallVector<Type> types = loadTypes(loads);
  if (types.empty()) return {};
  bindTrip(plan, trip);
  Value inRange = arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, trip, plan.end);
  auto ifOp = scf::IfOp::create(b_, types, inRange, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
    SmallVector<Value> loaded;
    for (int id : loads) {
      values_[id] = RegValue();
      (void)emitLoad(k_.ops[id], id);
      const RegValue& v = values_[id];
      if (v.isVector()) loaded.append(v.chunks.begin(), v.chunks.end());
      else loaded.push_back(v.scalar);
    }
    scf::YieldOp::create(b_, loaded);
    b_.setInsertionPointToStart(&ifOp.getElseRegion().front());
    SmallVector<Value> zeros;
    for (Type t : types) zeros.push_back(splat(t, cast<TypedAttr>(b_.getZeroAttr(getElementTypeOrSelf(t)))));
    scf::YieldOp::create(b_, zeros);
  }
  return SmallVector<Value>(ifOp.getResults().begin(), ifOp.getResults().end());
}

SmallVector<Value> KernelEmitter::emitPrefetch(const PipelinePlan& plan, Value trip) {
  return emitLoadsAtTrip(plan, plan.carried, trip);
}

void KernelEmitter::bindLoads(ArrayRef<int> loads, ValueRange values) {
  size_t next = 0;
  for (int id : loads) {
    RegValue& v = values_[id];
    v = RegValue();
    if (!k_.ops[id].type.isVector()) {
      v.scalar = values[next++];
      continue;
    }
    for (int64_t c = 0; c < chunks_; ++c) v.chunks.push_back(values[next++]);
  }
}

void KernelEmitter::emitCopies(const PipelinePlan& plan, Value trip, Value slot) {
  bindTrip(plan, trip);
  Value inRange = arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, trip, plan.end);
  auto ifOp = scf::IfOp::create(b_, TypeRange{}, inRange, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPoint(ifOp.getThenRegion().front().getTerminator());
    for (const auto& [id, offset] : plan.staged) {
      const kir::Op& op = k_.ops[id];
      int64_t bytes = layoutFor(op.type.length).perThread * kir::dtypeBytes(k_.params[op.param].dtype);
      // 16-byte copies may bypass L1 (.cg): the rows are read once.
      auto modifier = bytes == 16 ? NVVM::LoadCacheModifierKind::CG : NVVM::LoadCacheModifierKind::CA;
      Value base = scalarOffset(op);
      for (int64_t c = 0; c < chunks_; ++c) {
        Value dst = stagedChunkPointer(plan, id, c, slot);
        Value src = chunkPointer(op, base, c);
        NVVM::CpAsyncOp::create(b_, dst, src, int32_t(bytes), modifier, Value());
      }
    }
  }
  // Every thread commits a group per trip, empty past the end, so the counts of the waits hold.
  NVVM::CpAsyncCommitGroupOp::create(b_);
}

void KernelEmitter::bindPrefetched(const PipelinePlan& plan, ValueRange carried) {
  // The newest asyncDepth() groups are the next trips'; this trip's is older.
  if (!plan.staged.empty()) NVVM::CpAsyncWaitGroupOp::create(b_, int32_t(asyncDepth()));
  bindLoads(plan.carried, carried);
  for (const auto& [id, offset] : plan.staged) {
    RegValue& v = values_[id];
    v = RegValue();
    const kir::Op& op = k_.ops[id];
    Layout l = layoutFor(op.type.length);
    int64_t bytes = l.perThread * kir::dtypeBytes(k_.params[op.param].dtype);
    for (int64_t c = 0; c < chunks_; ++c)
      v.chunks.push_back(LLVM::LoadOp::create(b_, chunkType(k_.params[op.param].dtype, l.perThread),
                                              stagedChunkPointer(plan, id, c, plan.slot), bytes));
  }
}

}  // namespace mxfp6::codegen::detail
