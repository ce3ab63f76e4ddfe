// Public interface of the DSL frontend: parse a `.mxk` file, describe its kernels, and
// instantiate one kernel at one configuration into typed KIR. Plain C++ (no LLVM), so the
// interpreter, the tuner and GPU tests can link it on machines without LLVM.
//
// User errors are values: every failure is reported through the DiagnosticEngine as
// `file:line:col: error: message` plus the source line and a caret; no exception escapes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/kir.h"

namespace mxfp6::frontend {

struct Diagnostic {
  kir::SourceLoc loc;
  std::string message;
};

/// Collects diagnostics and renders them with the source line and a caret.
class DiagnosticEngine {
 public:
  void error(const kir::SourceLoc& loc, std::string message);
  bool hasErrors() const { return !diags_.empty(); }
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }
  /// Registers a buffer so rendering can show the offending line.
  void addSource(const std::string& file, const std::string& text);
  /// "file:line:col: error: message\n<source line>\n<caret>\n" for every diagnostic.
  std::string render() const;
  void clear() { diags_.clear(); }

 private:
  std::vector<Diagnostic> diags_;
  std::map<std::string, std::string> sources_;
};

struct TunableInfo {
  std::string name;
  std::vector<int64_t> values;  // candidate set, declaration order
  int64_t defaultValue = 0;
};

struct SpecializeInfo {
  std::string name;
  std::optional<int64_t> defaultValue;
};

struct ConstraintInfo {
  std::string text;     // the constraint's source text
  std::string message;  // its message, may be empty
  kir::SourceLoc loc;
};

/// What `mxfp6c list` prints and the autotuner enumerates.
struct KernelInfo {
  std::string name;
  kir::SourceLoc loc;
  std::vector<kir::Param> params;  // dims as written, before specialization
  std::vector<SpecializeInfo> specializations;
  std::vector<TunableInfo> tunables;
  std::vector<ConstraintInfo> constraints;
};

struct ModuleImpl;  // the checked AST, private to the frontend

/// A parsed and checked `.mxk` file.
class Module {
 public:
  Module();
  ~Module();
  Module(Module&&) noexcept;
  Module& operator=(Module&&) noexcept;

  const std::string& file() const;
  const std::vector<KernelInfo>& kernels() const;
  const KernelInfo* findKernel(const std::string& name) const;

  ModuleImpl& impl() { return *impl_; }
  const ModuleImpl& impl() const { return *impl_; }

 private:
  std::unique_ptr<ModuleImpl> impl_;
};

/// Parses and checks source text (names, kinds, types that do not depend on the configuration).
std::optional<Module> parseSource(const std::string& file, const std::string& text,
                                  DiagnosticEngine& diags);
/// Reads and parses a file; an unreadable file is a diagnostic, not an exception.
std::optional<Module> parseFile(const std::string& path, DiagnosticEngine& diags);

/// Binds every specialized size and tunable (defaults, overridden by `config`), checks the
/// overrides (unknown key -> error listing the valid keys; tunable value outside its candidate
/// set -> error listing the set; missing specialized size without default -> error), evaluates
/// every `require` (violated -> error quoting the constraint and its message), then type-checks
/// the body at those sizes and lowers it to KIR.
std::optional<kir::Kernel> instantiate(const Module& module, const std::string& kernel,
                                       const std::map<std::string, int64_t>& config,
                                       DiagnosticEngine& diags);

/// Every configuration of the tunables' cross product that satisfies all constraints, with the
/// specialized sizes given in `sizes` (declaration order of tunables, first value varying slowest).
std::vector<std::map<std::string, int64_t>> enumerateConfigs(
    const Module& module, const std::string& kernel, const std::map<std::string, int64_t>& sizes);

/// Parses "K=V,K=V" into a map; malformed text -> nullopt and `error` set.
std::optional<std::map<std::string, int64_t>> parseConfigString(const std::string& text,
                                                                std::string& error);

}  // namespace mxfp6::frontend

namespace mxfp6::frontend {

/// Human-readable dumps for `mxfp6c compile --emit ast` and `--emit kir`, and for tests.
std::string dumpAst(const Module& module);
std::string dumpKir(const kir::Kernel& kernel);

}  // namespace mxfp6::frontend
