// The client library against real servers on loopback: failover across a list, the node cache
// (offline answers, corrupt files refetched), the embedded mode, and errors at connect.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "autotune/db.h"
#include "client/client.h"
#include "tests/server/server_process.h"

namespace mxfp6::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const client::OpKey kRows{"mxfp6_pack_rows", "FMT=E3M2,MODE=RCEIL", "sm_90", "C=3072", 4096};
const client::OpKey kCols{"mxfp6_pack_cols", "FMT=E3M2,MODE=RCEIL", "sm_90", "C=3072", 4096};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mxfp6-client-test-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "kernels.db").string();
    cache_ = (dir_ / "cache").string();
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  /// A writer whose database holds kRows's and kCols's families, then stopped; its file.
  void precompileThroughAServer() {
    ServerProcess writer(db_, {}, (dir_ / "writer.log").string());
    ASSERT_FALSE(writer.address().empty());
    auto c = client::Client::connect({{writer.address()}, "", "", std::chrono::seconds(120), 0});
    ASSERT_TRUE(c.isOk()) << c.status().message();
    auto r = (*c)->resolve({kRows, kCols});
    ASSERT_TRUE(r.isOk()) << r.status().message();
    ASSERT_EQ(r->ops.size(), 2u);
    ASSERT_EQ(writer.stop(SIGTERM), 0);
  }

  fs::path dir_;
  std::string db_, cache_;
};

TEST_F(ClientTest, FailsOverAcrossReplicasAndAnswersOfflineFromTheNodeCache) {
  precompileThroughAServer();
  auto db = autotune::KernelDb::open(db_);
  ASSERT_TRUE(db.isOk());
  std::string r1 = (dir_ / "r1.db").string(), r2 = (dir_ / "r2.db").string();
  ASSERT_TRUE((*db)->snapshot(r1).isOk());
  ASSERT_TRUE((*db)->snapshot(r2).isOk());
  db->reset();
  auto replica1 = std::make_unique<ServerProcess>(r1, std::vector<std::string>{"--read-only"}, (dir_ / "r1.log").string());
  auto replica2 = std::make_unique<ServerProcess>(r2, std::vector<std::string>{"--read-only"}, (dir_ / "r2.log").string());
  ASSERT_FALSE(replica1->address().empty());
  ASSERT_FALSE(replica2->address().empty());

  // The first server in the list is down: the client takes the next.
  client::ClientOptions options{{"127.0.0.1:1", replica1->address(), replica2->address()}, "", cache_,
                                std::chrono::seconds(10), 1};
  auto c = client::Client::connect(options);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  auto first = (*c)->resolve({kRows, kCols});
  ASSERT_TRUE(first.isOk()) << first.status().message();
  EXPECT_EQ(first->source, client::Source::Server);
  EXPECT_EQ(first->status, "served by " + replica1->address());
  ASSERT_EQ(first->ops.size(), 2u);
  EXPECT_EQ(first->ops[0].rule, "default");
  EXPECT_GT(first->objectsFromServer, 0);
  EXPECT_EQ(first->objectsFromCache, 0);

  // Again: every object is in the node cache, so no bytes cross the wire.
  auto warm = (*c)->resolve({kRows, kCols});
  ASSERT_TRUE(warm.isOk());
  EXPECT_EQ(warm->objectsFromServer, 0);
  EXPECT_EQ(warm->bytesFromServer, 0);
  EXPECT_EQ(warm->objectsFromCache, first->objectsFromServer);

  // Replica 1 dies: replica 2 answers.
  replica1->stop(SIGKILL);
  auto failover = (*c)->resolve({kRows});
  ASSERT_TRUE(failover.isOk()) << failover.status().message();
  EXPECT_EQ(failover->status, "served by " + replica2->address());

  // A cached object corrupted on disk, in its bytes or in its metadata header, is detected by a
  // sha256 and fetched again.
  std::string sha = failover->ops[0].objects[0]->sha256;
  for (bool inHeader : {false, true}) {
    std::string path = cache_ + "/objects/" + sha;
    {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(inHeader ? 20 : std::streamoff(fs::file_size(path) - 100));
      f.put('\x5a');
    }
    auto refetched = (*c)->resolve({kRows});
    ASSERT_TRUE(refetched.isOk()) << refetched.status().message();
    EXPECT_GE(refetched->objectsFromServer, 1) << (inHeader ? "header" : "bytes");
    EXPECT_EQ(refetched->ops[0].objects[0]->sha256, sha);
  }

  // Every server down: the node cache answers, and says so.
  replica2->stop(SIGKILL);
  auto offline = (*c)->resolve({kRows, kCols});
  ASSERT_TRUE(offline.isOk()) << offline.status().message();
  EXPECT_EQ(offline->source, client::Source::NodeCache);
  EXPECT_THAT(offline->status, HasSubstr("offline"));
  ASSERT_EQ(offline->ops.size(), 2u);
  EXPECT_EQ(offline->ops[0].planId, first->ops[0].planId);
  // A key never fetched has no answer offline.
  client::OpKey never = kRows;
  never.rows = 12345;
  auto partial = (*c)->resolve({never});
  ASSERT_TRUE(partial.isOk());
  ASSERT_EQ(partial->errors.size(), 1u);
  EXPECT_THAT(partial->errors[0].second, HasSubstr("not in the node cache"));
  // A new process on the node with the servers down connects to the cache alone.
  auto later = client::Client::connect(options);
  ASSERT_TRUE(later.isOk()) << later.status().message();
  auto fromCache = (*later)->resolve({kRows});
  ASSERT_TRUE(fromCache.isOk());
  EXPECT_EQ(fromCache->source, client::Source::NodeCache);
  // Offline, a corrupt object is an error naming it, never a wrong kernel.
  {
    std::string path = cache_ + "/objects/" + sha;
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(fs::file_size(path) - 100));
    f.put('\x11');
  }
  auto corrupt = (*later)->resolve({kRows});
  ASSERT_TRUE(corrupt.isOk());
  ASSERT_EQ(corrupt->errors.size(), 1u);
  EXPECT_THAT(corrupt->errors[0].second, HasSubstr("is corrupt"));
}

TEST_F(ClientTest, FreshAnswersInTheNodeCacheNeedNoServer) {
  precompileThroughAServer();
  auto server = std::make_unique<ServerProcess>(db_, std::vector<std::string>{}, (dir_ / "s.log").string());
  ASSERT_FALSE(server->address().empty());
  client::ClientOptions options{{server->address()}, "", cache_, std::chrono::seconds(30), 0};
  options.freshFor = std::chrono::seconds(300);
  auto first = client::Client::connect(options);
  ASSERT_TRUE(first.isOk()) << first.status().message();
  auto fetched = (*first)->resolve({kRows});  // an empty cache: the server answers
  ASSERT_TRUE(fetched.isOk());
  EXPECT_EQ(fetched->source, client::Source::Server);
  server->stop(SIGKILL);
  // Another process on the node: answers from the cache, fresh, though the server is gone.
  auto second = client::Client::connect(options);
  ASSERT_TRUE(second.isOk()) << second.status().message();
  auto fresh = (*second)->resolve({kRows});
  ASSERT_TRUE(fresh.isOk()) << fresh.status().message();
  EXPECT_EQ(fresh->source, client::Source::FreshNodeCache);
  EXPECT_THAT(fresh->status, HasSubstr("less than 300 s ago"));
  EXPECT_EQ(fresh->ops[0].planId, fetched->ops[0].planId);
  EXPECT_EQ(fresh->objectsFromServer, 0);
  // A key it never fetched is not fresh: the servers are asked, and being down, the answer is
  // offline with that key failed.
  client::OpKey other = kRows;
  other.rows = 8192;
  auto mixed = (*second)->resolve({kRows, other});
  ASSERT_TRUE(mixed.isOk());
  EXPECT_EQ(mixed->source, client::Source::NodeCache);
  EXPECT_EQ(mixed->errors.size(), 1u);
  // Without freshFor the same cache is only an offline fallback.
  options.freshFor = std::chrono::seconds(0);
  auto third = client::Client::connect(options);
  ASSERT_TRUE(third.isOk());
  auto offline = (*third)->resolve({kRows});
  ASSERT_TRUE(offline.isOk());
  EXPECT_EQ(offline->source, client::Source::NodeCache);
  EXPECT_THAT(offline->status, HasSubstr("offline"));
}

TEST_F(ClientTest, NoServerAndNoCacheIsAnErrorAtConnect) {
  auto c = client::Client::connect({{"127.0.0.1:1"}, "", "", std::chrono::seconds(2), 0});
  ASSERT_FALSE(c.isOk());
  EXPECT_THAT(c.status().message(), HasSubstr("no server reachable"));
  EXPECT_THAT(c.status().message(), HasSubstr("127.0.0.1:1"));
  auto withMissingCache =
      client::Client::connect({{"127.0.0.1:1"}, "", (dir_ / "nothing").string(), std::chrono::seconds(2), 0});
  ASSERT_FALSE(withMissingCache.isOk());
  EXPECT_THAT(withMissingCache.status().message(), HasSubstr("no node cache"));
}

TEST_F(ClientTest, LoadsThroughTheRuntimeAndRefusesStaleMetadata) {
  precompileThroughAServer();
  auto c = client::Client::connect({{}, db_, "", std::chrono::seconds(10), 0});
  ASSERT_TRUE(c.isOk()) << c.status().message();
  auto r = (*c)->resolve({kRows});
  ASSERT_TRUE(r.isOk() && r->ops.size() == 1);
  rt::DeviceOptions options;
  options.driverPath = MXFP6_FAKE_DRIVER;
  auto device = rt::Device::open(options);
  ASSERT_TRUE(device.isOk()) << device.status().message();
  // The fake driver takes no real cubin: the load reaches it, and its refusal comes back named.
  auto loaded = client::Client::load(**device, r->ops[0]);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_THAT(loaded.status().message(), HasSubstr("cuModuleLoad"));
  // Metadata of another schema is never loaded as current.
  client::Object stale = *r->ops[0].objects[0];
  stale.metadataJson.replace(stale.metadataJson.find("\"metadata_schema\":1"), 19, "\"metadata_schema\":0");
  client::ResolvedOp op = r->ops[0];
  op.objects = {&stale};
  loaded = client::Client::load(**device, op);
  ASSERT_FALSE(loaded.isOk());
  EXPECT_THAT(loaded.status().message(), HasSubstr("launch metadata schema 0; this client loads schema 1"));
}

TEST(OpKeys, ParseAndPrint) {
  auto k = client::parseOpKey("norm_rope_fwd/H=24/sm_90//98304");
  ASSERT_TRUE(k.isOk()) << k.status().message();
  EXPECT_EQ(k->op, "norm_rope_fwd");
  EXPECT_EQ(k->sizes, "");
  EXPECT_EQ(k->rows, 98304);
  EXPECT_EQ(k->text(), "norm_rope_fwd/H=24/sm_90//98304");
  EXPECT_FALSE(client::parseOpKey("norm_rope_fwd/H=24/sm_90/98304").isOk());
  EXPECT_FALSE(client::parseOpKey("a/b/c/d/12x").isOk());
  auto uri = client::parseUri("grpc://a:1,b:2");
  ASSERT_TRUE(uri.isOk());
  EXPECT_EQ(uri->servers, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(client::parseUri("sqlite:///x/k.db")->dbPath, "/x/k.db");
  auto fresh = client::parseUri("grpc://a:1?fresh_for=300");
  ASSERT_TRUE(fresh.isOk()) << fresh.status().message();
  EXPECT_EQ(fresh->servers, std::vector<std::string>{"a:1"});
  EXPECT_EQ(fresh->freshFor.count(), 300);
  EXPECT_FALSE(client::parseUri("grpc://a:1?stale=3").isOk());
  EXPECT_FALSE(client::parseUri("grpc://a:1?fresh_for=-3").isOk());
}

}  // namespace
}  // namespace mxfp6::testing
