// Kernel IR (KIR): one kernel of the DSL instantiated at one configuration (specialized sizes
// and tunables bound to integers), fully typed, as a flat list of SSA operations executed once
// per row. It is the contract between the frontend (which produces it), the reference
// interpreter and the MLIR code generator (which both consume it). Plain C++: no LLVM.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mxfp6::kir {

/// Element types. Bool only appears as the result of comparisons.
enum class Dtype { BF16, F16, F32, I32, I64, U8, Bool };

const char* dtypeName(Dtype t);
int dtypeBytes(Dtype t);  // Bool: 1
bool isFloat(Dtype t);    // BF16, F16, F32
bool isInt(Dtype t);      // I32, I64, U8

/// Type of an SSA value: a per-row scalar (length == 0) or a row vector of `length` elements.
struct ValueType {
  Dtype elem = Dtype::F32;
  int64_t length = 0;
  bool isVector() const { return length > 0; }
  bool operator==(const ValueType& o) const { return elem == o.elem && length == o.length; }
};

/// "f32" for a scalar, "f32x3072" for a row vector: the spelling of dumps and diagnostics.
std::string typeName(const ValueType& t);

struct FnCall;

/// A position in a DSL source file (1-based), carried by every op so later stages can point at
/// the user's line. A position inside a `fn` also says which call expanded it there, so an
/// error in a fn's body names the call that led to it.
struct SourceLoc {
  SourceLoc(std::string file = {}, int line = 0, int col = 0,
            std::shared_ptr<const FnCall> inCall = nullptr)
      : file(std::move(file)), line(line), col(col), inCall(std::move(inCall)) {}
  std::string file;
  int line = 0;
  int col = 0;
  std::shared_ptr<const FnCall> inCall;  // null outside fn bodies
};

/// A call of a `fn` whose body was expanded in place (compiler/frontend/fn_expand.h).
struct FnCall {
  std::string fn;
  SourceLoc loc;  // the call's name; itself inside a fn when that fn called this one
};

/// A dimension of a tensor parameter: either a compile-time constant (specialized dimension,
/// tunable, integer literal or parenthesized expression over them) or a runtime size (index
/// into Kernel::runtimeDims).
struct Dim {
  std::string name;         // as written ("D", "T", "128", "(C * 3 / 4)")
  int64_t constant = -1;    // >= 0 when known at compile time
  int runtimeDim = -1;      // index into Kernel::runtimeDims when constant < 0
  bool operator==(const Dim&) const = default;
};

/// A stride of a tensor dimension, in elements: a compile-time constant, a scalar parameter, or
/// (for default row-major layouts with a runtime inner size) a product computed by the ops
/// `Kernel::ops` at the start of the row (see `Op::strides`).
enum class ParamKind { Tensor, Scalar };

struct Param {
  std::string name;
  ParamKind kind = ParamKind::Scalar;
  Dtype dtype = Dtype::F32;  // element type (tensor) or scalar type (I32, I64, F32)
  bool isOutput = false;     // tensor declared `out`
  std::vector<Dim> dims;     // tensor only
  bool hasDefault = false;   // scalar only
  double defaultValue = 0;   // scalar only
  SourceLoc loc;
};

enum class OpCode {
  // Leaves. Scalars unless stated.
  ConstFloat,  // fval, type elem F32 (or F64-free: the interpreter keeps fp64)
  ConstInt,    // ival, type I64 (or I32)
  ScalarArg,   // param = index of a Scalar param
  DimArg,      // ival = index into Kernel::runtimeDims; type I64
  RowIndex,    // ival = index of the row variable (Kernel::rowVars); type I64
  // Memory.
  Load,        // param = tensor param index; operands = one index value per dim; slices = per
               // dim 0 (a scalar index) or the length n of a slice: elements operands[i] ..
               // +n, or 0 .. n when operands[i] == -1 (a whole ':' dim). The result is a scalar
               // without slices, else a row vector of the slices' elements in row-major order
               // (length = the product of the slice lengths). An index may also be an integer
               // row vector (at most one, loads only): a gather, which acts as the outermost
               // slice -- element (i, rest) reads index value i. strides = one value id per dim
               // (element strides). Result type: tensor dtype.
  Store,       // like Load, plus `value` = the value stored (already of the tensor's dtype).
               // No result.
  // Elementwise, scalar or vector (scalar operands broadcast over vector operands).
  Cast,        // operands[0] converted to type.elem (float narrowing: round to nearest even)
  Neg, Abs, Sqrt, Rsqrt, Exp, Not,
  // Math functions of one float operand (compiler/math/special_functions.h on the GPU).
  Tanh, Sigmoid, Erf, GeluTanh, Silu,
  Add, Sub, Mul, Div, Rem, Min, Max,
  CmpEq, CmpNe, CmpLt, CmpLe, CmpGt, CmpGe,  // result elem Bool
  And, Or,                                    // Bool operands
  Select,      // operands: cond, a, b
  // Reductions of a row vector to a scalar, in a fixed order.
  ReduceSum, ReduceMax, ReduceMin,
  // Row-vector building blocks. Vectors of different lengths in one kernel are views of the
  // same row at different granularities (kernels_dsl/README.md, "Lengths").
  Repeat,          // operands[0] = v (length L); ival = k. Result length k*L: element j = v[j / k].
  GroupReduceSum,  // operands[0] = v (length L); ival = G (L % G == 0). Result length L/G:
  GroupReduceMax,  //   element g reduces v[g*G .. g*G+G) in ascending order (NaN propagates
  GroupReduceMin,  //   through max/min, as in ReduceMax/ReduceMin).
  RotatePairs,     // operands: v (length 2P), c, s (length P), one float type. Result length 2P:
                   //   y[2i] = c_i*v[2i] - s_i*v[2i+1],  y[2i+1] = s_i*v[2i] + c_i*v[2i+1].
  // MXFP6 (docs/mxfp6-format.md); ival = mxVariant(format, mode).
  MxScale,         // operands[0] = v (bf16, length L, L % 32 == 0). Result u8, length L/32: the
                   //   E8M0 scale byte of each 32-element block (0xFF for a block with NaN/Inf).
  MxEncode,        // operands: v (bf16, length L), scales (u8, length L/32). Result u8, length L:
                   //   the 6-bit code of each element under its block's scale.
  Pack6,           // operands[0] = codes (u8, length L, L % 4 == 0). Result u8, length 3L/4:
                   //   four codes per 3 bytes, LSB first: w = c0 | c1<<6 | c2<<12 | c3<<18.
  Transpose,       // operands[0] = v (length L = R*W); ival = R. Result length L: v read as
                   //   an [R, W] row-major tile, written as its [W, R] transpose (element
                   //   w*R + r = v[r*W + w]). Tiles loaded through two slices become columns.
  Splat,           // operands[0] = a scalar. Result: a vector of `type.length` copies.
  Iota,            // Result: the i64 vector 0, 1, ..., type.length - 1.
  // Mutable variables and counted loops. Structured: each ForBegin has exactly one later ForEnd,
  // the ops between them are its body, loops nest, and a value defined in a body is used only
  // inside it (variables carry values out).
  VarInit,         // operands[0] = the initial value. Declares a variable of type `type`, named
                   //   by this op's id.
  VarRead,         // ival = the VarInit's id. Result: the variable's current value.
  VarWrite,        // ival = the VarInit's id; operands[0] = the new value (the variable's type).
  ForBegin,        // operands: start, end, step (i64 scalars; step > 0). Result: the i64
                   //   induction value start, start+step, ... while < end; zero trips if
                   //   start >= end. Bounds are evaluated once, before the first trip.
  ForEnd,          // ival = the matching ForBegin's id. No result.
};

/// MXFP6 element formats and scale modes, as DSL `variant` values and in Op::ival.
enum class MxFormat { E2M3 = 0, E3M2 = 1 };
enum class MxScaleMode { Rceil = 0, Even = 1, Floor = 2 };
inline int64_t mxVariant(MxFormat f, MxScaleMode m) { return int64_t(f) * 4 + int64_t(m); }
inline MxFormat mxFormat(int64_t ival) { return MxFormat(ival / 4); }
inline MxScaleMode mxScaleMode(int64_t ival) { return MxScaleMode(ival % 4); }

const char* opName(OpCode c);

struct Op {
  OpCode code = OpCode::ConstInt;
  ValueType type;              // result type (unused for Store)
  std::vector<int> operands;   // value ids (= indices of earlier ops); -1 marks a ':' index
  std::vector<int> strides;    // Load/Store: one value id per tensor dim
  std::vector<int64_t> slices; // Load/Store: one per tensor dim, 0 or a slice length (see Load)
  int value = -1;              // Store: value id stored
  int param = -1;              // Load/Store: tensor param; ScalarArg: scalar param
  double fval = 0;             // ConstFloat
  int64_t ival = 0;            // ConstInt, DimArg, RowIndex
  std::string name;            // the DSL name bound to this value, if any (for dumps and IR names)
  SourceLoc loc;
};

/// The launch ABI of a compiled kernel, in argument order: one pointer per tensor param and one
/// value per scalar param (declaration order), then one i64 per runtime dim the body uses.
enum class AbiKind { Pointer, I32, I64, F32 };

struct AbiArg {
  AbiKind kind;
  std::string name;  // param or dim name
  int param = -1;    // param index, or -1 for a runtime dim
  int runtimeDim = -1;
};

struct Kernel {
  std::string name;
  SourceLoc loc;  // the declaration, where errors about the kernel as a whole point
  std::vector<Param> params;
  std::vector<std::string> runtimeDims;      // names of runtime sizes, first-appearance order
  std::vector<bool> runtimeDimUsedByBody;    // parallel to runtimeDims
  std::vector<std::string> rowVars;          // `row t, h in T, H` -> {"t", "h"}
  std::vector<int> rowDims;                  // runtime-dim index of each row var's extent, or -1
                                             // when the extent is a compile-time constant:
  std::vector<int64_t> rowConstExtents;      // parallel to rowDims; used where rowDims[i] == -1
  std::map<std::string, int64_t> config;     // every specialized size and tunable, bound
  std::vector<std::string> tunables;         // the keys of config that are tunables, declaration order
  std::map<std::string, SourceLoc> configLocs;  // where each key of config is declared (its
                                                // `tune`, `specialize` or `variant` entry)
  int64_t rowsPerProgram = 1;                // ROWS
  int64_t threadsPerRow = 1;                 // THREADS
  int64_t vectorWidth = 1;                   // VEC
  std::vector<Op> ops;                       // executed in order, once per row

  std::vector<AbiArg> abi() const;
  /// The bound value of `name` (a tunable or specialized size); `absent` where the kernel has none.
  int64_t configValue(const std::string& name, int64_t absent) const {
    auto it = config.find(name);
    return it == config.end() ? absent : it->second;
  }
};

}  // namespace mxfp6::kir
