// libFuzzer entry point for the DSL frontend: any byte string must give a module or
// diagnostics, never a crash, a sanitizer report, an exception or a hang. Every kernel that
// parses is instantiated at its default configuration and dumped, and once per value of each
// variant, so the type checker and the lowering see the mutated programs too.
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler/frontend/frontend.h"

using namespace mxfp6::frontend;

namespace {

// Enumerating a cross product of many candidate sets can be slow by design; only small ones
// are enumerated here.
constexpr uint64_t kMaxEnumerated = 4096;

uint64_t crossProductSize(const KernelInfo& k) {
  uint64_t n = 1;
  for (const TunableInfo& t : k.tunables) {
    n *= t.values.size();
    if (n > kMaxEnumerated) return n;
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string configError;
  parseConfigString(text, configError);

  DiagnosticEngine diags;
  auto module = parseSource("fuzz.mxk", text, diags);
  if (module) {
    dumpAst(*module);
    for (const KernelInfo& k : module->kernels()) {
      if (auto kernel = instantiate(*module, k.name, {}, diags)) {
        dumpKir(*kernel);
        kernel->abi();
      }
      // Every value of every variant, by name code as a configuration string gives it.
      for (const VariantInfo& v : k.variants) {
        for (const std::string& value : v.values) {
          if (auto named = findVariantValue(value))
            instantiate(*module, k.name, {{v.name, variantNameCode(*named)}}, diags);
        }
      }
      if (crossProductSize(k) <= kMaxEnumerated) enumerateConfigs(*module, k.name, {});
    }
  }
  diags.render();
  return 0;
}
