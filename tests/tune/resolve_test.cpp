// Resolution over a real database file: every rule, misses recorded, pins over tuning and
// surviving a re-tune, a plan that does not apply skipped, nothing precompiled an error that
// says what to run.
#include <gtest/gtest.h>

#include <filesystem>
#include <sqlite3.h>
#include <unistd.h>

#include "autotune/resolve.h"
#include "ops/plan.h"
#include "support/sha256.h"

namespace mxfp6::autotune {
namespace {

namespace fs = std::filesystem;

class ResolveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mxfp6_resolve_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto db = KernelDb::open((dir_ / "kernels.db").string());
    ASSERT_TRUE(db) << db.status().message();
    db_ = db.take();
    // The LN-modulate backward family at S = 256, its first four plans precompiled with fake
    // objects (one per distinct kernel config).
    const ops::OpSpec* op = ops::findOp("ln_modulate_bwd");
    ops::Problem p{op, *ops::resolveVariant(*op, {}), 3072, 4096, 1, 256};
    family_ = {op->name, p.variantText(), "sm_90", p.sizes(), "test-toolchain"};
    auto plans = ops::candidatePlans(*op, p.variant, 3072);
    std::vector<Candidate> candidates;
    for (int i = 0; i < 4; ++i) {
      ops::Plan plan = plans[i];
      std::vector<std::string> objects;
      for (ops::PlanLaunch& launch : plan.launches) {
        CodeObject o;
        o.kernel = launch.kernel;
        o.target = "sm_90";
        o.format = "cubin";
        o.config = launch.config;
        o.toolchain = family_.toolchain;
        o.metadata = "{}";
        o.bytes = "code of " + launch.kernel + "[" + launch.config + "]";
        o.sha256 = sha256Hex(o.bytes);
        ASSERT_TRUE(db_->putObject(o));
        launch.object = o.sha256;
        objects.push_back(o.sha256);
      }
      candidates.push_back({family_, plan.id(), ops::planToJson(plan), objects, i, double(10 - i)});
      ids_.push_back(plan.id());
    }
    ASSERT_TRUE(db_->putCandidates(candidates));
  }
  void TearDown() override {
    db_.reset();
    fs::remove_all(dir_);
  }
  Key key(int64_t rows) { return {family_, rows}; }
  void tune(int64_t rows, const std::string& winner) {
    TuningRun run;
    run.key = key(rows);
    for (const std::string& id : ids_) run.timings.push_back({id, true, "ok", {10, 11, 12}});
    run.selection = {key(rows), winner, {winner}, "fastest", utcNow(), "test", 0};
    ASSERT_TRUE(db_->recordTuning(run));
  }

  fs::path dir_;
  std::unique_ptr<KernelDb> db_;
  FamilyKey family_;
  std::vector<std::string> ids_;
};

TEST_F(ResolveTest, DefaultThenNearestThenExactThenPinned) {
  auto r = resolve(*db_, key(8192));
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->rule, Rule::Default);
  EXPECT_EQ(r->plan.id(), ids_[0]);
  ASSERT_EQ(r->objects.size(), 2u);
  EXPECT_EQ(r->objects[0].bytes.substr(0, 7), "code of");

  tune(4096, ids_[1]);
  tune(32768, ids_[2]);
  r = resolve(*db_, key(8192));  // log-distance to 4096 is 1 doubling, to 32768 two
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rule, Rule::Nearest);
  EXPECT_EQ(r->fromRows, 4096);
  EXPECT_EQ(r->plan.id(), ids_[1]);
  r = resolve(*db_, key(16384 + 8192));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->fromRows, 32768);

  tune(8192, ids_[3]);
  r = resolve(*db_, key(8192));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rule, Rule::Exact);
  EXPECT_EQ(r->plan.id(), ids_[3]);

  ASSERT_TRUE(db_->pin({key(8192), ids_[0], "ci", "A/B against the default", "", std::nullopt}));
  tune(8192, ids_[2]);  // a re-tune does not move a pin
  r = resolve(*db_, key(8192));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rule, Rule::Pinned);
  EXPECT_EQ(r->plan.id(), ids_[0]);
  EXPECT_NE(r->why.find("A/B against the default"), std::string::npos) << r->why;
  ASSERT_TRUE(db_->unpin(key(8192)));
  r = resolve(*db_, key(8192));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rule, Rule::Exact);
  EXPECT_EQ(r->plan.id(), ids_[2]);
}

TEST_F(ResolveTest, MissesAreRecordedOnlyForNearestAndDefault) {
  ASSERT_TRUE(resolve(*db_, key(2048)));
  tune(4096, ids_[1]);
  ASSERT_TRUE(resolve(*db_, key(2048)));
  ASSERT_TRUE(resolve(*db_, key(4096)));
  ASSERT_TRUE(resolve(*db_, key(1024), {.recordMiss = false}));
  auto misses = db_->misses();
  ASSERT_TRUE(misses);
  int64_t total = 0;
  for (const Miss& m : *misses) {
    EXPECT_EQ(m.key.rows, 2048) << "a miss recorded for an exact answer or with recordMiss off";
    total += m.count;
  }
  EXPECT_EQ(total, 2);  // once answered by default, once by nearest
}

TEST_F(ResolveTest, ANearestWinnerThatDoesNotApplyIsSkipped) {
  // The candidates' P = 8 plans need 8 tokens per sample; at S = 4 none applies.
  FamilyKey small = family_;
  const ops::OpSpec* op = ops::findOp("ln_modulate_bwd");
  ops::Problem p{op, *ops::resolveVariant(*op, {}), 3072, 64, 1, 4};
  small.variant = p.variantText();
  auto r = resolve(*db_, {small, 64});
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("precompile"), std::string::npos) << r.status().message();
}

TEST_F(ResolveTest, BadKeysAreClearErrors) {
  Key k = key(4096);
  k.family.op = "ln_modulate_sideways";
  auto r = resolve(*db_, k);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("unknown op"), std::string::npos);
  k = key(4095);  // not whole samples of 256
  r = resolve(*db_, k);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("multiple of tokens_per_sample"), std::string::npos) << r.status().message();
}

TEST_F(ResolveTest, ACorruptCodeObjectIsRefused) {
  ASSERT_TRUE(resolve(*db_, key(4096)));
  // Damage the default plan's first object in the file.
  auto plan = ops::parsePlan(db_->candidates(family_)->front().planJson);
  std::string sha = plan->launches[0].object;
  std::string sql = "UPDATE objects SET bytes = X'00' WHERE sha256 = '" + sha + "'";
  ASSERT_EQ(sqlite3_exec(db_->handle(), sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  auto r = resolve(*db_, key(4096));
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find(sha), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace mxfp6::autotune
