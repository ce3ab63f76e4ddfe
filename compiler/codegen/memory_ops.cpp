// Global memory accesses of the row schedule (mlir_gen.cpp's header describes the layout): the
// offsets of a row's slice from its indices and strides, the alignment a chunk may assume, and
// the loads and stores of scalars and of each thread's chunks. Rows past the end load the last
// row (clamped) and store nothing.

#include "compiler/codegen/kernel_emitter.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mxfp6::codegen::detail {

Value KernelEmitter::scalarOffset(const kir::Op& op) {
  Value offset = constI64(0);
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (op.operands[i] < 0 || k_.ops[op.operands[i]].type.isVector()) continue;  // ':' or a gather
    Value idx = toI64(values_[op.operands[i]].scalar);
    Value stride = toI64(values_[op.strides[i]].scalar);
    offset = arith::AddIOp::create(b_, offset, arith::MulIOp::create(b_, idx, stride));
  }
  return offset;
}

int64_t KernelEmitter::strideMultiple(int id, int64_t wanted, bool record) {
  return multipleOf(id, wanted, record ? Parameters::Required : Parameters::Assumed);
}

int64_t KernelEmitter::multipleOf(int id, int64_t wanted, Parameters params) {
  const kir::Op& s = k_.ops[id];
  // A scalar parameter or runtime size: assumed to be `wanted`, and required to be a multiple of
  // every access's `wanted` at once (their lcm: 12 and 16 need 48).
  auto parameter = [&](std::map<int, int64_t>& required, int key) -> int64_t {
    if (params == Parameters::Guaranteed) return 1;
    if (params == Parameters::Required) required[key] = std::lcm(std::max<int64_t>(required[key], 1), wanted);
    return wanted;
  };
  switch (s.code) {
    case OpCode::ConstInt: return s.ival == 0 ? wanted : (s.ival < 0 ? -s.ival : s.ival);
    case OpCode::Cast:  // of an integer; a float converted to an index guarantees nothing
      return kir::isInt(k_.ops[s.operands[0]].type.elem) ? multipleOf(s.operands[0], wanted, params) : 1;
    case OpCode::Mul: {
      // The first factor (the inner size of a row-major stride, N in N * H) is asked only for
      // what the second's constants do not give, the second only for what the first then does
      // not: P * 3072 asks nothing of P, N * H nothing of H.
      int a = s.operands[0], c = s.operands[1];
      int64_t fromA = multipleOf(a, wanted / std::gcd(wanted, multipleOf(c, wanted, Parameters::Guaranteed)), params);
      return fromA * multipleOf(c, wanted / std::gcd(wanted, fromA), params);
    }
    case OpCode::Add: case OpCode::Sub:
      return std::gcd(multipleOf(s.operands[0], wanted, params), multipleOf(s.operands[1], wanted, params));
    case OpCode::Div: {  // by a constant: a multiple of wanted * d divided by d
      auto d = constantValue(s.operands[1]);
      if (!d || *d <= 0) return 1;
      // Nothing is required of a dividend whose quotient would not keep a multiple anyway.
      Parameters probe = params == Parameters::Required ? Parameters::Assumed : params;
      if (multipleOf(s.operands[0], wanted * *d, probe) % *d != 0) return 1;
      return multipleOf(s.operands[0], wanted * *d, params) / *d;
    }
    case OpCode::ScalarArg: return parameter(strideMultiples_, s.param);
    case OpCode::DimArg: return parameter(dimMultiples_, int(s.ival));  // a runtime size in a stride
    default: return 1;  // computed values: no guarantee
  }
}

int64_t KernelEmitter::chunkAlignment(const kir::Op& op) {
  const kir::Param& p = k_.params[op.param];
  if (!isContiguous(op)) return kir::dtypeBytes(p.dtype);
  return accessAlignment(op, accessElements(op) * kir::dtypeBytes(p.dtype));
}

int64_t KernelEmitter::accessAlignment(const kir::Op& op, int64_t chunkBytes) {
  const int64_t bytes = kir::dtypeBytes(k_.params[op.param].dtype);
  int innermost = innermostSlice(op);
  // The largest power of two dividing the access size: 16-byte chunks are 16-byte aligned, the
  // 6 bytes of 8 packed codes only 2-byte aligned.
  int64_t align = std::min<int64_t>(chunkBytes & -chunkBytes, kMaxAccessBytes);
  // A chunk starts at base + Σ index_i*stride_i + a multiple of E. Strides known to be multiples
  // of the access keep the alignment; others lower it; stride parameters and runtime sizes in
  // strides are required to be multiples (recorded in the launch metadata, checked by the
  // runtime before every launch).
  // The innermost slice has stride 1: its start moves the chunk by the start itself. Every other
  // index, start or slice digit moves it by a multiple of its stride.
  for (bool record : {false, true}) {
    for (size_t i = 0; i < op.operands.size(); ++i) {
      if (int(i) == innermost) {
        int64_t startBytes = op.operands[i] < 0 ? chunkBytes : strideMultiple(op.operands[i], align / bytes, record) * bytes;
        while (!record && align > bytes && startBytes % align != 0) align /= 2;
        continue;
      }
      if (op.operands[i] < 0 && op.slices[i] == 0) continue;
      int64_t strideBytes = strideMultiple(op.strides[i], align / bytes, record) * bytes;
      while (!record && align > bytes && strideBytes % align != 0) align /= 2;
    }
  }
  return align;
}

Value KernelEmitter::chunkElementBase(const Layout& l, int64_t c) {
  Value slot = arith::AddIOp::create(b_, lane_, constI64(c * threads_));
  if (l.replicas > 1) return arith::DivUIOp::create(b_, slot, constI64(l.replicas));
  return arith::MulIOp::create(b_, slot, constI64(l.perThread));
}

Value KernelEmitter::elementPointer(int param, Dtype d, Value offset) {
  auto ptrType = LLVM::LLVMPointerType::get(&ctx_, kGlobalAddressSpace);
  return LLVM::GEPOp::create(b_, ptrType, scalarType(&ctx_, d), paramArgs_[param], ValueRange{offset});
}

LogicalResult KernelEmitter::emitLoad(const kir::Op& op, int id) {
  const kir::Param& p = k_.params[op.param];
  Value base = scalarOffset(op);
  RegValue& out = values_[id];
  if (!op.type.isVector()) {
    Value ptr = elementPointer(op.param, p.dtype, base);
    out.scalar = LLVM::LoadOp::create(b_, scalarType(&ctx_, p.dtype), ptr, kir::dtypeBytes(p.dtype));
    return success();
  }
  if (invariantLoads_.count(id)) {
    emitInvariantCopy(op, id);
    return success();
  }
  Layout l = layoutFor(op.type.length);
  if (gatherDim(op) >= 0) return emitGatherLoad(op, id);
  if (!isContiguous(op)) return emitElementwiseAccess(op, id);
  int64_t align = chunkAlignment(op);
  for (int64_t c = 0; c < chunks_; ++c)
    out.chunks.push_back(LLVM::LoadOp::create(b_, chunkType(p.dtype, l.perThread), chunkPointer(op, base, c), align));
  return success();
}

Value KernelEmitter::chunkPointer(const kir::Op& op, Value base, int64_t c) {
  Value off = arith::AddIOp::create(b_, base, sliceOffset(op, chunkElementBase(layoutFor(op.type.length), c)));
  return elementPointer(op.param, k_.params[op.param].dtype, off);
}

LogicalResult KernelEmitter::emitStore(const kir::Op& op, int id) {
  const kir::Param& p = k_.params[op.param];
  const RegValue& v = values_[op.value];
  bool slice = v.isVector();
  if (slice && stagingBuffer_ && stagedStore(op)) return emitStagedStore(op);
  if (gatheredSlot_.count(id)) {
    emitGatheredScalarWrite(op, id);
    return success();
  }
  Value base = scalarOffset(op);
  // Every element is stored once: a scalar by lane 0 of its row, a replicated vector element by
  // the first of the lanes that share it, anything else by the thread that holds it.
  Layout l = slice ? layoutFor(k_.ops[op.value].type.length) : Layout{1, threads_};
  Value cond = rowValid_;
  if (!slice || l.replicas > 1) {
    Value first = arith::CmpIOp::create(b_, arith::CmpIPredicate::eq,
                                        arith::RemUIOp::create(b_, lane_, constI64(l.replicas)), constI64(0));
    cond = arith::AndIOp::create(b_, cond, first);
  }
  // Under PREDICATE = 1 each store carries `cond` (replicated, strided and staged stores still
  // branch); otherwise the stores sit in a branch on it.
  const bool predicated = predicatesStores() && (!slice || isContiguous(op));
  std::optional<OpBuilder::InsertionGuard> guard;
  if (!predicated) {
    auto ifOp = scf::IfOp::create(b_, cond, /*withElseRegion=*/false);
    guard.emplace(b_);
    b_.setInsertionPointToStart(&ifOp.getThenRegion().front());
    if (slice && !isContiguous(op)) return emitElementwiseAccess(op, -1);
  }
  auto store = [&](Value value, Value ptr, int64_t bytes, int64_t align) {
    if (predicated) predicatedStore(cond, value, ptr, bytes, align);
    else LLVM::StoreOp::create(b_, value, ptr, align);
  };
  const int64_t elemBytes = kir::dtypeBytes(p.dtype);
  if (!slice) {
    store(v.scalar, elementPointer(op.param, p.dtype, base), elemBytes, elemBytes);
    return success();
  }
  int64_t align = chunkAlignment(op);
  for (int64_t c = 0; c < chunks_; ++c) {
    Value off = arith::AddIOp::create(b_, base, sliceOffset(op, chunkElementBase(l, c)));
    int64_t bytes = cast<VectorType>(v.chunks[c].getType()).getNumElements() * elemBytes;
    store(v.chunks[c], elementPointer(op.param, p.dtype, off), bytes, align);
  }
  return success();
}

}  // namespace mxfp6::codegen::detail
