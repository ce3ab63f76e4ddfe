// mxfp6-db: inspect and maintain a kernel database (autotune/db.h) from the command line.
//
//   mxfp6-db list      --db DB [--op OP] [--target T] [--sizes S] [--rows M] [--json]
//   mxfp6-db show KEY  --db DB [--toolchain FP] [--json]
//   mxfp6-db why KEY   --db DB [--toolchain FP] [--json]
//   mxfp6-db diff DB1 DB2 [--json]
//   mxfp6-db merge     --db DEST SRC...
//   mxfp6-db export    --db DB [--json] [--with-bytes]
//   mxfp6-db import FILE --db DB          (FILE "-" reads stdin)
//   mxfp6-db gc        --db DB [--toolchain FP]
//   mxfp6-db check     --db DB [--json]
//   mxfp6-db snapshot DEST --db DB
//   mxfp6-db misses    --db DB [--json]
//
// KEY is formatKey's "op/variant/target/sizes/M". Exit codes: 0 ok; 1 a problem found, a key
// not found, or differences (diff, as diff(1)); 2 a usage error. Errors are one line on stderr.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "autotune/db.h"
#include "autotune/key_text.h"
#include "autotune/resolve.h"
#include "autotune/selection.h"

namespace mxfp6::autotune {
namespace {

using nlohmann::json;

constexpr int kOk = 0, kProblem = 1, kUsage = 2;

constexpr char kUsageText[] =
    "usage: mxfp6-db COMMAND --db DB [options]\n"
    "  list [--op OP] [--target T] [--sizes S] [--rows M]   tuned and pinned keys\n"
    "  show KEY [--toolchain FP]      a key's candidates, samples, selection and pin\n"
    "  why KEY [--toolchain FP]       which plan resolution gives the key, and why\n"
    "  diff DB1 DB2                   keys whose winner or pin differ, keys only in one\n"
    "  merge SRC...                   add what SRC files hold to --db\n"
    "  export [--json] [--with-bytes] everything as JSON on stdout\n"
    "  import FILE                    a JSON export (\"-\": stdin)\n"
    "  gc [--toolchain FP]            drop other toolchains and unreferenced objects\n"
    "  check                          schema, integrity, foreign keys, every sha256\n"
    "  snapshot DEST                  a consistent copy for a read-only replica\n"
    "  misses                         keys answered by nearest shape or default\n"
    "KEY is op/variant/target/sizes/M (variant and sizes may be empty). --json on listings.\n";

struct Args {
  std::string command;
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;  // --name value
  std::set<std::string> flags;                 // --json, --with-bytes
};

struct UsageError {
  std::string message;
};

int fail(int code, const std::string& message) {
  std::cerr << "mxfp6-db: error: " << message << "\n";
  if (code == kUsage) std::cerr << "run `mxfp6-db --help` for usage\n";
  return code;
}

Expected<Args> parseArgs(int argc, char** argv) {
  static const std::set<std::string> kValued = {"--db", "--op", "--target", "--sizes", "--rows",
                                                "--toolchain"};
  static const std::set<std::string> kFlags = {"--json", "--with-bytes"};
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (kValued.count(a)) {
      if (i + 1 >= argc) return Status::error(a + " needs a value");
      args.options[a] = argv[++i];
    } else if (kFlags.count(a)) {
      args.flags.insert(a);
    } else if (a.size() > 2 && a.rfind("--", 0) == 0) {
      return Status::error("unknown option " + a);
    } else if (args.command.empty()) {
      args.command = a;
    } else {
      args.positional.push_back(a);
    }
  }
  return args;
}

/// Left-aligned columns, two spaces apart; the header row first.
void printTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

std::string orDash(const std::string& s) { return s.empty() ? "-" : s; }

json keyJson(const Key& k) {
  return {{"op", k.family.op},       {"variant", k.family.variant}, {"target", k.family.target},
          {"sizes", k.family.sizes}, {"toolchain", k.family.toolchain}, {"rows", k.rows}};
}

json pinJson(const Pin& p) {
  return {{"plan", p.planId}, {"who", p.who}, {"why", p.why}, {"created_at", p.createdAt},
          {"expires_at", p.expiresAt ? json(*p.expiresAt) : json(nullptr)},
          {"expired", p.expiresAt && *p.expiresAt <= utcNow()}};
}

std::string pinText(const std::optional<Pin>& pin) {
  if (!pin) return "-";
  bool expired = pin->expiresAt && *pin->expiresAt <= utcNow();
  return (expired ? "expired: " : "pinned: ") + pin->planId;
}

Expected<std::unique_ptr<KernelDb>> openDb(const Args& args, OpenMode mode) {
  auto it = args.options.find("--db");
  if (it == args.options.end()) return Status::error("--db DB is required");
  return KernelDb::open(it->second, mode);
}

/// "op/variant/target/sizes/M" plus --toolchain, or the only toolchain the family has.
Expected<Key> parseKey(KernelDb& db, const std::string& text, const Args& args, bool& usage) {
  std::optional<std::string> toolchain;
  if (auto it = args.options.find("--toolchain"); it != args.options.end()) toolchain = it->second;
  KeyTextError error;
  auto key = parseKeyText(db, text, toolchain, error);
  usage = error.usage;
  return key;
}

int cmdList(KernelDb& db, const Args& args) {
  ListFilter filter;
  if (auto it = args.options.find("--op"); it != args.options.end()) filter.op = it->second;
  if (auto it = args.options.find("--target"); it != args.options.end()) filter.target = it->second;
  if (auto it = args.options.find("--sizes"); it != args.options.end()) filter.sizes = it->second;
  if (auto it = args.options.find("--rows"); it != args.options.end()) {
    try {
      filter.rows = std::stoll(it->second);
    } catch (const std::exception&) {
      return fail(kUsage, "--rows '" + it->second + "' is not an integer");
    }
  }
  auto entries = db.list(filter);
  if (!entries) return fail(kProblem, entries.status().message());
  if (args.flags.count("--json")) {
    json out = json::array();
    for (const KeyEntry& e : *entries)
      out.push_back({{"key", keyJson(e.key)},
                     {"winner", e.selection ? json(e.selection->winner) : json(nullptr)},
                     {"pin", e.pin ? pinJson(*e.pin) : json(nullptr)}});
    std::cout << out.dump(1) << "\n";
    return kOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"OP", "VARIANT", "TARGET", "SIZES", "M", "WINNER", "PIN"}};
  for (const KeyEntry& e : *entries)
    rows.push_back({e.key.family.op, orDash(e.key.family.variant), e.key.family.target,
                    orDash(e.key.family.sizes), std::to_string(e.key.rows),
                    e.selection ? e.selection->winner : "-", pinText(e.pin)});
  printTable(rows);
  return kOk;
}

struct Spread {
  double median = 0, min = 0, max = 0;
};

Spread spreadOf(const std::vector<double>& samples) {
  if (samples.empty()) return {};
  auto [min, max] = std::minmax_element(samples.begin(), samples.end());
  return {median(samples), *min, *max};  // the selection rule's median (autotune/selection.h)
}

std::string fixed(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", v);
  return text;
}

int cmdShow(KernelDb& db, const Args& args) {
  if (args.positional.size() != 1) return fail(kUsage, "show takes one KEY");
  bool usage = false;
  auto key = parseKey(db, args.positional[0], args, usage);
  if (!key) return fail(usage ? kUsage : kProblem, key.status().message());
  auto candidates = db.candidates(key->family);
  auto selection = db.selection(*key);
  auto pin = db.pinFor(*key, "0000");  // as stored: expiry is shown, not applied
  if (!candidates) return fail(kProblem, candidates.status().message());
  if (!selection) return fail(kProblem, selection.status().message());
  if (!pin) return fail(kProblem, pin.status().message());
  if (!*selection && !*pin)
    return fail(kProblem, formatKey(*key) + " is neither tuned nor pinned in " + db.path());
  std::vector<PlanTiming> timings;
  if (*selection) {
    auto t = db.timings(*key);
    if (!t) return fail(kProblem, t.status().message());
    timings = t.take();
  }
  const Selection* sel = *selection ? &**selection : nullptr;
  auto timingOf = [&](const std::string& plan) -> const PlanTiming* {
    for (const PlanTiming& t : timings)
      if (t.planId == plan) return &t;
    return nullptr;
  };
  auto equivalent = [&](const std::string& plan) {
    return sel && std::count(sel->equivalent.begin(), sel->equivalent.end(), plan) > 0;
  };
  // Every candidate, then plans timed in the run that are no longer candidates.
  std::vector<std::pair<std::string, int>> plans;
  for (const Candidate& c : *candidates) plans.push_back({c.planId, c.ordinal});
  for (const PlanTiming& t : timings)
    if (std::none_of(plans.begin(), plans.end(), [&](auto& p) { return p.first == t.planId; }))
      plans.push_back({t.planId, -1});

  if (args.flags.count("--json")) {
    json out = {{"key", keyJson(*key)}, {"candidates", json::array()}};
    for (auto& [plan, ordinal] : plans) {
      const PlanTiming* t = timingOf(plan);
      json c = {{"plan", plan}, {"ordinal", ordinal >= 0 ? json(ordinal) : json(nullptr)},
                {"equivalent", equivalent(plan)}, {"winner", sel && sel->winner == plan}};
      if (t) {
        Spread s = spreadOf(t->samplesUs);
        c["gate"] = {{"passed", t->passedGate}, {"message", t->gateMessage}};
        c["samples_us"] = t->samplesUs;
        c["median_us"] = s.median;
        c["min_us"] = s.min;
        c["max_us"] = s.max;
      }
      out["candidates"].push_back(std::move(c));
    }
    if (sel)
      out["selection"] = {{"winner", sel->winner}, {"equivalent", sel->equivalent},
                          {"rule", sel->rule},     {"tuned_at", sel->tunedAt},
                          {"tuner", sel->tuner},   {"run", sel->runId}};
    out["pin"] = *pin ? pinJson(**pin) : json(nullptr);
    std::cout << out.dump(1) << "\n";
    return kOk;
  }
  std::cout << "key        " << formatKey(*key) << "\n";
  std::cout << "toolchain  " << key->family.toolchain << "\n";
  if (sel) {
    std::cout << "winner     " << sel->winner << " (rule: " << sel->rule << ")\n";
    std::string equiv;
    for (const std::string& p : sel->equivalent) equiv += (equiv.empty() ? "" : ", ") + p;
    std::cout << "equivalent " << orDash(equiv) << "\n";
    std::cout << "tuned      " << sel->tunedAt << " by " << sel->tuner << " (run " << sel->runId
              << ")\n";
  } else {
    std::cout << "winner     - (not tuned)\n";
  }
  if (*pin) {
    const Pin& p = **pin;
    std::cout << "pin        " << p.planId << " by " << p.who << " at " << p.createdAt << ": "
              << p.why;
    if (p.expiresAt)
      std::cout << (*p.expiresAt <= utcNow() ? " (expired " : " (expires ") << *p.expiresAt << ")";
    std::cout << "\n";
  } else {
    std::cout << "pin        -\n";
  }
  std::cout << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"PLAN", "ORDINAL", "GATE", "N", "MEDIAN_US", "MIN_US", "MAX_US", "EQUIV", "GATE_MESSAGE"}};
  for (auto& [plan, ordinal] : plans) {
    const PlanTiming* t = timingOf(plan);
    std::string mark = sel && sel->winner == plan ? "winner" : (equivalent(plan) ? "yes" : "-");
    std::string ord = ordinal >= 0 ? std::to_string(ordinal) : "gone";
    if (!t) {
      rows.push_back({plan, ord, "-", "0", "-", "-", "-", mark, "not timed"});
      continue;
    }
    Spread s = spreadOf(t->samplesUs);
    rows.push_back({plan, ord, t->passedGate ? "pass" : "FAIL", std::to_string(t->samplesUs.size()),
                    fixed(s.median), fixed(s.min), fixed(s.max), mark, orDash(t->gateMessage)});
  }
  printTable(rows);
  return kOk;
}

int cmdWhy(KernelDb& db, const Args& args) {
  if (args.positional.size() != 1) return fail(kUsage, "why takes one KEY");
  bool usage = false;
  auto key = parseKey(db, args.positional[0], args, usage);
  if (!key) return fail(usage ? kUsage : kProblem, key.status().message());
  ResolveOptions options;
  options.recordMiss = false;
  options.withObjects = false;
  auto resolution = resolve(db, *key, options);
  if (!resolution) return fail(kProblem, resolution.status().message());
  if (args.flags.count("--json")) {
    std::cout << json{{"key", keyJson(*key)},
                      {"rule", ruleName(resolution->rule)},
                      {"from_rows", resolution->fromRows ? json(*resolution->fromRows) : json(nullptr)},
                      {"plan", resolution->plan.id()},
                      {"why", resolution->why}}
                     .dump(1)
              << "\n";
    return kOk;
  }
  std::cout << formatKey(*key) << ": " << ruleName(resolution->rule) << ": "
            << resolution->plan.id() << "\n  " << resolution->why << "\n";
  return kOk;
}

int cmdDiff(const Args& args) {
  if (args.positional.size() != 2) return fail(kUsage, "diff takes two databases: DB1 DB2");
  std::map<Key, KeyEntry> sides[2];
  for (int i = 0; i < 2; ++i) {
    auto db = KernelDb::open(args.positional[i], OpenMode::ReadOnly);
    if (!db) return fail(kProblem, db.status().message());
    auto entries = (*db)->list();
    if (!entries) return fail(kProblem, entries.status().message());
    for (KeyEntry& e : *entries) sides[i].emplace(e.key, std::move(e));
  }
  std::set<Key> keys;
  for (auto& side : sides)
    for (auto& [k, e] : side) keys.insert(k);
  auto winner = [](const KeyEntry* e) {
    return e && e->selection ? e->selection->winner : std::string("-");
  };
  auto pinned = [](const KeyEntry* e) { return e ? pinText(e->pin) : std::string("-"); };
  std::vector<std::vector<std::string>> rows = {{"KEY", "DIFFERENCE", "DB1", "DB2"}};
  json out = json::array();
  for (const Key& k : keys) {
    const KeyEntry* a = sides[0].count(k) ? &sides[0].at(k) : nullptr;
    const KeyEntry* b = sides[1].count(k) ? &sides[1].at(k) : nullptr;
    std::string what;
    if (!a) what = "only in DB2";
    else if (!b) what = "only in DB1";
    else if (winner(a) != winner(b)) what = "winner";
    else if (pinned(a) != pinned(b)) what = "pin";
    else continue;
    std::string left = a ? winner(a) + (a->pin ? " (" + pinned(a) + ")" : "") : "-";
    std::string right = b ? winner(b) + (b->pin ? " (" + pinned(b) + ")" : "") : "-";
    rows.push_back({formatKey(k), what, left, right});
    out.push_back({{"key", keyJson(k)}, {"difference", what}, {"db1", left}, {"db2", right}});
  }
  if (args.flags.count("--json")) std::cout << out.dump(1) << "\n";
  else if (rows.size() > 1) printTable(rows);
  return rows.size() > 1 ? kProblem : kOk;
}

int cmdMerge(KernelDb& db, const Args& args) {
  if (args.positional.empty()) return fail(kUsage, "merge takes one or more SRC databases");
  for (const std::string& source : args.positional) {
    auto other = KernelDb::open(source, OpenMode::ReadOnly);
    if (!other) return fail(kProblem, other.status().message());
    if (Status s = db.merge(**other); !s) return fail(kProblem, s.message());
    std::cout << "merged " << source << " into " << db.path() << "\n";
  }
  return kOk;
}

int cmdExport(KernelDb& db, const Args& args) {
  if (!args.positional.empty()) return fail(kUsage, "export writes to stdout and takes no FILE");
  auto text = db.exportJson(args.flags.count("--with-bytes") > 0);
  if (!text) return fail(kProblem, text.status().message());
  std::cout << *text << "\n";
  return kOk;
}

int cmdImport(KernelDb& db, const Args& args) {
  if (args.positional.size() != 1) return fail(kUsage, "import takes one FILE (\"-\": stdin)");
  std::string text;
  if (args.positional[0] == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  } else {
    std::ifstream in(args.positional[0], std::ios::binary);
    if (!in) return fail(kProblem, "cannot read " + args.positional[0]);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (Status s = db.importJson(text); !s) return fail(kProblem, s.message());
  std::cout << "imported " << args.positional[0] << " into " << db.path() << "\n";
  return kOk;
}

/// Without --toolchain, gc keeps the only toolchain there is; with several it refuses and lists
/// them, since guessing which to drop would delete tuning results.
int cmdGc(KernelDb& db, const Args& args) {
  std::string keep;
  if (auto it = args.options.find("--toolchain"); it != args.options.end()) {
    keep = it->second;
  } else {
    auto families = db.families();
    if (!families) return fail(kProblem, families.status().message());
    std::map<std::string, int> toolchains;
    for (const FamilyKey& f : *families) ++toolchains[f.toolchain];
    if (toolchains.size() > 1) {
      std::string list;
      for (auto& [t, n] : toolchains)
        list += (list.empty() ? "" : ", ") + t + " (" + std::to_string(n) + " families)";
      return fail(kUsage, db.path() + " holds " + std::to_string(toolchains.size()) +
                              " toolchains; name the one to keep with --toolchain: " + list);
    }
    keep = toolchains.empty() ? "" : toolchains.begin()->first;
    if (keep.empty()) keep = "(none)";
  }
  auto removed = db.gc(keep);
  if (!removed) return fail(kProblem, removed.status().message());
  std::cout << "removed " << *removed << " rows; kept toolchain " << keep << "\n";
  return kOk;
}

int cmdCheck(KernelDb& db, const Args& args) {
  auto report = db.check();
  if (!report) return fail(kProblem, report.status().message());
  if (args.flags.count("--json")) {
    std::cout << json{{"path", db.path()},           {"schema_version", report->schemaVersion},
                      {"objects", report->objects},  {"candidates", report->candidates},
                      {"selections", report->selections}, {"pins", report->pins},
                      {"problems", report->problems}}
                     .dump(1)
              << "\n";
  } else {
    std::cout << db.path() << ": schema version " << report->schemaVersion << "; "
              << report->objects << " objects, " << report->candidates << " candidates, "
              << report->selections << " selections, " << report->pins << " pins\n";
    for (const std::string& p : report->problems) std::cout << "problem: " << p << "\n";
    std::cout << (report->problems.empty() ? "ok" : std::to_string(report->problems.size()) +
                                                        " problems")
              << "\n";
  }
  return report->problems.empty() ? kOk : kProblem;
}

int cmdSnapshot(KernelDb& db, const Args& args) {
  if (args.positional.size() != 1) return fail(kUsage, "snapshot takes one DEST");
  if (Status s = db.snapshot(args.positional[0]); !s) return fail(kProblem, s.message());
  std::cout << "snapshot of " << db.path() << " written to " << args.positional[0] << "\n";
  return kOk;
}

int cmdMisses(KernelDb& db, const Args& args) {
  auto misses = db.misses();
  if (!misses) return fail(kProblem, misses.status().message());
  if (args.flags.count("--json")) {
    json out = json::array();
    for (const Miss& m : *misses)
      out.push_back({{"key", keyJson(m.key)}, {"answered_by", m.answeredBy}, {"count", m.count},
                     {"first_seen", m.firstSeen}, {"last_seen", m.lastSeen}});
    std::cout << out.dump(1) << "\n";
    return kOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"KEY", "ANSWERED_BY", "COUNT", "FIRST_SEEN", "LAST_SEEN"}};
  for (const Miss& m : *misses)
    rows.push_back({formatKey(m.key), m.answeredBy, std::to_string(m.count), m.firstSeen,
                    m.lastSeen});
  printTable(rows);
  return kOk;
}

int run(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::cout << kUsageText;
      return kOk;
    }
  auto parsed = parseArgs(argc, argv);
  if (!parsed) return fail(kUsage, parsed.status().message());
  const Args& args = *parsed;
  if (args.command.empty() || args.command == "help") {
    std::cout << kUsageText;
    return args.command.empty() ? kUsage : kOk;
  }
  if (args.command == "diff") return cmdDiff(args);

  using Command = int (*)(KernelDb&, const Args&);
  static const std::map<std::string, std::pair<OpenMode, Command>> kCommands = {
      {"list", {OpenMode::ReadOnly, cmdList}},       {"show", {OpenMode::ReadOnly, cmdShow}},
      {"why", {OpenMode::ReadOnly, cmdWhy}},         {"merge", {OpenMode::ReadWrite, cmdMerge}},
      {"export", {OpenMode::ReadOnly, cmdExport}},   {"import", {OpenMode::ReadWrite, cmdImport}},
      {"gc", {OpenMode::ReadWrite, cmdGc}},          {"check", {OpenMode::ReadOnly, cmdCheck}},
      {"snapshot", {OpenMode::ReadOnly, cmdSnapshot}}, {"misses", {OpenMode::ReadOnly, cmdMisses}},
  };
  auto command = kCommands.find(args.command);
  if (command == kCommands.end()) return fail(kUsage, "unknown command '" + args.command + "'");
  if (!args.options.count("--db")) return fail(kUsage, args.command + " needs --db DB");
  auto db = openDb(args, command->second.first);
  if (!db) return fail(kProblem, db.status().message());
  return command->second.second(**db, args);
}

}  // namespace
}  // namespace mxfp6::autotune

int main(int argc, char** argv) {
  try {
    return mxfp6::autotune::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "mxfp6-db: error: " << e.what() << "\n";
    return 1;
  }
}
