// Moving contents between databases: merge of shard files, snapshots for replicas, and the JSON
// export and import.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "autotune/db.h"
#include "tests/db/db_test_util.h"

namespace mxfp6::autotune {
namespace {

using ::testing::HasSubstr;
using namespace testing;

/// A shard as a tuning job leaves it: candidates, runs of `rows` won by `winner` at `tunedAt`.
void fillShard(KernelDb& db, std::vector<int64_t> rows, const std::string& winner,
               const std::string& tunedAt) {
  ASSERT_OK(storeCandidates(db, lnFamily()));
  for (int64_t m : rows) {
    TuningRun run = makeRun(Key{lnFamily(), m}, winner, tunedAt);
    ASSERT_OK(db.recordTuning(run));
  }
}

TEST(KernelDbMerge, TakesWhatIsMissingAndTheNewerSelection) {
  TempDir dir;
  auto a = openOrDie(dir.file("a.db"));
  auto b = openOrDie(dir.file("b.db"));
  fillShard(*a, {1024, 4096}, "rows4", "2026-01-01T00:00:00Z");
  fillShard(*b, {4096, 16384}, "rows8", "2026-02-01T00:00:00Z");
  ASSERT_OK(b->pin(Pin{Key{lnFamily(), 1024}, "rows8", "bob", "why", "2026-02-02T00:00:00Z",
                       std::nullopt}));
  ASSERT_OK(b->recordMiss(Key{lnFamily(), 77}, "nearest"));

  ASSERT_OK(a->merge(*b));
  EXPECT_EQ((*a->selection(Key{lnFamily(), 1024}))->winner, "rows4");   // only in a
  EXPECT_EQ((*a->selection(Key{lnFamily(), 4096}))->winner, "rows8");   // b's is newer
  EXPECT_EQ((*a->selection(Key{lnFamily(), 16384}))->winner, "rows8");  // only in b
  EXPECT_EQ((*a->pinFor(Key{lnFamily(), 1024}))->who, "bob");
  ASSERT_EQ(a->misses()->size(), 1u);
  EXPECT_EQ(a->candidates(lnFamily())->size(), 2u);
  auto timings = a->timings(Key{lnFamily(), 16384});
  ASSERT_OK(timings);
  EXPECT_EQ(timings->size(), 2u);

  // Merging again changes nothing: runs are identified by their content.
  std::string once = *a->exportJson();
  ASSERT_OK(a->merge(*b));
  EXPECT_EQ(*a->exportJson(), once);

  // An older run merged in does not displace a newer selection.
  auto c = openOrDie(dir.file("c.db"));
  fillShard(*c, {4096}, "rows4", "2025-01-01T00:00:00Z");
  ASSERT_OK(a->merge(*c));
  EXPECT_EQ((*a->selection(Key{lnFamily(), 4096}))->winner, "rows8");
  EXPECT_TRUE(a->check()->problems.empty());
}

TEST(KernelDbMerge, RefusesACorruptObjectOfTheOtherFile) {
  TempDir dir;
  auto a = openOrDie(dir.file("a.db"));
  auto b = openOrDie(dir.file("b.db"));
  CodeObject o = makeObject("k", "c");
  ASSERT_OK(b->putObject(o));
  ASSERT_EQ(sqlite3_exec(b->handle(), "UPDATE objects SET bytes = x'00'", nullptr, nullptr, nullptr),
            SQLITE_OK);
  Status merged = a->merge(*b);
  EXPECT_THAT(merged.message(), HasSubstr("is corrupt"));
  EXPECT_FALSE(*a->hasObject(o.sha256));
}

TEST(KernelDbSnapshot, IsAReadOnlyReplicaWithTheSameData) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  fillShard(*db, {1024, 4096}, "rows4", "2026-01-01T00:00:00Z");
  ASSERT_OK(db->pin(Pin{Key{lnFamily(), 4096}, "rows8", "a", "b", "", std::nullopt}));
  std::string replicaPath = dir.file("replica.db");
  ASSERT_OK(db->snapshot(replicaPath));
  EXPECT_FALSE(std::filesystem::exists(replicaPath + ".partial"));

  // Writes to the source after the snapshot are not in it.
  ASSERT_OK(db->recordMiss(Key{lnFamily(), 5}, "default"));
  auto replica = openOrDie(replicaPath, OpenMode::ReadOnly);
  ASSERT_TRUE(replica);
  EXPECT_THAT(replica->pin(Pin{Key{lnFamily(), 1}, "rows4", "a", "b", "", std::nullopt}).message(),
              HasSubstr("is open read-only (a replica)"));
  EXPECT_TRUE(replica->misses()->empty());
  EXPECT_EQ(replica->list()->size(), 2u);
  EXPECT_TRUE(replica->check()->problems.empty());
  auto kept = replica->candidates(lnFamily());
  ASSERT_OK(kept);
  for (const Candidate& c : *kept) {
    auto object = replica->object(c.objects[0]);
    ASSERT_OK(object);
    EXPECT_EQ(object->bytes, (*db->object(c.objects[0])).bytes);
  }
  // The snapshot can be taken again over an existing one.
  ASSERT_OK(db->snapshot(replicaPath));
}

TEST(KernelDbJson, ExportImportRoundTrip) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  fillShard(*db, {1024, 4096}, "rows4", "2026-01-01T00:00:00Z");
  TuningRun retune = makeRun(Key{lnFamily(), 4096}, "rows8", "2026-03-01T00:00:00Z");
  ASSERT_OK(db->recordTuning(retune));
  ASSERT_OK(db->putSource("ln.mxk", "kernel ln {}"));
  ASSERT_OK(db->pin(Pin{Key{lnFamily(), 1024}, "rows8", "a", "b", "2026-01-02T00:00:00Z",
                        "2027-01-01T00:00:00Z"}));
  ASSERT_OK(db->recordMiss(Key{lnFamily(), 9}, "nearest"));
  auto text = db->exportJson();
  ASSERT_OK(text);
  EXPECT_THAT(*text, ::testing::Not(HasSubstr("bytes_base64")));

  // Without bytes, a fresh file cannot take the candidates: the import says which objects.
  auto fresh = openOrDie(dir.file("fresh.db"));
  Status refused = fresh->importJson(*text);
  EXPECT_THAT(refused.message(), HasSubstr("carry no bytes and are not in"));
  EXPECT_TRUE(fresh->list()->empty());  // all or nothing

  auto withBytes = db->exportJson(true);
  ASSERT_OK(withBytes);
  ASSERT_OK(fresh->importJson(*withBytes));
  EXPECT_EQ(*fresh->exportJson(), *text);
  EXPECT_EQ((*fresh->selection(Key{lnFamily(), 4096}))->winner, "rows8");

  // Into a file that has the objects, the export without bytes imports (and changes nothing).
  ASSERT_OK(fresh->importJson(*text));
  EXPECT_EQ(*fresh->exportJson(), *text);
}

TEST(KernelDbJson, MalformedInputIsAnErrorNotACrash) {
  TempDir dir;
  auto db = openOrDie(dir.file("k.db"));
  EXPECT_THAT(db->importJson("{not json").message(), HasSubstr("not JSON"));
  EXPECT_THAT(db->importJson(R"({"format": "mxfp6-kernel-db", "schema_version": 2})").message(),
              HasSubstr("malformed export"));
  EXPECT_THAT(db->importJson(R"({"format": 3})").message(), HasSubstr("malformed export"));
  EXPECT_THAT(db->importJson(R"({"format": "other"})").message(),
              HasSubstr("not a kernel database export"));
}

}  // namespace
}  // namespace mxfp6::autotune
