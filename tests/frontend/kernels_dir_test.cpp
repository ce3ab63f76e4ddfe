// Every kernel shipped in kernels_dsl/ parses without errors, and every fuzzer seed
// (tests/fuzz/seeds) instantiates, so the seeds stay valid starting points.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/frontend/kir_checks.h"
#include "tests/frontend/test_util.h"

namespace mxfp6::frontend {
namespace {

TEST(KernelsDir, EveryMxkFileParses) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(MXFP6_KERNELS_DSL_DIR)) {
    if (entry.path().extension() != ".mxk") continue;
    ++files;
    DiagnosticEngine diags;
    auto module = parseFile(entry.path().string(), diags);
    EXPECT_TRUE(module.has_value()) << diags.render();
    if (module) EXPECT_FALSE(module->kernels().empty()) << entry.path();
  }
  EXPECT_GE(files, 1);
}

TEST(KernelsDir, EveryFuzzSeedInstantiates) {
  int kernels = 0;
  for (const auto& entry : std::filesystem::directory_iterator(MXFP6_FUZZ_SEEDS_DIR)) {
    if (entry.path().extension() != ".mxk") continue;
    DiagnosticEngine diags;
    auto module = parseFile(entry.path().string(), diags);
    ASSERT_TRUE(module.has_value()) << diags.render();
    for (const KernelInfo& info : module->kernels()) {
      ++kernels;
      auto k = instantiate(*module, info.name, {}, diags);
      ASSERT_TRUE(k.has_value()) << diags.render();
      test::expectWellFormed(*k);
    }
  }
  EXPECT_GE(kernels, 3);
}

}  // namespace
}  // namespace mxfp6::frontend
