// Paired loads (COALESCE = 1): row loads whose per-thread chunk is 32 bytes or more.
//
// A thread holding 32 bf16 (a whole MX block) loads its 64 bytes as four 16-byte vector loads;
// each warp instruction then reads 16 bytes at a 64-byte lane stride, half of every 32-byte
// sector it touches, and the four instructions are in flight together, so the L1 forwards each
// sector to the L2 twice (Nsight: "16.0 of the 32 bytes transmitted per sector are utilized";
// the dual packer was L2-bound at half of DRAM bandwidth). Paired instead, lanes 2j and 2j+1,
// whose chunks are adjacent in memory (one run of the row's innermost slice), read their 2B
// bytes as 2n pieces of 16 bytes (n = B / 16 per lane, even):
//
//   instruction k = 0 .. n-1: lane of parity p loads pair piece 2k + p, so each instruction
//   reads whole sectors (the pair's two halves of one);
//   the even lane keeps pieces 0 .. n-1 and the odd one n .. 2n-1: for m < n/2 the even lane
//   sends its piece n + 2m (loaded by k = m + n/2) and the odd lane its piece 2m + 1 (k = m),
//   one shuffle per 32-bit word, each to its partner (xor 1);
//   each lane's chunk, piece by piece: position 2m is the even lane's own load k = m (or the
//   odd lane's received piece), position 2m+1 the received piece (or the odd lane's own load
//   k = m + n/2).
//
// Lanes of a pair are in the same row (THREADS even), so rows past the end read the clamped
// last row alike. Pipelined loop loads (PREFETCH = 2, ASYNC) keep their own paths.

#include "compiler/codegen/kernel_emitter.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mxfp6::codegen::detail {

std::optional<int64_t> KernelEmitter::pairedLoadPieces(const kir::Op& op) {
  auto c = k_.config.find("COALESCE");
  if (c == k_.config.end() || c->second == 0) return std::nullopt;
  if (op.code != OpCode::Load || !op.type.isVector() || gatherDim(op) >= 0 || !isContiguous(op)) return std::nullopt;
  if ((rows_ * threads_) % warp_ != 0 || threads_ % 2 != 0) return std::nullopt;
  const int64_t elements = accessElements(op);
  const int64_t bytes = elements * kir::dtypeBytes(k_.params[op.param].dtype);
  if (bytes < 32 || bytes % 32 != 0 || chunkAlignment(op) < kMaxAccessBytes) return std::nullopt;
  // The pair's chunks adjacent: the innermost slice holds an even number of chunks.
  if ((op.slices[innermostSlice(op)] / elements) % 2 != 0) return std::nullopt;
  return bytes / kMaxAccessBytes;
}

LogicalResult KernelEmitter::emitPairedLoad(const kir::Op& op, int id, int64_t n) {
  const kir::Param& p = k_.params[op.param];
  Layout l = layoutFor(op.type.length);
  const int64_t bytes = n * kMaxAccessBytes;
  Type i32 = b_.getI32Type();
  auto pieceType = VectorType::get({kMaxAccessBytes / 4}, i32);
  auto bytePtrType = LLVM::LLVMPointerType::get(&ctx_, kGlobalAddressSpace);
  Value tid = arith::AddIOp::create(b_, arith::MulIOp::create(b_, rowInBlock_, constI64(threads_)), lane_);
  Value parity = arith::AndIOp::create(b_, tid, constI64(1));
  Value odd = arith::CmpIOp::create(b_, arith::CmpIPredicate::ne, parity, constI64(0));
  // Bytes from this lane's chunk to its pair piece 2k + p: 32k + p * (16 - B).
  Value shift = arith::MulIOp::create(b_, parity, constI64(kMaxAccessBytes - bytes));
  auto exchange = [&](Value piece) {
    SmallVector<Value> words;
    for (int64_t w = 0; w < kMaxAccessBytes / 4; ++w) {
      Value word = vector::ExtractOp::create(b_, piece, ArrayRef<int64_t>{w});
      Value partner = arith::ConstantOp::create(b_, b_.getI32IntegerAttr(1));
      Value width = arith::ConstantOp::create(b_, b_.getI32IntegerAttr(int32_t(warp_)));
      words.push_back(gpu::ShuffleOp::create(b_, word, partner, width, gpu::ShuffleMode::XOR).getShuffleResult());
    }
    return Value(vector::FromElementsOp::create(b_, pieceType, words));
  };
  Value base = scalarOffset(op);
  for (int64_t c = 0; c < chunks_; ++c) {
    Value own = chunkPointer(op, base, c);
    SmallVector<Value> loaded;
    for (int64_t k = 0; k < n; ++k) {
      Value offset = arith::AddIOp::create(b_, shift, constI64(2 * kMaxAccessBytes * k));
      Value ptr = LLVM::GEPOp::create(b_, bytePtrType, b_.getI8Type(), own, ValueRange{offset});
      loaded.push_back(LLVM::LoadOp::create(b_, pieceType, ptr, kMaxAccessBytes));
    }
    SmallVector<Value> pieces(n);
    for (int64_t m = 0; m < n / 2; ++m) {
      Value received = exchange(arith::SelectOp::create(b_, odd, loaded[m], loaded[m + n / 2]));
      pieces[2 * m] = arith::SelectOp::create(b_, odd, received, loaded[m]);
      pieces[2 * m + 1] = arith::SelectOp::create(b_, odd, loaded[m + n / 2], received);
    }
    SmallVector<Value> chunkWords;
    for (Value piece : pieces)
      for (int64_t w = 0; w < kMaxAccessBytes / 4; ++w)
        chunkWords.push_back(vector::ExtractOp::create(b_, piece, ArrayRef<int64_t>{w}));
    Value words = vector::FromElementsOp::create(b_, VectorType::get({bytes / 4}, i32), chunkWords);
    values_[id].chunks.push_back(
        vector::BitCastOp::create(b_, cast<VectorType>(chunkType(p.dtype, l.perThread)), words));
  }
  return success();
}

}  // namespace mxfp6::codegen::detail
