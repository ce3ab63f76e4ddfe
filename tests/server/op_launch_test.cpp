// Running a resolved op from tensors through the client's C ABI (mxc_op_*), as ctypes does: plans
// precompiled by a server process, resolved from its database file (embedded mode), checked
// against named tensors, and loaded through the runtime on the fake CUDA driver (which takes no
// real code object, so the load's refusal is the driver's, named). Then plans of code objects at
// hand (mxc_key_plans, mxc_op_from_plan), as the benchmark harness times them: a folder that
// mxfp6c precompiles, its objects' launch metadata real, their code replaced by PTX stubs the fake
// driver loads, so that prepared launches (mxc_op_prepare, mxc_launches_*) reach its launch.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <map>
#include <string>
#include <vector>

#include "client/mxfp6_client.h"
#include "tests/runtime/fake_launch.h"
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
  /// mxc_op_check of this call; the message in error.
  int check(const mxc_op* op, char* error, size_t size) const {
    error[0] = '\0';
    return mxc_op_check(op, tensors_.data(), tensors_.size(), scalars.data(), scalars.size(), error, size);
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
  int check(const mxc_op* op, const Call& c) { return c.check(op, error_, sizeof error_); }

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

// ---- Plans of code objects at hand ----

const std::string kLnBwd = "ln_modulate_bwd/S=8,layout=bsd/sm_90/D=3072/64";

Call lnBackward(int64_t T, int64_t S) {
  Call c;
  for (const char* n : {"g", "x"}) c.add(n, MXRT_DTYPE_BF16, {T, 3072});
  c.add("scale", MXRT_DTYPE_BF16, {T / S, 3072});
  for (const char* n : {"mean", "rstd"}) c.add(n, MXRT_DTYPE_F32, {T});
  c.add("dx", MXRT_DTYPE_BF16, {T, 3072});
  for (const char* n : {"dscale", "dshift"}) c.add(n, MXRT_DTYPE_BF16, {T / S, 3072});
  c.scalars = {{"tokens_per_sample", double(S)}};
  return c;
}

/// A code object as a folder holds it: its bytes and launch metadata, and the kernel, entry and
/// full config ("K=V,..." of the metadata's "config") the metadata names.
struct HeldObject {
  std::string kernel, entry, config, bytes, metadata;
};

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// PTX the fake driver loads, with the entry and the parameters (one per ABI argument, so the
/// driver records each argument's value) that the launch metadata names.
std::string stubPtx(const std::string& metadataJson) {
  nlohmann::json meta = nlohmann::json::parse(metadataJson);
  std::string params;
  for (const auto& arg : meta.at("abi")) {
    std::string kind = arg.at("kind");
    params += std::string(params.empty() ? "" : ",") + "\n\t.param ." +
              (kind == "i32" ? "u32" : kind == "f32" ? "f32" : "u64") + " p" + std::to_string(params.size());
  }
  return ".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry " + meta.at("entry").get<std::string>() +
         "(" + params + ")\n{\n\tret;\n}\n";
}

/// Scratch at made-up addresses (the fake driver runs no op's kernel, so nothing reads them).
int fakeScratch(void* user, size_t bytes, void** ptr) {
  auto* next = static_cast<uintptr_t*>(user);
  *ptr = reinterpret_cast<void*>(*next);
  *next += (bytes + 255) / 256 * 256;
  return 0;
}

class PlansAtHand : public ::testing::Test {
 protected:
  // mxfp6c precompiles every candidate of two keys' families into a folder once for every test,
  // as the benchmark's objects are made.
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("mxfp6-plans-at-hand-test-" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    std::ofstream(*dir_ / "shapes.json") << R"({"model": "test", "entries": [
      {"site": "a", "op": "ln_modulate_bwd", "variant": {"layout": "bsd"}, "size": 3072, "tokens_per_sample": 8,
       "tokens": [64]},
      {"site": "b", "op": "norm_rope_qkv_bwd", "variant": {"layout": "megatron"}, "heads": 2, "tokens": [64]}]})";
    std::string command = std::string("'") + MXFP6C + "' precompile --shapes '" + (*dir_ / "shapes.json").string() +
                          "' -o '" + (*dir_ / "objects").string() + "' --targets sm_90 --dsl-dir '" + MXFP6_DSL_DIR +
                          "' > '" + (*dir_ / "precompile.log").string() + "' 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << readFile(*dir_ / "precompile.log");
    objects_ = new std::vector<HeldObject>;
    for (const auto& file : fs::directory_iterator(*dir_ / "objects")) {
      if (file.path().extension() != ".json") continue;
      HeldObject o;
      o.metadata = readFile(file.path());
      o.bytes = readFile(fs::path(file.path()).replace_extension(""));
      nlohmann::json meta = nlohmann::json::parse(o.metadata);
      o.kernel = meta.at("kernel");
      o.entry = meta.at("entry");
      for (const auto& [k, v] : meta.at("config").items())
        o.config += (o.config.empty() ? "" : ",") + k + "=" + std::to_string(v.get<int64_t>());
      objects_->push_back(o);
    }
    // In name order: the table's default pass (ASYNC=1) comes last, so the order is the table's.
    std::sort(objects_->begin(), objects_->end(),
              [](const HeldObject& a, const HeldObject& b) { return a.kernel + a.config < b.kernel + b.config; });
    ASSERT_EQ(objects_->size(), 18u) << readFile(*dir_ / "precompile.log");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete objects_;
  }

  /// configs_json of the held objects, leaving out those of `without` kernels.
  static std::string configsJson(const std::set<std::string>& without = {}) {
    nlohmann::json j = nlohmann::json::object();
    for (const HeldObject& o : *objects_)
      if (!without.count(o.kernel)) j[o.kernel].push_back(o.config);
    return j.dump();
  }

  /// mxc_key_plans, asked for the size first, as a binding calls it.
  std::vector<nlohmann::json> keyPlans(const std::string& key, const std::string& configs) {
    size_t need = mxc_key_plans(key.c_str(), configs.c_str(), nullptr, 0, error_, sizeof error_);
    EXPECT_GT(need, 0u) << error_;
    if (need == 0) return {};
    std::string out(need, '\0');
    EXPECT_EQ(mxc_key_plans(key.c_str(), configs.c_str(), out.data(), out.size(), error_, sizeof error_), need);
    nlohmann::json plans = nlohmann::json::parse(out.c_str());
    return {plans.begin(), plans.end()};
  }

  static const HeldObject* held(const std::string& kernel, const std::string& config) {
    for (const HeldObject& o : *objects_)
      if (o.kernel == kernel && o.config == config) return &o;
    return nullptr;
  }

  /// mxc_op_from_plan with the objects given (their bytes, or PTX stubs the fake driver loads).
  mxc_op* fromPlan(const std::string& key, const nlohmann::json& plan, const std::vector<const HeldObject*>& given,
                   bool stubs = false) {
    std::vector<std::string> bytes;
    std::vector<const void*> pointers;
    std::vector<size_t> sizes;
    std::vector<const char*> metadata;
    for (const HeldObject* o : given) bytes.push_back(stubs ? stubPtx(o->metadata) : o->bytes);
    for (size_t i = 0; i < given.size(); ++i) {
      pointers.push_back(bytes[i].data());
      sizes.push_back(bytes[i].size());
      metadata.push_back(given[i]->metadata.c_str());
    }
    error_[0] = '\0';
    return mxc_op_from_plan(key.c_str(), plan.dump().c_str(), given.size(), pointers.data(), sizes.data(),
                            metadata.data(), error_, sizeof error_);
  }

  /// The held objects of a plan's launches, found by kernel and config.
  static std::vector<const HeldObject*> objectsOf(const nlohmann::json& plan) {
    std::vector<const HeldObject*> out;
    for (const auto& l : plan.at("launches")) out.push_back(held(l.at("kernel"), l.at("config")));
    return out;
  }

  int check(const mxc_op* op, const Call& c) { return c.check(op, error_, sizeof error_); }

  static fs::path* dir_;
  static std::vector<HeldObject>* objects_;
  char error_[1024] = {};
};
fs::path* PlansAtHand::dir_ = nullptr;
std::vector<HeldObject>* PlansAtHand::objects_ = nullptr;

TEST_F(PlansAtHand, KeyPlansCrossThePChoicesWithoutThoseAboveTheSample) {
  std::vector<nlohmann::json> plans = keyPlans(kLnBwd, configsJson());
  // 5 pass configs x 3 reduce configs x P in {8, 4}: P = 16 exceeds the 8 tokens of a sample.
  ASSERT_EQ(plans.size(), 5u * 3u * 2u);
  std::set<std::string> ids;
  for (const auto& plan : plans) {
    EXPECT_EQ(plan.at("family"), "partials");
    EXPECT_NE(plan.at("partials"), 16);
    for (const auto& l : plan.at("launches")) {
      EXPECT_EQ(l.at("object"), "");
      EXPECT_NE(held(l.at("kernel"), l.at("config")), nullptr) << l.dump();
    }
    EXPECT_TRUE(ids.insert(plan.dump()).second) << "twice: " << plan.dump();
  }
  // The op table's default plan first though its pass object came last, then its P = 4.
  const auto& first = plans[0].at("launches");
  EXPECT_EQ(plans[0].at("partials"), 8);
  EXPECT_EQ(first[0].at("config"), "ASYNC=1,D=3072,OVERLAP=1,PREFETCH=2,THREADS=384,VEC=8");
  EXPECT_THAT(first[1].at("config").get<std::string>(), HasSubstr("THREADS=192,VEC=4,W=768"));
  EXPECT_EQ(plans[1].at("partials"), 4);
  EXPECT_EQ(plans[1].at("launches"), first);
  // Too small a buffer: the size needed, nothing written.
  char small[8] = "intact";
  size_t need = mxc_key_plans(kLnBwd.c_str(), configsJson().c_str(), small, sizeof small, error_, sizeof error_);
  EXPECT_GT(need, sizeof small);
  EXPECT_STREQ(small, "intact");
}

TEST_F(PlansAtHand, AFamilyWithoutObjectsForEveryRoleMakesNoPlans) {
  // norm_rope_qkv_bwd: rows (4 pass configs) and tiles (4), each with the dw tree (2 configs).
  std::vector<nlohmann::json> all = keyPlans(kQkvBwd, configsJson());
  EXPECT_EQ(all.size(), 4u * 2u + 4u * 2u);
  EXPECT_EQ(all.front().at("family"), "rows");
  EXPECT_EQ(all.back().at("family"), "tiles");
  std::vector<nlohmann::json> rows = keyPlans(kQkvBwd, configsJson({"norm_rope_qkv_bwd_tiles"}));
  EXPECT_EQ(rows.size(), 4u * 2u);
  for (const auto& plan : rows) EXPECT_EQ(plan.at("family"), "rows");
  EXPECT_TRUE(keyPlans(kQkvBwd, configsJson({"norm_rope_dw_reduce"})).empty());
  EXPECT_TRUE(keyPlans(kQkvBwd, "{}").empty());
}

TEST_F(PlansAtHand, APackersPlansTakeOnlyObjectsOfItsVariantAndSize) {
  std::string key = "mxfp6_pack_rows/FMT=E3M2,MODE=RCEIL/sm_90/C=3072/64";
  std::vector<nlohmann::json> plans =
      keyPlans(key, R"({"mxfp6_pack_rows": ["C=3072,FMT=0,MODE=0,ROWS=1,STAGE=1,THREADS=192,VEC=16",
                                            "C=9216,FMT=1,MODE=0,ROWS=1,STAGE=1,THREADS=192,VEC=16",
                                            "THREADS=192,C=3072,FMT=1,MODE=0,ROWS=1,STAGE=1,VEC=16"],
                        "mxfp6_pack_cols": ["C=3072,FMT=1,HB=4,MODE=0,ROWS=1,THREADS=256,VEC=32,W=64"]})");
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].at("launches")[0].at("config"), "C=3072,FMT=1,MODE=0,ROWS=1,STAGE=1,THREADS=192,VEC=16");
}

TEST_F(PlansAtHand, MalformedKeysAndConfigsAreNamed) {
  struct Case {
    std::string key, configs, message;
  };
  std::vector<Case> cases = {
      {kLnBwd, "not json", "configs_json is not a JSON object"},
      {kLnBwd, R"({"ln_modulate_bwd": "D=3072"})", "\"ln_modulate_bwd\" is not a list of configs"},
      {kLnBwd, R"({"ln_modulate_bwd": [3072]})", "\"ln_modulate_bwd\" has 3072"},
      {kLnBwd, R"({"ln_modulate_bwd": ["D=3072,THREADS"]})", "ln_modulate_bwd config 'D=3072,THREADS'"},
      {"ln_modulate_bwd/S=8/sm_90/D=3072", "{}", "is not op/variant/target/sizes/M"},
      {"ln_modulate_bwd/S=8,layout=bsd/sm_90/D=4096/64", "{}", "D must be one of 3072"},
      {"ln_modulate_bwd/layout=bsd/sm_90/D=3072/64", "{}", "needs S"},
  };
  for (const Case& c : cases) {
    error_[0] = '\0';
    char out[256];
    EXPECT_EQ(mxc_key_plans(c.key.c_str(), c.configs.c_str(), out, sizeof out, error_, sizeof error_), 0u) << c.message;
    EXPECT_THAT(error_, HasSubstr(c.message));
  }
}

TEST_F(PlansAtHand, AnOpOfAPlanPassesTheChecksOfACall) {
  std::vector<nlohmann::json> plans = keyPlans(kLnBwd, configsJson());
  ASSERT_GT(plans.size(), 1u);
  mxc_op* op = fromPlan(kLnBwd, plans[1], objectsOf(plans[1]));
  ASSERT_NE(op, nullptr) << error_;
  EXPECT_THAT(mxc_op_plan(op), HasSubstr("partials P=4: ln_modulate_bwd[ASYNC=1,"));
  EXPECT_EQ(check(op, lnBackward(64, 8)), MXRT_SUCCESS) << error_;
  EXPECT_EQ(check(op, lnBackward(4096, 8)), MXRT_SUCCESS) << error_;
  EXPECT_EQ(check(op, lnBackward(64, 16)), MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(error_, HasSubstr("resolved for " + kLnBwd));
  mxc_op_free(op);
  // A plan as the database spells it (the table's configs, without the tunables left at their
  // defaults) takes the same objects.
  nlohmann::json stored = plans[0];
  stored["launches"][0]["config"] = "ASYNC=1,D=3072,PREFETCH=2,THREADS=384,VEC=8";
  stored["launches"][1]["config"] = "D=3072,THREADS=192,VEC=4,W=768";
  op = fromPlan(kLnBwd, stored, objectsOf(plans[0]));
  ASSERT_NE(op, nullptr) << error_;
  EXPECT_EQ(check(op, lnBackward(64, 8)), MXRT_SUCCESS) << error_;
  mxc_op_free(op);
}

TEST_F(PlansAtHand, ObjectsAndPlansThatDoNotFitAreRefused) {
  std::vector<nlohmann::json> plans = keyPlans(kLnBwd, configsJson());
  ASSERT_FALSE(plans.empty());
  const nlohmann::json& plan = plans[0];
  std::vector<const HeldObject*> objects = objectsOf(plan);
  ASSERT_EQ(objects.size(), 2u);
  const HeldObject* otherReduce = nullptr;
  for (const HeldObject& o : *objects_)
    if (o.kernel == "ln_modulate_bwd_reduce" && &o != objects[1]) otherReduce = &o;
  ASSERT_NE(otherReduce, nullptr);
  HeldObject oldSchema = *objects[0];
  oldSchema.metadata.replace(oldSchema.metadata.find("\"metadata_schema\":1"), 19, "\"metadata_schema\":0");
  nlohmann::json tooMany = plan, otherFamily = plan;
  tooMany["partials"] = 16;
  otherFamily["family"] = "rows";
  struct Case {
    const char* what;
    nlohmann::json plan;
    std::vector<const HeldObject*> objects;
    std::vector<std::string> messages;
  };
  std::vector<Case> cases = {
      {"count", plan, {objects[0]}, {"the plan has 2 launches but 1 code objects"}},
      {"config", plan, {objects[0], otherReduce},
       {"launch 1 (reduce) runs ln_modulate_bwd_reduce[" + objects[1]->config + "]",
        "compiled with [" + otherReduce->config + "]"}},
      {"kernel", plan, {objects[1], objects[0]},
       {"runs ln_modulate_bwd but its code object is of kernel ln_modulate_bwd_reduce"}},
      {"schema", plan, {&oldSchema, objects[1]}, {"launch metadata schema 0"}},
      {"P", tooMany, objects, {"P = 16 exceeds the 8 tokens of a sample"}},
      {"family", otherFamily, objects, {"has no family 'rows'"}},
  };
  for (const Case& c : cases) {
    mxc_op* op = fromPlan(kLnBwd, c.plan, c.objects);
    EXPECT_EQ(op, nullptr) << c.what;
    mxc_op_free(op);
    for (const std::string& m : c.messages) EXPECT_THAT(error_, HasSubstr(m)) << c.what;
    EXPECT_THAT(error_, HasSubstr(kLnBwd)) << c.what;
  }
  EXPECT_EQ(mxc_op_from_plan(kLnBwd.c_str(), plan.dump().c_str(), 2, nullptr, nullptr, nullptr, error_, sizeof error_),
            nullptr);
  EXPECT_THAT(error_, HasSubstr("is NULL"));
}

TEST_F(PlansAtHand, PreparedLaunchesEnqueueWhatTheirInfoSays) {
  // The dw partials of norm_rope_qkv_bwd's rows family go through a reduction tree: one pass and
  // a reduce launch per tree level.
  std::vector<nlohmann::json> plans = keyPlans(kQkvBwd, configsJson());
  ASSERT_FALSE(plans.empty());
  mxc_op* op = fromPlan(kQkvBwd, plans[0], objectsOf(plans[0]), /*stubs=*/true);
  ASSERT_NE(op, nullptr) << error_;
  Call c = qkvBackward(64, 2);
  uintptr_t scratchAt = uintptr_t{1} << 40;
  mxc_launches* launches = mxc_op_prepare(op, c.tensors_.data(), c.tensors_.size(), c.scalars.data(), c.scalars.size(),
                                          fakeScratch, &scratchAt, error_, sizeof error_);
  ASSERT_NE(launches, nullptr) << error_;
  size_t n = mxc_launches_count(launches);
  EXPECT_GT(n, 2u);
  std::vector<std::array<uint32_t, 3>> grids(n);
  for (size_t i = 0; i < n; ++i) {
    size_t planLaunch = 99;
    ASSERT_EQ(mxc_launches_info(launches, i, &planLaunch, grids[i].data()), 0);
    EXPECT_EQ(planLaunch, i == 0 ? 0u : 1u) << i;
    EXPECT_GE(grids[i][0], 1u) << i;
  }
  EXPECT_EQ(mxc_launches_info(launches, n, nullptr, nullptr), -1);

  EXPECT_EQ(mxc_launches_enqueue(launches, nullptr, 0, n, error_, sizeof error_), MXRT_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(error_, HasSubstr("not loaded on a device"));
  mxrt_device* device = nullptr;
  ASSERT_EQ(mxrt_device_open("cuda", MXFP6_FAKE_DRIVER, 0, &device), MXRT_SUCCESS) << mxrt_last_error();
  ASSERT_EQ(mxc_op_load(op, device, error_, sizeof error_), MXRT_SUCCESS) << error_;
  void* driver = dlopen(MXFP6_FAKE_DRIVER, RTLD_NOW | RTLD_NOLOAD);  // loaded by the device
  ASSERT_NE(driver, nullptr);
  auto* last = static_cast<FakeLaunch*>(dlsym(driver, "fake_cuda_last_launch"));
  ASSERT_NE(last, nullptr);
  // One at a time: each reaches the driver with the grid its info says, in order.
  for (size_t i = 0; i < n; ++i) {
    int before = last->launches;
    ASSERT_EQ(mxc_launches_enqueue(launches, nullptr, i, 1, error_, sizeof error_), MXRT_SUCCESS) << error_;
    EXPECT_EQ(last->launches, before + 1);
    EXPECT_EQ((std::array<uint32_t, 3>{last->grid[0], last->grid[1], last->grid[2]}), grids[i]) << i;
  }
  // All of them, again and again, as a timing loop replays them.
  for (int repeat = 0; repeat < 3; ++repeat) {
    int before = last->launches;
    ASSERT_EQ(mxc_launches_enqueue(launches, nullptr, 0, n, error_, sizeof error_), MXRT_SUCCESS) << error_;
    EXPECT_EQ(last->launches, before + int(n));
    EXPECT_EQ((std::array<uint32_t, 3>{last->grid[0], last->grid[1], last->grid[2]}), grids[n - 1]);
  }
  for (auto [first, count] : {std::pair<size_t, size_t>{n, 1}, {1, n}, {1, SIZE_MAX}}) {
    EXPECT_EQ(mxc_launches_enqueue(launches, nullptr, first, count, error_, sizeof error_),
              MXRT_ERROR_INVALID_ARGUMENT);
    EXPECT_THAT(error_, HasSubstr("run past its " + std::to_string(n) + " launches"));
  }
  // mxc_op_launch is the same path: the same launches.
  int before = last->launches;
  ASSERT_EQ(mxc_op_launch(op, nullptr, c.tensors_.data(), c.tensors_.size(), c.scalars.data(), c.scalars.size(),
                          fakeScratch, &scratchAt, error_, sizeof error_),
            MXRT_SUCCESS)
      << error_;
  EXPECT_EQ(last->launches, before + int(n));
  mxc_launches_free(launches);
  mxc_op_free(op);
  mxrt_device_close(device);
  dlclose(driver);
}

/// The launches the fake driver saw while `body` ran: grid and argument bytes of each, in order.
std::vector<std::pair<std::array<unsigned, 3>, std::vector<uint64_t>>> launchesDuring(void* driver,
                                                                                     const std::function<void()>& body) {
  auto* last = static_cast<FakeLaunch*>(dlsym(driver, "fake_cuda_last_launch"));
  auto* log = static_cast<FakeLaunch*>(dlsym(driver, "fake_cuda_launch_log"));
  if (last == nullptr || log == nullptr) throw std::runtime_error("the fake driver has no launch log");
  int before = last->launches;
  body();
  std::vector<std::pair<std::array<unsigned, 3>, std::vector<uint64_t>>> out;
  for (int n = before + 1; n <= last->launches; ++n) {
    const FakeLaunch& l = log[(n - 1) % kFakeLaunchLog];
    out.push_back({{l.grid[0], l.grid[1], l.grid[2]}, {l.params, l.params + l.paramCount}});
  }
  return out;
}

TEST_F(PlansAtHand, RepeatedCallsWriteTheirAddressesIntoLaunchesCheckedOnce) {
  // The rows family of norm_rope_qkv_bwd: a pass and a reduction tree over fp32 scratch.
  std::vector<nlohmann::json> plans = keyPlans(kQkvBwd, configsJson());
  ASSERT_FALSE(plans.empty());
  mxc_op* op = fromPlan(kQkvBwd, plans[0], objectsOf(plans[0]), /*stubs=*/true);
  ASSERT_NE(op, nullptr) << error_;
  mxrt_device* device = nullptr;
  ASSERT_EQ(mxrt_device_open("cuda", MXFP6_FAKE_DRIVER, 0, &device), MXRT_SUCCESS) << mxrt_last_error();
  ASSERT_EQ(mxc_op_load(op, device, error_, sizeof error_), MXRT_SUCCESS) << error_;
  void* driver = dlopen(MXFP6_FAKE_DRIVER, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(driver, nullptr);

  // A call through mxc_op_launch against the same call prepared from scratch (mxc_op_prepare
  // composes and checks every time): the same launches, argument for argument.
  auto launched = [&](const Call& c, uintptr_t scratchAt) {
    return launchesDuring(driver, [&] {
      EXPECT_EQ(mxc_op_launch(op, nullptr, c.tensors_.data(), c.tensors_.size(), c.scalars.data(), c.scalars.size(),
                              fakeScratch, &scratchAt, error_, sizeof error_),
                MXRT_SUCCESS)
          << error_;
    });
  };
  auto prepared = [&](const Call& c, uintptr_t scratchAt) {
    mxc_launches* l = mxc_op_prepare(op, c.tensors_.data(), c.tensors_.size(), c.scalars.data(), c.scalars.size(),
                                     fakeScratch, &scratchAt, error_, sizeof error_);
    EXPECT_NE(l, nullptr) << error_;
    auto out = launchesDuring(driver, [&] {
      EXPECT_EQ(mxc_launches_enqueue(l, nullptr, 0, mxc_launches_count(l), error_, sizeof error_), MXRT_SUCCESS);
    });
    mxc_launches_free(l);
    return out;
  };
  // Every tensor moved by its own multiple of 256 bytes: another step's activations.
  auto moved = [](Call c, uintptr_t by) {
    for (size_t i = 0; i < c.tensors_.size(); ++i) {
      auto& data = c.tensors_[i].tensor.data;
      data = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(data) + (i + 1) * by);
    }
    return c;
  };

  Call first = qkvBackward(64, 2);
  auto firstLaunches = launched(first, uintptr_t{1} << 40);
  ASSERT_GT(firstLaunches.size(), 2u);
  EXPECT_EQ(firstLaunches, prepared(first, uintptr_t{1} << 40));
  EXPECT_EQ(mxc_op_signatures(op), 1u);

  Call second = moved(first, 256 * 1024);
  auto secondLaunches = launched(second, (uintptr_t{1} << 40) + (uintptr_t{1} << 30));
  EXPECT_NE(secondLaunches, firstLaunches);  // the addresses differ
  EXPECT_EQ(secondLaunches, prepared(second, (uintptr_t{1} << 40) + (uintptr_t{1} << 30)));
  EXPECT_EQ(mxc_op_signatures(op), 1u) << "the second call composed its launches again";

  // A tensor moved off its alignment, an output over an input: refused as the full checks refuse
  // them (their messages, the call's own addresses), and nothing launches.
  Call misaligned = second;
  misaligned["dq"].tensor.data = static_cast<char*>(misaligned["dq"].tensor.data) + 2;
  Call overlapping = second;
  overlapping["dqkv"].tensor.data = overlapping["qkv"].tensor.data;
  for (const Call* bad : {&misaligned, &overlapping}) {
    char expected[1024] = {};
    ASSERT_NE(bad->check(op, expected, sizeof expected), MXRT_SUCCESS);
    uintptr_t scratchAt = uintptr_t{1} << 40;
    auto none = launchesDuring(driver, [&] {
      EXPECT_EQ(mxc_op_launch(op, nullptr, bad->tensors_.data(), bad->tensors_.size(), bad->scalars.data(),
                              bad->scalars.size(), fakeScratch, &scratchAt, error_, sizeof error_),
                MXRT_ERROR_INVALID_ARGUMENT);
    });
    EXPECT_TRUE(none.empty());
    EXPECT_STREQ(error_, expected);
  }
  EXPECT_THAT(std::string(error_), HasSubstr("overlaps"));

  // Inputs sharing memory (K's rotary tables are Q's) are another signature, and so are other
  // scalars and another T.
  Call shared = second;
  shared["k_cos"].tensor.data = shared["q_cos"].tensor.data;
  shared["k_sin"].tensor.data = shared["q_sin"].tensor.data;
  Call sharedMoved = moved(shared, 4096);
  sharedMoved["k_cos"].tensor.data = sharedMoved["q_cos"].tensor.data;
  sharedMoved["k_sin"].tensor.data = sharedMoved["q_sin"].tensor.data;
  Call otherScalar = second;
  otherScalar.scalars = {{"pos_div", 2}};
  Call longer = moved(qkvBackward(128, 2), 512);
  size_t signatures = mxc_op_signatures(op);
  for (const Call* c : {&shared, &sharedMoved, &otherScalar, &longer}) {
    EXPECT_EQ(launched(*c, uintptr_t{1} << 41), prepared(*c, uintptr_t{1} << 41));
  }
  EXPECT_EQ(mxc_op_signatures(op), signatures + 3);  // sharedMoved is shared's signature

  mxc_op_free(op);
  mxrt_device_close(device);
  dlclose(driver);
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
