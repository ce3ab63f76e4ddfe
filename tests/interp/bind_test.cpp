// bindArguments: every mismatch between the host arguments and the kernel's signature is an error
// that names the argument; good arguments yield the runtime sizes GPU launches pass.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/interp/interpreter.h"
#include "tests/interp/ln_modulate_kernel.h"

namespace mxfp6::interp {
namespace {

using testing::buildLnModulate;
using ::testing::HasSubstr;

constexpr int64_t kD = 3072;

class BindTest : public ::testing::Test {
 protected:
  BindTest() : kernel_(buildLnModulate(kD)) {
    args_.resize(testing::kLnParamCount);
    args_[testing::kX] = tensor(kir::Dtype::BF16, {7, kD});
    args_[testing::kScale] = tensor(kir::Dtype::BF16, {3, kD});
    args_[testing::kShift] = tensor(kir::Dtype::BF16, {3, kD});
    args_[testing::kY] = tensor(kir::Dtype::BF16, {7, kD});
    args_[testing::kMean] = tensor(kir::Dtype::F32, {7});
    args_[testing::kRstd] = tensor(kir::Dtype::F32, {7});
    args_[testing::kSampleDiv] = int64_t{3};
    args_[testing::kEps] = std::monostate{};
  }

  /// Binding never touches data: any non-null pointer with a matching extent will do.
  TensorArg tensor(kir::Dtype t, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    return TensorArg{&dummy_, t, std::move(shape), n};
  }

  std::string bindError() {
    auto r = bindArguments(kernel_, args_);
    if (r.isOk()) return "<bound without error>";
    return r.status().message();
  }

  kir::Kernel kernel_;
  std::vector<Arg> args_;
  char dummy_ = 0;
};

TEST_F(BindTest, GoodArgumentsGiveRuntimeDimsAndDefaults) {
  auto r = bindArguments(kernel_, args_);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  ASSERT_EQ(kernel_.runtimeDims, (std::vector<std::string>{"T", "B"}));
  EXPECT_EQ(r->runtimeDims, (std::vector<int64_t>{7, 3}));
  EXPECT_EQ(r->intScalars[testing::kSampleDiv], 3);
  // The f32 default 1e-6 is bound as the float the kernel receives.
  EXPECT_EQ(r->floatScalars[testing::kEps], static_cast<double>(1e-6f));
  EXPECT_EQ(r->tensors[testing::kScale].shape, (std::vector<int64_t>{3, kD}));
}

TEST_F(BindTest, FloatScalarIsRoundedToF32AndAcceptsIntegers) {
  args_[testing::kEps] = 0.1;
  auto r = bindArguments(kernel_, args_);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->floatScalars[testing::kEps], static_cast<double>(0.1f));
  args_[testing::kEps] = int64_t{2};
  r = bindArguments(kernel_, args_);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->floatScalars[testing::kEps], 2.0);
}

TEST_F(BindTest, WrongCount) {
  args_.pop_back();
  EXPECT_THAT(bindError(), HasSubstr("kernel 'ln_modulate_fwd' takes 8 arguments (x, scale, "
                                     "shift, y, mean, rstd, sample_div, eps), got 7"));
}

TEST_F(BindTest, TensorGivenForScalar) {
  args_[testing::kSampleDiv] = tensor(kir::Dtype::I32, {1});
  EXPECT_THAT(bindError(), HasSubstr("argument 'sample_div' is an i32 scalar, got a tensor "
                                     "(i32, shape [1])"));
}

TEST_F(BindTest, ScalarGivenForTensor) {
  args_[testing::kShift] = 1.0;
  EXPECT_THAT(bindError(),
              HasSubstr("argument 'shift' is a tensor bf16[B, D], got a float scalar (1)"));
}

TEST_F(BindTest, FloatGivenForIntegerScalar) {
  args_[testing::kSampleDiv] = 3.0;
  EXPECT_THAT(bindError(), HasSubstr("argument 'sample_div' is an i32 scalar, got a float"));
}

TEST_F(BindTest, IntegerScalarOutOfI32Range) {
  args_[testing::kSampleDiv] = int64_t{1} << 31;
  EXPECT_THAT(bindError(),
              HasSubstr("argument 'sample_div' is i32, got 2147483648 (out of range)"));
}

TEST_F(BindTest, OmittedScalarWithoutDefault) {
  args_[testing::kSampleDiv] = std::monostate{};
  EXPECT_THAT(bindError(), HasSubstr("argument 'sample_div' (i32 scalar) was omitted and "
                                     "has no default"));
}

TEST_F(BindTest, WrongDtype) {
  args_[testing::kMean] = tensor(kir::Dtype::BF16, {7});
  EXPECT_THAT(bindError(),
              HasSubstr("argument 'mean' has dtype bf16, expected f32 (out f32[T])"));
}

TEST_F(BindTest, WrongRank) {
  args_[testing::kScale] = tensor(kir::Dtype::BF16, {3, 1, kD});
  EXPECT_THAT(bindError(), HasSubstr("argument 'scale' has rank 3 (shape [3, 1, 3072]), "
                                     "expected 2 (bf16[B, D])"));
}

TEST_F(BindTest, ConstantDimMismatch) {
  args_[testing::kScale] = tensor(kir::Dtype::BF16, {3, 4096});
  EXPECT_THAT(bindError(), HasSubstr("argument 'scale' dim 1 (D) is 4096, expected 3072"));
}

TEST_F(BindTest, RuntimeDimConflictNamesBothArguments) {
  args_[testing::kShift] = tensor(kir::Dtype::BF16, {4, kD});
  EXPECT_THAT(bindError(),
              HasSubstr("argument 'shift' dim 0 (B) is 4, but argument 'scale' dim 0 gives B = 3"));
  args_[testing::kShift] = tensor(kir::Dtype::BF16, {3, kD});
  args_[testing::kRstd] = tensor(kir::Dtype::F32, {8});
  EXPECT_THAT(bindError(),
              HasSubstr("argument 'rstd' dim 0 (T) is 8, but argument 'x' dim 0 gives T = 7"));
}

TEST_F(BindTest, NullDataWithExtent) {
  TensorArg t = tensor(kir::Dtype::BF16, {7, kD});
  t.data = nullptr;
  args_[testing::kY] = t;
  EXPECT_THAT(bindError(), HasSubstr("argument 'y' has a null data pointer"));
}

TEST_F(BindTest, RunReportsBindErrors) {
  args_[testing::kScale] = tensor(kir::Dtype::BF16, {3, 4096});
  const Status st = run(kernel_, args_);
  ASSERT_FALSE(st.isOk());
  EXPECT_THAT(st.message(), HasSubstr("argument 'scale' dim 1 (D) is 4096, expected 3072"));
}

}  // namespace
}  // namespace mxfp6::interp
