#include "compiler/frontend/lexer.h"

#include <charconv>
#include <cstdio>

namespace mxfp6::frontend {
namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

std::optional<TokenKind> keyword(std::string_view s) {
  static constexpr std::pair<std::string_view, TokenKind> kKeywords[] = {
      {"kernel", TokenKind::KwKernel},
      {"row", TokenKind::KwRow},
      {"in", TokenKind::KwIn},
      {"out", TokenKind::KwOut},
      {"specialize", TokenKind::KwSpecialize},
      {"tune", TokenKind::KwTune},
      {"require", TokenKind::KwRequire},
      {"variant", TokenKind::KwVariant},
      {"strides", TokenKind::KwStrides},
      {"var", TokenKind::KwVar},
      {"for", TokenKind::KwFor},
      {"step", TokenKind::KwStep},
      {"fn", TokenKind::KwFn},
      {"return", TokenKind::KwReturn},
  };
  for (const auto& [text, kind] : kKeywords)
    if (s == text) return kind;
  return std::nullopt;
}

class Lexer {
 public:
  Lexer(const std::string& file, std::string_view text, DiagnosticEngine& diags)
      : file_(file), text_(text), diags_(diags) {}

  std::optional<std::vector<Token>> run() {
    std::vector<Token> tokens;
    while (true) {
      skipSpaceAndComments();
      Token tok;
      tok.offset = pos_;
      tok.line = line_;
      tok.col = col_;
      if (atEnd()) {
        tokens.push_back(tok);
        return tokens;
      }
      if (!lexToken(tok)) return std::nullopt;
      tok.text = text_.substr(tok.offset, pos_ - tok.offset);
      tokens.push_back(tok);
    }
  }

 private:
  bool atEnd() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  void skipSpaceAndComments() {
    while (!atEnd()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '#') {
        while (!atEnd() && peek() != '\n') advance();
      } else {
        return;
      }
    }
  }

  bool fail(const Token& at, std::string message) {
    diags_.error({file_, at.line, at.col}, std::move(message));
    return false;
  }

  /// Lexes one token starting at the current position into `tok` (kind and value).
  bool lexToken(Token& tok) {
    char c = peek();
    if (isIdentStart(c)) {
      while (!atEnd() && isIdentChar(peek())) advance();
      std::string_view word = text_.substr(tok.offset, pos_ - tok.offset);
      tok.kind = keyword(word).value_or(TokenKind::Ident);
      return true;
    }
    if (isDigit(c)) return lexNumber(tok);
    if (c == '"') return lexString(tok);
    return lexPunctuation(tok);
  }

  /// number ::= digits ('.' digits)? ([eE] [+-]? digits)?   -- a '.' or exponent makes a float
  /// A '.' needs a digit after it, so `0..P` is 0, '..', P and never the float `0.`.
  bool lexNumber(Token& tok) {
    bool isFloat = false;
    while (isDigit(peek())) advance();
    if (peek() == '.' && isDigit(peek(1))) {
      isFloat = true;
      advance();
      while (isDigit(peek())) advance();
    }
    if ((peek() == 'e' || peek() == 'E') &&
        (isDigit(peek(1)) || ((peek(1) == '+' || peek(1) == '-') && isDigit(peek(2))))) {
      isFloat = true;
      advance();
      if (peek() == '+' || peek() == '-') advance();
      while (isDigit(peek())) advance();
    }
    std::string_view s = text_.substr(tok.offset, pos_ - tok.offset);
    const char* first = s.data();
    const char* last = s.data() + s.size();
    if (isFloat) {
      tok.kind = TokenKind::Float;
      auto [ptr, ec] = std::from_chars(first, last, tok.floatValue);
      if (ec != std::errc() || ptr != last)
        return fail(tok, "float literal '" + std::string(s) + "' is out of range");
    } else {
      tok.kind = TokenKind::Int;
      auto [ptr, ec] = std::from_chars(first, last, tok.intValue);
      if (ec != std::errc() || ptr != last)
        return fail(tok, "integer literal '" + std::string(s) + "' does not fit in 64 bits");
    }
    return true;
  }

  /// string ::= '"' (any character but '"' and newline)* '"'   -- no escapes
  bool lexString(Token& tok) {
    advance();
    while (!atEnd() && peek() != '"' && peek() != '\n') advance();
    if (peek() != '"') return fail(tok, "unterminated string");
    advance();
    tok.kind = TokenKind::String;
    return true;
  }

  bool lexPunctuation(Token& tok) {
    static constexpr std::pair<std::string_view, TokenKind> kTwoChar[] = {
        {"==", TokenKind::Eq}, {"!=", TokenKind::Ne},     {"<=", TokenKind::Le},
        {">=", TokenKind::Ge}, {"&&", TokenKind::AndAnd}, {"||", TokenKind::OrOr},
        {"..", TokenKind::DotDot},
    };
    static constexpr std::pair<char, TokenKind> kOneChar[] = {
        {'(', TokenKind::LParen},   {')', TokenKind::RParen},  {'[', TokenKind::LBracket},
        {']', TokenKind::RBracket}, {'{', TokenKind::LBrace},  {'}', TokenKind::RBrace},
        {',', TokenKind::Comma},    {':', TokenKind::Colon},   {'?', TokenKind::Question},
        {'=', TokenKind::Assign},   {'<', TokenKind::Lt},      {'>', TokenKind::Gt},
        {'+', TokenKind::Plus},     {'-', TokenKind::Minus},   {'*', TokenKind::Star},
        {'/', TokenKind::Slash},    {'%', TokenKind::Percent}, {'!', TokenKind::Bang},
    };
    std::string_view rest = text_.substr(pos_);
    for (const auto& [text, kind] : kTwoChar) {
      if (rest.substr(0, 2) == text) {
        advance();
        advance();
        tok.kind = kind;
        return true;
      }
    }
    for (const auto& [ch, kind] : kOneChar) {
      if (peek() == ch) {
        advance();
        tok.kind = kind;
        return true;
      }
    }
    unsigned char c = static_cast<unsigned char>(peek());
    if (c >= 0x20 && c < 0x7f)
      return fail(tok, std::string("unexpected character '") + static_cast<char>(c) + "'");
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", c);
    return fail(tok, std::string("unexpected byte ") + hex);
  }

  const std::string& file_;
  std::string_view text_;
  DiagnosticEngine& diags_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

}  // namespace

std::string tokenKindName(TokenKind kind) {
  switch (kind) {
    case TokenKind::Ident:
      return "an identifier";
    case TokenKind::Int:
      return "an integer";
    case TokenKind::Float:
      return "a number";
    case TokenKind::String:
      return "a string";
    case TokenKind::KwKernel:
      return "'kernel'";
    case TokenKind::KwRow:
      return "'row'";
    case TokenKind::KwIn:
      return "'in'";
    case TokenKind::KwOut:
      return "'out'";
    case TokenKind::KwSpecialize:
      return "'specialize'";
    case TokenKind::KwTune:
      return "'tune'";
    case TokenKind::KwRequire:
      return "'require'";
    case TokenKind::KwVariant:
      return "'variant'";
    case TokenKind::KwStrides:
      return "'strides'";
    case TokenKind::KwVar:
      return "'var'";
    case TokenKind::KwFor:
      return "'for'";
    case TokenKind::KwStep:
      return "'step'";
    case TokenKind::KwFn:
      return "'fn'";
    case TokenKind::KwReturn:
      return "'return'";
    case TokenKind::LParen:
      return "'('";
    case TokenKind::RParen:
      return "')'";
    case TokenKind::LBracket:
      return "'['";
    case TokenKind::RBracket:
      return "']'";
    case TokenKind::LBrace:
      return "'{'";
    case TokenKind::RBrace:
      return "'}'";
    case TokenKind::Comma:
      return "','";
    case TokenKind::Colon:
      return "':'";
    case TokenKind::DotDot:
      return "'..'";
    case TokenKind::Question:
      return "'?'";
    case TokenKind::Assign:
      return "'='";
    case TokenKind::Eq:
      return "'=='";
    case TokenKind::Ne:
      return "'!='";
    case TokenKind::Lt:
      return "'<'";
    case TokenKind::Le:
      return "'<='";
    case TokenKind::Gt:
      return "'>'";
    case TokenKind::Ge:
      return "'>='";
    case TokenKind::Plus:
      return "'+'";
    case TokenKind::Minus:
      return "'-'";
    case TokenKind::Star:
      return "'*'";
    case TokenKind::Slash:
      return "'/'";
    case TokenKind::Percent:
      return "'%'";
    case TokenKind::Bang:
      return "'!'";
    case TokenKind::AndAnd:
      return "'&&'";
    case TokenKind::OrOr:
      return "'||'";
    case TokenKind::Eof:
      return "end of file";
  }
  return "token";
}

std::optional<std::vector<Token>> lex(const std::string& file, std::string_view text,
                                      DiagnosticEngine& diags) {
  return Lexer(file, text, diags).run();
}

}  // namespace mxfp6::frontend
