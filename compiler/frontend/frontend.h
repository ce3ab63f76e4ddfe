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
#include <string_view>
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
  /// An error inside a fn's body is followed by "file:line:col: note: in the call of fn 'f'"
  /// and the call's line, for each call that led there.
  std::string render() const;
  /// `text` (a later stage's messages) with the source line and a caret added after every line
  /// of the form "file:line:col: error|note: message" whose file this engine has the source of.
  std::string annotate(const std::string& text) const;
  void clear() { diags_.clear(); }

 private:
  void renderOne(const kir::SourceLoc& loc, std::string_view kind, const std::string& message,
                 std::string& out) const;

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

/// What a variant chooses among: MX element formats (kir::MxFormat) or scale modes
/// (kir::MxScaleMode).
enum class VariantKind { Format, ScaleMode };

/// A `variant` clause entry: a compile-time choice among value names, never tuned. Its
/// configuration value (in instantiate()'s config, enumerateConfigs()'s results and
/// kir::Kernel::config) is the KIR enum value of the chosen name.
struct VariantInfo {
  std::string name;
  VariantKind kind = VariantKind::Format;
  std::vector<std::string> values;  // value names, declaration order
  std::string defaultValue;         // the declared default, else the first value
};

/// A value name of the language: E2M3 and E3M2 (formats), RCEIL, EVEN and FLOOR (scale modes).
/// The names are global: every variant and every format or mode argument uses them.
struct VariantValue {
  VariantKind kind;
  int64_t value;  // kir::MxFormat or kir::MxScaleMode, as an integer
};
std::optional<VariantValue> findVariantValue(std::string_view name);
/// The name of a format or mode value ("E3M2"); nullptr when `value` names none of `kind`.
const char* variantValueName(VariantKind kind, int64_t value);

/// What `mxfp6c list` prints and the autotuner enumerates.
struct KernelInfo {
  std::string name;
  kir::SourceLoc loc;
  // Dims as written, before specialization: a specialized size, a tunable or an expression
  // such as "(C * 3 / 4)" (named by its source text) has constant -1 and runtimeDim -1.
  std::vector<kir::Param> params;
  std::vector<SpecializeInfo> specializations;
  std::vector<TunableInfo> tunables;
  std::vector<VariantInfo> variants;
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

/// Binds every specialized size, tunable and variant (defaults, overridden by `config`), checks
/// the overrides (unknown key -> error listing the valid keys; tunable value outside its
/// candidate set -> error listing the set; missing specialized size without default -> error;
/// variant value not among its names -> error listing them), evaluates every `require`
/// (violated -> error quoting the constraint and its message) and every compile-time dimension
/// that depends on the configuration (a tunable, or an expression such as `(C * 3 / 4)`: below
/// 1, division by zero, inexact division or overflow -> error at the dimension), then
/// type-checks the body at those sizes and lowers it to KIR. A variant's value in `config` is
/// either the KIR enum value of one of its names (what kir::Kernel::config and launch metadata
/// carry, so a kernel's config instantiates it again) or a name code from parseConfigString().
std::optional<kir::Kernel> instantiate(const Module& module, const std::string& kernel,
                                       const std::map<std::string, int64_t>& config,
                                       DiagnosticEngine& diags);

/// Every configuration of the tunables' cross product that satisfies all constraints and gives
/// every compile-time dimension a valid size (declaration order of tunables, first value
/// varying slowest). `fixed` binds specialized sizes and variants (values as in instantiate());
/// a variant not in `fixed` keeps its default, so variants never multiply the configurations.
/// Empty when `fixed` has another key or a value that does not bind, or a size has no value.
std::vector<std::map<std::string, int64_t>> enumerateConfigs(
    const Module& module, const std::string& kernel, const std::map<std::string, int64_t>& fixed);

/// Parses "K=V,K=V" into a map; malformed text -> nullopt and `error` set. V is an integer, or
/// a value name (E2M3, E3M2, RCEIL, EVEN, FLOOR) for a variant: `FMT=E3M2`. A name is stored as
/// variantNameCode() of its kind and value, a code outside every integer a size or tunable
/// takes in practice, which instantiate() and enumerateConfigs() accept only for a variant
/// having that name among its values (so `MODE=E3M2` is an error, not EVEN) and reject, naming
/// it, for a size or tunable. Any other identifier is an error naming the value names.
std::optional<std::map<std::string, int64_t>> parseConfigString(const std::string& text,
                                                                std::string& error);

/// parseConfigString() for kernel `kernel` of `module`, with errors located: an entry whose value
/// is a name that no key takes (`FMT=E4M3`) is reported at its key's declaration (a variant's
/// message lists that variant's values only). nullopt on any error: located ones are in `diags`
/// (then `error` is empty), a malformed string is `error`.
std::optional<std::map<std::string, int64_t>> parseKernelConfig(const Module& module,
                                                                const std::string& kernel,
                                                                const std::string& text,
                                                                DiagnosticEngine& diags,
                                                                std::string& error);

/// The configuration code of a value name: kVariantNameTag | kind << 8 | value.
inline constexpr int64_t kVariantNameTag = int64_t{0x4d58564e} << 32;  // "MXVN"
inline int64_t variantNameCode(VariantValue v) {
  return kVariantNameTag | (int64_t(v.kind) << 8) | v.value;
}
/// The value name a configuration code stands for; nullopt for any other integer.
std::optional<VariantValue> decodeVariantNameCode(int64_t code);

}  // namespace mxfp6::frontend

namespace mxfp6::frontend {

/// Human-readable dumps for `mxfp6c compile --emit ast` and `--emit kir`, and for tests.
std::string dumpAst(const Module& module);
std::string dumpKir(const kir::Kernel& kernel);

}  // namespace mxfp6::frontend
