#include "compiler/frontend/parser.h"

#include <algorithm>
#include <utility>

#include "compiler/frontend/lexer.h"

namespace mxfp6::frontend {
namespace {

using ast::Expr;
using ast::ExprKind;
using ast::ExprPtr;

std::optional<kir::Dtype> dtypeFromName(std::string_view s) {
  if (s == "bf16") return kir::Dtype::BF16;
  if (s == "f16") return kir::Dtype::F16;
  if (s == "f32") return kir::Dtype::F32;
  if (s == "i32") return kir::Dtype::I32;
  if (s == "i64") return kir::Dtype::I64;
  if (s == "u8") return kir::Dtype::U8;
  return std::nullopt;
}

class Parser {
 public:
  Parser(const std::string& file, std::string_view source, std::vector<Token> tokens,
         DiagnosticEngine& diags)
      : file_(file), source_(source), tokens_(std::move(tokens)), diags_(diags) {}

  /// file ::= (kernel | fn)*
  std::optional<ast::File> parseFile() {
    ast::File file;
    while (!at(TokenKind::Eof)) {
      if (at(TokenKind::KwFn)) {
        auto fn = parseFn();
        if (!fn) return std::nullopt;
        file.fns.push_back(std::move(*fn));
        continue;
      }
      if (!at(TokenKind::KwKernel))
        return fail(cur(), "expected 'kernel' or 'fn', found " + describe(cur()));
      auto kernel = parseKernel();
      if (!kernel) return std::nullopt;
      file.kernels.push_back(std::move(*kernel));
    }
    return file;
  }

 private:
  // ---- token helpers ----

  const Token& cur() const { return tokens_[pos_]; }
  bool at(TokenKind k) const { return cur().kind == k; }
  const Token& take() {
    const Token& t = tokens_[pos_];
    prevEnd_ = t.offset + t.text.size();
    if (t.kind != TokenKind::Eof) ++pos_;
    return t;
  }
  /// The token after the current one (Eof at the end).
  const Token& next() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  bool consume(TokenKind k) {
    if (!at(k)) return false;
    take();
    return true;
  }
  kir::SourceLoc loc(const Token& t) const { return {file_, t.line, t.col}; }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::Eof:
        return "end of file";
      case TokenKind::String:
        return "a string";
      default: {
        std::string text(t.text.substr(0, 32));
        return "'" + text + (t.text.size() > 32 ? "...'" : "'");
      }
    }
  }

  /// Reports `message` at `t`; returns an empty optional of whatever the caller returns.
  struct Failure {
    template <typename T>
    operator std::optional<T>() const {
      return std::nullopt;
    }
  };
  Failure fail(const Token& t, std::string message) {
    diags_.error(loc(t), std::move(message));
    return {};
  }

  /// Takes a token of kind `k`, or reports "expected <k> <context>, found <token>".
  std::optional<Token> expect(TokenKind k, std::string_view context) {
    if (at(k)) return take();
    return fail(cur(), "expected " + tokenKindName(k) + " " + std::string(context) + ", found " +
                           describe(cur()));
  }

  std::optional<ast::NameDecl> expectName(std::string_view context) {
    auto t = expect(TokenKind::Ident, context);
    if (!t) return std::nullopt;
    return ast::NameDecl{std::string(t->text), loc(*t)};
  }

  // ---- declarations ----

  /// kernel ::= 'kernel' ident '(' param (',' param)* ')' clause* '{' row_block '}'
  std::optional<ast::KernelDecl> parseKernel() {
    take();
    auto name = expectName("as the kernel name");
    if (!name || !expect(TokenKind::LParen, "after the kernel name")) return std::nullopt;
    ast::KernelDecl kernel;
    kernel.name = name->name;
    kernel.loc = name->loc;
    do {
      auto param = parseParam();
      if (!param) return std::nullopt;
      kernel.params.push_back(std::move(*param));
    } while (consume(TokenKind::Comma));
    if (!expect(TokenKind::RParen, "after the parameters")) return std::nullopt;
    while (at(TokenKind::KwSpecialize) || at(TokenKind::KwTune) || at(TokenKind::KwRequire) ||
           at(TokenKind::KwVariant)) {
      if (!parseClause(kernel)) return std::nullopt;
    }
    if (!expect(TokenKind::LBrace, "to open the kernel body")) return std::nullopt;
    auto row = parseRowBlock();
    if (!row) return std::nullopt;
    kernel.row = std::move(*row);
    if (!expect(TokenKind::RBrace, "to close the kernel body")) return std::nullopt;
    return kernel;
  }

  /// param       ::= ident ':' tensor_type | ident ':' scalar_type ('=' '-'? number)?
  /// tensor_type ::= ('out')? dtype '[' dim (',' dim)* ']'
  ///                 ('strides' '(' stride (',' stride)* ')')?
  /// `out` is accepted before any type here, so that the checks can say why it is wrong on a
  /// scalar.
  std::optional<ast::ParamDecl> parseParam() {
    auto name = expectName("as a parameter name");
    if (!name || !expect(TokenKind::Colon, "after the parameter name")) return std::nullopt;
    ast::ParamDecl param;
    param.name = name->name;
    param.loc = name->loc;
    if (at(TokenKind::KwOut)) {
      param.isOut = true;
      param.outLoc = loc(take());
    }
    auto typeTok = expect(TokenKind::Ident, "as the parameter type");
    if (!typeTok) return std::nullopt;
    auto dtype = dtypeFromName(typeTok->text);
    if (!dtype)
      return fail(*typeTok, "unknown type '" + std::string(typeTok->text) +
                                "'; types are bf16, f16, f32, i32, i64 and u8");
    param.dtype = *dtype;
    param.typeLoc = loc(*typeTok);
    if (consume(TokenKind::LBracket)) {
      param.isTensor = true;
      if (!parseSizeList(param.dims, TokenKind::RBracket, "after the dimensions",
                         /*allowExpr=*/true))
        return std::nullopt;
      if (at(TokenKind::KwStrides)) {
        param.stridesLoc = loc(take());
        if (!expect(TokenKind::LParen, "after 'strides'") ||
            !parseSizeList(param.strides, TokenKind::RParen, "after the strides"))
          return std::nullopt;
      }
    } else if (consume(TokenKind::Assign)) {
      auto value = parseSignedNumber();
      if (!value) return std::nullopt;
      param.defaultValue = *value;
    }
    return param;
  }

  /// Parses `size (',' size)* close`, where (with `allowExpr`)
  /// dim ::= ident | integer | '(' expr ')'   and otherwise   stride ::= ident | integer
  bool parseSizeList(std::vector<ast::SizeRef>& out, TokenKind close, std::string_view context,
                     bool allowExpr = false) {
    do {
      const Token& t = cur();
      ast::SizeRef size;
      size.loc = loc(t);
      if (t.kind == TokenKind::Ident) {
        size.name = std::string(t.text);
        take();
      } else if (t.kind == TokenKind::Int) {
        size.value = t.intValue;
        take();
      } else if (allowExpr && t.kind == TokenKind::LParen) {
        size_t begin = t.offset;
        take();
        auto e = parseExpr();
        if (!e || !expect(TokenKind::RParen, "to close the dimension expression")) return false;
        size.expr = std::move(*e);
        size.exprText = std::string(source_.substr(begin, prevEnd_ - begin));
      } else {
        fail(t, std::string(allowExpr ? "expected a size name, an integer or '(', found "
                                      : "expected a size name or an integer, found ") +
                    describe(t));
        return false;
      }
      out.push_back(std::move(size));
    } while (consume(TokenKind::Comma));
    return expect(close, context).has_value();
  }

  /// '-'? number
  std::optional<ast::Number> parseSignedNumber() {
    const Token& first = cur();
    bool negative = consume(TokenKind::Minus);
    const Token& t = cur();
    if (t.kind != TokenKind::Int && t.kind != TokenKind::Float)
      return fail(t, "expected a number as the default value, found " + describe(t));
    take();
    ast::Number n;
    n.loc = loc(first);
    n.isFloat = t.kind == TokenKind::Float;
    n.intValue = negative ? -t.intValue : t.intValue;
    n.floatValue = negative ? -t.floatValue : t.floatValue;
    return n;
  }

  /// clause ::= 'specialize' spec (',' spec)*
  ///          | 'tune' tunable (',' tunable)*
  ///          | 'require' expr (':' string)?
  ///          | 'variant' choice (',' choice)*
  bool parseClause(ast::KernelDecl& kernel) {
    if (consume(TokenKind::KwSpecialize)) {
      do {
        auto spec = parseSpec();
        if (!spec) return false;
        kernel.specs.push_back(std::move(*spec));
      } while (consume(TokenKind::Comma));
      return true;
    }
    if (consume(TokenKind::KwTune)) {
      do {
        auto tunable = parseTunable();
        if (!tunable) return false;
        kernel.tunables.push_back(std::move(*tunable));
      } while (consume(TokenKind::Comma));
      return true;
    }
    if (consume(TokenKind::KwVariant)) {
      do {
        auto variant = parseVariant();
        if (!variant) return false;
        kernel.variants.push_back(std::move(*variant));
      } while (consume(TokenKind::Comma));
      return true;
    }
    auto require = parseRequire();
    if (!require) return false;
    kernel.constraints.push_back(std::move(*require));
    return true;
  }

  /// spec ::= ident ('=' integer)?
  std::optional<ast::SpecDecl> parseSpec() {
    auto name = expectName("as a specialized size");
    if (!name) return std::nullopt;
    ast::SpecDecl spec{name->name, name->loc, std::nullopt};
    if (consume(TokenKind::Assign)) {
      auto value = expect(TokenKind::Int, "as the default size");
      if (!value) return std::nullopt;
      spec.defaultValue = value->intValue;
    }
    return spec;
  }

  /// tunable ::= ident 'in' '{' integer (',' integer)* '}' ('=' integer)?
  std::optional<ast::TunableDecl> parseTunable() {
    auto name = expectName("as a tunable name");
    if (!name || !expect(TokenKind::KwIn, "after the tunable name") ||
        !expect(TokenKind::LBrace, "to open the candidate set"))
      return std::nullopt;
    ast::TunableDecl tunable;
    tunable.name = name->name;
    tunable.loc = name->loc;
    do {
      auto value = expect(TokenKind::Int, "as a candidate value");
      if (!value) return std::nullopt;
      tunable.values.push_back(value->intValue);
    } while (consume(TokenKind::Comma));
    if (!expect(TokenKind::RBrace, "to close the candidate set")) return std::nullopt;
    if (consume(TokenKind::Assign)) {
      auto value = expect(TokenKind::Int, "as the default value");
      if (!value) return std::nullopt;
      tunable.defaultValue = value->intValue;
      tunable.defaultLoc = loc(*value);
    }
    return tunable;
  }

  /// choice ::= ident 'in' '{' ident (',' ident)* '}' ('=' ident)?
  std::optional<ast::VariantDecl> parseVariant() {
    auto name = expectName("as a variant name");
    if (!name || !expect(TokenKind::KwIn, "after the variant name") ||
        !expect(TokenKind::LBrace, "to open the variant's values"))
      return std::nullopt;
    ast::VariantDecl variant;
    variant.name = name->name;
    variant.loc = name->loc;
    if (!parseNameList(variant.values, "as a variant value") ||
        !expect(TokenKind::RBrace, "to close the variant's values"))
      return std::nullopt;
    if (consume(TokenKind::Assign)) {
      auto value = expectName("as the default value");
      if (!value) return std::nullopt;
      variant.defaultValue = std::move(*value);
    }
    return variant;
  }

  /// 'require' expr (':' string)?
  std::optional<ast::RequireDecl> parseRequire() {
    ast::RequireDecl require;
    require.loc = loc(take());
    size_t begin = cur().offset;
    auto condition = parseExpr();
    if (!condition) return std::nullopt;
    require.condition = std::move(*condition);
    require.text = std::string(source_.substr(begin, prevEnd_ - begin));
    if (consume(TokenKind::Colon)) {
      auto message = expect(TokenKind::String, "as the constraint's message");
      if (!message) return std::nullopt;
      require.message = std::string(message->text.substr(1, message->text.size() - 2));
    }
    return require;
  }

  /// fn ::= 'fn' ident '(' (ident (',' ident)*)? ')' '{' stmt* ('return' expr)? '}'
  std::optional<ast::FnDecl> parseFn() {
    take();
    auto name = expectName("as the fn name");
    if (!name || !expect(TokenKind::LParen, "after the fn name")) return std::nullopt;
    ast::FnDecl fn;
    fn.name = name->name;
    fn.loc = name->loc;
    if (!at(TokenKind::RParen) && !parseNameList(fn.params, "as a parameter of the fn"))
      return std::nullopt;
    if (!expect(TokenKind::RParen, "after the fn's parameters") ||
        !expect(TokenKind::LBrace, "to open the fn's body"))
      return std::nullopt;
    while (!at(TokenKind::RBrace) && !at(TokenKind::KwReturn)) {
      auto stmt = parseStmt();
      if (!stmt) return std::nullopt;
      fn.body.push_back(std::move(*stmt));
    }
    if (consume(TokenKind::KwReturn)) {
      auto result = parseExpr();
      if (!result) return std::nullopt;
      fn.result = std::move(*result);
      if (!at(TokenKind::RBrace))
        return fail(cur(), "expected '}' after the returned value ('return' ends a fn's body), "
                           "found " + describe(cur()));
    }
    take();
    return fn;
  }

  /// row_block ::= 'row' ident (',' ident)* 'in' extent (',' extent)* '{' stmt* '}'
  /// extent ::= ident | integer | '(' expr ')'
  std::optional<ast::RowBlock> parseRowBlock() {
    auto rowTok = expect(TokenKind::KwRow, "to start the row block");
    if (!rowTok) return std::nullopt;
    ast::RowBlock row;
    row.loc = loc(*rowTok);
    if (!parseNameList(row.vars, "as a row variable") ||
        !expect(TokenKind::KwIn, "after the row variables") ||
        !parseSizeList(row.extents, TokenKind::LBrace, "to open the row block", /*allowExpr=*/true))
      return std::nullopt;
    if (!parseStmtsUntilBrace(row.body)) return std::nullopt;
    return row;
  }

  /// stmt* '}'   -- `closeLoc`, when given, receives the location of the '}'
  bool parseStmtsUntilBrace(std::vector<ast::Stmt>& out, kir::SourceLoc* closeLoc = nullptr) {
    while (!at(TokenKind::RBrace)) {
      auto stmt = parseStmt();
      if (!stmt) return false;
      out.push_back(std::move(*stmt));
    }
    const Token& close = take();
    if (closeLoc) *closeLoc = loc(close);
    return true;
  }

  bool parseNameList(std::vector<ast::NameDecl>& out, std::string_view context) {
    do {
      auto name = expectName(context);
      if (!name) return false;
      out.push_back(std::move(*name));
    } while (consume(TokenKind::Comma));
    return true;
  }

  // ---- statements and expressions ----

  /// stmt ::= ident '=' expr | ident '[' index (',' index)* ']' '=' expr
  ///        | 'var' ident '=' expr
  ///        | 'for' ident 'in' expr '..' expr ('step' expr)? '{' stmt* '}'
  ///        | ident '(' (expr (',' expr)*)? ')'      -- a fn called for its stores
  std::optional<ast::Stmt> parseStmt() {
    if (at(TokenKind::KwFor)) return parseFor();
    if (at(TokenKind::KwReturn)) return fail(cur(), "'return' can only end a fn's body");
    if (at(TokenKind::Ident) && next().kind == TokenKind::LParen) {
      ast::Stmt stmt;
      stmt.kind = ast::Stmt::Kind::Call;
      stmt.name = std::string(cur().text);
      stmt.loc = loc(cur());
      auto call = parsePrimary();
      if (!call) return std::nullopt;
      stmt.value = std::move(*call);
      return stmt;
    }
    if (at(TokenKind::KwVar)) {
      take();
      auto name = expectName("as the variable name");
      if (!name || !expect(TokenKind::Assign, "after the variable name")) return std::nullopt;
      auto value = parseExpr();
      if (!value) return std::nullopt;
      ast::Stmt stmt;
      stmt.kind = ast::Stmt::Kind::Var;
      stmt.name = name->name;
      stmt.loc = name->loc;
      stmt.value = std::move(*value);
      return stmt;
    }
    if (!at(TokenKind::Ident))
      return fail(cur(),
                  "expected a statement ('name = ...', 'tensor[...] = ...', 'var', 'for' or "
                  "'fn(...)') or '}', found " +
                      describe(cur()));
    const Token& nameTok = take();
    ast::Stmt stmt;
    stmt.name = std::string(nameTok.text);
    stmt.loc = loc(nameTok);
    if (consume(TokenKind::LBracket)) {
      stmt.kind = ast::Stmt::Kind::Store;
      if (!parseIndexList(stmt.indices)) return std::nullopt;
    }
    if (!expect(TokenKind::Assign, "in the statement")) return std::nullopt;
    auto value = parseExpr();
    if (!value) return std::nullopt;
    stmt.value = std::move(*value);
    return stmt;
  }

  /// 'for' ident 'in' expr '..' expr ('step' expr)? '{' stmt* '}'
  std::optional<ast::Stmt> parseFor() {
    const Token& forTok = take();
    if (loopDepth_ >= kMaxLoopDepth)
      return fail(forTok, "loops nest more than " + std::to_string(kMaxLoopDepth) + " levels deep");
    ast::Stmt stmt;
    stmt.kind = ast::Stmt::Kind::For;
    stmt.loc = loc(forTok);
    auto name = expectName("as the loop index");
    if (!name || !expect(TokenKind::KwIn, "after the loop index")) return std::nullopt;
    stmt.name = name->name;
    stmt.nameLoc = name->loc;
    auto start = parseExpr();
    if (!start || !expect(TokenKind::DotDot, "between the bounds of the loop"))
      return std::nullopt;
    stmt.value = std::move(*start);
    auto end = parseExpr();
    if (!end) return std::nullopt;
    stmt.end = std::move(*end);
    if (consume(TokenKind::KwStep)) {
      auto step = parseExpr();
      if (!step) return std::nullopt;
      stmt.step = std::move(*step);
    }
    if (!expect(TokenKind::LBrace, "to open the loop body")) return std::nullopt;
    ++loopDepth_;
    bool ok = parseStmtsUntilBrace(stmt.body, &stmt.endLoc);
    --loopDepth_;
    if (!ok) return std::nullopt;
    return stmt;
  }

  /// index (',' index)* ']'   where   index ::= ':' | expr (':' expr)?
  /// (`start : n` is the slice of n elements from start; a '?:' inside `start` takes its own ':')
  bool parseIndexList(std::vector<ExprPtr>& out) {
    do {
      if (at(TokenKind::Colon)) {
        auto slice = std::make_unique<Expr>();
        slice->kind = ExprKind::Slice;
        slice->loc = loc(take());
        out.push_back(std::move(slice));
        continue;
      }
      auto index = parseExpr();
      if (!index) return false;
      if (at(TokenKind::Colon)) {
        auto slice = std::make_unique<Expr>();
        slice->kind = ExprKind::Slice;
        slice->loc = loc(take());
        auto length = parseExpr();
        if (!length) return false;
        slice->height = 1 + std::max((*index)->height, (*length)->height);
        slice->operands.push_back(std::move(*index));
        slice->operands.push_back(std::move(*length));
        out.push_back(std::move(slice));
        continue;
      }
      out.push_back(std::move(*index));
    } while (consume(TokenKind::Comma));
    return expect(TokenKind::RBracket, "after the indices").has_value();
  }

  /// Counts the nesting of recursive parse calls; the parser gives up past kMaxExprDepth.
  class DepthGuard {
   public:
    explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
    ~DepthGuard() { --depth_; }
    bool tooDeep() const { return depth_ > kMaxExprDepth; }

   private:
    int& depth_;
  };

  Failure tooDeep(const Token& t) {
    return fail(t, "expression nests more than " + std::to_string(kMaxExprDepth) + " levels deep");
  }

  /// Makes an operator node over `operands`, or reports that the tree got too deep.
  std::optional<ExprPtr> makeNode(ExprKind kind, const Token& at, std::vector<ExprPtr> operands) {
    auto node = std::make_unique<Expr>();
    node->kind = kind;
    node->loc = loc(at);
    for (const ExprPtr& e : operands) node->height = std::max(node->height, e->height + 1);
    node->operands = std::move(operands);
    if (node->height > kMaxExprDepth) return tooDeep(at);
    return node;
  }

  std::optional<ExprPtr> makeBinary(ast::BinaryOp op, const Token& at, ExprPtr lhs, ExprPtr rhs) {
    std::vector<ExprPtr> operands;
    operands.push_back(std::move(lhs));
    operands.push_back(std::move(rhs));
    auto node = makeNode(ExprKind::Binary, at, std::move(operands));
    if (node) (*node)->binaryOp = op;
    return node;
  }

  /// expr ::= ternary
  std::optional<ExprPtr> parseExpr() {
    DepthGuard guard(depth_);
    if (guard.tooDeep()) return tooDeep(cur());
    return parseTernary();
  }

  /// ternary ::= or ('?' expr ':' expr)?
  std::optional<ExprPtr> parseTernary() {
    auto cond = parseOr();
    if (!cond || !at(TokenKind::Question)) return cond;
    const Token& q = take();
    auto a = parseExpr();
    if (!a || !expect(TokenKind::Colon, "between the arms of '?'")) return std::nullopt;
    auto b = parseExpr();
    if (!b) return std::nullopt;
    std::vector<ExprPtr> operands;
    operands.push_back(std::move(*cond));
    operands.push_back(std::move(*a));
    operands.push_back(std::move(*b));
    return makeNode(ExprKind::Ternary, q, std::move(operands));
  }

  /// Parses `operand (op operand)*` left-associatively, for the operators in `ops`.
  template <typename OperandFn>
  std::optional<ExprPtr> parseLeftAssoc(
      std::initializer_list<std::pair<TokenKind, ast::BinaryOp>> ops, OperandFn operand) {
    auto lhs = (this->*operand)();
    while (lhs) {
      auto op = std::find_if(ops.begin(), ops.end(), [&](auto& p) { return at(p.first); });
      if (op == ops.end()) return lhs;
      const Token& opTok = take();
      auto rhs = (this->*operand)();
      if (!rhs) return std::nullopt;
      lhs = makeBinary(op->second, opTok, std::move(*lhs), std::move(*rhs));
    }
    return lhs;
  }

  /// or ::= and ('||' and)*
  std::optional<ExprPtr> parseOr() {
    return parseLeftAssoc({{TokenKind::OrOr, ast::BinaryOp::Or}}, &Parser::parseAnd);
  }

  /// and ::= cmp ('&&' cmp)*
  std::optional<ExprPtr> parseAnd() {
    return parseLeftAssoc({{TokenKind::AndAnd, ast::BinaryOp::And}}, &Parser::parseCmp);
  }

  /// cmp ::= add (('=='|'!='|'<'|'<='|'>'|'>=') add)?
  std::optional<ExprPtr> parseCmp() {
    static constexpr std::pair<TokenKind, ast::BinaryOp> kOps[] = {
        {TokenKind::Eq, ast::BinaryOp::Eq}, {TokenKind::Ne, ast::BinaryOp::Ne},
        {TokenKind::Lt, ast::BinaryOp::Lt}, {TokenKind::Le, ast::BinaryOp::Le},
        {TokenKind::Gt, ast::BinaryOp::Gt}, {TokenKind::Ge, ast::BinaryOp::Ge},
    };
    auto isCmp = [&] {
      return std::find_if(std::begin(kOps), std::end(kOps), [&](auto& p) { return at(p.first); });
    };
    auto lhs = parseAdd();
    auto op = isCmp();
    if (!lhs || op == std::end(kOps)) return lhs;
    const Token& opTok = take();
    auto rhs = parseAdd();
    if (!rhs) return std::nullopt;
    if (isCmp() != std::end(kOps))
      return fail(cur(), "comparisons do not chain; use '&&' or parentheses");
    return makeBinary(op->second, opTok, std::move(*lhs), std::move(*rhs));
  }

  /// add ::= mul (('+'|'-') mul)*
  std::optional<ExprPtr> parseAdd() {
    return parseLeftAssoc(
        {{TokenKind::Plus, ast::BinaryOp::Add}, {TokenKind::Minus, ast::BinaryOp::Sub}},
        &Parser::parseMul);
  }

  /// mul ::= unary (('*'|'/'|'%') unary)*
  std::optional<ExprPtr> parseMul() {
    return parseLeftAssoc({{TokenKind::Star, ast::BinaryOp::Mul},
                           {TokenKind::Slash, ast::BinaryOp::Div},
                           {TokenKind::Percent, ast::BinaryOp::Rem}},
                          &Parser::parseUnary);
  }

  /// unary ::= ('-'|'!') unary | postfix        postfix ::= primary
  std::optional<ExprPtr> parseUnary() {
    if (!at(TokenKind::Minus) && !at(TokenKind::Bang)) return parsePrimary();
    DepthGuard guard(depth_);
    if (guard.tooDeep()) return tooDeep(cur());
    const Token& opTok = take();
    auto operand = parseUnary();
    if (!operand) return std::nullopt;
    std::vector<ExprPtr> operands;
    operands.push_back(std::move(*operand));
    auto node = makeNode(ExprKind::Unary, opTok, std::move(operands));
    if (node)
      (*node)->unaryOp = opTok.kind == TokenKind::Minus ? ast::UnaryOp::Neg : ast::UnaryOp::Not;
    return node;
  }

  /// primary ::= number | ident | ident '(' (expr (',' expr)*)? ')'
  ///           | ident '[' index (',' index)* ']' | '(' expr ')'
  std::optional<ExprPtr> parsePrimary() {
    const Token& t = cur();
    if (t.kind == TokenKind::Int || t.kind == TokenKind::Float) {
      take();
      auto lit = std::make_unique<Expr>();
      lit->kind = t.kind == TokenKind::Int ? ExprKind::IntLit : ExprKind::FloatLit;
      lit->loc = loc(t);
      lit->intValue = t.intValue;
      lit->floatValue = t.floatValue;
      return lit;
    }
    if (consume(TokenKind::LParen)) {
      auto inner = parseExpr();
      if (!inner || !expect(TokenKind::RParen, "to close the parenthesis")) return std::nullopt;
      return inner;
    }
    if (t.kind != TokenKind::Ident) return fail(t, "expected an expression, found " + describe(t));
    take();
    std::vector<ExprPtr> operands;
    ExprKind kind = ExprKind::Name;
    if (consume(TokenKind::LParen)) {
      kind = ExprKind::Call;
      if (!at(TokenKind::RParen)) {
        do {
          auto arg = parseExpr();
          if (!arg) return std::nullopt;
          operands.push_back(std::move(*arg));
        } while (consume(TokenKind::Comma));
      }
      if (!expect(TokenKind::RParen, "after the arguments")) return std::nullopt;
    } else if (consume(TokenKind::LBracket)) {
      kind = ExprKind::Access;
      if (!parseIndexList(operands)) return std::nullopt;
    }
    auto node = makeNode(kind, t, std::move(operands));
    if (node) (*node)->name = std::string(t.text);
    return node;
  }

  const std::string& file_;
  std::string_view source_;
  std::vector<Token> tokens_;
  DiagnosticEngine& diags_;
  size_t pos_ = 0;
  size_t prevEnd_ = 0;  // end offset of the last token taken, for source text of constraints
  int depth_ = 0;
  int loopDepth_ = 0;  // loops around the statement being parsed
};

}  // namespace

std::optional<ast::File> parseAst(const std::string& file, std::string_view text,
                                  DiagnosticEngine& diags) {
  auto tokens = lex(file, text, diags);
  if (!tokens) return std::nullopt;
  return Parser(file, text, std::move(*tokens), diags).parseFile();
}

}  // namespace mxfp6::frontend
