// Shared scaffolding of the interpreter tests: host vectors as tensor arguments, and DSL kernels
// instantiated from inline sources or from kernels_dsl/ (a diagnostic fails the test).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/frontend.h"
#include "compiler/interp/interpreter.h"

namespace mxfp6::interp {

/// `v` as a tensor of `shape` whose extent is the whole vector (inputs are only read).
template <class T>
TensorArg view(const std::vector<T>& v, kir::Dtype t, std::vector<int64_t> shape) {
  return TensorArg{const_cast<T*>(v.data()), t, std::move(shape), static_cast<int64_t>(v.size())};
}

inline std::optional<kir::Kernel> instantiateOrFail(const std::optional<frontend::Module>& module,
                                                    frontend::DiagnosticEngine& diags, const std::string& kernel,
                                                    const std::map<std::string, int64_t>& config) {
  if (!module) {
    ADD_FAILURE() << diags.render();
    return std::nullopt;
  }
  auto k = frontend::instantiate(*module, kernel, config, diags);
  if (!k) ADD_FAILURE() << diags.render();
  return k;
}

inline std::optional<kir::Kernel> instantiateSource(const std::string& source, const std::string& kernel,
                                                    const std::map<std::string, int64_t>& config = {}) {
  frontend::DiagnosticEngine diags;
  auto module = frontend::parseSource("inline.mxk", source, diags);
  return instantiateOrFail(module, diags, kernel, config);
}

/// A kernel of kernels_dsl/`file` (the repository's, MXFP6_SOURCE_DIR).
inline std::optional<kir::Kernel> instantiateKernelsDsl(const std::string& file, const std::string& kernel,
                                                        const std::map<std::string, int64_t>& config = {}) {
  frontend::DiagnosticEngine diags;
  auto module = frontend::parseFile(std::string(MXFP6_SOURCE_DIR) + "/kernels_dsl/" + file, diags);
  return instantiateOrFail(module, diags, kernel, config);
}

}  // namespace mxfp6::interp
