// The row loop of the reference interpreter. Semantics are stated in interpreter.h.
//
// Every SSA value owns a slot in one of two pools allocated once per run: float values (any float
// type) hold doubles, integer and Bool values hold int64 (Bool as 0/1). A per-row scalar is a
// slot of length 1, so scalar broadcast is a step of 0 over the operand. A variable's storage is
// the slot of its VarInit; a ForBegin's slot holds its induction value, and its end and step sit
// in per-op arrays. The KIR is checked once before the first row (operand ids, kinds, lengths,
// loop nesting and scopes); the row loop then allocates nothing, however many trips it runs:
// a body's values reuse their slots on every trip.
#include "compiler/interp/interpreter.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "compiler/interp/float_formats.h"
#include "compiler/interp/mxfp6.h"
#include "compiler/interp/ranges.h"

namespace mxfp6::interp {
namespace {

using kir::Dtype;
using kir::OpCode;

enum class Cls : uint8_t { None, Float, Int };  // Int holds integers and Bool

Cls classOf(Dtype t) { return kir::isFloat(t) ? Cls::Float : Cls::Int; }

struct Slot {
  Cls cls = Cls::None;
  int64_t len = 0;  // 0: per-row scalar
  size_t off = 0;   // into the pool of its class
  int64_t count() const { return len > 0 ? len : 1; }
};

struct FView {
  const double* p;
  int64_t step;  // 0 broadcasts a scalar
};

struct IView {
  const int64_t* p;
  int64_t step;
};

/// 1/(1+e^-x), as e^x/(1+e^x) for x < 0 so that neither form overflows or cancels.
double sigmoid64(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

/// 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), as x * sigmoid(2u): equal, and
/// without the cancellation of 1 + tanh(u) for negative u.
double geluTanh64(double x) {
  if (std::isinf(x)) return x > 0 ? x : -0.0;
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  return x * sigmoid64(2.0 * u);
}

template <class F>
void mapF1(double* r, int64_t n, FView a, F f) {
  if (a.step) {
    for (int64_t j = 0; j < n; ++j) r[j] = f(a.p[j]);
  } else {
    const double v = f(a.p[0]);
    for (int64_t j = 0; j < n; ++j) r[j] = v;
  }
}

template <class F>
void mapF2(double* r, int64_t n, FView a, FView b, F f) {
  if (a.step && b.step) {
    for (int64_t j = 0; j < n; ++j) r[j] = f(a.p[j], b.p[j]);
  } else if (a.step) {
    const double bv = b.p[0];
    for (int64_t j = 0; j < n; ++j) r[j] = f(a.p[j], bv);
  } else if (b.step) {
    const double av = a.p[0];
    for (int64_t j = 0; j < n; ++j) r[j] = f(av, b.p[j]);
  } else {
    const double v = f(a.p[0], b.p[0]);
    for (int64_t j = 0; j < n; ++j) r[j] = v;
  }
}

double nanMin(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return b < a ? b : a;
}

double nanMax(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return b > a ? b : a;
}

bool intFits(int64_t v, Dtype t) {
  switch (t) {
    case Dtype::I32:
      return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
    case Dtype::U8: return v >= 0 && v <= 255;
    case Dtype::Bool: return v == 0 || v == 1;
    default: return true;
  }
}

std::string formatDouble(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

class Machine {
 public:
  Machine(const kir::Kernel& kernel, const BoundArgs& args, const RunOptions& options)
      : k_(kernel), args_(args), options_(options) {}

  Status prepare();
  /// Rows of the launch: the product of the row variables' extents (0 if any is empty).
  int64_t rowCount() const;
  /// Runs `count` rows from linear row `first` (the last row variable fastest), in order.
  Status runRows(int64_t first, int64_t count);

 private:
  Status validateOp(size_t i);
  Status validateControl(size_t i);
  /// Op `i` uses value `id` as `what`: an earlier op with a result, not a variable, and not
  /// defined in a loop body that has closed.
  Status checkUse(size_t i, int id, const char* what) const;
  /// Runs Kernel::ops once (one row), following loops.
  Status runRow();
  /// ForBegin at `i`: evaluates the bounds and sets `next` to the first op of the body, or past
  /// the matching ForEnd for a zero-trip loop.
  Status beginLoop(size_t i, size_t& next);
  /// ForEnd at `i`: steps the induction value and jumps back, or falls through.
  size_t endLoop(size_t i);
  Status exec(size_t i);
  Status execLoad(size_t i);
  Status execStore(size_t i);
  Status execCast(size_t i);
  Status execUnary(size_t i);
  Status execBinary(size_t i);
  Status execIntBinary(size_t i, IView a, IView b, int64_t* r, int64_t n);
  Status execCompare(size_t i);
  Status execReduce(size_t i);
  Status validateRowBlock(size_t i);
  Status execRepeat(size_t i);
  Status execGroupReduce(size_t i);
  Status execRotatePairs(size_t i);
  Status execMxScale(size_t i);
  Status execMxEncode(size_t i);
  Status execPack6(size_t i);
  Status execTranspose(size_t i);
  Status checkIntResult(size_t i);

  /// Resolves the element offsets of a Load/Store into offsets_ (one per element, the slices'
  /// elements in row-major order), after checking every index and slice against its dimension
  /// and every offset against the extent.
  Status address(size_t i);

  Status opError(size_t i, const std::string& message) const;
  Status invalid(size_t i, const std::string& message) const {
    return opError(i, "invalid KIR: " + message);
  }
  std::string rowText() const;
  std::string accessText(size_t i) const;

  double* fptr(int id) { return fpool_.data() + slots_[id].off; }
  int64_t* iptr(int id) { return ipool_.data() + slots_[id].off; }
  FView fview(int id, int scratch);
  IView iview(int id) {
    return {iptr(id), slots_[id].len > 0 ? 1 : 0};
  }
  int64_t scalarInt(int id) const { return ipool_[slots_[id].off]; }

  const kir::Kernel& k_;
  const BoundArgs& args_;
  const RunOptions& options_;
  std::vector<Slot> slots_;
  std::vector<double> fpool_;
  std::vector<int64_t> ipool_;
  std::vector<int64_t> offsets_, offsetScratch_;  // address(): the current access's offsets
  std::vector<double> scratch_[3];
  std::vector<std::vector<int64_t>> dimValues_;  // per param: each dim's size (tensors only)
  std::vector<std::vector<double>*> shadows_;    // per param: fp64 shadow or null
  std::vector<int64_t> row_;                     // current value of each row variable
  bool inRow_ = false;

  // Structure, filled by validation.
  std::vector<int> match_;        // ForBegin -> its ForEnd and ForEnd -> its ForBegin; else -1
  std::vector<int> scope_;        // per op: the ForBegin of the innermost loop around it (a
                                  // ForBegin: itself, its induction value lives in its body); -1
  std::vector<uint8_t> open_;     // per ForBegin, during validation: its ForEnd is still ahead
  std::vector<int> openStack_;    // during validation: the open ForBegins, innermost last
  // Loop state while running.
  std::vector<int64_t> loopEnd_;   // per ForBegin: this execution's end
  std::vector<int64_t> loopStep_;  // per ForBegin: this execution's step
  std::vector<int> activeLoops_;   // ForBegins whose body is running, innermost last
  int64_t tripsThisRow_ = 0;
};

std::string locText(const kir::SourceLoc& loc) {
  if (loc.file.empty() && loc.line == 0) return "";
  return (loc.file.empty() ? std::string("<unknown>") : loc.file) + ":" +
         std::to_string(loc.line) + ":" + std::to_string(loc.col) + ": ";
}

Status Machine::opError(size_t i, const std::string& message) const {
  const kir::Op& op = k_.ops[i];
  std::string s = locText(op.loc) + "error: " + message + " (kernel '" + k_.name + "'";
  if (inRow_) s += ", " + rowText();
  s += ", op #" + std::to_string(i) + " " + kir::opName(op.code) + ")";
  // An op of a fn's body: the calls that put it there, innermost first.
  for (const kir::FnCall* call = op.loc.inCall.get(); call; call = call->loc.inCall.get())
    s += "\n" + locText(call->loc) + "note: in the call of fn '" + call->fn + "'";
  return Status::error(std::move(s));
}

std::string Machine::rowText() const {
  std::string s = "row";
  for (size_t v = 0; v < k_.rowVars.size(); ++v) {
    s += v ? ", " : " ";
    s += k_.rowVars[v] + "=" + std::to_string(row_[v]);
  }
  // The induction values of the loops running, outermost first.
  for (size_t l = 0; l < activeLoops_.size(); ++l) {
    const int b = activeLoops_[l];
    s += l ? ", " : "; loop ";
    s += (k_.ops[b].name.empty() ? "#" + std::to_string(b) : k_.ops[b].name) + "=" +
         std::to_string(ipool_[slots_[b].off]);
  }
  return s;
}

FView Machine::fview(int id, int scratch) {
  const Slot& s = slots_[id];
  const int64_t step = s.len > 0 ? 1 : 0;
  if (s.cls == Cls::Float) return {fpool_.data() + s.off, step};
  double* dst = scratch_[scratch].data();
  const int64_t* src = ipool_.data() + s.off;
  for (int64_t j = 0; j < s.count(); ++j) dst[j] = static_cast<double>(src[j]);
  return {dst, step};
}

Status Machine::prepare() {
  const size_t nParams = k_.params.size();
  if (args_.tensors.size() != nParams || args_.intScalars.size() != nParams ||
      args_.floatScalars.size() != nParams || args_.runtimeDims.size() != k_.runtimeDims.size()) {
    return Status::error("kernel '" + k_.name + "': arguments were bound for another kernel");
  }
  if (k_.rowDims.size() != k_.rowVars.size()) {
    return Status::error("kernel '" + k_.name + "': invalid KIR: " +
                         std::to_string(k_.rowVars.size()) + " row variables but " +
                         std::to_string(k_.rowDims.size()) + " row extents");
  }
  for (size_t v = 0; v < k_.rowDims.size(); ++v) {
    const int d = k_.rowDims[v];
    const bool constant = d == -1 && v < k_.rowConstExtents.size() && k_.rowConstExtents[v] > 0;
    if (!constant && (d < 0 || d >= static_cast<int>(k_.runtimeDims.size()))) {
      return Status::error("kernel '" + k_.name + "': invalid KIR: row extent " +
                           std::to_string(d) + " is neither a runtime dim nor a constant");
    }
  }

  dimValues_.assign(nParams, {});
  for (size_t p = 0; p < nParams; ++p) {
    const kir::Param& param = k_.params[p];
    if (param.kind != kir::ParamKind::Tensor) continue;
    if (param.dtype == Dtype::Bool) {
      return Status::error("kernel '" + k_.name + "': tensor '" + param.name +
                           "' has unsupported dtype bool");
    }
    for (const kir::Dim& d : param.dims) {
      dimValues_[p].push_back(d.constant >= 0 ? d.constant : args_.runtimeDims.at(d.runtimeDim));
    }
  }

  shadows_.assign(nParams, nullptr);
  for (const auto& [p, vec] : options_.fp64Outputs) {
    if (p < 0 || p >= static_cast<int>(nParams) ||
        k_.params[p].kind != kir::ParamKind::Tensor || !k_.params[p].isOutput) {
      return Status::error("kernel '" + k_.name + "': fp64 shadow requested for param " +
                           std::to_string(p) + ", which is not an output tensor");
    }
    if (vec == nullptr) {
      return Status::error("kernel '" + k_.name + "': fp64 shadow of '" + k_.params[p].name +
                           "' is a null vector");
    }
    shadows_[p] = vec;
  }

  slots_.assign(k_.ops.size(), Slot{});
  match_.assign(k_.ops.size(), -1);
  scope_.assign(k_.ops.size(), -1);
  open_.assign(k_.ops.size(), 0);
  openStack_.clear();
  size_t fsize = 0, isize = 0;
  int64_t maxLen = 1;
  for (size_t i = 0; i < k_.ops.size(); ++i) {
    scope_[i] = openStack_.empty() ? -1 : openStack_.back();
    RETURN_IF_ERROR(validateOp(i));
    Slot& s = slots_[i];
    if (s.cls == Cls::None) continue;
    maxLen = std::max(maxLen, s.count());
    size_t& size = s.cls == Cls::Float ? fsize : isize;
    s.off = size;
    size += static_cast<size_t>(s.count());
  }
  if (!openStack_.empty()) {
    return invalid(static_cast<size_t>(openStack_.back()), "ForBegin has no matching ForEnd");
  }
  fpool_.assign(fsize, 0.0);
  ipool_.assign(isize, 0);
  for (auto& s : scratch_) s.assign(static_cast<size_t>(maxLen), 0.0);
  row_.assign(k_.rowVars.size(), 0);
  loopEnd_.assign(k_.ops.size(), 0);
  loopStep_.assign(k_.ops.size(), 0);
  activeLoops_.clear();
  activeLoops_.reserve(k_.ops.size());
  return Status::ok();
}

Status Machine::checkUse(size_t i, int id, const char* what) const {
  if (id < 0 || static_cast<size_t>(id) >= i || slots_[id].cls == Cls::None) {
    return invalid(i, std::string(what) + " refers to value " + std::to_string(id) +
                          ", which is not an earlier value");
  }
  if (k_.ops[id].code == OpCode::VarInit) {
    return invalid(i, std::string(what) + " refers to op #" + std::to_string(id) +
                          " (VarInit), a variable, not a value: read it with VarRead");
  }
  // A value defined in a loop body lives until the body's ForEnd.
  const int loop = scope_[id];
  if (loop >= 0 && !open_[loop]) {
    return invalid(i, std::string(what) + " refers to value " + std::to_string(id) +
                          ", defined in the body of the loop of op #" + std::to_string(loop) +
                          " (ForBegin), which closed at op #" + std::to_string(match_[loop]));
  }
  return Status::ok();
}

Status Machine::validateOp(size_t i) {
  const kir::Op& op = k_.ops[i];
  Slot& slot = slots_[i];
  const int64_t len = op.type.length;
  if (len < 0) return invalid(i, "negative result length");

  auto checkValue = [&](int id, const char* what) { return checkUse(i, id, what); };
  auto checkScalarInt = [&](int id, const char* what) -> Status {
    RETURN_IF_ERROR(checkValue(id, what));
    if (slots_[id].cls != Cls::Int || slots_[id].len != 0) {
      return invalid(i, std::string(what) + " (value " + std::to_string(id) +
                            ") is not an integer scalar");
    }
    return Status::ok();
  };
  auto checkArity = [&](size_t n) -> Status {
    if (op.operands.size() != n) {
      return invalid(i, "expects " + std::to_string(n) + " operands, has " +
                            std::to_string(op.operands.size()));
    }
    for (int id : op.operands) RETURN_IF_ERROR(checkValue(id, "an operand"));
    return Status::ok();
  };
  // Elementwise: every operand is a scalar or has the result's length.
  auto checkLengths = [&]() -> Status {
    for (int id : op.operands) {
      if (slots_[id].len != 0 && slots_[id].len != len) {
        return invalid(i, "operand " + std::to_string(id) + " has length " +
                              std::to_string(slots_[id].len) + ", result has length " +
                              std::to_string(len));
      }
    }
    return Status::ok();
  };
  auto requireCls = [&](Cls want, const char* what) -> Status {
    if (classOf(op.type.elem) != want) {
      return invalid(i, std::string("result type ") + kir::dtypeName(op.type.elem) +
                            " is not " + what);
    }
    return Status::ok();
  };
  auto requireIntOperands = [&]() -> Status {
    for (int id : op.operands) {
      if (slots_[id].cls != Cls::Int) {
        return invalid(i, "operand " + std::to_string(id) + " is not an integer or bool");
      }
    }
    return Status::ok();
  };
  auto requireScalarResult = [&]() -> Status {
    if (len != 0) return invalid(i, "result must be a scalar");
    return Status::ok();
  };

  const bool hasResult = op.code != OpCode::Store && op.code != OpCode::VarWrite &&
                         op.code != OpCode::ForEnd;
  if (hasResult) slot = Slot{classOf(op.type.elem), len, 0};

  switch (op.code) {
    case OpCode::ConstFloat:
      RETURN_IF_ERROR(requireCls(Cls::Float, "a float"));
      return requireScalarResult();
    case OpCode::ConstInt:
      RETURN_IF_ERROR(requireCls(Cls::Int, "an integer"));
      if (!intFits(op.ival, op.type.elem)) {
        return invalid(i, "constant " + std::to_string(op.ival) + " does not fit " +
                              kir::dtypeName(op.type.elem));
      }
      return requireScalarResult();
    case OpCode::ScalarArg: {
      if (op.param < 0 || op.param >= static_cast<int>(k_.params.size()) ||
          k_.params[op.param].kind != kir::ParamKind::Scalar) {
        return invalid(i, "param " + std::to_string(op.param) + " is not a scalar parameter");
      }
      if (classOf(k_.params[op.param].dtype) == Cls::Float && slot.cls != Cls::Float) {
        return invalid(i, "float parameter '" + k_.params[op.param].name +
                              "' read as an integer");
      }
      return requireScalarResult();
    }
    case OpCode::DimArg:
      RETURN_IF_ERROR(requireCls(Cls::Int, "an integer"));
      if (op.ival < 0 || op.ival >= static_cast<int64_t>(k_.runtimeDims.size())) {
        return invalid(i, "runtime dim " + std::to_string(op.ival) + " does not exist");
      }
      return requireScalarResult();
    case OpCode::RowIndex:
      RETURN_IF_ERROR(requireCls(Cls::Int, "an integer"));
      if (op.ival < 0 || op.ival >= static_cast<int64_t>(k_.rowVars.size())) {
        return invalid(i, "row variable " + std::to_string(op.ival) + " does not exist");
      }
      return requireScalarResult();
    case OpCode::Load:
    case OpCode::Store: {
      if (op.param < 0 || op.param >= static_cast<int>(k_.params.size()) ||
          k_.params[op.param].kind != kir::ParamKind::Tensor) {
        return invalid(i, "param " + std::to_string(op.param) + " is not a tensor parameter");
      }
      const kir::Param& t = k_.params[op.param];
      const size_t rank = t.dims.size();
      if (op.operands.size() != rank || op.strides.size() != rank || op.slices.size() != rank) {
        return invalid(i, "tensor '" + t.name + "' has rank " + std::to_string(rank) + ", but " +
                              std::to_string(op.operands.size()) + " indices, " +
                              std::to_string(op.strides.size()) + " strides and " +
                              std::to_string(op.slices.size()) + " slice lengths are given");
      }
      int64_t accessLen = 0, gatherLen = 0;
      for (size_t d = 0; d < rank; ++d) {
        RETURN_IF_ERROR(checkScalarInt(op.strides[d], "a stride"));
        if (op.slices[d] < 0) return invalid(i, "negative slice length");
        if (op.operands[d] == -1) {
          if (op.slices[d] <= 0 || op.slices[d] != t.dims[d].constant) {
            return invalid(i, "':' over dim " + std::to_string(d) + " (" + t.dims[d].name +
                                  ") of '" + t.name + "' needs the dim's constant size as its length");
          }
        } else if (op.code == OpCode::Load && op.slices[d] == 0 && gatherLen == 0 &&
                   op.operands[d] >= 0 && op.operands[d] < static_cast<int>(i) &&
                   slots_[op.operands[d]].cls == Cls::Int && slots_[op.operands[d]].len > 0) {
          gatherLen = slots_[op.operands[d]].len;  // the one vector index of a gather
        } else {
          RETURN_IF_ERROR(checkScalarInt(op.operands[d], "an index"));
        }
        if (op.slices[d] > 0 &&
            __builtin_mul_overflow(accessLen == 0 ? 1 : accessLen, op.slices[d], &accessLen)) {
          return invalid(i, "slice lengths overflow");
        }
      }
      if (gatherLen > 0 &&
          __builtin_mul_overflow(gatherLen, accessLen == 0 ? 1 : accessLen, &accessLen)) {
        return invalid(i, "gather length overflows");
      }
      if (op.code == OpCode::Load) {
        if (len != accessLen) {
          return invalid(i, "result length " + std::to_string(len) + " but the access has " +
                                std::to_string(accessLen) + " elements");
        }
        if (slot.cls != classOf(t.dtype)) {
          return invalid(i, std::string("load of a ") + kir::dtypeName(t.dtype) +
                                " tensor typed " + kir::dtypeName(op.type.elem));
        }
        return Status::ok();
      }
      if (!t.isOutput) return invalid(i, "store into input tensor '" + t.name + "'");
      RETURN_IF_ERROR(checkValue(op.value, "the stored value"));
      if (slots_[op.value].len != 0 && slots_[op.value].len != accessLen) {
        return invalid(i, "stored value has length " + std::to_string(slots_[op.value].len) +
                              ", the access has " + std::to_string(accessLen) + " elements");
      }
      return Status::ok();
    }
    case OpCode::Cast:
      RETURN_IF_ERROR(checkArity(1));
      if (slots_[op.operands[0]].len != len) {
        return invalid(i, "cast changes the length from " +
                              std::to_string(slots_[op.operands[0]].len) + " to " +
                              std::to_string(len));
      }
      return Status::ok();
    case OpCode::Neg:
    case OpCode::Abs:
      RETURN_IF_ERROR(checkArity(1));
      if (slot.cls == Cls::Int) RETURN_IF_ERROR(requireIntOperands());
      return checkLengths();
    case OpCode::Sqrt:
    case OpCode::Rsqrt:
    case OpCode::Exp:
    case OpCode::Tanh:
    case OpCode::Sigmoid:
    case OpCode::Erf:
    case OpCode::GeluTanh:
    case OpCode::Silu:
      RETURN_IF_ERROR(checkArity(1));
      RETURN_IF_ERROR(requireCls(Cls::Float, "a float"));
      return checkLengths();
    case OpCode::Not:
      RETURN_IF_ERROR(checkArity(1));
      RETURN_IF_ERROR(requireCls(Cls::Int, "bool"));
      RETURN_IF_ERROR(requireIntOperands());
      return checkLengths();
    case OpCode::Add:
    case OpCode::Sub:
    case OpCode::Mul:
    case OpCode::Div:
    case OpCode::Rem:
    case OpCode::Min:
    case OpCode::Max:
      RETURN_IF_ERROR(checkArity(2));
      if (slot.cls == Cls::Int) RETURN_IF_ERROR(requireIntOperands());
      return checkLengths();
    case OpCode::CmpEq:
    case OpCode::CmpNe:
    case OpCode::CmpLt:
    case OpCode::CmpLe:
    case OpCode::CmpGt:
    case OpCode::CmpGe:
      RETURN_IF_ERROR(checkArity(2));
      RETURN_IF_ERROR(requireCls(Cls::Int, "bool"));
      return checkLengths();
    case OpCode::And:
    case OpCode::Or:
      RETURN_IF_ERROR(checkArity(2));
      RETURN_IF_ERROR(requireCls(Cls::Int, "bool"));
      RETURN_IF_ERROR(requireIntOperands());
      return checkLengths();
    case OpCode::Select:
      RETURN_IF_ERROR(checkArity(3));
      if (slots_[op.operands[0]].cls != Cls::Int) return invalid(i, "condition is not bool");
      if (slot.cls == Cls::Int && (slots_[op.operands[1]].cls != Cls::Int ||
                                   slots_[op.operands[2]].cls != Cls::Int)) {
        return invalid(i, "integer select of a float operand");
      }
      return checkLengths();
    case OpCode::ReduceSum:
    case OpCode::ReduceMax:
    case OpCode::ReduceMin:
      RETURN_IF_ERROR(checkArity(1));
      if (slot.cls == Cls::Int && slots_[op.operands[0]].cls != Cls::Int) {
        return invalid(i, "integer reduction of a float vector");
      }
      return requireScalarResult();
    case OpCode::Repeat:
    case OpCode::GroupReduceSum:
    case OpCode::GroupReduceMax:
    case OpCode::GroupReduceMin:
    case OpCode::RotatePairs:
    case OpCode::MxScale:
    case OpCode::MxEncode:
    case OpCode::Pack6:
    case OpCode::Transpose:
      RETURN_IF_ERROR(checkArity(op.code == OpCode::RotatePairs ? 3
                                 : op.code == OpCode::MxEncode  ? 2
                                                                : 1));
      return validateRowBlock(i);
    case OpCode::Iota:
      RETURN_IF_ERROR(checkArity(0));
      if (len == 0 || slot.cls != Cls::Int) return invalid(i, "result must be an integer row vector");
      return Status::ok();
    case OpCode::Splat:
      RETURN_IF_ERROR(checkArity(1));
      if (slots_[op.operands[0]].len != 0) {
        return invalid(i, "operand (value " + std::to_string(op.operands[0]) +
                              ") is a row vector, not a scalar");
      }
      if (len == 0) return invalid(i, "result must be a row vector");
      if (k_.ops[op.operands[0]].type.elem != op.type.elem) {
        return invalid(i, std::string("result type ") + kir::typeName(op.type) +
                              " splats a " + kir::typeName(k_.ops[op.operands[0]].type));
      }
      return Status::ok();
    case OpCode::VarInit:
    case OpCode::VarRead:
    case OpCode::VarWrite:
    case OpCode::ForBegin:
    case OpCode::ForEnd:
      return validateControl(i);
  }
  return invalid(i, "unknown opcode " + std::to_string(static_cast<int>(op.code)));
}

// Variables and loops: operand ids as in validateOp, plus the structure: loop pairing and
// nesting, variable scopes, types.
Status Machine::validateControl(size_t i) {
  const kir::Op& op = k_.ops[i];
  const int id = static_cast<int>(i);
  auto checkOperandCount = [&](size_t n) -> Status {
    if (op.operands.size() != n) {
      return invalid(i, "expects " + std::to_string(n) + " operands, has " +
                            std::to_string(op.operands.size()));
    }
    return Status::ok();
  };
  auto checkOperands = [&]() -> Status {
    for (int v : op.operands) RETURN_IF_ERROR(checkUse(i, v, "an operand"));
    return Status::ok();
  };
  // VarRead/VarWrite: ival names an earlier VarInit whose scope is still open.
  auto variable = [&](int& var) -> Status {
    if (op.ival < 0 || op.ival >= id || k_.ops[op.ival].code != OpCode::VarInit) {
      return invalid(i, "ival " + std::to_string(op.ival) + " does not name an earlier VarInit");
    }
    var = static_cast<int>(op.ival);
    const int loop = scope_[var];
    if (loop >= 0 && !open_[loop]) {
      return invalid(i, "variable of op #" + std::to_string(var) +
                            " (VarInit) is out of scope: it was declared in the body of the "
                            "loop of op #" + std::to_string(loop) +
                            " (ForBegin), which closed at op #" + std::to_string(match_[loop]));
    }
    return Status::ok();
  };
  auto sameType = [&](const kir::ValueType& got, const kir::ValueType& want,
                      const std::string& what) -> Status {
    if (!(got == want)) {
      return invalid(i, what + " is " + kir::typeName(got) + ", the variable is " +
                            kir::typeName(want));
    }
    return Status::ok();
  };

  switch (op.code) {
    case OpCode::VarInit:
      RETURN_IF_ERROR(checkOperandCount(1));
      RETURN_IF_ERROR(checkOperands());
      return sameType(k_.ops[op.operands[0]].type, op.type, "the initial value");
    case OpCode::VarRead: {
      RETURN_IF_ERROR(checkOperandCount(0));
      int var = -1;
      RETURN_IF_ERROR(variable(var));
      return sameType(op.type, k_.ops[var].type, "the result");
    }
    case OpCode::VarWrite: {
      RETURN_IF_ERROR(checkOperandCount(1));
      RETURN_IF_ERROR(checkOperands());
      int var = -1;
      RETURN_IF_ERROR(variable(var));
      return sameType(k_.ops[op.operands[0]].type, k_.ops[var].type, "the value written");
    }
    case OpCode::ForBegin: {
      RETURN_IF_ERROR(checkOperandCount(3));
      RETURN_IF_ERROR(checkOperands());
      static const char* const kBound[] = {"start", "end", "step"};
      for (size_t o = 0; o < 3; ++o) {
        const kir::ValueType t = k_.ops[op.operands[o]].type;
        if (t.isVector() || !kir::isInt(t.elem)) {
          return invalid(i, std::string("the ") + kBound[o] + " (value " +
                                std::to_string(op.operands[o]) + ") is " + kir::typeName(t) +
                                ", not an integer scalar");
        }
      }
      if (!(op.type == kir::ValueType{Dtype::I64, 0})) {
        return invalid(i, "the induction value is typed " + kir::typeName(op.type) +
                              ", not i64");
      }
      open_[i] = 1;
      openStack_.push_back(id);
      scope_[i] = id;  // the induction value lives in the body
      return Status::ok();
    }
    case OpCode::ForEnd:
      RETURN_IF_ERROR(checkOperandCount(0));
      if (openStack_.empty()) {
        return invalid(i, "ForEnd names op #" + std::to_string(op.ival) +
                              ", but no loop is open");
      }
      if (op.ival != openStack_.back()) {
        return invalid(i, "ForEnd names op #" + std::to_string(op.ival) +
                              ", but the innermost open loop is op #" +
                              std::to_string(openStack_.back()) + " (ForBegin)");
      }
      match_[i] = openStack_.back();
      match_[openStack_.back()] = id;
      open_[openStack_.back()] = 0;
      openStack_.pop_back();
      return Status::ok();
    default:
      return invalid(i, "not a variable or loop op");
  }
}

// The row-vector building blocks change lengths, so each checks its own length rule (kir.h) on
// top of the arity and operand ids checked by validateOp.
Status Machine::validateRowBlock(size_t i) {
  const kir::Op& op = k_.ops[i];
  const char* name = kir::opName(op.code);
  const int64_t len = op.type.length;
  auto typeOf = [&](int id) { return k_.ops[id].type; };
  auto fail = [&](const std::string& message) {
    return invalid(i, std::string(name) + ": " + message);
  };
  // Every operand must be a row vector: the builtins are defined on vectors only.
  for (size_t o = 0; o < op.operands.size(); ++o) {
    if (!typeOf(op.operands[o]).isVector()) {
      return fail("operand " + std::to_string(o) + " (value " + std::to_string(op.operands[o]) +
                  ") is a scalar, not a row vector");
    }
  }
  const kir::ValueType v = typeOf(op.operands[0]);
  auto expectResult = [&](Dtype elem, int64_t expectedLen) -> Status {
    if (op.type.elem != elem) {
      return fail(std::string("result type ") + kir::dtypeName(op.type.elem) + " should be " +
                  kir::dtypeName(elem));
    }
    if (len != expectedLen) {
      return fail("result length " + std::to_string(len) + " should be " +
                  std::to_string(expectedLen));
    }
    return Status::ok();
  };
  auto expectOperand = [&](size_t o, Dtype elem, int64_t expectedLen) -> Status {
    const kir::ValueType t = typeOf(op.operands[o]);
    if (t.elem != elem || t.length != expectedLen) {
      return fail("operand " + std::to_string(o) + " is " + kir::typeName(t) + ", expected " +
                  kir::typeName({elem, expectedLen}));
    }
    return Status::ok();
  };
  auto expectVariant = [&]() -> Status {
    if (op.ival < 0 || op.ival / 4 > 1 || op.ival % 4 > 2) {
      return fail("ival " + std::to_string(op.ival) + " is not an MX variant (format * 4 + mode)");
    }
    return Status::ok();
  };

  switch (op.code) {
    case OpCode::Repeat: {
      if (op.ival < 1) return fail("count " + std::to_string(op.ival) + " is not positive");
      int64_t n = 0;
      if (__builtin_mul_overflow(v.length, op.ival, &n)) return fail("result length overflows");
      return expectResult(v.elem, n);
    }
    case OpCode::GroupReduceSum:
    case OpCode::GroupReduceMax:
    case OpCode::GroupReduceMin:
      if (op.ival < 1) return fail("group size " + std::to_string(op.ival) + " is not positive");
      if (v.length % op.ival != 0) {
        return fail("operand length " + std::to_string(v.length) +
                    " is not a multiple of the group size " + std::to_string(op.ival));
      }
      if (v.elem == Dtype::Bool) return fail("reduction of a bool vector");
      return expectResult(v.elem, v.length / op.ival);
    case OpCode::RotatePairs:
      if (!kir::isFloat(v.elem)) return fail(std::string("operand type ") + kir::typeName(v) +
                                             " is not a float vector");
      if (v.length % 2 != 0) return fail("operand length " + std::to_string(v.length) + " is odd");
      RETURN_IF_ERROR(expectOperand(1, v.elem, v.length / 2));
      RETURN_IF_ERROR(expectOperand(2, v.elem, v.length / 2));
      return expectResult(v.elem, v.length);
    case OpCode::MxScale:
      RETURN_IF_ERROR(expectVariant());
      if (v.elem != Dtype::BF16 || v.length % mx::kBlockSize != 0) {
        return fail("operand is " + kir::typeName(v) + ", expected a bf16 vector whose length "
                    "is a multiple of 32");
      }
      return expectResult(Dtype::U8, v.length / mx::kBlockSize);
    case OpCode::MxEncode:
      RETURN_IF_ERROR(expectVariant());
      if (v.elem != Dtype::BF16 || v.length % mx::kBlockSize != 0) {
        return fail("operand 0 is " + kir::typeName(v) + ", expected a bf16 vector whose "
                    "length is a multiple of 32");
      }
      RETURN_IF_ERROR(expectOperand(1, Dtype::U8, v.length / mx::kBlockSize));
      return expectResult(Dtype::U8, v.length);
    case OpCode::Pack6:
      if (v.elem != Dtype::U8 || v.length % 4 != 0) {
        return fail("operand is " + kir::typeName(v) + ", expected a u8 vector whose length is "
                    "a multiple of 4");
      }
      return expectResult(Dtype::U8, v.length / 4 * 3);
    case OpCode::Transpose:
      if (op.ival < 1 || v.length % op.ival != 0) {
        return fail("ival " + std::to_string(op.ival) + " does not divide the length of " +
                    kir::typeName(v));
      }
      return expectResult(v.elem, v.length);
    default:
      return fail("not a row-vector building block");
  }
}

int64_t Machine::rowCount() const {
  int64_t rows = 1;
  for (size_t v = 0; v < k_.rowVars.size(); ++v)
    rows *= k_.rowDims[v] < 0 ? k_.rowConstExtents[v] : std::max<int64_t>(0, args_.runtimeDims[k_.rowDims[v]]);
  return rows;
}

Status Machine::runRows(int64_t first, int64_t count) {
  if (count <= 0) return Status::ok();
  const size_t nVars = k_.rowVars.size();
  std::vector<int64_t> extent(nVars);
  for (size_t v = 0; v < nVars; ++v)
    extent[v] = k_.rowDims[v] < 0 ? k_.rowConstExtents[v] : args_.runtimeDims[k_.rowDims[v]];
  // The odometer's reading at row `first`.
  for (size_t v = nVars; v-- > 0;) {
    row_[v] = first % extent[v];
    first /= extent[v];
  }
  inRow_ = true;
  for (int64_t r = 0; r < count; ++r) {
    RETURN_IF_ERROR(runRow());
    // Odometer over the row variables, the last one fastest.
    for (size_t v = nVars; v-- > 0;) {
      if (++row_[v] < extent[v]) break;
      row_[v] = 0;
    }
  }
  return Status::ok();
}

Status Machine::runRow() {
  const size_t n = k_.ops.size();
  tripsThisRow_ = 0;
  activeLoops_.clear();
  size_t i = 0;
  while (i < n) {
    switch (k_.ops[i].code) {
      case OpCode::ForBegin:
        RETURN_IF_ERROR(beginLoop(i, i));
        break;
      case OpCode::ForEnd:
        i = endLoop(i);
        break;
      default:
        RETURN_IF_ERROR(exec(i));
        ++i;
        break;
    }
  }
  return Status::ok();
}

Status Machine::beginLoop(size_t i, size_t& next) {
  const kir::Op& op = k_.ops[i];
  const int64_t start = scalarInt(op.operands[0]);
  const int64_t end = scalarInt(op.operands[1]);
  const int64_t step = scalarInt(op.operands[2]);
  auto bounds = [&] {
    return "loop " + std::to_string(start) + " .. " + std::to_string(end) + " step " +
           std::to_string(step);
  };
  if (step <= 0) return opError(i, bounds() + ": the step is not positive");
  if (start >= end) {  // zero trips
    next = static_cast<size_t>(match_[i]) + 1;
    return Status::ok();
  }
  // Exact in 128 bits: end - start < 2^64, step >= 1.
  const __int128 trips = (static_cast<__int128>(end) - start + step - 1) / step;
  const __int128 last = static_cast<__int128>(start) + (trips - 1) * step;
  if (last + step > std::numeric_limits<int64_t>::max()) {
    return opError(i, bounds() + ": the induction value overflows int64 when stepped past its "
                                 "last value " + std::to_string(static_cast<int64_t>(last)));
  }
  const int64_t limit = options_.maxLoopTripsPerRow;
  if (trips > static_cast<__int128>(limit) - tripsThisRow_) {
    const std::string n = trips > std::numeric_limits<int64_t>::max()
                              ? std::string("more than 2^63")
                              : std::to_string(static_cast<int64_t>(trips));
    return opError(i, bounds() + " would run " + n + " trips, after " +
                          std::to_string(tripsThisRow_) + " in this row already: over the " +
                          "limit of " + std::to_string(limit) +
                          " loop trips per row (RunOptions::maxLoopTripsPerRow)");
  }
  tripsThisRow_ += static_cast<int64_t>(trips);
  iptr(static_cast<int>(i))[0] = start;
  loopEnd_[i] = end;
  loopStep_[i] = step;
  activeLoops_.push_back(static_cast<int>(i));
  next = i + 1;
  return Status::ok();
}

size_t Machine::endLoop(size_t i) {
  const int b = match_[i];
  int64_t& induction = iptr(b)[0];
  // Cannot overflow: beginLoop checked the value after the last trip.
  const int64_t v = induction + loopStep_[b];
  if (v < loopEnd_[b]) {
    induction = v;
    return static_cast<size_t>(b) + 1;
  }
  activeLoops_.pop_back();
  return i + 1;
}

Status Machine::checkIntResult(size_t i) {
  const Dtype t = k_.ops[i].type.elem;
  if (t == Dtype::I64) return Status::ok();
  const int64_t* r = iptr(static_cast<int>(i));
  const int64_t n = slots_[i].count();
  for (int64_t j = 0; j < n; ++j) {
    if (!intFits(r[j], t)) {
      return opError(i, "result " + std::to_string(r[j]) +
                            (slots_[i].len ? " (element " + std::to_string(j) + ")" : "") +
                            " does not fit " + kir::dtypeName(t));
    }
  }
  return Status::ok();
}

Status Machine::exec(size_t i) {
  const kir::Op& op = k_.ops[i];
  const int id = static_cast<int>(i);
  switch (op.code) {
    case OpCode::ConstFloat:
      fptr(id)[0] = op.fval;
      return Status::ok();
    case OpCode::ConstInt:
      iptr(id)[0] = op.ival;
      return Status::ok();
    case OpCode::ScalarArg: {
      const bool intParam = classOf(k_.params[op.param].dtype) == Cls::Int;
      if (slots_[i].cls == Cls::Float) {
        fptr(id)[0] = intParam ? static_cast<double>(args_.intScalars[op.param])
                               : args_.floatScalars[op.param];
        return Status::ok();
      }
      iptr(id)[0] = args_.intScalars[op.param];
      return checkIntResult(i);
    }
    case OpCode::DimArg:
      iptr(id)[0] = args_.runtimeDims[op.ival];
      return checkIntResult(i);
    case OpCode::RowIndex:
      iptr(id)[0] = row_[op.ival];
      return checkIntResult(i);
    case OpCode::Load:
      return execLoad(i);
    case OpCode::Store:
      return execStore(i);
    case OpCode::Cast:
      return execCast(i);
    case OpCode::Neg:
    case OpCode::Abs:
    case OpCode::Sqrt:
    case OpCode::Rsqrt:
    case OpCode::Exp:
    case OpCode::Tanh:
    case OpCode::Sigmoid:
    case OpCode::Erf:
    case OpCode::GeluTanh:
    case OpCode::Silu:
    case OpCode::Not:
      return execUnary(i);
    case OpCode::Add:
    case OpCode::Sub:
    case OpCode::Mul:
    case OpCode::Div:
    case OpCode::Rem:
    case OpCode::Min:
    case OpCode::Max:
    case OpCode::And:
    case OpCode::Or:
      return execBinary(i);
    case OpCode::CmpEq:
    case OpCode::CmpNe:
    case OpCode::CmpLt:
    case OpCode::CmpLe:
    case OpCode::CmpGt:
    case OpCode::CmpGe:
      return execCompare(i);
    case OpCode::Select: {
      const int64_t n = slots_[i].count();
      const IView c = iview(op.operands[0]);
      if (slots_[i].cls == Cls::Float) {
        const FView a = fview(op.operands[1], 0), b = fview(op.operands[2], 1);
        double* r = fptr(id);
        for (int64_t j = 0; j < n; ++j) r[j] = c.p[j * c.step] ? a.p[j * a.step] : b.p[j * b.step];
        return Status::ok();
      }
      const IView a = iview(op.operands[1]), b = iview(op.operands[2]);
      int64_t* r = iptr(id);
      for (int64_t j = 0; j < n; ++j) r[j] = c.p[j * c.step] ? a.p[j * a.step] : b.p[j * b.step];
      return checkIntResult(i);
    }
    case OpCode::ReduceSum:
    case OpCode::ReduceMax:
    case OpCode::ReduceMin:
      return execReduce(i);
    case OpCode::Repeat:
      return execRepeat(i);
    case OpCode::GroupReduceSum:
    case OpCode::GroupReduceMax:
    case OpCode::GroupReduceMin:
      return execGroupReduce(i);
    case OpCode::RotatePairs:
      return execRotatePairs(i);
    case OpCode::MxScale:
      return execMxScale(i);
    case OpCode::MxEncode:
      return execMxEncode(i);
    case OpCode::Pack6:
      return execPack6(i);
    case OpCode::Transpose:
      return execTranspose(i);
    case OpCode::Iota: {
      int64_t* r = iptr(id);
      for (int64_t j = 0; j < slots_[i].count(); ++j) r[j] = j;
      return Status::ok();
    }
    case OpCode::Splat: {
      const int64_t n = slots_[i].count();
      if (slots_[i].cls == Cls::Float) {
        std::fill_n(fptr(id), n, fptr(op.operands[0])[0]);
      } else {
        std::fill_n(iptr(id), n, iptr(op.operands[0])[0]);
      }
      return Status::ok();
    }
    case OpCode::VarInit:  // into the variable's storage, this op's slot
    case OpCode::VarRead:  // out of it
    case OpCode::VarWrite: {
      const int src = op.code == OpCode::VarRead ? static_cast<int>(op.ival) : op.operands[0];
      const int dst = op.code == OpCode::VarWrite ? static_cast<int>(op.ival) : id;
      const int64_t n = slots_[dst].count();  // validated: same type as the source
      if (slots_[dst].cls == Cls::Float) {
        std::copy_n(fptr(src), n, fptr(dst));
      } else {
        std::copy_n(iptr(src), n, iptr(dst));
      }
      return Status::ok();
    }
    case OpCode::ForBegin:
    case OpCode::ForEnd:
      return opError(i, "loop op outside the row loop");  // runRow handles them
  }
  return opError(i, "unknown opcode");
}

std::string Machine::accessText(size_t i) const {
  const kir::Op& op = k_.ops[i];
  // Only called after validation, from a row: the index slots hold this row's values.
  std::string s = k_.params[op.param].name + "[";
  for (size_t d = 0; d < op.operands.size(); ++d) {
    if (d) s += ", ";
    if (op.operands[d] < 0) {
      s += ":";
      continue;
    }
    if (slots_[op.operands[d]].len > 0) {
      s += "[" + std::to_string(slots_[op.operands[d]].len) + " indices]";
      continue;
    }
    s += std::to_string(scalarInt(op.operands[d]));
    if (op.slices[d] > 0) s += " : " + std::to_string(op.slices[d]);
  }
  return s + "]";
}

Status Machine::address(size_t i) {
  const kir::Op& op = k_.ops[i];
  const kir::Param& t = k_.params[op.param];
  const TensorArg& arg = args_.tensors[op.param];
  const std::vector<int64_t>& dims = dimValues_[op.param];
  const char* verb = op.code == OpCode::Load ? "load from" : "store to";
  auto overflow = [&] {
    return opError(i, std::string(verb) + " '" + t.name + "' at " + accessText(i) +
                          ": linear offset overflows int64");
  };
  // The scalar indices and slice starts give the base; each slice dim then multiplies the
  // offsets so far by its elements, in row-major order.
  int64_t base = 0;
  int gatherDim = -1;
  for (size_t d = 0; d < op.operands.size(); ++d) {
    if (op.operands[d] >= 0 && op.slices[d] == 0 && slots_[op.operands[d]].len > 0) {
      gatherDim = static_cast<int>(d);
      continue;
    }
    const int64_t idx = op.operands[d] < 0 ? 0 : scalarInt(op.operands[d]);
    const int64_t span = op.slices[d] > 0 ? op.slices[d] : 1;
    if (idx < 0 || idx > dims[d] - span) {
      std::string what = op.slices[d] > 0 ? "slice " + std::to_string(idx) + " : " + std::to_string(span)
                                          : "index " + std::to_string(idx);
      return opError(i, std::string(verb) + " '" + t.name + "' out of bounds at " +
                            accessText(i) + ": " + what + " of dim " + std::to_string(d) + " (" +
                            t.dims[d].name + ") is outside [0, " + std::to_string(dims[d]) + ")");
    }
    int64_t term = 0;
    if (__builtin_mul_overflow(idx, scalarInt(op.strides[d]), &term) ||
        __builtin_add_overflow(base, term, &base))
      return overflow();
  }
  offsets_.assign(1, base);
  if (gatherDim >= 0) {  // the gathered index is the outermost digit of the result
    const int64_t* idx = iptr(op.operands[gatherDim]);
    const int64_t n = slots_[op.operands[gatherDim]].len, stride = scalarInt(op.strides[gatherDim]);
    offsets_.clear();
    for (int64_t j = 0; j < n; ++j) {
      if (idx[j] < 0 || idx[j] >= dims[gatherDim]) {
        return opError(i, std::string(verb) + " '" + t.name + "' out of bounds at " + accessText(i) +
                              ": gathered index " + std::to_string(idx[j]) + " (element " + std::to_string(j) +
                              ") of dim " + std::to_string(gatherDim) + " (" + t.dims[gatherDim].name +
                              ") is outside [0, " + std::to_string(dims[gatherDim]) + ")");
      }
      int64_t term = 0, at = 0;
      if (__builtin_mul_overflow(idx[j], stride, &term) || __builtin_add_overflow(base, term, &at))
        return overflow();
      offsets_.push_back(at);
    }
  }
  for (size_t d = 0; d < op.operands.size(); ++d) {
    if (op.slices[d] == 0) continue;
    const int64_t stride = scalarInt(op.strides[d]);
    std::vector<int64_t>& next = offsetScratch_;
    next.clear();
    for (int64_t o : offsets_) {
      for (int64_t j = 0; j < op.slices[d]; ++j) {
        int64_t term = 0, at = 0;
        if (__builtin_mul_overflow(j, stride, &term) || __builtin_add_overflow(o, term, &at))
          return overflow();
        next.push_back(at);
      }
    }
    offsets_.swap(next);
  }
  const auto [lo, hi] = std::minmax_element(offsets_.begin(), offsets_.end());
  if (*lo < 0 || *hi >= arg.extentElements) {
    std::string range = offsets_.size() > 1 ? "linear offsets " + std::to_string(*lo) + ".." +
                                                  std::to_string(*hi)
                                            : "linear offset " + std::to_string(*lo);
    return opError(i, std::string(verb) + " '" + t.name + "' out of bounds at " +
                          accessText(i) + ": " + range + " outside the extent [0, " +
                          std::to_string(arg.extentElements) + ")");
  }
  return Status::ok();
}

template <class T>
T readAt(const unsigned char* data, int64_t offset) {
  T v;
  std::memcpy(&v, data + offset * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

template <class T>
void writeAt(unsigned char* data, int64_t offset, T v) {
  std::memcpy(data + offset * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

Status Machine::execLoad(size_t i) {
  const kir::Op& op = k_.ops[i];
  RETURN_IF_ERROR(address(i));
  const int64_t count = static_cast<int64_t>(offsets_.size());
  const TensorArg& arg = args_.tensors[op.param];
  const auto* data = static_cast<const unsigned char*>(arg.data);
  const int id = static_cast<int>(i);
  if (slots_[i].cls == Cls::Float) {
    double* r = fptr(id);
    switch (arg.dtype) {
      case Dtype::BF16:
        for (int64_t j = 0; j < count; ++j)
          r[j] = bf16ToDouble(readAt<uint16_t>(data, offsets_[j]));
        break;
      case Dtype::F16:
        for (int64_t j = 0; j < count; ++j)
          r[j] = f16ToDouble(readAt<uint16_t>(data, offsets_[j]));
        break;
      case Dtype::F32:
        for (int64_t j = 0; j < count; ++j) r[j] = readAt<float>(data, offsets_[j]);
        break;
      default:
        return opError(i, "float load from a non-float tensor");
    }
    return Status::ok();
  }
  int64_t* r = iptr(id);
  switch (arg.dtype) {
    case Dtype::I32:
      for (int64_t j = 0; j < count; ++j) r[j] = readAt<int32_t>(data, offsets_[j]);
      break;
    case Dtype::I64:
      for (int64_t j = 0; j < count; ++j) r[j] = readAt<int64_t>(data, offsets_[j]);
      break;
    case Dtype::U8:
      for (int64_t j = 0; j < count; ++j) r[j] = readAt<uint8_t>(data, offsets_[j]);
      break;
    default:
      return opError(i, "integer load from a non-integer tensor");
  }
  return checkIntResult(i);
}

Status Machine::execStore(size_t i) {
  const kir::Op& op = k_.ops[i];
  RETURN_IF_ERROR(address(i));
  const int64_t count = static_cast<int64_t>(offsets_.size());
  const TensorArg& arg = args_.tensors[op.param];
  auto* data = static_cast<unsigned char*>(arg.data);
  const Slot& vs = slots_[op.value];
  const int64_t vstep = vs.len > 0 ? 1 : 0;
  const std::string& name = k_.params[op.param].name;

  if (std::vector<double>* shadow = shadows_[op.param]) {
    const int64_t hi = *std::max_element(offsets_.begin(), offsets_.end());
    if (hi >= static_cast<int64_t>(shadow->size())) {
      return opError(i, "store to '" + name + "' at " + accessText(i) + " writes linear offset " +
                            std::to_string(hi) + ", beyond its fp64 shadow of " +
                            std::to_string(shadow->size()) + " elements");
    }
    double* out = shadow->data();
    if (vs.cls == Cls::Float) {
      const double* v = fptr(op.value);
      for (int64_t j = 0; j < count; ++j) out[offsets_[j]] = v[j * vstep];
    } else {
      const int64_t* v = iptr(op.value);
      for (int64_t j = 0; j < count; ++j) out[offsets_[j]] = static_cast<double>(v[j * vstep]);
    }
  }

  if (kir::isFloat(arg.dtype)) {
    const FView v = fview(op.value, 0);
    switch (arg.dtype) {
      case Dtype::BF16:
        for (int64_t j = 0; j < count; ++j)
          writeAt<uint16_t>(data, offsets_[j], doubleToBf16(v.p[j * v.step]));
        break;
      case Dtype::F16:
        for (int64_t j = 0; j < count; ++j)
          writeAt<uint16_t>(data, offsets_[j], doubleToF16(v.p[j * v.step]));
        break;
      default:
        for (int64_t j = 0; j < count; ++j)
          writeAt<float>(data, offsets_[j], static_cast<float>(v.p[j * v.step]));
        break;
    }
    return Status::ok();
  }

  // Integer tensor: the value must be an integer in range, exactly.
  auto badValue = [&](int64_t j, const std::string& value) {
    return opError(i, "store to " + std::string(kir::dtypeName(arg.dtype)) + " tensor '" +
                          name + "' at " + accessText(i) +
                          (count > 1 ? " (element " + std::to_string(j) + ")" : "") +
                          ": value " + value + " is not representable");
  };
  for (int64_t j = 0; j < count; ++j) {
    int64_t x;
    if (vs.cls == Cls::Float) {
      const double d = fptr(op.value)[j * vstep];
      if (!(std::trunc(d) == d && d >= -0x1p63 && d < 0x1p63)) return badValue(j, formatDouble(d));
      x = static_cast<int64_t>(d);
    } else {
      x = iptr(op.value)[j * vstep];
    }
    if (!intFits(x, arg.dtype)) return badValue(j, std::to_string(x));
    switch (arg.dtype) {
      case Dtype::I32: writeAt<int32_t>(data, offsets_[j], static_cast<int32_t>(x)); break;
      case Dtype::I64: writeAt<int64_t>(data, offsets_[j], x); break;
      default: writeAt<uint8_t>(data, offsets_[j], static_cast<uint8_t>(x)); break;
    }
  }
  return Status::ok();
}

Status Machine::execCast(size_t i) {
  const kir::Op& op = k_.ops[i];
  const int id = static_cast<int>(i);
  const int src = op.operands[0];
  const int64_t n = slots_[i].count();
  const Dtype to = op.type.elem;
  if (slots_[i].cls == Cls::Float) {
    // Float destinations keep the exact value: no rounding between float types.
    const FView a = fview(src, 0);
    std::copy(a.p, a.p + n, fptr(id));
    return Status::ok();
  }
  int64_t* r = iptr(id);
  if (slots_[src].cls == Cls::Int) {
    const int64_t* a = iptr(src);
    if (to == Dtype::Bool) {
      for (int64_t j = 0; j < n; ++j) r[j] = a[j] != 0;
    } else {
      std::copy(a, a + n, r);
    }
    return checkIntResult(i);
  }
  const double* a = fptr(src);
  for (int64_t j = 0; j < n; ++j) {
    if (to == Dtype::Bool) {
      r[j] = a[j] != 0;
      continue;
    }
    const double t = std::trunc(a[j]);
    if (!(t >= -0x1p63 && t < 0x1p63)) {
      return opError(i, "cast of " + formatDouble(a[j]) +
                            (slots_[i].len ? " (element " + std::to_string(j) + ")" : "") +
                            " to " + kir::dtypeName(to) + " is out of range");
    }
    r[j] = static_cast<int64_t>(t);
  }
  return checkIntResult(i);
}

Status Machine::execUnary(size_t i) {
  const kir::Op& op = k_.ops[i];
  const int id = static_cast<int>(i);
  const int64_t n = slots_[i].count();
  if (slots_[i].cls == Cls::Float) {
    const FView a = fview(op.operands[0], 0);
    double* r = fptr(id);
    switch (op.code) {
      case OpCode::Neg: mapF1(r, n, a, [](double x) { return -x; }); break;
      case OpCode::Abs: mapF1(r, n, a, [](double x) { return std::fabs(x); }); break;
      case OpCode::Sqrt: mapF1(r, n, a, [](double x) { return std::sqrt(x); }); break;
      case OpCode::Rsqrt: mapF1(r, n, a, [](double x) { return 1.0 / std::sqrt(x); }); break;
      case OpCode::Exp: mapF1(r, n, a, [](double x) { return std::exp(x); }); break;
      case OpCode::Tanh: mapF1(r, n, a, [](double x) { return std::tanh(x); }); break;
      case OpCode::Sigmoid: mapF1(r, n, a, sigmoid64); break;
      case OpCode::Erf: mapF1(r, n, a, [](double x) { return std::erf(x); }); break;
      case OpCode::GeluTanh: mapF1(r, n, a, geluTanh64); break;
      case OpCode::Silu: mapF1(r, n, a, [](double x) { return std::isinf(x) ? (x > 0 ? x : -0.0) : x * sigmoid64(x); }); break;
      default: return opError(i, "unexpected float unary op");
    }
    return Status::ok();
  }
  const IView a = iview(op.operands[0]);
  int64_t* r = iptr(id);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t x = a.p[j * a.step];
    if (op.code == OpCode::Not) {
      r[j] = x == 0;
      continue;
    }
    if (x == std::numeric_limits<int64_t>::min()) {
      return opError(i, "int64 overflow in " + std::string(kir::opName(op.code)) + " of " +
                            std::to_string(x));
    }
    r[j] = op.code == OpCode::Neg ? -x : (x < 0 ? -x : x);
  }
  return checkIntResult(i);
}

Status Machine::execIntBinary(size_t i, IView a, IView b, int64_t* r, int64_t n) {
  const OpCode code = k_.ops[i].code;
  auto overflow = [&](int64_t x, int64_t y) {
    return opError(i, "int64 overflow in " + std::string(kir::opName(code)) + " of " +
                          std::to_string(x) + " and " + std::to_string(y));
  };
  for (int64_t j = 0; j < n; ++j) {
    const int64_t x = a.p[j * a.step], y = b.p[j * b.step];
    int64_t v = 0;
    switch (code) {
      case OpCode::Add:
        if (__builtin_add_overflow(x, y, &v)) return overflow(x, y);
        break;
      case OpCode::Sub:
        if (__builtin_sub_overflow(x, y, &v)) return overflow(x, y);
        break;
      case OpCode::Mul:
        if (__builtin_mul_overflow(x, y, &v)) return overflow(x, y);
        break;
      case OpCode::Div:
      case OpCode::Rem:
        if (y == 0) {
          return opError(i, std::string("integer ") +
                                (code == OpCode::Div ? "division" : "remainder") + " of " +
                                std::to_string(x) + " by zero");
        }
        if (y == -1) {  // INT64_MIN / -1 overflows; INT64_MIN % -1 is UB in C++ but 0 here
          if (code == OpCode::Rem) {
            v = 0;
          } else if (__builtin_sub_overflow(int64_t{0}, x, &v)) {
            return overflow(x, y);
          }
          break;
        }
        v = code == OpCode::Div ? x / y : x % y;
        break;
      case OpCode::Min: v = std::min(x, y); break;
      case OpCode::Max: v = std::max(x, y); break;
      case OpCode::And: v = (x != 0) && (y != 0); break;
      case OpCode::Or: v = (x != 0) || (y != 0); break;
      default: return opError(i, "unexpected integer binary op");
    }
    r[j] = v;
  }
  return checkIntResult(i);
}

Status Machine::execBinary(size_t i) {
  const kir::Op& op = k_.ops[i];
  const int id = static_cast<int>(i);
  const int64_t n = slots_[i].count();
  if (slots_[i].cls == Cls::Int) {
    return execIntBinary(i, iview(op.operands[0]), iview(op.operands[1]), iptr(id), n);
  }
  const FView a = fview(op.operands[0], 0), b = fview(op.operands[1], 1);
  double* r = fptr(id);
  switch (op.code) {
    case OpCode::Add: mapF2(r, n, a, b, [](double x, double y) { return x + y; }); break;
    case OpCode::Sub: mapF2(r, n, a, b, [](double x, double y) { return x - y; }); break;
    case OpCode::Mul: mapF2(r, n, a, b, [](double x, double y) { return x * y; }); break;
    case OpCode::Div: mapF2(r, n, a, b, [](double x, double y) { return x / y; }); break;
    case OpCode::Rem: mapF2(r, n, a, b, [](double x, double y) { return std::fmod(x, y); }); break;
    case OpCode::Min: mapF2(r, n, a, b, nanMin); break;
    case OpCode::Max: mapF2(r, n, a, b, nanMax); break;
    default: return opError(i, "unexpected float binary op");
  }
  return Status::ok();
}

template <class T>
bool compareValues(OpCode c, T x, T y) {
  switch (c) {
    case OpCode::CmpEq: return x == y;
    case OpCode::CmpNe: return x != y;
    case OpCode::CmpLt: return x < y;
    case OpCode::CmpLe: return x <= y;
    case OpCode::CmpGt: return x > y;
    default: return x >= y;
  }
}

Status Machine::execCompare(size_t i) {
  const kir::Op& op = k_.ops[i];
  const int64_t n = slots_[i].count();
  int64_t* r = iptr(static_cast<int>(i));
  const int a0 = op.operands[0], b0 = op.operands[1];
  if (slots_[a0].cls == Cls::Int && slots_[b0].cls == Cls::Int) {
    const IView a = iview(a0), b = iview(b0);
    for (int64_t j = 0; j < n; ++j) r[j] = compareValues(op.code, a.p[j * a.step], b.p[j * b.step]);
  } else {
    const FView a = fview(a0, 0), b = fview(b0, 1);
    for (int64_t j = 0; j < n; ++j) r[j] = compareValues(op.code, a.p[j * a.step], b.p[j * b.step]);
  }
  return Status::ok();
}

Status Machine::execReduce(size_t i) {
  const kir::Op& op = k_.ops[i];
  const int src = op.operands[0];
  const int64_t n = slots_[src].count();
  if (slots_[i].cls == Cls::Float) {
    const FView a = fview(src, 0);
    double acc = a.p[0];
    switch (op.code) {
      case OpCode::ReduceSum:
        for (int64_t j = 1; j < n; ++j) acc += a.p[j];
        break;
      case OpCode::ReduceMax:
        for (int64_t j = 1; j < n; ++j) acc = nanMax(acc, a.p[j]);
        break;
      default:
        for (int64_t j = 1; j < n; ++j) acc = nanMin(acc, a.p[j]);
        break;
    }
    fptr(static_cast<int>(i))[0] = acc;
    return Status::ok();
  }
  const int64_t* a = iptr(src);
  int64_t acc = a[0];
  for (int64_t j = 1; j < n; ++j) {
    switch (op.code) {
      case OpCode::ReduceSum:
        if (__builtin_add_overflow(acc, a[j], &acc)) {
          return opError(i, "int64 overflow in ReduceSum at element " + std::to_string(j));
        }
        break;
      case OpCode::ReduceMax: acc = std::max(acc, a[j]); break;
      default: acc = std::min(acc, a[j]); break;
    }
  }
  iptr(static_cast<int>(i))[0] = acc;
  return checkIntResult(i);
}

Status Machine::execRepeat(size_t i) {
  const kir::Op& op = k_.ops[i];
  const int id = static_cast<int>(i), src = op.operands[0];
  const int64_t n = slots_[i].count(), k = op.ival;
  if (slots_[i].cls == Cls::Float) {
    const double* a = fptr(src);
    double* r = fptr(id);
    for (int64_t j = 0; j < n; ++j) r[j] = a[j / k];
  } else {
    const int64_t* a = iptr(src);
    int64_t* r = iptr(id);
    for (int64_t j = 0; j < n; ++j) r[j] = a[j / k];
  }
  return Status::ok();
}

// Each group is reduced exactly as ReduceSum/Max/Min reduce a whole row: starting from its first
// element, in ascending index order.
Status Machine::execGroupReduce(size_t i) {
  const kir::Op& op = k_.ops[i];
  const int id = static_cast<int>(i), src = op.operands[0];
  const int64_t groups = slots_[i].count(), g = op.ival;
  if (slots_[i].cls == Cls::Float) {
    const double* a = fptr(src);
    double* r = fptr(id);
    for (int64_t q = 0; q < groups; ++q) {
      const double* v = a + q * g;
      double acc = v[0];
      switch (op.code) {
        case OpCode::GroupReduceSum:
          for (int64_t j = 1; j < g; ++j) acc += v[j];
          break;
        case OpCode::GroupReduceMax:
          for (int64_t j = 1; j < g; ++j) acc = nanMax(acc, v[j]);
          break;
        default:
          for (int64_t j = 1; j < g; ++j) acc = nanMin(acc, v[j]);
          break;
      }
      r[q] = acc;
    }
    return Status::ok();
  }
  const int64_t* a = iptr(src);
  int64_t* r = iptr(id);
  for (int64_t q = 0; q < groups; ++q) {
    const int64_t* v = a + q * g;
    int64_t acc = v[0];
    for (int64_t j = 1; j < g; ++j) {
      switch (op.code) {
        case OpCode::GroupReduceSum:
          if (__builtin_add_overflow(acc, v[j], &acc)) {
            return opError(i, "int64 overflow in GroupReduceSum at element " +
                                  std::to_string(q * g + j) + " (group " + std::to_string(q) +
                                  ")");
          }
          break;
        case OpCode::GroupReduceMax: acc = std::max(acc, v[j]); break;
        default: acc = std::min(acc, v[j]); break;
      }
    }
    r[q] = acc;
  }
  return checkIntResult(i);
}

// y[2p] = c*v0 - s*v1, y[2p+1] = s*v0 + c*v1: each product is rounded to fp64 on its own and then
// added, never fused (separate statements keep the compiler from contracting them into an FMA).
Status Machine::execRotatePairs(size_t i) {
  const kir::Op& op = k_.ops[i];
  const double* v = fptr(op.operands[0]);
  const double* c = fptr(op.operands[1]);
  const double* s = fptr(op.operands[2]);
  double* r = fptr(static_cast<int>(i));
  const int64_t pairs = slots_[i].count() / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    const double v0 = v[2 * p], v1 = v[2 * p + 1];
    const double cv0 = c[p] * v0;
    const double sv1 = s[p] * v1;
    const double sv0 = s[p] * v0;
    const double cv1 = c[p] * v1;
    r[2 * p] = cv0 - sv1;
    r[2 * p + 1] = sv0 + cv1;
  }
  return Status::ok();
}

mx::ElementFormat elementFormatOf(int64_t variant) {
  return kir::mxFormat(variant) == kir::MxFormat::E2M3 ? mx::ElementFormat::E2M3
                                                        : mx::ElementFormat::E3M2;
}

mx::ScaleMode scaleModeOf(int64_t variant) {
  switch (kir::mxScaleMode(variant)) {
    case kir::MxScaleMode::Even: return mx::ScaleMode::Even;
    case kir::MxScaleMode::Floor: return mx::ScaleMode::Floor;
    default: return mx::ScaleMode::Rceil;
  }
}

// The bf16 operand of MxScale/MxEncode holds exact fp64 values (a bf16(...) cast does not round
// here); the GPU holds them rounded to bf16, so they are rounded once, to nearest even, and the
// encoder works on those bits.
Status Machine::execMxScale(size_t i) {
  const kir::Op& op = k_.ops[i];
  const double* v = fptr(op.operands[0]);
  int64_t* r = iptr(static_cast<int>(i));
  const mx::ElementFormat format = elementFormatOf(op.ival);
  const mx::ScaleMode mode = scaleModeOf(op.ival);
  uint16_t block[mx::kBlockSize];
  uint8_t codes[mx::kBlockSize];
  for (int64_t b = 0; b < slots_[i].count(); ++b) {
    for (int e = 0; e < mx::kBlockSize; ++e) block[e] = doubleToBf16(v[b * mx::kBlockSize + e]);
    r[b] = mx::encodeBlock(block, format, mode, codes);
  }
  return Status::ok();
}

Status Machine::execMxEncode(size_t i) {
  const kir::Op& op = k_.ops[i];
  const double* v = fptr(op.operands[0]);
  const int64_t* scales = iptr(op.operands[1]);
  int64_t* r = iptr(static_cast<int>(i));
  const mx::ElementFormat format = elementFormatOf(op.ival);
  const int64_t n = slots_[i].count();
  for (int64_t b = 0; b < n / mx::kBlockSize; ++b) {
    if (scales[b] < 0 || scales[b] > 255) {  // unreachable for validated u8 values; kept total
      return opError(i, "scale " + std::to_string(scales[b]) + " (block " + std::to_string(b) +
                            ") is not a byte");
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    r[j] = mx::encodeBf16Element(doubleToBf16(v[j]),
                                 static_cast<uint8_t>(scales[j / mx::kBlockSize]), format);
  }
  return Status::ok();
}

Status Machine::execTranspose(size_t i) {
  const kir::Op& op = k_.ops[i];
  const int64_t n = slots_[i].count(), rows = op.ival, cols = n / rows;
  const int id = static_cast<int>(i);
  // Element w*rows + r of the result is element r*cols + w of the operand.
  auto source = [&](int64_t j) { return (j % rows) * cols + j / rows; };
  if (slots_[i].cls == Cls::Float) {
    const double* v = fptr(op.operands[0]);
    double* r = fptr(id);
    for (int64_t j = 0; j < n; ++j) r[j] = v[source(j)];
    return Status::ok();
  }
  const int64_t* v = iptr(op.operands[0]);
  int64_t* r = iptr(id);
  for (int64_t j = 0; j < n; ++j) r[j] = v[source(j)];
  return Status::ok();
}

Status Machine::execPack6(size_t i) {
  const kir::Op& op = k_.ops[i];
  const int64_t* codes = iptr(op.operands[0]);
  int64_t* r = iptr(static_cast<int>(i));
  const int64_t quads = slots_[op.operands[0]].count() / 4;
  for (int64_t q = 0; q < quads; ++q) {
    const int64_t* c = codes + 4 * q;
    for (int e = 0; e < 4; ++e) {
      if (c[e] < 0 || c[e] > 63) {
        return opError(i, "code " + std::to_string(c[e]) + " (element " +
                              std::to_string(4 * q + e) + ") is not a 6-bit code");
      }
    }
    const std::array<uint8_t, 3> bytes =
        mx::pack4(static_cast<uint8_t>(c[0]), static_cast<uint8_t>(c[1]),
                  static_cast<uint8_t>(c[2]), static_cast<uint8_t>(c[3]));
    for (int e = 0; e < 3; ++e) r[3 * q + e] = bytes[e];
  }
  return Status::ok();
}

}  // namespace

Status run(const kir::Kernel& kernel, const BoundArgs& args, const RunOptions& options) {
  Machine m(kernel, args, options);
  RETURN_IF_ERROR(m.prepare());
  const int64_t rows = m.rowCount();
  const int64_t threads = std::clamp<int64_t>(options.threads, 1, std::max<int64_t>(rows, 1));
  if (threads == 1) return m.runRows(0, rows);
  // Rows are independent (each writes its own elements): contiguous ranges of them run on their
  // own machines. The error reported is the one of the earliest range that failed, which holds
  // the first failing row of that range.
  std::vector<Status> results(threads);
  inRanges(rows, threads, [&](int64_t t, int64_t first, int64_t last) {
    Machine part(kernel, args, options);
    Status ready = part.prepare();
    results[t] = ready.isOk() ? part.runRows(first, last - first) : ready;
  });
  for (const Status& r : results) RETURN_IF_ERROR(r);
  return Status::ok();
}

Status run(const kir::Kernel& kernel, std::span<const Arg> args, const RunOptions& options) {
  Expected<BoundArgs> bound = bindArguments(kernel, args);
  if (!bound) return bound.status();
  return run(kernel, *bound, options);
}

}  // namespace mxfp6::interp
