// Builds KIR by hand for interpreter tests: what the frontend's sema would produce for small DSL
// kernels, written op by op.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/frontend/kir.h"

namespace mxfp6::interp::testing {

using kir::Dtype;
using kir::OpCode;

inline kir::ValueType scalarType(Dtype t) { return {t, 0}; }
inline kir::ValueType vectorType(Dtype t, int64_t n) { return {t, n}; }

class KirBuilder {
 public:
  explicit KirBuilder(std::string name, std::string file = "test.mxk") {
    k_.name = std::move(name);
    k_.loc = {std::move(file), 1, 1};
  }

  /// Every op added next carries this source position.
  void at(int line, int col) { line_ = line, col_ = col; }

  /// A dim of a tensor param: an integer for a compile-time size, a name for a runtime size
  /// (registered in Kernel::runtimeDims on first use).
  struct DimSpec {
    std::string name;
    int64_t constant = -1;
    DimSpec(int64_t c) : name(std::to_string(c)), constant(c) {}            // NOLINT
    DimSpec(const char* n) : name(n) {}                                     // NOLINT
    DimSpec(std::string n, int64_t c) : name(std::move(n)), constant(c) {}  // specialized size
  };

  int tensor(const std::string& name, Dtype dtype, std::vector<DimSpec> dims, bool out = false) {
    kir::Param p;
    p.name = name;
    p.kind = kir::ParamKind::Tensor;
    p.dtype = dtype;
    p.isOutput = out;
    for (const DimSpec& d : dims) {
      kir::Dim dim;
      dim.name = d.name;
      dim.constant = d.constant;
      if (d.constant < 0) dim.runtimeDim = runtimeDim(d.name);
      p.dims.push_back(dim);
    }
    p.loc = loc();
    k_.params.push_back(p);
    return static_cast<int>(k_.params.size()) - 1;
  }

  int scalar(const std::string& name, Dtype dtype) {
    kir::Param p;
    p.name = name;
    p.kind = kir::ParamKind::Scalar;
    p.dtype = dtype;
    p.loc = loc();
    k_.params.push_back(p);
    return static_cast<int>(k_.params.size()) - 1;
  }

  int scalar(const std::string& name, Dtype dtype, double defaultValue) {
    const int p = scalar(name, dtype);
    k_.params[p].hasDefault = true;
    k_.params[p].defaultValue = defaultValue;
    return p;
  }

  /// `row vars... in dims...`: each extent is a runtime dim name.
  void rows(std::vector<std::string> vars, std::vector<std::string> dims) {
    k_.rowVars = std::move(vars);
    for (const std::string& d : dims) k_.rowDims.push_back(runtimeDim(d));
  }

  int constInt(int64_t v, Dtype t = Dtype::I64) {
    kir::Op op = make(OpCode::ConstInt, scalarType(t));
    op.ival = v;
    return push(op);
  }
  int constFloat(double v) {
    kir::Op op = make(OpCode::ConstFloat, scalarType(Dtype::F32));
    op.fval = v;
    return push(op);
  }
  int scalarArg(int param) {
    kir::Op op = make(OpCode::ScalarArg, scalarType(k_.params[param].dtype));
    op.param = param;
    return push(op);
  }
  int dimArg(const std::string& dim) {
    kir::Op op = make(OpCode::DimArg, scalarType(Dtype::I64));
    op.ival = runtimeDim(dim);
    return push(op);
  }
  int rowIndex(int var) {
    kir::Op op = make(OpCode::RowIndex, scalarType(Dtype::I64));
    op.ival = var;
    return push(op);
  }
  /// `indices`: value ids, kColon for ':'; `strides`: value ids, one per dim.
  static constexpr int kColon = -1;
  int load(int param, std::vector<int> indices, std::vector<int> strides) {
    const kir::Param& p = k_.params[param];
    int64_t len = 0;
    for (size_t d = 0; d < indices.size(); ++d)
      if (indices[d] == kColon && d < p.dims.size()) len = p.dims[d].constant;
    kir::Op op = make(OpCode::Load, {p.dtype, len});
    op.param = param;
    op.slices = colonSlices(param, indices);
    op.operands = std::move(indices);
    op.strides = std::move(strides);
    return push(op);
  }
  void store(int param, std::vector<int> indices, std::vector<int> strides, int value) {
    kir::Op op = make(OpCode::Store, {});
    op.param = param;
    op.slices = colonSlices(param, indices);
    op.operands = std::move(indices);
    op.strides = std::move(strides);
    op.value = value;
    push(op);
  }
  /// Per dim: the dim's size under a kColon, else 0 (a scalar index).
  std::vector<int64_t> colonSlices(int param, const std::vector<int>& indices) const {
    std::vector<int64_t> slices;
    for (size_t d = 0; d < indices.size(); ++d)
      slices.push_back(indices[d] == kColon && d < k_.params[param].dims.size()
                           ? k_.params[param].dims[d].constant
                           : 0);
    return slices;
  }
  /// Elementwise op; the result length is the longest operand's.
  int op(OpCode code, std::vector<int> operands, Dtype resultElem) {
    int64_t len = 0;
    for (int id : operands) len = std::max(len, k_.ops[id].type.length);
    kir::Op op = make(code, {resultElem, len});
    op.operands = std::move(operands);
    return push(op);
  }
  /// Elementwise op typed like its first operand.
  int op(OpCode code, std::vector<int> operands) {
    const Dtype elem = k_.ops[operands[0]].type.elem;
    return op(code, std::move(operands), elem);
  }
  int cast(int value, Dtype to) { return op(OpCode::Cast, {value}, to); }
  int reduce(OpCode code, int vector) {
    kir::Op op = make(code, scalarType(k_.ops[vector].type.elem));
    op.operands = {vector};
    return push(op);
  }
  /// An op whose result type is not that of an operand (the row-vector building blocks:
  /// Repeat, GroupReduce*, RotatePairs, MxScale, MxEncode, Pack6), with its `ival`.
  int vectorOp(OpCode code, std::vector<int> operands, kir::ValueType type, int64_t ival = 0) {
    kir::Op op = make(code, type);
    op.operands = std::move(operands);
    op.ival = ival;
    return push(op);
  }
  void name(int value, const std::string& n) { k_.ops[value].name = n; }

  /// Splat(scalar) to a vector of `length` elements of the scalar's type.
  int splat(int scalar, int64_t length) {
    return vectorOp(OpCode::Splat, {scalar}, {k_.ops[scalar].type.elem, length});
  }
  /// `var x = init`: returns the VarInit's id, which names the variable.
  int varInit(int init) {
    kir::Op op = make(OpCode::VarInit, k_.ops[init].type);
    op.operands = {init};
    return push(op);
  }
  int varRead(int var) {
    kir::Op op = make(OpCode::VarRead, k_.ops[var].type);
    op.ival = var;
    return push(op);
  }
  void varWrite(int var, int value) {
    kir::Op op = make(OpCode::VarWrite, {});
    op.ival = var;
    op.operands = {value};
    push(op);
  }
  /// `for i in start .. end step step {`: returns the ForBegin's id, the induction value.
  int forBegin(int start, int end, int step) {
    kir::Op op = make(OpCode::ForBegin, scalarType(Dtype::I64));
    op.operands = {start, end, step};
    return push(op);
  }
  /// `}` of the loop `begin`.
  void forEnd(int begin) {
    kir::Op op = make(OpCode::ForEnd, {});
    op.ival = begin;
    push(op);
  }

  kir::Kernel& kernel() { return k_; }
  kir::Kernel take() { return std::move(k_); }

 private:
  kir::SourceLoc loc() const { return {k_.loc.file, line_, col_}; }
  kir::Op make(OpCode code, kir::ValueType type) const {
    kir::Op op;
    op.code = code;
    op.type = type;
    op.loc = loc();
    return op;
  }
  int push(kir::Op op) {
    k_.ops.push_back(std::move(op));
    return static_cast<int>(k_.ops.size()) - 1;
  }
  int runtimeDim(const std::string& name) {
    for (size_t i = 0; i < k_.runtimeDims.size(); ++i)
      if (k_.runtimeDims[i] == name) return static_cast<int>(i);
    k_.runtimeDims.push_back(name);
    k_.runtimeDimUsedByBody.push_back(false);
    return static_cast<int>(k_.runtimeDims.size()) - 1;
  }

  kir::Kernel k_;
  int line_ = 1, col_ = 1;
};

}  // namespace mxfp6::interp::testing
