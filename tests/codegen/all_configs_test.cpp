// Every configuration the tunables of each kernel allow compiles for every target, down to the
// code object (cubin needs ptxas; without it PTX is the last stage checked).

#include <gtest/gtest.h>
#include <unistd.h>

#include "compiler/codegen/codegen.h"
#include "tests/codegen/kernel_fixture.h"

namespace mxfp6 {
namespace {

TEST(AllConfigs, LnModulateCompilesForEveryTargetAndConfig) {
  std::optional<frontend::Module> m = testing::parseKernelFile("ln_modulate.mxk");
  ASSERT_TRUE(m);
  auto configs = frontend::enumerateConfigs(*m, "ln_modulate_fwd", {{"D", 3072}});
  ASSERT_FALSE(configs.empty());
  bool havePtxas = access("/usr/local/cuda/bin/ptxas", X_OK) == 0;
  for (const std::string& targetName : codegen::targetNames()) {
    codegen::TargetInfo target = *codegen::findTarget(targetName);
    codegen::Emit emit = target.backend == codegen::Backend::ROCDL ? codegen::Emit::Hsaco
                         : havePtxas                                ? codegen::Emit::Cubin
                                                                    : codegen::Emit::Ptx;
    for (const auto& config : configs) {
      std::optional<kir::Kernel> k = testing::instantiateOrFail(*m, "ln_modulate_fwd", config);
      ASSERT_TRUE(k);
      Expected<codegen::CompiledKernel> c = codegen::compileKernel(*k, target, emit);
      std::string where = targetName + " ROWS=" + std::to_string(k->rowsPerProgram) +
                          " THREADS=" + std::to_string(k->threadsPerRow) + " VEC=" + std::to_string(k->vectorWidth);
      ASSERT_TRUE(c.isOk()) << where << ": " << c.status().message();
      EXPECT_FALSE(c->bytes.empty()) << where;
    }
  }
}

}  // namespace
}  // namespace mxfp6
