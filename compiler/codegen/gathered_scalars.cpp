// Gathered scalar stores (the SCALARS = 1 schedule): a program's per-row scalar outputs (the
// whole-QKV norm+RoPE forward's q and k rstd) leave in one coalesced store per output instead of
// one store per row.
//
// Stored where they are computed, by the first lane of each row, a warp of THREADS lanes per row
// writes 32 / THREADS rows' 4-byte scalars per store instruction: 8 bytes at 16 lanes per row,
// a quarter of a sector, so the L2 sees four partial writes per sector. The whole-QKV forward's
// two rstd outputs made it write 3 % more sectors than Triton's (whose program stores its rows'
// rstd with one instruction) in 13 % more write requests (b1bc92a:bench/results/2026-12-02-h200-notes.md,
// section 14). Gathered instead:
//
//   the first lane of each row writes its scalar and the element offset it would store it at
//   (-1 for a row past the end) to the op's slot of shared memory;
//   after the row body, one barrier; then for each gathered store, ROWS consecutive threads
//   (a warp of its own where the program has one to spare) each read one row's pair and store
//   the scalar at its offset: the program's consecutive rows in consecutive lanes.
//
// The offsets travel with the values, so any layout stays correct (only a contiguous one
// coalesces). The rows of a program must all reach the one barrier after the body: the stores
// may not sit inside a loop (the DSL's or SERIAL's row groups), which is an error, as is a
// scalar of other than 4 bytes; under INTERLEAVE each row slot's copy of a store is gathered on
// its own (ROWS consecutive rows each).

#include "compiler/codegen/kernel_emitter.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mxfp6::codegen::detail {

bool KernelEmitter::gathersScalarStore(const kir::Op& op) const {
  return knob(Knob::Scalars) == 1 && op.code == OpCode::Store && !k_.ops[op.value].type.isVector();
}

LogicalResult KernelEmitter::planGatheredScalars(Location loc) {
  const std::vector<int> depth = loopDepths();
  for (size_t i = 0; i < k_.ops.size(); ++i) {
    const kir::Op& op = k_.ops[i];
    if (!gathersScalarStore(op)) continue;
    if (depth[i] > 0)
      return emitError(loc) << "kernel '" << k_.name << "': SCALARS = 1 gathers the scalar stores after the row body, "
                            << "but the store to '" << k_.params[op.param].name << "' is inside a loop"
                            << (serial_ > 1 ? " (SERIAL's row groups)" : "");
    if (kir::dtypeBytes(k_.params[op.param].dtype) != 4)
      return emitError(loc) << "kernel '" << k_.name << "': SCALARS = 1 gathers 4-byte scalars; '"
                            << k_.params[op.param].name << "' holds " << kir::dtypeBytes(k_.params[op.param].dtype)
                            << "-byte ones";
    gatheredSlot_[int(i)] = int64_t(gatheredSlot_.size()) * rows_;
  }
  return success();
}

void KernelEmitter::emitGatheredScalarWrite(const kir::Op& op, int id) {
  Value slot = arith::AddIOp::create(b_, constI64(gatheredSlot_.at(id)), rowInBlock_);
  Value index = arith::IndexCastOp::create(b_, b_.getIndexType(), slot);
  Value rowOffset = scalarOffset(op);
  Value offset = arith::SelectOp::create(b_, rowValid_, rowOffset, constI64(-1));
  Value firstLane = arith::CmpIOp::create(b_, arith::CmpIPredicate::eq, lane_, constI64(0));
  auto ifOp = scf::IfOp::create(b_, firstLane, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b_);
  b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
  memref::StoreOp::create(b_, arith::BitcastOp::create(b_, b_.getI32Type(), values_[op.value].scalar), gatheredValues_,
                          ValueRange{index});
  memref::StoreOp::create(b_, offset, gatheredOffsets_, ValueRange{index});
}

void KernelEmitter::flushGatheredScalars() {
  if (gatheredSlot_.empty()) return;
  gpu::BarrierOp::create(b_);
  const int64_t programThreads = rows_ * threads_;
  const int64_t stride = (rows_ + warp_ - 1) / warp_ * warp_;  // each store's rows from a warp of its own
  int64_t ordinal = 0;
  for (const auto& [id, first] : gatheredSlot_) {
    const kir::Op& op = k_.ops[id];
    const kir::Param& p = k_.params[op.param];
    int64_t base = ordinal++ * stride;
    if (base + rows_ > programThreads) base = 0;
    // Thread base + j stores row j of the program (unsigned: threads below base wrap past ROWS).
    Value j = arith::SubIOp::create(b_, threadId_, constI64(base));
    Value mine = arith::CmpIOp::create(b_, arith::CmpIPredicate::ult, j, constI64(rows_));
    auto ifMine = scf::IfOp::create(b_, mine, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(&ifMine.getThenRegion().front());
    Value index = arith::IndexCastOp::create(b_, b_.getIndexType(), arith::AddIOp::create(b_, j, constI64(first)));
    Value offset = memref::LoadOp::create(b_, gatheredOffsets_, ValueRange{index});
    Value bits = memref::LoadOp::create(b_, gatheredValues_, ValueRange{index});
    Value inRange = arith::CmpIOp::create(b_, arith::CmpIPredicate::sge, offset, constI64(0));
    auto ifValid = scf::IfOp::create(b_, inRange, /*withElseRegion=*/false);
    b_.setInsertionPointToStart(&ifValid.getThenRegion().front());
    Value value = arith::BitcastOp::create(b_, scalarType(&ctx_, p.dtype), bits);
    LLVM::StoreOp::create(b_, value, elementPointer(op.param, p.dtype, offset), 4);
  }
}

}  // namespace mxfp6::codegen::detail
