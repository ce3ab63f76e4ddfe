// Tiles: accesses through several slices (or one strided slice) and transpose.
//
// A slice access reads or writes the row-major elements of its slices: element j of the value
// has one digit per slice dim (the last slice fastest) and sits at
//   base + Σ digit_d * stride_d,    base = Σ index_d * stride_d over scalar indices and starts.
// A thread's E elements of a chunk are one vector access when they are contiguous in memory:
// the innermost slice has stride 1 and E divides its length, so the E elements never cross a
// tile row. Otherwise each element is accessed on its own (correct for any stride, slower).
//
// transpose(v, R) moves data between threads through shared memory: every thread writes its
// elements of the [R, W] tile to its program row's buffer, a barrier, then every thread reads the
// elements of the [W, R] transpose it holds. Transposes of one type and size share a buffer,
// with a barrier before the later one writes. The layout (transposeLayout) serves both phases
// from the 32 banks of 4 bytes:
//  - writes: a thread's E row elements are one vector store (16-byte words where the rows are
//    16-byte multiples); rows are padded by 16 bytes, so the lanes of one store phase, which
//    write neighbouring rows, start in different banks; rows longer than 128 bytes get their 16
//    bytes after every 128 instead, so that the lanes of a phase within one row (four 64-byte
//    vectors of a 256-byte row) do not meet again 128 bytes on;
//  - reads: thread t holds E consecutive rows of one column, rows (t % n) * E + e with n = R / E
//    bands, so at each step the lanes of a warp read one row of every band across 32 / n
//    columns. Without more, the bands lie a multiple of 128 bytes apart (E rows of a padded
//    pitch) and those lanes hit the same banks n times over. Each band is therefore shifted by a
//    skew that spaces the bands 128 / n bytes apart modulo 128 (rounded up to the row vectors'
//    alignment, which the shift keeps), so the n bands fall into disjoint banks.
// On NVIDIA, a tile of 16-bit elements whose columns are held by four threads of E = 8k rows
// each (the packers' tiles of HB*32 rows at VEC = HB*8, the prologue's 32 rows at VEC = 8) is
// read with matrix loads instead: ldmatrix.x4.trans reads four 8x8 matrices whose rows the
// lanes address one each, and hands lane t two consecutive rows of column t/4 of each -- rows
// 2(t%4) and 2(t%4)+1 of the matrix. Making matrix i of load m the rows E*b + 8m + 2i + {0, 1}
// of the four bands b gives the thread holding band b of a column its rows in order, eight per
// instruction where an element-wise read takes one (the 8-column groups 16-byte aligned and the
// matrices' rows on distinct banks: matrixReadLayout).

#include "compiler/codegen/kernel_emitter.h"

#include <numeric>
#include <optional>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mxfp6::codegen::detail {

int KernelEmitter::innermostSlice(const kir::Op& op) const {
  for (int d = int(op.slices.size()) - 1; d >= 0; --d)
    if (op.slices[d] > 0) return d;
  return -1;
}

int KernelEmitter::gatherDim(const kir::Op& op) const {
  if (op.code != OpCode::Load) return -1;
  for (size_t d = 0; d < op.operands.size(); ++d)
    if (op.operands[d] >= 0 && op.slices[d] == 0 && k_.ops[op.operands[d]].type.isVector()) return int(d);
  return -1;
}

int64_t KernelEmitter::accessElements(const kir::Op& op) const {
  int64_t length = op.code == OpCode::Store ? k_.ops[op.value].type.length : op.type.length;
  Layout l = layoutFor(length);
  if (l.replicas > 1) return 0;
  int g = gatherDim(op);
  if (g < 0) return l.perThread;
  int64_t rowElements = length / k_.ops[op.operands[g]].type.length;
  return std::min(l.perThread, rowElements);
}

bool KernelEmitter::isContiguous(const kir::Op& op) const {
  int d = innermostSlice(op);
  int64_t n = accessElements(op);
  if (d < 0 || n == 0) return false;
  const kir::Op& stride = k_.ops[op.strides[d]];
  return stride.code == OpCode::ConstInt && stride.ival == 1 && op.slices[d] % n == 0;
}

LogicalResult KernelEmitter::emitGatherLoad(const kir::Op& op, int id) {
  const kir::Param& p = k_.params[op.param];
  int g = gatherDim(op);
  const kir::Op& indexOp = k_.ops[op.operands[g]];
  const RegValue& index = values_[op.operands[g]];
  int64_t rowElements = op.type.length / indexOp.type.length;
  Layout l = layoutFor(op.type.length);
  // Proportional layouts: the thread holding result elements [s*E, s*E+E) holds index elements
  // [s*E/rowElements, ...), or (replicated index) the one element all its results share.
  Layout li = layoutFor(indexOp.type.length);
  Value base = scalarOffset(op);
  Value stride = toI64(values_[op.strides[g]].scalar);
  Type elem = scalarType(&ctx_, p.dtype);
  int64_t perAccess = std::max<int64_t>(1, accessElements(op));
  int64_t perThread = l.replicas > 1 ? 1 : l.perThread;
  bool contiguous = isContiguous(op);
  int64_t align = contiguous ? chunkAlignment(op) : kir::dtypeBytes(p.dtype);
  for (int64_t c = 0; c < chunks_; ++c) {
    Value first = chunkElementBase(l, c);
    Value chunk = splat(chunkType(p.dtype, perThread), cast<TypedAttr>(b_.getZeroAttr(elem)));
    for (int64_t s = 0; s < perThread; s += perAccess) {
      int64_t local = li.replicas > 1 ? 0 : s / rowElements;
      Value idx = toI64(vector::ExtractOp::create(b_, index.chunks[c], ArrayRef<int64_t>{local}));
      Value rowBase = arith::AddIOp::create(b_, base, arith::MulIOp::create(b_, idx, stride));
      Value inRow = arith::RemUIOp::create(b_, arith::AddIOp::create(b_, first, constI64(s)), constI64(rowElements));
      if (contiguous) {
        Value ptr = elementPointer(op.param, p.dtype, arith::AddIOp::create(b_, rowBase, sliceOffset(op, inRow)));
        Value part = LLVM::LoadOp::create(b_, chunkType(p.dtype, perAccess), ptr, align);
        chunk = perAccess == perThread ? part
                                       : Value(vector::InsertStridedSliceOp::create(b_, part, chunk, ArrayRef<int64_t>{s},
                                                                                    ArrayRef<int64_t>{1}));
        continue;
      }
      for (int64_t e = 0; e < perAccess; ++e) {
        Value at = sliceOffset(op, arith::AddIOp::create(b_, inRow, constI64(e)));
        Value x = LLVM::LoadOp::create(b_, elem, elementPointer(op.param, p.dtype, arith::AddIOp::create(b_, rowBase, at)),
                                       kir::dtypeBytes(p.dtype));
        chunk = vector::InsertOp::create(b_, x, chunk, ArrayRef<int64_t>{s + e});
      }
    }
    values_[id].chunks.push_back(chunk);
  }
  return success();
}

Value KernelEmitter::sliceOffset(const kir::Op& op, Value element) {
  Value offset = constI64(0), rest = element;
  int outermost = -1;
  for (size_t d = 0; d < op.slices.size(); ++d)
    if (op.slices[d] > 0 && outermost < 0) outermost = int(d);
  for (int d = int(op.slices.size()) - 1; d >= 0; --d) {
    if (op.slices[d] == 0) continue;
    Value digit = d == outermost ? rest : Value(arith::RemUIOp::create(b_, rest, constI64(op.slices[d])));
    if (d != outermost) rest = arith::DivUIOp::create(b_, rest, constI64(op.slices[d]));
    Value stride = toI64(values_[op.strides[d]].scalar);
    offset = arith::AddIOp::create(b_, offset, arith::MulIOp::create(b_, digit, stride));
  }
  return offset;
}

std::optional<int64_t> KernelEmitter::constantValue(int id) const {
  const kir::Op& v = k_.ops[id];
  auto both = [&](auto f) -> std::optional<int64_t> {
    auto a = constantValue(v.operands[0]), b = constantValue(v.operands[1]);
    if (!a || !b) return std::nullopt;
    return f(*a, *b);
  };
  switch (v.code) {
    case OpCode::ConstInt: return v.ival;
    case OpCode::Cast: return kir::isInt(v.type.elem) ? constantValue(v.operands[0]) : std::nullopt;
    case OpCode::Mul: return both([](int64_t a, int64_t b) { return a * b; });
    case OpCode::Add: return both([](int64_t a, int64_t b) { return a + b; });
    case OpCode::Sub: return both([](int64_t a, int64_t b) { return a - b; });
    case OpCode::Div:
      return both([](int64_t a, int64_t b) -> std::optional<int64_t> {
        if (b == 0) return std::nullopt;
        return a / b;
      });
    default: return std::nullopt;
  }
}

LogicalResult KernelEmitter::emitElementwiseAccess(const kir::Op& op, int id) {
  const kir::Param& p = k_.params[op.param];
  bool isLoad = op.code == OpCode::Load;
  int64_t length = isLoad ? op.type.length : k_.ops[op.value].type.length;
  Layout l = layoutFor(length);
  Value base = scalarOffset(op);
  Type elem = scalarType(&ctx_, p.dtype);
  int64_t bytes = kir::dtypeBytes(p.dtype);
  for (int64_t c = 0; c < chunks_; ++c) {
    Value first = chunkElementBase(l, c);
    Value chunk = isLoad ? splat(chunkType(p.dtype, l.perThread), cast<TypedAttr>(b_.getZeroAttr(elem)))
                         : values_[op.value].chunks[c];
    for (int64_t e = 0; e < l.perThread; ++e) {
      Value j = arith::AddIOp::create(b_, first, constI64(e));
      Value ptr = elementPointer(op.param, p.dtype, arith::AddIOp::create(b_, base, sliceOffset(op, j)));
      if (isLoad) {
        Value x = LLVM::LoadOp::create(b_, elem, ptr, bytes);
        chunk = vector::InsertOp::create(b_, x, chunk, ArrayRef<int64_t>{e});
      } else {
        Value x = vector::ExtractOp::create(b_, chunk, ArrayRef<int64_t>{e});
        LLVM::StoreOp::create(b_, x, ptr, bytes);
      }
    }
    if (isLoad) values_[id].chunks.push_back(chunk);
  }
  return success();
}

bool KernelEmitter::usesMatrixReads(const kir::Op& op) const {
  // A warp must lie within one program row (its lanes address each other's rows) and hold whole
  // 8-column groups: 32 threads of four per column.
  const int64_t rows = op.ival;
  return target_.backend == Backend::NVVM && threads_ % 32 == 0 && warp_ == 32 &&
         matrixReadsFit(rows, op.type.length / rows, kir::dtypeBytes(op.type.elem), layoutFor(op.type.length).perThread);
}

TransposeLayout KernelEmitter::transposeLayout(const kir::Op& op) const {
  const int64_t rows = op.ival, cols = op.type.length / rows, bytes = kir::dtypeBytes(op.type.elem);
  const int64_t perThread = layoutFor(op.type.length).perThread;
  return usesMatrixReads(op) ? matrixReadLayout(rows, cols, bytes, perThread)
                             : codegen::transposeLayout(rows, cols, bytes, perThread);
}

SmallVector<Value> KernelEmitter::matrixReads(const kir::Op& op, Value buffer, const TransposeLayout& t) {
  // One op per statement: the order in which C++ evaluates nested arguments differs between
  // compilers, and the IR must not (scripts/check-host-compilers.sh).
  const int64_t rows = op.ival, perThread = layoutFor(op.type.length).perThread;
  auto add = [&](Value a, Value x) -> Value { return arith::AddIOp::create(b_, a, x); };
  auto mul = [&](Value a, int64_t k) -> Value {
    Value factor = constI64(k);
    return arith::MulIOp::create(b_, a, factor);
  };
  auto div = [&](Value a, int64_t k) -> Value {
    Value divisor = constI64(k);
    return arith::DivUIOp::create(b_, a, divisor);
  };
  auto rem = [&](Value a, int64_t k) -> Value {
    Value divisor = constI64(k);
    return arith::RemUIOp::create(b_, a, divisor);
  };
  // Lane 8i + j addresses row j of matrix i: matrixRow(E, j / 2, load, i, j % 2) of its warp's
  // 8-column group (the group of its own column: a warp holds one).
  Value matrix = div(laneInWarp_, 8);
  Value j = rem(laneInWarp_, 8);
  Value band = div(j, 2);
  Value twice = mul(matrix, 2);
  Value half = rem(j, 2);
  Value rowInBand = add(twice, half);
  // Element offset of (band * E + rowInBand, column 0) within the region; the load's 8 rows on.
  Value row = add(mul(band, perThread), rowInBand);
  Value rowAt = mul(row, t.pitch);
  Value skewAt = mul(band, t.skew);
  Value rowStart = add(rowAt, skewAt);
  Value programAt = mul(rowInBlock_, t.region);
  rowStart = add(rowStart, programAt);
  Value pointer = memref::ExtractAlignedPointerAsIndexOp::create(b_, buffer);
  Value address = arith::IndexCastOp::create(b_, b_.getI64Type(), pointer);
  auto sharedPtr = LLVM::LLVMPointerType::get(&ctx_, kSharedAddressSpace);
  Type i32 = b_.getI32Type();
  Type fourWords = LLVM::LLVMStructType::getLiteral(&ctx_, {i32, i32, i32, i32});
  auto shape = NVVM::LdStMatrixShapeAttr::get(&ctx_, 8, 8);
  const int64_t bytes = kir::dtypeBytes(op.type.elem), words = perThread / 2;
  SmallVector<Value> chunks;
  for (int64_t c = 0; c < chunks_; ++c) {
    Value first = chunkElementBase(layoutFor(op.type.length), c);
    Value group = mul(div(div(first, rows), 8), 8);
    Value groupAt = add(group, mul(div(group, t.segment), t.pad));
    Value chunkStart = add(rowStart, groupAt);
    Value chunk = splat(VectorType::get({words}, i32), cast<TypedAttr>(b_.getZeroAttr(i32)));
    for (int64_t load = 0; load < perThread / 8; ++load) {
      Value loadOffset = constI64(8 * load * t.pitch);
      Value at = add(chunkStart, loadOffset);
      Value byteAddress = add(address, mul(at, bytes));
      Value ptr = LLVM::IntToPtrOp::create(b_, sharedPtr, byteAddress);
      Value four = NVVM::LdMatrixOp::create(b_, fourWords, ptr, 4, NVVM::MMALayout::col, shape, NVVM::LdStMatrixEltType::B16);
      for (int64_t i = 0; i < 4; ++i) {
        Value word = LLVM::ExtractValueOp::create(b_, four, ArrayRef<int64_t>{i});
        chunk = vector::InsertOp::create(b_, word, chunk, ArrayRef<int64_t>{4 * load + i});
      }
    }
    chunks.push_back(vector::BitCastOp::create(b_, chunkType(op.type.elem, perThread), chunk));
  }
  return chunks;
}

MemRefType KernelEmitter::transposeBufferType(const kir::Op& op) {
  return MemRefType::get({rows_ * transposeLayout(op).region}, scalarType(&ctx_, op.type.elem), AffineMap(),
                         gpu::AddressSpaceAttr::get(&ctx_, gpu::AddressSpace::Workgroup));
}

LogicalResult KernelEmitter::emitTranspose(const kir::Op& op, int id) {
  const RegValue& in = values_[op.operands[0]];
  Layout l = layoutFor(op.type.length);
  int64_t rows = op.ival, cols = op.type.length / rows;
  TransposeLayout t = transposeLayout(op);
  Value buffer = transposeBuffers_.at(id);
  Value rowBase = arith::MulIOp::create(b_, rowInBlock_, constI64(t.region));
  auto index = [&](Value v) { return arith::IndexCastOp::create(b_, b_.getIndexType(), v); };
  // Tile element j = (r, w) lives at r*pitch + w + (w / segment)*pad + (r / band)*skew
  // (TransposeLayout::slot).
  auto slot = [&](Value r, Value w) {
    Value at = arith::AddIOp::create(b_, arith::MulIOp::create(b_, r, constI64(t.pitch)), w);
    if (t.pad > 0)
      at = arith::AddIOp::create(b_, at, arith::MulIOp::create(b_, arith::DivUIOp::create(b_, w, constI64(t.segment)), constI64(t.pad)));
    if (t.skew > 0)
      at = arith::AddIOp::create(b_, at, arith::MulIOp::create(b_, arith::DivUIOp::create(b_, r, constI64(t.band)), constI64(t.skew)));
    return arith::AddIOp::create(b_, rowBase, at);
  };
  // An earlier transpose read this buffer: every thread must be done with it.
  if (transposeWaits_.count(id)) gpu::BarrierOp::create(b_);
  for (int64_t c = 0; c < chunks_; ++c) {
    Value first = chunkElementBase(l, c);
    Value r = arith::DivUIOp::create(b_, first, constI64(cols));
    Value w = arith::RemUIOp::create(b_, first, constI64(cols));
    if (cols % l.perThread == 0) {
      vector::StoreOp::create(b_, in.chunks[c], buffer, ValueRange{index(slot(r, w))}, false,
                              llvm::MaybeAlign(t.align));
      continue;
    }
    for (int64_t e = 0; e < l.perThread; ++e) {
      Value j = arith::AddIOp::create(b_, first, constI64(e));
      Value row = arith::DivUIOp::create(b_, j, constI64(cols));
      Value column = arith::RemUIOp::create(b_, j, constI64(cols));
      Value at = slot(row, column);
      Value x = vector::ExtractOp::create(b_, in.chunks[c], ArrayRef<int64_t>{e});
      memref::StoreOp::create(b_, x, buffer, ValueRange{index(at)});
    }
  }
  gpu::BarrierOp::create(b_);
  if (usesMatrixReads(op)) {
    values_[id].chunks = matrixReads(op, buffer, t);
  } else {
    Type elem = scalarType(&ctx_, op.type.elem);
    for (int64_t c = 0; c < chunks_; ++c) {
      Value first = chunkElementBase(l, c);
      Value chunk = splat(chunkType(op.type.elem, l.perThread), cast<TypedAttr>(b_.getZeroAttr(elem)));
      for (int64_t e = 0; e < l.perThread; ++e) {
        // Result element k = (w, r) of the [cols, rows] transpose is tile element (r, w).
        Value k = arith::AddIOp::create(b_, first, constI64(e));
        Value row = arith::RemUIOp::create(b_, k, constI64(rows));
        Value column = arith::DivUIOp::create(b_, k, constI64(rows));
        Value at = slot(row, column);
        Value x = memref::LoadOp::create(b_, buffer, ValueRange{index(at)});
        chunk = vector::InsertOp::create(b_, x, chunk, ArrayRef<int64_t>{e});
      }
      values_[id].chunks.push_back(chunk);
    }
  }
  // Inside a loop the next trip rewrites the buffer: everyone must have read it first.
  if (!openLoops_.empty()) gpu::BarrierOp::create(b_);
  return success();
}

}  // namespace mxfp6::codegen::detail
