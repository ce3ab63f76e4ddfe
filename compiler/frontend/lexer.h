// Tokens of the `.mxk` language (kernels_dsl/README.md). A token is a span of the source
// buffer with its 1-based line and column, so every later error can point at it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/frontend/frontend.h"

namespace mxfp6::frontend {

enum class TokenKind {
  Ident,
  Int,
  Float,
  String,
  // Keywords.
  KwKernel,
  KwRow,
  KwIn,
  KwOut,
  KwSpecialize,
  KwTune,
  KwRequire,
  KwVariant,
  KwStrides,
  KwVar,
  KwFor,
  KwStep,
  KwFn,
  KwReturn,
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Colon,
  DotDot,
  Question,
  Assign,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  Plus,
  Minus,
  Star,
  Slash,
  Percent,
  Bang,
  AndAnd,
  OrOr,
  Eof,
};

struct Token {
  TokenKind kind = TokenKind::Eof;
  std::string_view text;  // span of the source buffer (string literals include their quotes)
  size_t offset = 0;      // byte offset of `text` in the buffer
  int line = 1;
  int col = 1;
  int64_t intValue = 0;   // Int
  double floatValue = 0;  // Float
};

/// The spelling of a token kind for messages: "')'", "an identifier", "end of file".
std::string tokenKindName(TokenKind kind);

/// Splits `text` into tokens ending with one Eof token. The first malformed token (unknown
/// character, unterminated string, out-of-range number) is reported and yields nullopt.
std::optional<std::vector<Token>> lex(const std::string& file, std::string_view text,
                                      DiagnosticEngine& diags);

}  // namespace mxfp6::frontend
