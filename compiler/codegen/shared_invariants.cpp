// Row-invariant loads through shared memory (the INVARIANTS = 1 schedule): a load that reads the
// same elements for every row (every index ':', a weight read whole) is copied once per program
// into shared memory, and each thread reads its chunks from there when they are first needed.
//
// Held in registers, such a load costs every thread its whole share of the tensor from the top of
// the row to its last use: it depends on nothing, so ptxas issues it first whatever the PTX
// order, and its values stay live across the row's loads and reductions. The per-tensor
// norm+RoPE forward's weight (two 16-byte vectors a thread) takes it to 54 registers, 18
// programs per SM; Triton's kernel reads its weight through shared memory and runs at 48, 20
// programs, and a hand-edited copy of ours that does the same gained 1-2 %
// (b1bc92a:bench/results/2026-12-06-notes-5.md). Staged:
//
//   where the load was, every thread of the program loads one piece of the tensor (4 to 16
//   bytes; threads past the last piece load it again) and stores it to the load's buffer;
//   before the first op that reads the values (or opens or closes a loop), one barrier, then each
//   thread reads its chunks from the buffer in the layout the load would have given them.
//
// A thread holds one piece until the barrier instead of its whole share. The barrier needs every
// thread of the program: the load may not sit inside a loop (the DSL's or SERIAL's row groups),
// and the tensor must have one dimension (its elements one contiguous run); either is an error.

#include "compiler/codegen/kernel_emitter.h"

#include <algorithm>

#include "llvm/Support/MathExtras.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mxfp6::codegen::detail {

bool KernelEmitter::stagesInvariantLoad(const kir::Op& op) const {
  if (knob(Knob::Invariants) != 1 || op.code != OpCode::Load || !op.type.isVector()) return false;
  return std::all_of(op.operands.begin(), op.operands.end(), [](int d) { return d == -1; });
}

LogicalResult KernelEmitter::planInvariantLoads(Location loc) {
  const std::vector<int> depth = loopDepths();
  const int64_t programThreads = rows_ * threads_;
  for (size_t i = 0; i < k_.ops.size(); ++i) {
    const kir::Op& op = k_.ops[i];
    if (!stagesInvariantLoad(op)) continue;
    const kir::Param& p = k_.params[op.param];
    if (depth[i] > 0)
      return emitError(loc) << "kernel '" << k_.name << "': INVARIANTS = 1 stages the loads read whole before a "
                            << "barrier all threads reach, but '" << p.name << "' is loaded inside a loop"
                            << (serial_ > 1 ? " (SERIAL's row groups)" : "");
    if (p.dims.size() != 1)
      return emitError(loc) << "kernel '" << k_.name << "': INVARIANTS = 1 stages one-dimensional tensors read whole; '"
                            << p.name << "' has " << p.dims.size() << " dimensions";
    const int64_t elementBytes = kir::dtypeBytes(p.dtype);
    const int64_t bytes = op.type.length * elementBytes;
    // The smallest piece that lets one round of the program's threads cover the tensor, within
    // what the launch guarantees of its alignment; at least a word where that allows.
    const int64_t align = chunkAlignment(op);
    const int64_t smallest = std::max(elementBytes, std::min<int64_t>(4, align));
    int64_t piece = std::clamp<int64_t>(int64_t(llvm::PowerOf2Ceil(uint64_t((bytes + programThreads - 1) / programThreads))),
                                        smallest, align);
    while (bytes % piece != 0) piece /= 2;
    auto workgroup = gpu::AddressSpaceAttr::get(&ctx_, gpu::AddressSpace::Workgroup);
    invariantLoads_[int(i)] = {MemRefType::get({op.type.length}, scalarType(&ctx_, p.dtype), AffineMap(), workgroup),
                               piece / elementBytes};
  }
  return success();
}

void KernelEmitter::emitInvariantCopy(const kir::Op& op, int id) {
  InvariantLoad& staged = invariantLoads_.at(id);
  const kir::Param& p = k_.params[op.param];
  const int64_t programThreads = rows_ * threads_;
  const int64_t pieces = op.type.length / staged.pieceElements;
  const int64_t pieceBytes = staged.pieceElements * kir::dtypeBytes(p.dtype);
  for (int64_t round = 0; round * programThreads < pieces; ++round) {
    Value piece = arith::AddIOp::create(b_, threadId_, constI64(round * programThreads));
    if ((round + 1) * programThreads > pieces) piece = arith::MinUIOp::create(b_, piece, constI64(pieces - 1));
    Value element = arith::MulIOp::create(b_, piece, constI64(staged.pieceElements));
    Value value = LLVM::LoadOp::create(b_, chunkType(p.dtype, staged.pieceElements),
                                       elementPointer(op.param, p.dtype, element), pieceBytes);
    Value at = arith::IndexCastOp::create(b_, b_.getIndexType(), element);
    vector::StoreOp::create(b_, value, staged.buffer, ValueRange{at}, false, llvm::MaybeAlign(pieceBytes));
  }
  staged.copied = true;
}

void KernelEmitter::readInvariantLoads(const kir::Op& op) {
  bool needed = op.code == OpCode::ForBegin || op.code == OpCode::ForEnd;
  for (int d : inputsOf(op)) {
    auto it = invariantLoads_.find(d);
    needed |= it != invariantLoads_.end() && !it->second.read;
  }
  if (!needed) return;
  bool waited = false;
  for (auto& [id, staged] : invariantLoads_) {
    if (!staged.copied || staged.read) continue;
    if (!waited) gpu::BarrierOp::create(b_);
    waited = true;
    const kir::Op& load = k_.ops[id];
    const Dtype dtype = k_.params[load.param].dtype;
    const Layout l = layoutFor(load.type.length);
    const int64_t chunkBytes = l.perThread * kir::dtypeBytes(dtype);
    for (int64_t c = 0; c < chunks_; ++c) {
      Value at = arith::IndexCastOp::create(b_, b_.getIndexType(), chunkElementBase(l, c));
      values_[id].chunks.push_back(vector::LoadOp::create(b_, chunkType(dtype, l.perThread), staged.buffer, ValueRange{at},
                                                          false, llvm::MaybeAlign(std::min(chunkBytes & -chunkBytes, kMaxAccessBytes))));
    }
    staged.read = true;
  }
}

}  // namespace mxfp6::codegen::detail
