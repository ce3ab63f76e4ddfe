// Moving contents between kernel databases: merge (file to file, with code-object bytes) and
// export/import (JSON). Both go through one JSON document, so the two agree on what is copied
// and on the rules when both sides hold a key: what this file lacks is added, a key's selection
// is the newer of the two, a pin the newer of the two, a miss keeps its largest count.
#include <cstring>
#include <nlohmann/json.hpp>

#include "autotune/db.h"
#include "autotune/db_rows.h"
#include "autotune/sqlite.h"
#include "support/sha256.h"

namespace mxfp6::autotune {
namespace {

using nlohmann::json;

constexpr char kFormat[] = "mxfp6-kernel-db";
constexpr char kSelectSources[] = "SELECT sha256, name, text FROM sources ORDER BY sha256";
constexpr char kSelectObjectHashes[] = "SELECT sha256 FROM objects ORDER BY sha256";

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = uint8_t(bytes[i]) << 16 | uint8_t(bytes[i + 1]) << 8 | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kBase64[(v >> s) & 63]);
  }
  if (i < bytes.size()) {
    uint32_t v = uint8_t(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= uint8_t(bytes[i + 1]) << 8;
    out.push_back(kBase64[(v >> 18) & 63]);
    out.push_back(kBase64[(v >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kBase64[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::optional<std::string> base64Decode(std::string_view text) {
  std::string out;
  uint32_t v = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const char* p = std::strchr(kBase64, c);
    if (!p || c == '\0') return std::nullopt;
    v = v << 6 | uint32_t(p - kBase64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((v >> bits) & 0xff));
    }
  }
  return out;
}

json familyJson(const FamilyKey& f) {
  return {{"op", f.op}, {"variant", f.variant}, {"target", f.target}, {"sizes", f.sizes},
          {"toolchain", f.toolchain}};
}

FamilyKey familyFrom(const json& j) {
  return FamilyKey{j.at("op").get<std::string>(), j.at("variant").get<std::string>(),
                   j.at("target").get<std::string>(), j.at("sizes").get<std::string>(),
                   j.at("toolchain").get<std::string>()};
}

/// The whole of `db` as one document; code-object bytes only with `withBytes` (then verified).
Expected<json> dump(sql::Database& db, bool withBytes) {
  sql::Transaction transaction(db, sql::Transaction::Kind::Read);
  RETURN_IF_ERROR(transaction.begin());
  json doc = {{"format", kFormat}, {"schema_version", kSchemaVersion}};
  doc["sources"] = json::array();
  ASSIGN_OR_RETURN(sql::Statement sources, db.prepare(kSelectSources));
  while (true) {
    ASSIGN_OR_RETURN(bool row, sources.step());
    if (!row) break;
    doc["sources"].push_back(
        {{"sha256", sources.text(0)}, {"name", sources.text(1)}, {"text", sources.text(2)}});
  }
  doc["objects"] = json::array();
  ASSIGN_OR_RETURN(sql::Statement hashes, db.prepare(kSelectObjectHashes));
  while (true) {
    ASSIGN_OR_RETURN(bool row, hashes.step());
    if (!row) break;
    ASSIGN_OR_RETURN(CodeObject o, rows::readObject(db, hashes.text(0)));
    json object = {{"sha256", o.sha256},   {"kernel", o.kernel},       {"target", o.target},
                   {"format", o.format},   {"config", o.config},       {"source_sha256", o.sourceHash},
                   {"toolchain", o.toolchain}, {"metadata", o.metadata}};
    if (withBytes) object["bytes_base64"] = base64Encode(o.bytes);
    doc["objects"].push_back(std::move(object));
  }
  doc["families"] = json::array();
  ASSIGN_OR_RETURN(auto families, rows::allFamilies(db));
  for (const auto& [id, family] : families) {
    json f = familyJson(family);
    f["candidates"] = json::array();
    ASSIGN_OR_RETURN(std::vector<Candidate> candidates, rows::readCandidates(db, id, family));
    for (const Candidate& c : candidates)
      f["candidates"].push_back({{"plan_id", c.planId}, {"plan_json", c.planJson},
                                 {"objects", c.objects}, {"ordinal", c.ordinal},
                                 {"resource_cost", c.resourceCost}});
    f["runs"] = json::array();
    ASSIGN_OR_RETURN(std::vector<TuningRun> runs, rows::readRuns(db, id, family));
    for (const TuningRun& run : runs) {
      ASSIGN_OR_RETURN(std::optional<Selection> current, rows::readSelection(db, id, run.key));
      json timings = json::array();
      for (const PlanTiming& t : run.timings)
        timings.push_back({{"plan_id", t.planId}, {"passed_gate", t.passedGate},
                           {"gate_message", t.gateMessage}, {"samples_us", t.samplesUs}});
      const Selection& s = run.selection;
      f["runs"].push_back({{"rows", run.key.rows}, {"winner", s.winner},
                           {"equivalent", s.equivalent}, {"rule", s.rule},
                           {"tuned_at", s.tunedAt}, {"tuner", s.tuner},
                           {"current", current && current->runId == s.runId},
                           {"timings", std::move(timings)}});
    }
    f["pins"] = json::array();
    ASSIGN_OR_RETURN(std::vector<Pin> pins, rows::readPins(db, id, family));
    for (const Pin& p : pins)
      f["pins"].push_back({{"rows", p.key.rows}, {"plan_id", p.planId}, {"who", p.who},
                           {"why", p.why}, {"created_at", p.createdAt},
                           {"expires_at", p.expiresAt ? json(*p.expiresAt) : json(nullptr)}});
    doc["families"].push_back(std::move(f));
  }
  doc["misses"] = json::array();
  ASSIGN_OR_RETURN(std::vector<Miss> misses, rows::readMisses(db));
  for (const Miss& m : misses)
    doc["misses"].push_back({{"family", familyJson(m.key.family)}, {"rows", m.key.rows},
                             {"answered_by", m.answeredBy}, {"count", m.count},
                             {"first_seen", m.firstSeen}, {"last_seen", m.lastSeen}});
  return doc;
}

/// Adds `doc` to `db` under the merge rules; the caller holds the write transaction. Throws
/// nlohmann::json exceptions on a malformed document (load() turns them into a Status).
Status loadUnchecked(sql::Database& db, const json& doc) {
  if (doc.at("format").get<std::string>() != kFormat)
    return Status::error("not a kernel database export (format is not " + std::string(kFormat) +
                         ")");
  int version = doc.at("schema_version").get<int>();
  if (version > kSchemaVersion)
    return Status::error("the export's schema version " + std::to_string(version) +
                         " is newer than this build's " + std::to_string(kSchemaVersion));
  for (const json& s : doc.at("sources")) {
    ASSIGN_OR_RETURN(std::string sha, rows::insertSource(db, s.at("name").get<std::string>(),
                                                          s.at("text").get<std::string>()));
    if (sha != s.at("sha256").get<std::string>())
      return Status::error("source " + s.at("sha256").get<std::string>() +
                           " of the export is corrupt: its text hashes to " + sha);
  }
  std::vector<std::string> missing;
  for (const json& o : doc.at("objects")) {
    std::string sha = o.at("sha256").get<std::string>();
    if (!o.contains("bytes_base64")) {
      ASSIGN_OR_RETURN(bool stored, rows::objectExists(db, sha));
      if (!stored) missing.push_back(sha);
      continue;
    }
    std::optional<std::string> bytes = base64Decode(o.at("bytes_base64").get<std::string>());
    if (!bytes) return Status::error("code object " + sha + " of the export: bad base64");
    RETURN_IF_ERROR(rows::insertObject(
        db, CodeObject{sha, o.at("kernel").get<std::string>(), o.at("target").get<std::string>(),
                       o.at("format").get<std::string>(), o.at("config").get<std::string>(),
                       o.at("source_sha256").get<std::string>(),
                       o.at("toolchain").get<std::string>(), o.at("metadata").get<std::string>(),
                       std::move(*bytes)}));
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 5; ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > 5) list += ", ...";
    return Status::error(std::to_string(missing.size()) + " code objects of the export carry no "
                         "bytes and are not in " + db.path() + " (" + list +
                         "): export with their bytes, or merge the database that has them");
  }
  for (const json& f : doc.at("families")) {
    FamilyKey family = familyFrom(f);
    for (const json& c : f.at("candidates"))
      RETURN_IF_ERROR(rows::insertCandidate(
          db,
          Candidate{family, c.at("plan_id").get<std::string>(),
                    c.at("plan_json").get<std::string>(),
                    c.at("objects").get<std::vector<std::string>>(), c.at("ordinal").get<int>(),
                    c.at("resource_cost").get<double>()},
          /*keepExisting=*/true));
    for (const json& r : f.at("runs")) {
      TuningRun run;
      run.key = Key{family, r.at("rows").get<int64_t>()};
      for (const json& t : r.at("timings"))
        run.timings.push_back(PlanTiming{t.at("plan_id").get<std::string>(),
                                         t.at("passed_gate").get<bool>(),
                                         t.at("gate_message").get<std::string>(),
                                         t.at("samples_us").get<std::vector<double>>()});
      run.selection = Selection{run.key,
                                r.at("winner").get<std::string>(),
                                r.at("equivalent").get<std::vector<std::string>>(),
                                r.at("rule").get<std::string>(),
                                r.at("tuned_at").get<std::string>(),
                                r.at("tuner").get<std::string>(),
                                0};
      auto current = r.at("current").get<bool>() ? rows::MakeCurrent::IfNewer
                                                 : rows::MakeCurrent::Never;
      RETURN_IF_ERROR(rows::insertRun(db, run, current).status());
    }
    if (!f.at("pins").empty()) {
      ASSIGN_OR_RETURN(std::optional<int64_t> id, rows::familyId(db, family, true));
      for (const json& p : f.at("pins")) {
        Pin pin{Key{family, p.at("rows").get<int64_t>()}, p.at("plan_id").get<std::string>(),
                p.at("who").get<std::string>(), p.at("why").get<std::string>(),
                p.at("created_at").get<std::string>(), std::nullopt};
        if (!p.at("expires_at").is_null()) pin.expiresAt = p.at("expires_at").get<std::string>();
        RETURN_IF_ERROR(rows::upsertPin(db, *id, pin, /*keepNewer=*/true));
      }
    }
  }
  for (const json& m : doc.at("misses")) {
    FamilyKey family = familyFrom(m.at("family"));
    ASSIGN_OR_RETURN(std::optional<int64_t> id, rows::familyId(db, family, true));
    Miss miss{Key{family, m.at("rows").get<int64_t>()}, m.at("answered_by").get<std::string>(),
              m.at("count").get<int64_t>(), m.at("first_seen").get<std::string>(),
              m.at("last_seen").get<std::string>()};
    RETURN_IF_ERROR(rows::addMiss(db, *id, miss, /*takeMaxCount=*/true));
  }
  return Status::ok();
}

Status load(sql::Database& db, const json& doc, const std::string& from) {
  sql::Transaction transaction(db);
  RETURN_IF_ERROR(transaction.begin());
  try {
    Status status = loadUnchecked(db, doc);
    if (!status.isOk()) return Status::error("importing " + from + " into " + db.path() + ": " +
                                             status.message());
  } catch (const json::exception& e) {
    return Status::error("importing " + from + " into " + db.path() +
                         ": malformed export: " + e.what());
  }
  return transaction.commit();
}

}  // namespace

Status KernelDb::merge(KernelDb& other) {
  RETURN_IF_ERROR(requireWritable());
  // The whole of `other` passes through memory, bytes included: shard databases are small
  // next to the memory of the machines that merge them.
  Expected<json> doc = [&]() -> Expected<json> {
    try {
      return dump(*other.database_, /*withBytes=*/true);
    } catch (const json::exception& e) {
      return Status::error("reading " + other.path() + ": " + e.what());
    }
  }();
  if (!doc.isOk()) return doc.status();
  return load(*database_, *doc, other.path());
}

Expected<std::string> KernelDb::exportJson() { return exportJson(false); }

Expected<std::string> KernelDb::exportJson(bool includeObjectBytes) {
  try {
    ASSIGN_OR_RETURN(json doc, dump(*database_, includeObjectBytes));
    return doc.dump(1);
  } catch (const json::exception& e) {
    return Status::error("exporting " + path_ + ": " + e.what());
  }
}

Status KernelDb::importJson(std::string_view text) {
  RETURN_IF_ERROR(requireWritable());
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    return Status::error("importing into " + path_ + ": the input is not JSON");
  return load(*database_, doc, "JSON");
}

}  // namespace mxfp6::autotune
