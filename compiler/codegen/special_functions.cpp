#include "compiler/codegen/special_functions.h"

#include "compiler/math/special_functions.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mxfp6::codegen {
namespace {

using namespace mlir;

/// One IEEE fp32 op per policy step. No fastmath flags: nothing may contract or reassociate
/// them, or the GPU would no longer compute what the host test measured.
class MlirPolicy {
 public:
  using V = Value;
  using M = Value;
  MlirPolicy(ImplicitLocOpBuilder& b, Type like) : b_(b), like_(like) {
    auto vt = dyn_cast<VectorType>(like);
    intLike_ = vt ? Type(VectorType::get(vt.getShape(), b.getI32Type())) : Type(b.getI32Type());
  }

  V c(float v) { return splat(like_, b_.getF32FloatAttr(v)); }
  V add(V a, V x) { return arith::AddFOp::create(b_, a, x); }
  V sub(V a, V x) { return arith::SubFOp::create(b_, a, x); }
  V mul(V a, V x) { return arith::MulFOp::create(b_, a, x); }
  V div(V a, V x) { return arith::DivFOp::create(b_, a, x); }
  V fma(V a, V x, V y) { return LLVM::FMAOp::create(b_, a, x, y); }
  M lt(V a, V x) { return arith::CmpFOp::create(b_, arith::CmpFPredicate::OLT, a, x); }
  M isnan(V a) { return arith::CmpFOp::create(b_, arith::CmpFPredicate::UNO, a, a); }
  V select(M m, V a, V x) { return arith::SelectOp::create(b_, m, a, x); }
  V abs(V a) { return fromBits(arith::AndIOp::create(b_, bits(a), intConst(0x7fffffff))); }
  V copysign(V magnitude, V sign) {
    Value m = arith::AndIOp::create(b_, bits(magnitude), intConst(0x7fffffff));
    Value s = arith::AndIOp::create(b_, bits(sign), intConst(int32_t(0x80000000u)));
    return fromBits(arith::OrIOp::create(b_, m, s));
  }
  V pow2(V k) {
    Value biased = arith::AddIOp::create(b_, arith::FPToSIOp::create(b_, intLike_, k), intConst(127));
    return fromBits(arith::ShLIOp::create(b_, biased, intConst(23)));
  }

 private:
  Value splat(Type ty, TypedAttr element) {
    if (auto vt = dyn_cast<VectorType>(ty)) return arith::ConstantOp::create(b_, DenseElementsAttr::get(vt, element));
    return arith::ConstantOp::create(b_, element);
  }
  Value intConst(int32_t v) { return splat(intLike_, b_.getI32IntegerAttr(v)); }
  Value bits(Value v) { return arith::BitcastOp::create(b_, intLike_, v); }
  Value fromBits(Value v) { return arith::BitcastOp::create(b_, like_, v); }

  ImplicitLocOpBuilder& b_;
  Type like_, intLike_;
};

}  // namespace

mlir::Value emitSpecialFunction(mlir::ImplicitLocOpBuilder& b, kir::OpCode code, mlir::Value x) {
  MlirPolicy p(b, x.getType());
  switch (code) {
    case kir::OpCode::Tanh: return mxfp6::math::tanh(p, x);
    case kir::OpCode::Sigmoid: return mxfp6::math::sigmoid(p, x);
    case kir::OpCode::Erf: return mxfp6::math::erf(p, x);
    case kir::OpCode::GeluTanh: return mxfp6::math::geluTanh(p, x);
    case kir::OpCode::Silu: return mxfp6::math::silu(p, x);
    default: return {};
  }
}

}  // namespace mxfp6::codegen
