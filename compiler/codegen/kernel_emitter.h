// The row-schedule emitter behind generateMLIR (mlir_gen.cpp has the schedule's description).
// Private to compiler/codegen: mlir_gen.cpp holds the core (prologue, loads, stores,
// elementwise math, reductions); row_ops.cpp the row-vector building blocks (repeat, group
// reductions, pair rotation); mx_ops.cpp the MXFP6 scale, encode and 6-bit packing.
//
// Ops are inserted in the order they are created, and C++ leaves the order in which a call's
// arguments are evaluated unspecified (g++ goes right to left, clang left to right). So no call
// here takes two arguments that each create a non-constant op: name them first, in the order
// they should appear. Otherwise the code objects depend on the compiler that built mxfp6c
// (same semantics, different instruction order and registers: different bytes under one key).
// scripts/check-host-compilers.sh (run by CI) builds mxfp6c with g++ as well and compares the
// LLVM IR both builds emit for every configuration of build/gpu_kernels and every default.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "compiler/codegen/mlir_gen.h"
#include "compiler/codegen/transpose_layout.h"
#include "compiler/frontend/knobs.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mxfp6::codegen::detail {

using namespace mlir;
using kir::Dtype;
using kir::OpCode;
using frontend::Knob;

constexpr unsigned kGlobalAddressSpace = 1;
constexpr unsigned kSharedAddressSpace = 3;
constexpr int64_t kMaxAccessBytes = 16;

Type scalarType(MLIRContext* ctx, Dtype d);
/// The value ids an op reads (reductions.cpp).
std::vector<int> inputsOf(const kir::Op& op);

/// How a row vector of some length is spread over the threads of its row (see above).
struct Layout {
  int64_t perThread = 1;  // E >= 1: elements per thread and chunk
  int64_t replicas = 1;   // E < 1: lanes that share one element (perThread is then 1)
};

/// A KIR value in registers: one MLIR value for a scalar, one vector per chunk for a row vector.
struct RegValue {
  Value scalar;
  SmallVector<Value> chunks;
  bool isVector() const { return !chunks.empty(); }
};

/// The MLIR location of a DSL position in `kernel`; a position without a file is in the kernel's.
/// A position in a fn's body is a call site: the position (callee) and the call that put it
/// there (caller), named by the fn, so an error reports both.
inline Location sourceLocation(MLIRContext* ctx, const kir::Kernel& kernel, const kir::SourceLoc& l) {
  Location here = FileLineColLoc::get(ctx, l.file.empty() ? kernel.loc.file : l.file, l.line, l.col);
  if (!l.inCall) return here;
  Location call = NameLoc::get(StringAttr::get(ctx, l.inCall->fn),
                               sourceLocation(ctx, kernel, l.inCall->loc));
  return CallSiteLoc::get(here, call);
}

class KernelEmitter {
 public:
  KernelEmitter(MLIRContext& ctx, const kir::Kernel& kernel, const TargetInfo& target)
      : ctx_(ctx), k_(kernel), target_(target), b_(UnknownLoc::get(&ctx), &ctx) {}

  OwningOpRef<ModuleOp> run(LaunchShape& shape);
  /// The kernel is serializeRows' rewrite: `loop` walks the program's `steps` row groups.
  void setSerialRows(int loop, int64_t steps) {
    serialLoop_ = loop;
    serial_ = steps;
  }
  /// The kernel is interleaveRows' rewrite: op i computes row slot `slots[i]` of `count` (-1: all).
  void setInterleavedRows(std::vector<int> slots, int64_t count) {
    rowSlot_ = std::move(slots);
    interleave_ = count;
  }

 private:
  Location loc(const kir::SourceLoc& l) { return sourceLocation(&ctx_, k_, l); }
  InFlightDiagnostic error(const kir::Op& op) { return emitError(loc(op.loc)); }

  LogicalResult checkSchedule();
  /// The layout of a vector of `length` elements; checkSchedule() proved it exists.
  Layout layoutFor(int64_t length) const {
    int64_t slots = chunks_ * threads_;
    if (length % slots == 0) return {length / slots, 1};
    return {1, slots / length};
  }
  Type chunkType(Dtype d, int64_t elements) { return VectorType::get({elements}, scalarType(&ctx_, d)); }
  /// Index of the first element this thread holds in chunk c.
  Value chunkElementBase(const Layout& l, int64_t c);
  /// The same shape as `like` (scalar or vector) with element type `elem`.
  Type sameShape(Value like, Type elem) {
    if (auto vt = dyn_cast<VectorType>(like.getType())) return VectorType::get(vt.getShape(), elem);
    return elem;
  }

  Value constI64(int64_t v) { return arith::ConstantIntOp::create(b_, v, 64); }
  Value toI64(Value v);
  /// A constant of type `ty` (scalar or vector) with every element `element`.
  Value splat(Type ty, TypedAttr element) {
    if (auto vt = dyn_cast<VectorType>(ty)) return arith::ConstantOp::create(b_, DenseElementsAttr::get(vt, element));
    return arith::ConstantOp::create(b_, element);
  }
  Value broadcast(Value scalar, Type vectorType) { return vector::BroadcastOp::create(b_, vectorType, scalar); }

  /// A schedule knob's value in this configuration (the knob table's default where the kernel
  /// does not declare it).
  int64_t knob(Knob k) const { return frontend::knobValue(k_, k); }
  /// Where an error caused by a knob's value points: its `tune` entry.
  Location knobLocation(Knob k) { return loc(frontend::knobLoc(k_, k)); }
  /// OVERLAP = 1 on NVIDIA: the kernel waits for the previous grid at its entry (programmatic
  /// dependent launch); no effect on AMD.
  bool overlapsPreviousGrid() const;
  void emitPrologue();
  /// Views of the shared memory passed at launch, one per buffer type, 16-byte aligned in order;
  /// and the bytes they span.
  SmallVector<Value> viewDynamicSharedMemory(ArrayRef<Type> buffers);
  static int64_t dynamicSharedBytes(ArrayRef<Type> buffers);
  /// The row of slot `slot` (INTERLEAVE) of row group `trip` (SERIAL; null: the program's only
  /// group), clamped to the last row; `valid` (if given) says whether it is in range.
  Value groupRow(Value trip, int64_t slot, Value* valid);
  /// Binds every slot's row and range check (slotRows_, slotValid_; slot 0's to row_ and
  /// rowValid_) for row group `trip` (as groupRow).
  void bindRows(Value trip);
  /// `row`, or the last row past the end; `valid` (if given) says which.
  Value clampRow(Value row, Value* valid);
  /// The order ops are emitted in: KIR order with loads hoisted and independent reductions
  /// batched (see mlir_gen.cpp, reductions.cpp); KIR order under PREFETCH = 0.
  std::vector<int> emissionOrder() const;
  LogicalResult emitOp(const kir::Op& op, int id);
  LogicalResult emitLoad(const kir::Op& op, int id);
  LogicalResult emitStore(const kir::Op& op, int id);
  // reductions.cpp
  /// Moves each reduction across warps whose operand does not need an earlier one up next to
  /// it (at most kMaxBatchedReductions together), so they share one barrier.
  std::vector<int> batchReductions(std::vector<int> order) const;
  /// Whether `op` is a reduction of a row vector whose lanes span several warps.
  bool reducesAcrossWarps(const kir::Op& op) const;
  /// Whether the body of the loop opened by ForBegin `forId` has such a reduction.
  bool reducesAcrossWarpsIn(int forId) const;
  LogicalResult emitReduce(const kir::Op& op, int id);
  // anchored_loads.cpp
  /// ANCHOR = 1: the loads emitted before a reduction become inputs of its partial.
  bool anchorsLoads() const;
  /// Records load `id`, just emitted in the row body (not one a pipelined loop carries, which
  /// run() never emits there), for the next reduction to anchor.
  void noteEmittedLoad(int id);
  /// `partial` (an f32 in-thread partial) made to depend on every recorded load of the current
  /// loop body, its bits unchanged.
  Value anchorLoads(Value partial);
  /// Whether `op` must see the pending reductions' results (it uses one, or opens or closes a
  /// loop, where the barrier could not stay uniform).
  bool needsPendingReductions(const kir::Op& op) const;
  /// The barrier and the cross-warp reads of the pending reductions.
  void flushReductions();
  LogicalResult emitElementwise(const kir::Op& op, int id);
  // row_ops.cpp
  /// Whether the schedule can run `op` where it needs lanes to line up (located error if not).
  LogicalResult checkBuildingBlock(const kir::Op& op);
  LogicalResult emitRepeat(const kir::Op& op, int id);
  LogicalResult emitGroupReduce(const kir::Op& op, int id);
  LogicalResult emitRotatePairs(const kir::Op& op, int id);
  /// Reduces each run of `group` elements of a chunk's vector (`perThread` elements, or one
  /// replicated element) with `reduce`, shuffling across the `group / perThread` lanes that
  /// share a run when it spans threads. Result: perThread/group elements, or one.
  Value groupReduceChunk(OpCode reduce, Value chunk, int64_t perThread, int64_t group);
  // control.cpp
  LogicalResult emitVarInit(const kir::Op& op, int id);
  LogicalResult emitVarRead(const kir::Op& op, int id);
  LogicalResult emitVarWrite(const kir::Op& op);
  LogicalResult emitForBegin(const kir::Op& op, int id);
  LogicalResult emitForEnd(const kir::Op& op);
  // pipeline.cpp
  /// A loop whose loads are issued one trip ahead (PREFETCH = 2).
  struct PipelinePlan {
    int forId = -1;
    std::vector<int> loads;  // the body's loads whose addresses can be computed for any trip
    // The body's loads that read the same elements on every trip (a sample's parameters at a
    // fixed index): issued once before the loop instead of once per trip.
    std::vector<int> invariant;
    std::vector<int> slice;  // the scalar body ops those addresses need, in KIR order
    // ASYNC: the loads of `loads` copied to shared memory (asynchronous copies) instead of
    // carried in registers, with the byte offset of each in one slot of the loop's ring.
    std::map<int, int64_t> staged;
    std::vector<int> carried;  // the loads of `loads` not staged: carried in registers a trip ahead
    int64_t stagedBytes = 0;   // one slot (one trip) of the loop's ring
    Value end;                // the loop's bound: the guard of the loads of later trips
    SmallVector<Value> next;  // the next trip's register-carried loads, issued at the start of this trip
    // ASYNC: this trip's slot of the ring (carried by the loop: no division by a runtime step),
    // and the next trip's.
    Value slot, nextSlot;
  };
  bool pipelinesLoops() const;
  /// Whether the loop opened by ForBegin `forId` issues its loads a trip ahead.
  bool pipelines(int forId) const { return pipelinesLoops() || forId == serialLoop_; }
  PipelinePlan planPipeline(int forId);
  /// ASYNC = d (NVIDIA): the streamed loads of pipelined loops are copied to shared memory
  /// asynchronously, d trips ahead; 0 without.
  int64_t asyncDepth() const;
  // predicated_stores.cpp
  /// PREDICATE = 1: stores carry a predicate instead of sitting in a branch.
  bool predicatesStores() const;
  /// Stores `bytes` bytes of `value` (a scalar or a vector) at `ptr` where `cond` holds.
  void predicatedStore(Value cond, Value value, Value ptr, int64_t bytes, int64_t align);
  /// Whether the scalar `id` takes a new value each trip of the loop `forId` (pipeline.cpp).
  bool advancesWithTrip(int id, int forId) const;
  /// Whether `load` can be copied asynchronously: every chunk one aligned 4-, 8- or 16-byte
  /// access of distinct elements.
  bool copiesAsynchronously(const kir::Op& load);
  /// The types of `loads` as registers hold them, flattened: a scalar, or a vector's chunks.
  SmallVector<Type> loadTypes(ArrayRef<int> loads);
  /// Recomputes the plan's slice with `trip` as the induction value (the caller rebinds the real
  /// one after).
  void bindTrip(const PipelinePlan& plan, Value trip);
  /// `loads` (of the plan's loop) at trip `trip`, or zeros when trip >= end; flattened as
  /// loadTypes.
  SmallVector<Value> emitLoadsAtTrip(const PipelinePlan& plan, ArrayRef<int> loads, Value trip);
  /// The plan's register-carried loads at trip `trip` (emitLoadsAtTrip).
  SmallVector<Value> emitPrefetch(const PipelinePlan& plan, Value trip);
  /// Makes `loads` read `values` (emitLoadsAtTrip's layout).
  void bindLoads(ArrayRef<int> loads, ValueRange values);
  /// The asynchronous copies of the plan's staged loads (it has some) at trip `trip` (none when
  /// trip >= end) into ring slot `slot`, then one commit group.
  void emitCopies(const PipelinePlan& plan, Value trip, Value slot);
  /// Makes the plan's loads read `carried` (emitPrefetch's layout), and the staged ones read
  /// ring slot `plan.slot` once this trip's copies have landed.
  void bindPrefetched(const PipelinePlan& plan, ValueRange carried);
  /// This thread's place for chunk `c` of staged load `id` in ring slot `slot`.
  Value stagedChunkPointer(const PipelinePlan& plan, int id, int64_t c, Value slot);
  // mx_ops.cpp
  LogicalResult emitMxScale(const kir::Op& op, int id);
  /// The largest |bf16| bit pattern of each 32-element block of a chunk (i32 lanes, as
  /// groupReduceChunk returns them); NaN and Inf sort above every finite magnitude.
  Value blockAmax(Value chunk, int64_t perThread);
  LogicalResult emitMxEncode(const kir::Op& op, int id);
  /// Per-block values (one lane per 32-element block of a thread's chunk) repeated to `lanes`
  /// lanes, lanesPerBlock each.
  Value spreadToBlocks(Value perBlock, const Layout& scales, int64_t lanes, int64_t lanesPerBlock);
  /// Chunk `c` of an MxEncode's operands: the elements, how many, and the block scale bytes
  /// widened to i32 (one lane per block, or a scalar).
  struct EncodeInputs {
    Value chunk;
    int64_t perThread;
    Value scale;
  };
  EncodeInputs encodeInputs(const kir::Op& encode, int64_t c);
  /// Whether op `scaleId` is mx_scale(op `valueId`, _, RCEIL): every element of a finite block
  /// then scales to at most the format's MAX, with no saturation to do (header of mx_ops.cpp).
  bool isRceilScaleOf(int scaleId, int valueId) const;
  /// SCALARS = 1 (gathered_scalars.cpp): whether `op` is a scalar store the program gathers,
  /// the check that each can be (outside loops, 4 bytes) with its slots, the write of a row's
  /// scalar and offset to shared memory, and the stores after the body.
  bool gathersScalarStore(const kir::Op& op) const;
  /// Per op: how many loops (the DSL's and SERIAL's row groups) enclose it; a ForBegin counts its
  /// own loop, its ForEnd does not.
  std::vector<int> loopDepths() const;
  // shared_invariants.cpp
  /// INVARIANTS = 1: whether `op` is a load that reads the same elements for every row (every
  /// index ':'), which the program stages once in shared memory.
  bool stagesInvariantLoad(const kir::Op& op) const;
  /// The check that each such load can be staged (outside loops, one dimension) and its buffer's
  /// type and copy pieces: invariantLoads_.
  LogicalResult planInvariantLoads(Location loc);
  /// Where the load was: this thread's pieces of the tensor copied to the load's buffer.
  void emitInvariantCopy(const kir::Op& op, int id);
  /// Before `op`: if it reads a staged load not yet read back, or opens or closes a loop, one
  /// barrier, then every such load's chunks read from its buffer.
  void readInvariantLoads(const kir::Op& op);
  LogicalResult planGatheredScalars(Location loc);
  void emitGatheredScalarWrite(const kir::Op& op, int id);
  void flushGatheredScalars();
  /// sm_90: the element codes through the FP8 conversions (header of mx_ops.cpp).
  LogicalResult emitMxEncodeFp8(const kir::Op& op, int id);
  LogicalResult emitPack6(const kir::Op& op, int id);
  /// Whether the MxEncode `encodeId` feeds only Pack6s that gfx950 runs natively.
  bool usesNativeMxPack(int encodeId) const;
  /// gfx950: the packed bytes of chunk c of pack6(encode) in one instruction per block.
  Value nativeMxPack(const kir::Op& encode, int64_t c);
  /// Four 6-bit codes per 3 bytes, LSB first (integer path).
  Value packCodes(Value codes);

  /// Element offset Σ index_i * stride_i over the scalar indices and slice starts.
  Value scalarOffset(const kir::Op& op);
  // tile_ops.cpp
  /// The last dim of `op` that is a slice, or -1.
  int innermostSlice(const kir::Op& op) const;
  /// The dim of a gather's vector index, or -1.
  int gatherDim(const kir::Op& op) const;
  /// Elements of one memory access of a slice access: a thread's chunk, or for a gather the
  /// part of it within one gathered row. 0 for a replicated layout.
  int64_t accessElements(const kir::Op& op) const;
  /// Whether each access's elements are contiguous in memory (one vector access).
  bool isContiguous(const kir::Op& op) const;
  /// A gather: one access per gathered row segment of each chunk.
  LogicalResult emitGatherLoad(const kir::Op& op, int id);
  /// Offset of slice element `element` (row-major over the slices) from the access's base.
  Value sliceOffset(const kir::Op& op, Value element);
  /// The value of `id` when it is integer arithmetic over constants.
  std::optional<int64_t> constantValue(int id) const;
  /// A slice access whose chunks are not contiguous: one access per element.
  LogicalResult emitElementwiseAccess(const kir::Op& op, int id);
  /// Where a transpose keeps its tile in its shared buffer (transpose_layout.h).
  TransposeLayout transposeLayout(const kir::Op& op) const;
  /// Whether a transpose reads its columns with matrix loads (NVIDIA ldmatrix; tile_ops.cpp).
  bool usesMatrixReads(const kir::Op& op) const;
  /// The chunks of a transpose read with matrix loads.
  SmallVector<Value> matrixReads(const kir::Op& op, Value buffer, const TransposeLayout& t);
  MemRefType transposeBufferType(const kir::Op& op);
  LogicalResult emitTranspose(const kir::Op& op, int id);
  /// Extent of row variable v: a runtime size argument or a constant.
  Value rowExtent(size_t v);
  // index_math.cpp
  /// What an integer scalar is known to fit, loosest first (the launch limits make row indices
  /// and runtime sizes NonNegI32).
  enum class IntRange { Any, I32, NonNegI32 };
  IntRange intRange(int id) const;
  /// The factors of `id` where it is a product of sizes and positive constants (a loop bound
  /// such as T * H); nullopt otherwise.
  std::optional<std::vector<kir::Dim>> boundFactors(int id) const;
  /// Factors whose product the non-negative integer `id` (each element of a vector) is below,
  /// where it is a row index, an iota, a constant, or one of those times a constant plus a
  /// smaller one (`tb * 32 + iota(32)` is below 32 * TB); nullopt otherwise.
  std::optional<std::vector<kir::Dim>> exclusiveBound(int id) const;
  /// What the launch is asked to guarantee so that more indices fit 31 bits (index_math.cpp):
  /// positiveParams_, positiveDims_ and indexBounds_; and the runtime divisors whose multipliers
  /// it passes (magicDivisors_). Before any emission.
  void planIndexRanges();
  /// The unsigned 32-bit divisions by scalar parameters and runtime sizes: magicDivisors_.
  void planDivisorMagic();
  /// Whether a division or remainder of operands in these ranges is exact in 32 bits.
  static bool narrowDivision(IntRange a, IntRange b);
  Value toI32(Value v);
  /// The integer Div or Rem `op` of a and b in 32 bits, as op's type; null where narrowDivision
  /// does not hold for its operands. a and b are scalars, or one chunk each of a vector op.
  Value narrowDivide(const kir::Op& op, Value a, Value b);
  /// Row variable `var` of the (clamped) flat row index `row`: in 32-bit arithmetic where it
  /// divides by a runtime extent, in 64 bits by constants.
  Value rowDigit(Value row, int var);
  /// A runtime divisor's multiplier and shift, kernel arguments the runtime derives from it at
  /// every launch (index_math.cpp).
  struct DivisorMagic {
    Value multiplier, shift;
  };
  /// The multiplier and shift of the divisor `id` (through integer casts), if it has them.
  const DivisorMagic* divisorMagic(int id) const;
  /// n / d, or n % d, for i32 values with 0 <= n < 2^31 and 1 <= d < 2^31, by d's multiplier.
  Value magicDivide(Value n, Value d, const DivisorMagic& magic, bool remainder);
  /// Alignment in bytes of every chunk access of `op` (slice accesses only).
  int64_t chunkAlignment(const kir::Op& op);
  /// The same for accesses of `accessBytes` at multiples of it along `op`'s contiguous slice
  /// (a staged store's runs of several chunks).
  int64_t accessAlignment(const kir::Op& op, int64_t accessBytes);
  /// Elements the integer value `id` (a stride, or a slice start) is a multiple of; a scalar
  /// parameter or runtime size in it is assumed (and with `record`, required) to be a multiple
  /// of `wanted`.
  int64_t strideMultiple(int id, int64_t wanted, bool record);
  /// What strideMultiple asks of the scalar parameters and runtime sizes in a value: nothing
  /// (Guaranteed: what the constants alone give), to be `wanted` multiples, or that and recorded.
  enum class Parameters { Guaranteed, Assumed, Required };
  int64_t multipleOf(int id, int64_t wanted, Parameters params);
  Value elementPointer(int param, Dtype d, Value offset);
  /// The global address of chunk `c` of a contiguous slice access at `base` (scalarOffset).
  Value chunkPointer(const kir::Op& op, Value base, int64_t c);
  // staged_stores.cpp
  /// How a byte-vector store goes through the warp's staging buffer (chunks of a size that is
  /// not a power of two: 24 bytes of packed codes), if it does.
  struct StagedStore {
    int64_t chunkBytes;  // per lane
    int64_t runLanes;    // consecutive lanes whose chunks are adjacent in memory
    int64_t piece;       // bytes per global store: divides a run, every run start aligned to it
  };
  std::optional<StagedStore> stagedStore(const kir::Op& op);
  LogicalResult emitStagedStore(const kir::Op& op);
  /// Orders the shared-memory accesses of a warp (NVIDIA) or wavefront (AMD).
  void warpSync();

  /// For an f32 division by a constant that can be a multiplication instead: the reciprocal.
  std::optional<float> reciprocalOfDivisor(const kir::Op& op, int id) const;
  Value applyScalar(OpCode code, Dtype operandType, ArrayRef<Value> xs, Dtype resultType);
  Value castValue(Value v, Dtype from, Dtype to);
  /// bf16 vector (even length) to f32 through its 32-bit words: the low element shifted up, the
  /// high one masked in place -- one instruction each, where extending element by element takes
  /// the high one out of its word first (NVIDIA; castValue).
  Value widenBf16Pairs(Value v);
  Value sqrtValue(Value v);
  Value rsqrtValue(Value v);
  Value expValue(Value v);
  /// `intrinsic` (f32 -> f32) on every element of v.
  Value perElementIntrinsic(Value v, const char* intrinsic);
  /// MINPROGS: room for that many resident programs per SM (CU), each of `sharedBytes` of shared
  /// memory, asked of the register allocator.
  LogicalResult requestResidentPrograms(gpu::GPUFuncOp func, int blockThreads, int64_t sharedBytes, Location loc);
  /// The DSL's float arithmetic: a product feeding a sum may fuse into one FMA (one rounding
  /// instead of two, never less accurate). The MX encoders build their exact scalings without it.
  Value addF(Value a, Value c);
  Value subF(Value a, Value c);
  Value mulF(Value a, Value c);
  Value combine(OpCode reduce, Value a, Value c);
  /// One butterfly step of a reduction across lanes: a lane's partial and its partner's. Every
  /// lane must end with the same bits, so a sum is never fused with a product.
  Value combineLanes(OpCode reduce, Value a, Value c);
  Value identityFor(OpCode reduce);

  MLIRContext& ctx_;
  const kir::Kernel& k_;
  const TargetInfo& target_;
  ImplicitLocOpBuilder b_;

  int64_t rows_ = 1, threads_ = 1, vec_ = 1, warp_ = 32, warpsPerRow_ = 1, chunks_ = 1;
  int serialLoop_ = -1;  // ForBegin over the row groups (serial_rows.h), or -1
  int64_t serial_ = 1;   // row groups per program
  int64_t interleave_ = 1;     // rows per thread, side by side (interleaved_rows.h)
  std::vector<int> rowSlot_;   // per op: its row slot under INTERLEAVE, or -1; empty without
  SmallVector<Value> slotRows_, slotValid_;  // each slot's clamped row and its range check
  bool needsShared_ = false;
  // Reductions across warps write their per-warp partials to a ring of slots in shared memory,
  // then wait at one barrier per batch; a batch of up to kMaxBatchedReductions, a ring twice as
  // long, so that no reduction overwrites a slot another thread may still be reading.
  static constexpr int kMaxBatchedReductions = 2;
  static constexpr int kReductionSlots = 2 * kMaxBatchedReductions;
  struct PendingReduction {
    int id;
    OpCode code;
    Value slots;  // index of the first warp's partial
  };
  SmallVector<PendingReduction> pendingReductions_;
  int reductionSlot_ = 0;
  SmallVector<Value> reductionHalves_;  // per open loop: its trip parity (i64 0/1), or null

  std::vector<Value> paramArgs_;       // gpu.func argument of each KIR param (null if none)
  std::vector<Value> runtimeDimArgs_;  // gpu.func argument of each runtime dim (null if unused)
  Value sharedBuf_;
  // SCALARS = 1 (gathered_scalars.cpp): per gathered scalar store, its first slot in the buffers
  // of values (i32 bits) and element offsets (i64) in shared memory, ROWS slots each.
  std::map<int, int64_t> gatheredSlot_;
  Value gatheredValues_, gatheredOffsets_;
  Value stagingBuffer_;  // the largest staged chunk per thread; null if no store is staged
  int64_t stagingUnitBytes_ = 4;  // its element: 4 bytes, or 2 or 1 for chunks of odd words
  std::map<int, Value> transposeBuffers_;  // Transpose op id -> its shared buffer
  std::set<int> transposeWaits_;           // transposes whose buffer an earlier one used
  Value threadId_, lane_, warpInRow_, laneInWarp_, rowInBlock_, row_, rowValid_;
  Value firstRow_, numRows_;  // this thread's row in the program's first group (unclamped); all rows
  std::vector<RegValue> values_;
  std::map<int, int64_t> strideMultiples_;   // stride parameter -> required multiple (elements)
  std::map<int, int64_t> dimMultiples_;      // runtime dim -> required multiple
  std::set<int> positiveParams_;             // integer scalar parameters required to be >= 1 (divisors)
  std::set<int> positiveDims_;               // runtime dims required to be >= 1 (divisors)
  std::vector<std::vector<kir::Dim>> indexBounds_;  // products of sizes required to be <= 2^31 - 1
  std::set<int> boundedDividends_;           // dividends whose exclusiveBound the launch holds to 2^31 - 1
  std::vector<int> magicDivisors_;           // ABI indices of the divisors given multipliers, in order
  std::map<int, DivisorMagic> paramMagic_;   // scalar parameter -> its multiplier and shift
  std::map<int, DivisorMagic> dimMagic_;     // runtime dim -> its multiplier and shift
  Block* entryBlock_ = nullptr;              // allocas go here, so LLVM promotes them to registers
  std::map<int, SmallVector<Value>> varSlots_;  // VarInit id -> one alloca per chunk (or scalar)
  SmallVector<Operation*> openLoops_;        // scf.for ops whose ForEnd is still ahead
  std::map<int, PipelinePlan> pipelinePlans_;  // ForBegin id -> its plan (run(), before emission)
  std::map<int, PipelinePlan> pipelined_;    // ForBegin id -> its plan, while the loop is open
  Value asyncBuffer_;                        // i8 shared buffer of the asynchronous copies (ASYNC)
  std::map<int, int64_t> asyncRegion_;       // ForBegin id -> byte offset of its two halves
  std::set<int> prefetched_;                 // loads whose values the pipelined loops carry
  struct UnanchoredLoad {
    int id;
    Operation* loop;  // the scf.for whose body it is in; null: the row body
  };
  std::vector<UnanchoredLoad> unanchoredLoads_;  // ANCHOR: loads no reduction has anchored yet
  struct InvariantLoad {
    MemRefType bufferType;  // the whole tensor, in shared memory
    int64_t pieceElements;  // per thread and copy round
    Value buffer;
    bool copied = false, read = false;
  };
  std::map<int, InvariantLoad> invariantLoads_;  // INVARIANTS: staged load id -> its buffer
};


}  // namespace mxfp6::codegen::detail
