// A small RAII layer over the SQLite C API, in the manner of Chromium's sql/: a Database owns the
// connection and is the only place PRAGMAs are issued; a Statement binds `?` placeholders and
// reads columns; a Transaction rolls back unless committed. Every error names the file and
// SQLite's message, so a caller can return it as it is.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace mxfp6::autotune::sql {

class Statement;

class Database {
 public:
  /// Opens `path`; ReadOnly never creates or writes the file. The connection waits up to
  /// `busyTimeoutMs` for another process's write lock instead of failing with SQLITE_BUSY.
  static Expected<std::unique_ptr<Database>> open(const std::string& path, bool readOnly,
                                                  int busyTimeoutMs = 10000);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }
  bool readOnly() const { return readOnly_; }
  sqlite3* handle() { return db_; }

  /// The connection settings of a read-write kernel database: WAL (readers never block the
  /// writer nor each other), synchronous=FULL, foreign keys enforced. See sqlite.cpp for why.
  Status configureForWriting();
  /// Foreign keys on for a read-only connection too, so foreign_key_check and cascades agree.
  Status configureForReading();

  Expected<int32_t> applicationId();
  Status setApplicationId(int32_t id);
  /// PRAGMA integrity_check's rows ("ok" alone when sound).
  Expected<std::vector<std::string>> integrityCheck();
  /// PRAGMA foreign_key_check, one line per violation.
  Expected<std::vector<std::string>> foreignKeyCheck();
  /// Whether the file holds any table at all (an empty file is a new database).
  Expected<bool> hasTables();
  Expected<bool> hasTable(std::string_view name);

  /// Runs SQL without parameters or results (schema statements).
  Status execute(const char* sql);
  Expected<Statement> prepare(const char* sql);
  /// Copies the whole database into `dest` (created or overwritten) with the backup API.
  Status backupTo(const std::string& dest);

  int64_t changes();
  int64_t lastInsertRowId();
  /// "<what> in <path>: <SQLite's message>" for the connection's last error `code`.
  Status error(std::string_view what, int code);

 private:
  Database(std::string path, sqlite3* db, bool readOnly)
      : path_(std::move(path)), db_(db), readOnly_(readOnly) {}
  std::string path_;
  sqlite3* db_ = nullptr;
  bool readOnly_ = false;
};

class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  // Placeholders are numbered from 1, as in SQLite.
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, int value) { return bind(index, int64_t{value}); }
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view text);
  Statement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
  Statement& bind(int index, const std::string& text) { return bind(index, std::string_view(text)); }
  Statement& bind(int index, const std::optional<std::string>& text);
  Statement& bindBlob(int index, std::string_view bytes);

  /// Advances: true with a row to read, false when done.
  Expected<bool> step();
  /// Steps a statement that returns no rows.
  Status run();
  Status reset();

  bool isNull(int column);
  int64_t int64(int column);
  double real(int column);
  std::string text(int column);
  std::string blob(int column);
  std::optional<std::string> optionalText(int column);

 private:
  friend class Database;
  Statement(Database* db, sqlite3_stmt* stmt, const char* sql) : db_(db), stmt_(stmt), sql_(sql) {}
  Database* db_;
  sqlite3_stmt* stmt_;
  const char* sql_;
  int bindError_ = 0;  // the first failed bind, reported by step()
};

/// BEGIN IMMEDIATE for writes (the write lock is taken up front, so the busy timeout applies
/// and two writers can never deadlock upgrading a read lock), BEGIN for consistent reads.
class Transaction {
 public:
  enum class Kind { Read, Write };
  explicit Transaction(Database& db, Kind kind = Kind::Write) : db_(db), kind_(kind) {}
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  Status begin();
  Status commit();

 private:
  Database& db_;
  Kind kind_;
  bool open_ = false;
};

}  // namespace mxfp6::autotune::sql
