// Staged stores: byte vectors whose per-thread chunk is not a power of two.
//
// 32 packed 6-bit codes are 24 bytes, 8 codes 6. Stored by the thread that holds them, each warp
// store instruction writes a few bytes at a lane stride of the chunk: it touches several times
// the 32-byte sectors it fills, and the L2 sees that many partial writes per sector (the packers
// were L2-bound at under a third of DRAM bandwidth, the prologue's 6-byte chunks went out as
// single bytes). Staged instead:
//
//   every lane writes its chunk to the warp's slice of a shared buffer (chunk bytes per lane);
//   warp sync;
//   round k = 0, 1, ...: lane j takes piece p = k*warp + j of the warp's buffer and stores it at
//   its run's address + its place in the run (the run's offset and row validity arrive by
//   shuffle from the run's first lane).
//
// A run is the chunks of consecutive lanes that are adjacent in memory: lanes of one row whose
// chunks follow each other along the store's innermost slice (a row of codes; the 24 bytes of a
// column block), as many as divide the slice, the row's threads and the warp. The piece is the
// largest power of two (at most 16 bytes) that divides the run and that every run start is
// aligned to -- at least 4 bytes, else the store is not staged -- so consecutive lanes write
// consecutive pieces of a run: whole sectors per instruction. Where runs are single chunks the
// pieces are the chunk's own alignment, and every piece still goes to its own address; where
// those chunks are adjacent through an outer dimension (a column's HB blocks, 24 bytes apart)
// the pieces still fill whole sectors, only narrower ones than a run across that dimension
// could use (runs do not extend past the innermost slice). A warp sync before the lanes write
// protects the previous staged store's reads.

#include "compiler/codegen/kernel_emitter.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <utility>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mxfp6::codegen::detail {

std::optional<KernelEmitter::StagedStore> KernelEmitter::stagedStore(const kir::Op& op) {
  // The tunable STAGE = 0 keeps each thread's own stores: staging costs shared-memory traffic,
  // shuffles and registers, which a schedule whose stores already coalesce may not repay.
  if (knob(Knob::Stage) == 0) return std::nullopt;
  if (op.code != OpCode::Store || !k_.ops[op.value].type.isVector()) return std::nullopt;
  if (k_.params[op.param].dtype != Dtype::U8 || !isContiguous(op)) return std::nullopt;
  if ((rows_ * threads_) % warp_ != 0) return std::nullopt;  // a partial warp has no lanes to shuffle with
  const int64_t bytes = accessElements(op);
  if (bytes == 0 || (bytes & (bytes - 1)) == 0) return std::nullopt;
  // isContiguous: the innermost slice holds whole chunks, and lane t of a row holds chunk t.
  const int64_t runLanes = std::gcd(std::gcd(op.slices[innermostSlice(op)] / bytes, threads_), warp_);
  const int64_t piece = accessAlignment(op, runLanes * bytes);
  if (piece < 4) return std::nullopt;
  return StagedStore{bytes, runLanes, piece};
}

void KernelEmitter::warpSync() {
  if (target_.backend == Backend::NVVM) {
    NVVM::SyncWarpOp::create(b_, arith::ConstantOp::create(b_, b_.getI32IntegerAttr(-1)));
    return;
  }
  // A wavefront runs in lockstep and its LDS accesses complete in order; the intrinsic keeps
  // LLVM from moving the staging writes and reads across each other.
  LLVM::CallIntrinsicOp::create(b_, b_.getStringAttr("llvm.amdgcn.wave.barrier"), ValueRange{});
}

LogicalResult KernelEmitter::emitStagedStore(const kir::Op& op) {
  const RegValue& v = values_[op.value];
  Layout l = layoutFor(k_.ops[op.value].type.length);
  const StagedStore plan = *stagedStore(op);
  // The buffer's elements: 4 bytes, or 2 or 1 where some staged chunk is not whole words.
  const int64_t unit = stagingUnitBytes_;
  const int64_t chunkUnits = plan.chunkBytes / unit, pieceUnits = plan.piece / unit;
  const int64_t piecesPerRun = plan.runLanes * plan.chunkBytes / plan.piece;
  const int64_t piecesPerWarp = warp_ * plan.chunkBytes / plan.piece;
  const int64_t rounds = (piecesPerWarp + warp_ - 1) / warp_;
  Type i32 = b_.getI32Type(), unitType = b_.getIntegerType(unsigned(8 * unit));
  auto index = [&](Value x) { return arith::IndexCastOp::create(b_, b_.getIndexType(), x); };
  auto shuffleFrom = [&](Value x, Value srcLane) {
    return gpu::ShuffleOp::create(b_, x, srcLane, arith::ConstantOp::create(b_, b_.getI32IntegerAttr(int32_t(warp_))),
                                  gpu::ShuffleMode::IDX)
        .getShuffleResult();
  };
  // The hardware lane (a warp may hold several rows of fewer threads) and the warp's slice of the
  // buffer, in units: warps in block order.
  Value tid = arith::AddIOp::create(b_, arith::MulIOp::create(b_, rowInBlock_, constI64(threads_)), lane_);
  Value hwLane = arith::RemUIOp::create(b_, tid, constI64(warp_));
  Value warpBase = arith::MulIOp::create(b_, arith::SubIOp::create(b_, tid, hwLane), constI64(chunkUnits));
  Value valid = arith::ExtUIOp::create(b_, i32, rowValid_);
  Value base = scalarOffset(op);
  auto bytePtrType = LLVM::LLVMPointerType::get(&ctx_, kGlobalAddressSpace);
  auto pieceType = VectorType::get({plan.piece / 4}, i32);
  for (int64_t c = 0; c < chunks_; ++c) {
    Value offset = arith::AddIOp::create(b_, base, sliceOffset(op, chunkElementBase(l, c)));
    warpSync();
    Value asUnits = vector::BitCastOp::create(b_, VectorType::get({chunkUnits}, unitType), v.chunks[c]);
    Value mine = arith::AddIOp::create(b_, warpBase, arith::MulIOp::create(b_, hwLane, constI64(chunkUnits)));
    vector::StoreOp::create(b_, asUnits, stagingBuffer_, ValueRange{index(mine)}, false,
                            llvm::MaybeAlign(std::min(plan.chunkBytes & -plan.chunkBytes, kMaxAccessBytes)));
    warpSync();
    Value offLo = toI32(offset);
    Value offHi = toI32(arith::ShRUIOp::create(b_, offset, constI64(32)));
    // The run's offset and validity, from its first lane. Where the whole warp is one run, that
    // lane is lane 0 in every round: one exchange serves them all.
    auto fromRunStart = [&](Value src) -> std::pair<Value, Value> {
      Value lo = arith::ExtUIOp::create(b_, b_.getI64Type(), shuffleFrom(offLo, src));
      Value hi = arith::ExtUIOp::create(b_, b_.getI64Type(), shuffleFrom(offHi, src));
      Value srcOffset = arith::OrIOp::create(b_, arith::ShLIOp::create(b_, hi, constI64(32)), lo);
      Value srcValid = arith::CmpIOp::create(b_, arith::CmpIPredicate::ne, shuffleFrom(valid, src),
                                             arith::ConstantOp::create(b_, b_.getI32IntegerAttr(0)));
      return {srcOffset, srcValid};
    };
    std::optional<std::pair<Value, Value>> warpRun;
    for (int64_t k = 0; k < rounds; ++k) {
      // The last round may have fewer pieces than lanes: the others read piece 0 and store nothing.
      const bool partial = (k + 1) * warp_ > piecesPerWarp;
      Value p = arith::AddIOp::create(b_, hwLane, constI64(k * warp_));
      Value active;
      if (partial) {
        active = arith::CmpIOp::create(b_, arith::CmpIPredicate::ult, p, constI64(piecesPerWarp));
        p = arith::SelectOp::create(b_, active, p, constI64(0));
      }
      Value run = arith::DivUIOp::create(b_, p, constI64(piecesPerRun));
      Value src = toI32(arith::MulIOp::create(b_, run, constI64(plan.runLanes)));
      Value q = arith::RemUIOp::create(b_, p, constI64(piecesPerRun));
      if (plan.runLanes == warp_ && !warpRun) warpRun = fromRunStart(src);
      auto [srcOffset, srcValid] = warpRun ? *warpRun : fromRunStart(src);
      if (partial) srcValid = arith::AndIOp::create(b_, srcValid, active);
      Value at = arith::AddIOp::create(b_, warpBase, arith::MulIOp::create(b_, p, constI64(pieceUnits)));
      Value data = vector::LoadOp::create(b_, VectorType::get({pieceUnits}, unitType), stagingBuffer_,
                                          ValueRange{index(at)}, false, llvm::MaybeAlign(plan.piece));
      if (unit != 4) data = vector::BitCastOp::create(b_, pieceType, data);
      auto ifOp = scf::IfOp::create(b_, srcValid, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
      Value byteOffset = arith::AddIOp::create(b_, srcOffset, arith::MulIOp::create(b_, q, constI64(plan.piece)));
      Value ptr = LLVM::GEPOp::create(b_, bytePtrType, b_.getI8Type(), paramArgs_[op.param], ValueRange{byteOffset});
      LLVM::StoreOp::create(b_, data, ptr, plan.piece);
    }
  }
  return success();
}

}  // namespace mxfp6::codegen::detail
