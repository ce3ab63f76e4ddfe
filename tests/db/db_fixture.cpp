// Writes a small kernel database through the API, as precompile and the tuner would, for the
// mxfp6-db command-line tests.
//   db_fixture PATH a   ln_modulate_fwd//sm_90/D=3072: candidates rows4, rows8; tuned at M=1024
//                       (rows4) and M=16384 (rows8); pinned at M=4096; a miss at M=2048
//   db_fixture PATH b   the same family: M=16384 won by rows4, M=8192 tuned, no M=1024
//   db_fixture PATH two-toolchains   family a under two toolchain fingerprints
#include <iostream>
#include <string>

#include "autotune/db.h"
#include "support/sha256.h"

using namespace mxfp6;
using namespace mxfp6::autotune;

namespace {

FamilyKey family(const std::string& toolchain = "tc-1") {
  return FamilyKey{"ln_modulate_fwd", "", "sm_90", "D=3072", toolchain};
}

Status candidates(KernelDb& db, const FamilyKey& f) {
  std::vector<Candidate> list;
  int ordinal = 0;
  for (const char* plan : {"rows4", "rows8"}) {
    CodeObject o;
    o.bytes = std::string("\x7f" "ELF ") + plan + " " + f.toolchain;
    o.sha256 = sha256Hex(o.bytes);
    o.kernel = "ln_modulate_fwd";
    o.target = f.target;
    o.format = "cubin";
    o.config = plan;
    o.toolchain = f.toolchain;
    o.metadata = "{}";
    if (Status s = db.putObject(o); !s) return s;
    list.push_back(Candidate{f, plan, "{}", {o.sha256}, ordinal, double(ordinal)});
    ++ordinal;
  }
  return db.putCandidates(list);
}

Status tune(KernelDb& db, const FamilyKey& f, int64_t rows, const std::string& winner,
            const std::string& at) {
  TuningRun run;
  run.key = Key{f, rows};
  run.timings = {PlanTiming{"rows4", true, "max rel 2e-3", {10.0, 11.0, 12.0, 30.0}},
                 PlanTiming{"rows8", true, "max rel 1e-3", {9.5, 10.0, 10.5}}};
  run.selection = Selection{run.key, winner, {winner}, "fastest median", at, "db_fixture", 0};
  return db.recordTuning(run);
}

Status fill(KernelDb& db, const std::string& mode) {
  FamilyKey f = family();
  RETURN_IF_ERROR(candidates(db, f));
  if (mode == "b") {
    RETURN_IF_ERROR(tune(db, f, 16384, "rows4", "2026-02-01T00:00:00Z"));
    return tune(db, f, 8192, "rows8", "2026-02-01T00:00:00Z");
  }
  RETURN_IF_ERROR(tune(db, f, 1024, "rows4", "2026-01-01T00:00:00Z"));
  RETURN_IF_ERROR(tune(db, f, 16384, "rows8", "2026-01-01T00:00:00Z"));
  RETURN_IF_ERROR(db.pin(Pin{Key{f, 4096}, "rows8", "alice", "rows4 regressed on 4096",
                             "2026-01-05T00:00:00Z", "2999-01-01T00:00:00Z"}));
  RETURN_IF_ERROR(db.recordMiss(Key{f, 2048}, "nearest"));
  if (mode == "two-toolchains") {
    RETURN_IF_ERROR(candidates(db, family("tc-2")));
    RETURN_IF_ERROR(tune(db, family("tc-2"), 1024, "rows8", "2026-03-01T00:00:00Z"));
  }
  return Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: db_fixture PATH a|b|two-toolchains\n";
    return 2;
  }
  auto db = KernelDb::open(argv[1]);
  if (!db) {
    std::cerr << db.status().message() << "\n";
    return 1;
  }
  if (Status s = fill(**db, argv[2]); !s) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  return 0;
}
