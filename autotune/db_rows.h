// The kernel database's row-level reads and writes, shared by db.cpp (the API, one transaction
// per call) and db_transfer.cpp (merge, export, import: many rows in one transaction). None of
// these opens a transaction: the caller holds one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autotune/db.h"
#include "autotune/sqlite.h"

namespace mxfp6::autotune::rows {

/// The id of `family`; with `create`, inserts it when missing (else nullopt when missing).
Expected<std::optional<int64_t>> familyId(sql::Database& db, const FamilyKey& family,
                                          bool create);
/// Every family, ordered by its fields.
Expected<std::vector<std::pair<int64_t, FamilyKey>>> allFamilies(sql::Database& db);

Expected<std::string> insertSource(sql::Database& db, std::string_view name,
                                   std::string_view text);
/// Verifies the object's sha256 against its bytes, then stores it unless present.
Status insertObject(sql::Database& db, const CodeObject& object);
Expected<bool> objectExists(sql::Database& db, const std::string& sha256);
/// Reads and verifies an object (its bytes must hash to its sha256).
Expected<CodeObject> readObject(sql::Database& db, const std::string& sha256);

/// Replaces the candidate of the same planId in its family; its objects must be stored.
/// With `keepExisting`, a candidate already present is left as it is.
Status insertCandidate(sql::Database& db, const Candidate& candidate, bool keepExisting);
Expected<std::vector<Candidate>> readCandidates(sql::Database& db, int64_t familyId,
                                                const FamilyKey& family);

/// Whether a stored run becomes its key's current selection.
enum class MakeCurrent {
  Always,   // recordTuning: the latest run is the selection
  IfNewer,  // merge, import: when the key has none, or one tuned earlier
  Never,    // merge, import: a run of the history that was not the selection
};

/// Checks the run's selection (its winner passed the gate, its equivalence set was timed),
/// stores the run unless a run of the same content is stored, and returns its id.
Expected<int64_t> insertRun(sql::Database& db, TuningRun& run, MakeCurrent current);
Expected<std::optional<Selection>> readSelection(sql::Database& db, int64_t familyId,
                                                 const Key& key);
Expected<std::vector<PlanTiming>> readTimings(sql::Database& db, int64_t runId);
/// Every run of a family, oldest first (for export and merge).
Expected<std::vector<TuningRun>> readRuns(sql::Database& db, int64_t familyId,
                                          const FamilyKey& family);

/// Stores a pin; with `keepNewer`, an existing pin created later than `pin` stays.
Status upsertPin(sql::Database& db, int64_t familyId, const Pin& pin, bool keepNewer);
Expected<std::optional<Pin>> readPin(sql::Database& db, int64_t familyId, const Key& key);
Expected<std::vector<Pin>> readPins(sql::Database& db, int64_t familyId, const FamilyKey& family);

/// Adds `count` sightings of a miss (the first and last seen widen to include the given ones).
Status addMiss(sql::Database& db, int64_t familyId, const Miss& miss, bool takeMaxCount);
Expected<std::vector<Miss>> readMisses(sql::Database& db);

/// The samples as stored: little-endian IEEE doubles.
std::string packSamples(const std::vector<double>& samples);
std::vector<double> unpackSamples(const std::string& blob);

}  // namespace mxfp6::autotune::rows
