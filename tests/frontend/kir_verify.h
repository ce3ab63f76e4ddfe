// The structural rules of KIR (compiler/frontend/kir.h) that the frontend must keep, as one
// function returning the first violation, so both the GoogleTest checks and the fuzzer can use
// it: operands are earlier values still in scope, loops pair and nest, variables are read and
// written with their own type while in scope.
#pragma once

#include <string>
#include <vector>

#include "compiler/frontend/kir.h"

namespace mxfp6::frontend::test {

/// "" when `k` is well formed, else "op %i (Code): what is wrong".
inline std::string verifyKir(const kir::Kernel& k) {
  using kir::OpCode;
  const int n = static_cast<int>(k.ops.size());
  std::vector<int> loopOf(k.ops.size(),
                          -1);  // innermost ForBegin around each op (a ForBegin: itself)
  std::vector<bool> open(k.ops.size(), false);
  std::vector<int> stack;
  const kir::ValueType i64{kir::Dtype::I64, 0};
  for (int i = 0; i < n; ++i) {
    const kir::Op& op = k.ops[i];
    auto fail = [&](const std::string& what) {
      return "op %" + std::to_string(i) + " (" + kir::opName(op.code) + "): " + what;
    };
    loopOf[i] = stack.empty() ? -1 : stack.back();
    // A value: an earlier op with a result, not a variable, defined outside every closed loop.
    auto usable = [&](int id) -> std::string {
      if (id < 0 || id >= i) return "uses %" + std::to_string(id) + ", not an earlier op";
      OpCode c = k.ops[id].code;
      if (c == OpCode::Store || c == OpCode::VarWrite || c == OpCode::ForEnd ||
          c == OpCode::VarInit)
        return "uses %" + std::to_string(id) + ", which is not a value";
      if (loopOf[id] >= 0 && !open[loopOf[id]])
        return "uses %" + std::to_string(id) + " after the loop that defines it";
      return "";
    };
    bool isAccess = op.code == OpCode::Load || op.code == OpCode::Store;
    for (int id : op.operands) {
      if (isAccess && id == -1) continue;
      if (std::string e = usable(id); !e.empty()) return fail(e);
    }
    for (int id : op.strides)
      if (std::string e = usable(id); !e.empty()) return fail(e);
    if (op.code == OpCode::Store)
      if (std::string e = usable(op.value); !e.empty()) return fail(e);
    // A variable: an earlier VarInit whose loop is still open, of the op's type.
    auto variable = [&]() -> std::string {
      int v = static_cast<int>(op.ival);
      if (v < 0 || v >= i || k.ops[v].code != OpCode::VarInit) return "ival is not a VarInit";
      if (loopOf[v] >= 0 && !open[loopOf[v]]) return "the variable is out of scope";
      if (!(op.type == k.ops[v].type)) return "type differs from the variable's";
      return "";
    };
    auto operandType = [&](size_t o) { return k.ops[op.operands[o]].type; };
    switch (op.code) {
      case OpCode::Splat:
        if (op.operands.size() != 1) return fail("needs one operand");
        if (operandType(0).isVector() || !op.type.isVector() || operandType(0).elem != op.type.elem)
          return fail("must make a vector of its scalar operand's type");
        break;
      case OpCode::VarInit:
        if (op.operands.size() != 1 || !(operandType(0) == op.type))
          return fail("needs one initial value of the variable's type");
        break;
      case OpCode::VarRead:
        if (!op.operands.empty()) return fail("takes no operands");
        if (std::string e = variable(); !e.empty()) return fail(e);
        break;
      case OpCode::VarWrite:
        if (op.operands.size() != 1) return fail("needs one operand");
        if (std::string e = variable(); !e.empty()) return fail(e);
        if (!(operandType(0) == op.type)) return fail("writes a value of another type");
        break;
      case OpCode::ForBegin:
        if (op.operands.size() != 3) return fail("needs start, end and step");
        for (size_t o = 0; o < 3; ++o)
          if (!(operandType(o) == i64)) return fail("bounds must be i64 scalars");
        if (!(op.type == i64)) return fail("the induction value must be i64");
        open[i] = true;
        loopOf[i] = i;
        stack.push_back(i);
        break;
      case OpCode::ForEnd:
        if (!op.operands.empty()) return fail("takes no operands");
        if (stack.empty() || op.ival != stack.back())
          return fail("does not close the innermost loop");
        open[stack.back()] = false;
        stack.pop_back();
        break;
      default:
        break;
    }
  }
  if (!stack.empty()) return "op %" + std::to_string(stack.back()) + " (ForBegin): never closed";
  return "";
}

}  // namespace mxfp6::frontend::test
