#include "tools/cluster/service_process.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/temp_dir.h"

namespace kvfleet::cluster {
namespace {

TEST(ParseListeningLineTest, ReadsBothAddresses) {
  absl::StatusOr<ServiceEndpoints> e =
      ParseListeningLine("kvfleet-worker listening grpc=127.0.0.1:50051 metrics=127.0.0.1:9464");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->grpc_address, "127.0.0.1:50051");
  EXPECT_EQ(e->metrics_address, "127.0.0.1:9464");
  EXPECT_EQ(e->metrics_port, 9464);
  EXPECT_EQ(e->health_address, "");
}

TEST(ParseListeningLineTest, ReadsTheHealthAddressWhenThereIsOne) {
  absl::StatusOr<ServiceEndpoints> e =
      ParseListeningLine("kvfleet-router listening grpc=0.0.0.0:50060 metrics=0.0.0.0:9466 health=0.0.0.0:8080");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->health_address, "0.0.0.0:8080");
}

TEST(ParseListeningLineTest, ReadsAWorkersKvTransferAddress) {
  absl::StatusOr<ServiceEndpoints> e = ParseListeningLine(
      "kvfleet-worker listening grpc=127.0.0.1:50051 metrics=127.0.0.1:9464 kvtransfer=127.0.0.1:7002");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kv_transfer_address, "127.0.0.1:7002");
}

TEST(ParseListeningLineTest, RejectsMissingOrMalformedAddresses) {
  EXPECT_FALSE(ParseListeningLine("kvfleet-worker listening grpc=127.0.0.1:1").ok());
  EXPECT_FALSE(ParseListeningLine("kvfleet-worker listening metrics=127.0.0.1:2").ok());
  EXPECT_FALSE(ParseListeningLine("kvfleet-worker listening grpc=a:1 metrics=nohost").ok());
  EXPECT_FALSE(ParseListeningLine("kvfleet-worker listening grpc=a:1 metrics=h:0").ok());
}

std::unique_ptr<ChildProcess> Shell(const std::string& script) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start("/bin/sh", {"-c", script});
  EXPECT_TRUE(child.ok()) << child.status();
  return child.ok() ? *std::move(child) : nullptr;
}

TEST(AwaitServiceReadyTest, ReturnsTheEndpointsOnceReady) {
  auto child = Shell("echo noise; echo 'svc listening grpc=127.0.0.1:7 metrics=127.0.0.1:8'; echo svc ready; sleep 30");
  ASSERT_NE(child, nullptr);
  absl::StatusOr<ServiceEndpoints> e = AwaitServiceReady(*child, "svc", absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->grpc_address, "127.0.0.1:7");
}

TEST(AwaitServiceReadyTest, FailsWhenTheServiceExitsFirst) {
  auto child = Shell("echo 'svc listening grpc=127.0.0.1:7 metrics=127.0.0.1:8'; exit 3");
  ASSERT_NE(child, nullptr);
  absl::StatusOr<ServiceEndpoints> e = AwaitServiceReady(*child, "svc", absl::Now() + absl::Seconds(10));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("svc ready"), std::string::npos) << e.status();
}

TEST(AwaitServiceReadyTest, TimesOutAndIsInterruptible) {
  auto child = Shell("echo starting; sleep 30");
  ASSERT_NE(child, nullptr);
  absl::StatusOr<ServiceEndpoints> late =
      AwaitServiceReady(*child, "svc", absl::Now() + absl::Milliseconds(300), [] { return false; });
  ASSERT_TRUE(absl::IsDeadlineExceeded(late.status())) << late.status();
  EXPECT_NE(late.status().message().find("starting"), std::string::npos) << late.status();

  int asked = 0;
  const absl::Time start = absl::Now();
  absl::StatusOr<ServiceEndpoints> interrupted =
      AwaitServiceReady(*child, "svc", absl::Now() + absl::Seconds(30), [&] { return ++asked == 3; });
  EXPECT_TRUE(absl::IsCancelled(interrupted.status())) << interrupted.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(LogTailTest, KeepsTheLastBytes) {
  testing::TempDir dir;
  std::ofstream(dir.Path("log")) << "0123456789";
  EXPECT_EQ(LogTail(dir.Path("log"), 4), "6789");
  EXPECT_EQ(LogTail(dir.Path("log")), "0123456789");
  EXPECT_NE(LogTail(dir.Path("missing")).find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace kvfleet::cluster
