// PREDICATE = 1 (NVIDIA): a row past the end, or a lane that does not own an element, is kept
// from storing by a predicate on each store (`@p st.global`) instead of a branch around it. With
// a branch the row's tail is a separate block: LLVM sinks the loads only the stores use into it
// and ptxas does not move loads across it, so loads that do not depend on the row's reductions
// (a rotary table, a weight) wait until the reductions are done. Predicated, the tail is
// straight-line code the assembler schedules freely. The stores go through inline PTX, in the
// widest pieces (16, 8, 4, 2 or 1 bytes) that the chunk's size and alignment allow.

#include "compiler/codegen/kernel_emitter.h"

#include <string>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mxfp6::codegen::detail {

bool KernelEmitter::predicatesStores() const {
  return knob(Knob::Predicate) == 1;
}

void KernelEmitter::predicatedStore(Value cond, Value value, Value ptr, int64_t bytes, int64_t align) {
  int64_t piece = 16;
  while (piece > 1 && (bytes % piece != 0 || align % piece != 0)) piece /= 2;
  // The value as words: 32-bit words for pieces of 4 bytes or more, else 16- or 8-bit ones.
  int64_t wordBytes = std::min<int64_t>(piece, 4);
  Type word = b_.getIntegerType(unsigned(wordBytes * 8));
  Type elem = getElementTypeOrSelf(value.getType());
  if (!isa<VectorType>(value.getType())) value = vector::BroadcastOp::create(b_, VectorType::get({1}, elem), value);
  Value words = vector::BitCastOp::create(b_, VectorType::get({bytes / wordBytes}, word), value);
  Type i8 = b_.getI8Type();
  auto ptrType = LLVM::LLVMPointerType::get(&ctx_, kGlobalAddressSpace);
  int64_t perPiece = piece / wordBytes;
  std::string asmText, constraints = "b,l";
  if (piece == 16) asmText = "@$0 st.global.v4.b32 [$1], {$2, $3, $4, $5};";
  else if (piece == 8) asmText = "@$0 st.global.v2.b32 [$1], {$2, $3};";
  else if (piece == 4) asmText = "@$0 st.global.b32 [$1], $2;";
  else if (piece == 2) asmText = "@$0 st.global.b16 [$1], $2;";
  else asmText = "@$0 st.global.b8 [$1], $2;";
  for (int64_t i = 0; i < perPiece; ++i) constraints += piece >= 4 ? ",r" : ",h";
  for (int64_t at = 0; at < bytes; at += piece) {
    SmallVector<Value> operands = {cond, LLVM::GEPOp::create(b_, ptrType, i8, ptr, ArrayRef<LLVM::GEPArg>{int32_t(at)})};
    for (int64_t w = 0; w < perPiece; ++w) {
      Value v = vector::ExtractOp::create(b_, words, ArrayRef<int64_t>{at / wordBytes + w});
      if (piece == 1) v = arith::ExtUIOp::create(b_, b_.getI16Type(), v);  // st.b8 takes a 16-bit register
      operands.push_back(v);
    }
    LLVM::InlineAsmOp::create(b_, TypeRange{}, operands, asmText, constraints, /*has_side_effects=*/true,
                              /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                              LLVM::AsmDialectAttr(), ArrayAttr());
  }
}

}  // namespace mxfp6::codegen::detail
