// The plaintext health port of the router and the cachemanager (the
// worker's, with drain and stall, is in worker_lifecycle_test and
// worker_streaming_test): readiness and liveness are served there, nothing
// else is, and the process still stops cleanly on SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>

#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "kvfleet/v1/cachemanager.grpc.pb.h"
#include "kvfleet/v1/inference.grpc.pb.h"
#include "tests/integration/services/worker/worker_harness.h"
#include "tests/testing/service_process.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::testing {
namespace {

void ExpectHealthOnly(const StartedService& service, const std::string& readiness_name) {
  ASSERT_FALSE(service.health_address.empty()) << "no health= in the listening line";
  for (const std::string& name : {std::string(), readiness_name, std::string("liveness")}) {
    EXPECT_EQ(HealthServing(service.health_address, name).value_or(false), true) << name;
    EXPECT_EQ(HealthServing(service.address, name).value_or(false), true) << "main port, " << name;
  }
  EXPECT_EQ(HealthServing(service.health_address, "no.such.Service").status().code(), absl::StatusCode::kNotFound);
}

int StopWithSigterm(StartedService& service) {
  service.process->Signal(SIGTERM);
  const absl::StatusOr<int> code = service.process->Wait(absl::Seconds(40));
  return code.ok() ? *code : -1;
}

TEST(HealthPortTest, CachemanagerServesHealthAloneOnItsHealthPort) {
  TempDir dir;
  absl::StatusOr<StartedService> cm =
      StartServiceProcess("kvfleet-cachemanager", KVFLEET_CACHEMANAGER_BINARY,
                          {"--listen", "127.0.0.1:0", "--metrics-port", "0", "--health-port", "0"},
                          dir.Path("cachemanager.log"), absl::Seconds(30));
  ASSERT_TRUE(cm.ok()) << cm.status();
  ExpectHealthOnly(*cm, "kvfleet.v1.CacheManager");
  grpc::ClientContext context;
  v1::ListWorkersResponse workers;
  EXPECT_EQ(v1::CacheManager::NewStub(NewTestChannel(cm->health_address))
                ->ListWorkers(&context, v1::ListWorkersRequest(), &workers)
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(StopWithSigterm(*cm), 0);
}

// The reflection answer on `address`: OK when offered, UNIMPLEMENTED when not.
grpc::StatusCode ReflectionStatus(const std::string& address) {
  namespace reflection = grpc::reflection::v1alpha;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  auto stream = reflection::ServerReflection::NewStub(NewTestChannel(address))->ServerReflectionInfo(&context);
  reflection::ServerReflectionRequest request;
  request.set_list_services("");
  stream->Write(request);
  stream->WritesDone();
  reflection::ServerReflectionResponse response;
  while (stream->Read(&response)) {
  }
  return stream->Finish().error_code();
}

TEST(HealthPortTest, ReflectionCanBeTurnedOffOnTheGrpcPort) {
  TempDir dir;
  for (const bool off : {false, true}) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--metrics-port", "0"};
    if (off) args.push_back("--no-reflection");
    absl::StatusOr<StartedService> cm = StartServiceProcess("kvfleet-cachemanager", KVFLEET_CACHEMANAGER_BINARY, args,
                                                            dir.Path(off ? "off.log" : "on.log"), absl::Seconds(30));
    ASSERT_TRUE(cm.ok()) << cm.status();
    EXPECT_EQ(ReflectionStatus(cm->address), off ? grpc::StatusCode::UNIMPLEMENTED : grpc::StatusCode::OK);
    EXPECT_EQ(HealthServing(cm->address, "").value_or(false), true) << "health stays";
  }
}

TEST(HealthPortTest, RouterServesHealthAloneOnItsHealthPort) {
  TempDir dir;
  ASSERT_TRUE(WriteHarnessModel(dir.Path("tiny.gguf")).ok());
  absl::StatusOr<StartedService> router = StartServiceProcess(
      "kvfleet-router", KVFLEET_ROUTER_BINARY,
      {"--model", dir.Path("tiny.gguf"), "--workers", "127.0.0.1:1", "--listen", "127.0.0.1:0", "--metrics-port",
       "0", "--health-port", "0"},
      dir.Path("router.log"), absl::Seconds(30));
  ASSERT_TRUE(router.ok()) << router.status();
  ExpectHealthOnly(*router, "kvfleet.v1.Inference");
  grpc::ClientContext context;
  v1::ListModelsResponse models;
  EXPECT_EQ(v1::Inference::NewStub(NewTestChannel(router->health_address))
                ->ListModels(&context, v1::ListModelsRequest(), &models)
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(StopWithSigterm(*router), 0);
}

// Without this, gRPC's SO_REUSEPORT lets a second process share the port and
// half the probes (or calls) reach the wrong one.
TEST(HealthPortTest, APortInUseFailsTheStartNamingIt) {
  TempDir dir;
  absl::StatusOr<StartedService> first =
      StartServiceProcess("kvfleet-cachemanager", KVFLEET_CACHEMANAGER_BINARY,
                          {"--listen", "127.0.0.1:0", "--metrics-port", "0", "--health-port", "0"},
                          dir.Path("first.log"), absl::Seconds(30));
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string port = first->health_address.substr(first->health_address.rfind(':') + 1);
  absl::StatusOr<StartedService> second =
      StartServiceProcess("kvfleet-cachemanager", KVFLEET_CACHEMANAGER_BINARY,
                          {"--listen", "127.0.0.1:0", "--metrics-port", "0", "--health-port", port},
                          dir.Path("second.log"), absl::Seconds(30));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(std::string(second.status().message()).find("cannot listen on 0.0.0.0:" + port), std::string::npos)
      << second.status();
  const std::string grpc_port = first->address.substr(first->address.rfind(':') + 1);
  absl::StatusOr<StartedService> third = StartServiceProcess(
      "kvfleet-cachemanager", KVFLEET_CACHEMANAGER_BINARY,
      {"--listen", "127.0.0.1:" + grpc_port, "--metrics-port", "0"}, dir.Path("third.log"), absl::Seconds(30));
  ASSERT_FALSE(third.ok()) << "the main gRPC port is exclusive too";
  EXPECT_NE(std::string(third.status().message()).find("cannot listen on 127.0.0.1:" + grpc_port), std::string::npos)
      << third.status();
}

}  // namespace
}  // namespace kvfleet::testing
