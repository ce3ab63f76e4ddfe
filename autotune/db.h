// The kernel database: one SQLite file holding everything tuning has learned, so that no rank
// ever sweeps again (docs/architecture.md, "The kernel database").
//
// What it holds, each write one transaction:
//   - DSL sources by sha256, code objects content-addressed by sha256 (verified on every read)
//     with their launch metadata and provenance;
//   - per key family (FamilyKey), the candidate plans precompile compiled, each with the
//     sha256 of its code objects;
//   - per key (family + M), every tuning run: every timing sample of every candidate, the
//     equivalence set, the winner and the rule that picked it;
//   - pins (who, when, why, optional expiry), which override tuning and survive re-tuning;
//   - misses: keys resolution was asked for and could only answer by nearest shape or default.
//
// Concurrency: WAL; any number of readers; one writer (the server, or precompile/tune run
// directly on a file). A database opened read-only (a replica) refuses every write with an
// error that says so.
//
// Errors name the file: a file that is not SQLite, a SQLite file of another application, a
// schema newer than this build reads, a truncated or corrupt file are each a clear Status, never
// a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/key.h"
#include "support/status.h"

struct sqlite3;

namespace mxfp6::autotune {

namespace sql {
class Database;
}

/// The schema version this build writes. Older files are migrated on open (ReadWrite); newer
/// ones are refused.
inline constexpr int kSchemaVersion = 2;

enum class OpenMode {
  ReadWrite,  // create the file if missing, migrate an older schema
  ReadOnly,   // a replica or an inspection: no writes, no migration (an older schema is an error
              // that says to open it read-write once)
};

struct CodeObject {
  std::string sha256;      // of `bytes`, lower-case hex
  std::string kernel;      // the DSL kernel name
  std::string target;      // "sm_90", "gfx942", "gfx950"
  std::string format;      // "cubin", "ptx" or "hsaco"
  std::string config;      // canonical "K=V,..." the kernel was compiled with
  std::string sourceHash;  // sha256 of the DSL source it came from (see putSource)
  std::string toolchain;   // the fingerprint of the compiler that produced it
  std::string metadata;    // the launch metadata JSON (runtime/runtime.h)
  std::string bytes;       // the code object
};

/// One plan precompiled for a key family. `planId` is the plan's canonical text (ops/plan.h),
/// unique within the family; `planJson` the plan with its launches' code-object hashes.
struct Candidate {
  FamilyKey family;
  std::string planId;
  std::string planJson;
  std::vector<std::string> objects;  // sha256 of every code object the plan launches
  int ordinal = 0;                   // declaration order in the op's candidate list: 0 = default
  double resourceCost = 0;           // the selection rule's "least resource use" (lower wins)
};

/// One candidate's part of a tuning run.
struct PlanTiming {
  std::string planId;
  bool passedGate = false;       // its outputs matched the reference on this shape
  std::string gateMessage;       // why it failed, or the check's summary
  std::vector<double> samplesUs; // every timed repetition, in the order taken
};

/// The outcome of tuning one key.
struct Selection {
  Key key;
  std::string winner;                    // a planId
  std::vector<std::string> equivalent;   // the equivalence set, best median first
  std::string rule;                      // which rule picked the winner, in words
  std::string tunedAt;                   // UTC, ISO 8601
  std::string tuner;                     // what tuned it: program, device, shard
  int64_t runId = 0;
};

struct TuningRun {
  Key key;
  std::vector<PlanTiming> timings;
  Selection selection;
};

struct Pin {
  Key key;
  std::string planId;
  std::string who;
  std::string why;
  std::string createdAt;                 // UTC, ISO 8601 (filled by pin() when empty)
  std::optional<std::string> expiresAt;  // UTC, ISO 8601; an expired pin is ignored
};

struct Miss {
  Key key;
  std::string answeredBy;  // "nearest" or "default"
  int64_t count = 0;
  std::string firstSeen, lastSeen;
};

/// Filters of list(): empty fields match everything.
struct ListFilter {
  std::string op, target, sizes;
  std::optional<int64_t> rows;
};

/// One tuned or pinned key, as list() reports it.
struct KeyEntry {
  Key key;
  std::optional<Selection> selection;
  std::optional<Pin> pin;
};

struct CheckReport {
  int schemaVersion = 0;
  int64_t objects = 0, candidates = 0, selections = 0, pins = 0;
  std::vector<std::string> problems;  // empty: the file is sound
};

class KernelDb {
 public:
  static Expected<std::unique_ptr<KernelDb>> open(const std::string& path,
                                                  OpenMode mode = OpenMode::ReadWrite);
  ~KernelDb();
  KernelDb(const KernelDb&) = delete;
  KernelDb& operator=(const KernelDb&) = delete;

  const std::string& path() const { return path_; }
  bool readOnly() const { return readOnly_; }
  int schemaVersion() const;

  // Sources and code objects ---------------------------------------------------------------
  /// Stores a DSL source under its sha256 (returned); idempotent.
  Expected<std::string> putSource(std::string_view name, std::string_view text);
  Expected<std::optional<std::string>> source(const std::string& sha256);
  Expected<bool> hasObject(const std::string& sha256);
  /// Stores a code object; its sha256 must be that of its bytes. Idempotent.
  Status putObject(const CodeObject& object);
  /// Reads a code object and verifies its bytes against its sha256: "code object <sha> in
  /// <file> is corrupt: its bytes hash to <other>".
  Expected<CodeObject> object(const std::string& sha256);
  /// The object compiled from a source (by its sha256) for a kernel, target, config and
  /// toolchain, if one is stored: what a compile request can be answered with without compiling.
  Expected<std::optional<CodeObject>> findObject(const std::string& sourceHash, const std::string& kernel,
                                                 const std::string& target, const std::string& config,
                                                 const std::string& toolchain);

  // Candidates ------------------------------------------------------------------------------
  /// Adds (or replaces, by planId) candidates of their families, all in one transaction; every
  /// object they name must be stored.
  Status putCandidates(const std::vector<Candidate>& candidates);
  /// A family's candidates in ordinal order.
  Expected<std::vector<Candidate>> candidates(const FamilyKey& family);
  Expected<std::vector<FamilyKey>> families();

  // Tuning ----------------------------------------------------------------------------------
  /// Records a run (every sample, the selection) in one transaction; the run's selection
  /// becomes the key's current one. Fills selection.runId.
  Status recordTuning(TuningRun& run);
  Expected<std::optional<Selection>> selection(const Key& key);
  /// The current selection of every tuned M of a family, by rows ascending.
  Expected<std::vector<Selection>> selections(const FamilyKey& family);
  /// The timings of the key's current selection's run.
  Expected<std::vector<PlanTiming>> timings(const Key& key);

  // Pins ------------------------------------------------------------------------------------
  Status pin(const Pin& pin);
  /// Error when the key has no pin.
  Status unpin(const Key& key);
  /// The key's pin unless absent or expired (`now` UTC ISO 8601; empty = the current time).
  Expected<std::optional<Pin>> pinFor(const Key& key, const std::string& now = "");

  // Misses ----------------------------------------------------------------------------------
  Status recordMiss(const Key& key, std::string_view answeredBy);
  Expected<std::vector<Miss>> misses();

  // Whole-database operations -----------------------------------------------------------------
  /// Every key with a selection or a pin, by family then rows. Pins are reported as stored,
  /// expired ones included (their expiresAt says so); pinFor() is what resolution honours.
  Expected<std::vector<KeyEntry>> list(const ListFilter& filter = {});
  /// PRAGMA integrity_check, foreign keys, and every code object's sha256.
  Expected<CheckReport> check();
  /// Copies everything of `other` that this file lacks (objects, sources, candidates, tuning
  /// runs; a key's selection is the newer of the two). One transaction.
  Status merge(KernelDb& other);
  /// A consistent copy of the whole file at `dest` through SQLite's backup API (a replica).
  Status snapshot(const std::string& dest);
  /// Removes what belongs to other toolchain fingerprints than `keepToolchain`, and code
  /// objects and sources no candidate references. Returns how many rows went.
  Expected<int64_t> gc(const std::string& keepToolchain);
  /// Everything but code-object bytes, as JSON (sha256 and metadata kept), and back.
  Expected<std::string> exportJson();
  /// With `includeObjectBytes`, objects carry their bytes (base64), so the JSON alone rebuilds
  /// the file. importJson stores such objects after checking their sha256; an object without
  /// bytes must already be in this file, or the import fails naming it. One transaction.
  Expected<std::string> exportJson(bool includeObjectBytes);
  Status importJson(std::string_view json);

  sqlite3* handle() { return db_; }  // for tests that damage or inspect the file

 private:
  KernelDb(std::unique_ptr<sql::Database> database, int schemaVersion);
  /// The error every write returns on a read-only file.
  Status requireWritable() const;
  std::string path_;
  sqlite3* db_ = nullptr;
  bool readOnly_ = false;
  std::unique_ptr<sql::Database> database_;  // owns db_
  int schemaVersion_ = 0;
};

/// The current time, UTC, ISO 8601 to the second ("2026-12-07T12:30:00Z").
std::string utcNow();

}  // namespace mxfp6::autotune
