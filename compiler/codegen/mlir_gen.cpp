// Row-schedule lowering of KIR to MLIR.
//
// A program (thread block) handles ROWS rows; each row is handled by THREADS threads. A row
// vector lives in registers, distributed so that consecutive threads touch consecutive vectors
// (coalesced, 16-byte accesses when VEC * bytes == 16). The longest vector of the kernel, N
// elements, sets the chunk count C = N / (THREADS*VEC); every vector of length L is a view of
// the same row at another granularity, E = L / (C*THREADS) elements per thread and chunk:
//
//   E >= 1:  thread `lane`, chunk c holds elements [(c*THREADS + lane)*E, +E)
//   E < 1:   element (c*THREADS + lane)*E, shared (replicated) by 1/E consecutive lanes
//
// So element j of a length-L vector sits in the thread that holds elements [j*N/L, (j+1)*N/L)
// of the longest one: a group reduction, a pair rotation with a half-length table, or an MX
// scale per 32 elements are thread-local or a shuffle among a few neighbouring lanes.
//
// Elementwise ops act chunk by chunk; per-row scalars are computed redundantly by every thread
// of the row. A reduction is, in a fixed order:
//
//   partial = combine chunks elementwise, then reduce the VEC lanes of the vector
//   for off = min(THREADS, warp)/2 .. 1:  partial = op(partial, shuffle_xor(partial, off))
//   if THREADS > warp:                    (cross-warp step through shared memory)
//     lane 0 of each warp writes buf[slot][row][warp]; barrier
//     every thread combines buf[slot][row][0 .. warps) in order
//
// Floating-point addition is commutative, so every lane ends with bit-identical results (the
// exchange's adds are never contracted into FMAs: combineLanes in scalar_ops.cpp). The
// slots form a ring, and reductions whose operands are ready together share one barrier
// (reductions.cpp).
//
// Rows past the end are clamped to the last row for loads (no out-of-bounds reads, no divergent
// barriers) and masked for stores.
//
// This file checks a schedule, orders the ops and builds the kernel function; the loads and
// stores are in memory_ops.cpp, the elementwise math in scalar_ops.cpp, and the other op
// families in their own files (reductions, row_ops, tile_ops, mx_ops, control, pipeline).

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/codegen/interleaved_rows.h"
#include "compiler/codegen/occupancy.h"
#include "compiler/codegen/serial_rows.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace mxfp6::codegen {
namespace detail {

Type scalarType(MLIRContext* ctx, Dtype d) {
  switch (d) {
    case Dtype::BF16: return BFloat16Type::get(ctx);
    case Dtype::F16: return Float16Type::get(ctx);
    case Dtype::F32: return Float32Type::get(ctx);
    case Dtype::I32: return IntegerType::get(ctx, 32);
    case Dtype::I64: return IntegerType::get(ctx, 64);
    case Dtype::U8: return IntegerType::get(ctx, 8);
    case Dtype::Bool: return IntegerType::get(ctx, 1);
  }
  return {};
}

LogicalResult KernelEmitter::checkSchedule() {
  rows_ = k_.rowsPerProgram;
  threads_ = k_.threadsPerRow;
  vec_ = k_.vectorWidth;
  warp_ = target_.subgroupSize;
  // A refusal points at the `tune` entry of the knob whose value causes it.
  auto fail = [&](const std::string& msg, Knob cause) {
    emitError(knobLocation(cause)) << "kernel '" << k_.name << "': " << msg;
    return failure();
  };
  if (rows_ < 1 || threads_ < 1 || vec_ < 1) return fail("ROWS, THREADS and VEC must be positive", Knob::Rows);
  if (rows_ * threads_ > 1024)
    return fail("ROWS * THREADS = " + std::to_string(rows_ * threads_) + " exceeds 1024 threads per program", Knob::Threads);
  if (threads_ >= warp_) {
    if (threads_ % warp_ != 0)
      return fail("THREADS = " + std::to_string(threads_) + " must be a multiple of the " + target_.name +
                  " subgroup size " + std::to_string(warp_), Knob::Threads);
  } else if ((threads_ & (threads_ - 1)) != 0 || warp_ % threads_ != 0) {
    return fail("THREADS = " + std::to_string(threads_) + " below the subgroup size must be a power of two", Knob::Threads);
  }
  warpsPerRow_ = threads_ >= warp_ ? threads_ / warp_ : 1;
  int64_t longest = 0;
  const kir::Op* longestOp = nullptr;
  for (const kir::Op& op : k_.ops)
    if (op.code != OpCode::Store && op.type.length > longest) longest = op.type.length, longestOp = &op;
  if (longest > 0) {
    if (longest % (threads_ * vec_) != 0) {
      fail("the longest row vector (" + std::to_string(longest) + " elements) is not a multiple of THREADS * VEC = " +
           std::to_string(threads_ * vec_), Knob::Vec);
      emitRemark(loc(longestOp->loc)) << "the longest row vector is computed here";
      return failure();
    }
    chunks_ = longest / (threads_ * vec_);
  }
  for (const kir::Op& op : k_.ops) {
    if (op.code == OpCode::Store || !op.type.isVector()) continue;
    int64_t slots = chunks_ * threads_;
    int64_t replicas = slots % op.type.length == 0 ? slots / op.type.length : 0;
    bool fits = op.type.length % slots == 0 ||
                (replicas > 0 && replicas <= warp_ && (replicas & (replicas - 1)) == 0 && threads_ % replicas == 0);
    if (!fits) {
      error(op) << "a row vector of " << op.type.length << " elements cannot be spread over " << chunks_
                << " chunk(s) of " << threads_ << " threads (the longest vector has " << longest << ")";
      return failure();
    }
  }
  for (const kir::Op& op : k_.ops)
    if (failed(checkBuildingBlock(op))) return failure();
  for (const kir::Op& op : k_.ops) {
    if (op.code == OpCode::Transpose && layoutFor(op.type.length).replicas > 1) {
      error(op) << "transpose needs at least one element per thread (THREADS=" << threads_ << ", VEC=" << vec_ << ")";
      return failure();
    }
  }
  if (asyncDepth() < 0) return fail("ASYNC must be 0 or more", Knob::Async);
  if (asyncDepth() > 0) {
    bool pipelined = false;
    for (size_t i = 0; i < k_.ops.size(); ++i)
      pipelined |= k_.ops[i].code == OpCode::ForBegin && pipelines(int(i));
    if (!pipelined)
      return fail("ASYNC = " + std::to_string(asyncDepth()) +
                  " copies rows ahead in pipelined loops, and this configuration has none (SERIAL = 1 and no "
                  "loop under PREFETCH = 2)", Knob::Async);
  }
  if (asyncDepth() > 0 && target_.backend != Backend::NVVM)
    return fail("ASYNC = " + std::to_string(asyncDepth()) +
                " stages loads through asynchronous copies to shared memory (cp.async), which " + target_.name +
                " does not have; use ASYNC = 0 there", Knob::Async);
  if (int64_t predicate = knob(Knob::Predicate); predicate != 0) {
    if (predicate != 1) return fail("PREDICATE must be 0 (stores in a branch) or 1 (predicated stores)", Knob::Predicate);
    if (target_.backend != Backend::NVVM)
      return fail("PREDICATE = 1 predicates each store with inline PTX (@p st.global), which " + target_.name +
                  " does not run; use PREDICATE = 0 there", Knob::Predicate);
  }
  // Loops of the DSL body; the row-group loop of SERIAL has the same trips in every row.
  int loopDepth = 0;
  for (size_t i = 0; i < k_.ops.size(); ++i) {
    const kir::Op& op = k_.ops[i];
    bool bodyLoop = int(i) != serialLoop_ && (op.code != OpCode::ForEnd || op.ival != serialLoop_);
    if (bodyLoop) loopDepth += op.code == OpCode::ForBegin ? 1 : op.code == OpCode::ForEnd ? -1 : 0;
    if (reducesAcrossWarps(op)) {
      if (op.type.elem != Dtype::F32) {
        error(op) << "reductions across warps are implemented for f32 only";
        return failure();
      }
      // The reduction synchronizes the whole program; rows of one program may run different
      // trip counts.
      if (loopDepth > 0 && rows_ > 1) {
        error(op) << "a reduction across warps inside a loop needs ROWS = 1 (ROWS = " << rows_ << ")";
        return failure();
      }
      needsShared_ = true;
    }
  }
  return success();
}

/// Each load moves up to just after the ops it depends on (its indices and strides, which move
/// up too: scalar integer math is cheap), staying inside its loop body. A DSL row reads its
/// inputs where the math needs them, often after a reduction (LN-modulate loads scale and shift
/// after two block reductions); issued early, all of a thread's loads are in flight together
/// instead of one barrier apart. Loads read inputs and stores write outputs, which the language
/// keeps apart, so no store is crossed that could change a loaded value.
std::vector<int> KernelEmitter::emissionOrder() const {
  int n = int(k_.ops.size());
  // Early loads cost registers (all of a row's inputs live at once); a kernel can offer
  // PREFETCH = 0 as a tunable to keep KIR order where that matters more (reductions are not
  // batched either: that too would move loads up).
  if (knob(Knob::Prefetch) == 0) {
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    return order;
  }
  std::vector<int> innermostLoop(n, -1), open;
  for (int i = 0; i < n; ++i) {
    if (k_.ops[i].code == OpCode::ForEnd) open.pop_back();
    innermostLoop[i] = open.empty() ? -1 : open.back();
    if (k_.ops[i].code == OpCode::ForBegin) open.push_back(i);
  }
  auto movable = [&](const kir::Op& op) {
    switch (op.code) {
      case OpCode::Load: return true;
      case OpCode::Store: case OpCode::ReduceSum: case OpCode::ReduceMax: case OpCode::ReduceMin:
      case OpCode::VarInit: case OpCode::VarRead: case OpCode::VarWrite: case OpCode::ForBegin:
      case OpCode::ForEnd:
        return false;
      default: return !op.type.isVector();
    }
  };
  // An op emitted "at" e comes right after op e is (or would have been) emitted; -1 is the start.
  std::vector<int> at(n);
  std::vector<std::vector<int>> hoistedAfter(n + 1);
  std::vector<bool> hoisted(n, false);
  for (int i = 0; i < n; ++i) {
    const kir::Op& op = k_.ops[i];
    at[i] = i;
    if (!movable(op)) continue;
    int earliest = innermostLoop[i];
    for (int d : op.operands) earliest = std::max(earliest, d < 0 ? -1 : at[d]);
    for (int d : op.strides) earliest = std::max(earliest, at[d]);
    if (earliest + 1 >= i) continue;
    at[i] = earliest;
    hoistedAfter[earliest + 1].push_back(i);
    hoisted[i] = true;
  }
  std::vector<int> order(hoistedAfter[0]);
  for (int i = 0; i < n; ++i) {
    if (!hoisted[i]) order.push_back(i);
    order.insert(order.end(), hoistedAfter[i + 1].begin(), hoistedAfter[i + 1].end());
  }
  return batchReductions(std::move(order));
}

std::vector<int> KernelEmitter::loopDepths() const {
  std::vector<int> depths(k_.ops.size());
  int depth = 0;
  for (size_t i = 0; i < k_.ops.size(); ++i) {
    depth += k_.ops[i].code == OpCode::ForBegin ? 1 : k_.ops[i].code == OpCode::ForEnd ? -1 : 0;
    depths[i] = depth;
  }
  return depths;
}

Value KernelEmitter::rowExtent(size_t v) {
  if (k_.rowDims[v] < 0) return constI64(k_.rowConstExtents[v]);
  return runtimeDimArgs_[k_.rowDims[v]];
}

Value KernelEmitter::toI64(Value v) {
  if (v.getType().isInteger(64)) return v;
  return arith::ExtSIOp::create(b_, b_.getI64Type(), v);
}

bool KernelEmitter::overlapsPreviousGrid() const {
  return target_.backend == Backend::NVVM && knob(Knob::Overlap) == 1;
}

void KernelEmitter::emitPrologue() {
  threadId_ = arith::IndexCastOp::create(b_, b_.getI64Type(), gpu::ThreadIdOp::create(b_, gpu::Dimension::x));
  Value bid = arith::IndexCastOp::create(b_, b_.getI64Type(), gpu::BlockIdOp::create(b_, gpu::Dimension::x));
  rowInBlock_ = arith::DivUIOp::create(b_, threadId_, constI64(threads_));
  lane_ = arith::RemUIOp::create(b_, threadId_, constI64(threads_));
  warpInRow_ = arith::DivUIOp::create(b_, lane_, constI64(warp_));
  laneInWarp_ = arith::RemUIOp::create(b_, lane_, constI64(warp_));
  firstRow_ = arith::AddIOp::create(b_, arith::MulIOp::create(b_, bid, constI64(rows_ * serial_ * interleave_)),
                                    rowInBlock_);
  numRows_ = constI64(1);
  for (size_t v = 0; v < k_.rowDims.size(); ++v) numRows_ = arith::MulIOp::create(b_, numRows_, rowExtent(v));
  bindRows(Value());
}

namespace {

/// Where each buffer starts in the dynamic shared memory: 16-byte aligned, as the static
/// attributions are, one after the other; the last entry is the total.
SmallVector<int64_t> dynamicSharedOffsets(ArrayRef<Type> buffers) {
  SmallVector<int64_t> offsets{0};
  for (Type t : buffers) {
    auto m = cast<MemRefType>(t);
    int64_t bytes = m.getNumElements() * int64_t(m.getElementTypeBitWidth() / 8);
    offsets.push_back(offsets.back() + (bytes + 15) / 16 * 16);
  }
  return offsets;
}

}  // namespace

int64_t KernelEmitter::dynamicSharedBytes(ArrayRef<Type> buffers) { return dynamicSharedOffsets(buffers).back(); }

SmallVector<Value> KernelEmitter::viewDynamicSharedMemory(ArrayRef<Type> buffers) {
  auto workgroup = gpu::AddressSpaceAttr::get(&ctx_, gpu::AddressSpace::Workgroup);
  auto bytesType = MemRefType::get({ShapedType::kDynamic}, b_.getI8Type(), AffineMap(), workgroup);
  Value base = gpu::DynamicSharedMemoryOp::create(b_, bytesType);
  SmallVector<int64_t> offsets = dynamicSharedOffsets(buffers);
  SmallVector<Value> views;
  for (size_t i = 0; i < buffers.size(); ++i) {
    Value at = arith::ConstantIndexOp::create(b_, offsets[i]);
    views.push_back(memref::ViewOp::create(b_, cast<MemRefType>(buffers[i]), base, at, ValueRange{}));
  }
  return views;
}

Value KernelEmitter::groupRow(Value trip, int64_t slot, Value* valid) {
  // Row group `trip` spans ROWS * INTERLEAVE rows; slot s of a thread is its row in the group's
  // s-th block of ROWS rows.
  Value row = firstRow_;
  if (trip) row = arith::AddIOp::create(b_, row, arith::MulIOp::create(b_, trip, constI64(rows_ * interleave_)));
  if (slot > 0) row = arith::AddIOp::create(b_, row, constI64(slot * rows_));
  return clampRow(row, valid);
}

void KernelEmitter::bindRows(Value trip) {
  slotRows_.clear();
  slotValid_.clear();
  for (int64_t s = 0; s < interleave_; ++s) {
    Value valid;
    slotRows_.push_back(groupRow(trip, s, &valid));
    slotValid_.push_back(valid);
  }
  row_ = slotRows_[0];
  rowValid_ = slotValid_[0];
}

Value KernelEmitter::clampRow(Value row, Value* valid) {
  Value inRange = arith::CmpIOp::create(b_, arith::CmpIPredicate::slt, row, numRows_);
  if (valid) *valid = inRange;
  Value last = arith::SubIOp::create(b_, numRows_, constI64(1));
  return arith::SelectOp::create(b_, inRange, row, last);
}

/// MINPROGS = n asks the register allocator to leave room for n resident programs per SM (CU):
/// `.minnctapersm n` on NVIDIA, the waves per SIMD that n programs need on AMD. Fewer registers
/// per thread can mean spills (ptxas reports them; the resources in the metadata show the
/// outcome); more programs in flight hide more latency where a program's phases (loads, barriers,
/// dependent math) leave the SM idle. 0 (the default) leaves the choice to the compiler. A count
/// that the threads or the shared memory of n programs rule out is an error: the registers it
/// would cost buy no residency.
LogicalResult KernelEmitter::requestResidentPrograms(gpu::GPUFuncOp func, int blockThreads, int64_t sharedBytes,
                                                     Location loc) {
  int64_t programs = knob(Knob::MinProgs);
  if (programs == 0) return success();
  bool nvidia = target_.backend == Backend::NVVM;
  const char* unit = nvidia ? "SM of " : "CU of ";
  int64_t maxPrograms = threadResidentPrograms(target_, blockThreads);
  if (programs < 0 || programs > maxPrograms) {
    emitError(loc) << "MINPROGS = " << programs << " programs of " << blockThreads << " threads cannot be resident on one "
                   << unit << target_.name << ": at most " << maxPrograms;
    return failure();
  }
  if (int fit = sharedResidentPrograms(target_, sharedBytes); programs > fit) {
    emitError(loc) << "MINPROGS = " << programs << " programs of " << sharedBytes
                   << " bytes of shared memory cannot be resident on one " << unit << target_.name << ": its "
                   << target_.sharedBytesPerUnit << " bytes hold " << fit
                   << (target_.sharedBytesReservedPerProgram
                           ? " (" + std::to_string(target_.sharedBytesReservedPerProgram) + " more reserved per program)"
                           : std::string())
                   << "; lower MINPROGS or the shared memory";
    return failure();
  }
  if (nvidia) {
    func->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(), b_.getI32IntegerAttr(int(programs)));
  } else {
    int64_t waves = (blockThreads + target_.subgroupSize - 1) / target_.subgroupSize;
    int64_t wavesPerSimd = (programs * waves + 3) / 4;
    func->setAttr(ROCDL::ROCDLDialect::WavesPerEuAttrHelper::getNameStr(), b_.getI32IntegerAttr(int(wavesPerSimd)));
  }
  return success();
}

LogicalResult KernelEmitter::emitOp(const kir::Op& op, int id) {
  b_.setLoc(loc(op.loc));
  RegValue& out = values_[id];
  switch (op.code) {
    case OpCode::ConstFloat:
      out.scalar = arith::ConstantOp::create(b_, b_.getFloatAttr(scalarType(&ctx_, op.type.elem), op.fval));
      return success();
    case OpCode::ConstInt:
      out.scalar = arith::ConstantOp::create(b_, b_.getIntegerAttr(scalarType(&ctx_, op.type.elem), op.ival));
      return success();
    case OpCode::ScalarArg: out.scalar = paramArgs_[op.param]; return success();
    case OpCode::DimArg: out.scalar = runtimeDimArgs_[op.ival]; return success();
    case OpCode::RowIndex: {
      // Under SERIAL the operand is the row group's trip (serial_rows.h); under INTERLEAVE the
      // op's slot says which of the thread's rows it is (interleaved_rows.h).
      int64_t slot = rowSlot_.empty() ? 0 : std::max(rowSlot_[id], 0);
      Value r = op.operands.empty() ? row_ : groupRow(toI64(values_[op.operands[0]].scalar), slot, nullptr);
      out.scalar = k_.rowVars.size() == 1 ? r : rowDigit(r, int(op.ival));
      return success();
    }
    case OpCode::Load: return emitLoad(op, id);
    case OpCode::Store: return emitStore(op, id);
    case OpCode::ReduceSum: case OpCode::ReduceMax: case OpCode::ReduceMin: return emitReduce(op, id);
    case OpCode::Repeat: return emitRepeat(op, id);
    case OpCode::GroupReduceSum: case OpCode::GroupReduceMax: case OpCode::GroupReduceMin:
      return emitGroupReduce(op, id);
    case OpCode::RotatePairs: return emitRotatePairs(op, id);
    case OpCode::MxScale: return emitMxScale(op, id);
    case OpCode::MxEncode: return emitMxEncode(op, id);
    case OpCode::Pack6: return emitPack6(op, id);
    case OpCode::Transpose: return emitTranspose(op, id);
    case OpCode::Iota: {
      // Element j of the chunk's vector is its global index.
      Layout l = layoutFor(op.type.length);
      for (int64_t c = 0; c < chunks_; ++c) {
        Value first = chunkElementBase(l, c);
        Value v = splat(chunkType(Dtype::I64, l.perThread), cast<TypedAttr>(b_.getI64IntegerAttr(0)));
        for (int64_t e = 0; e < l.perThread; ++e)
          v = vector::InsertOp::create(b_, arith::AddIOp::create(b_, first, constI64(e)), v, ArrayRef<int64_t>{e});
        out.chunks.push_back(v);
      }
      return success();
    }
    case OpCode::Splat: {
      Layout l = layoutFor(op.type.length);
      Type chunk = chunkType(op.type.elem, l.perThread);
      for (int64_t c = 0; c < chunks_; ++c) out.chunks.push_back(broadcast(values_[op.operands[0]].scalar, chunk));
      return success();
    }
    case OpCode::VarInit: return emitVarInit(op, id);
    case OpCode::VarRead: return emitVarRead(op, id);
    case OpCode::VarWrite: return emitVarWrite(op);
    case OpCode::ForBegin: return emitForBegin(op, id);
    case OpCode::ForEnd: return emitForEnd(op);
    default: return emitElementwise(op, id);
  }
}

OwningOpRef<ModuleOp> KernelEmitter::run(LaunchShape& shape) {
  if (failed(checkSchedule())) return nullptr;
  planIndexRanges();
  Location kernelLoc = loc(k_.loc);
  b_.setLoc(kernelLoc);
  OwningOpRef<ModuleOp> module = ModuleOp::create(kernelLoc);
  (*module)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b_.getUnitAttr());
  b_.setInsertionPointToEnd(module->getBody());
  auto gpuModule = gpu::GPUModuleOp::create(b_, k_.name + "_module");
  b_.setInsertionPointToStart(gpuModule.getBody());

  // Bare arguments in ABI order: pointers and scalars, then the runtime sizes the body uses.
  SmallVector<Type> argTypes;
  std::vector<kir::AbiArg> abi = k_.abi();
  for (const kir::AbiArg& a : abi) {
    switch (a.kind) {
      case kir::AbiKind::Pointer: argTypes.push_back(LLVM::LLVMPointerType::get(&ctx_, kGlobalAddressSpace)); break;
      case kir::AbiKind::I32: argTypes.push_back(b_.getI32Type()); break;
      case kir::AbiKind::I64: argTypes.push_back(b_.getI64Type()); break;
      case kir::AbiKind::F32: argTypes.push_back(b_.getF32Type()); break;
    }
  }
  // Then each runtime divisor's multiplier and shift, derived by the runtime.
  for (size_t i = 0; i < 2 * magicDivisors_.size(); ++i) argTypes.push_back(b_.getI32Type());
  SmallVector<Type> workgroup;
  // The reductions' ring of slots, twice where a loop alternates between two (reductions.cpp).
  bool alternating = false;
  for (size_t i = 0; i < k_.ops.size(); ++i)
    alternating |= k_.ops[i].code == OpCode::ForBegin && reducesAcrossWarpsIn(int(i));
  int sharedFloats = int((alternating ? 2 : 1) * kReductionSlots * rows_ * warpsPerRow_);
  if (needsShared_)
    workgroup.push_back(MemRefType::get({sharedFloats}, b_.getF32Type(), AffineMap(),
                                        gpu::AddressSpaceAttr::get(&ctx_, gpu::AddressSpace::Workgroup)));
  // Transposes of one element type and size share a buffer (the later one waits at a barrier
  // until the earlier one's reads are done). Inside a loop (of the DSL, or SERIAL's row groups)
  // every transpose waits: the next trip writes the buffer that this trip's last one read.
  std::map<int, size_t> transposeSlot;  // Transpose op id -> workgroup attribution
  std::map<std::pair<Dtype, int64_t>, size_t> bufferOf;
  int64_t sharedBytes = needsShared_ ? sharedFloats * 4 : 0;
  const std::vector<int> depth = loopDepths();
  for (size_t i = 0; i < k_.ops.size(); ++i) {
    if (k_.ops[i].code != OpCode::Transpose) continue;
    if (depth[i] > 0) transposeWaits_.insert(int(i));
    MemRefType t = transposeBufferType(k_.ops[i]);
    auto key = std::make_pair(k_.ops[i].type.elem, t.getNumElements());
    if (auto it = bufferOf.find(key); it != bufferOf.end()) {
      transposeSlot[int(i)] = it->second;
      transposeWaits_.insert(int(i));
      continue;
    }
    bufferOf[key] = transposeSlot[int(i)] = workgroup.size();
    workgroup.push_back(t);
    sharedBytes += t.getNumElements() * kir::dtypeBytes(k_.ops[i].type.elem);
  }
  // Gathered scalar stores: each's ROWS values and offsets.
  if (failed(planGatheredScalars(kernelLoc))) return nullptr;
  std::optional<size_t> gatheredSlot;
  if (!gatheredSlot_.empty()) {
    const int64_t slots = int64_t(gatheredSlot_.size()) * rows_;
    gatheredSlot = workgroup.size();
    for (Type t : {Type(b_.getI32Type()), Type(b_.getI64Type())})
      workgroup.push_back(MemRefType::get({slots}, t, AffineMap(), gpu::AddressSpaceAttr::get(&ctx_, gpu::AddressSpace::Workgroup)));
    sharedBytes += slots * (4 + 8);
  }
  // Row-invariant loads staged in shared memory (INVARIANTS): the whole tensor each.
  if (failed(planInvariantLoads(kernelLoc))) return nullptr;
  std::map<int, size_t> invariantSlot;  // staged load id -> workgroup attribution
  for (const auto& [id, staged] : invariantLoads_) {
    invariantSlot[id] = workgroup.size();
    workgroup.push_back(staged.bufferType);
    sharedBytes += staged.bufferType.getNumElements() * kir::dtypeBytes(k_.params[k_.ops[id].param].dtype);
  }
  // Staged stores share one buffer: each waits for the warp to finish reading the previous one.
  int64_t stagedBytes = 0;
  for (const kir::Op& op : k_.ops) {
    if (std::optional<StagedStore> staged = stagedStore(op)) {
      stagedBytes = std::max(stagedBytes, staged->chunkBytes);
      stagingUnitBytes_ = std::gcd(stagingUnitBytes_, staged->chunkBytes);
    }
  }
  std::optional<size_t> stagingSlot;
  if (stagedBytes > 0) {
    stagingSlot = workgroup.size();
    workgroup.push_back(MemRefType::get({rows_ * threads_ * stagedBytes / stagingUnitBytes_},
                                        b_.getIntegerType(unsigned(8 * stagingUnitBytes_)), AffineMap(),
                                        gpu::AddressSpaceAttr::get(&ctx_, gpu::AddressSpace::Workgroup)));
    sharedBytes += rows_ * threads_ * stagedBytes;
  }
  // Each pipelined loop's plan, once; its asynchronous copies (ASYNC = d) take a ring of d + 1
  // slots (pipeline.cpp).
  int64_t asyncBytes = 0;
  for (size_t i = 0; i < k_.ops.size(); ++i) {
    if (k_.ops[i].code != OpCode::ForBegin || !pipelines(int(i))) continue;
    int64_t half = (pipelinePlans_[int(i)] = planPipeline(int(i))).stagedBytes;
    if (half == 0) continue;
    asyncRegion_[int(i)] = asyncBytes;
    asyncBytes += (asyncDepth() + 1) * half;
  }
  std::optional<size_t> asyncSlot;
  if (asyncBytes > 0) {
    asyncSlot = workgroup.size();
    workgroup.push_back(MemRefType::get({asyncBytes}, b_.getI8Type(), AffineMap(),
                                        gpu::AddressSpaceAttr::get(&ctx_, gpu::AddressSpace::Workgroup)));
    sharedBytes += asyncBytes;
  }
  // The buffers laid out from 16-byte boundaries, as both allocations place them. Past what a
  // program may allocate statically (sm_90: 48 KB), they become views of the shared memory
  // requested at launch.
  const int64_t alignedSharedBytes = dynamicSharedBytes(workgroup);
  const bool dynamicShared = sharedBytes > target_.maxStaticSharedBytes;
  if (dynamicShared) sharedBytes = alignedSharedBytes;
  if (sharedBytes > target_.maxSharedBytes) {
    emitError(kernelLoc) << "kernel '" << k_.name << "' needs " << sharedBytes
                         << " bytes of shared memory (reductions, transpose, store staging and asynchronous copy buffers of " << rows_ * interleave_
                         << " rows per row group), more than the " << target_.maxSharedBytes << " a program may use on "
                         << target_.name << "; lower ROWS or the transposed tile";
    return nullptr;
  }
  auto func = gpu::GPUFuncOp::create(b_, entryName(k_), b_.getFunctionType(argTypes, {}),
                                     dynamicShared ? TypeRange{} : TypeRange(workgroup), TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b_.getUnitAttr());
  // Shared buffers start 16-byte aligned: transposes store 16-byte row vectors into theirs.
  for (unsigned i = 0; i < func.getNumWorkgroupAttributions(); ++i)
    func.setWorkgroupAttributionAttr(i, LLVM::LLVMDialect::getAlignAttrName(), b_.getI64IntegerAttr(16));
  int blockThreads = int(rows_ * threads_);
  func.setKnownBlockSizeAttr(b_.getDenseI32ArrayAttr({blockThreads, 1, 1}));
  if (failed(requestResidentPrograms(func, blockThreads, alignedSharedBytes, knobLocation(Knob::MinProgs)))) return nullptr;

  paramArgs_.assign(k_.params.size(), Value());
  runtimeDimArgs_.assign(k_.runtimeDims.size(), Value());
  Block& entry = func.getBody().front();
  for (size_t i = 0; i < abi.size(); ++i) {
    if (abi[i].param >= 0) paramArgs_[abi[i].param] = entry.getArgument(i);
    else runtimeDimArgs_[abi[i].runtimeDim] = entry.getArgument(i);
  }
  for (size_t k = 0; k < magicDivisors_.size(); ++k) {
    const kir::AbiArg& divisor = abi[magicDivisors_[k]];
    DivisorMagic magic{entry.getArgument(unsigned(abi.size() + 2 * k)), entry.getArgument(unsigned(abi.size() + 2 * k + 1))};
    (divisor.param >= 0 ? paramMagic_[divisor.param] : dimMagic_[divisor.runtimeDim]) = magic;
  }
  for (int d : k_.rowDims) {
    if (d >= 0 && !runtimeDimArgs_[d]) {
      emitError(kernelLoc) << "row extent '" << k_.runtimeDims[d] << "' is not a kernel argument";
      return nullptr;
    }
  }

  b_.setInsertionPointToStart(&entry);
  entryBlock_ = &entry;
  if (overlapsPreviousGrid()) {
    // Programmatic dependent launch (sm_90): the runtime may start this grid while the previous
    // kernel in the stream is still running (a backward pass and the reduction of its partials,
    // one level of a reduction tree and the next), so that its launch and the previous grid's
    // tail overlap. Nothing here touches memory before the previous grid has completed and its
    // writes are visible (wait, a no-op when launched without the overlap); then the next
    // grid may be scheduled, to wait likewise, as soon as every program of this one has started.
    // Every program pays the two instructions: OVERLAP = 1 is for the kernels launched right
    // after the producer of their inputs (kernels_dsl/README.md).
    NVVM::GriddepcontrolOp::create(b_, NVVM::GridDepActionKind::wait);
    NVVM::GriddepcontrolOp::create(b_, NVVM::GridDepActionKind::launch_dependents);
    shape.waitsForPreviousGrid = true;
  }
  emitPrologue();
  SmallVector<Value> buffers;
  if (dynamicShared) {
    buffers = viewDynamicSharedMemory(workgroup);
    shape.dynamicSharedBytes = int(sharedBytes);
  } else {
    buffers.assign(func.getWorkgroupAttributions().begin(), func.getWorkgroupAttributions().end());
  }
  if (needsShared_) sharedBuf_ = buffers.front();
  for (const auto& [op, slot] : transposeSlot) transposeBuffers_[op] = buffers[slot];
  if (stagingSlot) stagingBuffer_ = buffers[*stagingSlot];
  for (const auto& [id, slot] : invariantSlot) invariantLoads_[id].buffer = buffers[slot];
  if (gatheredSlot) {
    gatheredValues_ = buffers[*gatheredSlot];
    gatheredOffsets_ = buffers[*gatheredSlot + 1];
  }
  if (asyncSlot) {
    // cp.async takes a shared-space pointer: the buffer's address, as the i8 pointer it is.
    Value address = memref::ExtractAlignedPointerAsIndexOp::create(b_, buffers[*asyncSlot]);
    Value integer = arith::IndexCastOp::create(b_, b_.getI64Type(), address);
    asyncBuffer_ = LLVM::IntToPtrOp::create(b_, LLVM::LLVMPointerType::get(&ctx_, kSharedAddressSpace), integer);
  }
  values_.assign(k_.ops.size(), RegValue());
  int64_t pointerAlignment = 1;
  for (int i : emissionOrder()) {
    if (prefetched_.count(i)) continue;  // a pipelined loop carries its value
    if (needsPendingReductions(k_.ops[i])) flushReductions();
    readInvariantLoads(k_.ops[i]);
    if (!rowSlot_.empty() && rowSlot_[i] >= 0) {
      // The row index and the stores' range check of this op's row.
      row_ = slotRows_[rowSlot_[i]];
      rowValid_ = slotValid_[rowSlot_[i]];
    }
    if (failed(emitOp(k_.ops[i], i))) return nullptr;
    if (k_.ops[i].code == OpCode::Load) noteEmittedLoad(i);
  }
  flushGatheredScalars();
  for (const kir::Op& op : k_.ops) {
    if ((op.code == OpCode::Load && op.type.isVector()) ||
        (op.code == OpCode::Store && k_.ops[op.value].type.isVector()))
      pointerAlignment = std::max(pointerAlignment, chunkAlignment(op));
    if (std::optional<StagedStore> staged = stagedStore(op)) pointerAlignment = std::max(pointerAlignment, staged->piece);
  }
  b_.setLoc(kernelLoc);
  gpu::ReturnOp::create(b_);

  if (failed(verify(*module))) return nullptr;
  shape.blockThreads = blockThreads;
  shape.rowsPerProgram = int(rows_ * serial_ * interleave_);
  shape.sharedBytes = int(sharedBytes);
  shape.pointerAlignment = int(pointerAlignment);
  shape.strideMultiples = strideMultiples_;
  shape.dimMultiples = dimMultiples_;
  shape.positiveParams = positiveParams_;
  shape.positiveDims = positiveDims_;
  shape.indexBounds = indexBounds_;
  shape.magicDivisors = magicDivisors_;
  return module;
}

}  // namespace detail

using namespace mlir;

std::string entryName(const kir::Kernel& kernel) { return kernel.name; }

OwningOpRef<ModuleOp> generateMLIR(MLIRContext& context, const kir::Kernel& kernel, const TargetInfo& target,
                                   LaunchShape& shape) {
  context.loadDialect<arith::ArithDialect, gpu::GPUDialect, LLVM::LLVMDialect, memref::MemRefDialect,
                      NVVM::NVVMDialect, ROCDL::ROCDLDialect, scf::SCFDialect, vector::VectorDialect>();
  int64_t steps = serialSteps(kernel);
  if (steps < 1) {
    emitError(detail::sourceLocation(&context, kernel, kernel.loc))
        << "kernel '" << kernel.name << "': SERIAL = " << steps << " must be positive";
    return nullptr;
  }
  int64_t interleave = interleavedRowCount(kernel);
  if (interleave < 1) {
    emitError(detail::sourceLocation(&context, kernel, kernel.loc))
        << "kernel '" << kernel.name << "': INTERLEAVE = " << interleave << " must be positive";
    return nullptr;
  }
  // The rewrites only code generation sees: a thread's rows side by side, then the row groups
  // in sequence (the loop's body is then the interleaved body).
  InterleavedRows rows;
  SerialRows serial;
  const kir::Kernel* rewritten = &kernel;
  if (interleave > 1) {
    if (InterleaveRefusal refusal = interleaveRefusal(kernel); !refusal.reason.empty()) {
      emitError(detail::sourceLocation(&context, kernel, refusal.op >= 0 ? kernel.ops[refusal.op].loc : kernel.loc))
          << "kernel '" << kernel.name << "': " << refusal.reason;
      return nullptr;
    }
    rows = interleaveRows(kernel, interleave);
    rewritten = &rows.kernel;
  }
  if (steps > 1) {
    serial = serializeRows(*rewritten, steps);
    if (!rows.slot.empty()) {
      std::vector<int> moved(serial.kernel.ops.size(), -1);  // the loop and its bounds are shared
      for (size_t i = 0; i < rows.slot.size(); ++i) moved[serial.newId[i]] = rows.slot[i];
      rows.slot = std::move(moved);
    }
    rewritten = &serial.kernel;
  }
  detail::KernelEmitter emitter(context, *rewritten, target);
  if (steps > 1) emitter.setSerialRows(serial.loop, steps);
  if (interleave > 1) emitter.setInterleavedRows(std::move(rows.slot), interleave);
  return emitter.run(shape);
}

}  // namespace mxfp6::codegen
