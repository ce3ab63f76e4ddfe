// KernelDb's API on real SQLite files: what each call stores and returns, migrations from an
// older schema, and the rules of selection and pins.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <tuple>
#include <sqlite3.h>

#include "autotune/db.h"
#include "autotune/schema.h"
#include "autotune/sqlite.h"
#include "tests/db/db_test_util.h"

namespace mxfp6::autotune {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace testing;

TEST(KernelDb, NewFileHasTheCurrentSchemaAndOurApplicationId) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  ASSERT_TRUE(db);
  EXPECT_EQ(db->schemaVersion(), kSchemaVersion);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db->handle(), "PRAGMA application_id", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), kApplicationId);
  sqlite3_finalize(stmt);
  ASSERT_EQ(sqlite3_prepare_v2(db->handle(), "PRAGMA journal_mode", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
}

TEST(KernelDb, ObjectsAreContentAddressed) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  CodeObject o = makeObject("ln_modulate_fwd", "ROWS=4");
  ASSERT_OK(db->putObject(o));
  ASSERT_OK(db->putObject(o));  // idempotent
  EXPECT_TRUE(*db->hasObject(o.sha256));
  auto back = db->object(o.sha256);
  ASSERT_OK(back);
  EXPECT_EQ(back->bytes, o.bytes);
  EXPECT_EQ(back->metadata, o.metadata);
  EXPECT_EQ(back->toolchain, o.toolchain);

  CodeObject wrong = o;
  wrong.bytes += "!";
  Status refused = db->putObject(wrong);
  EXPECT_FALSE(refused.isOk());
  EXPECT_THAT(refused.message(), HasSubstr("its bytes hash to " + sha256Hex(wrong.bytes)));

  auto missing = db->object(std::string(64, '0'));
  EXPECT_FALSE(missing.isOk());
  EXPECT_THAT(missing.status().message(), HasSubstr("no code object"));
}

TEST(KernelDb, FindsAnObjectByWhatItWasCompiledFrom) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  CodeObject o = makeObject("rmsnorm", "THREADS=256");
  ASSERT_OK(db->putObject(o));
  auto found = db->findObject(o.sourceHash, "rmsnorm", "sm_90", "THREADS=256", o.toolchain);
  ASSERT_OK(found);
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->sha256, o.sha256);
  // Any field that differs is another compile.
  for (auto [kernel, target, config, toolchain] :
       {std::tuple{"rmsnorm", "gfx942", "THREADS=256", o.toolchain}, {"rmsnorm", "sm_90", "THREADS=512", o.toolchain},
        {"other", "sm_90", "THREADS=256", o.toolchain}, {"rmsnorm", "sm_90", "THREADS=256", std::string("tc-2")}}) {
    auto none = db->findObject(o.sourceHash, kernel, target, config, toolchain);
    ASSERT_OK(none);
    EXPECT_FALSE(none->has_value()) << kernel << " " << target << " " << config << " " << toolchain;
  }
}

TEST(KernelDb, SourcesAreStoredByTheirHash) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  auto sha = db->putSource("ln.mxk", "kernel ln_modulate_fwd {}");
  ASSERT_OK(sha);
  EXPECT_EQ(*sha, sha256Hex("kernel ln_modulate_fwd {}"));
  auto text = db->source(*sha);
  ASSERT_OK(text);
  EXPECT_EQ(text->value_or(""), "kernel ln_modulate_fwd {}");
  EXPECT_FALSE(db->source(std::string(64, 'f'))->has_value());
}

TEST(KernelDb, CandidatesNeedTheirObjectsAndComeBackInOrdinalOrder) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  FamilyKey family = lnFamily();
  Candidate orphan{family, "rows2", "{}", {std::string(64, 'a')}, 0, 1};
  Status refused = db->putCandidates({orphan});
  EXPECT_THAT(refused.message(), HasSubstr("does not hold"));

  ASSERT_OK(storeCandidates(*db, family));
  auto candidates = db->candidates(family);
  ASSERT_OK(candidates);
  ASSERT_EQ(candidates->size(), 2u);
  EXPECT_EQ((*candidates)[0].planId, "rows4");
  EXPECT_EQ((*candidates)[1].planId, "rows8");
  EXPECT_EQ((*candidates)[1].resourceCost, 8);
  EXPECT_EQ((*candidates)[0].objects.size(), 1u);
  EXPECT_THAT(*db->families(), ElementsAre(family));

  // Replacing by planId keeps one candidate of that id.
  Candidate replaced = (*candidates)[1];
  replaced.planJson = R"({"plan":"rows8","v":2})";
  ASSERT_OK(db->putCandidates({replaced}));
  candidates = db->candidates(family);
  ASSERT_EQ(candidates->size(), 2u);
  EXPECT_EQ((*candidates)[1].planJson, replaced.planJson);
}

TEST(KernelDb, RecordTuningMakesTheRunTheSelectionWithItsSamples) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  Key key{lnFamily(), 16384};
  ASSERT_OK(storeCandidates(*db, key.family));
  EXPECT_FALSE(db->selection(key)->has_value());

  TuningRun run = makeRun(key, "rows4");
  ASSERT_OK(db->recordTuning(run));
  EXPECT_GT(run.selection.runId, 0);
  auto selection = db->selection(key);
  ASSERT_OK(selection);
  ASSERT_TRUE(selection->has_value());
  EXPECT_EQ((*selection)->winner, "rows4");
  EXPECT_EQ((*selection)->rule, "incumbent");
  EXPECT_THAT((*selection)->equivalent, ElementsAre("rows4", "rows8"));
  EXPECT_FALSE((*selection)->tunedAt.empty());

  auto timings = db->timings(key);
  ASSERT_OK(timings);
  ASSERT_EQ(timings->size(), 2u);
  EXPECT_EQ((*timings)[1].planId, "rows8");
  EXPECT_THAT((*timings)[0].samplesUs, ElementsAre(10.0, 10.5, 9.8));

  // A re-tune replaces the selection; the older run stays in the history.
  TuningRun again = makeRun(key, "rows8");
  ASSERT_OK(db->recordTuning(again));
  EXPECT_EQ((*db->selection(key))->winner, "rows8");
  EXPECT_NE(again.selection.runId, run.selection.runId);

  TuningRun other = makeRun(Key{key.family, 1024}, "rows4");
  ASSERT_OK(db->recordTuning(other));
  auto all = db->selections(key.family);
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].key.rows, 1024);
  EXPECT_EQ((*all)[1].key.rows, 16384);
}

TEST(KernelDb, AWinnerThatFailedTheGateIsRefused) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  Key key{lnFamily(), 4096};
  TuningRun run = makeRun(key, "rows8");
  run.timings[1].passedGate = false;
  run.selection.equivalent = {"rows8"};
  Status refused = db->recordTuning(run);
  EXPECT_THAT(refused.message(), HasSubstr("winner rows8 did not pass the correctness gate"));
  EXPECT_FALSE(db->selection(key)->has_value());
}

TEST(KernelDb, PinsOverrideUntilTheyExpire) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  Key key{lnFamily(), 16384};
  ASSERT_OK(db->pin(Pin{key, "rows8", "alice", "rows4 regressed", "", "2030-01-01T00:00:00Z"}));
  auto pin = db->pinFor(key, "2029-12-31T23:59:59Z");
  ASSERT_OK(pin);
  ASSERT_TRUE(pin->has_value());
  EXPECT_EQ((*pin)->planId, "rows8");
  EXPECT_EQ((*pin)->who, "alice");
  EXPECT_EQ((*pin)->why, "rows4 regressed");
  EXPECT_FALSE((*pin)->createdAt.empty());
  EXPECT_FALSE(db->pinFor(key, "2030-01-01T00:00:00Z")->has_value());

  // A pin survives re-tuning.
  TuningRun run = makeRun(key, "rows4");
  ASSERT_OK(db->recordTuning(run));
  EXPECT_EQ((*db->pinFor(key, "2029-01-01T00:00:00Z"))->planId, "rows8");

  ASSERT_OK(db->unpin(key));
  EXPECT_FALSE(db->pinFor(key, "2029-01-01T00:00:00Z")->has_value());
  EXPECT_THAT(db->unpin(key).message(), HasSubstr("has no pin"));

  ASSERT_OK(db->pin(Pin{key, "rows4", "bob", "forever", "2026-01-01T00:00:00Z", std::nullopt}));
  EXPECT_TRUE(db->pinFor(key)->has_value());
}

TEST(KernelDb, MissesCountEachRequest) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  Key a{lnFamily(), 100}, b{lnFamily(), 200};
  ASSERT_OK(db->recordMiss(a, "nearest"));
  ASSERT_OK(db->recordMiss(a, "nearest"));
  ASSERT_OK(db->recordMiss(b, "default"));
  EXPECT_FALSE(db->recordMiss(b, "guess").isOk());
  auto misses = db->misses();
  ASSERT_OK(misses);
  ASSERT_EQ(misses->size(), 2u);
  EXPECT_EQ((*misses)[0].key, a);
  EXPECT_EQ((*misses)[0].count, 2);
  EXPECT_EQ((*misses)[1].answeredBy, "default");
}

TEST(KernelDb, ListReportsTunedAndPinnedKeysThroughItsFilter) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  Key tuned{lnFamily(), 16384}, pinned{lnFamily(), 8192};
  Key otherTarget{FamilyKey{"ln_modulate_fwd", "", "gfx942", "D=3072", "t"}, 16384};
  TuningRun sm90Run = makeRun(tuned, "rows4");
  ASSERT_OK(db->recordTuning(sm90Run));
  TuningRun gfx = makeRun(otherTarget, "rows8");
  ASSERT_OK(db->recordTuning(gfx));
  ASSERT_OK(db->pin(Pin{pinned, "rows8", "a", "b", "", std::nullopt}));

  auto all = db->list();
  ASSERT_OK(all);
  ASSERT_EQ(all->size(), 3u);
  auto sm90 = db->list(ListFilter{"", "sm_90", "", std::nullopt});
  ASSERT_EQ(sm90->size(), 2u);
  EXPECT_EQ((*sm90)[0].key, pinned);
  EXPECT_TRUE((*sm90)[0].pin.has_value());
  EXPECT_FALSE((*sm90)[0].selection.has_value());
  EXPECT_EQ((*sm90)[1].selection->winner, "rows4");
  auto byRows = db->list(ListFilter{"ln_modulate_fwd", "", "D=3072", 16384});
  EXPECT_EQ(byRows->size(), 2u);
  EXPECT_TRUE(db->list(ListFilter{"mxfp6_pack_dual", "", "", std::nullopt})->empty());
}

TEST(KernelDb, ReadOnlyRefusesEveryWrite) {
  TempDir dir;
  {
    auto db = openOrDie(dir.file("k.db"));
    ASSERT_OK(storeCandidates(*db, lnFamily()));
  }
  auto db = openOrDie(dir.file("k.db"), OpenMode::ReadOnly);
  ASSERT_TRUE(db);
  EXPECT_TRUE(db->readOnly());
  const std::string expected = dir.file("k.db") + " is open read-only (a replica): writes go to the writer";
  Key key{lnFamily(), 1};
  TuningRun run = makeRun(key, "rows4");
  EXPECT_EQ(db->putObject(makeObject("k", "c")).message(), expected);
  EXPECT_EQ(db->putSource("a", "b").status().message(), expected);
  EXPECT_EQ(db->putCandidates({}).message(), expected);
  EXPECT_EQ(db->recordTuning(run).message(), expected);
  EXPECT_EQ(db->pin(Pin{key, "rows4", "a", "b", "", std::nullopt}).message(), expected);
  EXPECT_EQ(db->unpin(key).message(), expected);
  EXPECT_EQ(db->recordMiss(key, "nearest").message(), expected);
  EXPECT_EQ(db->gc("t").status().message(), expected);
  EXPECT_EQ(db->importJson("{}").message(), expected);
  EXPECT_EQ(db->merge(*db).message(), expected);
  // Reads work.
  EXPECT_EQ(db->candidates(lnFamily())->size(), 2u);
}

TEST(KernelDb, GcKeepsOneToolchainAndWhatItsCandidatesReference) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  FamilyKey current = lnFamily("tc-new"), old = lnFamily("tc-old");
  ASSERT_OK(storeCandidates(*db, current));
  ASSERT_OK(storeCandidates(*db, old));
  TuningRun run = makeRun(Key{old, 64}, "rows4");
  ASSERT_OK(db->recordTuning(run));
  CodeObject stray = makeObject("unused", "X=1", "tc-new");
  ASSERT_OK(db->putObject(stray));

  auto removed = db->gc("tc-new");
  ASSERT_OK(removed);
  // old: 1 family, 2 candidates, 2 candidate_objects, 2 objects, 1 run, 2 timings,
  // 1 selection; the stray object.
  EXPECT_EQ(*removed, 12);
  EXPECT_THAT(*db->families(), ElementsAre(current));
  EXPECT_FALSE(*db->hasObject(stray.sha256));
  EXPECT_EQ(db->candidates(current)->size(), 2u);
  auto kept = db->candidates(current);
  ASSERT_OK(kept);
  for (const Candidate& c : *kept) EXPECT_TRUE(*db->hasObject(c.objects[0]));
  auto report = db->check();
  ASSERT_OK(report);
  EXPECT_TRUE(report->problems.empty());
  EXPECT_EQ(*db->gc("tc-new"), 0);
}

TEST(KernelDb, FormatKeyAndUtcNow) {
  EXPECT_EQ(formatKey(Key{lnFamily(), 16384}), "ln_modulate_fwd//sm_90/D=3072/16384");
  std::string now = utcNow();
  ASSERT_EQ(now.size(), 20u);
  EXPECT_EQ(now[10], 'T');
  EXPECT_EQ(now.back(), 'Z');
}

// Migration 1 alone gives a version-1 file, as an older build wrote it; opening it with this
// build runs migration 2 and keeps what was there.
TEST(KernelDbMigrations, AVersion1FileIsMigratedOnOpen) {
  TempDir dir;
  std::string path = dir.file("v1.db");
  {
    auto raw = sql::Database::open(path, false);
    ASSERT_OK(raw);
    ASSERT_OK(applyMigrations(**raw, 1));
    EXPECT_EQ(*schemaVersionOf(**raw), 1);
    EXPECT_FALSE(*(*raw)->hasTable("misses"));
    ASSERT_OK((*raw)->execute(
        "INSERT INTO families(id, op, variant, target, sizes, toolchain) "
        "VALUES(1, 'ln_modulate_fwd', '', 'sm_90', 'D=3072', 'mxfp6c-1/llvm-22/ptxas-12.8');"
        "INSERT INTO pins(family_id, rows, plan_id, who, why, created_at) "
        "VALUES(1, 16384, 'rows8', 'alice', 'v1 pin', '2026-01-01T00:00:00Z')"));
  }
  // A read-only open does not migrate: it says what to do.
  auto readOnly = KernelDb::open(path, OpenMode::ReadOnly);
  EXPECT_FALSE(readOnly.isOk());
  EXPECT_THAT(readOnly.status().message(),
              HasSubstr(path + ": schema version 1 is older than this build's 2"));

  auto db = openOrDie(path);
  ASSERT_TRUE(db);
  EXPECT_EQ(db->schemaVersion(), 2);
  Key key{lnFamily(), 16384};
  auto pin = db->pinFor(key);
  ASSERT_OK(pin);
  ASSERT_TRUE(pin->has_value());
  EXPECT_EQ((*pin)->why, "v1 pin");
  EXPECT_FALSE((*pin)->expiresAt.has_value());
  ASSERT_OK(db->recordMiss(key, "nearest"));  // the v2 table exists
  ASSERT_OK(db->pin(Pin{key, "rows4", "bob", "expiring", "", "2000-01-01T00:00:00Z"}));
  EXPECT_FALSE(db->pinFor(key)->has_value());
  EXPECT_TRUE(db->check()->problems.empty());
}

TEST(KernelDbMigrations, EachMigrationIsRecordedInMeta) {
  TempDir dir;
  auto raw = sql::Database::open(dir.file("m.db"), false);
  ASSERT_OK(raw);
  EXPECT_EQ(*schemaVersionOf(**raw), 0);
  ASSERT_OK(applyMigrations(**raw, 1));
  EXPECT_EQ(*schemaVersionOf(**raw), 1);
  ASSERT_OK(applyMigrations(**raw, 2));
  EXPECT_EQ(*schemaVersionOf(**raw), 2);
  EXPECT_TRUE(*(*raw)->hasTable("misses"));
  ASSERT_OK(applyMigrations(**raw, 2));  // applied ones are skipped
  EXPECT_EQ(*(*raw)->applicationId(), kApplicationId);
}

}  // namespace
}  // namespace mxfp6::autotune
