// parseKernelMetadata: the contract with the code generator. A field it gets wrong must be an
// error that names the field, never a kernel launched with the wrong block or ABI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/runtime.h"

namespace mxfp6::rt {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

json validMetadata() {
  return json::parse(R"({
    "kernel": "ln_modulate_fwd",
    "entry": "ln_modulate_fwd_kernel",
    "target": "sm_90",
    "abi": [{"kind": "ptr", "name": "x"}, {"kind": "ptr", "name": "y"},
            {"kind": "i32", "name": "rows"}, {"kind": "i64", "name": "T"},
            {"kind": "f32", "name": "eps"}],
    "block": [256, 1, 1],
    "shared_bytes": 1024,
    "rows_per_program": 4,
    "alignment": 16,
    "config": {"D": 3072, "ROWS": 4, "THREADS": 64}
  })");
}

std::string parseError(const json& j) {
  auto parsed = parseKernelMetadata(j.dump());
  EXPECT_FALSE(parsed.isOk()) << j.dump();
  return parsed.isOk() ? "" : parsed.status().message();
}

TEST(KernelMetadata, ParsesEveryField) {
  auto parsed = parseKernelMetadata(validMetadata().dump());
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  const KernelMetadata& md = *parsed;
  EXPECT_EQ(md.kernel, "ln_modulate_fwd");
  EXPECT_EQ(md.entry, "ln_modulate_fwd_kernel");
  EXPECT_EQ(md.target, "sm_90");
  EXPECT_EQ(md.platform(), Platform::Cuda);
  ASSERT_EQ(md.abi.size(), 5u);
  EXPECT_EQ(md.abi[0].kind, ArgKind::Pointer);
  EXPECT_EQ(md.abi[0].name, "x");
  EXPECT_EQ(md.abi[2].kind, ArgKind::I32);
  EXPECT_EQ(md.abi[3].kind, ArgKind::I64);
  EXPECT_EQ(md.abi[4].kind, ArgKind::F32);
  EXPECT_EQ(md.abi[4].name, "eps");
  EXPECT_EQ(md.block, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_EQ(md.sharedBytes, 1024u);
  EXPECT_EQ(md.rowsPerProgram, 4);
  EXPECT_EQ(md.alignment, 16u);
  EXPECT_EQ(md.config.at("D"), 3072);
  EXPECT_EQ(md.config.size(), 3u);
}

TEST(KernelMetadata, AmdTargetsAreHip) {
  for (const char* target : {"gfx942", "gfx950"}) {
    json j = validMetadata();
    j["target"] = target;
    auto parsed = parseKernelMetadata(j.dump());
    ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
    EXPECT_EQ(parsed->platform(), Platform::Hip);
  }
}

TEST(KernelMetadata, ConfigIsOptionalAndUnknownFieldsAreIgnored) {
  json j = validMetadata();
  j.erase("config");
  j["dsl_sha256"] = "abc";  // provenance the code generator may add
  auto parsed = parseKernelMetadata(j.dump());
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_TRUE(parsed->config.empty());
}

TEST(KernelMetadata, RejectsMalformedJson) {
  auto parsed = parseKernelMetadata(R"({"kernel": "k", )");
  ASSERT_FALSE(parsed.isOk());
  EXPECT_THAT(parsed.status().message(), StartsWith("kernel metadata: invalid JSON: "));
  EXPECT_THAT(parsed.status().message(), HasSubstr("line 1"));
  EXPECT_FALSE(parseKernelMetadata("").isOk());
}

TEST(KernelMetadata, RejectsNonObject) {
  EXPECT_EQ(parseError(json::array()), "kernel metadata: expected a JSON object, got array");
}

class MissingField : public ::testing::TestWithParam<const char*> {};

TEST_P(MissingField, IsNamed) {
  json j = validMetadata();
  j.erase(GetParam());
  EXPECT_EQ(parseError(j), std::string("kernel metadata: missing field '") + GetParam() + "'");
}

INSTANTIATE_TEST_SUITE_P(RequiredFields, MissingField,
                         ::testing::Values("kernel", "entry", "target", "abi", "block",
                                           "shared_bytes", "rows_per_program", "alignment"));

TEST(KernelMetadata, IllTypedFieldsAreNamed) {
  auto withField = [](const char* field, json value) {
    json j = validMetadata();
    j[field] = std::move(value);
    return parseError(j);
  };
  EXPECT_EQ(withField("kernel", 3), "kernel metadata: field 'kernel' must be a string, got number");
  EXPECT_EQ(withField("entry", ""), "kernel metadata: field 'entry' must not be empty");
  EXPECT_EQ(withField("abi", "x"), "kernel metadata: field 'abi' must be an array, got string");
  EXPECT_THAT(withField("block", json::array({256, 1})),
              StartsWith("kernel metadata: field 'block' must be an array of 3 integers >= 1"));
  EXPECT_THAT(withField("block", json::array({0, 1, 1})),
              StartsWith("kernel metadata: field 'block[0]' is 0"));
  EXPECT_THAT(withField("block", json::array({64, 64, 1})),
              HasSubstr("field 'block' has 4096 threads, at most 1024"));
  EXPECT_EQ(withField("shared_bytes", 1.5),
            "kernel metadata: field 'shared_bytes' must be an integer, got number");
  EXPECT_THAT(withField("shared_bytes", -1), HasSubstr("field 'shared_bytes' is -1"));
  EXPECT_THAT(withField("rows_per_program", 0), HasSubstr("field 'rows_per_program' is 0"));
  EXPECT_THAT(withField("alignment", 12),
              HasSubstr("field 'alignment' is 12, must be a power of two"));
  EXPECT_THAT(withField("target", "sm90"), HasSubstr("field 'target' is 'sm90'"));
  EXPECT_THAT(withField("target", "x86_64"), HasSubstr("field 'target' is 'x86_64'"));
  EXPECT_THAT(withField("config", json::object({{"ROWS", "4"}})),
              HasSubstr("field 'config.ROWS' must be an integer, got string"));
}

TEST(KernelMetadata, AbiEntriesAreChecked) {
  json j = validMetadata();
  j["abi"][4]["kind"] = "f64";
  EXPECT_EQ(parseError(j),
            "kernel metadata: field 'abi[4].kind' is 'f64', expected ptr, i32, i64 or f32");
  j = validMetadata();
  j["abi"][1].erase("name");
  EXPECT_EQ(parseError(j), "kernel metadata: missing field 'abi[1].name'");
  j = validMetadata();
  j["abi"][1]["name"] = 7;
  EXPECT_EQ(parseError(j), "kernel metadata: field 'abi[1].name' must be a string, got number");
  j = validMetadata();
  j["abi"][2] = "i32";
  EXPECT_THAT(parseError(j), HasSubstr("field 'abi[2]' must be an object"));
}

TEST(KernelMetadata, StrideMultiplesAreReadForIntegerArguments) {
  json j = validMetadata();
  j["abi"][3]["multiple_of"] = 8;
  auto parsed = parseKernelMetadata(j.dump());
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_EQ(parsed->abi[3].multipleOf, 8);
  EXPECT_EQ(parsed->abi[2].multipleOf, 1);  // absent: any value
  j = validMetadata();
  j["abi"][0]["multiple_of"] = 8;
  EXPECT_EQ(parseError(j), "kernel metadata: field 'abi[0].multiple_of' applies to i32/i64 arguments only");
  j = validMetadata();
  j["abi"][2]["multiple_of"] = 0;
  EXPECT_THAT(parseError(j), HasSubstr("field 'abi[2].multiple_of'"));
}

}  // namespace
}  // namespace mxfp6::rt
