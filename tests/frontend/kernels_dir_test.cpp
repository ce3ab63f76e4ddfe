// Every kernel shipped in kernels_dsl/ parses without errors.
#include <gtest/gtest.h>

#include <filesystem>

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

}  // namespace
}  // namespace mxfp6::frontend
