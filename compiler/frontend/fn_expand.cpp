#include "compiler/frontend/fn_expand.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compiler/frontend/builtins.h"
#include "compiler/frontend/parser.h"

namespace mxfp6::frontend {
namespace {

using ast::Expr;
using ast::ExprKind;
using ast::ExprPtr;
using ast::Stmt;

/// An argument of a call: substituted for its parameter, or evaluated once into `bound`.
struct Arg {
  const Expr* expr;
  std::string bound;  // empty: substituted
};

/// One call being expanded: the fn, its arguments by parameter, and the suffix that renames
/// the names the fn binds.
struct Instance {
  const ast::FnDecl& fn;
  std::map<std::string, Arg> args;
  std::shared_ptr<const kir::FnCall> site;
  std::string suffix;  // "@3": '@' cannot appear in a name of the source
  bool tooDeep = false;
};

/// The names a fn declares with `var` anywhere in its body, as written.
std::set<std::string> declaredVars(const std::vector<Stmt>& stmts) {
  std::set<std::string> vars;
  for (const Stmt& s : stmts) {
    if (s.kind == Stmt::Kind::Var) vars.insert(s.name);
    if (s.kind == Stmt::Kind::For) vars.merge(declaredVars(s.body));
  }
  return vars;
}

/// The new names of the locals a fn has bound so far; a loop body works on a copy, so names
/// bound inside it do not outlive it.
using Locals = std::map<std::string, std::string>;

/// A name, a number, or operators over them: substituted for its parameter, since it may have
/// to stay a tensor's name, a size or a format, and costs nothing to repeat. Anything else (a
/// load, a builtin's result) is evaluated once, as a value bound before the fn's statements.
bool substituted(const Expr& arg) {
  switch (arg.kind) {
    case ExprKind::IntLit:
    case ExprKind::FloatLit:
    case ExprKind::Name:
      return true;
    case ExprKind::Unary:
    case ExprKind::Binary:
    case ExprKind::Ternary:
      for (const ExprPtr& operand : arg.operands)
        if (!substituted(*operand)) return false;
      return true;
    default:
      return false;
  }
}

bool hasStore(const std::vector<Stmt>& stmts, size_t first) {
  for (size_t i = first; i < stmts.size(); ++i)
    if (stmts[i].kind == Stmt::Kind::Store ||
        (stmts[i].kind == Stmt::Kind::For && hasStore(stmts[i].body, 0)))
      return true;
  return false;
}

class Expander {
 public:
  Expander(ast::File& file, DiagnosticEngine& diags) : file_(file), diags_(diags) {}

  void run() {
    const size_t errorsAtStart = diags_.diagnostics().size();
    checkDecls();
    std::vector<ast::KernelDecl> expanded;
    for (ast::KernelDecl& kernel : file_.kernels) {
      size_t errorsBefore = diags_.diagnostics().size();
      kernel_ = &kernel;
      expandedNodes_ = 0;
      overBudget_ = false;
      kernelVars_.assign(1, {});
      calls_ = 0;  // a kernel's renamed names do not depend on the kernels before it
      std::vector<Stmt> body;
      expandStmts(kernel.row.body, body);
      kernel.row.body = std::move(body);
      if (diags_.diagnostics().size() == errorsBefore) expanded.push_back(std::move(kernel));
    }
    file_.kernels = std::move(expanded);
    // A fn is checked only where it is called (with the caller's sizes), so one that no kernel
    // reaches would pass with any body. Reported only on a clean expansion: a kernel rejected
    // above may be the one that calls it.
    if (diags_.diagnostics().size() != errorsAtStart) return;
    for (const ast::FnDecl& fn : file_.fns)
      if (!called_.count(&fn))
        error(fn.loc, "fn '" + fn.name + "' is called by no kernel, so its body is never "
                      "checked: call it or delete it");
  }

 private:
  void error(const kir::SourceLoc& loc, std::string message) {
    diags_.error(loc, std::move(message));
  }

  void checkDecls() {
    for (const ast::FnDecl& fn : file_.fns) {
      if (findBuiltin(fn.name))
        error(fn.loc, "fn '" + fn.name + "' would hide the builtin of that name");
      else if (!fns_.emplace(fn.name, &fn).second)
        error(fn.loc, "fn '" + fn.name + "' is already defined");
      std::set<std::string> params;
      for (const ast::NameDecl& p : fn.params)
        if (!params.insert(p.name).second)
          error(p.loc, "fn '" + fn.name + "' has two parameters named '" + p.name + "'");
    }
  }

  const ast::FnDecl* findFn(const std::string& name) const {
    auto it = fns_.find(name);
    return it == fns_.end() ? nullptr : it->second;
  }

  bool overBudget() {
    if (expandedNodes_ <= kMaxExpandedNodes) return false;
    if (!overBudget_)
      error(kernel_->loc, "the fn calls of kernel '" + kernel_->name + "' expand to more than " +
                              std::to_string(kMaxExpandedNodes) + " statements and expressions");
    overBudget_ = true;
    return true;
  }

  // ---- expansion: statements that may call fns, in a kernel or in an expanded body ----

  /// Moves `in`'s statements to `out`, each call of a fn replaced by the fn's statements.
  void expandStmts(std::vector<Stmt>& in, std::vector<Stmt>& out) {
    for (Stmt& stmt : in) {
      if (overBudget()) return;
      bool ok = true;
      switch (stmt.kind) {
        case Stmt::Kind::Call:
          expandCallStmt(stmt, out);
          continue;
        case Stmt::Kind::Bind:
          ok = expandExpr(stmt.value, out, false);
          break;
        case Stmt::Kind::Var:
          ok = expandExpr(stmt.value, out, false);
          kernelVars_.back().insert(stmt.name);
          break;
        case Stmt::Kind::Store:
          for (ExprPtr& index : stmt.indices) ok = ok && expandExpr(index, out, false);
          ok = ok && expandExpr(stmt.value, out, false);
          break;
        case Stmt::Kind::For: {
          if (loopDepth_ >= kMaxLoopDepth) {
            error(stmt.loc, "loops nest more than " + std::to_string(kMaxLoopDepth) +
                                " levels deep once fn calls are expanded");
            continue;
          }
          ok = expandExpr(stmt.value, out, false) && expandExpr(stmt.end, out, false) &&
               (!stmt.step || expandExpr(stmt.step, out, false));
          std::vector<Stmt> body;
          kernelVars_.emplace_back();
          ++loopDepth_;
          expandStmts(stmt.body, body);
          --loopDepth_;
          kernelVars_.pop_back();
          stmt.body = std::move(body);
          break;
        }
      }
      if (!ok) continue;
      out.push_back(std::move(stmt));
    }
  }

  /// `f(args)` as a statement: f's statements, for its stores.
  void expandCallStmt(Stmt& stmt, std::vector<Stmt>& out) {
    Expr& call = *stmt.value;
    const ast::FnDecl* fn = findFn(call.name);
    if (!fn) {
      error(call.loc, findBuiltin(call.name)
                          ? "the value of builtin '" + call.name + "' is unused; bind it: name = " +
                                call.name + "(...)"
                          : "unknown function '" + call.name + "'");
      return;
    }
    if (fn->result) {
      error(call.loc, "fn '" + call.name + "' returns a value, which this call drops; bind it: "
                      "name = " + call.name + "(...)");
      return;
    }
    for (ExprPtr& arg : call.operands)
      if (!expandExpr(arg, out, false)) return;
    expandCall(*fn, call, out);
  }

  /// Expands the fn calls inside `e`, innermost first: their statements go to `out` and their
  /// returned expressions take their place. `inArm`: `e` is an arm of a '?', which a fn with
  /// stores may not be called in (its stores would not depend on the condition). False, with
  /// the error reported, when an expansion failed.
  bool expandExpr(ExprPtr& e, std::vector<Stmt>& out, bool inArm) {
    int height = 1;
    for (size_t i = 0; i < e->operands.size(); ++i) {
      bool arm = inArm || (e->kind == ExprKind::Ternary && i > 0);
      if (!expandExpr(e->operands[i], out, arm)) return false;
      height = std::max(height, e->operands[i]->height + 1);
    }
    e->height = height;
    if (height > kMaxExprDepth) {
      error(e->loc, "expression nests more than " + std::to_string(kMaxExprDepth) +
                        " levels deep once its fn calls are expanded");
      return false;
    }
    const ast::FnDecl* fn = e->kind == ExprKind::Call ? findFn(e->name) : nullptr;
    if (!fn) return true;  // a builtin, or a name the checks report as unknown
    if (!fn->result) {
      error(e->loc, "fn '" + e->name + "' returns no value; call it as a statement");
      return false;
    }
    size_t first = out.size();
    ExprPtr result = expandCall(*fn, *e, out);
    if (!result) return false;
    if (inArm && hasStore(out, first)) {
      error(e->loc, "fn '" + e->name + "' stores, so it cannot be called in an arm of '?': its "
                    "stores would happen whatever the condition");
      return false;
    }
    e = std::move(result);
    return true;
  }

  /// Appends the statements of `fn` called by `call` to `out`; returns its value (null when it
  /// returns none, or on an error, which is reported).
  ExprPtr expandCall(const ast::FnDecl& fn, const Expr& call, std::vector<Stmt>& out) {
    if (overBudget()) return nullptr;
    if (call.operands.size() != fn.params.size()) {
      error(call.loc, "fn '" + fn.name + "' takes " + std::to_string(fn.params.size()) +
                          " argument" + (fn.params.size() == 1 ? "" : "s") + ", got " +
                          std::to_string(call.operands.size()));
      return nullptr;
    }
    for (size_t i = 0; i < active_.size(); ++i) {
      if (active_[i].fn != &fn) continue;
      std::string chain;
      for (size_t j = i; j < active_.size(); ++j) chain += active_[j].fn->name + " -> ";
      error(call.loc, "fn '" + fn.name + "' calls itself (" + chain + fn.name + ")");
      return nullptr;
    }
    if (active_.size() >= kMaxFnCallDepth) {
      error(call.loc, "fn calls nest more than " + std::to_string(kMaxFnCallDepth) + " deep");
      return nullptr;
    }
    called_.insert(&fn);
    Instance inst{fn, {}, std::make_shared<kir::FnCall>(kir::FnCall{fn.name, call.loc}),
                  "@" + std::to_string(++calls_)};
    std::vector<Stmt> body;
    for (size_t i = 0; i < fn.params.size(); ++i) {
      const Expr& arg = *call.operands[i];
      Arg& a = inst.args[fn.params[i].name] = Arg{&arg, {}};
      if (substituted(arg)) continue;
      a.bound = fn.params[i].name + inst.suffix;
      Stmt bind;
      bind.kind = Stmt::Kind::Bind;
      bind.name = a.bound;
      bind.loc = arg.loc;
      bind.value = copyExpr(arg);
      body.push_back(std::move(bind));
    }
    size_t errorsBefore = diags_.diagnostics().size();
    Locals locals;
    for (Stmt& s : cloneStmts(fn.body, inst, locals)) body.push_back(std::move(s));
    ExprPtr result = fn.result ? cloneExpr(*fn.result, inst, locals) : nullptr;
    if (diags_.diagnostics().size() != errorsBefore) return nullptr;
    active_.push_back({&fn, declaredVars(fn.body)});
    expandStmts(body, out);
    bool ok = !result || expandExpr(result, out, false);
    active_.pop_back();
    return ok ? std::move(result) : nullptr;
  }

  // ---- instantiation: a fn's body cloned for one call ----

  kir::SourceLoc at(const kir::SourceLoc& loc, const Instance& inst) const {
    kir::SourceLoc l = loc;
    l.inCall = inst.site;
    return l;
  }

  std::vector<Stmt> cloneStmts(const std::vector<Stmt>& in, Instance& inst, Locals& locals) {
    std::vector<Stmt> out;
    for (const Stmt& s : in) {
      ++expandedNodes_;
      Stmt c;
      c.kind = s.kind;
      c.loc = at(s.loc, inst);
      switch (s.kind) {
        case Stmt::Kind::Bind:
        case Stmt::Kind::Var:
          c.value = cloneExpr(*s.value, inst, locals);
          c.name = boundName(s, inst, locals);
          break;
        case Stmt::Kind::Store:
          c.name = tensorName(s.name, s.loc, inst, locals);
          for (const ExprPtr& index : s.indices) c.indices.push_back(cloneExpr(*index, inst, locals));
          c.value = cloneExpr(*s.value, inst, locals);
          break;
        case Stmt::Kind::Call:
          c.name = s.name;
          c.value = cloneExpr(*s.value, inst, locals);
          break;
        case Stmt::Kind::For: {
          c.value = cloneExpr(*s.value, inst, locals);
          c.end = cloneExpr(*s.end, inst, locals);
          if (s.step) c.step = cloneExpr(*s.step, inst, locals);
          c.nameLoc = at(s.nameLoc, inst);
          c.endLoc = at(s.endLoc, inst);
          Locals inner = locals;
          c.name = declare(s.name, s.nameLoc, inst, inner);  // the loop index
          c.body = cloneStmts(s.body, inst, inner);
          break;
        }
      }
      out.push_back(std::move(c));
    }
    return out;
  }

  /// The name a `name = ...` or `var name = ...` of the fn binds or assigns.
  std::string boundName(const Stmt& s, const Instance& inst, Locals& locals) {
    if (s.kind == Stmt::Kind::Bind) {
      auto local = locals.find(s.name);
      if (local != locals.end()) return local->second;  // a variable of the fn, or a rebinding
      // Where it is called, `name = ...` would assign that variable: refused rather than
      // silently meaning something else. The callers are the kernel and the fns being expanded.
      bool callerVar = false;
      for (const std::set<std::string>& scope : kernelVars_) callerVar |= scope.count(s.name) > 0;
      for (const ActiveFn& caller : active_) callerVar |= caller.vars.count(s.name) > 0;
      if (callerVar && !inst.args.count(s.name))
        error(at(s.loc, inst), "fn '" + inst.fn.name + "' binds '" + s.name +
                                   "', a variable where it is called; a fn cannot assign its "
                                   "caller's variables: return the new value instead");
    }
    return declare(s.name, s.loc, inst, locals,
                   s.kind == Stmt::Kind::Bind ? "; values are immutable" : " and cannot be declared again");
  }

  /// A new local of the fn (a value, a variable or a loop index), renamed for this call;
  /// `whyNot` ends the error when `name` is a parameter.
  std::string declare(const std::string& name, const kir::SourceLoc& loc, const Instance& inst,
                      Locals& locals, const std::string& whyNot = " and cannot be declared again") {
    if (inst.args.count(name))
      error(at(loc, inst), "'" + name + "' is a parameter of fn '" + inst.fn.name + "'" + whyNot);
    return locals[name] = name + inst.suffix;
  }

  /// The tensor a fn indexes or stores into as `name`: a parameter's argument, which must then
  /// name a tensor, or a name of the kernel's (not a value the fn binds).
  std::string tensorName(const std::string& name, const kir::SourceLoc& loc, const Instance& inst,
                         const Locals& locals) {
    auto arg = inst.args.find(name);
    if (arg != inst.args.end()) {
      if (arg->second.expr->kind == ExprKind::Name) return arg->second.expr->name;
      error(arg->second.expr->loc, "fn '" + inst.fn.name + "' indexes its parameter '" + name +
                                  "' (line " + std::to_string(loc.line) +
                                  "), so its argument must be a tensor's name");
      return name;
    }
    if (locals.count(name))
      error(at(loc, inst), "'" + name + "' is a value fn '" + inst.fn.name + "' binds, not a tensor");
    return name;
  }

  /// `e` without its operands (height 1), counted toward the budget.
  ExprPtr copyNode(const Expr& e) {
    ++expandedNodes_;
    auto c = std::make_unique<Expr>();
    c->kind = e.kind;
    c->loc = e.loc;
    c->intValue = e.intValue;
    c->floatValue = e.floatValue;
    c->name = e.name;
    c->unaryOp = e.unaryOp;
    c->binaryOp = e.binaryOp;
    return c;
  }

  /// A copy of an argument, positions and all. Past the budget the copy is cut short (a leaf):
  /// the budget's error is reported and the expansion fails.
  ExprPtr copyExpr(const Expr& e) {
    ExprPtr c = copyNode(e);
    c->height = e.height;
    if (overBudget()) return c;
    for (const ExprPtr& operand : e.operands) c->operands.push_back(copyExpr(*operand));
    return c;
  }

  /// `e` of the fn's body for this call (cut short past the budget, as copyExpr).
  ExprPtr cloneExpr(const Expr& e, Instance& inst, const Locals& locals) {
    if (e.kind == ExprKind::Name) {
      auto arg = inst.args.find(e.name);
      if (arg != inst.args.end() && arg->second.bound.empty()) return copyExpr(*arg->second.expr);
    }
    ExprPtr c = copyNode(e);
    c->loc = at(e.loc, inst);
    if (e.kind == ExprKind::Access) {
      c->name = tensorName(e.name, e.loc, inst, locals);
    } else if (e.kind == ExprKind::Name) {
      auto arg = inst.args.find(e.name);
      auto local = locals.find(e.name);
      if (arg != inst.args.end())
        c->name = arg->second.bound;
      else if (local != locals.end())
        c->name = local->second;
    }
    if (overBudget()) return c;
    for (const ExprPtr& operand : e.operands) {
      c->operands.push_back(cloneExpr(*operand, inst, locals));
      c->height = std::max(c->height, c->operands.back()->height + 1);
    }
    if (c->height > kMaxExprDepth && !inst.tooDeep) {
      inst.tooDeep = true;
      error(c->loc, "expression nests more than " + std::to_string(kMaxExprDepth) +
                        " levels deep once the arguments of fn '" + inst.fn.name +
                        "' are substituted");
    }
    return c;
  }

  ast::File& file_;
  DiagnosticEngine& diags_;
  std::map<std::string, const ast::FnDecl*> fns_;
  std::set<const ast::FnDecl*> called_;  // the fns some kernel's expansion reached
  const ast::KernelDecl* kernel_ = nullptr;
  std::vector<std::set<std::string>> kernelVars_;  // `var`s in scope, outermost first
  struct ActiveFn {
    const ast::FnDecl* fn;
    std::set<std::string> vars;  // its `var`s, as written
  };
  std::vector<ActiveFn> active_;  // the fns being expanded, outermost first
  int loopDepth_ = 0;             // loops around the statements being expanded
  int calls_ = 0;
  int expandedNodes_ = 0;  // statements and expression nodes cloned for the current kernel
  bool overBudget_ = false;
};

}  // namespace

void expandFnCalls(ast::File& file, DiagnosticEngine& diags) {
  Expander(file, diags).run();
}

}  // namespace mxfp6::frontend
