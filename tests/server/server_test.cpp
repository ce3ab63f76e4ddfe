// The server over loopback, started as its own process on real SQLite files: every RPC's round
// trip, single-flight compiles, bad requests, replicas, shutdown and SIGKILL in a burst of writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "autotune/db.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "support/sha256.h"
#include "tests/server/grpc_helpers.h"
#include "tests/server/server_process.h"

namespace mxfp6::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A packer family: few candidates, so the miss compiles in seconds.
const v1::OpKey kRows = opKey("mxfp6_pack_rows", "FMT=E3M2,MODE=RCEIL", "sm_90", "C=3072", 4096);

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Server : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mxfp6-server-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "kernels.db").string();
    log_ = (dir_ / "server.log").string();
  }
  void TearDown() override {
    server_.reset();
    if (!HasFailure()) fs::remove_all(dir_);
    else std::fprintf(stderr, "server log:\n%s\n", readFile(log_).c_str());
  }
  ServerProcess& start(std::vector<std::string> extra = {}) {
    server_ = std::make_unique<ServerProcess>(db_, std::move(extra), log_);
    EXPECT_FALSE(server_->address().empty()) << readFile(log_);
    return *server_;
  }
  v1::StatsReply stats() {
    v1::StatsReply reply;
    EXPECT_TRUE(stubFor(server_->address())->Stats(withDeadline().get(), {}, &reply).ok());
    return reply;
  }

  fs::path dir_;
  std::string db_, log_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(Server, AnswersHealthChecks) {
  auto& s = start();
  auto channel = grpc::CreateChannel(s.address(), grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckResponse reply;
  ASSERT_TRUE(health->Check(withDeadline().get(), {}, &reply).ok());
  EXPECT_EQ(reply.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(Server, AMissCompilesTheFamilyOnceAndAnswersWithTheDefaultPlan) {
  auto& s = start();
  auto stub = stubFor(s.address());
  v1::ResolveRequest request;
  *request.mutable_key() = kRows;
  v1::ResolveReply reply;
  grpc::Status status = stub->Resolve(withDeadline().get(), request, &reply);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.result().rule(), v1::DEFAULT);
  EXPECT_TRUE(reply.result().compiled_now());
  EXPECT_THAT(reply.result().plan_id(), HasSubstr("mxfp6_pack_rows["));
  ASSERT_EQ(reply.objects_size(), reply.result().objects_size());
  for (const auto& o : reply.objects()) {
    EXPECT_EQ(sha256Hex(o.bytes()), o.sha256());
    EXPECT_THAT(o.metadata_json(), HasSubstr("\"metadata_schema\":1"));
  }
  // The same key again: from memory, no compile; the objects the client holds come without bytes.
  request.add_have_sha256(reply.objects(0).sha256());
  v1::ResolveReply again;
  ASSERT_TRUE(stub->Resolve(withDeadline().get(), request, &again).ok());
  EXPECT_FALSE(again.result().compiled_now());
  EXPECT_EQ(again.result().plan_id(), reply.result().plan_id());
  EXPECT_TRUE(again.objects(0).bytes().empty());
  EXPECT_EQ(stats().family_compiles(), 1);
  // A miss was recorded for the tuning fleet.
  auto db = autotune::KernelDb::open(db_, autotune::OpenMode::ReadOnly);
  ASSERT_TRUE(db.isOk()) << db.status().message();
  auto misses = (*db)->misses();
  ASSERT_TRUE(misses.isOk());
  ASSERT_EQ(misses->size(), 1u);
  EXPECT_EQ((*misses)[0].answeredBy, "default");
}

TEST_F(Server, SixtyFourConcurrentRequestsForOneUncompiledKeyCompileOnce) {
  auto& s = start();
  std::atomic<int> ok{0};
  std::set<std::string> plans;
  std::mutex mutex;
  std::vector<std::thread> threads;
  for (int i = 0; i < 64; ++i)
    threads.emplace_back([&] {
      auto stub = stubFor(s.address());
      v1::ResolveRequest request;
      *request.mutable_key() = kRows;
      v1::ResolveReply reply;
      if (stub->Resolve(withDeadline().get(), request, &reply).ok()) {
        ++ok;
        std::lock_guard<std::mutex> lock(mutex);
        plans.insert(reply.result().plan_id());
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 64);
  EXPECT_EQ(plans.size(), 1u);
  EXPECT_EQ(stats().family_compiles(), 1);
}

TEST_F(Server, BadRequestsGetAClearStatusAndTheServerKeepsServing) {
  auto& s = start();
  auto stub = stubFor(s.address());
  struct Case {
    v1::OpKey key;
    std::string expect;
  };
  std::vector<Case> cases = {
      {opKey("ln_modulate_sideways", "", "sm_90", "D=3072", 4096), "unknown op 'ln_modulate_sideways'"},
      {opKey("mxfp6_pack_rows", "FMT=E3M2,MODE=RCEIL", "sm_91", "C=3072", 4096), "unknown target 'sm_91'"},
      {opKey("mxfp6_pack_rows", "FMT=E3M2,MODE=RCEIL", "sm_90", "C=3072", -5), "tokens must be >= 1"},
      {opKey("mxfp6_pack_rows", "FMT=E3M2,MODE=RCEIL", "sm_90", "C=3072", int64_t(1) << 40), "exceed the 2^31 - 1 rows"},
      {opKey("mxfp6_pack_rows", "FMT=E4M3,MODE=RCEIL", "sm_90", "C=3072", 4096), "FMT must be one of"},
      {opKey("mxfp6_pack_rows", "FMT=E3M2,MODE=RCEIL", "sm_90", "C=4097", 4096), "C must be one of"},
  };
  for (const Case& c : cases) {
    v1::ResolveRequest request;
    *request.mutable_key() = c.key;
    v1::ResolveReply reply;
    grpc::Status status = stub->Resolve(withDeadline().get(), request, &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.expect;
    EXPECT_THAT(status.error_message(), HasSubstr(c.expect));
  }
  // Oversized and malformed DSL, an unknown target for a compile.
  v1::CompileRequest compile;
  compile.set_file_name("big.mxk");
  compile.set_source(std::string(300 * 1024, '#'));
  compile.set_kernel("k");
  compile.set_target("sm_90");
  v1::CompileReply compiled;
  grpc::Status status = stub->Compile(withDeadline().get(), compile, &compiled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("the limit is"));
  compile.set_file_name("broken.mxk");
  compile.set_source("kernel k(x: bf16[T, D]) {\n  row t in T {\n    y[t, :] = \n  }\n}\n");
  status = stub->Compile(withDeadline().get(), compile, &compiled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("broken.mxk:"));
  compile.set_source(readFile(MXFP6_FIXTURES "/rmsnorm.mxk"));
  compile.set_kernel("rmsnorm");
  compile.set_target("gfx1100");
  status = stub->Compile(withDeadline().get(), compile, &compiled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown target 'gfx1100'"));
  // A batch: the bad key fails alone, the good one resolves.
  v1::BatchResolveRequest batch;
  *batch.add_keys() = cases[0].key;
  *batch.add_keys() = kRows;
  v1::BatchResolveReply batchReply;
  status = stub->BatchResolve(withDeadline().get(), batch, &batchReply);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(batchReply.results_size(), 1);
  ASSERT_EQ(batchReply.errors_size(), 1);
  EXPECT_THAT(batchReply.errors(0).message(), HasSubstr("unknown op"));
  // A client that gives up mid-compile: the server goes on and serves the next request.
  v1::ResolveRequest slow;
  *slow.mutable_key() = opKey("mxfp6_pack_cols", "FMT=E3M2,MODE=RCEIL", "sm_90", "C=3072", 4096);
  v1::ResolveReply slowReply;
  status = stub->Resolve(withDeadline(std::chrono::milliseconds(50)).get(), slow, &slowReply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  status = stub->Resolve(withDeadline().get(), slow, &slowReply);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(readFile(log_), HasSubstr("Resolve INVALID_ARGUMENT"));
}

TEST_F(Server, CompilesDslFromAClientOnceThenFromTheDatabase) {
  auto& s = start();
  auto stub = stubFor(s.address());
  v1::CompileRequest request;
  request.set_file_name("rmsnorm.mxk");
  request.set_source(readFile(MXFP6_FIXTURES "/rmsnorm.mxk"));
  request.set_kernel("rmsnorm");
  request.set_target("gfx942");
  request.set_config("THREADS=256");
  v1::CompileReply first, second;
  grpc::Status status = stub->Compile(withDeadline().get(), request, &first);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(first.cached());
  EXPECT_EQ(first.object().format(), "hsaco");
  EXPECT_EQ(sha256Hex(first.object().bytes()), first.object().sha256());
  ASSERT_TRUE(stub->Compile(withDeadline().get(), request, &second).ok());
  EXPECT_TRUE(second.cached());
  EXPECT_EQ(second.object().sha256(), first.object().sha256());
  EXPECT_EQ(stats().kernel_compiles(), 1);
  EXPECT_EQ(stats().compile_cache_hits(), 1);
}

/// The candidates of kRows's family, read from the file the server writes.
std::vector<autotune::Candidate> rowCandidates(const std::string& db) {
  auto file = autotune::KernelDb::open(db, autotune::OpenMode::ReadOnly);
  if (!file) return {};
  auto families = (*file)->families();
  for (const auto& f : *families)
    if (f.op == "mxfp6_pack_rows" && f.sizes == "C=3072" && f.target == "sm_90") return *(*file)->candidates(f);
  return {};
}

TEST_F(Server, PinsMeasurementsAndListRoundTrip) {
  auto& s = start();
  auto stub = stubFor(s.address());
  v1::ResolveRequest resolve;
  *resolve.mutable_key() = kRows;
  v1::ResolveReply answer;
  ASSERT_TRUE(stub->Resolve(withDeadline().get(), resolve, &answer).ok());
  auto candidates = rowCandidates(db_);
  ASSERT_GE(candidates.size(), 2u);
  const std::string other = candidates.back().planId;

  // Measurements pushed by a tuner make the key exact.
  v1::PushMeasurementsRequest push;
  *push.mutable_key() = kRows;
  for (const auto& c : candidates) {
    auto* t = push.add_timings();
    t->set_plan_id(c.planId);
    t->set_passed_gate(true);
    for (int i = 0; i < 5; ++i) t->add_samples_us(c.planId == other ? 10.0 : 20.0);
  }
  push.set_winner(other);
  push.add_equivalent(other);
  push.set_rule("fastest");
  push.set_tuner("a test");
  v1::PushMeasurementsReply pushed;
  grpc::Status status = stub->PushMeasurements(withDeadline().get(), push, &pushed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GT(pushed.run_id(), 0);
  ASSERT_TRUE(stub->Resolve(withDeadline().get(), resolve, &answer).ok());
  EXPECT_EQ(answer.result().rule(), v1::EXACT);
  EXPECT_EQ(answer.result().plan_id(), other);
  push.set_winner("no such plan");
  status = stub->PushMeasurements(withDeadline().get(), push, &pushed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // A pin wins over tuning; unpinning restores it; a second unpin is NOT_FOUND.
  v1::PinRequest pin;
  *pin.mutable_key() = kRows;
  pin.set_plan_id(candidates.front().planId);
  pin.set_who("ci");
  pin.set_why("A/B against the default");
  v1::PinReply pinned;
  status = stub->Pin(withDeadline().get(), pin, &pinned);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(stub->Resolve(withDeadline().get(), resolve, &answer).ok());
  EXPECT_EQ(answer.result().rule(), v1::PINNED);
  EXPECT_EQ(answer.result().plan_id(), candidates.front().planId);
  EXPECT_THAT(answer.result().why(), HasSubstr("A/B against the default"));
  v1::ListRequest listRequest;
  listRequest.set_op("mxfp6_pack_rows");
  v1::ListReply list;
  ASSERT_TRUE(stub->List(withDeadline().get(), listRequest, &list).ok());
  ASSERT_EQ(list.entries_size(), 1);
  EXPECT_EQ(list.entries(0).winner(), other);
  EXPECT_EQ(list.entries(0).pinned_plan(), candidates.front().planId);
  v1::UnpinRequest unpin;
  *unpin.mutable_key() = kRows;
  v1::UnpinReply unpinned;
  ASSERT_TRUE(stub->Unpin(withDeadline().get(), unpin, &unpinned).ok());
  ASSERT_TRUE(stub->Resolve(withDeadline().get(), resolve, &answer).ok());
  EXPECT_EQ(answer.result().rule(), v1::EXACT);
  EXPECT_EQ(stub->Unpin(withDeadline().get(), unpin, &unpinned).error_code(), grpc::StatusCode::NOT_FOUND);
  // A key at another M of the family: the nearest tuned M answers.
  v1::ResolveRequest near;
  *near.mutable_key() = opKey("mxfp6_pack_rows", "FMT=E3M2,MODE=RCEIL", "sm_90", "C=3072", 8192);
  ASSERT_TRUE(stub->Resolve(withDeadline().get(), near, &answer).ok());
  EXPECT_EQ(answer.result().rule(), v1::NEAREST);
  EXPECT_EQ(answer.result().from_rows(), 4096);
}

TEST_F(Server, AReplicaServesItsSnapshotAndRefusesWrites) {
  {
    auto& writer = start();
    v1::ResolveRequest resolve;
    *resolve.mutable_key() = kRows;
    v1::ResolveReply answer;
    ASSERT_TRUE(stubFor(writer.address())->Resolve(withDeadline().get(), resolve, &answer).ok());
    EXPECT_EQ(writer.stop(SIGTERM), 0);
  }
  auto db = autotune::KernelDb::open(db_);
  ASSERT_TRUE(db.isOk());
  std::string replica = (dir_ / "replica.db").string();
  ASSERT_TRUE((*db)->snapshot(replica).isOk());
  db_ = replica;
  auto& s = start({"--read-only"});
  auto stub = stubFor(s.address());
  v1::ResolveRequest resolve;
  *resolve.mutable_key() = kRows;
  v1::ResolveReply answer;
  grpc::Status status = stub->Resolve(withDeadline().get(), resolve, &answer);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(answer.result().rule(), v1::DEFAULT);
  v1::PinRequest pin;
  *pin.mutable_key() = kRows;
  pin.set_config("THREADS=192");
  pin.set_why("x");
  v1::PinReply pinned;
  status = stub->Pin(withDeadline().get(), pin, &pinned);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("read-only replica"));
  *resolve.mutable_key() = opKey("mxfp6_pack_cols", "FMT=E3M2,MODE=RCEIL", "sm_90", "C=3072", 4096);
  status = stub->Resolve(withDeadline().get(), resolve, &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("read-only replica"));
  EXPECT_TRUE(stats().read_only());
}

TEST_F(Server, SigtermShutsDownCleanly) {
  auto& s = start();
  EXPECT_EQ(s.stop(SIGTERM), 0);
  EXPECT_THAT(readFile(log_), HasSubstr("mxfp6-server: stopped"));
}

TEST_F(Server, KilledDuringABurstOfWritesLosesNothingItAcknowledged) {
  auto& s = start();
  {
    v1::ResolveRequest resolve;  // the family the pushes measure
    *resolve.mutable_key() = kRows;
    v1::ResolveReply answer;
    ASSERT_TRUE(stubFor(s.address())->Resolve(withDeadline().get(), resolve, &answer).ok());
  }
  auto candidates = rowCandidates(db_);
  ASSERT_FALSE(candidates.empty());
  std::mutex mutex;
  std::vector<int64_t> acknowledgedRows;
  std::vector<std::string> acknowledgedObjects;
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w)
    writers.emplace_back([&, w] {
      auto stub = stubFor(s.address());
      for (int i = 0; !stop; ++i) {
        int64_t rows = 32 * (1 + w + 4 * i);  // a new key each push
        v1::PushMeasurementsRequest push;
        *push.mutable_key() = opKey("mxfp6_pack_rows", "FMT=E3M2,MODE=RCEIL", "sm_90", "C=3072", rows);
        auto* t = push.add_timings();
        t->set_plan_id(candidates[0].planId);
        t->set_passed_gate(true);
        for (int k = 0; k < 50; ++k) t->add_samples_us(10 + k);
        push.set_winner(candidates[0].planId);
        push.set_rule("only one");
        v1::PushMeasurementsReply reply;
        if (!stub->PushMeasurements(withDeadline().get(), push, &reply).ok()) return;
        std::lock_guard<std::mutex> lock(mutex);
        acknowledgedRows.push_back(rows);
      }
    });
  writers.emplace_back([&] {  // compiles of client DSL, each a new config
    auto stub = stubFor(s.address());
    const std::string source = readFile(MXFP6_FIXTURES "/rmsnorm.mxk");
    int configs[][2] = {{128, 4}, {256, 4}, {512, 4}, {128, 8}, {256, 8}, {512, 8}};
    for (auto [threads, vec] : configs) {
      if (stop) return;
      v1::CompileRequest request;
      request.set_file_name("rmsnorm.mxk");
      request.set_source(source);
      request.set_kernel("rmsnorm");
      request.set_target("gfx950");
      request.set_config("THREADS=" + std::to_string(threads) + ",VEC=" + std::to_string(vec));
      v1::CompileReply reply;
      if (!stub->Compile(withDeadline().get(), request, &reply).ok()) return;
      std::lock_guard<std::mutex> lock(mutex);
      acknowledgedObjects.push_back(reply.object().sha256());
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(s.stop(SIGKILL), 128 + SIGKILL);
  stop = true;
  for (auto& t : writers) t.join();
  ASSERT_GT(acknowledgedRows.size(), 10u) << "the burst was too short to mean anything";

  auto db = autotune::KernelDb::open(db_);
  ASSERT_TRUE(db.isOk()) << db.status().message();
  auto report = (*db)->check();
  ASSERT_TRUE(report.isOk());
  EXPECT_TRUE(report->problems.empty()) << report->problems.front();
  autotune::FamilyKey family = candidates[0].family;
  for (int64_t rows : acknowledgedRows) {
    auto selection = (*db)->selection({family, rows});
    ASSERT_TRUE(selection.isOk());
    EXPECT_TRUE(selection->has_value()) << "acknowledged push at M=" << rows << " is missing";
  }
  for (const std::string& sha : acknowledgedObjects) EXPECT_TRUE(*(*db)->hasObject(sha)) << sha;
  // The restarted server serves from the same file.
  auto& again = start();
  v1::ResolveRequest resolve;
  *resolve.mutable_key() = opKey("mxfp6_pack_rows", "FMT=E3M2,MODE=RCEIL", "sm_90", "C=3072", acknowledgedRows[0]);
  v1::ResolveReply answer;
  ASSERT_TRUE(stubFor(again.address())->Resolve(withDeadline().get(), resolve, &answer).ok());
  EXPECT_EQ(answer.result().rule(), v1::EXACT);
}

}  // namespace
}  // namespace mxfp6::testing
