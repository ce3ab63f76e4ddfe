// Text dumps of the AST and of KIR: stable (same input, same text) so tests and lit checks can
// match them, and readable enough to debug a kernel with.
#include <charconv>

#include "compiler/frontend/module_impl.h"

namespace mxfp6::frontend {
namespace {

/// Shortest text that reads back as `v`; always marked as a float ("1.0", "1e-06").
std::string formatFloat(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, ec == std::errc() ? end : buf);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

template <typename T, typename Fn>
std::string join(const std::vector<T>& items, Fn format) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + format(items[i]);
  return s;
}

std::string formatExpr(const ast::Expr& e) {
  using ast::ExprKind;
  switch (e.kind) {
    case ExprKind::IntLit:
      return std::to_string(e.intValue);
    case ExprKind::FloatLit:
      return formatFloat(e.floatValue);
    case ExprKind::Name:
      return e.name;
    case ExprKind::Slice:
      if (e.operands.empty()) return ":";
      return formatExpr(*e.operands[0]) + " : " + formatExpr(*e.operands[1]);
    case ExprKind::Call:
      return e.name + "(" + join(e.operands, [](auto& a) { return formatExpr(*a); }) + ")";
    case ExprKind::Access:
      return e.name + "[" + join(e.operands, [](auto& a) { return formatExpr(*a); }) + "]";
    case ExprKind::Unary:
      return std::string("(") + ast::unaryOpText(e.unaryOp) + formatExpr(*e.operands[0]) + ")";
    case ExprKind::Binary:
      return "(" + formatExpr(*e.operands[0]) + " " + ast::binaryOpText(e.binaryOp) + " " +
             formatExpr(*e.operands[1]) + ")";
    case ExprKind::Ternary:
      return "(" + formatExpr(*e.operands[0]) + " ? " + formatExpr(*e.operands[1]) + " : " +
             formatExpr(*e.operands[2]) + ")";
  }
  return "?";
}

std::string formatLoc(const kir::SourceLoc& loc) {
  return std::to_string(loc.line) + ":" + std::to_string(loc.col);
}

void dumpParam(const ast::ParamDecl& p, std::string& out) {
  out += "  param " + p.name + ": " + (p.isOut ? "out " : "") + kir::dtypeName(p.dtype);
  auto size = [](const ast::SizeRef& s) { return s.text(); };
  if (p.isTensor) out += "[" + join(p.dims, size) + "]";
  if (!p.strides.empty()) out += " strides(" + join(p.strides, size) + ")";
  if (p.defaultValue) {
    const ast::Number& n = *p.defaultValue;
    out += " = " + (n.isFloat ? formatFloat(n.floatValue) : std::to_string(n.intValue));
  }
  out += "\n";
}

std::string abiKindName(kir::AbiKind kind) {
  switch (kind) {
    case kir::AbiKind::Pointer:
      return "ptr";
    case kir::AbiKind::I32:
      return "i32";
    case kir::AbiKind::I64:
      return "i64";
    case kir::AbiKind::F32:
      return "f32";
  }
  return "?";
}

/// "e2m3", "rceil": the format and scale mode of an MX op's ival, lower case like types.
std::string lowerName(const char* name) {
  std::string s = name ? name : "?";
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}
std::string mxFormatName(int64_t ival) {
  return lowerName(variantValueName(VariantKind::Format, int64_t(kir::mxFormat(ival))));
}
std::string mxModeName(int64_t ival) {
  return lowerName(variantValueName(VariantKind::ScaleMode, int64_t(kir::mxScaleMode(ival))));
}

std::string valueRef(int id) { return id < 0 ? ":" : "%" + std::to_string(id); }

std::string formatOp(const kir::Kernel& k, const kir::Op& op) {
  using kir::OpCode;
  auto paramName = [&](int i) {
    return i >= 0 && i < static_cast<int>(k.params.size()) ? k.params[i].name : std::string("?");
  };
  // An index is %id, ':' for a whole dim, or %id:n for a slice of n elements from %id.
  auto access = [&] {
    std::vector<std::string> indices;
    for (size_t d = 0; d < op.operands.size(); ++d) {
      bool slice = d < op.slices.size() && op.slices[d] > 0;
      indices.push_back(valueRef(op.operands[d]) +
                        (slice && op.operands[d] >= 0 ? ":" + std::to_string(op.slices[d]) : ""));
    }
    return " @" + paramName(op.param) + "[" + join(indices, [](const std::string& x) { return x; }) +
           "] strides(" + join(op.strides, valueRef) + ")";
  };
  std::string type = kir::typeName(op.type);
  std::string s;
  switch (op.code) {
    case OpCode::ConstFloat:
      s = type + " " + formatFloat(op.fval);
      break;
    case OpCode::ConstInt:
      s = type + " " + std::to_string(op.ival);
      break;
    case OpCode::ScalarArg:
      s = type + " @" + paramName(op.param);
      break;
    case OpCode::DimArg:
      s = type + " @" +
          (op.ival >= 0 && op.ival < static_cast<int64_t>(k.runtimeDims.size())
               ? k.runtimeDims[op.ival]
               : std::string("?"));
      break;
    case OpCode::RowIndex:
      s = type + " @" +
          (op.ival >= 0 && op.ival < static_cast<int64_t>(k.rowVars.size()) ? k.rowVars[op.ival]
                                                                            : std::string("?"));
      break;
    case OpCode::Load:
      s = type + access();
      break;
    case OpCode::Store:
      s = type + access() + ", " + valueRef(op.value);
      break;
    case OpCode::Repeat:
      s = type + " " + join(op.operands, valueRef) + " x" + std::to_string(op.ival);
      break;
    case OpCode::Transpose:
      s = type + " " + join(op.operands, valueRef) + " rows " + std::to_string(op.ival);
      break;
    case OpCode::GroupReduceSum:
    case OpCode::GroupReduceMax:
    case OpCode::GroupReduceMin:
      s = type + " " + join(op.operands, valueRef) + " group " + std::to_string(op.ival);
      break;
    case OpCode::MxScale:
      s = type + " " + join(op.operands, valueRef) + " " + mxFormatName(op.ival) + " " +
          mxModeName(op.ival);
      break;
    case OpCode::MxEncode:  // the mode does not take part in encoding
      s = type + " " + join(op.operands, valueRef) + " " + mxFormatName(op.ival);
      break;
    case OpCode::VarRead:  // the variable: its VarInit
      s = type + " " + valueRef(static_cast<int>(op.ival));
      break;
    case OpCode::VarWrite:
      s = type + " " + valueRef(static_cast<int>(op.ival)) + ", " + join(op.operands, valueRef);
      break;
    case OpCode::ForEnd:  // the loop: its ForBegin
      return std::string(kir::opName(op.code)) + " " + valueRef(static_cast<int>(op.ival));
    default:
      s = type + " " + join(op.operands, valueRef);
      break;
  }
  return std::string(kir::opName(op.code)) + " " + s;
}

/// One statement per line, a loop's body indented under it and closed by '}'.
void dumpStmts(const std::vector<ast::Stmt>& stmts, const std::string& indent, std::string& out) {
  for (const ast::Stmt& stmt : stmts) {
    std::string loc = "  # " + formatLoc(stmt.loc) + "\n";
    switch (stmt.kind) {
      case ast::Stmt::Kind::Bind:
        out += indent + stmt.name + " = " + formatExpr(*stmt.value) + loc;
        break;
      case ast::Stmt::Kind::Store:
        out += indent + stmt.name + "[" +
               join(stmt.indices, [](auto& i) { return formatExpr(*i); }) +
               "] = " + formatExpr(*stmt.value) + loc;
        break;
      case ast::Stmt::Kind::Var:
        out += indent + "var " + stmt.name + " = " + formatExpr(*stmt.value) + loc;
        break;
      case ast::Stmt::Kind::For:
        out += indent + "for " + stmt.name + " in " + formatExpr(*stmt.value) + " .. " +
               formatExpr(*stmt.end) + (stmt.step ? " step " + formatExpr(*stmt.step) : "") +
               " {" + loc;
        dumpStmts(stmt.body, indent + "  ", out);
        out += indent + "}\n";
        break;
      case ast::Stmt::Kind::Call:
        out += indent + formatExpr(*stmt.value) + loc;
        break;
    }
  }
}

}  // namespace

std::string dumpAst(const Module& module) {
  std::string out;
  for (const ast::KernelDecl& k : module.impl().ast.kernels) {
    out += "kernel " + k.name + "  # " + formatLoc(k.loc) + "\n";
    for (const ast::ParamDecl& p : k.params) dumpParam(p, out);
    for (const ast::SpecDecl& s : k.specs)
      out += "  specialize " + s.name +
             (s.defaultValue ? " = " + std::to_string(*s.defaultValue) : "") + "\n";
    for (const ast::TunableDecl& t : k.tunables)
      out += "  tune " + t.name + " in " + t.candidatesText() +
             (t.defaultValue ? " = " + std::to_string(*t.defaultValue) : "") + "\n";
    for (const ast::VariantDecl& v : k.variants)
      out += "  variant " + v.name + " in " + v.valuesText() +
             (v.defaultValue ? " = " + v.defaultValue->name : "") + "\n";
    for (const ast::RequireDecl& r : k.constraints)
      out += "  require " + formatExpr(*r.condition) +
             (r.message.empty() ? "" : " : \"" + r.message + "\"") + "\n";
    auto name = [](const ast::NameDecl& n) { return n.name; };
    out += "  row " + join(k.row.vars, name) + " in " +
           join(k.row.extents, [](const ast::SizeRef& e) { return e.text(); }) + "\n";
    dumpStmts(k.row.body, "    ", out);
  }
  return out;
}

std::string dumpKir(const kir::Kernel& k) {
  std::string out = "kernel " + k.name + "  # " + k.loc.file + "\n";
  out += "  config";
  for (const auto& [key, value] : k.config) out += " " + key + "=" + std::to_string(value);
  out += "\n  schedule rows_per_program=" + std::to_string(k.rowsPerProgram) +
         " threads_per_row=" + std::to_string(k.threadsPerRow) +
         " vector_width=" + std::to_string(k.vectorWidth) + "\n";
  for (const kir::Param& p : k.params) {
    out += "  param " + p.name + ": " + (p.isOutput ? "out " : "") + kir::dtypeName(p.dtype);
    if (p.kind == kir::ParamKind::Tensor) {
      out += "[" +
             join(p.dims,
                  [](const kir::Dim& d) {
                    return d.constant >= 0 && d.name != std::to_string(d.constant)
                               ? d.name + "=" + std::to_string(d.constant)
                               : d.name;
                  }) +
             "]";
    }
    if (p.hasDefault) out += " = " + formatFloat(p.defaultValue);
    out += "\n";
  }
  for (size_t i = 0; i < k.runtimeDims.size(); ++i) {
    bool used = i < k.runtimeDimUsedByBody.size() && k.runtimeDimUsedByBody[i];
    out += "  runtime dim " + k.runtimeDims[i] + (used ? " (used by the body)" : " (shape only)") +
           "\n";
  }
  out += "  abi " +
         join(k.abi(), [](const kir::AbiArg& a) { return abiKindName(a.kind) + " " + a.name; }) +
         "\n";
  std::vector<std::string> extents;
  for (size_t i = 0; i < k.rowDims.size(); ++i) {
    int d = k.rowDims[i];
    if (d >= 0 && d < static_cast<int>(k.runtimeDims.size()))
      extents.push_back(k.runtimeDims[d]);
    else if (d < 0 && i < k.rowConstExtents.size())
      extents.push_back(std::to_string(k.rowConstExtents[i]));
    else
      extents.push_back("?");
  }
  auto text = [](const std::string& x) { return x; };
  out += "  row " + join(k.rowVars, text) + " in " + join(extents, text) + "\n";
  // A loop's body is indented under its ForBegin; its ForEnd lines up with the ForBegin.
  size_t depth = 0;
  for (size_t i = 0; i < k.ops.size(); ++i) {
    const kir::Op& op = k.ops[i];
    if (op.code == kir::OpCode::ForEnd && depth > 0) --depth;
    out += std::string(2 + 2 * depth, ' ');
    if (op.code == kir::OpCode::ForBegin) ++depth;
    bool hasResult = op.code != kir::OpCode::Store && op.code != kir::OpCode::VarWrite &&
                     op.code != kir::OpCode::ForEnd;
    if (hasResult) out += "%" + std::to_string(i) + " = ";
    out += formatOp(k, op);
    if (!op.name.empty()) out += "  ; " + op.name;
    out += "\n";
  }
  return out;
}

}  // namespace mxfp6::frontend
