// Row-vector building blocks: repeat, group reductions and pair rotation. Thanks to the
// proportional layouts (mlir_gen.cpp), each is thread-local, or a butterfly among the few
// neighbouring lanes that share a group:
//
//   repeat(v, k):          out element e of a thread = in element e / k of the same thread
//   group_op(v, G), E>=G:  reduce each run of G of the thread's E elements
//   group_op(v, G), E<G:   reduce the thread's E, then xor-shuffle over the G/E lanes of a group
//   rotate_pairs(v, c, s): a = v[even], b = v[odd]; y = interleave(c*a - s*b, s*a + c*b)

#include "compiler/codegen/kernel_emitter.h"

namespace mxfp6::codegen::detail {
namespace {

OpCode scalarReduction(OpCode group) {
  switch (group) {
    case OpCode::GroupReduceMax: return OpCode::ReduceMax;
    case OpCode::GroupReduceMin: return OpCode::ReduceMin;
    default: return OpCode::ReduceSum;
  }
}

}  // namespace

LogicalResult KernelEmitter::checkBuildingBlock(const kir::Op& op) {
  auto operandLayout = [&](int i) { return layoutFor(k_.ops[op.operands[i]].type.length); };
  auto fail = [&](const std::string& what) {
    error(op) << what << " (THREADS=" << threads_ << ", VEC=" << vec_ << ")";
    return failure();
  };
  switch (op.code) {
    case OpCode::GroupReduceSum: case OpCode::GroupReduceMax: case OpCode::GroupReduceMin:
    case OpCode::MxScale: {
      int64_t group = op.code == OpCode::MxScale ? 32 : op.ival;
      Layout in = operandLayout(0);
      if (in.replicas > 1) return fail("a group reduction needs at least one element per thread");
      if (in.perThread % group != 0 && group % in.perThread != 0)
        return fail("groups of " + std::to_string(group) + " do not line up with the " +
                    std::to_string(in.perThread) + " elements each thread holds");
      return success();
    }
    case OpCode::RotatePairs:
      if (operandLayout(0).replicas > 1 || operandLayout(0).perThread % 2 != 0)
        return fail("rotate_pairs needs each thread to hold whole pairs");
      return success();
    case OpCode::MxEncode:
      if (operandLayout(0).replicas > 1) return fail("mx_encode needs at least one element per thread");
      return success();
    case OpCode::Pack6:
      if (operandLayout(0).replicas > 1 || operandLayout(0).perThread % 4 != 0)
        return fail("pack6 needs each thread to hold whole groups of 4 codes");
      return success();
    default:
      return success();
  }
}

Value KernelEmitter::groupReduceChunk(OpCode reduce, Value chunk, int64_t perThread, int64_t group) {
  if (perThread >= group) {
    int64_t groups = perThread / group;
    auto vt = cast<VectorType>(chunk.getType());
    Value result = splat(VectorType::get({groups}, vt.getElementType()),
                         cast<TypedAttr>(b_.getZeroAttr(vt.getElementType())));
    for (int64_t g = 0; g < groups; ++g) {
      Value acc = vector::ExtractOp::create(b_, chunk, ArrayRef<int64_t>{g * group});
      for (int64_t i = 1; i < group; ++i)
        acc = combine(reduce, acc, vector::ExtractOp::create(b_, chunk, ArrayRef<int64_t>{g * group + i}));
      result = vector::InsertOp::create(b_, acc, result, ArrayRef<int64_t>{g});
    }
    return result;
  }
  Value acc = vector::ExtractOp::create(b_, chunk, ArrayRef<int64_t>{0});
  for (int64_t i = 1; i < perThread; ++i)
    acc = combine(reduce, acc, vector::ExtractOp::create(b_, chunk, ArrayRef<int64_t>{i}));
  // The G/E lanes of a group are consecutive and aligned (checkSchedule), so xor offsets below
  // G/E stay inside the group; every lane ends with the same bits.
  for (int64_t off = group / perThread / 2; off >= 1; off /= 2) {
    auto shuffled = gpu::ShuffleOp::create(b_, acc, int32_t(off), int32_t(warp_), gpu::ShuffleMode::XOR);
    acc = combineLanes(reduce, acc, shuffled.getShuffleResult());
  }
  return vector::BroadcastOp::create(b_, VectorType::get({1}, acc.getType()), acc);
}

LogicalResult KernelEmitter::emitGroupReduce(const kir::Op& op, int id) {
  const kir::Op& in = k_.ops[op.operands[0]];
  int64_t perThread = layoutFor(in.type.length).perThread;
  for (Value chunk : values_[op.operands[0]].chunks)
    values_[id].chunks.push_back(groupReduceChunk(scalarReduction(op.code), chunk, perThread, op.ival));
  return success();
}

LogicalResult KernelEmitter::emitRepeat(const kir::Op& op, int id) {
  Layout in = layoutFor(k_.ops[op.operands[0]].type.length);
  Layout out = layoutFor(op.type.length);
  for (Value chunk : values_[op.operands[0]].chunks) {
    if (in.replicas > 1) {  // one shared element becomes the thread's perThread copies
      Value x = vector::ExtractOp::create(b_, chunk, ArrayRef<int64_t>{0});
      values_[id].chunks.push_back(broadcast(x, VectorType::get({out.perThread}, x.getType())));
      continue;
    }
    SmallVector<int64_t> mask;
    for (int64_t e = 0; e < out.perThread; ++e) mask.push_back(e / op.ival);
    values_[id].chunks.push_back(vector::ShuffleOp::create(b_, chunk, chunk, mask));
  }
  return success();
}

LogicalResult KernelEmitter::emitRotatePairs(const kir::Op& op, int id) {
  int64_t pairs = layoutFor(op.type.length).perThread / 2;
  SmallVector<int64_t> evens, odds, interleave;
  for (int64_t i = 0; i < pairs; ++i) {
    evens.push_back(2 * i);
    odds.push_back(2 * i + 1);
    interleave.push_back(i);
    interleave.push_back(pairs + i);
  }
  for (int64_t c = 0; c < chunks_; ++c) {
    Value v = values_[op.operands[0]].chunks[c];
    Value cosv = values_[op.operands[1]].chunks[c];
    Value sinv = values_[op.operands[2]].chunks[c];
    Value a = vector::ShuffleOp::create(b_, v, v, evens);
    Value bb = vector::ShuffleOp::create(b_, v, v, odds);
    // Each product named before the sum that reads it (kernel_emitter.h: creation order).
    Value ca = mulF(cosv, a), sb = mulF(sinv, bb);
    Value first = subF(ca, sb);
    Value sa = mulF(sinv, a), cb = mulF(cosv, bb);
    Value second = addF(sa, cb);
    values_[id].chunks.push_back(vector::ShuffleOp::create(b_, first, second, interleave));
  }
  return success();
}

}  // namespace mxfp6::codegen::detail
