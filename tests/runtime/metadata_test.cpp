// parseKernelMetadata: the contract with the code generator. A field it gets wrong must be an
// error that names the field, never a kernel launched with the wrong block or ABI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

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
    "config": {"D": 3072, "ROWS": 4, "THREADS": 64},
    "waits_for_previous_grid": true
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
  EXPECT_TRUE(md.waitsForPreviousGrid);
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

// Metadata written before kernels waited for the previous grid: they launch in stream order.
TEST(KernelMetadata, WaitingForThePreviousGridIsOptional) {
  json j = validMetadata();
  j.erase("waits_for_previous_grid");
  auto parsed = parseKernelMetadata(j.dump());
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_FALSE(parsed->waitsForPreviousGrid);
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
  EXPECT_EQ(withField("waits_for_previous_grid", 1),
            "kernel metadata: field 'waits_for_previous_grid' must be true or false, got number");
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

TEST(KernelMetadata, MinimumsAreReadForIntegerArguments) {
  json j = validMetadata();
  j["abi"][2]["minimum"] = 1;
  auto parsed = parseKernelMetadata(j.dump());
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_EQ(parsed->abi[2].minimum, 1);
  EXPECT_EQ(parsed->abi[3].minimum, std::numeric_limits<int64_t>::min());  // absent: any value
  j = validMetadata();
  j["abi"][4]["minimum"] = 1;
  EXPECT_EQ(parseError(j), "kernel metadata: field 'abi[4].minimum' applies to i32/i64 arguments only");
  j = validMetadata();
  j["abi"][2]["minimum"] = "one";
  EXPECT_THAT(parseError(j), HasSubstr("field 'abi[2].minimum'"));
}

// A divisor's multiplier and shift are "derived" ABI entries: the runtime computes them, so they
// are not among the arguments a launch takes, and each must be of an argument the launch holds
// to at least 1.
TEST(KernelMetadata, DerivedArgumentsFollowTheOthers) {
  json j = validMetadata();
  j["abi"][2]["minimum"] = 1;
  j["abi"][3]["minimum"] = 1;
  auto derived = [](const char* what, const char* of) {
    return json{{"kind", "i32"}, {"name", std::string(what) + "(" + of + ")"}, {"derived", what}, {"of", of}};
  };
  for (const char* of : {"rows", "T"})
    for (const char* what : {"divisor_multiplier", "divisor_shift"}) j["abi"].push_back(derived(what, of));
  auto parsed = parseKernelMetadata(j.dump());
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_EQ(parsed->abi.size(), 5u);  // what a launch passes
  ASSERT_EQ(parsed->derived.size(), 4u);
  EXPECT_EQ(parsed->derived[0].kind, DerivedArg::Kind::DivisorMultiplier);
  EXPECT_EQ(parsed->derived[1].kind, DerivedArg::Kind::DivisorShift);
  EXPECT_EQ(parsed->derived[0].source, 2u);
  EXPECT_EQ(parsed->derived[3].source, 3u);
  EXPECT_EQ(parsed->derived[3].name, "divisor_shift(T)");
  // A divisor's multiplier is exact below 2^31: its source may not be larger.
  EXPECT_EQ(parsed->abi[2].maximum, INT32_MAX);
  EXPECT_EQ(parsed->abi[3].maximum, INT32_MAX);
  EXPECT_EQ(parsed->abi[1].maximum, std::numeric_limits<int64_t>::max());

  json bad = j;
  bad["abi"][5]["derived"] = "divisor_inverse";
  EXPECT_EQ(parseError(bad), "kernel metadata: field 'abi[5].derived' is 'divisor_inverse', expected "
                             "divisor_multiplier or divisor_shift");
  bad = j;
  bad["abi"][6]["kind"] = "i64";
  EXPECT_EQ(parseError(bad), "kernel metadata: field 'abi[6].kind' of a derived argument must be i32");
  bad = j;
  bad["abi"][7]["of"] = "H";
  EXPECT_EQ(parseError(bad), "kernel metadata: field 'abi[7].of' is 'H', which names no argument before it");
  bad = j;
  bad["abi"][3].erase("minimum");  // T might be 0: no multiplier for it
  EXPECT_EQ(parseError(bad), "kernel metadata: field 'abi[7].of' 'T' must be an i32/i64 argument with a minimum >= 1");
  bad = j;
  bad["abi"][5]["of"] = "eps";
  EXPECT_EQ(parseError(bad), "kernel metadata: field 'abi[5].of' 'eps' must be an i32/i64 argument with a minimum >= 1");
  bad = j;
  bad["abi"].push_back({{"kind", "i32"}, {"name", "late"}});
  EXPECT_EQ(parseError(bad), "kernel metadata: field 'abi[9]' follows a derived argument; derived arguments come last");
  bad = j;
  bad["abi"][8].erase("of");
  EXPECT_EQ(parseError(bad), "kernel metadata: missing field 'abi[8].of'");
}

// The multiplier and shift divide exactly as integer division does, over the divisors and
// dividends a launch can have (both below 2^31): checked against the hardware's division.
TEST(DivisorMagic, DividesLikeIntegerDivision) {
  auto divide = [](uint64_t n, int64_t d) {
    uint64_t m = divisorMultiplier(d), l = divisorShift(d);
    return (((m * n) >> 32) + n) >> l;
  };
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d <= 300; ++d) divisors.push_back(d);
  for (int p = 9; p <= 31; ++p)
    for (int64_t e : {-1, 0, 1}) divisors.push_back((int64_t{1} << p) + e);
  for (int64_t d : {24, 4096, 3072, 9216, 12288, 21504, 98304, 786432, 1000003, 1 << 20}) divisors.push_back(d);
  uint64_t state = 0x9e3779b97f4a7c15ull;  // xorshift: many dividends, the same every run
  auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  for (int64_t d : divisors) {
    if (d > INT32_MAX) continue;
    std::vector<uint64_t> dividends = {0, 1, 2, uint64_t(INT32_MAX), uint64_t(INT32_MAX) - 1};
    for (uint64_t q : {uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{INT32_MAX} / uint64_t(d)})
      for (int64_t e : {-1, 0, 1})
        if (int64_t n = int64_t(q) * d + e; n >= 0 && n <= INT32_MAX) dividends.push_back(uint64_t(n));
    for (int i = 0; i < 2000; ++i) dividends.push_back(next() % (uint64_t{INT32_MAX} + 1));
    for (uint64_t n : dividends) ASSERT_EQ(divide(n, d), n / uint64_t(d)) << n << " / " << d;
    EXPECT_LT(divisorShift(d), 32u);
  }
  // Densely (every dividend below 2^20, then steps of n / 2^20) for divisors of the Flux shapes.
  for (int64_t d : {3, 24, 4096}) {
    for (uint64_t n = 0; n <= uint64_t{INT32_MAX}; n += 1 + (n >> 20)) ASSERT_EQ(divide(n, d), n / uint64_t(d)) << n;
  }
  // No launch divides by anything else (its minimum is 1, sizes are below 2^31).
  for (int64_t d : {int64_t{0}, int64_t{-3}, int64_t{INT32_MAX} + 1}) {
    EXPECT_EQ(divisorMultiplier(d), 0u);
    EXPECT_EQ(divisorShift(d), 0u);
  }
}

// ---- "params" and "rows": the signature launches from tensors are checked against ----

json signedMetadata() {
  return json::parse(R"({
    "kernel": "norm_fwd", "entry": "norm_fwd", "target": "sm_90",
    "abi": [{"kind": "ptr", "name": "x"}, {"kind": "ptr", "name": "y"},
            {"kind": "i64", "name": "x_stride", "multiple_of": 8}, {"kind": "f32", "name": "eps"},
            {"kind": "i64", "name": "T"}],
    "block": [256, 1, 1], "shared_bytes": 0, "rows_per_program": 4, "alignment": 16,
    "params": [
      {"name": "x", "kind": "tensor", "dtype": "bf16", "output": false,
       "dims": [{"dim": "T"}, {"dim": "H"}, {"const": 128, "name": "D"}],
       "strides": [{"param": "x_stride"}, {"const": 128}, {"const": 1}]},
      {"name": "y", "kind": "tensor", "dtype": "f32", "output": true,
       "dims": [{"dim": "T"}, {"dim": "H"}], "strides": [{"row_major": true}, {"any": true}]},
      {"name": "x_stride", "kind": "scalar", "dtype": "i64"},
      {"name": "eps", "kind": "scalar", "dtype": "f32", "default": 1e-6}],
    "rows": [{"dim": "T"}, {"const": 4}]
  })");
}

TEST(KernelSignature, ParsesParamsAndRows) {
  auto parsed = parseKernelMetadata(signedMetadata().dump());
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  ASSERT_TRUE(parsed->signature.has_value());
  const KernelSignature& sig = *parsed->signature;
  ASSERT_EQ(sig.params.size(), 4u);
  const ParamSpec& x = sig.params[0];
  EXPECT_TRUE(x.isTensor);
  EXPECT_EQ(x.dtype, Dtype::BF16);
  EXPECT_FALSE(x.isOutput);
  ASSERT_EQ(x.dims.size(), 3u);
  EXPECT_EQ(x.dims[0].name, "T");
  EXPECT_EQ(x.dims[0].runtimeDim, 0);
  EXPECT_FALSE(x.dims[0].isConstant());
  EXPECT_EQ(x.dims[1].runtimeDim, 1);
  EXPECT_EQ(x.dims[2].constant, 128);
  EXPECT_EQ(x.dims[2].name, "D");
  EXPECT_EQ(x.strides[0].kind, StrideSpec::Kind::Param);
  EXPECT_EQ(x.strides[0].param, "x_stride");
  EXPECT_EQ(x.strides[0].paramIndex, 2);
  EXPECT_EQ(x.strides[1].kind, StrideSpec::Kind::Constant);
  EXPECT_EQ(x.strides[1].constant, 128);
  const ParamSpec& y = sig.params[1];
  EXPECT_TRUE(y.isOutput);
  EXPECT_EQ(y.dims[1].runtimeDim, 1);  // the same H as x's
  EXPECT_EQ(y.strides[0].kind, StrideSpec::Kind::RowMajor);
  EXPECT_EQ(y.strides[1].kind, StrideSpec::Kind::Any);
  EXPECT_FALSE(sig.params[2].isTensor);
  EXPECT_EQ(sig.params[2].dtype, Dtype::I64);
  EXPECT_EQ(sig.params[2].multipleOf, 8);  // from the ABI
  EXPECT_EQ(sig.params[3].defaultValue, 1e-6);
  EXPECT_EQ(sig.runtimeDims, (std::vector<std::string>{"T", "H"}));
  ASSERT_EQ(sig.rows.size(), 2u);
  EXPECT_EQ(sig.rows[0].runtimeDim, 0);
  EXPECT_EQ(sig.rows[1].constant, 4);
  EXPECT_EQ(sig.abiDims, (std::vector<int>{0}));  // the ABI carries T only
}

TEST(KernelSignature, IndexBoundsAreProductsOfCarriedSizes) {
  json j = signedMetadata();
  j["index_bounds"] = json::parse(R"([[{"dim": "T"}, {"const": 4}]])");
  auto parsed = parseKernelMetadata(j.dump());
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  const std::vector<std::vector<SizeSpec>>& bounds = parsed->signature->indexBounds;
  ASSERT_EQ(bounds.size(), 1u);
  ASSERT_EQ(bounds[0].size(), 2u);
  EXPECT_EQ(bounds[0][0].runtimeDim, 0);
  EXPECT_EQ(bounds[0][1].constant, 4);
  EXPECT_TRUE(parseKernelMetadata(signedMetadata().dump())->signature->indexBounds.empty());  // optional

  j["index_bounds"] = json::parse(R"([[{"dim": "T"}, {"dim": "H"}]])");  // H: no ABI argument
  EXPECT_EQ(parseError(j), "kernel metadata: field 'index_bounds[0]' names 'H', which no ABI argument carries");
  j["index_bounds"] = json::parse(R"([[{"dim": "Q"}]])");
  EXPECT_EQ(parseError(j), "kernel metadata: field 'index_bounds[0][0].dim' is 'Q', which is the size of no "
                           "tensor parameter");
  j["index_bounds"] = json::parse(R"([[]])");
  EXPECT_THAT(parseError(j), StartsWith("kernel metadata: field 'index_bounds[0]' must be a non-empty array"));
  j["index_bounds"] = 3;
  EXPECT_THAT(parseError(j), StartsWith("kernel metadata: field 'index_bounds' must be an array"));
}

TEST(KernelSignature, MetadataWithoutItStillLoads) {
  auto parsed = parseKernelMetadata(validMetadata().dump());
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_FALSE(parsed->signature.has_value());
}

TEST(KernelSignature, ParamsAndRowsComeTogether) {
  json j = signedMetadata();
  j.erase("rows");
  EXPECT_EQ(parseError(j), "kernel metadata: missing field 'rows'");
  j = signedMetadata();
  j.erase("params");
  EXPECT_EQ(parseError(j), "kernel metadata: missing field 'params'");
}

/// The error of signedMetadata() with `edit` applied.
std::string signatureError(const std::function<void(json&)>& edit) {
  json j = signedMetadata();
  edit(j);
  return parseError(j);
}

TEST(KernelSignature, MalformedParamsAreNamed) {
  EXPECT_EQ(signatureError([](json& j) { j["params"] = 3; }),
            "kernel metadata: field 'params' must be an array, got number");
  EXPECT_EQ(signatureError([](json& j) { j["params"][0] = "x"; }),
            "kernel metadata: field 'params[0]' must be an object {\"name\", \"kind\", ...}, "
            "got string");
  EXPECT_EQ(signatureError([](json& j) { j["params"][1].erase("name"); }),
            "kernel metadata: missing field 'params[1].name'");
  EXPECT_EQ(signatureError([](json& j) { j["params"][1]["name"] = "x"; }),
            "kernel metadata: field 'params[1].name' is 'x', a name already taken");
  EXPECT_EQ(signatureError([](json& j) { j["params"][0]["kind"] = "matrix"; }),
            "kernel metadata: field 'params[0].kind' is 'matrix', expected tensor or scalar");
  EXPECT_EQ(signatureError([](json& j) { j["params"][0]["dtype"] = "f64"; }),
            "kernel metadata: field 'params[0].dtype' is 'f64', expected bf16, f16, f32, i32, "
            "i64 or u8");
  EXPECT_EQ(signatureError([](json& j) { j["params"][3]["dtype"] = "bf16"; }),
            "kernel metadata: field 'params[3].dtype' is 'bf16', expected i32, i64 or f32");
  EXPECT_EQ(signatureError([](json& j) { j["params"][3]["default"] = "small"; }),
            "kernel metadata: field 'params[3].default' must be a number, got string");
  EXPECT_EQ(signatureError([](json& j) { j["params"][1]["output"] = 1; }),
            "kernel metadata: field 'params[1].output' must be true or false, got number");
  EXPECT_EQ(signatureError([](json& j) { j["params"][1].erase("output"); }),
            "kernel metadata: missing field 'params[1].output'");
}

TEST(KernelSignature, MalformedDimsAndStridesAreNamed) {
  EXPECT_EQ(signatureError([](json& j) { j["params"][1]["dims"] = json::array(); }),
            "kernel metadata: field 'params[1].dims' must be an array of 1 to 8 sizes, got array "
            "of size 0");
  EXPECT_EQ(signatureError([](json& j) { j["params"][0]["dims"][2] = {{"const", -1}}; }),
            "kernel metadata: field 'params[0].dims[2].const' is -1, must be in [0, "
            "9223372036854775807]");
  EXPECT_EQ(signatureError([](json& j) { j["params"][0]["dims"][0] = {{"const", 4}, {"dim", "T"}}; }),
            "kernel metadata: field 'params[0].dims[0]' has both 'const' and 'dim', must be "
            "{\"const\": n} or {\"dim\": name}");
  EXPECT_EQ(signatureError([](json& j) { j["params"][0]["dims"][0] = {{"size", 4}}; }),
            "kernel metadata: field 'params[0].dims[0]' must be {\"const\": n} or {\"dim\": "
            "name}, got {\"size\":4}");
  EXPECT_EQ(signatureError([](json& j) { j["params"][0]["dims"][0] = {{"dim", ""}}; }),
            "kernel metadata: field 'params[0].dims[0].dim' must not be empty");
  EXPECT_EQ(signatureError([](json& j) { j["params"][1]["strides"].erase(1); }),
            "kernel metadata: field 'params[1].strides' must be an array with one stride per dim "
            "(2), got array of size 1");
  EXPECT_EQ(signatureError([](json& j) { j["params"][1]["strides"][0] = {{"row_major", false}}; }),
            "kernel metadata: field 'params[1].strides[0].row_major' must be true, got boolean");
  EXPECT_EQ(signatureError([](json& j) { j["params"][1]["strides"][0] = {{"const", "1"}}; }),
            "kernel metadata: field 'params[1].strides[0].const' must be an integer, got string");
  EXPECT_THAT(signatureError([](json& j) { j["params"][1]["strides"][0] = 1; }),
              StartsWith("kernel metadata: field 'params[1].strides[0]' must be {\"const\": n}, "
                         "{\"param\": name}, {\"row_major\": true} or {\"any\": true}, got "
                         "number"));
  EXPECT_EQ(signatureError([](json& j) { j["params"][0]["strides"][0] = {{"param", "eps"}}; }),
            "kernel metadata: field 'params[0].strides[0].param' is 'eps', which is not an i32 "
            "or i64 parameter");
  EXPECT_EQ(signatureError([](json& j) { j["params"][0]["strides"][0] = {{"param", "z"}}; }),
            "kernel metadata: field 'params[0].strides[0].param' is 'z', which is not an i32 or "
            "i64 parameter");
}

TEST(KernelSignature, MalformedRowsAreNamed) {
  EXPECT_EQ(signatureError([](json& j) { j["rows"] = json::object(); }),
            "kernel metadata: field 'rows' must be an array, got object");
  EXPECT_EQ(signatureError([](json& j) { j["rows"][0] = {{"dim", "B"}}; }),
            "kernel metadata: field 'rows[0].dim' is 'B', which is the size of no tensor "
            "parameter");
  EXPECT_EQ(signatureError([](json& j) { j["rows"][1] = {{"const", -4}}; }),
            "kernel metadata: field 'rows[1].const' is -4, must be in [0, 9223372036854775807]");
}

// The ABI is the params (a pointer per tensor) then runtime sizes: a launch from tensors builds
// it from that, so metadata where the two disagree cannot load.
TEST(KernelSignature, TheAbiMustFollowTheParams) {
  EXPECT_EQ(signatureError([](json& j) { j["abi"][1]["name"] = "z"; }),
            "kernel metadata: field 'params' does not match 'abi': params[1] is ptr 'y', abi[1] "
            "is ptr 'z'");
  EXPECT_EQ(signatureError([](json& j) { j["abi"][2]["kind"] = "i32"; }),
            "kernel metadata: field 'params' does not match 'abi': params[2] is i64 'x_stride', "
            "abi[2] is i32 'x_stride'");
  EXPECT_EQ(signatureError([](json& j) { j["abi"][4]["name"] = "N"; }),
            "kernel metadata: field 'params' does not match 'abi': abi[4] (i64 'N') follows the "
            "params but is not one of their runtime sizes");
  EXPECT_EQ(signatureError([](json& j) { j["abi"].erase(4); j["abi"].erase(3); }),
            "kernel metadata: field 'params' does not match 'abi': 4 params but 3 ABI arguments");
}

}  // namespace
}  // namespace mxfp6::rt
