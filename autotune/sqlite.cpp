#include "autotune/sqlite.h"

#include <sqlite3.h>

#include <utility>

namespace mxfp6::autotune::sql {
namespace {

// PRAGMAs live here and nowhere else.
constexpr char kJournalModeWal[] = "PRAGMA journal_mode=WAL";
// FULL, not NORMAL: in WAL mode NORMAL may lose the last commits on a power cut (never the
// file's integrity). Writes here are rare (one per tuned key, a pin, a miss) and each is a
// result someone was told succeeded, such as a pin or minutes of tuning, so the one fsync per
// commit is worth it.
constexpr char kSynchronousFull[] = "PRAGMA synchronous=FULL";
constexpr char kForeignKeysOn[] = "PRAGMA foreign_keys=ON";
constexpr char kApplicationId[] = "PRAGMA application_id";
constexpr char kIntegrityCheck[] = "PRAGMA integrity_check";
constexpr char kForeignKeyCheck[] = "PRAGMA foreign_key_check";
constexpr char kCountTables[] = "SELECT count(*) FROM sqlite_schema WHERE type = 'table'";
constexpr char kHasTable[] =
    "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?";

constexpr char kBeginImmediate[] = "BEGIN IMMEDIATE";
constexpr char kBeginDeferred[] = "BEGIN";
constexpr char kCommit[] = "COMMIT";
constexpr char kRollback[] = "ROLLBACK";

}  // namespace

Expected<std::unique_ptr<Database>> Database::open(const std::string& path, bool readOnly,
                                                   int busyTimeoutMs) {
  sqlite3* db = nullptr;
  int flags = readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  // One connection per thread or a mutex: SQLite's serialized mode makes sharing safe anyway.
  flags |= SQLITE_OPEN_FULLMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Status::error("cannot open " + path + ": " + message);
  }
  sqlite3_busy_timeout(db, busyTimeoutMs);
  return std::unique_ptr<Database>(new Database(path, db, readOnly));
}

Database::~Database() { sqlite3_close_v2(db_); }

Status Database::error(std::string_view what, int code) {
  std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(code);
  if (message.empty() || message == "not an error") message = sqlite3_errstr(code);
  return Status::error(std::string(what) + " in " + path_ + ": " + message);
}

Status Database::execute(const char* sql) {
  char* message = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return Status::ok();
  std::string text = message ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  return Status::error(std::string(sql).substr(0, 60) + " in " + path_ + ": " + text);
}

Expected<Statement> Database::prepare(const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return error("preparing \"" + std::string(sql).substr(0, 60) + "\"", rc);
  return Statement(this, stmt, sql);
}

Status Database::configureForWriting() {
  // journal_mode answers with the mode in force; anything but "wal" means it did not switch
  // (for example on a file system without shared memory).
  ASSIGN_OR_RETURN(Statement wal, prepare(kJournalModeWal));
  ASSIGN_OR_RETURN(bool row, wal.step());
  if (!row || wal.text(0) != "wal")
    return Status::error("cannot switch " + path_ + " to WAL mode (journal mode stays " +
                         (row ? wal.text(0) : std::string("unknown")) + ")");
  RETURN_IF_ERROR(execute(kSynchronousFull));
  return execute(kForeignKeysOn);
}

Status Database::configureForReading() { return execute(kForeignKeysOn); }

Expected<int32_t> Database::applicationId() {
  ASSIGN_OR_RETURN(Statement statement, prepare(kApplicationId));
  ASSIGN_OR_RETURN(bool row, statement.step());
  if (!row) return Status::error("PRAGMA application_id returned nothing in " + path_);
  return int32_t(statement.int64(0));
}

Status Database::setApplicationId(int32_t id) {
  // PRAGMAs take no parameters; the value is a number we format ourselves.
  return execute((std::string(kApplicationId) + "=" + std::to_string(id)).c_str());
}

Expected<std::vector<std::string>> Database::integrityCheck() {
  ASSIGN_OR_RETURN(Statement statement, prepare(kIntegrityCheck));
  std::vector<std::string> rows;
  while (true) {
    ASSIGN_OR_RETURN(bool row, statement.step());
    if (!row) break;
    rows.push_back(statement.text(0));
  }
  return rows;
}

Expected<std::vector<std::string>> Database::foreignKeyCheck() {
  ASSIGN_OR_RETURN(Statement statement, prepare(kForeignKeyCheck));
  std::vector<std::string> rows;
  while (true) {
    ASSIGN_OR_RETURN(bool row, statement.step());
    if (!row) break;
    // Columns: table, rowid, referenced table, foreign key index.
    rows.push_back("row " + statement.text(1) + " of " + statement.text(0) +
                   " refers to a missing row of " + statement.text(2));
  }
  return rows;
}

Expected<bool> Database::hasTables() {
  ASSIGN_OR_RETURN(Statement statement, prepare(kCountTables));
  ASSIGN_OR_RETURN(bool row, statement.step());
  return row && statement.int64(0) > 0;
}

Expected<bool> Database::hasTable(std::string_view name) {
  ASSIGN_OR_RETURN(Statement statement, prepare(kHasTable));
  statement.bind(1, name);
  ASSIGN_OR_RETURN(bool row, statement.step());
  return row && statement.int64(0) > 0;
}

Status Database::backupTo(const std::string& dest) {
  sqlite3* target = nullptr;
  int rc = sqlite3_open_v2(dest.c_str(), &target, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string message = target ? sqlite3_errmsg(target) : sqlite3_errstr(rc);
    sqlite3_close(target);
    return Status::error("cannot create " + dest + ": " + message);
  }
  // All pages in one step: the copy is one consistent read of the source, so a writer that
  // commits meanwhile neither restarts it nor shows up half in it.
  sqlite3_backup* backup = sqlite3_backup_init(target, "main", db_, "main");
  if (!backup) {
    std::string message = sqlite3_errmsg(target);
    sqlite3_close(target);
    return Status::error("cannot copy " + path_ + " to " + dest + ": " + message);
  }
  do {
    rc = sqlite3_backup_step(backup, -1);
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) sqlite3_sleep(50);
  } while (rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
  sqlite3_backup_finish(backup);
  std::string message = rc == SQLITE_DONE ? "" : sqlite3_errmsg(target);
  if (message.empty() && rc != SQLITE_DONE) message = sqlite3_errstr(rc);
  sqlite3_close(target);
  if (rc != SQLITE_DONE)
    return Status::error("copying " + path_ + " to " + dest + " failed: " + message);
  return Status::ok();
}

int64_t Database::changes() { return sqlite3_changes64(db_); }
int64_t Database::lastInsertRowId() { return sqlite3_last_insert_rowid(db_); }

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)), sql_(other.sql_),
      bindError_(other.bindError_) {}

Statement::~Statement() { sqlite3_finalize(stmt_); }

namespace {
int noteBind(int& first, int rc) {
  if (rc != SQLITE_OK && first == 0) first = rc;
  return rc;
}
}  // namespace

Statement& Statement::bind(int index, int64_t value) {
  noteBind(bindError_, sqlite3_bind_int64(stmt_, index, value));
  return *this;
}

Statement& Statement::bind(int index, double value) {
  noteBind(bindError_, sqlite3_bind_double(stmt_, index, value));
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  noteBind(bindError_, sqlite3_bind_text64(stmt_, index, text.data(), text.size(),
                                           SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}

Statement& Statement::bind(int index, const std::optional<std::string>& text) {
  if (text) return bind(index, std::string_view(*text));
  noteBind(bindError_, sqlite3_bind_null(stmt_, index));
  return *this;
}

Statement& Statement::bindBlob(int index, std::string_view bytes) {
  // A zero-length blob must still be a blob, not NULL: SQLite binds NULL for a null pointer.
  static const char kEmpty = 0;
  noteBind(bindError_, sqlite3_bind_blob64(stmt_, index, bytes.empty() ? &kEmpty : bytes.data(),
                                           bytes.size(), SQLITE_TRANSIENT));
  return *this;
}

Expected<bool> Statement::step() {
  std::string what = "\"" + std::string(sql_).substr(0, 60) + "\"";
  if (bindError_ != 0)
    return Status::error("binding " + what + " in " + db_->path() + ": " +
                         sqlite3_errstr(bindError_));
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Status status = db_->error(what, rc);
  sqlite3_reset(stmt_);
  return status;
}

Status Statement::run() {
  ASSIGN_OR_RETURN(bool row, step());
  (void)row;  // a statement with RETURNING or a PRAGMA may answer a row we do not need
  return Status::ok();
}

Status Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bindError_ = 0;
  return Status::ok();
}

bool Statement::isNull(int column) { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
int64_t Statement::int64(int column) { return sqlite3_column_int64(stmt_, column); }
double Statement::real(int column) { return sqlite3_column_double(stmt_, column); }

std::string Statement::text(int column) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  return p ? std::string(p, sqlite3_column_bytes(stmt_, column)) : std::string();
}

std::string Statement::blob(int column) {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, column));
  return p ? std::string(p, sqlite3_column_bytes(stmt_, column)) : std::string();
}

std::optional<std::string> Statement::optionalText(int column) {
  if (isNull(column)) return std::nullopt;
  return text(column);
}

Transaction::~Transaction() {
  if (open_) (void)db_.execute(kRollback);
}

Status Transaction::begin() {
  RETURN_IF_ERROR(db_.execute(kind_ == Kind::Write ? kBeginImmediate : kBeginDeferred));
  open_ = true;
  return Status::ok();
}

Status Transaction::commit() {
  Status status = db_.execute(kCommit);
  if (status.isOk()) open_ = false;
  return status;
}

}  // namespace mxfp6::autotune::sql
