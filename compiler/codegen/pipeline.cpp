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

#include "compiler/codegen/kernel_emitter.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mxfp6::codegen::detail {

bool KernelEmitter::pipelinesLoops() const {
  auto p = k_.config.find("PREFETCH");
  return p != k_.config.end() && p->second == 2;
}

KernelEmitter::PipelinePlan KernelEmitter::planPipeline(int forId) const {
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
  return plan;
}

SmallVector<Type> KernelEmitter::prefetchTypes(const PipelinePlan& plan) {
  SmallVector<Type> types;
  for (int id : plan.loads) {
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

SmallVector<Value> KernelEmitter::emitPrefetch(const PipelinePlan& plan, Value trip, Value end) {
  // The slice sees `trip` as the induction value; the caller rebinds the real one after.
  values_[plan.forId].scalar = trip;
  for (int id : plan.slice) {
    values_[id] = RegValue();
    (void)emitOp(k_.ops[id], id);  // pure scalar math: cannot fail where the body's copy did not
  }
  SmallVector<Type> types = prefetchTypes(plan);
  Value inRange = arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, trip, end);
  auto ifOp = scf::IfOp::create(b_, types, inRange, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
    SmallVector<Value> loaded;
    for (int id : plan.loads) {
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

void KernelEmitter::bindPrefetched(const PipelinePlan& plan, ValueRange carried) {
  size_t next = 0;
  for (int id : plan.loads) {
    RegValue& v = values_[id];
    v = RegValue();
    if (!k_.ops[id].type.isVector()) {
      v.scalar = carried[next++];
      continue;
    }
    for (int64_t c = 0; c < chunks_; ++c) v.chunks.push_back(carried[next++]);
  }
}

}  // namespace mxfp6::codegen::detail
