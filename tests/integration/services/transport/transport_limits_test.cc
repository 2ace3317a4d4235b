// The transport's limits and the internal token, on a real cachemanager
// process: a message, metadata or stream count one over its flag is refused
// (or, for streams, made to wait) and the service keeps serving; with
// --internal-token-file every call but health needs the token, which never
// appears in the logs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "kvfleet/v1/cachemanager.grpc.pb.h"
#include "services/transport/grpc/grpc_channel.h"
#include "tests/testing/service_process.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::testing {
namespace {

using std::chrono::milliseconds;

class TransportLimitsTest : public ::testing::Test {
 protected:
  absl::StatusOr<StartedService> Start(const std::vector<std::string>& extra, const std::string& log = "cm.log") {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--metrics-port", "0", "--health-port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return StartServiceProcess("kvfleet-cachemanager", KVFLEET_CACHEMANAGER_BINARY, args, dir_.Path(log),
                               absl::Seconds(30));
  }

  // ListWorkers on `stub` with a model id of `model_id_bytes` and one
  // metadata entry of `metadata_bytes`: its status.
  static grpc::Status List(v1::CacheManager::Stub& stub, size_t model_id_bytes = 0, size_t metadata_bytes = 0,
                           milliseconds deadline = milliseconds(5000)) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    if (metadata_bytes > 0) context.AddMetadata("x-padding", std::string(metadata_bytes, 'm'));
    v1::ListWorkersRequest request;
    request.set_model_id(std::string(model_id_bytes, 'x'));
    v1::ListWorkersResponse response;
    return stub.ListWorkers(&context, request, &response);
  }

  static std::unique_ptr<v1::CacheManager::Stub> Stub(const std::string& address, const std::string& token = "") {
    return v1::CacheManager::NewStub(
        transport::CreateClientChannel(address, {.own_connection = true, .internal_token = token}));
  }

  std::string WriteToken(const std::string& token) {
    const std::string path = dir_.Path("internal-token");
    std::ofstream(path) << token << "\n";
    return path;
  }

  TempDir dir_;
};

TEST_F(TransportLimitsTest, AMessageOverMaxMessageBytesIsRefusedAndTheServiceServesOn) {
  absl::StatusOr<StartedService> cm = Start({"--max-message-bytes", "2048"});
  ASSERT_TRUE(cm.ok()) << cm.status();
  auto stub = Stub(cm->address);
  // The encoded request is the id plus 3 bytes of tag and length.
  EXPECT_TRUE(List(*stub, 2045).ok());
  const grpc::Status over = List(*stub, 2046);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.error_message();
  EXPECT_TRUE(List(*stub).ok()) << "the same connection still serves";
}

TEST_F(TransportLimitsTest, MetadataOverMaxMetadataBytesIsRefusedAndTheServiceServesOn) {
  absl::StatusOr<StartedService> cm = Start({"--max-metadata-bytes", "4096"});
  ASSERT_TRUE(cm.ok()) << cm.status();
  auto stub = Stub(cm->address);
  EXPECT_TRUE(List(*stub, 0, 3000).ok()) << "well under the limit, with the call's own headers";
  const grpc::Status over = List(*stub, 0, 4097);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.error_message();
  EXPECT_TRUE(List(*Stub(cm->address)).ok()) << "the service still serves";
}

// HTTP/2 semantics: a call beyond the limit on one connection waits for a
// slot rather than failing; other connections are unaffected.
TEST_F(TransportLimitsTest, CallsBeyondMaxConcurrentStreamsWaitForASlot) {
  absl::StatusOr<StartedService> cm = Start({"--max-concurrent-streams", "2"});
  ASSERT_TRUE(cm.ok()) << cm.status();
  auto stub = Stub(cm->address);
  ASSERT_TRUE(List(*stub).ok()) << "connected";
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::WorkerChange>>> watches;
  for (int i = 0; i < 2; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    watches.push_back(stub->WatchWorkers(contexts.back().get(), v1::WatchWorkersRequest()));
  }
  // Both watches stay open (no workers: nothing to send); the client opened
  // their streams in order, before the call below.
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(List(*stub, 0, 0, milliseconds(1500)).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << "a third call on the same connection waits";
  EXPECT_TRUE(List(*Stub(cm->address)).ok()) << "another connection is served";
  contexts[0]->TryCancel();
  watches[0]->Finish();
  EXPECT_TRUE(List(*stub).ok()) << "a slot freed: the connection serves again";
  contexts[1]->TryCancel();
  watches[1]->Finish();
}

TEST_F(TransportLimitsTest, TheInternalTokenIsRequiredOnEveryCallButHealthAndNeverLogged) {
  const std::string token = "internal-0123456789abcdef";
  absl::StatusOr<StartedService> cm = Start({"--internal-token-file", WriteToken(token), "--log-level", "debug"});
  ASSERT_TRUE(cm.ok()) << cm.status();
  const grpc::Status none = List(*Stub(cm->address));
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(none.error_message().find("--internal-token-file"), std::string::npos) << none.error_message();
  EXPECT_EQ(List(*Stub(cm->address, "internal-0123456789abcdeX")).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(List(*Stub(cm->address, token)).ok());
  EXPECT_EQ(HealthServing(cm->address, "").value_or(false), true) << "health on the gRPC port needs no token";
  EXPECT_EQ(HealthServing(cm->health_address, "").value_or(false), true);
  cm->process.reset();
  std::ifstream log(dir_.Path("cm.log"));
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_EQ(text.str().find(token), std::string::npos) << "the token is in the log";
}

TEST_F(TransportLimitsTest, ABadInternalTokenFileStopsTheServiceAtStartNamingIt) {
  absl::StatusOr<StartedService> short_token = Start({"--internal-token-file", WriteToken("short")}, "short.log");
  ASSERT_FALSE(short_token.ok());
  EXPECT_NE(std::string(short_token.status().message()).find("16 to 512 characters"), std::string::npos)
      << short_token.status();
  absl::StatusOr<StartedService> missing =
      Start({"--internal-token-file", dir_.Path("nothing-here")}, "missing.log");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("nothing-here cannot be read"), std::string::npos)
      << missing.status();
}

}  // namespace
}  // namespace kvfleet::testing
