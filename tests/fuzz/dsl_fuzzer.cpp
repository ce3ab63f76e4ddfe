// libFuzzer entry point for the DSL frontend: any byte string must give a module or
// diagnostics, never a crash, a sanitizer report, an exception or a hang, and every kernel it
// instantiates must be well-formed KIR (tests/frontend/kir_verify.h: operands in scope, loops
// paired, variables typed), or the fuzzer aborts. Every kernel that parses is instantiated at
// its default configuration and dumped, once per value of each variant, and at the first few
// enumerated configurations, so the type checker and the lowering see the mutated programs
// too.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compiler/frontend/frontend.h"
#include "tests/frontend/kir_verify.h"

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

constexpr size_t kMaxInstantiatedConfigs = 4;

void checkWellFormed(const mxfp6::kir::Kernel& kernel) {
  std::string problem = mxfp6::frontend::test::verifyKir(kernel);
  if (problem.empty()) return;
  std::fprintf(stderr, "malformed KIR: %s\n%s", problem.c_str(), dumpKir(kernel).c_str());
  std::abort();
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
        checkWellFormed(*kernel);
        dumpKir(*kernel);
        kernel->abi();
      }
      // Every value of every variant, by name code as a configuration string gives it.
      for (const VariantInfo& v : k.variants) {
        for (const std::string& value : v.values) {
          if (auto named = findVariantValue(value))
            if (auto kernel =
                    instantiate(*module, k.name, {{v.name, variantNameCode(*named)}}, diags))
              checkWellFormed(*kernel);
        }
      }
      if (crossProductSize(k) <= kMaxEnumerated) {
        auto configs = enumerateConfigs(*module, k.name, {});
        for (size_t i = 0; i < configs.size() && i < kMaxInstantiatedConfigs; ++i) {
          // Enumerated configurations satisfy the constraints and size every tensor.
          DiagnosticEngine configDiags;
          auto kernel = instantiate(*module, k.name, configs[i], configDiags);
          if (kernel) checkWellFormed(*kernel);
        }
      }
    }
  }
  diags.render();
  return 0;
}
