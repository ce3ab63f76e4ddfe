// The syntax tree of a `.mxk` file, as written: names are not yet resolved and nothing is
// typed. Every node keeps the location of the construct it came from.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/kir.h"

namespace mxfp6::frontend::ast {

enum class ExprKind {
  IntLit,    // intValue
  FloatLit,  // floatValue
  Name,      // name
  Call,      // name(operands...): a builtin, or a fn of the file (expanded before the checks)
  Access,    // name[operands...]: element or row of a tensor, resolved by the '['
  Slice,     // an index of an Access: ':' (the whole dimension, no operands) or `start : n`
             // (operands: start, length)
  Unary,     // unaryOp operands[0]
  Binary,    // operands[0] binaryOp operands[1]
  Ternary,   // operands[0] ? operands[1] : operands[2]
};

enum class UnaryOp { Neg, Not };
enum class BinaryOp { Add, Sub, Mul, Div, Rem, Eq, Ne, Lt, Le, Gt, Ge, And, Or };

inline const char* unaryOpText(UnaryOp op) { return op == UnaryOp::Neg ? "-" : "!"; }

inline const char* binaryOpText(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "+";
    case BinaryOp::Sub:
      return "-";
    case BinaryOp::Mul:
      return "*";
    case BinaryOp::Div:
      return "/";
    case BinaryOp::Rem:
      return "%";
    case BinaryOp::Eq:
      return "==";
    case BinaryOp::Ne:
      return "!=";
    case BinaryOp::Lt:
      return "<";
    case BinaryOp::Le:
      return "<=";
    case BinaryOp::Gt:
      return ">";
    case BinaryOp::Ge:
      return ">=";
    case BinaryOp::And:
      return "&&";
    case BinaryOp::Or:
      return "||";
  }
  return "?";
}

inline bool isComparison(BinaryOp op) { return op >= BinaryOp::Eq && op <= BinaryOp::Ge; }
inline bool isLogical(BinaryOp op) { return op == BinaryOp::And || op == BinaryOp::Or; }

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;  // never null

struct Expr {
  ExprKind kind = ExprKind::IntLit;
  kir::SourceLoc loc;  // operators: the operator token; calls and accesses: the name
  int64_t intValue = 0;
  double floatValue = 0;
  std::string name;
  UnaryOp unaryOp = UnaryOp::Neg;
  BinaryOp binaryOp = BinaryOp::Add;
  std::vector<ExprPtr> operands;
  // Longest path to a leaf. The parser bounds it so that every recursive walk over a tree
  // (checks, lowering, dumps, destruction) has a bounded stack depth.
  int height = 1;
};

/// A tensor dimension or stride as written: a name, an integer, or (dimensions only) a
/// parenthesized compile-time expression such as `(C * 3 / 4)`.
struct SizeRef {
  std::string name;  // empty for an integer or an expression
  int64_t value = 0;
  kir::SourceLoc loc;  // the name, the integer, or the expression's '('
  ExprPtr expr;        // the expression, when the size is one (then `exprText` is its source)
  std::string exprText;  // "(C * 3 / 4)", parentheses included, as written
  bool isName() const { return !name.empty(); }
  bool isExpr() const { return expr != nullptr; }
  std::string text() const {
    return isExpr() ? exprText : isName() ? name : std::to_string(value);
  }
};

/// A scalar parameter's default value.
struct Number {
  bool isFloat = false;
  int64_t intValue = 0;
  double floatValue = 0;
  kir::SourceLoc loc;
};

struct ParamDecl {
  std::string name;
  kir::SourceLoc loc;
  bool isOut = false;
  kir::SourceLoc outLoc;
  kir::Dtype dtype = kir::Dtype::F32;
  kir::SourceLoc typeLoc;
  bool isTensor = false;
  std::vector<SizeRef> dims;     // tensors
  std::vector<SizeRef> strides;  // tensors; empty: row-major
  kir::SourceLoc stridesLoc;
  std::optional<Number> defaultValue;  // scalars
};

struct SpecDecl {
  std::string name;
  kir::SourceLoc loc;
  std::optional<int64_t> defaultValue;
};

struct TunableDecl {
  std::string name;
  kir::SourceLoc loc;
  std::vector<int64_t> values;
  std::optional<int64_t> defaultValue;
  kir::SourceLoc defaultLoc;
  int64_t effectiveDefault() const { return defaultValue ? *defaultValue : values.front(); }
  /// "{1, 2, 4}", for messages.
  std::string candidatesText() const {
    std::string s = "{";
    for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
    return s + "}";
  }
};

struct NameDecl {
  std::string name;
  kir::SourceLoc loc;
};

/// variant: `FMT in {E2M3, E3M2} = E3M2`. Value names are checked by the module checks.
struct VariantDecl {
  std::string name;
  kir::SourceLoc loc;
  std::vector<NameDecl> values;
  std::optional<NameDecl> defaultValue;
  const std::string& effectiveDefault() const {
    return defaultValue ? defaultValue->name : values.front().name;
  }
  /// "{E2M3, E3M2}", for messages.
  std::string valuesText() const {
    std::string s = "{";
    for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + values[i].name;
    return s + "}";
  }
};

struct RequireDecl {
  ExprPtr condition;
  std::string text;     // the condition's source text
  std::string message;  // without quotes; may be empty
  kir::SourceLoc loc;   // the 'require' keyword
};

/// A statement of a row body. Whether `name = expr` binds a new value or assigns a variable
/// depends on the names in scope, so both are Bind here; the checks and the lowering tell them
/// apart the same way (a `var` of that name in scope: an assignment).
struct Stmt {
  enum class Kind {
    Bind,   // name = value
    Store,  // name[indices] = value
    Var,    // var name = value
    For,    // for name in value .. end (step step)? { body }
    Call,   // value: a call of a fn for its stores; expanded away before the checks
  };
  Kind kind = Kind::Bind;
  std::string name;  // bound, assigned or declared name, the tensor stored into, or the loop index
  kir::SourceLoc loc;            // the name; For: the 'for' keyword
  std::vector<ExprPtr> indices;  // Store
  ExprPtr value;                 // For: the start
  // For only.
  kir::SourceLoc nameLoc;  // the loop index
  ExprPtr end;
  ExprPtr step;  // null: 1
  std::vector<Stmt> body;
  kir::SourceLoc endLoc;  // the closing '}'
};

struct RowBlock {
  kir::SourceLoc loc;
  std::vector<NameDecl> vars;
  std::vector<SizeRef> extents;  // runtime sizes, or compile-time sizes and expressions
  std::vector<Stmt> body;
};

struct KernelDecl {
  std::string name;
  kir::SourceLoc loc;
  std::vector<ParamDecl> params;
  std::vector<SpecDecl> specs;
  std::vector<TunableDecl> tunables;
  std::vector<VariantDecl> variants;
  std::vector<RequireDecl> constraints;
  RowBlock row;
};

/// fn name(params) { body (return result)? }: statements and an optional value, expanded at
/// every call (compiler/frontend/fn_expand.h).
struct FnDecl {
  std::string name;
  kir::SourceLoc loc;
  std::vector<NameDecl> params;
  std::vector<Stmt> body;
  ExprPtr result;  // null: the fn returns nothing and is called as a statement
};

struct File {
  std::vector<KernelDecl> kernels;
  std::vector<FnDecl> fns;
};

}  // namespace mxfp6::frontend::ast
