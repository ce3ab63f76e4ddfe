// Variables, counted loops, zeros and splat (kernels_dsl/README.md, "Variables and loops"): the
// KIR they lower to (op order, ForBegin/ForEnd pairing, one VarRead per read, scopes) and a
// located error for each misuse.
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/frontend/lexer.h"
#include "compiler/frontend/parser.h"
#include "tests/frontend/kir_checks.h"
#include "tests/frontend/test_util.h"

namespace mxfp6::frontend {
namespace {

using kir::Dtype;
using kir::OpCode;
using kir::ValueType;
using test::instantiateErrors;
using test::kernelWithBody;
using test::parseErrors;

// kernelWithBody(): x: bf16[T, D], y: out bf16[T, D], s: out f32[T], w: f32[T, 64], n: i32,
// eps: f32; D = 128. The body starts on line 6, column 5.

/// Like kernelWithBody, with a tunable K in {2, 0} (default 2) and an f32 output z[T, D].
std::string tunedKernel(const std::string& body) {
  return test::rowKernel(
      "kernel k(x: bf16[T, D], z: out f32[T, D], n: i32)\n"
      "  specialize D = 128\n"
      "  tune K in {2, 0} require K >= 0\n",  // a tunable must be used
      body);
}

kir::Kernel lower(const std::string& source, const std::map<std::string, int64_t>& config = {}) {
  DiagnosticEngine diags;
  auto k = test::instantiateFirst(source, diags, config);
  EXPECT_TRUE(k.has_value()) << diags.render();
  if (!k) return {};
  test::expectWellFormed(*k);
  return std::move(*k);
}

/// The op lines of dumpKir (after the `row` line), the loop bodies indented.
std::string opLines(const kir::Kernel& k) {
  std::string dump = dumpKir(k);
  size_t row = dump.find("\n  row ");
  size_t first = dump.find('\n', row + 1);
  return dump.substr(first + 1);
}

std::vector<OpCode> codes(const kir::Kernel& k) {
  std::vector<OpCode> out;
  for (const kir::Op& op : k.ops) out.push_back(op.code);
  return out;
}

size_t count(const kir::Kernel& k, OpCode code) {
  return std::count_if(k.ops.begin(), k.ops.end(),
                       [&](const kir::Op& op) { return op.code == code; });
}

TEST(Loops, AccumulatorKir) {
  kir::Kernel k =
      lower(kernelWithBody("var acc = zeros(D)\n"
                           "    for i in 0 .. n {\n"
                           "      acc = acc + f32(x[t, :])\n"
                           "    }\n"
                           "    y[t, :] = bf16(acc)"));
  // Bounds before the ForBegin; the leaves and strides first needed in the body are emitted
  // there and again after the ForEnd, so no value of the body is used outside it.
  EXPECT_EQ(opLines(k),
            "  %0 = ConstFloat f32 0.0\n"
            "  %1 = Splat f32x128 %0\n"
            "  %2 = VarInit f32x128 %1  ; acc\n"
            "  %3 = ConstInt i64 0\n"
            "  %4 = ScalarArg i32 @n  ; n\n"
            "  %5 = Cast i64 %4\n"
            "  %6 = ConstInt i64 1\n"
            "  %7 = ForBegin i64 %3, %5, %6  ; i\n"
            "    %8 = VarRead f32x128 %2  ; acc\n"
            "    %9 = RowIndex i64 @t  ; t\n"
            "    %10 = ConstInt i64 1\n"
            "    %11 = ConstInt i64 128\n"
            "    %12 = Load bf16x128 @x[%9, :] strides(%11, %10)\n"
            "    %13 = Cast f32x128 %12\n"
            "    %14 = Add f32x128 %8, %13\n"
            "    VarWrite f32x128 %2, %14  ; acc\n"
            "  ForEnd %7\n"
            "  %17 = RowIndex i64 @t  ; t\n"
            "  %18 = ConstInt i64 1\n"
            "  %19 = ConstInt i64 128\n"
            "  %20 = VarRead f32x128 %2  ; acc\n"
            "  %21 = Cast bf16x128 %20\n"
            "  Store bf16x128 @y[%17, :] strides(%19, %18), %21\n");
  EXPECT_EQ(k.ops[15].ival, 2);  // VarWrite (%15) names its VarInit
  EXPECT_EQ(k.ops[16].ival, 7);  // ForEnd (%16) names its ForBegin
}

TEST(Loops, EveryReadOfAVariableIsAVarRead) {
  kir::Kernel k =
      lower(kernelWithBody("var a = eps\n"
                           "    b = a + a\n"
                           "    a = b\n"
                           "    s[t] = a * b"));
  EXPECT_EQ(codes(k),
            (std::vector<OpCode>{OpCode::ScalarArg, OpCode::VarInit, OpCode::VarRead,
                                 OpCode::VarRead, OpCode::Add, OpCode::VarWrite, OpCode::RowIndex,
                                 OpCode::ConstInt, OpCode::VarRead, OpCode::Mul, OpCode::Store}));
  const kir::Op& add = k.ops[4];
  EXPECT_EQ(add.name, "b");
  EXPECT_NE(add.operands[0], add.operands[1]);  // two reads, two values
  EXPECT_EQ(k.ops[5].ival, 1);                  // VarWrite of the VarInit
  EXPECT_EQ(k.ops[5].operands, (std::vector<int>{4}));
  EXPECT_EQ(k.ops[8].ival, 1);
  EXPECT_EQ(k.ops[9].operands, (std::vector<int>{8, 4}));  // the read after the write, and b
}

TEST(Loops, AssignmentTypes) {
  // A literal takes the variable's type; a scalar broadcasts into a vector variable.
  kir::Kernel k =
      lower(kernelWithBody("var acc = zeros(D)\n"
                           "    acc = 0\n"
                           "    acc = eps\n"
                           "    var c = n\n"
                           "    c = 7"));
  EXPECT_EQ(codes(k),
            (std::vector<OpCode>{
                OpCode::ConstFloat, OpCode::Splat, OpCode::VarInit, OpCode::ConstFloat,
                OpCode::Splat, OpCode::VarWrite, OpCode::ScalarArg, OpCode::Splat, OpCode::VarWrite,
                OpCode::ScalarArg, OpCode::VarInit, OpCode::ConstInt, OpCode::VarWrite}));
  EXPECT_EQ(k.ops[4].type, (ValueType{Dtype::F32, 128}));
  EXPECT_EQ(k.ops[5].operands, (std::vector<int>{4}));
  EXPECT_EQ(k.ops[7].operands, (std::vector<int>{6}));
  EXPECT_EQ(k.ops[10].operands, (std::vector<int>{9}));  // var c = n: the i32 scalar itself
  EXPECT_EQ(k.ops[10].type, (ValueType{Dtype::I32, 0}));
  EXPECT_EQ(k.ops[11].type, (ValueType{Dtype::I32, 0}));
  EXPECT_EQ(k.ops[11].ival, 7);
  EXPECT_EQ(k.ops[12].ival, 10);
}

TEST(Loops, ZerosAndSplat) {
  kir::Kernel k = lower(tunedKernel("a = zeros(K)\n    b = splat(n, D)\n    c = splat(2.5, 4)"));
  const kir::Op& a = k.ops[1];
  EXPECT_EQ(a.code, OpCode::Splat);
  EXPECT_EQ(a.type, (ValueType{Dtype::F32, 2}));
  EXPECT_EQ(k.ops[a.operands[0]].code, OpCode::ConstFloat);
  EXPECT_EQ(k.ops[a.operands[0]].fval, 0.0);
  const kir::Op& b = k.ops[3];
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.type, (ValueType{Dtype::I32, 128}));
  EXPECT_EQ(k.ops[b.operands[0]].code, OpCode::ScalarArg);
  const kir::Op& c = k.ops.back();
  EXPECT_EQ(c.type, (ValueType{Dtype::F32, 4}));
  EXPECT_EQ(k.ops[c.operands[0]].fval, 2.5);

  EXPECT_EQ(instantiateErrors(tunedKernel("a = zeros(n)")),
            "t.mxk:6:15: error: the first argument of zeros must be a positive integer constant: "
            "a literal, a specialized size, a tunable or an expression over them\n");
  EXPECT_EQ(instantiateErrors(tunedKernel("a = zeros(K)"), {{"K", 0}}),
            "t.mxk:6:15: error: the first argument of zeros must be at least 1, got 0\n");
  EXPECT_EQ(instantiateErrors(tunedKernel("a = zeros(D, D)")),
            "t.mxk:6:9: error: zeros takes 1 argument, got 2\n");
  EXPECT_EQ(instantiateErrors(tunedKernel("a = splat(f32(x[t, :]), 4)")),
            "t.mxk:6:15: error: splat takes a scalar as its first argument, got f32x128\n");
  EXPECT_EQ(instantiateErrors(tunedKernel("a = splat(n)")),
            "t.mxk:6:9: error: splat takes 2 arguments, got 1\n");
}

TEST(Loops, LoopBoundsAndStep) {
  kir::Kernel k =
      lower(tunedKernel("for i in t .. n step K {\n"
                        "      z[i, :] = zeros(D)\n"
                        "    }"));
  auto begin = std::find_if(k.ops.begin(), k.ops.end(),
                            [](const kir::Op& op) { return op.code == OpCode::ForBegin; });
  ASSERT_NE(begin, k.ops.end());
  EXPECT_EQ(begin->name, "i");
  EXPECT_EQ(begin->type, (ValueType{Dtype::I64, 0}));
  ASSERT_EQ(begin->operands.size(), 3u);
  EXPECT_EQ(k.ops[begin->operands[0]].code, OpCode::RowIndex);
  EXPECT_EQ(k.ops[begin->operands[1]].code, OpCode::Cast);  // i32 n widened to i64
  EXPECT_EQ(k.ops[begin->operands[2]].code, OpCode::ConstInt);
  EXPECT_EQ(k.ops[begin->operands[2]].ival, 2);
  // The store indexes with the induction value.
  auto store = std::find_if(k.ops.begin(), k.ops.end(),
                            [](const kir::Op& op) { return op.code == OpCode::Store; });
  ASSERT_NE(store, k.ops.end());
  EXPECT_EQ(store->operands[0], begin - k.ops.begin());
  EXPECT_EQ(k.ops.back().code, OpCode::ForEnd);
  EXPECT_EQ(k.ops.back().ival, begin - k.ops.begin());
  EXPECT_EQ(k.ops.back().loc.line, 8);  // the closing '}'
  EXPECT_EQ(k.ops.back().loc.col, 5);
  EXPECT_EQ(begin->loc.line, 6);
  EXPECT_EQ(begin->loc.col, 5);
}

TEST(Loops, NestedLoopsPairAndScope) {
  kir::Kernel k =
      lower(kernelWithBody("var total = 0.0\n"
                           "    for i in 0 .. 4 {\n"
                           "      for j in i .. 4 {\n"
                           "        total = total + eps\n"
                           "      }\n"
                           "      v = eps\n"
                           "    }\n"
                           "    s[t] = total"));
  std::vector<int> stack;
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < static_cast<int>(k.ops.size()); ++i) {
    if (k.ops[i].code == OpCode::ForBegin) stack.push_back(i);
    if (k.ops[i].code == OpCode::ForEnd) {
      ASSERT_FALSE(stack.empty());
      EXPECT_EQ(k.ops[i].ival, stack.back());
      pairs.push_back({stack.back(), i});
      stack.pop_back();
    }
  }
  EXPECT_TRUE(stack.empty());
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_LT(pairs[1].first, pairs[0].first);  // the inner loop closes first
  EXPECT_GT(pairs[1].second, pairs[0].second);
  const kir::Op& inner = k.ops[pairs[0].first];
  EXPECT_EQ(inner.name, "j");
  EXPECT_EQ(inner.operands[0], pairs[1].first);  // j starts at i
  // eps is read in the inner body, then again (a fresh ScalarArg) in the outer body.
  EXPECT_EQ(count(k, OpCode::ScalarArg), 2u);
  EXPECT_EQ(count(k, OpCode::VarRead), 2u);
  EXPECT_EQ(count(k, OpCode::VarWrite), 1u);
  // The inner loop's body is indented twice, its ForEnd once, the outer ForEnd not at all.
  std::string lines = opLines(k);
  EXPECT_NE(lines.find("\n      %"), std::string::npos) << lines;
  EXPECT_NE(lines.find("\n    ForEnd %" + std::to_string(pairs[0].first) + "\n"), std::string::npos)
      << lines;
  EXPECT_NE(lines.find("\n  ForEnd %" + std::to_string(pairs[1].first) + "\n"), std::string::npos)
      << lines;
}

TEST(Loops, NamesBoundInABodyAreLocalToIt) {
  // A name bound in a loop body may be bound again after it: a new value.
  kir::Kernel k =
      lower(kernelWithBody("for i in 0 .. n {\n"
                           "      v = eps\n"
                           "      s[t] = v\n"
                           "    }\n"
                           "    v = eps * 2\n"
                           "    s[t] = v"));
  EXPECT_EQ(count(k, OpCode::ForEnd), 1u);

  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0 .. n {\n"
                                       "      u = eps\n"
                                       "    }\n"
                                       "    s[t] = u")),
            "t.mxk:9:12: error: 'u' is local to the loop at line 6; declare it with 'var' before "
            "the loop to use it after\n");
  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0 .. n {\n"
                                       "      var u = eps\n"
                                       "    }\n"
                                       "    s[t] = f32(i) + u")),
            "t.mxk:9:16: error: 'i' is local to the loop at line 6; declare it with 'var' before "
            "the loop to use it after\n"
            "t.mxk:9:21: error: 'u' is local to the loop at line 6; declare it with 'var' before "
            "the loop to use it after\n");
  // The index is not visible in the bounds.
  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0 .. i { }")),
            "t.mxk:6:19: error: unknown name 'i'\n");
}

TEST(Loops, AssigningANonVariableIsAnError) {
  EXPECT_EQ(parseErrors(kernelWithBody("v = eps\n    v = 1.0")),
            "t.mxk:7:5: error: 'v' is already bound; values are immutable\n");
  EXPECT_EQ(parseErrors(kernelWithBody("n = 1")),
            "t.mxk:6:5: error: cannot bind 'n': it is a scalar parameter\n");
  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0 .. n {\n      i = 1\n    }")),
            "t.mxk:7:7: error: 'i' is a loop index; values are immutable\n");
  // Inside a loop, a value bound outside is just as immutable.
  EXPECT_EQ(parseErrors(kernelWithBody("v = eps\n    for i in 0 .. n {\n      v = 1.0\n    }")),
            "t.mxk:8:7: error: 'v' is already bound; values are immutable\n");
}

TEST(Loops, DeclaringATakenNameIsAnError) {
  EXPECT_EQ(parseErrors(kernelWithBody("var a = eps\n    var a = eps")),
            "t.mxk:7:9: error: 'a' is already declared as a variable\n");
  EXPECT_EQ(parseErrors(kernelWithBody("a = eps\n    var a = eps")),
            "t.mxk:7:9: error: 'a' is already bound; values are immutable\n");
  EXPECT_EQ(parseErrors(kernelWithBody("var eps = 1.0")),
            "t.mxk:6:9: error: cannot declare variable 'eps': it is a scalar parameter\n");
  EXPECT_EQ(parseErrors(kernelWithBody("var D = 1.0")),
            "t.mxk:6:9: error: cannot declare variable 'D': it is a specialized size\n");
  EXPECT_EQ(parseErrors(kernelWithBody("for t in 0 .. n { }")),
            "t.mxk:6:9: error: cannot use 't' as a loop index: it is a row variable\n");
  EXPECT_EQ(parseErrors(kernelWithBody("var a = eps\n    for a in 0 .. n { }")),
            "t.mxk:7:9: error: 'a' is already declared as a variable\n");
  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0 .. n {\n      for i in 0 .. n { }\n    }")),
            "t.mxk:7:11: error: 'i' is already bound as a loop index\n");
  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0 .. n {\n      var i = 1\n    }")),
            "t.mxk:7:11: error: 'i' is already bound as a loop index\n");
}

TEST(Loops, AssignmentTypeMismatch) {
  EXPECT_EQ(instantiateErrors(kernelWithBody("var a = eps\n    a = n")),
            "t.mxk:7:5: error: cannot assign i32 to variable 'a' of type f32\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("var a = zeros(D)\n    a = w[t, :]")),
            "t.mxk:7:5: error: cannot assign f32x64 to variable 'a' of type f32x128\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("var a = zeros(D)\n    a = x[t, :]")),
            "t.mxk:7:5: error: cannot assign bf16x128 to variable 'a' of type f32x128\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("var a = eps\n    a = zeros(D)")),
            "t.mxk:7:5: error: cannot assign f32x128 to variable 'a' of type f32\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("var c = n\n    c = t")),
            "t.mxk:7:5: error: cannot assign i64 to variable 'c' of type i32\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("var c = n\n    c = 1.5")),
            "t.mxk:7:9: error: float literal cannot be used as i32\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("var a = zeros(D)\n    s[t] = a")),
            "t.mxk:7:5: error: storing a row vector into one element of 's'\n");
}

TEST(Loops, BadStep) {
  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0 .. n step 0 { }")),
            "t.mxk:6:26: error: the step of a loop must be positive, got 0\n");
  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0 .. n step -2 { }")),
            "t.mxk:6:26: error: the step of a loop must be positive, got -2\n");
  // A tunable step is known when the kernel is instantiated.
  EXPECT_EQ(instantiateErrors(tunedKernel("for i in 0 .. n step K { }"), {{"K", 0}}),
            "t.mxk:6:26: error: the step of a loop must be positive, got 0\n");
  EXPECT_EQ(instantiateErrors(tunedKernel("for i in 0 .. n step K { }")), "");
}

TEST(Loops, NonIntegerBounds) {
  EXPECT_EQ(instantiateErrors(kernelWithBody("for i in 0.5 .. n { }")),
            "t.mxk:6:14: error: the start of a loop must be an integer scalar, got a float "
            "literal\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("for i in 0 .. eps { }")),
            "t.mxk:6:19: error: the end of a loop must be an integer scalar, got f32\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("for i in 0 .. n step f32(n) { }")),
            "t.mxk:6:26: error: the step of a loop must be an integer scalar, got f32\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("for i in 0 .. i32(w[t, :]) { }")),
            "t.mxk:6:19: error: the end of a loop must be an integer scalar, got i32x64\n");
  EXPECT_EQ(instantiateErrors(kernelWithBody("for i in 0 .. n > 2 { }")),
            "t.mxk:6:21: error: the end of a loop must be an integer scalar, got bool\n");
}

TEST(Loops, DotDotLexing) {
  auto kinds = [](std::string_view text) {
    DiagnosticEngine diags;
    std::vector<TokenKind> out;
    auto tokens = lex("l.mxk", text, diags);
    EXPECT_TRUE(tokens.has_value()) << diags.render();
    if (tokens)
      for (const Token& t : *tokens) out.push_back(t.kind);
    return out;
  };
  using K = TokenKind;
  EXPECT_EQ(kinds("0..P"), (std::vector<K>{K::Int, K::DotDot, K::Ident, K::Eof}));
  EXPECT_EQ(kinds("0 .. P"), (std::vector<K>{K::Int, K::DotDot, K::Ident, K::Eof}));
  EXPECT_EQ(kinds("1.5..2"), (std::vector<K>{K::Float, K::DotDot, K::Int, K::Eof}));
  EXPECT_EQ(kinds("j..n step 2"),
            (std::vector<K>{K::Ident, K::DotDot, K::Ident, K::KwStep, K::Int, K::Eof}));
  EXPECT_EQ(kinds("var for step"), (std::vector<K>{K::KwVar, K::KwFor, K::KwStep, K::Eof}));
  EXPECT_EQ(kinds("1e3..4"), (std::vector<K>{K::Float, K::DotDot, K::Int, K::Eof}));

  // In a kernel: 0..n is a range, `0...n` has a stray '.', and so does `1.`.
  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0..n { }")), "");
  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0...n { }")),
            "t.mxk:6:17: error: unexpected character '.'\n");
  EXPECT_EQ(parseErrors(kernelWithBody("v = 1.")), "t.mxk:6:10: error: unexpected character '.'\n");
  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0 . n { }")),
            "t.mxk:6:16: error: unexpected character '.'\n");
  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0, n { }")),
            "t.mxk:6:15: error: expected '..' between the bounds of the loop, found ','\n");
  EXPECT_EQ(parseErrors(kernelWithBody("v = 0 .. 2")),
            "t.mxk:6:11: error: expected a statement ('name = ...', 'tensor[...] = ...', 'var', 'for' "
            "or 'fn(...)') or '}', found '..'\n");
}

TEST(Loops, SyntaxErrors) {
  EXPECT_EQ(parseErrors(kernelWithBody("for i 0 .. n { }")),
            "t.mxk:6:11: error: expected 'in' after the loop index, found '0'\n");
  EXPECT_EQ(parseErrors(kernelWithBody("for i in 0 .. n s[t] = 1.0 }")),
            "t.mxk:6:21: error: expected '{' to open the loop body, found 's'\n");
  EXPECT_EQ(parseErrors(kernelWithBody("var = 1")),
            "t.mxk:6:9: error: expected an identifier as the variable name, found '='\n");
  EXPECT_EQ(parseErrors(kernelWithBody("var a 1")),
            "t.mxk:6:11: error: expected '=' after the variable name, found '1'\n");
  // step, var and for are keywords now.
  EXPECT_EQ(parseErrors(kernelWithBody("step = 1")),
            "t.mxk:6:5: error: expected a statement ('name = ...', 'tensor[...] = ...', 'var', 'for' "
            "or 'fn(...)') or '}', found 'step'\n");
}

TEST(Loops, LoopsNestAtMost64Deep) {
  std::string body, close;
  for (int i = 0; i < kMaxLoopDepth; ++i) {
    body += "for i" + std::to_string(i) + " in 0 .. n { ";
    close += "} ";
  }
  EXPECT_EQ(parseErrors(kernelWithBody(body + close)), "");
  std::string deeper = body + "for z in 0 .. n { } " + close;
  // The 65th 'for' starts after 64 copies of "for iK in 0 .. n { ".
  int col = 5 + static_cast<int>(body.size());
  EXPECT_EQ(parseErrors(kernelWithBody(deeper)),
            "t.mxk:6:" + std::to_string(col) + ": error: loops nest more than 64 levels deep\n");
}

TEST(Loops, DumpsShowTheNewStatementsAndOps) {
  std::string source = kernelWithBody(
      "var acc = zeros(D)\n"
      "    for i in 0 .. n step 2 {\n"
      "      acc = acc + splat(eps, D)\n"
      "    }");
  DiagnosticEngine diags;
  auto module = parseSource("t.mxk", source, diags);
  ASSERT_TRUE(module) << diags.render();
  std::string ast = dumpAst(*module);
  EXPECT_NE(ast.find("    var acc = zeros(D)  # 6:9\n"
                     "    for i in 0 .. n step 2 {  # 7:5\n"
                     "      acc = (acc + splat(eps, D))  # 8:7\n"
                     "    }\n"),
            std::string::npos)
      << ast;
  kir::Kernel k = lower(source);
  EXPECT_NE(opLines(k).find("    VarWrite f32x128 %2, %"), std::string::npos) << opLines(k);
  EXPECT_NE(opLines(k).find("  ForEnd %"), std::string::npos) << opLines(k);
}


/// The LN-modulate backward kernel of kernels_dsl/ln_modulate.mxk: per (sample, part) row, loop
/// over the part's tokens and accumulate dscale and dshift in variables while storing dx.
TEST(LnModulateBwd, Instantiates) {
  DiagnosticEngine diags;
  auto module = parseFile(test::kLnModulatePath, diags);
  ASSERT_TRUE(module) << diags.render();
  const KernelInfo* info = module->findKernel("ln_modulate_bwd");
  ASSERT_NE(info, nullptr);
  // P is a runtime dimension: of dscale_part and dshift_part, a row extent and the loop's step.
  ASSERT_EQ(info->params.size(), 11u);
  EXPECT_EQ(info->params[6].dims[1].name, "P");
  EXPECT_EQ(info->params[6].dims[1].runtimeDim, 2);
  EXPECT_EQ(info->params[6].dims[2].constant, -1);

  auto k = instantiate(*module, "ln_modulate_bwd", {}, diags);
  ASSERT_TRUE(k) << diags.render();
  test::expectWellFormed(*k);
  EXPECT_EQ(k->runtimeDims, (std::vector<std::string>{"T", "B", "P"}));
  // T bounds each program's tokens (T may end inside the last sample).
  EXPECT_EQ(k->runtimeDimUsedByBody, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(k->rowVars, (std::vector<std::string>{"b", "j"}));
  EXPECT_EQ(k->rowDims, (std::vector<int>{1, 2}));

  std::vector<std::pair<kir::AbiKind, std::string>> abi;
  for (const kir::AbiArg& a : k->abi()) abi.push_back({a.kind, a.name});
  using kir::AbiKind;
  std::vector<std::pair<AbiKind, std::string>> expected = {
      {AbiKind::Pointer, "g"},
      {AbiKind::Pointer, "x"},
      {AbiKind::Pointer, "scale"},
      {AbiKind::Pointer, "mean"},
      {AbiKind::Pointer, "rstd"},
      {AbiKind::Pointer, "dx"},
      {AbiKind::Pointer, "dscale_part"},
      {AbiKind::Pointer, "dshift_part"},
      {AbiKind::I32, "tokens_per_sample"},
      {AbiKind::I32, "sample_stride"},
      {AbiKind::I32, "token_stride"},
      {AbiKind::I64, "T"},
      {AbiKind::I64, "B"},
      {AbiKind::I64, "P"},
  };
  EXPECT_EQ(abi, expected);

  // One loop: bounds j, the sample's tokens below T (min with tokens_per_sample) and P; dx stored and the means reduced in
  // the body, the two accumulators written there and stored after it.
  int begin = -1, end = -1;
  for (int i = 0; i < static_cast<int>(k->ops.size()); ++i) {
    if (k->ops[i].code == OpCode::ForBegin) begin = i;
    if (k->ops[i].code == OpCode::ForEnd) end = i;
  }
  ASSERT_GE(begin, 0);
  ASSERT_GT(end, begin);
  EXPECT_EQ(count(*k, OpCode::ForBegin), 1u);
  const kir::Op& loop = k->ops[begin];
  EXPECT_EQ(loop.name, "s");
  EXPECT_EQ(k->ops[loop.operands[0]].code, OpCode::RowIndex);
  EXPECT_EQ(k->ops[loop.operands[0]].ival, 1);
  EXPECT_EQ(k->ops[loop.operands[1]].code, OpCode::Min);
  EXPECT_EQ(k->ops[loop.operands[2]].code, OpCode::DimArg);
  EXPECT_EQ(k->ops[loop.operands[2]].ival, 2);
  auto inBody = [&](int i) { return i > begin && i < end; };
  std::vector<std::string> stores;
  int writes = 0, reductions = 0;
  for (int i = 0; i < static_cast<int>(k->ops.size()); ++i) {
    const kir::Op& op = k->ops[i];
    if (op.code == OpCode::Store)
      stores.push_back(k->params[op.param].name + (inBody(i) ? " in" : " after"));
    if (op.code == OpCode::VarWrite) writes += inBody(i);
    if (op.code == OpCode::ReduceSum) reductions += inBody(i);
    if (op.code == OpCode::VarInit) EXPECT_LT(i, begin);
  }
  EXPECT_EQ(stores, (std::vector<std::string>{"dx in", "dscale_part after", "dshift_part after"}));
  EXPECT_EQ(writes, 2);
  EXPECT_EQ(reductions, 2);
  EXPECT_EQ(count(*k, OpCode::VarInit), 2u);
  EXPECT_EQ(k->ops[k->ops.size() - 1].code, OpCode::Store);

  // The part tensors are [B, P, D]: b's stride is P * D, computed from the runtime P.
  const kir::Op& store = k->ops.back();
  const kir::Op& bStride = k->ops[store.strides[0]];
  EXPECT_EQ(bStride.code, OpCode::Mul);

  for (const auto& config : enumerateConfigs(*module, "ln_modulate_bwd", {})) {
    auto c = instantiate(*module, "ln_modulate_bwd", config, diags);
    ASSERT_TRUE(c) << diags.render();
    test::expectWellFormed(*c);
  }
  // THREADS x VEC is 5 x 3 candidates; the require drops the four whose THREADS * VEC does not
  // divide D = 3072 (256 * 8, 512 * 4, 512 * 8, 768 * 8); each remaining one with PREFETCH 1, 0
  // or 2 at ASYNC = 0, and with PREFETCH 2 at ASYNC 1 and 2 (the copies need the pipelined loop;
  // 2 * 3072 * 2 bytes per trip, three trips at most, fit in 44 KB); each with OVERLAP 1 and 0.
  EXPECT_EQ(enumerateConfigs(*module, "ln_modulate_bwd", {}).size(), 11u * (3 + 2) * 2);
}

}  // namespace
}  // namespace mxfp6::frontend
