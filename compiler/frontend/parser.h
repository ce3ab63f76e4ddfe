// Recursive-descent parser of the `.mxk` grammar (kernels_dsl/README.md) into the AST.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "compiler/frontend/ast.h"
#include "compiler/frontend/frontend.h"

namespace mxfp6::frontend {

/// Expressions deeper than this are rejected with a diagnostic, so that a pathological input
/// cannot exhaust the stack of the parser or of any later recursive walk.
inline constexpr int kMaxExprDepth = 256;
/// Loops deeper than this are rejected likewise: every walk over statements recurses per loop.
inline constexpr int kMaxLoopDepth = 64;

/// Lexes and parses `text`. Stops at the first syntax error, reported through `diags`.
std::optional<ast::File> parseAst(const std::string& file, std::string_view text,
                                  DiagnosticEngine& diags);

}  // namespace mxfp6::frontend
