// The sm_90 MX encode (mx_ops.cpp) drops its per-element min where the scale is the RCEIL scale
// of the encoded elements themselves, and keeps it for the other modes and for a scale that is
// not the elements' own. The arithmetic is checked on the CPU (tests/interp/mxfp6_fp8_encode_test
// .cpp) and bit for bit on the GPU (mxfp6_pack_gpu_test); this checks which sequence is emitted.
#include <gtest/gtest.h>

#include "compiler/codegen/codegen.h"
#include "tests/codegen/kernel_fixture.h"

namespace mxfp6 {
namespace {

using testing::countMatches;

/// Configuration `text` (as mxfp6c takes it: variant values by name) as a map.
std::map<std::string, int64_t> configOf(const std::string& text) {
  std::string error;
  std::optional<std::map<std::string, int64_t>> config = frontend::parseConfigString(text, error);
  EXPECT_TRUE(config) << error;
  return config.value_or(std::map<std::string, int64_t>{});
}

std::string dualPtx(const std::string& mode) {
  kir::Kernel k = testing::kernelAt("mxfp6_pack.mxk", "mxfp6_pack_dual",
                                    configOf("FMT=E3M2,MODE=" + mode + ",W=64,HB=1,THREADS=64,VEC=32"));
  return testing::compiledOrFail(k, "sm_90", codegen::Emit::Ptx);
}

TEST(BoundedEncode, RceilConvertsWithoutTheMin) {
  std::string ptx = dualPtx("RCEIL");
  ASSERT_FALSE(ptx.empty());
  EXPECT_GT(countMatches(ptx, R"(cvt\.rn\.satfinite\.e5m2x2\.f32)"), 0u);
  EXPECT_EQ(countMatches(ptx, R"(min\.f32)"), 0u);
  EXPECT_GT(countMatches(ptx, R"(abs\.f32)"), 0u);
}

TEST(BoundedEncode, OtherModesKeepTheMin) {
  for (const char* mode : {"EVEN", "FLOOR"}) {
    std::string ptx = dualPtx(mode);
    ASSERT_FALSE(ptx.empty()) << mode;
    // One min per element: the dual tile encodes every element twice (rows and columns).
    EXPECT_EQ(countMatches(ptx, R"(min\.f32)"), countMatches(ptx, R"(cvt\.rn\.satfinite\.e5m2x2\.f32)") * 2) << mode;
  }
}

// A scale that is not the encoded elements' own (here the RCEIL scale of other values) bounds
// nothing: the min stays.
TEST(BoundedEncode, AnotherValuesScaleKeepsTheMin) {
  constexpr const char* kSource = R"(
kernel foreign(x: bf16[R, 32], z: bf16[R, 32], data: out u8[R, 24], scales: out u8[R, 1])
  variant FMT in {E2M3, E3M2}, MODE in {RCEIL, EVEN, FLOOR}
  tune THREADS in {1} = 1, VEC in {32} = 32
{
  row r in R {
    s = mx_scale(z[r, :], FMT, MODE)
    scales[r, :] = s
    data[r, :] = pack6(mx_encode(x[r, :], s, FMT))
  }
}
)";
  std::string ptx = testing::compiledOrFail(testing::inlineKernel(kSource, "foreign", configOf("FMT=E3M2,MODE=RCEIL")),
                                            "sm_90", codegen::Emit::Ptx);
  ASSERT_FALSE(ptx.empty());
  EXPECT_EQ(countMatches(ptx, R"(min\.f32)"), 32u);
}

}  // namespace
}  // namespace mxfp6
