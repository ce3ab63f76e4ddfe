// Files that are not a sound kernel database of this build: each is a clear error that names the
// file (and the versions where versions are the problem), never a crash and never a write to a
// file that is not ours.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <iterator>

#include "autotune/db.h"
#include "autotune/schema.h"
#include "autotune/sqlite.h"
#include "tests/db/db_test_util.h"

namespace mxfp6::autotune {
namespace {

using ::testing::HasSubstr;
using namespace testing;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string openError(const std::string& path, OpenMode mode = OpenMode::ReadWrite) {
  auto db = KernelDb::open(path, mode);
  EXPECT_FALSE(db.isOk()) << path << " opened";
  return db.isOk() ? "" : db.status().message();
}

/// A sound database with enough rows to span many pages, closed (so fully checkpointed).
void writeDatabase(const std::string& path, int objects = 200) {
  auto db = KernelDb::open(path);
  ASSERT_OK(db);
  ASSERT_OK(storeCandidates(**db, lnFamily()));
  for (int i = 0; i < objects; ++i)
    ASSERT_OK((*db)->putObject(makeObject("k" + std::to_string(i), std::string(2000, 'x'))));
}

void rawExecute(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* message = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &message), SQLITE_OK) << message;
  sqlite3_free(message);
  sqlite3_close(db);
}

TEST(KernelDbFiles, AMissingFileReadOnlyIsNotCreated) {
  TempDir dir;
  std::string path = dir.file("absent.db");
  EXPECT_EQ(openError(path, OpenMode::ReadOnly), "cannot open " + path + " read-only: no such file");
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(KernelDbFiles, ATextFileIsNotADatabase) {
  TempDir dir;
  std::string path = dir.file("notes.db");
  std::string text = "this is a text file, not SQLite at all; it is long enough for a header.\n"
                     "second line of the text file, so it exceeds one hundred bytes in size.\n";
  writeFile(path, text);
  EXPECT_EQ(openError(path), path + " is not a kernel database: file is not a database (no SQLite header)");
  EXPECT_THAT(openError(path, OpenMode::ReadOnly), HasSubstr("file is not a database"));
  EXPECT_EQ(readFile(path), text);  // untouched
}

TEST(KernelDbFiles, ATruncatedFileSaysSo) {
  TempDir dir;
  std::string path = dir.file("cut.db");
  writeDatabase(path);
  std::string bytes = readFile(path);
  ASSERT_GT(bytes.size(), 100000u);
  writeFile(path, bytes.substr(0, bytes.size() / 2));
  std::string error = openError(path);
  EXPECT_THAT(error, HasSubstr(path + " is truncated: its header says"));
  EXPECT_THAT(error, HasSubstr("the file has " + std::to_string(bytes.size() / 2)));
  EXPECT_THAT(openError(path, OpenMode::ReadOnly), HasSubstr("is truncated"));
  // Cut inside the header itself.
  writeFile(path, bytes.substr(0, 40));
  EXPECT_EQ(openError(path), path + " is truncated: 40 bytes, shorter than an SQLite header");
}

TEST(KernelDbFiles, AnotherApplicationsSqliteFileIsRefusedAndLeftAlone) {
  TempDir dir;
  std::string path = dir.file("browser.db");
  rawExecute(path, "CREATE TABLE cookies(name TEXT); INSERT INTO cookies VALUES('a')");
  std::string before = readFile(path);
  EXPECT_EQ(openError(path), path +
                                 " is an SQLite database of another application (application_id "
                                 "0x00000000, expected 0x4d584636)");
  EXPECT_EQ(readFile(path), before);  // not switched to WAL, not migrated
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));

  rawExecute(path, "PRAGMA application_id = 305419896");
  EXPECT_THAT(openError(path, OpenMode::ReadOnly), HasSubstr("application_id 0x12345678"));
}

TEST(KernelDbFiles, ANewerSchemaNamesBothVersions) {
  TempDir dir;
  std::string path = dir.file("future.db");
  writeDatabase(path, 0);
  rawExecute(path, "UPDATE meta SET value = 7 WHERE key IN ('version', 'compatible_version')");
  std::string expected = path + ": schema version 7 is newer than this build's 2 (it needs a "
                                "build that reads version 7)";
  EXPECT_EQ(openError(path), expected);
  EXPECT_EQ(openError(path, OpenMode::ReadOnly), expected);

  // A newer version that declares this build compatible opens (Chromium's compatible_version).
  rawExecute(path, "UPDATE meta SET value = 2 WHERE key = 'compatible_version'");
  auto db = KernelDb::open(path, OpenMode::ReadOnly);
  ASSERT_OK(db);
  EXPECT_EQ((*db)->schemaVersion(), 7);
}

TEST(KernelDbFiles, AnEmptyFileIsANewDatabaseOnlyForAWriter) {
  TempDir dir;
  std::string path = dir.file("empty.db");
  writeFile(path, "");
  EXPECT_THAT(openError(path, OpenMode::ReadOnly), HasSubstr(path + " is empty"));
  auto db = KernelDb::open(path);
  ASSERT_OK(db);
  EXPECT_EQ((*db)->schemaVersion(), kSchemaVersion);
}

// An object's bytes changed behind the database's back (a bad disk, a stray write): reading it
// fails by its sha256, and check() names it.
TEST(KernelDbFiles, AnObjectWhoseBytesChangedIsRefusedAndReported) {
  TempDir dir;
  auto db = KernelDb::open(dir.file("k.db"));
  ASSERT_OK(db);
  CodeObject o = makeObject("ln_modulate_fwd", "ROWS=4");
  ASSERT_OK((*db)->putObject(o));
  ASSERT_TRUE((*db)->check()->problems.empty());

  std::string damaged = o.bytes;
  damaged[5] ^= 1;
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2((*db)->handle(), "UPDATE objects SET bytes = ? WHERE sha256 = ?",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  sqlite3_bind_blob(stmt, 1, damaged.data(), int(damaged.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(stmt, 2, o.sha256.c_str(), -1, SQLITE_TRANSIENT);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE);
  sqlite3_finalize(stmt);

  std::string expected = "code object " + o.sha256 + " in " + dir.file("k.db") +
                         " is corrupt: its bytes hash to " + sha256Hex(damaged);
  auto read = (*db)->object(o.sha256);
  ASSERT_FALSE(read.isOk());
  EXPECT_EQ(read.status().message(), expected);
  auto report = (*db)->check();
  ASSERT_OK(report);
  EXPECT_THAT(report->problems, ::testing::ElementsAre(expected));
  EXPECT_EQ(report->objects, 1);
}

// Garbage over the middle of the file: either the open or check() reports it; nothing crashes.
TEST(KernelDbFiles, OverwrittenPagesAreReportedByOpenOrCheck) {
  TempDir dir;
  std::string path = dir.file("scribbled.db");
  writeDatabase(path);
  std::string bytes = readFile(path);
  for (size_t i = bytes.size() / 3; i < bytes.size() / 3 + 20000; ++i) bytes[i] = char(i * 131);
  writeFile(path, bytes);
  auto db = KernelDb::open(path, OpenMode::ReadOnly);
  if (!db.isOk()) {
    EXPECT_THAT(db.status().message(), HasSubstr(path));
    return;
  }
  auto report = (*db)->check();
  if (report.isOk()) {
    EXPECT_FALSE(report->problems.empty());
  } else {
    EXPECT_THAT(report.status().message(), HasSubstr(path));
  }
}

}  // namespace
}  // namespace mxfp6::autotune
