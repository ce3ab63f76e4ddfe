// The row-vector building blocks (kernels_dsl/README.md, builtins table and "Typing"): the KIR
// op, ival, type and length each lowers to, and a located error for each misuse.
#include <gtest/gtest.h>

#include <regex>

#include "tests/frontend/kir_checks.h"
#include "tests/frontend/test_util.h"

namespace mxfp6::frontend {
namespace {

using kir::Dtype;
using kir::MxFormat;
using kir::MxScaleMode;
using kir::OpCode;
using kir::ValueType;
using test::instantiateErrors;
using test::parseErrors;

/// A kernel whose row body is `body`, on line 9 from column 5. D = 128, K = 2 by default;
/// FMT defaults to E2M3 and MODE to FLOOR.
std::string mxKernel(const std::string& body) {
  return test::rowKernel(
      "kernel k(x: bf16[T, D], h: bf16[T, 48], w: f32[T, 64], c: f32[T, 32], sn: f32[T, 32],\n"
      "         iv: i32[T, 64], sc: u8[T, 4], b: u8[T, 6], n: i32, f: f32,\n"
      "         q: out u8[T, 96], s: out u8[T, 4], o: out f32[T, 64])\n"
      "  specialize D = 128\n"
      "  tune K in {2, 4, 0} require K >= 0\n"  // a tunable must be used
      "  variant FMT in {E2M3, E3M2}, MODE in {RCEIL, EVEN, FLOOR} = FLOOR\n",
      body);
}

kir::Kernel lower(const std::string& body, const std::map<std::string, int64_t>& config = {}) {
  DiagnosticEngine diags;
  auto k = test::instantiateFirst(mxKernel(body), diags, config);
  EXPECT_TRUE(k.has_value()) << diags.render();
  if (!k) return {};
  test::expectWellFormed(*k);
  return std::move(*k);
}

std::string errors(const std::string& body, const std::map<std::string, int64_t>& config = {}) {
  return instantiateErrors(mxKernel(body), config);
}

const kir::Op& named(const kir::Kernel& k, const std::string& name) {
  for (const kir::Op& op : k.ops)
    if (op.name == name) return op;
  ADD_FAILURE() << "no op named " << name << " in\n" << dumpKir(k);
  static const kir::Op none;
  return none;
}

/// The op of `name`, checked to be `code` of type `type`, with operands of the given codes.
void expectOp(const kir::Kernel& k, const std::string& name, OpCode code, ValueType type,
              int64_t ival, std::vector<OpCode> operands) {
  SCOPED_TRACE(name);
  const kir::Op& op = named(k, name);
  EXPECT_EQ(op.code, code) << kir::opName(op.code);
  EXPECT_EQ(op.type, type) << kir::typeName(op.type);
  EXPECT_EQ(op.ival, ival);
  ASSERT_EQ(op.operands.size(), operands.size());
  for (size_t i = 0; i < operands.size(); ++i)
    EXPECT_EQ(k.ops[op.operands[i]].code, operands[i]) << "operand " << i;
}

const ValueType kU8x4{Dtype::U8, 4};

TEST(RowBuiltins, Repeat) {
  kir::Kernel k = lower(
      "a = repeat(w[t, :], 2)\n    bb = repeat(x[t, :], K)\n    c2 = repeat(sc[t, :], 8)\n"
      "    d = repeat(iv[t, :], 1)");
  expectOp(k, "a", OpCode::Repeat, {Dtype::F32, 128}, 2, {OpCode::Load});
  expectOp(k, "bb", OpCode::Repeat, {Dtype::BF16, 256}, 2, {OpCode::Load});
  expectOp(k, "c2", OpCode::Repeat, {Dtype::U8, 32}, 8, {OpCode::Load});
  expectOp(k, "d", OpCode::Repeat, {Dtype::I32, 64}, 1, {OpCode::Load});
  k = lower("bb = repeat(x[t, :], K)", {{"K", 4}});
  expectOp(k, "bb", OpCode::Repeat, {Dtype::BF16, 512}, 4, {OpCode::Load});
  k = lower("bb = repeat(x[t, :], D)\n    kk = repeat(x[t, :], K)");  // K: a tunable must be used
  EXPECT_EQ(named(k, "bb").type, (ValueType{Dtype::BF16, 128 * 128}));
}

TEST(RowBuiltins, GroupReductions) {
  kir::Kernel k = lower(
      "a = group_sum(w[t, :], 32)\n    bb = group_max(iv[t, :], 16)\n"
      "    m = group_min(w[t, :], 64)\n    l = group_sum(i64(iv[t, :]), K)");
  expectOp(k, "a", OpCode::GroupReduceSum, {Dtype::F32, 2}, 32, {OpCode::Load});
  expectOp(k, "bb", OpCode::GroupReduceMax, {Dtype::I32, 4}, 16, {OpCode::Load});
  expectOp(k, "m", OpCode::GroupReduceMin, {Dtype::F32, 1}, 64, {OpCode::Load});
  expectOp(k, "l", OpCode::GroupReduceSum, {Dtype::I64, 32}, 2, {OpCode::Cast});
}

TEST(RowBuiltins, RotatePairs) {
  kir::Kernel k = lower("r = rotate_pairs(w[t, :], c[t, :], sn[t, :])\n    o[t, :] = r");
  expectOp(k, "r", OpCode::RotatePairs, {Dtype::F32, 64}, 0,
           {OpCode::Load, OpCode::Load, OpCode::Load});
  const kir::Op& r = named(k, "r");
  EXPECT_EQ(k.ops[r.operands[0]].param, 2);  // w, c, sn in that order
  EXPECT_EQ(k.ops[r.operands[1]].param, 3);
  EXPECT_EQ(k.ops[r.operands[2]].param, 4);
}

TEST(RowBuiltins, MxPipelineStoresBytes) {
  kir::Kernel k = lower(
      "sx = mx_scale(x[t, :], FMT, MODE)\n"
      "    codes = mx_encode(x[t, :], sx, FMT)\n"
      "    q[t, :] = pack6(codes)\n"
      "    s[t, :] = sx");
  int64_t e2m3Floor = kir::mxVariant(MxFormat::E2M3, MxScaleMode::Floor);
  int64_t e2m3 = kir::mxVariant(MxFormat::E2M3, MxScaleMode::Rceil);
  expectOp(k, "sx", OpCode::MxScale, kU8x4, e2m3Floor, {OpCode::Load});
  expectOp(k, "codes", OpCode::MxEncode, {Dtype::U8, 128}, e2m3, {OpCode::Load, OpCode::MxScale});
  std::vector<const kir::Op*> stores;
  for (const kir::Op& op : k.ops)
    if (op.code == OpCode::Store) stores.push_back(&op);
  ASSERT_EQ(stores.size(), 2u);
  const kir::Op& packed = k.ops[stores[0]->value];
  EXPECT_EQ(packed.code, OpCode::Pack6);
  EXPECT_EQ(packed.type, (ValueType{Dtype::U8, 96}));
  EXPECT_EQ(k.ops[packed.operands[0]].code, OpCode::MxEncode);
  EXPECT_EQ(stores[1]->type, kU8x4);
  EXPECT_EQ(k.ops[stores[1]->value].code, OpCode::MxScale);
}

TEST(RowBuiltins, MxFormatAndModeFromVariantsOrNames) {
  std::string body =
      "a = mx_scale(x[t, :], FMT, MODE)\n    bb = mx_scale(x[t, :], E3M2, RCEIL)\n"
      "    e = mx_encode(x[t, :], sc[t, :], E3M2)\n    g = mx_encode(x[t, :], sc[t, :], FMT)";
  kir::Kernel k =
      lower(body, {{"FMT", int64_t(MxFormat::E3M2)}, {"MODE", int64_t(MxScaleMode::Even)}});
  EXPECT_EQ(named(k, "a").ival, kir::mxVariant(MxFormat::E3M2, MxScaleMode::Even));
  EXPECT_EQ(named(k, "bb").ival, kir::mxVariant(MxFormat::E3M2, MxScaleMode::Rceil));
  EXPECT_EQ(named(k, "e").ival, kir::mxVariant(MxFormat::E3M2, MxScaleMode::Rceil));
  EXPECT_EQ(named(k, "g").ival, kir::mxVariant(MxFormat::E3M2, MxScaleMode::Rceil));
  expectOp(k, "e", OpCode::MxEncode, {Dtype::U8, 128}, 4, {OpCode::Load, OpCode::Load});
  k = lower(body);
  EXPECT_EQ(named(k, "a").ival, kir::mxVariant(MxFormat::E2M3, MxScaleMode::Floor));
  EXPECT_EQ(named(k, "g").ival, kir::mxVariant(MxFormat::E2M3, MxScaleMode::Rceil));
}

TEST(RowBuiltins, Pack6) {
  kir::Kernel k = lower("p = pack6(repeat(sc[t, :], 4))");
  expectOp(k, "p", OpCode::Pack6, {Dtype::U8, 12}, 0, {OpCode::Repeat});
}

// Line 9 is "    <body>": the body starts at column 5, so "v = name(" puts the name at 9.

TEST(RowBuiltins, Arity) {
  EXPECT_EQ(errors("v = repeat(w[t, :])"), "t.mxk:9:9: error: repeat takes 2 arguments, got 1\n");
  EXPECT_EQ(errors("v = group_min(w[t, :], 2, 3)"),
            "t.mxk:9:9: error: group_min takes 2 arguments, got 3\n");
  EXPECT_EQ(errors("v = rotate_pairs(w[t, :], c[t, :])"),
            "t.mxk:9:9: error: rotate_pairs takes 3 arguments, got 2\n");
  EXPECT_EQ(errors("v = mx_scale(x[t, :], FMT)"),
            "t.mxk:9:9: error: mx_scale takes 3 arguments, got 2\n");
  EXPECT_EQ(errors("v = mx_encode(x[t, :], sc[t, :])"),
            "t.mxk:9:9: error: mx_encode takes 3 arguments, got 2\n");
  EXPECT_EQ(errors("v = pack6(sc[t, :], 4)"), "t.mxk:9:9: error: pack6 takes 1 argument, got 2\n");
}

TEST(RowBuiltins, VectorArguments) {
  EXPECT_EQ(errors("v = repeat(f, 2)"),
            "t.mxk:9:16: error: repeat takes a row vector as its first argument, got a scalar "
            "f32\n");
  EXPECT_EQ(errors("v = repeat(w[t, :] > 0.0, 2)"),
            "t.mxk:9:24: error: repeat takes a float or integer vector, got boolx64\n");
  EXPECT_EQ(errors("v = group_sum(w[t, 0], 2)"),
            "t.mxk:9:19: error: group_sum takes a row vector as its first argument, got a scalar "
            "f32\n");
  EXPECT_EQ(errors("v = group_sum(x[t, :], 32)"),
            "t.mxk:9:19: error: arithmetic on bf16 needs f32(...) first\n");
  EXPECT_EQ(errors("v = group_max(sc[t, :], 2)"),
            "t.mxk:9:19: error: arithmetic on u8 needs i32(...) first\n");
  EXPECT_EQ(errors("v = group_min(w[t, :] < 1.0, 2)"),
            "t.mxk:9:27: error: group_min needs numbers, got bool\n");
}

TEST(RowBuiltins, Counts) {
  EXPECT_EQ(errors("v = repeat(w[t, :], n)"),
            "t.mxk:9:25: error: the second argument of repeat must be a positive integer "
            "constant: a literal, a specialized size, a tunable or an expression over them\n");
  EXPECT_EQ(errors("v = repeat(w[t, :], 2.0)"),
            "t.mxk:9:25: error: the second argument of repeat must be a positive integer "
            "constant: a literal, a specialized size, a tunable or an expression over them\n");
  // An expression over constants is a constant; one over a row value is not.
  EXPECT_EQ(errors("v = repeat(w[t, :], 1 + 1)"), "");
  EXPECT_EQ(errors("v = repeat(w[t, :], t + 1)"),
            "t.mxk:9:27: error: the second argument of repeat must be a positive integer "
            "constant: a literal, a specialized size, a tunable or an expression over them\n");
  EXPECT_EQ(errors("v = repeat(w[t, :], 0)"),
            "t.mxk:9:25: error: the second argument of repeat must be at least 1, got 0\n");
  EXPECT_EQ(errors("v = group_sum(w[t, :], -2)"),
            "t.mxk:9:28: error: the second argument of group_sum must be at least 1, got -2\n");
  EXPECT_EQ(errors("v = group_sum(w[t, :], K)", {{"K", 0}}),
            "t.mxk:9:28: error: the second argument of group_sum must be at least 1, got 0\n");
  EXPECT_EQ(errors("v = group_sum(w[t, :], 48)"),
            "t.mxk:9:28: error: group size 48 does not divide the length of f32x64\n");
  EXPECT_EQ(errors("v = group_max(w[t, :], D)"),
            "t.mxk:9:28: error: group size 128 does not divide the length of f32x64\n");
  EXPECT_EQ(errors("v = repeat(repeat(w[t, :], 4611686018427387904), 4)"),
            "t.mxk:9:16: error: repeat gives a vector of more than 2^63 elements\n");
}

TEST(RowBuiltins, RotatePairsMisuse) {
  EXPECT_EQ(errors("v = rotate_pairs(w[t, :], c[t, :], w[t, :])"),
            "t.mxk:9:9: error: rotate_pairs takes v of length 2P and c, s of length P, got "
            "f32x64, f32x32, f32x64\n");
  EXPECT_EQ(errors("v = rotate_pairs(c[t, :], c[t, :], sn[t, :])"),
            "t.mxk:9:9: error: rotate_pairs takes v of length 2P and c, s of length P, got "
            "f32x32, f32x32, f32x32\n");
  EXPECT_EQ(errors("v = rotate_pairs(w[t, :], c[t, :], f)"),
            "t.mxk:9:40: error: rotate_pairs takes a row vector as its third argument, got a "
            "scalar f32\n");
  EXPECT_EQ(errors("v = rotate_pairs(iv[t, :], c[t, :], sn[t, :])"),
            "t.mxk:9:22: error: rotate_pairs takes float vectors, got i32x64 as its first "
            "argument\n");
  EXPECT_EQ(errors("v = rotate_pairs(w[t, :], bf16(c[t, :]), sn[t, :])"),
            "t.mxk:9:31: error: arithmetic on bf16 needs f32(...) first\n");
}

TEST(RowBuiltins, MxVectorMisuse) {
  EXPECT_EQ(errors("v = mx_scale(w[t, :], FMT, MODE)"),
            "t.mxk:9:18: error: mx_scale takes a bf16 vector as its first argument, got f32x64; "
            "convert with bf16(...)\n");
  EXPECT_EQ(errors("v = mx_scale(h[t, :], FMT, MODE)"),
            "t.mxk:9:18: error: mx_scale takes a vector whose length is a multiple of 32, got "
            "bf16x48\n");
  EXPECT_EQ(errors("v = mx_scale(x[t, 0], FMT, MODE)"),
            "t.mxk:9:18: error: mx_scale takes a row vector as its first argument, got a scalar "
            "bf16\n");
  EXPECT_EQ(errors("v = mx_encode(x[t, :], w[t, :], FMT)"),
            "t.mxk:9:28: error: mx_encode takes a u8 vector as its second argument, got f32x64\n");
  EXPECT_EQ(errors("v = mx_encode(x[t, :], repeat(sc[t, :], 2), FMT)"),
            "t.mxk:9:28: error: mx_encode takes one scale per 32 elements: 4 for bf16x128, got "
            "u8x8\n");
  EXPECT_EQ(errors("v = mx_encode(h[t, :], sc[t, :], FMT)"),
            "t.mxk:9:19: error: mx_encode takes a vector whose length is a multiple of 32, got "
            "bf16x48\n");
  EXPECT_EQ(errors("v = pack6(iv[t, :])"),
            "t.mxk:9:15: error: pack6 takes a u8 vector as its first argument, got i32x64\n");
  EXPECT_EQ(errors("v = pack6(b[t, :])"),
            "t.mxk:9:15: error: pack6 takes a vector whose length is a multiple of 4, got u8x6\n");
}

TEST(RowBuiltins, FormatAndModeArguments) {
  // Checked when the file is parsed: they do not depend on the configuration.
  EXPECT_EQ(parseErrors(mxKernel("v = mx_scale(x[t, :], MODE, FMT)")),
            "t.mxk:9:27: error: variant 'MODE' names scale modes, but the second argument of "
            "mx_scale is a format (E2M3, E3M2, or a variant naming formats)\n"
            "t.mxk:9:33: error: variant 'FMT' names formats, but the third argument of mx_scale "
            "is a scale mode (RCEIL, EVEN, FLOOR, or a variant naming scale modes)\n");
  EXPECT_EQ(parseErrors(mxKernel("v = mx_scale(x[t, :], RCEIL, MODE)")),
            "t.mxk:9:27: error: 'RCEIL' is a scale mode, but the second argument of mx_scale is "
            "a format (E2M3, E3M2, or a variant naming formats)\n");
  EXPECT_EQ(parseErrors(mxKernel("v = mx_encode(x[t, :], sc[t, :], EVEN)")),
            "t.mxk:9:38: error: 'EVEN' is a scale mode, but the third argument of mx_encode is a "
            "format (E2M3, E3M2, or a variant naming formats)\n");
  EXPECT_EQ(parseErrors(mxKernel("v = mx_scale(x[t, :], 1, MODE)")),
            "t.mxk:9:27: error: the second argument of mx_scale is a format (E2M3, E3M2, or a "
            "variant naming formats)\n");
  EXPECT_EQ(parseErrors(mxKernel("v = mx_scale(x[t, :], n, MODE)")),
            "t.mxk:9:27: error: the second argument of mx_scale is a format (E2M3, E3M2, or a "
            "variant naming formats), got 'n'\n");
  EXPECT_EQ(parseErrors(mxKernel("v = mx_scale(x[t, :], E4M3, MODE)")),
            "t.mxk:9:27: error: the second argument of mx_scale is a format (E2M3, E3M2, or a "
            "variant naming formats), got 'E4M3'\n");
  EXPECT_EQ(parseErrors(mxKernel("v = mx_scale(x[t, :], E2M3, MODE)")), "");
  // Value names and variants are no values anywhere else, not even in a builtin's other
  // arguments.
  EXPECT_EQ(parseErrors(mxKernel("v = repeat(w[t, :], FMT)")),
            "t.mxk:9:25: error: variant 'FMT' is not a value; pass it where a builtin takes a "
            "format\n");
  EXPECT_EQ(parseErrors(mxKernel("v = mx_scale(E2M3, FMT, MODE)")),
            "t.mxk:9:18: error: 'E2M3' is a format name, not a value; pass it where a builtin "
            "takes a format\n");
}

TEST(RowBuiltins, BytesAreNotComputedOn) {
  EXPECT_EQ(errors("v = pack6(sc[t, :]) + 1"),
            "t.mxk:9:25: error: arithmetic on u8 needs i32(...) first\n");
  EXPECT_EQ(errors("o[t, 0] = f32(sum(i32(mx_scale(x[t, :], FMT, MODE))))"), "");
  EXPECT_EQ(errors("s[t, :] = i32(mx_scale(x[t, :], FMT, MODE))"),
            "t.mxk:9:5: error: storing i32 into u8 tensor 's' is not supported\n");
  EXPECT_EQ(errors("q[t, :] = pack6(sc[t, :])"),
            "t.mxk:9:5: error: length mismatch: storing 3 elements into a slice of 96\n");
}

TEST(RowBuiltins, Dump) {
  kir::Kernel k = lower(
      "a = repeat(w[t, :], 2)\n    g = group_max(w[t, :], 32)\n"
      "    r = rotate_pairs(w[t, :], c[t, :], sn[t, :])\n"
      "    sx = mx_scale(x[t, :], FMT, MODE)\n    e = mx_encode(x[t, :], sx, E3M2)\n"
      "    p = pack6(e)",
      {{"MODE", int64_t(MxScaleMode::Even)}});
  std::string text = dumpKir(k);
  for (const char* line : {
           R"(%\d+ = Repeat f32x128 %\d+ x2  ; a)",
           R"(%\d+ = GroupReduceMax f32x2 %\d+ group 32  ; g)",
           R"(%\d+ = RotatePairs f32x64 %\d+, %\d+, %\d+  ; r)",
           R"(%\d+ = MxScale u8x4 %\d+ e2m3 even  ; sx)",
           R"(%\d+ = MxEncode u8x128 %\d+, %\d+ e3m2  ; e)",
           R"(%\d+ = Pack6 u8x96 %\d+  ; p)",
       })
    EXPECT_TRUE(std::regex_search(text, std::regex(std::string("\n  ") + line + "\n")))
        << line << "\n"
        << text;
  EXPECT_NE(text.find(" FMT=0 K=2 MODE=1"), std::string::npos) << text;
}

}  // namespace
}  // namespace mxfp6::frontend
