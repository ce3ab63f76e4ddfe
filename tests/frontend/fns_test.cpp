// fns (kernels_dsl/README.md, "Functions"): a kernel calling fns lowers to the KIR of the same
// kernel written out by hand, the names a fn binds never meet its caller's, and every misuse is
// a located error, followed by the calls that led to it when it lies in a fn's body.
#include <gtest/gtest.h>

#include <regex>

#include "tests/frontend/test_util.h"

namespace mxfp6::frontend {
namespace {

using test::instantiateErrors;
using test::parseErrors;

kir::Kernel lower(const std::string& source, const std::map<std::string, int64_t>& config = {}) {
  DiagnosticEngine diags;
  auto k = test::instantiateFirst(source, diags, config);
  EXPECT_TRUE(k.has_value()) << diags.render();
  return k ? std::move(*k) : kir::Kernel{};
}

/// dumpKir without the names of bound values (the "  ; name" after an op), which a fn renames.
std::string opsWithoutNames(const kir::Kernel& k) {
  return std::regex_replace(dumpKir(k), std::regex("  ; [^\n]*"), "");
}

/// Both sources lower to the same KIR but for the names of bound values.
void expectSameKir(const std::string& withFns, const std::string& byHand) {
  EXPECT_EQ(opsWithoutNames(lower(withFns)), opsWithoutNames(lower(byHand)));
}

/// A kernel over x: bf16[T, D], y and z: out bf16[T, D], s: out f32[T] (D = 128) whose body
/// starts on line (lines of `fns`) + 5, column 5, after the fns in `fns`.
std::string kernelAfter(const std::string& fns, const std::string& body) {
  return fns + test::rowKernel(
                   "kernel k(x: bf16[T, D], y: out bf16[T, D], z: out bf16[T, D], s: out f32[T])\n"
                   "  specialize D = 128\n",
                   body);
}

TEST(Fns, ExpandToTheKernelWrittenOutByHand) {
  const std::string fns =
      "fn centred(v) {\n"
      "  m = mean(v)\n"
      "  return v - m\n"
      "}\n"
      "fn put(dst, v, scale) {\n"
      "  dst[t, :] = bf16(v * scale)\n"
      "}\n"
      "fn norm(v) {\n"
      "  c = centred(v)\n"
      "  r = rsqrt(mean(c * c) + 1e-6)\n"
      "  s[t] = r\n"
      "  return c * r\n"
      "}\n";
  std::string withFns = kernelAfter(
      fns,
      "a = f32(x[t, :])\n"
      "    put(y, norm(a), 2.0)\n"
      "    put(z, centred(a * 3.0), 0.5)");
  std::string byHand = kernelAfter(
      "",
      "a = f32(x[t, :])\n"
      "    m1 = mean(a)\n"
      "    c = a - m1\n"
      "    r = rsqrt(mean(c * c) + 1e-6)\n"
      "    s[t] = r\n"
      "    y[t, :] = bf16(c * r * 2.0)\n"
      "    m2 = mean(a * 3.0)\n"
      "    z[t, :] = bf16((a * 3.0 - m2) * 0.5)");
  expectSameKir(withFns, byHand);
}

TEST(Fns, NamesBoundInAFnAreItsOwn) {
  // `t` inside the fn is its own value, not the row variable `t` it would shadow; the kernel's
  // own `m` and the second call's `m` stay apart.
  std::string source = kernelAfter(
      "fn twice(v) {\n"
      "  t = v * 2.0\n"
      "  m = t + 1.0\n"
      "  return m\n"
      "}\n",
      "m = f32(x[t, :])\n"
      "    y[t, :] = bf16(twice(twice(m)) + m)");
  std::string byHand = kernelAfter(
      "",
      "m = f32(x[t, :])\n"
      "    y[t, :] = bf16((m * 2.0 + 1.0) * 2.0 + 1.0 + m)");
  expectSameKir(source, byHand);
  EXPECT_NE(dumpKir(lower(source)).find("; t@"), std::string::npos);
}

TEST(Fns, ArgumentsStandWhereTheirExpressionCould) {
  // A tensor's name, a compile-time size and a format are substituted, not bound as values.
  std::string source =
      "fn blocks(v, n) {\n"
      "  return group_sum(v, n)\n"
      "}\n"
      "fn encode(v, fmt) {\n"
      "  return pack6(mx_encode(v, mx_scale(v, fmt, RCEIL), fmt))\n"
      "}\n"
      "kernel k(x: bf16[T, D], y: out f32[T, 4], q: out u8[T, 96])\n"
      "  specialize D = 128\n"
      "  variant FMT in {E2M3, E3M2}\n"
      "{\n"
      "  row t in T {\n"
      "    y[t, :] = blocks(f32(x[t, :]), 32)\n"
      "    q[t, :] = encode(x[t, :], FMT)\n"
      "  }\n"
      "}\n";
  lower(source, {{"FMT", 1}});
}

TEST(Fns, AnArgumentThatComputesIsEvaluatedOnce) {
  // A name, a number or operators over them are substituted; a load, a conversion or a
  // reduction is bound once, so using the parameter twice does not repeat it.
  std::string withFns = kernelAfter(
      "fn spread(v) {\n"
      "  return v - mean(v)\n"
      "}\n",
      "y[t, :] = bf16(spread(f32(x[t, :])))\n"
      "    z[t, :] = bf16(spread(spread(f32(x[t, :]))))");
  std::string byHand = kernelAfter(
      "",
      "v1 = f32(x[t, :])\n"
      "    y[t, :] = bf16(v1 - mean(v1))\n"
      "    v2 = f32(x[t, :])\n"
      "    v3 = v2 - mean(v2)\n"
      "    z[t, :] = bf16(v3 - mean(v3))");
  expectSameKir(withFns, byHand);
}

TEST(Fns, LoopsAndVariablesInsideAFn) {
  std::string withFns = kernelAfter(
      "fn total(v) {\n"
      "  var acc = zeros(128)\n"
      "  for i in 0 .. 4 {\n"
      "    w = v * 2.0\n"
      "    acc = acc + w\n"
      "  }\n"
      "  return acc\n"
      "}\n",
      "y[t, :] = bf16(total(f32(x[t, :])))");
  // The argument, a load, is evaluated once, before the fn's statements (not in the loop).
  std::string byHand = kernelAfter(
      "",
      "v = f32(x[t, :])\n"
      "    var acc = zeros(128)\n"
      "    for i in 0 .. 4 {\n"
      "      w = v * 2.0\n"
      "      acc = acc + w\n"
      "    }\n"
      "    y[t, :] = bf16(acc)");
  expectSameKir(withFns, byHand);
}

TEST(Fns, DeclarationErrors) {
  const std::string body = "y[t, :] = x[t, :]";
  EXPECT_EQ(parseErrors(kernelAfter("fn f(v) {\n return v\n}\nfn f(w) {\n return w\n}\n", body)),
            "t.mxk:4:4: error: fn 'f' is already defined\n");
  EXPECT_EQ(parseErrors(kernelAfter("fn sum(v) {\n return v\n}\n", body)),
            "t.mxk:1:4: error: fn 'sum' would hide the builtin of that name\n");
  EXPECT_EQ(parseErrors(kernelAfter("fn f(v, v) {\n return v\n}\n", body)),
            "t.mxk:1:9: error: fn 'f' has two parameters named 'v'\n");
  EXPECT_EQ(parseErrors(kernelAfter("fn f(v) {\n return v\n y = v\n}\n", body)),
            "t.mxk:3:2: error: expected '}' after the returned value ('return' ends a fn's body), "
            "found 'y'\n");
  EXPECT_EQ(parseErrors(kernelAfter("", "return 1")),
            "t.mxk:5:5: error: 'return' can only end a fn's body\n");
}

TEST(Fns, AFnNoKernelCallsIsAnError) {
  // A fn is checked only where it is called, so one that no kernel reaches would pass with any
  // body ('q' is no name here). A fn called only by such a fn is reached by none either.
  const std::string body = "y[t, :] = x[t, :]";
  EXPECT_EQ(parseErrors(kernelAfter("fn unused(v) {\n  return v + q\n}\n", body)),
            "t.mxk:1:4: error: fn 'unused' is called by no kernel, so its body is never checked: "
            "call it or delete it\n");
  const std::string chain =
      "fn inner(v) {\n  return v * 2.0\n}\n"
      "fn outer(v) {\n  return inner(v)\n}\n";
  EXPECT_EQ(parseErrors(kernelAfter(chain, body)),
            "t.mxk:1:4: error: fn 'inner' is called by no kernel, so its body is never checked: "
            "call it or delete it\n"
            "t.mxk:4:4: error: fn 'outer' is called by no kernel, so its body is never checked: "
            "call it or delete it\n");
  // Reached through another fn, both are called.
  EXPECT_EQ(parseErrors(kernelAfter(chain, "y[t, :] = bf16(outer(f32(x[t, :])))")), "");
  // Where a kernel's expansion failed, it may be the caller: only its error is reported.
  EXPECT_EQ(parseErrors(kernelAfter(chain, "a = outer(1.0, 2.0)")),
            "t.mxk:11:9: error: fn 'outer' takes 1 argument, got 2\n");
}

TEST(Fns, CallErrors) {
  const std::string fns =
      "fn value(v) {\n"
      "  return v * 2.0\n"
      "}\n"
      "fn store(dst, v) {\n"
      "  dst[t, :] = v\n"
      "}\n";
  // The body starts on line 11.
  EXPECT_EQ(parseErrors(kernelAfter(fns, "a = value(1.0, 2.0)")),
            "t.mxk:11:9: error: fn 'value' takes 1 argument, got 2\n");
  EXPECT_EQ(parseErrors(kernelAfter(fns, "value(1.0)")),
            "t.mxk:11:5: error: fn 'value' returns a value, which this call drops; bind it: "
            "name = value(...)\n");
  EXPECT_EQ(parseErrors(kernelAfter(fns, "a = store(y, x[t, :])")),
            "t.mxk:11:9: error: fn 'store' returns no value; call it as a statement\n");
  EXPECT_EQ(parseErrors(kernelAfter(fns, "nothing(y)")),
            "t.mxk:11:5: error: unknown function 'nothing'\n");
  EXPECT_EQ(parseErrors(kernelAfter(fns, "sum(x[t, :])")),
            "t.mxk:11:5: error: the value of builtin 'sum' is unused; bind it: name = sum(...)\n");
  // A value the fn binds is not a tensor, even when the kernel has a tensor of that name.
  EXPECT_EQ(parseErrors(kernelAfter("fn shadow(v) {\n  y = v\n  y[t, :] = v\n}\n", "shadow(x[t, :])")),
            "t.mxk:3:3: error: 'y' is a value fn 'shadow' binds, not a tensor\n");
  EXPECT_EQ(parseErrors(kernelAfter(fns, "store(y[t, :], x[t, :])")),
            "t.mxk:11:11: error: fn 'store' indexes its parameter 'dst' (line 5), so its argument "
            "must be a tensor's name\n");
}

TEST(Fns, AnExpansionErrorLeavesTheOtherKernelsChecked) {
  // Kernel a's call cannot be expanded; kernel b's unknown name is reported too.
  EXPECT_EQ(parseErrors("kernel a(y: out f32[T]) {\n  row t in T {\n    nothing(y)\n  }\n}\n"
                        "kernel b(y: out f32[T]) {\n  row t in T {\n    y[t] = q\n  }\n}\n"),
            "t.mxk:3:5: error: unknown function 'nothing'\n"
            "t.mxk:8:12: error: unknown name 'q'\n");
}

TEST(Fns, AFnCannotCallItself) {
  EXPECT_EQ(parseErrors(kernelAfter("fn f(v) {\n  return f(v)\n}\n", "a = f(1.0)")),
            "t.mxk:2:10: error: fn 'f' calls itself (f -> f)\n");
  EXPECT_EQ(parseErrors(kernelAfter("fn f(v) {\n  return g(v)\n}\n"
                                    "fn g(v) {\n  return f(v)\n}\n",
                                    "a = f(1.0)")),
            "t.mxk:5:10: error: fn 'f' calls itself (f -> g -> f)\n");
}

TEST(Fns, AFnCannotAssignItsParametersOrItsCallersVariables) {
  EXPECT_EQ(parseErrors(kernelAfter("fn f(v) {\n  v = 1.0\n  return v\n}\n", "a = f(2.0)")),
            "t.mxk:2:3: error: 'v' is a parameter of fn 'f'; values are immutable\n");
  EXPECT_EQ(parseErrors(kernelAfter("fn f(v) {\n  var v = 1.0\n  return v\n}\n", "a = f(2.0)")),
            "t.mxk:2:7: error: 'v' is a parameter of fn 'f' and cannot be declared again\n");
  // In the caller `acc = ...` would assign its variable; in a fn it would bind a new value, so
  // it is refused rather than silently meaning something else.
  EXPECT_EQ(parseErrors(kernelAfter("fn bump(v) {\n  acc = acc + v\n}\n",
                                    "var acc = 0.0\n    bump(1.0)\n    s[t] = acc")),
            "t.mxk:2:3: error: fn 'bump' binds 'acc', a variable where it is called; a fn cannot "
            "assign its caller's variables: return the new value instead\n");
  // The same when the caller is a fn with a variable of that name.
  EXPECT_EQ(parseErrors(kernelAfter("fn bump(v) {\n  acc = acc + v\n}\n"
                                    "fn total(v) {\n  var acc = 0.0\n  for i in 0 .. 4 {\n"
                                    "    bump(v)\n  }\n  return acc\n}\n",
                                    "acc = 1.0\n    s[t] = total(2.0)")),
            "t.mxk:2:3: error: fn 'bump' binds 'acc', a variable where it is called; a fn cannot "
            "assign its caller's variables: return the new value instead\n");
}

TEST(Fns, ATernaryOfSizesStaysASize) {
  std::string withFns =
      "fn first(n) {\n"
      "  return sum(f32(x[t, 0 : n]))\n"
      "}\n" +
      kernelAfter("", "s[t] = first(D > 64 ? 64 : D)");
  std::string byHand = kernelAfter("", "s[t] = sum(f32(x[t, 0 : (D > 64 ? 64 : D)]))");
  expectSameKir(withFns, byHand);
  // An argument that calls is passed as a value, which cannot be a size: the message says so
  // (written out by hand, a size that calls is an error too).
  EXPECT_EQ(parseErrors("fn first(n) {\n  return sum(f32(x[t, 0 : n]))\n}\n" +
                        kernelAfter("", "s[t] = first(max(D, 64))")),
            "t.mxk:2:27: error: 'n@1' is a value of a fn's expansion (an argument that calls or "
            "reads is passed as a value), not a size; dimension expressions use only specialized "
            "sizes and tunables\n");
}

TEST(Fns, StoresCannotHideInAnArmOfATernary) {
  std::string fns =
      "fn logged(v) {\n"
      "  s[t] = v\n"
      "  return v\n"
      "}\n";
  EXPECT_EQ(parseErrors(kernelAfter(fns, "a = t > 0 ? logged(1.0) : 2.0")),
            "t.mxk:9:17: error: fn 'logged' stores, so it cannot be called in an arm of '?': its "
            "stores would happen whatever the condition\n");
  EXPECT_EQ(parseErrors(kernelAfter(fns, "a = logged(1.0) > 0.0 ? 1.0 : 2.0")), "");
}

TEST(Fns, ExpansionIsBounded) {
  // Each fn calls the one before twice: 2^20 statements.
  std::string fns = "fn level0(v) {\n  a = v + 1.0\n  return a\n}\n";
  for (int i = 1; i <= 20; ++i)
    fns += "fn level" + std::to_string(i) + "(v) {\n  return level" + std::to_string(i - 1) +
           "(v) + level" + std::to_string(i - 1) + "(v)\n}\n";
  std::string errors = parseErrors(kernelAfter(fns, "s[t] = level20(1.0)"));
  EXPECT_NE(errors.find("error: the fn calls of kernel 'k' expand to more than 200000 statements and "
                        "expressions"),
            std::string::npos)
      << errors;
  // A returned expression substituted into a deep caller nests too deep.
  std::string deep = "v";
  for (int i = 0; i < 200; ++i) deep = "(" + deep + " + 1.0)";
  errors = parseErrors(kernelAfter("fn f(v) {\n  return " + deep + "\n}\n", "s[t] = f(f(2.0))"));
  EXPECT_NE(errors.find("levels deep once"), std::string::npos) << errors;
  // One call whose argument is used 512 times, of a call that returns 512 uses: the copies of
  // the argument count toward the bound too.
  std::string uses = "a";  // a balanced sum of 512 a's
  for (int i = 0; i < 9; ++i) uses = "(" + uses + " + " + uses + ")";
  errors = parseErrors(kernelAfter("fn big(a) {\n  return " + uses + "\n}\n",
                                   "b = 1.0\n    s[t] = big(big(b))"));
  EXPECT_NE(errors.find("expand to more than 200000"), std::string::npos) << errors;
}

TEST(Fns, CallsAndLoopsNestBoundedly) {
  // A chain of 70 fns, each calling the next: deeper than 64 calls.
  std::string chain;
  for (int i = 0; i < 70; ++i)
    chain += "fn g" + std::to_string(i) + "(a) {\n  return " +
             (i == 69 ? std::string("a") : "g" + std::to_string(i + 1) + "(a)") + "\n}\n";
  std::string errors = parseErrors(kernelAfter(chain, "s[t] = g0(1.0)"));
  EXPECT_NE(errors.find("error: fn calls nest more than 64 deep"), std::string::npos) << errors;
  // n fns, each two nested loops around a call of the next: 2n loops. 32 fns: 64 loops, the
  // most a kernel may nest; 33: more.
  auto loops = [](int n) {
    std::string fns;
    for (int i = 0; i < n; ++i)
      fns += "fn l" + std::to_string(i) + "() {\n  for i in 0 .. 1 {\n    for j in 0 .. 1 {\n      " +
             (i == n - 1 ? std::string("s[t] = 1.0") : "l" + std::to_string(i + 1) + "()") +
             "\n    }\n  }\n}\n";
    return parseErrors(kernelAfter(fns, "l0()"));
  };
  EXPECT_EQ(loops(32), "");
  EXPECT_NE(loops(33).find("loops nest more than 64 levels deep once fn calls are expanded"),
            std::string::npos)
      << loops(33);
}

TEST(Fns, AnErrorInAFnNamesTheCallsThatLedThere) {
  std::string source = kernelAfter(
      "fn inner(v) {\n"
      "  return v * 2.0\n"
      "}\n"
      "fn outer(v) {\n"
      "  return inner(v)\n"
      "}\n",
      "y[t, :] = bf16(outer(x[t, :]))");
  DiagnosticEngine diags;
  auto module = parseSource("t.mxk", source, diags);
  ASSERT_TRUE(module.has_value()) << diags.render();
  EXPECT_FALSE(instantiate(*module, "k", {}, diags).has_value());
  EXPECT_EQ(diags.render(),
            "t.mxk:2:12: error: arithmetic on bf16 needs f32(...) first\n"
            "  return v * 2.0\n"
            "           ^\n"
            "t.mxk:5:10: note: in the call of fn 'inner'\n"
            "  return inner(v)\n"
            "         ^\n"
            "t.mxk:11:20: note: in the call of fn 'outer'\n"
            "    y[t, :] = bf16(outer(x[t, :]))\n"
            "                   ^\n");
}

}  // namespace
}  // namespace mxfp6::frontend
