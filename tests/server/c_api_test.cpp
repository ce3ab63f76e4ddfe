// The client's C ABI (libmxfp6_client.so) as another language sees it: through a server process,
// then from the database file it wrote (embedded mode), and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "client/mxfp6_client.h"
#include "tests/server/server_process.h"

namespace mxfp6::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(CAbi, ResolvesThroughAServerAndFromADatabaseFile) {
  fs::path dir = fs::temp_directory_path() / ("mxfp6-c-abi-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string db_ = (dir / "kernels.db").string();
  std::string rows = "mxfp6_pack_rows/FMT=E3M2,MODE=RCEIL/sm_90/C=3072/4096";
  char error[512] = {};
  {
    // Through a server: the miss precompiles the family into its file.
    ServerProcess server(db_, {}, (dir / "server.log").string());
    ASSERT_FALSE(server.address().empty());
    mxc_client* c = mxc_connect(("grpc://127.0.0.1:1," + server.address()).c_str(), (dir / "cache").c_str(), 120000,
                                error, sizeof error);
    ASSERT_NE(c, nullptr) << error;
    EXPECT_THAT(mxc_describe(c), HasSubstr(server.address()));
    const char* keys[] = {rows.c_str()};
    mxc_resolution* r = mxc_resolve(c, keys, 1, error, sizeof error);
    ASSERT_NE(r, nullptr) << error;
    EXPECT_EQ(mxc_source(r), 0);
    EXPECT_THAT(mxc_status(r), HasSubstr("served by"));
    EXPECT_GT(mxc_objects_from_server(r), 0);
    EXPECT_GT(mxc_bytes_from_server(r), 0);
    mxc_resolution_free(r);
    mxc_close(c);
    ASSERT_EQ(server.stop(SIGTERM), 0);
  }
  mxc_client* c = mxc_connect(("sqlite://" + db_).c_str(), nullptr, 0, error, sizeof error);
  ASSERT_NE(c, nullptr) << error;
  std::string bogus = "mxfp6_pack_rows/FMT=E3M2,MODE=RCEIL/sm_90/C=3072/0";
  const char* keys[] = {rows.c_str()};
  mxc_resolution* r = mxc_resolve(c, keys, 1, error, sizeof error);
  ASSERT_NE(r, nullptr) << error;
  EXPECT_EQ(mxc_source(r), 2);
  ASSERT_EQ(mxc_op_count(r), 1u);
  EXPECT_EQ(mxc_op_error(r, 0), nullptr);
  EXPECT_STREQ(mxc_op_rule(r, 0), "default");
  ASSERT_GE(mxc_op_launch_count(r, 0), 1u);
  const void* bytes = nullptr;
  size_t size = 0;
  const char *metadata = nullptr, *sha = nullptr;
  ASSERT_EQ(mxc_op_launch_object(r, 0, 0, &bytes, &size, &metadata, &sha), 0);
  EXPECT_GT(size, 0u);
  EXPECT_THAT(metadata, HasSubstr("\"entry\""));
  EXPECT_THAT(mxc_op_plan_json(r, 0), HasSubstr(sha));
  EXPECT_EQ(mxc_op_launch_object(r, 0, 99, &bytes, &size, &metadata, &sha), -1);
  mxc_resolution_free(r);
  const char* bad[] = {bogus.c_str()};
  EXPECT_EQ(mxc_resolve(c, bad, 1, error, sizeof error), nullptr);
  EXPECT_THAT(error, HasSubstr("M must be a positive integer"));
  mxc_close(c);
  EXPECT_EQ(mxc_connect("sqlite:///no/such/dir/kernels.db", nullptr, 0, error, sizeof error), nullptr);
  EXPECT_THAT(error, HasSubstr("/no/such/dir/kernels.db"));
  EXPECT_EQ(mxc_connect("http://x", nullptr, 0, error, sizeof error), nullptr);
  EXPECT_THAT(error, HasSubstr("neither grpc://"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mxfp6::testing
