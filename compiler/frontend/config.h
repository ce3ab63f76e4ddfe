// Binding a kernel's configuration (specialized sizes, tunables and variants) and evaluating
// its `require` constraints with integer semantics.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "compiler/frontend/ast.h"
#include "compiler/frontend/frontend.h"

namespace mxfp6::frontend {

/// Every specialized size, tunable and variant of a kernel, bound to its value (a variant's is
/// the KIR enum value of its name: kir::MxFormat or kir::MxScaleMode).
using Bindings = std::map<std::string, int64_t>;

/// Binds defaults overridden by `overrides`. Reports unknown keys (listing the valid ones),
/// tunable values outside their candidate set, sizes without a value and sizes below 1, value
/// names given to sizes or tunables, and variant values (name codes or enum values) that are
/// not among the variant's names (listing them).
std::optional<Bindings> bindConfig(const ast::KernelDecl& kernel,
                                   const std::map<std::string, int64_t>& overrides,
                                   DiagnosticEngine& diags);

/// Evaluates every constraint at `bindings`; reports each violated one, quoting it with the
/// values it used and its message. True when all hold.
bool checkConstraints(const ast::KernelDecl& kernel, const Bindings& bindings,
                      DiagnosticEngine& diags);

/// Evaluates every compile-time dimension of the kernel's tensors that is not a literal (a
/// tunable, or a parenthesized expression such as `(C * 3 / 4)`) at `bindings`; reports each
/// that is below 1, divides by zero, overflows or divides inexactly (a dimension is a whole
/// number of elements), at its location. True when all are valid. Specialized sizes are
/// checked by bindConfig().
bool checkDimensions(const ast::KernelDecl& kernel, const Bindings& bindings,
                     DiagnosticEngine* diags);

/// The value of a tensor dimension at `bindings` when it is a compile-time constant: an
/// integer, a specialized size, a tunable or an expression over them (nullopt when the
/// expression does not evaluate). nullopt for a runtime dimension.
std::optional<int64_t> dimensionValue(const ast::SizeRef& dim, const ast::KernelDecl& kernel,
                                      const Bindings& bindings);

/// The value of an integer expression over specialized sizes and tunables at `bindings`
/// (exact division), or nullopt with `error` saying why (a runtime name, division by zero,
/// overflow, a remainder).
std::optional<int64_t> constantExprValue(const ast::Expr& e, const Bindings& bindings,
                                         std::string& error);

}  // namespace mxfp6::frontend
