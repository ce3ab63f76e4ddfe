// KernelDb: each public call is one transaction over the row functions of db_rows.cpp.
#include "autotune/db.h"

#include <ctime>
#include <filesystem>

#include "autotune/db_rows.h"
#include "autotune/schema.h"
#include "autotune/sqlite.h"
#include "support/sha256.h"

namespace mxfp6::autotune {
namespace {

constexpr char kListKeys[] =
    "SELECT f.id, f.op, f.variant, f.target, f.sizes, f.toolchain, k.rows "
    "FROM (SELECT family_id, rows FROM selections UNION SELECT family_id, rows FROM pins) AS k "
    "JOIN families AS f ON f.id = k.family_id "
    "WHERE (?1 = '' OR f.op = ?1) AND (?2 = '' OR f.target = ?2) AND (?3 = '' OR f.sizes = ?3) "
    "AND (?4 IS NULL OR k.rows = ?4) "
    "ORDER BY f.op, f.variant, f.target, f.sizes, f.toolchain, k.rows";
constexpr char kSelectSource[] = "SELECT text FROM sources WHERE sha256 = ?";
constexpr char kDeletePin[] = "DELETE FROM pins WHERE family_id = ? AND rows = ?";
constexpr char kSelectObjectHashes[] = "SELECT sha256 FROM objects ORDER BY sha256";
constexpr char kCountRows[] =
    "SELECT (SELECT count(*) FROM objects), (SELECT count(*) FROM candidates), "
    "(SELECT count(*) FROM selections), (SELECT count(*) FROM pins)";
// gc: the statements run in this order; rows are counted before and after, since cascaded
// deletes do not show in sqlite3_changes().
constexpr char kDeleteOtherToolchains[] = "DELETE FROM families WHERE toolchain <> ?";
constexpr char kDeleteUnreferencedObjects[] =
    "DELETE FROM objects WHERE sha256 NOT IN (SELECT object_sha256 FROM candidate_objects)";
constexpr char kDeleteUnreferencedSources[] =
    "DELETE FROM sources WHERE sha256 NOT IN (SELECT source_sha256 FROM objects)";
constexpr char kDeleteEmptyFamilies[] =
    "DELETE FROM families WHERE id NOT IN (SELECT family_id FROM candidates) "
    "AND id NOT IN (SELECT family_id FROM runs) AND id NOT IN (SELECT family_id FROM pins) "
    "AND id NOT IN (SELECT family_id FROM misses)";
constexpr char kCountAllRows[] =
    "SELECT (SELECT count(*) FROM sources) + (SELECT count(*) FROM objects) + "
    "(SELECT count(*) FROM families) + (SELECT count(*) FROM candidates) + "
    "(SELECT count(*) FROM candidate_objects) + (SELECT count(*) FROM runs) + "
    "(SELECT count(*) FROM timings) + (SELECT count(*) FROM selections) + "
    "(SELECT count(*) FROM pins) + (SELECT count(*) FROM misses)";

Expected<int64_t> countAllRows(sql::Database& db) {
  ASSIGN_OR_RETURN(sql::Statement count, db.prepare(kCountAllRows));
  ASSIGN_OR_RETURN(bool row, count.step());
  return row ? count.int64(0) : 0;
}

}  // namespace

std::string utcNow() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

Expected<std::unique_ptr<KernelDb>> KernelDb::open(const std::string& path, OpenMode mode) {
  bool readOnly = mode == OpenMode::ReadOnly;
  std::error_code ec;
  if (readOnly && !std::filesystem::exists(path, ec))
    return Status::error("cannot open " + path + " read-only: no such file");
  ASSIGN_OR_RETURN(std::unique_ptr<sql::Database> database, sql::Database::open(path, readOnly));
  ASSIGN_OR_RETURN(int version, openSchema(*database));
  return std::unique_ptr<KernelDb>(new KernelDb(std::move(database), version));
}

KernelDb::KernelDb(std::unique_ptr<sql::Database> database, int schemaVersion)
    : path_(database->path()),
      db_(database->handle()),
      readOnly_(database->readOnly()),
      database_(std::move(database)),
      schemaVersion_(schemaVersion) {}

KernelDb::~KernelDb() = default;

int KernelDb::schemaVersion() const { return schemaVersion_; }

Status KernelDb::requireWritable() const {
  if (!readOnly_) return Status::ok();
  return Status::error(path_ + " is open read-only (a replica): writes go to the writer");
}

Expected<std::string> KernelDb::putSource(std::string_view name, std::string_view text) {
  RETURN_IF_ERROR(requireWritable());
  sql::Transaction transaction(*database_);
  RETURN_IF_ERROR(transaction.begin());
  ASSIGN_OR_RETURN(std::string sha, rows::insertSource(*database_, name, text));
  RETURN_IF_ERROR(transaction.commit());
  return sha;
}

Expected<std::optional<std::string>> KernelDb::source(const std::string& sha256) {
  ASSIGN_OR_RETURN(sql::Statement select, database_->prepare(kSelectSource));
  select.bind(1, sha256);
  ASSIGN_OR_RETURN(bool row, select.step());
  if (!row) return std::optional<std::string>();
  std::string text = select.text(0);
  if (sha256Hex(text) != sha256)
    return Status::error("source " + sha256 + " in " + path_ + " is corrupt: its text hashes to " +
                         sha256Hex(text));
  return std::optional<std::string>(std::move(text));
}

Expected<bool> KernelDb::hasObject(const std::string& sha256) {
  return rows::objectExists(*database_, sha256);
}

Status KernelDb::putObject(const CodeObject& object) {
  RETURN_IF_ERROR(requireWritable());
  sql::Transaction transaction(*database_);
  RETURN_IF_ERROR(transaction.begin());
  RETURN_IF_ERROR(rows::insertObject(*database_, object));
  return transaction.commit();
}

Expected<CodeObject> KernelDb::object(const std::string& sha256) {
  return rows::readObject(*database_, sha256);
}

Expected<std::optional<CodeObject>> KernelDb::findObject(const std::string& sourceHash, const std::string& kernel,
                                                         const std::string& target, const std::string& config,
                                                         const std::string& toolchain) {
  ASSIGN_OR_RETURN(sql::Statement select,
                   database_->prepare("SELECT sha256 FROM objects WHERE source_sha256 = ? AND kernel = ? AND "
                                      "target = ? AND config = ? AND toolchain = ? ORDER BY sha256 LIMIT 1"));
  select.bind(1, sourceHash).bind(2, kernel).bind(3, target).bind(4, config).bind(5, toolchain);
  ASSIGN_OR_RETURN(bool row, select.step());
  if (!row) return std::optional<CodeObject>();
  std::string sha = select.text(0);
  ASSIGN_OR_RETURN(CodeObject found, rows::readObject(*database_, sha));
  return std::optional<CodeObject>(std::move(found));
}

Status KernelDb::putCandidates(const std::vector<Candidate>& candidates) {
  RETURN_IF_ERROR(requireWritable());
  sql::Transaction transaction(*database_);
  RETURN_IF_ERROR(transaction.begin());
  for (const Candidate& candidate : candidates)
    RETURN_IF_ERROR(rows::insertCandidate(*database_, candidate, /*keepExisting=*/false));
  return transaction.commit();
}

Expected<std::vector<Candidate>> KernelDb::candidates(const FamilyKey& family) {
  sql::Transaction transaction(*database_, sql::Transaction::Kind::Read);
  RETURN_IF_ERROR(transaction.begin());
  ASSIGN_OR_RETURN(std::optional<int64_t> id, rows::familyId(*database_, family, false));
  if (!id) return std::vector<Candidate>();
  return rows::readCandidates(*database_, *id, family);
}

Expected<std::vector<FamilyKey>> KernelDb::families() {
  ASSIGN_OR_RETURN(auto families, rows::allFamilies(*database_));
  std::vector<FamilyKey> keys;
  for (auto& [id, family] : families) keys.push_back(std::move(family));
  return keys;
}

Status KernelDb::recordTuning(TuningRun& run) {
  RETURN_IF_ERROR(requireWritable());
  sql::Transaction transaction(*database_);
  RETURN_IF_ERROR(transaction.begin());
  RETURN_IF_ERROR(rows::insertRun(*database_, run, rows::MakeCurrent::Always).status());
  return transaction.commit();
}

Expected<std::optional<Selection>> KernelDb::selection(const Key& key) {
  sql::Transaction transaction(*database_, sql::Transaction::Kind::Read);
  RETURN_IF_ERROR(transaction.begin());
  ASSIGN_OR_RETURN(std::optional<int64_t> id, rows::familyId(*database_, key.family, false));
  if (!id) return std::optional<Selection>();
  return rows::readSelection(*database_, *id, key);
}

Expected<std::vector<Selection>> KernelDb::selections(const FamilyKey& family) {
  ASSIGN_OR_RETURN(std::vector<KeyEntry> entries, list({}));
  std::vector<Selection> result;
  for (KeyEntry& entry : entries)
    if (entry.key.family == family && entry.selection) result.push_back(std::move(*entry.selection));
  return result;
}

Expected<std::vector<PlanTiming>> KernelDb::timings(const Key& key) {
  sql::Transaction transaction(*database_, sql::Transaction::Kind::Read);
  RETURN_IF_ERROR(transaction.begin());
  ASSIGN_OR_RETURN(std::optional<int64_t> id, rows::familyId(*database_, key.family, false));
  if (!id) return Status::error(formatKey(key) + " was never tuned in " + path_);
  ASSIGN_OR_RETURN(std::optional<Selection> selection, rows::readSelection(*database_, *id, key));
  if (!selection) return Status::error(formatKey(key) + " was never tuned in " + path_);
  return rows::readTimings(*database_, selection->runId);
}

Status KernelDb::pin(const Pin& pin) {
  RETURN_IF_ERROR(requireWritable());
  if (pin.planId.empty()) return Status::error("pin of " + formatKey(pin.key) + " names no plan");
  sql::Transaction transaction(*database_);
  RETURN_IF_ERROR(transaction.begin());
  ASSIGN_OR_RETURN(std::optional<int64_t> id, rows::familyId(*database_, pin.key.family, true));
  RETURN_IF_ERROR(rows::upsertPin(*database_, *id, pin, /*keepNewer=*/false));
  return transaction.commit();
}

Status KernelDb::unpin(const Key& key) {
  RETURN_IF_ERROR(requireWritable());
  sql::Transaction transaction(*database_);
  RETURN_IF_ERROR(transaction.begin());
  ASSIGN_OR_RETURN(std::optional<int64_t> id, rows::familyId(*database_, key.family, false));
  int64_t removed = 0;
  if (id) {
    ASSIGN_OR_RETURN(sql::Statement remove, database_->prepare(kDeletePin));
    remove.bind(1, *id).bind(2, key.rows);
    RETURN_IF_ERROR(remove.run());
    removed = database_->changes();
  }
  if (removed == 0) return Status::error(formatKey(key) + " has no pin in " + path_);
  return transaction.commit();
}

Expected<std::optional<Pin>> KernelDb::pinFor(const Key& key, const std::string& now) {
  sql::Transaction transaction(*database_, sql::Transaction::Kind::Read);
  RETURN_IF_ERROR(transaction.begin());
  ASSIGN_OR_RETURN(std::optional<int64_t> id, rows::familyId(*database_, key.family, false));
  if (!id) return std::optional<Pin>();
  ASSIGN_OR_RETURN(std::optional<Pin> pin, rows::readPin(*database_, *id, key));
  // ISO 8601 UTC strings of one format order as their times do.
  std::string at = now.empty() ? utcNow() : now;
  if (pin && pin->expiresAt && *pin->expiresAt <= at) return std::optional<Pin>();
  return pin;
}

Status KernelDb::recordMiss(const Key& key, std::string_view answeredBy) {
  RETURN_IF_ERROR(requireWritable());
  if (answeredBy != "nearest" && answeredBy != "default")
    return Status::error("a miss of " + formatKey(key) + " is answered by 'nearest' or " +
                         "'default', not '" + std::string(answeredBy) + "'");
  sql::Transaction transaction(*database_);
  RETURN_IF_ERROR(transaction.begin());
  ASSIGN_OR_RETURN(std::optional<int64_t> id, rows::familyId(*database_, key.family, true));
  std::string now = utcNow();
  RETURN_IF_ERROR(rows::addMiss(*database_, *id, Miss{key, std::string(answeredBy), 1, now, now},
                                /*takeMaxCount=*/false));
  return transaction.commit();
}

Expected<std::vector<Miss>> KernelDb::misses() { return rows::readMisses(*database_); }

Expected<std::vector<KeyEntry>> KernelDb::list(const ListFilter& filter) {
  sql::Transaction transaction(*database_, sql::Transaction::Kind::Read);
  RETURN_IF_ERROR(transaction.begin());
  ASSIGN_OR_RETURN(sql::Statement select, database_->prepare(kListKeys));
  select.bind(1, filter.op).bind(2, filter.target).bind(3, filter.sizes);
  if (filter.rows) select.bind(4, *filter.rows);
  std::vector<std::pair<int64_t, Key>> keys;
  while (true) {
    ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    keys.push_back({select.int64(0), Key{FamilyKey{select.text(1), select.text(2), select.text(3),
                                                   select.text(4), select.text(5)},
                                         select.int64(6)}});
  }
  std::vector<KeyEntry> entries;
  for (auto& [id, key] : keys) {
    KeyEntry entry{key, std::nullopt, std::nullopt};
    ASSIGN_OR_RETURN(entry.selection, rows::readSelection(*database_, id, key));
    ASSIGN_OR_RETURN(entry.pin, rows::readPin(*database_, id, key));
    entries.push_back(std::move(entry));
  }
  return entries;
}

Expected<CheckReport> KernelDb::check() {
  CheckReport report;
  report.schemaVersion = schemaVersion_;
  sql::Transaction transaction(*database_, sql::Transaction::Kind::Read);
  RETURN_IF_ERROR(transaction.begin());
  ASSIGN_OR_RETURN(std::vector<std::string> integrity, database_->integrityCheck());
  if (!(integrity.size() == 1 && integrity[0] == "ok"))
    for (const std::string& line : integrity) report.problems.push_back("integrity: " + line);
  ASSIGN_OR_RETURN(std::vector<std::string> foreign, database_->foreignKeyCheck());
  for (const std::string& line : foreign) report.problems.push_back("foreign key: " + line);
  ASSIGN_OR_RETURN(sql::Statement counts, database_->prepare(kCountRows));
  ASSIGN_OR_RETURN(bool row, counts.step());
  if (row) {
    report.objects = counts.int64(0);
    report.candidates = counts.int64(1);
    report.selections = counts.int64(2);
    report.pins = counts.int64(3);
  }
  ASSIGN_OR_RETURN(sql::Statement hashes, database_->prepare(kSelectObjectHashes));
  while (true) {
    ASSIGN_OR_RETURN(bool next, hashes.step());
    if (!next) break;
    Expected<CodeObject> object = rows::readObject(*database_, hashes.text(0));
    if (!object.isOk()) report.problems.push_back(object.status().message());
  }
  return report;
}

Status KernelDb::snapshot(const std::string& dest) {
  // Into a temporary file renamed over `dest` at the end, so a reader of `dest` sees the old
  // copy or the new one, never a half-written file.
  std::string temporary = dest + ".partial";
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(temporary + suffix, ec);
  Status copied = database_->backupTo(temporary);
  if (copied.isOk()) {
    std::filesystem::rename(temporary, dest, ec);
    if (ec) copied = Status::error("cannot rename " + temporary + " to " + dest + ": " + ec.message());
  }
  if (!copied.isOk())
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(temporary + suffix, ec);
  return copied;
}

Expected<int64_t> KernelDb::gc(const std::string& keepToolchain) {
  RETURN_IF_ERROR(requireWritable());
  if (keepToolchain.empty()) return Status::error("gc of " + path_ + " needs a toolchain to keep");
  sql::Transaction transaction(*database_);
  RETURN_IF_ERROR(transaction.begin());
  ASSIGN_OR_RETURN(int64_t before, countAllRows(*database_));
  ASSIGN_OR_RETURN(sql::Statement families, database_->prepare(kDeleteOtherToolchains));
  families.bind(1, keepToolchain);
  RETURN_IF_ERROR(families.run());
  RETURN_IF_ERROR(database_->execute(kDeleteUnreferencedObjects));
  RETURN_IF_ERROR(database_->execute(kDeleteUnreferencedSources));
  RETURN_IF_ERROR(database_->execute(kDeleteEmptyFamilies));
  ASSIGN_OR_RETURN(int64_t after, countAllRows(*database_));
  RETURN_IF_ERROR(transaction.commit());
  return before - after;
}

}  // namespace mxfp6::autotune
