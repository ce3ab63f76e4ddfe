#include "compiler/frontend/kir.h"

namespace mxfp6::kir {

const char* dtypeName(Dtype t) {
  switch (t) {
    case Dtype::BF16:
      return "bf16";
    case Dtype::F16:
      return "f16";
    case Dtype::F32:
      return "f32";
    case Dtype::I32:
      return "i32";
    case Dtype::I64:
      return "i64";
    case Dtype::U8:
      return "u8";
    case Dtype::Bool:
      return "bool";
  }
  return "?";
}

int dtypeBytes(Dtype t) {
  switch (t) {
    case Dtype::BF16:
    case Dtype::F16:
      return 2;
    case Dtype::F32:
    case Dtype::I32:
      return 4;
    case Dtype::I64:
      return 8;
    case Dtype::U8:
    case Dtype::Bool:
      return 1;
  }
  return 0;
}

bool isFloat(Dtype t) { return t == Dtype::BF16 || t == Dtype::F16 || t == Dtype::F32; }

bool isInt(Dtype t) { return t == Dtype::I32 || t == Dtype::I64 || t == Dtype::U8; }

std::string typeName(const ValueType& t) {
  std::string s = dtypeName(t.elem);
  if (t.isVector()) s += "x" + std::to_string(t.length);
  return s;
}

const char* opName(OpCode c) {
  switch (c) {
    case OpCode::ConstFloat:
      return "ConstFloat";
    case OpCode::ConstInt:
      return "ConstInt";
    case OpCode::ScalarArg:
      return "ScalarArg";
    case OpCode::DimArg:
      return "DimArg";
    case OpCode::RowIndex:
      return "RowIndex";
    case OpCode::Load:
      return "Load";
    case OpCode::Store:
      return "Store";
    case OpCode::Cast:
      return "Cast";
    case OpCode::Neg:
      return "Neg";
    case OpCode::Abs:
      return "Abs";
    case OpCode::Sqrt:
      return "Sqrt";
    case OpCode::Rsqrt:
      return "Rsqrt";
    case OpCode::Exp:
      return "Exp";
    case OpCode::Tanh:
      return "Tanh";
    case OpCode::Sigmoid:
      return "Sigmoid";
    case OpCode::Erf:
      return "Erf";
    case OpCode::GeluTanh:
      return "GeluTanh";
    case OpCode::Silu:
      return "Silu";
    case OpCode::Not:
      return "Not";
    case OpCode::Add:
      return "Add";
    case OpCode::Sub:
      return "Sub";
    case OpCode::Mul:
      return "Mul";
    case OpCode::Div:
      return "Div";
    case OpCode::Rem:
      return "Rem";
    case OpCode::Min:
      return "Min";
    case OpCode::Max:
      return "Max";
    case OpCode::CmpEq:
      return "CmpEq";
    case OpCode::CmpNe:
      return "CmpNe";
    case OpCode::CmpLt:
      return "CmpLt";
    case OpCode::CmpLe:
      return "CmpLe";
    case OpCode::CmpGt:
      return "CmpGt";
    case OpCode::CmpGe:
      return "CmpGe";
    case OpCode::And:
      return "And";
    case OpCode::Or:
      return "Or";
    case OpCode::Select:
      return "Select";
    case OpCode::ReduceSum:
      return "ReduceSum";
    case OpCode::ReduceMax:
      return "ReduceMax";
    case OpCode::ReduceMin:
      return "ReduceMin";
    case OpCode::Repeat:
      return "Repeat";
    case OpCode::GroupReduceSum:
      return "GroupReduceSum";
    case OpCode::GroupReduceMax:
      return "GroupReduceMax";
    case OpCode::GroupReduceMin:
      return "GroupReduceMin";
    case OpCode::RotatePairs:
      return "RotatePairs";
    case OpCode::MxScale:
      return "MxScale";
    case OpCode::MxEncode:
      return "MxEncode";
    case OpCode::Pack6:
      return "Pack6";
    case OpCode::Transpose:
      return "Transpose";
    case OpCode::Iota:
      return "Iota";
    case OpCode::Splat:
      return "Splat";
    case OpCode::VarInit:
      return "VarInit";
    case OpCode::VarRead:
      return "VarRead";
    case OpCode::VarWrite:
      return "VarWrite";
    case OpCode::ForBegin:
      return "ForBegin";
    case OpCode::ForEnd:
      return "ForEnd";
  }
  return "?";
}

std::vector<AbiArg> Kernel::abi() const {
  std::vector<AbiArg> args;
  for (int i = 0; i < static_cast<int>(params.size()); ++i) {
    const Param& p = params[i];
    AbiKind kind = AbiKind::Pointer;
    if (p.kind == ParamKind::Scalar) {
      kind = p.dtype == Dtype::I32   ? AbiKind::I32
             : p.dtype == Dtype::I64 ? AbiKind::I64
                                     : AbiKind::F32;
    }
    args.push_back({kind, p.name, i, -1});
  }
  for (int d = 0; d < static_cast<int>(runtimeDims.size()); ++d) {
    if (d < static_cast<int>(runtimeDimUsedByBody.size()) && runtimeDimUsedByBody[d])
      args.push_back({AbiKind::I64, runtimeDims[d], -1, d});
  }
  return args;
}

}  // namespace mxfp6::kir
