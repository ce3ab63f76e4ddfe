// Concurrency and crashes: one writer with readers alongside (threads and another process), and
// a writer killed with SIGKILL mid-stream, after which every commit it reported is there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

#include "autotune/db.h"
#include "tests/db/db_test_util.h"

namespace mxfp6::autotune {
namespace {

using namespace testing;

Pin pinAt(int64_t rows) {
  return Pin{Key{lnFamily(), rows}, "rows8", "writer", "row " + std::to_string(rows), "",
             std::nullopt};
}

/// In a forked child: pins rows [first, first + count) one transaction each, then exits with 0
/// when all succeeded. Never returns.
[[noreturn]] void writePinsAndExit(const std::string& path, int64_t first, int64_t count,
                                   int reportFd = -1) {
  auto db = KernelDb::open(path);
  if (!db.isOk()) _exit(10);
  for (int64_t rows = first; rows < first + count; ++rows) {
    if (!(*db)->pin(pinAt(rows)).isOk()) _exit(11);
    // Reported only once committed: the parent may count on every reported row.
    if (reportFd >= 0 && write(reportFd, &rows, sizeof(rows)) != sizeof(rows)) _exit(12);
  }
  _exit(0);
}

TEST(KernelDbConcurrency, ReadersSucceedWhileAnotherProcessAndAThreadWrite) {
  TempDir dir;
  std::string path = dir.file("k.db");
  {
    auto db = KernelDb::open(path);
    ASSERT_OK(db);
    ASSERT_OK(storeCandidates(**db, lnFamily()));
  }
  constexpr int64_t kPerWriter = 150;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) writePinsAndExit(path, 0, kPerWriter);

  std::atomic<bool> writing{true};
  std::atomic<int> readFailures{0}, reads{0};
  std::string firstFailure;
  std::thread writer([&] {
    auto db = KernelDb::open(path);
    if (!db.isOk()) {
      ++readFailures;
      return;
    }
    for (int64_t rows = kPerWriter; rows < 2 * kPerWriter; ++rows)
      if (Status s = (*db)->pin(pinAt(rows)); !s.isOk()) {
        firstFailure = s.message();
        ++readFailures;
      }
  });
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r)
    readers.emplace_back([&, r] {
      auto db = KernelDb::open(path, r == 0 ? OpenMode::ReadOnly : OpenMode::ReadWrite);
      if (!db.isOk()) {
        ++readFailures;
        return;
      }
      while (writing) {
        auto entries = (*db)->list();
        auto candidates = (*db)->candidates(lnFamily());
        if (!entries.isOk() || !candidates.isOk() || candidates->size() != 2) ++readFailures;
        ++reads;
      }
    });
  writer.join();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  writing = false;
  for (std::thread& t : readers) t.join();

  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(readFailures, 0) << firstFailure;
  EXPECT_GT(reads, 0);
  auto db = KernelDb::open(path, OpenMode::ReadOnly);
  ASSERT_OK(db);
  auto entries = (*db)->list();
  ASSERT_OK(entries);
  EXPECT_EQ(entries->size(), size_t(2 * kPerWriter));
}

TEST(KernelDbConcurrency, TwoWriterProcessesBothCommitEverything) {
  TempDir dir;
  std::string path = dir.file("k.db");
  { ASSERT_OK(KernelDb::open(path)); }
  pid_t a = fork();
  ASSERT_GE(a, 0);
  if (a == 0) writePinsAndExit(path, 0, 100);
  pid_t b = fork();
  ASSERT_GE(b, 0);
  if (b == 0) writePinsAndExit(path, 1000, 100);
  for (pid_t child : {a, b}) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  auto db = KernelDb::open(path, OpenMode::ReadOnly);
  ASSERT_OK(db);
  EXPECT_EQ((*db)->list()->size(), 200u);
}

// SIGKILL lands between or inside transactions; WAL recovery must leave a sound file holding
// every transaction the writer had reported committed.
TEST(KernelDbConcurrency, AWriterKilledMidStreamLosesNoCommittedWrite) {
  TempDir dir;
  std::string path = dir.file("k.db");
  { ASSERT_OK(KernelDb::open(path)); }
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    writePinsAndExit(path, 0, 1000000, fds[1]);
  }
  close(fds[1]);
  std::set<int64_t> committed;
  int64_t rows = 0;
  while (committed.size() < 300 && read(fds[0], &rows, sizeof(rows)) == sizeof(rows))
    committed.insert(rows);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  while (read(fds[0], &rows, sizeof(rows)) == sizeof(rows)) committed.insert(rows);
  close(fds[0]);
  ASSERT_GE(committed.size(), 300u);

  auto db = KernelDb::open(path);
  ASSERT_OK(db);
  auto report = (*db)->check();
  ASSERT_OK(report);
  EXPECT_TRUE(report->problems.empty()) << report->problems.front();
  EXPECT_GE(report->pins, int64_t(committed.size()));
  for (int64_t r : committed) {
    auto pin = (*db)->pinFor(Key{lnFamily(), r});
    ASSERT_OK(pin);
    EXPECT_TRUE(pin->has_value()) << "row " << r << " was reported committed";
  }
}

}  // namespace
}  // namespace mxfp6::autotune
