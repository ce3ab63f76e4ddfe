// Expansion of a file's `fn`s (kernels_dsl/README.md, "Functions") into the kernels that call
// them, before any check: the checks, the lowering and the interpreter only ever see kernel
// bodies of the language without fns, so a fn adds no semantics of its own.
//
// A call is replaced by the fn's statements, placed before the statement that holds the call,
// and by its returned expression where the call stood. An argument that is a name, a number or
// operators over them is substituted for its parameter (so a parameter may stand where only a
// tensor's name, a size or a format can); any other is evaluated once, bound to the parameter's
// renamed name before the fn's statements (so a load or a reduction is not repeated at every use
// of the parameter). Expressions are pure, so either way the call means what the kernel written
// out by hand would. The names a fn binds
// are renamed per call (`s` becomes `s@3`), so two calls, or a call and its caller, never
// share a name; a name the fn uses without binding or taking it is the kernel's. Every position
// in an expansion records the call that put it there (kir::SourceLoc::inCall), so an error in
// a fn's body names the call that led to it.
#pragma once

#include <string>

#include "compiler/frontend/ast.h"
#include "compiler/frontend/frontend.h"

namespace mxfp6::frontend {

/// Statements and expression nodes that expansion may add to one kernel: a fn calling another
/// twice, nested deep enough, would otherwise grow without bound.
inline constexpr int kMaxExpandedNodes = 200000;
/// Fn calls nest at most this deep (a fn calling a fn ...), like loops (kMaxLoopDepth, which
/// bounds the loops of a kernel after expansion too): every later walk recurses per level.
inline constexpr int kMaxFnCallDepth = 64;

/// Whether `name` is one a fn's expansion made (a value the fn binds, or an argument it
/// evaluated once), which messages about names should explain.
inline bool isExpandedName(const std::string& name) { return name.find('@') != std::string::npos; }

/// Checks the fn declarations and expands every fn call in the kernels' row bodies in place.
/// Every problem found is reported through `diags`. A kernel whose calls could not be expanded
/// is removed from `file`, so the checks can still go through the others and report their
/// problems too.
void expandFnCalls(ast::File& file, DiagnosticEngine& diags);

}  // namespace mxfp6::frontend
