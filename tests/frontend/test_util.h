// Helpers for frontend tests: parse or instantiate inline sources and read back the errors as
// "file:line:col: error: message" lines.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "compiler/frontend/frontend.h"

namespace mxfp6::frontend::test {

inline std::string errorLines(const DiagnosticEngine& diags) {
  std::string out;
  for (const Diagnostic& d : diags.diagnostics()) {
    out += d.loc.file + ":" + std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) +
           ": error: " + d.message + "\n";
  }
  return out;
}

/// The errors of parsing `source` as t.mxk; empty when it parses.
inline std::string parseErrors(const std::string& source) {
  DiagnosticEngine diags;
  auto module = parseSource("t.mxk", source, diags);
  EXPECT_EQ(module.has_value(), !diags.hasErrors());
  return errorLines(diags);
}

/// Parses `source` (which must parse) and instantiates its first kernel at `config`.
inline std::optional<kir::Kernel> instantiateFirst(
    const std::string& source, DiagnosticEngine& diags,
    const std::map<std::string, int64_t>& config = {}) {
  auto module = parseSource("t.mxk", source, diags);
  if (!module) {
    ADD_FAILURE() << "does not parse:\n" << diags.render();
    return std::nullopt;
  }
  return instantiate(*module, module->kernels().front().name, config, diags);
}

/// The errors of instantiating the first kernel of `source`; empty when it instantiates.
inline std::string instantiateErrors(const std::string& source,
                                     const std::map<std::string, int64_t>& config = {}) {
  DiagnosticEngine diags;
  auto kernel = instantiateFirst(source, diags, config);
  EXPECT_EQ(kernel.has_value(), !diags.hasErrors());
  return errorLines(diags);
}

/// The kernel `header` (its signature and clauses, each line ending in a newline) followed by
/// one `row t in T` block whose body is `body`. The body starts two lines after the header's
/// last line, at column 5.
inline std::string rowKernel(const std::string& header, const std::string& body) {
  return header +
         "{\n"
         "  row t in T {\n"
         "    " +
         body +
         "\n"
         "  }\n"
         "}\n";
}

/// A kernel over x: bf16[T, D], y: out bf16[T, D] (D = 128) whose row body is `body`, which
/// starts on line 6, column 5.
inline std::string kernelWithBody(const std::string& body) {
  return rowKernel(
      "kernel k(x: bf16[T, D], y: out bf16[T, D], s: out f32[T],\n"
      "         w: f32[T, 64], n: i32, eps: f32 = 1e-6)\n"
      "  specialize D = 128\n",
      body);
}

inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline const std::string kLnModulatePath = std::string(MXFP6_KERNELS_DSL_DIR) + "/ln_modulate.mxk";

}  // namespace mxfp6::frontend::test
