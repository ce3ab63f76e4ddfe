// The signature in the launch metadata ("params", "rows"): what a launch from tensors is checked
// against, written from the kernel's declaration and read back by the runtime's parser.

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/metadata.h"
#include "runtime/runtime.h"
#include "tests/codegen/kernel_fixture.h"

namespace mxfp6 {
namespace {

using nlohmann::json;

/// The metadata of `kernel` at its default configuration. MLIR is the cheapest stage that
/// decides the launch shape, and the metadata does not depend on the stage.
json metadataOf(const kir::Kernel& kernel) {
  Expected<codegen::CompiledKernel> c =
      codegen::compileKernel(kernel, *codegen::findTarget("sm_90"), codegen::Emit::Mlir);
  EXPECT_TRUE(c.isOk()) << c.status().message();
  return c.isOk() ? json::parse(c->metadataJson) : json();
}

std::optional<kir::Kernel> instantiateFromSource(const std::string& source,
                                                 const std::string& kernel) {
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = frontend::parseSource("test.mxk", source, diags);
  EXPECT_TRUE(m) << diags.render();
  if (!m) return std::nullopt;
  return testing::instantiateOrFail(*m, kernel, {});
}

TEST(SignatureMetadata, LnModulateForwardDeclaresEveryParameterAndTheRowSpace) {
  std::optional<frontend::Module> m = testing::parseKernelFile("ln_modulate.mxk");
  ASSERT_TRUE(m);
  std::optional<kir::Kernel> k = testing::instantiateOrFail(*m, "ln_modulate_fwd", {});
  ASSERT_TRUE(k);
  json j = metadataOf(*k);
  json rowMajor2 = json::parse(R"([{"row_major": true}, {"row_major": true}])");
  json tokens = json::parse(R"([{"dim": "T"}, {"const": 3072, "name": "D"}])");
  json samples = json::parse(R"([{"dim": "B"}, {"const": 3072, "name": "D"}])");
  auto tensor = [](const char* name, const char* dtype, bool output, json dims, json strides) {
    return json{{"name", name}, {"kind", "tensor"}, {"dtype", dtype}, {"output", output},
                {"dims", dims}, {"strides", strides}};
  };
  json vector = json::parse(R"([{"dim": "T"}])");
  json rowMajor1 = json::parse(R"([{"row_major": true}])");
  json expected = json::array({
      tensor("x", "bf16", false, tokens, rowMajor2),
      tensor("scale", "bf16", false, samples, rowMajor2),
      tensor("shift", "bf16", false, samples, rowMajor2),
      tensor("y", "bf16", true, tokens, rowMajor2),
      tensor("mean", "f32", true, vector, rowMajor1),
      tensor("rstd", "f32", true, vector, rowMajor1),
      {{"name", "sample_div"}, {"kind", "scalar"}, {"dtype", "i32"}},
      {{"name", "eps"}, {"kind", "scalar"}, {"dtype", "f32"}, {"default", 1e-6}},
  });
  EXPECT_EQ(j["params"], expected) << j["params"].dump(1);
  EXPECT_EQ(j["rows"], json::parse(R"([{"dim": "T"}])"));
}

// strides(x_token_stride, x_head_stride, 1): parameters and a constant; the outputs declared
// without strides are row-major; two row variables.
TEST(SignatureMetadata, ExplicitStridesNameTheirParameters) {
  std::optional<frontend::Module> m = testing::parseKernelFile("norm_rope.mxk");
  ASSERT_TRUE(m);
  std::optional<kir::Kernel> k = testing::instantiateOrFail(*m, "norm_rope_fwd", {});
  ASSERT_TRUE(k);
  json j = metadataOf(*k);
  ASSERT_EQ(j["params"][0]["name"], "x");
  EXPECT_EQ(j["params"][0]["dims"], json::parse(R"([{"dim": "T"}, {"dim": "H"}, {"const": 128}])"));
  EXPECT_EQ(j["params"][0]["strides"],
            json::parse(R"([{"param": "x_token_stride"}, {"param": "x_head_stride"}, {"const": 1}])"));
  ASSERT_EQ(j["params"][4]["name"], "y");
  EXPECT_EQ(j["params"][4]["strides"],
            json::parse(R"([{"row_major": true}, {"row_major": true}, {"row_major": true}])"));
  EXPECT_EQ(j["rows"], json::parse(R"([{"dim": "T"}, {"dim": "H"}])"));
}

TEST(SignatureMetadata, ATensorTheBodyNeverAccessesTakesAnyLayout) {
  std::optional<kir::Kernel> k = instantiateFromSource(R"(
kernel copy_rows(x: f32[T, 64], unused: u8[T, 4], y: out f32[T, 64])
{
  row t in T {
    y[t, :] = x[t, :]
  }
}
)", "copy_rows");
  ASSERT_TRUE(k);
  json j = metadataOf(*k);
  EXPECT_EQ(j["params"][1]["strides"], json::parse(R"([{"any": true}, {"any": true}])"));
}

// A row variable over a compile-time extent (rowDims -1) takes it from rowConstExtents; the
// metadata is written from KIR alone, so the extent is set on an instantiated kernel here.
TEST(SignatureMetadata, ConstantRowExtentsAreWrittenAsConstants) {
  std::optional<frontend::Module> m = testing::parseKernelFile("norm_rope.mxk");
  ASSERT_TRUE(m);
  std::optional<kir::Kernel> k = testing::instantiateOrFail(*m, "norm_rope_fwd", {});
  ASSERT_TRUE(k);
  ASSERT_EQ(k->rowDims.size(), 2u);
  k->rowDims[1] = -1;
  k->rowConstExtents = {0, 24};
  codegen::LaunchShape shape;
  shape.blockThreads = 256;
  shape.rowsPerProgram = 16;
  json j = json::parse(codegen::launchMetadataJson(*k, *codegen::findTarget("sm_90"), shape, {}));
  EXPECT_EQ(j["rows"], json::parse(R"([{"dim": "T"}, {"const": 24}])"));

  // A constant extent without its value gets no signature rather than a wrong grid.
  k->rowConstExtents.clear();
  j = json::parse(codegen::launchMetadataJson(*k, *codegen::findTarget("sm_90"), shape, {}));
  EXPECT_FALSE(j.contains("params"));
  EXPECT_FALSE(j.contains("rows"));
}

// The writer and the runtime's parser agree on every kernel: its metadata loads with a
// signature whose ABI cross-check passes.
TEST(SignatureMetadata, EveryKernelsMetadataLoadsWithASignature) {
  int loaded = 0;
  for (const std::string& file : testing::kernelFiles()) {
    frontend::DiagnosticEngine diags;
    std::optional<frontend::Module> m = frontend::parseFile(file, diags);
    ASSERT_TRUE(m) << diags.render();
    for (const frontend::KernelInfo& info : m->kernels()) {
      SCOPED_TRACE(info.name);
      std::optional<kir::Kernel> k = testing::instantiateOrFail(*m, info.name, {});
      ASSERT_TRUE(k);
      Expected<codegen::CompiledKernel> c =
          codegen::compileKernel(*k, *codegen::findTarget("gfx942"), codegen::Emit::Mlir);
      ASSERT_TRUE(c.isOk()) << c.status().message();
      Expected<rt::KernelMetadata> md = rt::parseKernelMetadata(c->metadataJson);
      ASSERT_TRUE(md.isOk()) << md.status().message() << "\n" << c->metadataJson;
      ASSERT_TRUE(md->signature.has_value());
      EXPECT_EQ(md->signature->params.size(), k->params.size());
      EXPECT_EQ(md->signature->rows.size(), k->rowVars.size());
      ++loaded;
    }
  }
  EXPECT_GE(loaded, 10);  // every kernel of kernels_dsl/ and the fixtures
}

}  // namespace
}  // namespace mxfp6
