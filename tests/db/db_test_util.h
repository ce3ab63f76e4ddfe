// Shared pieces of the kernel-database tests: a temporary directory per test and a small,
// complete set of contents (a code object, candidates, a tuning run) to store.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "autotune/db.h"
#include "support/sha256.h"

namespace mxfp6::autotune::testing {

/// Fails the test with the status's message.
#define ASSERT_OK(expr)                                       \
  do {                                                        \
    const auto& mxfp6_test_status_ = (expr);                  \
    ASSERT_TRUE(mxfp6_test_status_.isOk()) << status_message(mxfp6_test_status_); \
  } while (0)

inline std::string status_message(const Status& s) { return s.message(); }
template <typename T>
std::string status_message(const Expected<T>& e) {
  return e.status().message();
}

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("mxfp6_db_" + std::to_string(::getpid()) + "_" +
             (info ? std::string(info->test_suite_name()) + "." + info->name() : "x"));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(path_);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// Opens (or creates) a database, failing the test with the error when it cannot.
inline std::unique_ptr<KernelDb> openOrDie(const std::string& path, OpenMode mode = OpenMode::ReadWrite) {
  auto db = KernelDb::open(path, mode);
  EXPECT_TRUE(db.isOk()) << db.status().message();
  return db.isOk() ? db.take() : nullptr;
}

inline FamilyKey lnFamily(const std::string& toolchain = "mxfp6c-1/llvm-22/ptxas-12.8") {
  return FamilyKey{"ln_modulate_fwd", "", "sm_90", "D=3072", toolchain};
}

inline CodeObject makeObject(const std::string& kernel, const std::string& config,
                             const std::string& toolchain = "mxfp6c-1/llvm-22/ptxas-12.8") {
  CodeObject o;
  o.bytes = "\x7f" "ELF fake cubin of " + kernel + " " + config + " " + toolchain;
  o.sha256 = sha256Hex(o.bytes);
  o.kernel = kernel;
  o.target = "sm_90";
  o.format = "cubin";
  o.config = config;
  o.sourceHash = sha256Hex("kernel " + kernel);
  o.toolchain = toolchain;
  o.metadata = R"({"kernel":")" + kernel + R"("})";
  return o;
}

/// Two candidate plans of `family`, each launching one stored object ("rows4" is the default).
inline Status storeCandidates(KernelDb& db, const FamilyKey& family) {
  std::vector<Candidate> candidates;
  int ordinal = 0;
  for (const char* plan : {"rows4", "rows8"}) {
    CodeObject o = makeObject("ln_modulate_fwd", plan, family.toolchain);
    if (Status s = db.putObject(o); !s.isOk()) return s;
    candidates.push_back(Candidate{family, plan, R"({"plan":")" + std::string(plan) + R"("})",
                                   {o.sha256}, ordinal, double(4 * (ordinal + 1))});
    ++ordinal;
  }
  return db.putCandidates(candidates);
}

/// A run of `key` where both candidates pass and `winner` is picked from both.
inline TuningRun makeRun(const Key& key, const std::string& winner,
                         const std::string& tunedAt = "") {
  TuningRun run;
  run.key = key;
  run.timings = {PlanTiming{"rows4", true, "max rel 1e-3 <= 2e-2", {10.0, 10.5, 9.8}},
                 PlanTiming{"rows8", true, "max rel 1e-3 <= 2e-2", {10.1, 10.2, 10.4}}};
  run.selection.key = key;
  run.selection.winner = winner;
  run.selection.equivalent = {"rows4", "rows8"};
  run.selection.rule = "incumbent";
  run.selection.tunedAt = tunedAt;
  run.selection.tuner = "test";
  return run;
}

}  // namespace mxfp6::autotune::testing
