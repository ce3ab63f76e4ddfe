#include "autotune/db_rows.h"

#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "support/sha256.h"

namespace mxfp6::autotune::rows {
namespace {

using nlohmann::json;

constexpr char kSelectFamilyId[] =
    "SELECT id FROM families "
    "WHERE op = ? AND variant = ? AND target = ? AND sizes = ? AND toolchain = ?";
constexpr char kInsertFamily[] =
    "INSERT INTO families(op, variant, target, sizes, toolchain) VALUES(?, ?, ?, ?, ?)";
constexpr char kSelectFamilies[] =
    "SELECT id, op, variant, target, sizes, toolchain FROM families "
    "ORDER BY op, variant, target, sizes, toolchain";

constexpr char kInsertSource[] =
    "INSERT INTO sources(sha256, name, text) VALUES(?, ?, ?) ON CONFLICT(sha256) DO NOTHING";

constexpr char kInsertObject[] =
    "INSERT INTO objects(sha256, kernel, target, format, config, source_sha256, toolchain, "
    "metadata, bytes) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(sha256) DO NOTHING";
constexpr char kObjectExists[] = "SELECT count(*) FROM objects WHERE sha256 = ?";
constexpr char kSelectObject[] =
    "SELECT sha256, kernel, target, format, config, source_sha256, toolchain, metadata, bytes "
    "FROM objects WHERE sha256 = ?";

constexpr char kCandidateExists[] =
    "SELECT count(*) FROM candidates WHERE family_id = ? AND plan_id = ?";
constexpr char kDeleteCandidate[] = "DELETE FROM candidates WHERE family_id = ? AND plan_id = ?";
constexpr char kInsertCandidate[] =
    "INSERT INTO candidates(family_id, plan_id, plan_json, ordinal, resource_cost) "
    "VALUES(?, ?, ?, ?, ?)";
constexpr char kInsertCandidateObject[] =
    "INSERT INTO candidate_objects(family_id, plan_id, position, object_sha256) "
    "VALUES(?, ?, ?, ?)";
constexpr char kSelectCandidates[] =
    "SELECT plan_id, plan_json, ordinal, resource_cost FROM candidates WHERE family_id = ? "
    "ORDER BY ordinal, plan_id";
constexpr char kSelectCandidateObjects[] =
    "SELECT object_sha256 FROM candidate_objects WHERE family_id = ? AND plan_id = ? "
    "ORDER BY position";

constexpr char kSelectRunByUid[] = "SELECT id FROM runs WHERE uid = ?";
constexpr char kInsertRun[] =
    "INSERT INTO runs(uid, family_id, rows, winner, equivalent, rule, tuned_at, tuner) "
    "VALUES(?, ?, ?, ?, ?, ?, ?, ?)";
constexpr char kInsertTiming[] =
    "INSERT INTO timings(run_id, position, plan_id, passed_gate, gate_message, samples_us) "
    "VALUES(?, ?, ?, ?, ?, ?)";
constexpr char kSelectCurrentTunedAt[] =
    "SELECT r.tuned_at FROM selections AS s JOIN runs AS r ON r.id = s.run_id "
    "WHERE s.family_id = ? AND s.rows = ?";
constexpr char kUpsertSelection[] =
    "INSERT INTO selections(family_id, rows, run_id) VALUES(?, ?, ?) "
    "ON CONFLICT(family_id, rows) DO UPDATE SET run_id = excluded.run_id";
constexpr char kSelectSelection[] =
    "SELECT r.id, r.winner, r.equivalent, r.rule, r.tuned_at, r.tuner "
    "FROM selections AS s JOIN runs AS r ON r.id = s.run_id "
    "WHERE s.family_id = ? AND s.rows = ?";
constexpr char kSelectTimings[] =
    "SELECT plan_id, passed_gate, gate_message, samples_us FROM timings WHERE run_id = ? "
    "ORDER BY position";
constexpr char kSelectRuns[] =
    "SELECT id, rows, winner, equivalent, rule, tuned_at, tuner FROM runs WHERE family_id = ? "
    "ORDER BY rows, tuned_at, id";

constexpr char kSelectPinCreatedAt[] =
    "SELECT created_at FROM pins WHERE family_id = ? AND rows = ?";
constexpr char kUpsertPin[] =
    "INSERT INTO pins(family_id, rows, plan_id, who, why, created_at, expires_at) "
    "VALUES(?, ?, ?, ?, ?, ?, ?) ON CONFLICT(family_id, rows) DO UPDATE SET "
    "plan_id = excluded.plan_id, who = excluded.who, why = excluded.why, "
    "created_at = excluded.created_at, expires_at = excluded.expires_at";
constexpr char kSelectPin[] =
    "SELECT plan_id, who, why, created_at, expires_at FROM pins WHERE family_id = ? AND rows = ?";
constexpr char kSelectPins[] =
    "SELECT rows, plan_id, who, why, created_at, expires_at FROM pins WHERE family_id = ? "
    "ORDER BY rows";

constexpr char kAddMiss[] =
    "INSERT INTO misses(family_id, rows, answered_by, count, first_seen, last_seen) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(family_id, rows, answered_by) DO UPDATE SET "
    "count = CASE WHEN ?7 THEN max(count, excluded.count) ELSE count + excluded.count END, "
    "first_seen = min(first_seen, excluded.first_seen), "
    "last_seen = max(last_seen, excluded.last_seen)";
constexpr char kSelectMisses[] =
    "SELECT f.op, f.variant, f.target, f.sizes, f.toolchain, m.rows, m.answered_by, m.count, "
    "m.first_seen, m.last_seen FROM misses AS m JOIN families AS f ON f.id = m.family_id "
    "ORDER BY m.count DESC, f.op, f.variant, f.target, f.sizes, f.toolchain, m.rows, "
    "m.answered_by";

void bindFamilyFields(sql::Statement& statement, const FamilyKey& family) {
  statement.bind(1, family.op)
      .bind(2, family.variant)
      .bind(3, family.target)
      .bind(4, family.sizes)
      .bind(5, family.toolchain);
}

/// The equivalence set is stored as a JSON array of planIds.
Expected<std::vector<std::string>> parseEquivalent(sql::Database& db, const std::string& text) {
  try {
    return json::parse(text).get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    return Status::error("a run's equivalence set in " + db.path() + " is not a JSON list: " +
                         e.what());
  }
}

/// A run is identified by its content, so the same run merged or imported twice is stored once.
std::string runUid(const TuningRun& run) {
  const FamilyKey& f = run.key.family;
  json content = {{"key", {f.op, f.variant, f.target, f.sizes, f.toolchain, run.key.rows}},
                  {"winner", run.selection.winner},
                  {"equivalent", run.selection.equivalent},
                  {"rule", run.selection.rule},
                  {"tuned_at", run.selection.tunedAt},
                  {"tuner", run.selection.tuner}};
  for (const PlanTiming& t : run.timings)
    content["timings"].push_back({t.planId, t.passedGate, t.gateMessage, t.samplesUs});
  return sha256Hex(content.dump());
}

/// What a run must satisfy before it can be a key's selection (docs/architecture.md, "Tuning": a winner
/// passed the correctness gate on this shape).
Status checkRun(const TuningRun& run) {
  std::string key = formatKey(run.key);
  if (run.selection.key != run.key)
    return Status::error("tuning run of " + key + ": its selection is for " +
                         formatKey(run.selection.key));
  std::set<std::string> timed, passed;
  for (const PlanTiming& t : run.timings) {
    if (!timed.insert(t.planId).second)
      return Status::error("tuning run of " + key + ": plan " + t.planId + " is timed twice");
    if (t.passedGate) passed.insert(t.planId);
  }
  const std::string& winner = run.selection.winner;
  if (!timed.count(winner))
    return Status::error("tuning run of " + key + ": winner '" + winner + "' was not timed");
  if (!passed.count(winner))
    return Status::error("tuning run of " + key + ": winner " + winner +
                         " did not pass the correctness gate");
  for (const std::string& plan : run.selection.equivalent)
    if (!passed.count(plan))
      return Status::error("tuning run of " + key + ": equivalent plan " + plan +
                           " was not timed or did not pass the gate");
  return Status::ok();
}

Selection selectionFromRow(sql::Statement& row, const Key& key, std::vector<std::string> equiv) {
  Selection selection;
  selection.key = key;
  selection.runId = row.int64(0);
  selection.winner = row.text(1);
  selection.equivalent = std::move(equiv);
  selection.rule = row.text(3);
  selection.tunedAt = row.text(4);
  selection.tuner = row.text(5);
  return selection;
}

}  // namespace

std::string packSamples(const std::vector<double>& samples) {
  static_assert(std::endian::native == std::endian::little,
                "samples are stored as the host's doubles; a big-endian host must swap them");
  std::string blob(samples.size() * sizeof(double), '\0');
  if (!samples.empty()) std::memcpy(blob.data(), samples.data(), blob.size());
  return blob;
}

std::vector<double> unpackSamples(const std::string& blob) {
  std::vector<double> samples(blob.size() / sizeof(double));
  if (!samples.empty()) std::memcpy(samples.data(), blob.data(), samples.size() * sizeof(double));
  return samples;
}

Expected<std::optional<int64_t>> familyId(sql::Database& db, const FamilyKey& family,
                                          bool create) {
  ASSIGN_OR_RETURN(sql::Statement select, db.prepare(kSelectFamilyId));
  bindFamilyFields(select, family);
  ASSIGN_OR_RETURN(bool found, select.step());
  if (found) return std::optional<int64_t>(select.int64(0));
  if (!create) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(sql::Statement insert, db.prepare(kInsertFamily));
  bindFamilyFields(insert, family);
  RETURN_IF_ERROR(insert.run());
  return std::optional<int64_t>(db.lastInsertRowId());
}

Expected<std::vector<std::pair<int64_t, FamilyKey>>> allFamilies(sql::Database& db) {
  ASSIGN_OR_RETURN(sql::Statement select, db.prepare(kSelectFamilies));
  std::vector<std::pair<int64_t, FamilyKey>> families;
  while (true) {
    ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    families.push_back({select.int64(0), FamilyKey{select.text(1), select.text(2), select.text(3),
                                                   select.text(4), select.text(5)}});
  }
  return families;
}

Expected<std::string> insertSource(sql::Database& db, std::string_view name,
                                   std::string_view text) {
  std::string sha = sha256Hex(text);
  ASSIGN_OR_RETURN(sql::Statement insert, db.prepare(kInsertSource));
  insert.bind(1, sha).bind(2, name).bind(3, text);
  RETURN_IF_ERROR(insert.run());
  return sha;
}

Status insertObject(sql::Database& db, const CodeObject& object) {
  std::string actual = sha256Hex(object.bytes);
  if (actual != object.sha256)
    return Status::error("code object " + object.sha256 + " (kernel " + object.kernel +
                         ") refused by " + db.path() + ": its bytes hash to " + actual);
  ASSIGN_OR_RETURN(sql::Statement insert, db.prepare(kInsertObject));
  insert.bind(1, object.sha256)
      .bind(2, object.kernel)
      .bind(3, object.target)
      .bind(4, object.format)
      .bind(5, object.config)
      .bind(6, object.sourceHash)
      .bind(7, object.toolchain)
      .bind(8, object.metadata)
      .bindBlob(9, object.bytes);
  return insert.run();
}

Expected<bool> objectExists(sql::Database& db, const std::string& sha256) {
  ASSIGN_OR_RETURN(sql::Statement select, db.prepare(kObjectExists));
  select.bind(1, sha256);
  ASSIGN_OR_RETURN(bool row, select.step());
  return row && select.int64(0) > 0;
}

Expected<CodeObject> readObject(sql::Database& db, const std::string& sha256) {
  ASSIGN_OR_RETURN(sql::Statement select, db.prepare(kSelectObject));
  select.bind(1, sha256);
  ASSIGN_OR_RETURN(bool row, select.step());
  if (!row) return Status::error("no code object " + sha256 + " in " + db.path());
  CodeObject object{select.text(0), select.text(1), select.text(2),
                    select.text(3), select.text(4), select.text(5),
                    select.text(6), select.text(7), select.blob(8)};
  // Re-hashed on every read: a flipped bit on disk must be an error, never a kernel launched.
  std::string actual = sha256Hex(object.bytes);
  if (actual != sha256)
    return Status::error("code object " + sha256 + " in " + db.path() +
                         " is corrupt: its bytes hash to " + actual);
  return object;
}

Status insertCandidate(sql::Database& db, const Candidate& candidate, bool keepExisting) {
  for (const std::string& sha : candidate.objects) {
    ASSIGN_OR_RETURN(bool stored, objectExists(db, sha));
    if (!stored)
      return Status::error("candidate " + candidate.planId + " of " +
                           formatKey(Key{candidate.family, 0}) + " names code object " + sha +
                           ", which " + db.path() + " does not hold (store it first)");
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> family, familyId(db, candidate.family, true));
  if (keepExisting) {
    ASSIGN_OR_RETURN(sql::Statement exists, db.prepare(kCandidateExists));
    exists.bind(1, *family).bind(2, candidate.planId);
    ASSIGN_OR_RETURN(bool row, exists.step());
    if (row && exists.int64(0) > 0) return Status::ok();
  }
  // Delete then insert rather than INSERT OR REPLACE: the delete cascades to the old
  // candidate's object list.
  ASSIGN_OR_RETURN(sql::Statement remove, db.prepare(kDeleteCandidate));
  remove.bind(1, *family).bind(2, candidate.planId);
  RETURN_IF_ERROR(remove.run());
  ASSIGN_OR_RETURN(sql::Statement insert, db.prepare(kInsertCandidate));
  insert.bind(1, *family)
      .bind(2, candidate.planId)
      .bind(3, candidate.planJson)
      .bind(4, candidate.ordinal)
      .bind(5, candidate.resourceCost);
  RETURN_IF_ERROR(insert.run());
  ASSIGN_OR_RETURN(sql::Statement insertObject, db.prepare(kInsertCandidateObject));
  for (size_t i = 0; i < candidate.objects.size(); ++i) {
    RETURN_IF_ERROR(insertObject.reset());
    insertObject.bind(1, *family).bind(2, candidate.planId).bind(3, int64_t(i)).bind(4,
        candidate.objects[i]);
    RETURN_IF_ERROR(insertObject.run());
  }
  return Status::ok();
}

Expected<std::vector<Candidate>> readCandidates(sql::Database& db, int64_t familyId,
                                                const FamilyKey& family) {
  ASSIGN_OR_RETURN(sql::Statement select, db.prepare(kSelectCandidates));
  ASSIGN_OR_RETURN(sql::Statement objects, db.prepare(kSelectCandidateObjects));
  select.bind(1, familyId);
  std::vector<Candidate> candidates;
  while (true) {
    ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    Candidate candidate;
    candidate.family = family;
    candidate.planId = select.text(0);
    candidate.planJson = select.text(1);
    candidate.ordinal = int(select.int64(2));
    candidate.resourceCost = select.real(3);
    RETURN_IF_ERROR(objects.reset());
    objects.bind(1, familyId).bind(2, candidate.planId);
    while (true) {
      ASSIGN_OR_RETURN(bool objectRow, objects.step());
      if (!objectRow) break;
      candidate.objects.push_back(objects.text(0));
    }
    candidates.push_back(std::move(candidate));
  }
  return candidates;
}

Expected<int64_t> insertRun(sql::Database& db, TuningRun& run, MakeCurrent current) {
  if (run.selection.key == Key{}) run.selection.key = run.key;
  if (run.selection.tunedAt.empty()) run.selection.tunedAt = utcNow();
  RETURN_IF_ERROR(checkRun(run));
  ASSIGN_OR_RETURN(std::optional<int64_t> family, familyId(db, run.key.family, true));
  std::string uid = runUid(run);

  ASSIGN_OR_RETURN(sql::Statement byUid, db.prepare(kSelectRunByUid));
  byUid.bind(1, uid);
  ASSIGN_OR_RETURN(bool known, byUid.step());
  int64_t runId = 0;
  if (known) {
    runId = byUid.int64(0);
  } else {
    ASSIGN_OR_RETURN(sql::Statement insert, db.prepare(kInsertRun));
    insert.bind(1, uid)
        .bind(2, *family)
        .bind(3, run.key.rows)
        .bind(4, run.selection.winner)
        .bind(5, json(run.selection.equivalent).dump())
        .bind(6, run.selection.rule)
        .bind(7, run.selection.tunedAt)
        .bind(8, run.selection.tuner);
    RETURN_IF_ERROR(insert.run());
    runId = db.lastInsertRowId();
    ASSIGN_OR_RETURN(sql::Statement timing, db.prepare(kInsertTiming));
    for (size_t i = 0; i < run.timings.size(); ++i) {
      const PlanTiming& t = run.timings[i];
      RETURN_IF_ERROR(timing.reset());
      timing.bind(1, runId)
          .bind(2, int64_t(i))
          .bind(3, t.planId)
          .bind(4, int64_t(t.passedGate))
          .bind(5, t.gateMessage)
          .bindBlob(6, packSamples(t.samplesUs));
      RETURN_IF_ERROR(timing.run());
    }
  }
  run.selection.runId = runId;

  bool becomesCurrent = current == MakeCurrent::Always;
  if (current == MakeCurrent::IfNewer) {
    ASSIGN_OR_RETURN(sql::Statement selected, db.prepare(kSelectCurrentTunedAt));
    selected.bind(1, *family).bind(2, run.key.rows);
    ASSIGN_OR_RETURN(bool has, selected.step());
    becomesCurrent = !has || selected.text(0) < run.selection.tunedAt;
  }
  if (becomesCurrent) {
    ASSIGN_OR_RETURN(sql::Statement upsert, db.prepare(kUpsertSelection));
    upsert.bind(1, *family).bind(2, run.key.rows).bind(3, runId);
    RETURN_IF_ERROR(upsert.run());
  }
  return runId;
}

Expected<std::optional<Selection>> readSelection(sql::Database& db, int64_t familyId,
                                                 const Key& key) {
  ASSIGN_OR_RETURN(sql::Statement select, db.prepare(kSelectSelection));
  select.bind(1, familyId).bind(2, key.rows);
  ASSIGN_OR_RETURN(bool row, select.step());
  if (!row) return std::optional<Selection>();
  ASSIGN_OR_RETURN(std::vector<std::string> equivalent, parseEquivalent(db, select.text(2)));
  return std::optional<Selection>(selectionFromRow(select, key, std::move(equivalent)));
}

Expected<std::vector<PlanTiming>> readTimings(sql::Database& db, int64_t runId) {
  ASSIGN_OR_RETURN(sql::Statement select, db.prepare(kSelectTimings));
  select.bind(1, runId);
  std::vector<PlanTiming> timings;
  while (true) {
    ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    timings.push_back(PlanTiming{select.text(0), select.int64(1) != 0, select.text(2),
                                 unpackSamples(select.blob(3))});
  }
  return timings;
}

Expected<std::vector<TuningRun>> readRuns(sql::Database& db, int64_t familyId,
                                          const FamilyKey& family) {
  ASSIGN_OR_RETURN(sql::Statement select, db.prepare(kSelectRuns));
  select.bind(1, familyId);
  std::vector<TuningRun> runs;
  while (true) {
    ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    TuningRun run;
    run.key = Key{family, select.int64(1)};
    ASSIGN_OR_RETURN(std::vector<std::string> equivalent, parseEquivalent(db, select.text(3)));
    run.selection.key = run.key;
    run.selection.runId = select.int64(0);
    run.selection.winner = select.text(2);
    run.selection.equivalent = std::move(equivalent);
    run.selection.rule = select.text(4);
    run.selection.tunedAt = select.text(5);
    run.selection.tuner = select.text(6);
    runs.push_back(std::move(run));
  }
  for (TuningRun& run : runs) {
    ASSIGN_OR_RETURN(run.timings, readTimings(db, run.selection.runId));
  }
  return runs;
}

Status upsertPin(sql::Database& db, int64_t familyId, const Pin& pin, bool keepNewer) {
  if (keepNewer) {
    ASSIGN_OR_RETURN(sql::Statement current, db.prepare(kSelectPinCreatedAt));
    current.bind(1, familyId).bind(2, pin.key.rows);
    ASSIGN_OR_RETURN(bool has, current.step());
    if (has && current.text(0) >= pin.createdAt) return Status::ok();
  }
  ASSIGN_OR_RETURN(sql::Statement upsert, db.prepare(kUpsertPin));
  upsert.bind(1, familyId)
      .bind(2, pin.key.rows)
      .bind(3, pin.planId)
      .bind(4, pin.who)
      .bind(5, pin.why)
      .bind(6, pin.createdAt.empty() ? utcNow() : pin.createdAt)
      .bind(7, pin.expiresAt);
  return upsert.run();
}

Expected<std::optional<Pin>> readPin(sql::Database& db, int64_t familyId, const Key& key) {
  ASSIGN_OR_RETURN(sql::Statement select, db.prepare(kSelectPin));
  select.bind(1, familyId).bind(2, key.rows);
  ASSIGN_OR_RETURN(bool row, select.step());
  if (!row) return std::optional<Pin>();
  return std::optional<Pin>(Pin{key, select.text(0), select.text(1), select.text(2),
                                select.text(3), select.optionalText(4)});
}

Expected<std::vector<Pin>> readPins(sql::Database& db, int64_t familyId, const FamilyKey& family) {
  ASSIGN_OR_RETURN(sql::Statement select, db.prepare(kSelectPins));
  select.bind(1, familyId);
  std::vector<Pin> pins;
  while (true) {
    ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    pins.push_back(Pin{Key{family, select.int64(0)}, select.text(1), select.text(2),
                       select.text(3), select.text(4), select.optionalText(5)});
  }
  return pins;
}

Status addMiss(sql::Database& db, int64_t familyId, const Miss& miss, bool takeMaxCount) {
  ASSIGN_OR_RETURN(sql::Statement upsert, db.prepare(kAddMiss));
  upsert.bind(1, familyId)
      .bind(2, miss.key.rows)
      .bind(3, miss.answeredBy)
      .bind(4, miss.count)
      .bind(5, miss.firstSeen)
      .bind(6, miss.lastSeen)
      .bind(7, int64_t(takeMaxCount));
  return upsert.run();
}

Expected<std::vector<Miss>> readMisses(sql::Database& db) {
  ASSIGN_OR_RETURN(sql::Statement select, db.prepare(kSelectMisses));
  std::vector<Miss> misses;
  while (true) {
    ASSIGN_OR_RETURN(bool row, select.step());
    if (!row) break;
    Miss miss;
    miss.key = Key{FamilyKey{select.text(0), select.text(1), select.text(2), select.text(3),
                             select.text(4)},
                   select.int64(5)};
    miss.answeredBy = select.text(6);
    miss.count = select.int64(7);
    miss.firstSeen = select.text(8);
    miss.lastSeen = select.text(9);
    misses.push_back(std::move(miss));
  }
  return misses;
}

}  // namespace mxfp6::autotune::rows
