// Names and classes of KIR dtypes and opcodes used in the interpreter's messages.
// Local until the frontend's kir.cpp (dtypeName, opName, isFloat, isInt) is linked everywhere.
#pragma once

#include "compiler/frontend/kir.h"

namespace mxfp6::interp::detail {

inline const char* dtypeName(kir::Dtype t) {
  switch (t) {
    case kir::Dtype::BF16: return "bf16";
    case kir::Dtype::F16: return "f16";
    case kir::Dtype::F32: return "f32";
    case kir::Dtype::I32: return "i32";
    case kir::Dtype::I64: return "i64";
    case kir::Dtype::U8: return "u8";
    case kir::Dtype::Bool: return "bool";
  }
  return "?";
}

inline bool isFloat(kir::Dtype t) {
  return t == kir::Dtype::BF16 || t == kir::Dtype::F16 || t == kir::Dtype::F32;
}

inline bool isInt(kir::Dtype t) {
  return t == kir::Dtype::I32 || t == kir::Dtype::I64 || t == kir::Dtype::U8;
}

inline const char* opName(kir::OpCode c) {
  using kir::OpCode;
  switch (c) {
    case OpCode::ConstFloat: return "ConstFloat";
    case OpCode::ConstInt: return "ConstInt";
    case OpCode::ScalarArg: return "ScalarArg";
    case OpCode::DimArg: return "DimArg";
    case OpCode::RowIndex: return "RowIndex";
    case OpCode::Load: return "Load";
    case OpCode::Store: return "Store";
    case OpCode::Cast: return "Cast";
    case OpCode::Neg: return "Neg";
    case OpCode::Abs: return "Abs";
    case OpCode::Sqrt: return "Sqrt";
    case OpCode::Rsqrt: return "Rsqrt";
    case OpCode::Exp: return "Exp";
    case OpCode::Not: return "Not";
    case OpCode::Add: return "Add";
    case OpCode::Sub: return "Sub";
    case OpCode::Mul: return "Mul";
    case OpCode::Div: return "Div";
    case OpCode::Rem: return "Rem";
    case OpCode::Min: return "Min";
    case OpCode::Max: return "Max";
    case OpCode::CmpEq: return "CmpEq";
    case OpCode::CmpNe: return "CmpNe";
    case OpCode::CmpLt: return "CmpLt";
    case OpCode::CmpLe: return "CmpLe";
    case OpCode::CmpGt: return "CmpGt";
    case OpCode::CmpGe: return "CmpGe";
    case OpCode::And: return "And";
    case OpCode::Or: return "Or";
    case OpCode::Select: return "Select";
    case OpCode::ReduceSum: return "ReduceSum";
    case OpCode::ReduceMax: return "ReduceMax";
    case OpCode::ReduceMin: return "ReduceMin";
  }
  return "?";
}

}  // namespace mxfp6::interp::detail
