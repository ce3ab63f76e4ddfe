// Running a resolved op from tensors through the client's C ABI (mxc_op_*), as ctypes does: plans
// precompiled by a server process, resolved from its database file (embedded mode), checked
// against named tensors, and loaded through the runtime on the fake CUDA driver (which takes no
// real code object, so the load's refusal is the driver's, named).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <map>
#include <string>
#include <vector>

#include "client/mxfp6_client.h"
#include "tests/server/server_process.h"

namespace mxfp6::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kQkvFwd = "norm_rope_qkv_fwd/H=2,layout=megatron/sm_90//64";
const std::string kQkvBwd = "norm_rope_qkv_bwd/H=2,layout=megatron/sm_90//64";
const std::string kLnFwd = "ln_modulate_fwd/S=32,layout=bsd/sm_90/D=3072/64";

/// A tensor at a made-up device address (never dereferenced: the checks read only shapes,
/// strides and addresses).
mxc_named_tensor tensorAt(const char* name, uintptr_t address, mxrt_dtype dtype, std::vector<int64_t> sizes,
                          std::vector<int64_t> strides = {}) {
  mxc_named_tensor t{};
  t.name = name;
  t.tensor.data = reinterpret_cast<void*>(address);
  t.tensor.dtype = dtype;
  t.tensor.ndim = static_cast<int32_t>(sizes.size());
  if (strides.empty()) {
    strides.assign(sizes.size(), 1);
    for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    t.tensor.sizes[d] = sizes[d];
    t.tensor.strides[d] = strides[d];
  }
  return t;
}

/// An op call's tensors by name, each at its own 16 MiB of address space.
class Call {
 public:
  void add(const char* name, mxrt_dtype dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides = {}) {
    tensors_.push_back(tensorAt(name, kBase + tensors_.size() * kSpan, dtype, std::move(sizes), std::move(strides)));
  }
  mxc_named_tensor& operator[](const std::string& name) {
    for (auto& t : tensors_)
      if (name == t.name) return t;
    throw std::out_of_range(name);
  }
  void remove(const std::string& name) {
    std::erase_if(tensors_, [&](const mxc_named_tensor& t) { return name == t.name; });
  }
  std::vector<mxc_named_tensor> tensors_;
  std::vector<mxc_named_scalar> scalars;

 private:
  static constexpr uintptr_t kBase = uintptr_t{1} << 32, kSpan = uintptr_t{1} << 24;
};

/// norm_rope_qkv_fwd at T tokens, H heads, Megatron mixed_qkv [T, H, 3, 128] seen as [T, 3, H, 128].
Call qkvForward(int64_t T, int64_t H) {
  Call c;
  c.add("qkv", MXRT_DTYPE_BF16, {T, 3, H, 128}, {3 * H * 128, 128, 3 * 128, 1});
  c.add("q_weight", MXRT_DTYPE_BF16, {128});
  c.add("k_weight", MXRT_DTYPE_BF16, {128});
  for (const char* n : {"q_cos", "q_sin", "k_cos", "k_sin"}) c.add(n, MXRT_DTYPE_F32, {512, 64});
  for (const char* n : {"q", "k", "v"}) c.add(n, MXRT_DTYPE_BF16, {T, H, 128});
  for (const char* n : {"q_rstd", "k_rstd"}) c.add(n, MXRT_DTYPE_F32, {T, H});
  c.scalars = {{"pos_div", 1}, {"eps", 1e-6}};
  return c;
}

Call qkvBackward(int64_t T, int64_t H) {
  Call c;
  for (const char* n : {"dq", "dk", "dv"}) c.add(n, MXRT_DTYPE_BF16, {T, H, 128});
  c.add("qkv", MXRT_DTYPE_BF16, {T, 3, H, 128}, {3 * H * 128, 128, 3 * 128, 1});
  c.add("q_weight", MXRT_DTYPE_BF16, {128});
  c.add("k_weight", MXRT_DTYPE_BF16, {128});
  for (const char* n : {"q_cos", "q_sin", "k_cos", "k_sin"}) c.add(n, MXRT_DTYPE_F32, {512, 64});
  for (const char* n : {"q_rstd", "k_rstd"}) c.add(n, MXRT_DTYPE_F32, {T, H});
  c.add("dqkv", MXRT_DTYPE_BF16, {T, 3, H, 128}, {3 * H * 128, 128, 3 * 128, 1});
  c.add("dw", MXRT_DTYPE_F32, {2, 128});
  c.scalars = {{"pos_div", 1}};
  return c;
}

Call lnForward(int64_t T, int64_t S) {
  Call c;
  c.add("x", MXRT_DTYPE_BF16, {T, 3072});
  c.add("scale", MXRT_DTYPE_BF16, {T / S, 3072});
  c.add("shift", MXRT_DTYPE_BF16, {T / S, 3072});
  c.add("y", MXRT_DTYPE_BF16, {T, 3072});
  c.add("mean", MXRT_DTYPE_F32, {T});
  c.add("rstd", MXRT_DTYPE_F32, {T});
  c.scalars = {{"tokens_per_sample", double(S)}, {"eps", 1e-6}};
  return c;
}

class OpLaunch : public ::testing::Test {
 protected:
  // One server precompiles the three families into a database file once for every test.
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("mxfp6-op-launch-test-" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    std::string db = (*dir_ / "kernels.db").string();
    ServerProcess server(db, {}, (*dir_ / "server.log").string());
    ASSERT_FALSE(server.address().empty());
    char error[512] = {};
    mxc_client* c = mxc_connect(("grpc://" + server.address()).c_str(), nullptr, 300000, error, sizeof error);
    ASSERT_NE(c, nullptr) << error;
    const char* keys[] = {kQkvFwd.c_str(), kQkvBwd.c_str(), kLnFwd.c_str()};
    mxc_resolution* r = mxc_resolve(c, keys, 3, error, sizeof error);
    ASSERT_NE(r, nullptr) << error;
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(mxc_op_error(r, i), nullptr) << mxc_op_error(r, i);
    mxc_resolution_free(r);
    mxc_close(c);
    ASSERT_EQ(server.stop(SIGTERM), 0);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  void SetUp() override {
    client_ = mxc_connect(("sqlite://" + (*dir_ / "kernels.db").string()).c_str(), nullptr, 0, error_, sizeof error_);
    ASSERT_NE(client_, nullptr) << error_;
    const char* keys[] = {kQkvFwd.c_str(), kQkvBwd.c_str(), kLnFwd.c_str()};
    resolution_ = mxc_resolve(client_, keys, 3, error_, sizeof error_);
    ASSERT_NE(resolution_, nullptr) << error_;
    ASSERT_EQ(mxc_source(resolution_), 2);
  }
  void TearDown() override {
    mxc_resolution_free(resolution_);
    mxc_close(client_);
  }

  mxc_op* create(size_t i) {
    mxc_op* op = mxc_op_create(resolution_, i, error_, sizeof error_);
    EXPECT_NE(op, nullptr) << error_;
    return op;
  }
  int check(const mxc_op* op, const Call& c) {
    error_[0] = '\0';
    return mxc_op_check(op, c.tensors_.data(), c.tensors_.size(), c.scalars.data(), c.scalars.size(), error_,
                        sizeof error_);
  }

  static fs::path* dir_;
  mxc_client* client_ = nullptr;
  mxc_resolution* resolution_ = nullptr;
  char error_[1024] = {};
};
fs::path* OpLaunch::dir_ = nullptr;

TEST_F(OpLaunch, ACorrectCallPassesEveryCheck) {
  mxc_op* fwd = create(0);
  mxc_op* ln = create(2);
  ASSERT_TRUE(fwd && ln);
  EXPECT_THAT(mxc_op_plan(fwd), HasSubstr("norm_rope_qkv_fwd["));
  EXPECT_EQ(check(fwd, qkvForward(64, 2)), MXRT_SUCCESS) << error_;
  // A plan serves every M of its key family.
  EXPECT_EQ(check(fwd, qkvForward(4096, 2)), MXRT_SUCCESS) << error_;
  EXPECT_EQ(check(ln, lnForward(64, 32)), MXRT_SUCCESS) << error_;
  // The resolution can go: the op holds what it needs.
  mxc_resolution_free(resolution_);
  resolution_ = nullptr;
  EXPECT_EQ(check(ln, lnForward(128, 32)), MXRT_SUCCESS) << error_;
  mxc_op_free(fwd);
  mxc_op_free(ln);
}

TEST_F(OpLaunch, BadArgumentsAreNamed) {
  mxc_op* fwd = create(0);
  mxc_op* ln = create(2);
  ASSERT_TRUE(fwd && ln);
  struct Case {
    const char* what;
    std::function<void(Call&)> spoil;
    const char* message;
  };
  std::vector<Case> cases = {
      {"missing", [](Call& c) { c.remove("k_sin"); }, "missing tensor argument 'k_sin'"},
      {"unknown", [](Call& c) { c.add("qvk", MXRT_DTYPE_BF16, {1}); }, "takes no tensor 'qvk'"},
      {"dtype", [](Call& c) { c["q_weight"].tensor.dtype = MXRT_DTYPE_F32; }, "'q_weight'"},
      {"rank", [](Call& c) { c["q"].tensor.ndim = 2; }, "argument 'q' must have 3 dims"},
      {"shape", [](Call& c) { c["k"].tensor.sizes[0] = 63; }, "'k'"},
      {"strides", [](Call& c) { c["v"].tensor.strides[1] = 256; }, "'v'"},
      {"alignment", [](Call& c) { c["q_rstd"].tensor.data = static_cast<char*>(c["q_rstd"].tensor.data) + 2; },
       "'q_rstd'"},
      {"scalar", [](Call& c) { c.scalars.push_back({"epsilon", 1}); }, "takes no scalar 'epsilon'"},
  };
  for (const Case& k : cases) {
    Call c = qkvForward(64, 2);
    k.spoil(c);
    EXPECT_EQ(check(fwd, c), MXRT_ERROR_INVALID_ARGUMENT) << k.what;
    EXPECT_THAT(error_, HasSubstr(k.message)) << k.what;
    EXPECT_THAT(error_, HasSubstr(kQkvFwd)) << k.what;
  }
  // Another key family than the one resolved: resolve that key instead.
  EXPECT_EQ(check(fwd, qkvForward(64, 4)), MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(error_, HasSubstr("resolved for " + kQkvFwd));
  Call wrongSamples = lnForward(64, 16);
  EXPECT_EQ(check(ln, wrongSamples), MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(error_, HasSubstr("S=16"));
  Call noScale = lnForward(64, 32);
  noScale.remove("scale");
  EXPECT_EQ(check(ln, noScale), MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(error_, HasSubstr("'scale'"));
  mxc_op_free(fwd);
  mxc_op_free(ln);
}

TEST_F(OpLaunch, ScratchComesFromTheCallersAllocator) {
  mxc_op* bwd = create(1);
  ASSERT_NE(bwd, nullptr);
  Call c = qkvBackward(64, 2);
  EXPECT_EQ(check(bwd, c), MXRT_SUCCESS) << error_;
  struct Allocations {
    std::vector<size_t> sizes;
    bool refuse = false;
  } allocations;
  auto allocate = [](void* user, size_t bytes, void** ptr) -> int {
    auto* a = static_cast<Allocations*>(user);
    if (a->refuse) return 1;
    a->sizes.push_back(bytes);
    *ptr = reinterpret_cast<void*>((uintptr_t{1} << 40) + a->sizes.size() * (uintptr_t{1} << 30));
    return 0;
  };
  // Not loaded: the arguments and scratch are checked first, then nothing launches.
  int status = mxc_op_launch(bwd, nullptr, c.tensors_.data(), c.tensors_.size(), c.scalars.data(), c.scalars.size(),
                             allocate, &allocations, error_, sizeof error_);
  EXPECT_EQ(status, MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(error_, HasSubstr("not loaded on a device"));
  ASSERT_FALSE(allocations.sizes.empty());  // the fp32 dw partials
  allocations.refuse = true;
  status = mxc_op_launch(bwd, nullptr, c.tensors_.data(), c.tensors_.size(), c.scalars.data(), c.scalars.size(),
                         allocate, &allocations, error_, sizeof error_);
  EXPECT_EQ(status, MXRT_ERROR_INTERNAL);
  EXPECT_THAT(error_, HasSubstr("scratch allocator could not allocate"));
  status = mxc_op_launch(bwd, nullptr, c.tensors_.data(), c.tensors_.size(), c.scalars.data(), c.scalars.size(),
                         nullptr, nullptr, error_, sizeof error_);
  EXPECT_NE(status, MXRT_SUCCESS);
  EXPECT_THAT(error_, HasSubstr("no allocator was given"));
  mxc_op_free(bwd);
}

TEST_F(OpLaunch, LoadReachesTheDriver) {
  mxc_op* fwd = create(0);
  ASSERT_NE(fwd, nullptr);
  mxrt_device* device = nullptr;
  ASSERT_EQ(mxrt_device_open("cuda", MXFP6_FAKE_DRIVER, 0, &device), MXRT_SUCCESS) << mxrt_last_error();
  // The fake driver takes no real code object: the load reaches it, and its refusal comes back
  // named, with the key.
  EXPECT_EQ(mxc_op_load(fwd, device, error_, sizeof error_), MXRT_ERROR_DRIVER);
  EXPECT_THAT(error_, HasSubstr("cuModuleLoad"));
  EXPECT_THAT(error_, HasSubstr(kQkvFwd));
  EXPECT_EQ(mxc_op_load(fwd, nullptr, error_, sizeof error_), MXRT_ERROR_INVALID_ARGUMENT);
  Call c = qkvForward(64, 2);
  EXPECT_EQ(mxc_op_launch(fwd, nullptr, c.tensors_.data(), c.tensors_.size(), c.scalars.data(), c.scalars.size(),
                          nullptr, nullptr, error_, sizeof error_),
            MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(error_, HasSubstr("not loaded on a device"));
  mxc_op_free(fwd);
  mxrt_device_close(device);
}

TEST_F(OpLaunch, AFailedKeyHasNoOp) {
  EXPECT_EQ(mxc_op_create(resolution_, 7, error_, sizeof error_), nullptr);
  EXPECT_THAT(error_, HasSubstr("no op 7"));
  // A family nothing was precompiled for, in a database without a server to compile it.
  const char* bad[] = {"ln_modulate_fwd/S=32,layout=sbd/sm_90/D=3072/64"};
  mxc_resolution* r = mxc_resolve(client_, bad, 1, error_, sizeof error_);
  ASSERT_NE(r, nullptr) << error_;
  ASSERT_NE(mxc_op_error(r, 0), nullptr);
  EXPECT_EQ(mxc_op_create(r, 0, error_, sizeof error_), nullptr);
  EXPECT_THAT(error_, HasSubstr(bad[0]));
  mxc_resolution_free(r);
}

TEST(CallKeys, FromAShapeSetAndFromACall) {
  char error[512] = {}, out[4096] = {};
  const char* shapes = R"({"model": "m", "entries": [
    {"site": "a", "op": "norm_rope_qkv_fwd", "variant": {"layout": "megatron"}, "heads": 2, "tokens": [64, 128]},
    {"site": "b", "op": "norm_rope_qkv_fwd", "variant": {"layout": "megatron"}, "heads": 2, "tokens": [64]}]})";
  size_t need = mxc_shape_set_keys(shapes, "sm_90", nullptr, 0, error, sizeof error);
  ASSERT_GT(need, 0u) << error;
  ASSERT_EQ(mxc_shape_set_keys(shapes, "sm_90", out, sizeof out, error, sizeof error), need);
  // Norm+RoPE keys count (token, head) rows.
  EXPECT_EQ(std::string(out), "norm_rope_qkv_fwd/H=2,layout=megatron/sm_90//128\n"
                              "norm_rope_qkv_fwd/H=2,layout=megatron/sm_90//256\n");
  EXPECT_EQ(mxc_shape_set_keys("{\"entries\": [{\"op\": \"nope\"}]}", "sm_90", out, sizeof out, error, sizeof error), 0u);
  EXPECT_THAT(error, HasSubstr("nope"));
  Call c = qkvForward(32, 2);
  ASSERT_GT(mxc_call_key("norm_rope_qkv_fwd", "layout=megatron", "sm_90", c.tensors_.data(), c.tensors_.size(),
                         c.scalars.data(), c.scalars.size(), out, sizeof out, error, sizeof error),
            0u)
      << error;
  EXPECT_EQ(std::string(out), kQkvFwd);
  Call ln = lnForward(64, 32);
  ASSERT_GT(mxc_call_key("ln_modulate_fwd", "", "sm_90", ln.tensors_.data(), ln.tensors_.size(), ln.scalars.data(),
                         ln.scalars.size(), out, sizeof out, error, sizeof error),
            0u)
      << error;
  EXPECT_EQ(std::string(out), kLnFwd);
  ln.remove("x");
  EXPECT_EQ(mxc_call_key("ln_modulate_fwd", "", "sm_90", ln.tensors_.data(), ln.tensors_.size(), ln.scalars.data(),
                         ln.scalars.size(), out, sizeof out, error, sizeof error),
            0u);
  EXPECT_THAT(error, HasSubstr("'x'"));
}

}  // namespace
}  // namespace mxfp6::testing
