// Loads, instantiates and compiles kernels (of kernels_dsl/ or inline sources) for codegen tests.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "compiler/codegen/codegen.h"
#include "compiler/frontend/frontend.h"

namespace mxfp6::testing {

inline std::string kernelsDsl(const std::string& file) { return std::string(MXFP6_KERNELS_DSL) + "/" + file; }

inline std::optional<frontend::Module> parseKernelFile(const std::string& file) {
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = frontend::parseFile(kernelsDsl(file), diags);
  EXPECT_FALSE(diags.hasErrors()) << diags.render();
  return m;
}

inline std::optional<kir::Kernel> instantiateOrFail(const frontend::Module& m, const std::string& kernel,
                                                    const std::map<std::string, int64_t>& config) {
  frontend::DiagnosticEngine diags;
  std::optional<kir::Kernel> k = frontend::instantiate(m, kernel, config, diags);
  EXPECT_TRUE(k.has_value()) << diags.render();
  return k;
}

/// Kernel `name` of kernels_dsl/`file` at `config`.
inline kir::Kernel kernelAt(const std::string& file, const std::string& name,
                            const std::map<std::string, int64_t>& config) {
  std::optional<frontend::Module> m = parseKernelFile(file);
  EXPECT_TRUE(m);
  std::optional<kir::Kernel> k = m ? instantiateOrFail(*m, name, config) : std::nullopt;
  EXPECT_TRUE(k);
  return k ? *k : kir::Kernel{};
}

/// Kernel `name` of DSL `source` (diagnosed as inline.mxk) at `config` (default: its default).
inline kir::Kernel inlineKernel(const std::string& source, const std::string& name,
                                const std::map<std::string, int64_t>& config = {}) {
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = frontend::parseSource("inline.mxk", source, diags);
  EXPECT_TRUE(m) << diags.render();
  std::optional<kir::Kernel> k = m ? instantiateOrFail(*m, name, config) : std::nullopt;
  EXPECT_TRUE(k);
  return k ? *k : kir::Kernel{};
}

/// What mxfp6c emits for `kernel` on `target` (the PTX, the MLIR, a code object's bytes), or ""
/// after a failed expectation where it does not compile (or the kernel is inlineKernel's empty
/// one, whose failure is already reported).
inline std::string compiledOrFail(const kir::Kernel& kernel, const std::string& target, codegen::Emit emit) {
  if (kernel.name.empty()) return "";
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(kernel, *codegen::findTarget(target), emit);
  EXPECT_TRUE(c.isOk()) << c.status().message();
  return c.isOk() ? c->bytes : "";
}

/// Why kernel `name` of DSL `source` at `config` does not compile to sm_90 PTX; "" where it does.
inline std::string compileError(const std::string& source, const std::string& name,
                                const std::map<std::string, int64_t>& config) {
  kir::Kernel k = inlineKernel(source, name, config);
  Expected<codegen::CompiledKernel> c = codegen::compileKernel(k, *codegen::findTarget("sm_90"), codegen::Emit::Ptx);
  return c.isOk() ? "" : c.status().message();
}

/// Whether mxfp6c can assemble cubins here: ptxas at its default path or named by MXFP6_PTXAS.
inline bool ptxasInstalled() {
  return access("/usr/local/cuda/bin/ptxas", X_OK) == 0 || std::getenv("MXFP6_PTXAS") != nullptr;
}

/// How many times `pattern` (a regular expression) matches in `text`.
inline size_t countMatches(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  return size_t(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

/// Every .mxk file of kernels_dsl/ and of the test fixtures, sorted.
inline std::vector<std::string> kernelFiles() {
  std::vector<std::string> files;
  for (const char* dir : {MXFP6_KERNELS_DSL, MXFP6_FIXTURES_DSL})
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".mxk") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace mxfp6::testing
