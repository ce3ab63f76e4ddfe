// The kernel database's schema: its numbered migrations, the meta table that records which have
// run, and the checks on open that tell a kernel database from any other file.
#pragma once

#include <cstdint>

#include "autotune/sqlite.h"
#include "support/status.h"

namespace mxfp6::autotune {

/// PRAGMA application_id of every kernel database ("MXF6"): a SQLite file without it belongs
/// to another application.
inline constexpr int32_t kApplicationId = 0x4d584636;

/// The oldest schema version a build must read to open a file this build wrote: version 2 adds
/// pin expiry, which a version-1 build would ignore and so serve expired pins.
inline constexpr int kCompatibleVersion = 2;

/// Checks `db` is a kernel database this build can use and, unless read-only, creates or
/// migrates it to kSchemaVersion. Returns the schema version of the file as opened.
Expected<int> openSchema(sql::Database& db);

/// Runs the migrations up to and including `version`, each in its own transaction (tests use
/// it to build files of older versions). Migrations already applied are skipped, so concurrent
/// openers of one new file each see a complete schema.
Status applyMigrations(sql::Database& db, int version);

/// The version recorded in the meta table (0: no meta table yet).
Expected<int> schemaVersionOf(sql::Database& db);

}  // namespace mxfp6::autotune
