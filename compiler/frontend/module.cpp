// Module, the entry points that read and parse source, and configuration strings.
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/frontend/fn_expand.h"
#include "compiler/frontend/module_impl.h"
#include "compiler/frontend/parser.h"
#include "compiler/frontend/sema.h"

namespace mxfp6::frontend {

Module::Module() : impl_(std::make_unique<ModuleImpl>()) {}
Module::~Module() = default;
Module::Module(Module&&) noexcept = default;
Module& Module::operator=(Module&&) noexcept = default;

const std::string& Module::file() const { return impl_->file; }
const std::vector<KernelInfo>& Module::kernels() const { return impl_->kernels; }

const KernelInfo* Module::findKernel(const std::string& name) const {
  for (const KernelInfo& k : impl_->kernels)
    if (k.name == name) return &k;
  return nullptr;
}

std::optional<Module> parseSource(const std::string& file, const std::string& text,
                                  DiagnosticEngine& diags) {
  diags.addSource(file, text);
  size_t errorsBefore = diags.diagnostics().size();
  auto ast = parseAst(file, text, diags);
  if (!ast) return std::nullopt;
  expandFnCalls(*ast, diags);  // its errors reject the file below, after the other kernels' checks
  std::vector<KernelInfo> kernels = checkModule(*ast, diags);
  if (diags.diagnostics().size() != errorsBefore) return std::nullopt;
  Module module;
  ModuleImpl& impl = module.impl();
  impl.file = file;
  impl.ast = std::move(*ast);
  impl.kernels = std::move(kernels);
  return module;
}

std::optional<Module> parseFile(const std::string& path, DiagnosticEngine& diags) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    diags.error({path, 0, 0}, ec ? "cannot read file: " + ec.message() : "not a readable file");
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || !text) {
    diags.error({path, 0, 0}, "cannot read file");
    return std::nullopt;
  }
  return parseSource(path, text.str(), diags);
}

std::optional<std::map<std::string, int64_t>> parseConfigString(const std::string& text,
                                                                std::string& error) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  auto isIdent = [](std::string_view s) {
    if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
    for (char c : s)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
        return false;
    return true;
  };
  std::map<std::string, int64_t> config;
  std::string_view rest = text;
  if (trim(rest).empty()) return config;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view entry = trim(rest.substr(0, comma));
    size_t eq = entry.find('=');
    std::string_view key = trim(entry.substr(0, eq));
    std::string_view value =
        eq == std::string_view::npos ? std::string_view() : trim(entry.substr(eq + 1));
    int64_t v = 0;
    bool ok = eq != std::string_view::npos && isIdent(key) && !value.empty();
    if (ok && isIdent(value)) {
      // A value name, for a variant; bindConfig checks that the key is one taking it.
      auto named = findVariantValue(value);
      if (!named) {
        error = "unknown value '" + std::string(value) + "' in configuration entry '" +
                std::string(entry) +
                "'; values are integers or the names E2M3, E3M2, RCEIL, EVEN, FLOOR";
        return std::nullopt;
      }
      v = variantNameCode(*named);
    } else if (ok) {
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      ok = ec == std::errc() && end == value.data() + value.size();
    }
    if (!ok) {
      error = "malformed configuration entry '" + std::string(entry) +
              "'; expected NAME=INTEGER or NAME=VALUE_NAME";
      return std::nullopt;
    }
    if (!config.emplace(std::string(key), v).second) {
      error = "configuration key '" + std::string(key) + "' is given twice";
      return std::nullopt;
    }
    if (comma == std::string_view::npos) return config;
    rest = rest.substr(comma + 1);
  }
}

std::optional<std::map<std::string, int64_t>> parseKernelConfig(const Module& module,
                                                                const std::string& kernelName,
                                                                const std::string& text,
                                                                DiagnosticEngine& diags,
                                                                std::string& error) {
  auto config = parseConfigString(text, error);
  if (config) return config;
  const ast::KernelDecl* kernel = module.impl().findKernel(kernelName);
  if (!kernel) return std::nullopt;
  // Locate each entry whose value is a name no key takes at the declaration of its key.
  std::stringstream entries(text);
  bool located = false;
  for (std::string entry; std::getline(entries, entry, ',');) {
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t"));
      s.erase(s.find_last_not_of(" \t") + 1);
      return s;
    };
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string key = trim(entry.substr(0, eq)), value = trim(entry.substr(eq + 1));
    bool name = !value.empty() && !(value[0] >= '0' && value[0] <= '9') && value[0] != '-';
    if (!name || findVariantValue(value)) continue;
    located = true;
    bool found = false;
    for (const ast::VariantDecl& v : kernel->variants)
      if (v.name == key)
        diags.error(v.loc, key + " = " + value + " is not one of its values " + v.valuesText()), found = true;
    for (const ast::TunableDecl& t : kernel->tunables)
      if (t.name == key)
        diags.error(t.loc, "tunable '" + key + "' takes one of its candidates " + t.candidatesText() + ", not '" +
                               value + "'"), found = true;
    for (const ast::SpecDecl& s : kernel->specs)
      if (s.name == key)
        diags.error(s.loc, "specialized size '" + key + "' takes an integer, not '" + value + "'"), found = true;
    if (!found)
      diags.error(kernel->loc, "unknown configuration key '" + key + "' for kernel '" + kernel->name + "'");
  }
  if (located) error.clear();
  return std::nullopt;
}

}  // namespace mxfp6::frontend
