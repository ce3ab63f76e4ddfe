#include "autotune/schema.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "autotune/db.h"

namespace mxfp6::autotune {
namespace {

constexpr char kCreateMeta[] =
    "CREATE TABLE meta("
    "key TEXT NOT NULL PRIMARY KEY, "
    "value INTEGER NOT NULL)";
constexpr char kSelectMetaValue[] = "SELECT value FROM meta WHERE key = ?";
constexpr char kUpsertMeta[] =
    "INSERT INTO meta(key, value) VALUES(?, ?) "
    "ON CONFLICT(key) DO UPDATE SET value = excluded.value";

// Migration 1: the initial schema. Families are the shape-free part of a key; everything per
// key is (family_id, rows). Code objects and sources are keyed by their sha256.
constexpr const char* kMigration1[] = {
    "CREATE TABLE sources("
    "sha256 TEXT NOT NULL PRIMARY KEY, "
    "name TEXT NOT NULL, "
    "text TEXT NOT NULL)",

    "CREATE TABLE objects("
    "sha256 TEXT NOT NULL PRIMARY KEY, "
    "kernel TEXT NOT NULL, "
    "target TEXT NOT NULL, "
    "format TEXT NOT NULL, "
    "config TEXT NOT NULL, "
    "source_sha256 TEXT NOT NULL, "
    "toolchain TEXT NOT NULL, "
    "metadata TEXT NOT NULL, "
    "bytes BLOB NOT NULL)",

    "CREATE TABLE families("
    "id INTEGER PRIMARY KEY, "
    "op TEXT NOT NULL, "
    "variant TEXT NOT NULL, "
    "target TEXT NOT NULL, "
    "sizes TEXT NOT NULL, "
    "toolchain TEXT NOT NULL, "
    "UNIQUE(op, variant, target, sizes, toolchain))",

    "CREATE TABLE candidates("
    "family_id INTEGER NOT NULL REFERENCES families(id) ON DELETE CASCADE, "
    "plan_id TEXT NOT NULL, "
    "plan_json TEXT NOT NULL, "
    "ordinal INTEGER NOT NULL, "
    "resource_cost REAL NOT NULL, "
    "PRIMARY KEY(family_id, plan_id))",

    // An object a candidate launches cannot be deleted while the candidate exists.
    "CREATE TABLE candidate_objects("
    "family_id INTEGER NOT NULL, "
    "plan_id TEXT NOT NULL, "
    "position INTEGER NOT NULL, "
    "object_sha256 TEXT NOT NULL REFERENCES objects(sha256), "
    "PRIMARY KEY(family_id, plan_id, position), "
    "FOREIGN KEY(family_id, plan_id) REFERENCES candidates(family_id, plan_id) "
    "ON DELETE CASCADE)",
    "CREATE INDEX candidate_objects_by_object ON candidate_objects(object_sha256)",

    // uid: the sha256 of the run's content, so merging the same run twice stores it once.
    "CREATE TABLE runs("
    "id INTEGER PRIMARY KEY, "
    "uid TEXT NOT NULL UNIQUE, "
    "family_id INTEGER NOT NULL REFERENCES families(id) ON DELETE CASCADE, "
    "rows INTEGER NOT NULL, "
    "winner TEXT NOT NULL, "
    "equivalent TEXT NOT NULL, "
    "rule TEXT NOT NULL, "
    "tuned_at TEXT NOT NULL, "
    "tuner TEXT NOT NULL)",
    "CREATE INDEX runs_by_key ON runs(family_id, rows)",

    // samples_us: the repetitions as little-endian IEEE doubles, in the order taken.
    "CREATE TABLE timings("
    "run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, "
    "position INTEGER NOT NULL, "
    "plan_id TEXT NOT NULL, "
    "passed_gate INTEGER NOT NULL, "
    "gate_message TEXT NOT NULL, "
    "samples_us BLOB NOT NULL, "
    "PRIMARY KEY(run_id, position))",

    "CREATE TABLE selections("
    "family_id INTEGER NOT NULL REFERENCES families(id) ON DELETE CASCADE, "
    "rows INTEGER NOT NULL, "
    "run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, "
    "PRIMARY KEY(family_id, rows))",
    "CREATE INDEX selections_by_run ON selections(run_id)",

    "CREATE TABLE pins("
    "family_id INTEGER NOT NULL REFERENCES families(id) ON DELETE CASCADE, "
    "rows INTEGER NOT NULL, "
    "plan_id TEXT NOT NULL, "
    "who TEXT NOT NULL, "
    "why TEXT NOT NULL, "
    "created_at TEXT NOT NULL, "
    "PRIMARY KEY(family_id, rows))",
};

// Migration 2: pins may expire, and resolution records the keys it could only answer by a
// nearest shape or the default, so they can be tuned later.
constexpr const char* kMigration2[] = {
    "ALTER TABLE pins ADD COLUMN expires_at TEXT",

    "CREATE TABLE misses("
    "family_id INTEGER NOT NULL REFERENCES families(id) ON DELETE CASCADE, "
    "rows INTEGER NOT NULL, "
    "answered_by TEXT NOT NULL, "
    "count INTEGER NOT NULL, "
    "first_seen TEXT NOT NULL, "
    "last_seen TEXT NOT NULL, "
    "PRIMARY KEY(family_id, rows, answered_by))",
};

struct Migration {
  const char* const* statements;
  size_t count;
};

constexpr std::array<Migration, kSchemaVersion> kMigrations = {{
    {kMigration1, std::size(kMigration1)},
    {kMigration2, std::size(kMigration2)},
}};

Status setMeta(sql::Database& db, const char* key, int value) {
  ASSIGN_OR_RETURN(sql::Statement upsert, db.prepare(kUpsertMeta));
  upsert.bind(1, key).bind(2, value);
  return upsert.run();
}

Expected<int> metaValue(sql::Database& db, const char* key) {
  ASSIGN_OR_RETURN(sql::Statement select, db.prepare(kSelectMetaValue));
  select.bind(1, key);
  ASSIGN_OR_RETURN(bool row, select.step());
  if (!row) return Status::error(db.path() + " has no " + key + " in its meta table");
  return int(select.int64(0));
}

uint32_t bigEndian32(const unsigned char* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

/// Reads the 100-byte SQLite header before SQLite does, to name the two failures SQLite only
/// reports vaguely (or late, on the first read of a missing page): a file that is not SQLite,
/// and one cut short. The header's page count is trusted only when SQLite would trust it (its
/// version-valid-for field matches the change counter) and no WAL holds newer pages.
Status checkFileHeader(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return Status::ok();  // a new file, or SQLite names the problem
  std::ifstream in(path, std::ios::binary);
  std::array<unsigned char, 100> header{};
  in.read(reinterpret_cast<char*>(header.data()), header.size());
  size_t got = size_t(in.gcount());
  static constexpr char kMagic[] = "SQLite format 3";
  size_t magicLength = std::min(got, sizeof(kMagic));
  if (std::memcmp(header.data(), kMagic, magicLength) != 0)
    return Status::error(path + " is not a kernel database: file is not a database (no SQLite "
                                "header)");
  if (got < header.size())
    return Status::error(path + " is truncated: " + std::to_string(size) +
                         " bytes, shorter than an SQLite header");
  uint32_t pageSize = uint32_t(header[16]) << 8 | header[17];
  if (pageSize == 1) pageSize = 65536;
  uint32_t changeCounter = bigEndian32(&header[24]);
  uint32_t pageCount = bigEndian32(&header[28]);
  uint32_t validFor = bigEndian32(&header[92]);
  auto walSize = std::filesystem::file_size(path + "-wal", ec);
  bool walHoldsPages = !ec && walSize > 0;
  if (validFor == changeCounter && !walHoldsPages && pageCount > 0 &&
      uint64_t(pageCount) * pageSize > size)
    return Status::error(path + " is truncated: its header says " + std::to_string(pageCount) +
                         " pages of " + std::to_string(pageSize) + " bytes (" +
                         std::to_string(uint64_t(pageCount) * pageSize) +
                         " bytes), the file has " + std::to_string(size));
  return Status::ok();
}

/// SQLite's own message for a file that is not a database gets the file's name and what it
/// means here.
Status explainOpenError(sql::Database& db, const Status& status) {
  const std::string& message = status.message();
  if (message.find("file is not a database") != std::string::npos)
    return Status::error(db.path() + " is not a kernel database: file is not a database");
  if (message.find("malformed") != std::string::npos)
    return Status::error(db.path() + " is corrupt (truncated or overwritten): " + message);
  return status;
}

Expected<int> checkSchema(sql::Database& db) {
  ASSIGN_OR_RETURN(int32_t applicationId, db.applicationId());
  ASSIGN_OR_RETURN(bool hasTables, db.hasTables());
  if (applicationId == 0 && !hasTables) {
    if (db.readOnly())
      return Status::error(db.path() + " is empty, not a kernel database (open it read-write "
                                       "to create one)");
    return 0;
  }
  if (applicationId != kApplicationId) {
    char text[64];
    std::snprintf(text, sizeof(text), "application_id 0x%08x, expected 0x%08x",
                  uint32_t(applicationId), uint32_t(kApplicationId));
    return Status::error(db.path() + " is an SQLite database of another application (" + text +
                         ")");
  }
  ASSIGN_OR_RETURN(bool hasMeta, db.hasTable("meta"));
  if (!hasMeta) return Status::error(db.path() + " has no meta table: it is damaged");
  ASSIGN_OR_RETURN(int version, metaValue(db, "version"));
  ASSIGN_OR_RETURN(int compatible, metaValue(db, "compatible_version"));
  if (compatible > kSchemaVersion)
    return Status::error(db.path() + ": schema version " + std::to_string(version) +
                         " is newer than this build's " + std::to_string(kSchemaVersion) +
                         " (it needs a build that reads version " + std::to_string(compatible) +
                         ")");
  if (version < kSchemaVersion && db.readOnly())
    return Status::error(db.path() + ": schema version " + std::to_string(version) +
                         " is older than this build's " + std::to_string(kSchemaVersion) +
                         "; open it read-write once to migrate it");
  return version;
}

}  // namespace

Expected<int> schemaVersionOf(sql::Database& db) {
  ASSIGN_OR_RETURN(bool hasMeta, db.hasTable("meta"));
  if (!hasMeta) return 0;
  return metaValue(db, "version");
}

Status applyMigrations(sql::Database& db, int version) {
  for (int next = 1; next <= version && next <= kSchemaVersion; ++next) {
    sql::Transaction transaction(db);
    RETURN_IF_ERROR(transaction.begin());
    // Read inside the write lock: another process may have migrated since we looked.
    ASSIGN_OR_RETURN(int current, schemaVersionOf(db));
    if (current >= next) continue;
    if (next == 1) {
      RETURN_IF_ERROR(db.setApplicationId(kApplicationId));
      RETURN_IF_ERROR(db.execute(kCreateMeta));
    }
    const Migration& migration = kMigrations[next - 1];
    for (size_t i = 0; i < migration.count; ++i) {
      Status status = db.execute(migration.statements[i]);
      if (!status.isOk())
        return Status::error("migration " + std::to_string(next) + " of " + db.path() +
                             " failed: " + status.message());
    }
    RETURN_IF_ERROR(setMeta(db, "version", next));
    RETURN_IF_ERROR(setMeta(db, "compatible_version", std::min(next, kCompatibleVersion)));
    RETURN_IF_ERROR(transaction.commit());
  }
  return Status::ok();
}

Expected<int> openSchema(sql::Database& db) {
  RETURN_IF_ERROR(checkFileHeader(db.path()));
  // Only reads until the file is known to be ours: a foreign file is never switched to WAL.
  Expected<int> version = checkSchema(db);
  if (!version.isOk()) return explainOpenError(db, version.status());
  if (db.readOnly()) {
    RETURN_IF_ERROR(db.configureForReading());
    return *version;
  }
  RETURN_IF_ERROR(db.configureForWriting());
  if (*version >= kSchemaVersion) return *version;
  Status migrated = applyMigrations(db, kSchemaVersion);
  if (!migrated.isOk()) return explainOpenError(db, migrated);
  return schemaVersionOf(db);
}

}  // namespace mxfp6::autotune
