// Structural checks every KIR kernel must pass, whatever the source: operands refer to earlier
// ops in scope (kir_verify.h), accesses carry one index and one stride per dimension, types
// line up.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/frontend/kir.h"
#include "tests/frontend/kir_verify.h"

namespace mxfp6::frontend::test {

inline void expectWellFormed(const kir::Kernel& k) {
  EXPECT_EQ(verifyKir(k), "");
  auto isEarlier = [](int id, size_t i) { return id >= 0 && static_cast<size_t>(id) < i; };
  ASSERT_EQ(k.runtimeDims.size(), k.runtimeDimUsedByBody.size());
  ASSERT_EQ(k.rowVars.size(), k.rowDims.size());
  for (size_t i = 0; i < k.ops.size(); ++i) {
    const kir::Op& op = k.ops[i];
    SCOPED_TRACE("op %" + std::to_string(i) + " " + kir::opName(op.code));
    bool isAccess = op.code == kir::OpCode::Load || op.code == kir::OpCode::Store;
    for (int id : op.operands) EXPECT_TRUE(isEarlier(id, i) || (isAccess && id == -1));
    if (isAccess) {
      ASSERT_TRUE(op.param >= 0 && op.param < static_cast<int>(k.params.size()));
      const kir::Param& p = k.params[op.param];
      EXPECT_EQ(p.kind, kir::ParamKind::Tensor);
      EXPECT_EQ(op.operands.size(), p.dims.size());
      EXPECT_EQ(op.strides.size(), p.dims.size());
      for (int s : op.strides) {
        ASSERT_TRUE(isEarlier(s, i));
        EXPECT_EQ(k.ops[s].type, (kir::ValueType{kir::Dtype::I64, 0}));
      }
      for (int id : op.operands)
        if (id >= 0) EXPECT_EQ(k.ops[id].type, (kir::ValueType{kir::Dtype::I64, 0}));
      EXPECT_LE(std::count(op.operands.begin(), op.operands.end(), -1), 1);
    }
    if (op.code == kir::OpCode::Store) {
      ASSERT_TRUE(isEarlier(op.value, i));
      EXPECT_EQ(k.ops[op.value].type.elem, k.params[op.param].dtype);
      EXPECT_TRUE(k.params[op.param].isOutput);
    }
    if (op.code == kir::OpCode::Load) {
      EXPECT_EQ(op.type.elem, k.params[op.param].dtype);
      EXPECT_FALSE(k.params[op.param].isOutput);
    }
  }
}

}  // namespace mxfp6::frontend::test
