// Staged stores: byte vectors whose per-thread chunk is not a power of two.
//
// 32 packed 6-bit codes are 24 bytes. Stored by the thread that holds them, as three 8-byte
// stores, each warp store instruction writes 8 bytes at a 24-byte lane stride: it touches three
// times the 32-byte sectors it fills, and the L2 sees three partial writes per sector (the
// packers were L2-bound at under a third of DRAM bandwidth). Staged instead:
//
//   every lane writes its chunk to the warp's slice of a shared buffer (chunk bytes per lane);
//   warp sync;
//   round k = 0 .. m-1 (m = chunk bytes / piece): lane j takes piece p = k*warp + j of the warp's
//   buffer -- piece q = p % m of lane s = p / m's chunk -- and stores it at s's address + q*piece
//   (s's offset and row validity arrive by shuffle).
//
// Where the warp's chunks are adjacent in memory (a row of packed codes, a column's run of row
// blocks), consecutive lanes now write consecutive pieces: full sectors per instruction. Where
// they are not, every piece still goes to its own address, so the result is the same bytes.
// The piece is the chunk's alignment (8 bytes for 24-byte chunks, 4 for 12), so no access is
// less aligned than before. A warp sync before the lanes write protects the previous staged
// store's reads.

#include "compiler/codegen/kernel_emitter.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mxfp6::codegen::detail {

int64_t KernelEmitter::stagedChunkBytes(const kir::Op& op) {
  // The tunable STAGE = 0 keeps each thread's own stores: staging costs shared-memory traffic,
  // shuffles and registers, which a schedule whose stores already coalesce may not repay.
  if (auto s = k_.config.find("STAGE"); s != k_.config.end() && s->second == 0) return 0;
  if (op.code != OpCode::Store || !k_.ops[op.value].type.isVector()) return 0;
  if (k_.params[op.param].dtype != Dtype::U8 || !isContiguous(op)) return 0;
  if ((rows_ * threads_) % warp_ != 0) return 0;  // a partial warp has no lanes to shuffle with
  int64_t bytes = accessElements(op);
  if (bytes == 0 || bytes % 4 != 0 || (bytes & (bytes - 1)) == 0) return 0;
  int64_t piece = std::min<int64_t>(chunkAlignment(op), 8);
  return piece >= 4 ? bytes : 0;
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
  const int64_t bytes = stagedChunkBytes(op);
  const int64_t piece = std::min<int64_t>(chunkAlignment(op), 8);
  const int64_t words = bytes / 4, pieceWords = piece / 4, rounds = bytes / piece;
  Type i32 = b_.getI32Type();
  auto index = [&](Value x) { return arith::IndexCastOp::create(b_, b_.getIndexType(), x); };
  auto shuffleFrom = [&](Value x, Value srcLane) {
    return gpu::ShuffleOp::create(b_, x, srcLane, arith::ConstantOp::create(b_, b_.getI32IntegerAttr(int32_t(warp_))),
                                  gpu::ShuffleMode::IDX)
        .getShuffleResult();
  };
  // The hardware lane (a warp may hold several rows of fewer threads) and the warp's slice of the
  // buffer, in 32-bit words: warps in block order.
  Value tid = arith::AddIOp::create(b_, arith::MulIOp::create(b_, rowInBlock_, constI64(threads_)), lane_);
  Value hwLane = arith::RemUIOp::create(b_, tid, constI64(warp_));
  Value warpBase = arith::MulIOp::create(b_, arith::SubIOp::create(b_, tid, hwLane), constI64(words));
  Value valid = arith::ExtUIOp::create(b_, i32, rowValid_);
  Value base = scalarOffset(op);
  auto bytePtrType = LLVM::LLVMPointerType::get(&ctx_, kGlobalAddressSpace);
  for (int64_t c = 0; c < chunks_; ++c) {
    Value offset = arith::AddIOp::create(b_, base, sliceOffset(op, chunkElementBase(l, c)));
    warpSync();
    Value asWords = vector::BitCastOp::create(b_, VectorType::get({words}, i32), v.chunks[c]);
    Value mine = arith::AddIOp::create(b_, warpBase, arith::MulIOp::create(b_, hwLane, constI64(words)));
    vector::StoreOp::create(b_, asWords, stagingBuffer_, ValueRange{index(mine)}, false, llvm::MaybeAlign(piece));
    warpSync();
    Value offLo = toI32(offset);
    Value offHi = toI32(arith::ShRUIOp::create(b_, offset, constI64(32)));
    for (int64_t k = 0; k < rounds; ++k) {
      Value p = arith::AddIOp::create(b_, hwLane, constI64(k * warp_));
      Value src = toI32(arith::DivUIOp::create(b_, p, constI64(rounds)));
      Value q = arith::RemUIOp::create(b_, p, constI64(rounds));
      Value lo = arith::ExtUIOp::create(b_, b_.getI64Type(), shuffleFrom(offLo, src));
      Value hi = arith::ExtUIOp::create(b_, b_.getI64Type(), shuffleFrom(offHi, src));
      Value srcOffset = arith::OrIOp::create(b_, arith::ShLIOp::create(b_, hi, constI64(32)), lo);
      Value srcValid = arith::CmpIOp::create(b_, arith::CmpIPredicate::ne, shuffleFrom(valid, src),
                                             arith::ConstantOp::create(b_, b_.getI32IntegerAttr(0)));
      Value at = arith::AddIOp::create(b_, warpBase, arith::MulIOp::create(b_, p, constI64(pieceWords)));
      Value data = vector::LoadOp::create(b_, VectorType::get({pieceWords}, i32), stagingBuffer_, ValueRange{index(at)},
                                          false, llvm::MaybeAlign(piece));
      auto ifOp = scf::IfOp::create(b_, srcValid, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
      Value byteOffset = arith::AddIOp::create(b_, srcOffset, arith::MulIOp::create(b_, q, constI64(piece)));
      Value ptr = LLVM::GEPOp::create(b_, bytePtrType, b_.getI8Type(), paramArgs_[op.param], ValueRange{byteOffset});
      LLVM::StoreOp::create(b_, data, ptr, piece);
    }
  }
  return success();
}

}  // namespace mxfp6::codegen::detail
