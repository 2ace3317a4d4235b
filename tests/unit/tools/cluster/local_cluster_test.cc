#include "tools/cluster/local_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::cluster {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

// A stand-in for every kvfleet service: records its command line, prints the
// start-up lines and idles until SIGTERM, which it records too. Files in its
// directory change its behaviour: fail-<label> exits before ready,
// stubborn-<label> ignores SIGTERM.
constexpr char kFakeService[] = R"(#!/bin/sh
dir=$(dirname "$0")
name=$(basename "$0")
label=${name#kvfleet-}
prev=
for a in "$@"; do
  if [ "$prev" = "--worker-id" ]; then label=$a; fi
  prev=$a
done
echo "$label $*" >> "$dir/argv.txt"
if [ -e "$dir/fail-$label" ]; then echo "boom in $label" >&2; exit 3; fi
if [ -e "$dir/stubborn-$label" ]; then trap '' TERM; else trap 'echo $label >> "$dir/stopped.txt"; exit 0' TERM; fi
echo "$name listening grpc=127.0.0.1:1$$ metrics=127.0.0.1:2$$"
echo "$name ready"
while :; do sleep 1 & wait $!; done
)";

std::vector<std::string> Lines(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return absl::StrSplit(s.str(), '\n', absl::SkipEmpty());
}

class LocalClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* svc : {"cachemanager", "worker", "router"}) {
      const std::string path = bins_.Path(std::string("kvfleet-") + svc);
      std::ofstream(path) << kFakeService;
      ::chmod(path.c_str(), 0755);
    }
    options_.binaries = {.cachemanager = bins_.Path("kvfleet-cachemanager"),
                         .worker = bins_.Path("kvfleet-worker"),
                         .router = bins_.Path("kvfleet-router")};
    options_.models = {"m.gguf"};
    options_.log_dir = logs_.path();
    options_.ready_timeout = absl::Seconds(20);
    options_.stop_timeout = absl::Seconds(20);
  }

  void Mark(const std::string& file) { std::ofstream(bins_.Path(file)) << ""; }

  testing::TempDir bins_;
  testing::TempDir logs_;
  LocalClusterOptions options_;
};

TEST_F(LocalClusterTest, StartsInDependencyOrderAndStopsInReverse) {
  std::vector<std::string> ready;
  options_.on_ready = [&](const ClusterMember& m) { ready.push_back(m.label); };
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options_);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_THAT(ready, ElementsAre("cachemanager", "worker-0", "worker-1", "router"));
  const std::string cm = (*cluster)->cachemanager().endpoints.grpc_address;
  EXPECT_THAT(cm, HasSubstr("127.0.0.1:1"));
  EXPECT_EQ((*cluster)->workers().size(), 2u);
  EXPECT_EQ((*cluster)->router().log_path, logs_.Path("router.log"));
  EXPECT_THAT(Lines(logs_.Path("worker-1.log")).at(0), HasSubstr("--worker-id worker-1"))
      << "a log starts with its command line";

  const std::vector<std::string> argv = Lines(bins_.Path("argv.txt"));
  ASSERT_EQ(argv.size(), 4u);
  EXPECT_THAT(argv[0], HasSubstr("cachemanager --listen 127.0.0.1:50050"));
  EXPECT_THAT(argv[1], HasSubstr("--cachemanager " + cm));
  EXPECT_THAT(argv[3], HasSubstr("router --listen 127.0.0.1:50060"));
  EXPECT_THAT(argv[3], Not(HasSubstr("--model"))) << "the router learns the model from the workers";
  EXPECT_THAT(argv[3], HasSubstr("--cachemanager " + cm));

  EXPECT_TRUE((*cluster)->CheckRunning().ok());
  ASSERT_TRUE((*cluster)->Stop().ok());
  const std::vector<std::string> stopped = Lines(bins_.Path("stopped.txt"));
  ASSERT_EQ(stopped.size(), 4u);
  EXPECT_EQ(stopped.front(), "router");
  EXPECT_THAT(std::vector<std::string>(stopped.begin() + 1, stopped.end() - 1),
              UnorderedElementsAre("worker-0", "worker-1"));
  EXPECT_EQ(stopped.back(), "cachemanager");
  EXPECT_TRUE((*cluster)->Stop().ok()) << "idempotent";
}

TEST_F(LocalClusterTest, AMemberThatFailsToStartIsNamedWithItsLogAndTheRestStop) {
  Mark("fail-worker-1");
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options_);
  ASSERT_FALSE(cluster.ok());
  const std::string message(cluster.status().message());
  EXPECT_THAT(message, HasSubstr("worker-1 (kvfleet-worker, pid"));
  EXPECT_THAT(message, HasSubstr(logs_.Path("worker-1.log")));
  EXPECT_THAT(message, HasSubstr("boom in worker-1"));
  EXPECT_THAT(Lines(bins_.Path("stopped.txt")), UnorderedElementsAre("worker-0", "cachemanager"));
}

TEST_F(LocalClusterTest, CheckRunningNamesAMemberThatDied) {
  options_.workers = 3;
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options_);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  (*cluster)->workers()[2].process->Signal(SIGKILL);
  ASSERT_TRUE((*cluster)->workers()[2].process->Wait(absl::Seconds(10)).ok());
  const absl::Status status = (*cluster)->CheckRunning();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("worker-2 (kvfleet-worker"));
  EXPECT_THAT(status.message(), HasSubstr("code 137"));
  EXPECT_THAT(status.message(), HasSubstr(logs_.Path("worker-2.log")));
  EXPECT_TRUE((*cluster)->Stop().ok()) << "the dead worker is CheckRunning's to report";
}

TEST_F(LocalClusterTest, AMemberThatIgnoresSigtermIsKilledAfterTheTimeout) {
  Mark("stubborn-worker-0");
  options_.stop_timeout = absl::Milliseconds(300);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options_);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const absl::Status status = (*cluster)->Stop();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("worker-0 (kvfleet-worker"));
  EXPECT_THAT(status.message(), HasSubstr("did not stop within 300ms"));
  EXPECT_FALSE((*cluster)->workers()[0].process->Running());
  EXPECT_THAT(Lines(bins_.Path("stopped.txt")), ElementsAre("router", "worker-1", "cachemanager"));
}

TEST_F(LocalClusterTest, HurryingKillsWhatIsLeftAtOnce) {
  Mark("stubborn-router");
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options_);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const absl::Time start = absl::Now();
  const absl::Status status = (*cluster)->Stop([] { return true; });
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "not the 20 s stop timeout";
  EXPECT_THAT(status.message(), HasSubstr("router (kvfleet-router, pid"));
  EXPECT_THAT(status.message(), HasSubstr("asked to hurry"));
  EXPECT_FALSE((*cluster)->router().process->Running());
}

TEST(LocalClusterArgsTest, WorkersJoinTheCachemanagerOnFreeLoopbackPorts) {
  LocalClusterOptions o;
  o.models = {"models/m.gguf"};
  o.threads_per_worker = 3;
  o.kv_cache_memory = "64MiB";
  EXPECT_THAT(WorkerArgs(o, 1, "127.0.0.1:4000"),
              ElementsAre("--model", "models/m.gguf", "--worker-id", "worker-1", "--listen", "127.0.0.1:0",
                          "--metrics-port", "0", "--metrics-host", "127.0.0.1", "--cachemanager", "127.0.0.1:4000",
                          "--threads", "3", "--kv-cache-memory", "64MiB", "--kv-transfer-listen", "127.0.0.1:0"));
  EXPECT_THAT(CachemanagerArgs(o),
              ElementsAre("--listen", "127.0.0.1:50050", "--metrics-port", "0", "--metrics-host", "127.0.0.1"));
  o.worker_extra_args = {"--speculation", "self", "--spec-self-layers", "20"};
  const std::vector<std::string> args = WorkerArgs(o, 0, "127.0.0.1:4000");
  EXPECT_THAT(std::vector<std::string>(args.end() - 4, args.end()),
              ElementsAre("--speculation", "self", "--spec-self-layers", "20"));
}

TEST(LocalClusterArgsTest, EachModelGetsItsWorkersInTurn) {
  LocalClusterOptions o;
  o.models = {"a.gguf", "b.gguf"};
  o.workers = 3;
  o.prefill_workers = 1;
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(WorkerModel(o, i), i < 3 ? "a.gguf" : "b.gguf") << i;
    const std::vector<std::string> args = WorkerArgs(o, i, "127.0.0.1:4000");
    EXPECT_EQ(args[1], WorkerModel(o, i));
    EXPECT_EQ(args[3], absl::StrCat("worker-", i)) << "ids run on across models";
    auto role = std::find(args.begin(), args.end(), "--role");
    ASSERT_NE(role, args.end());
    EXPECT_EQ(*(role + 1), i % 3 == 0 ? "prefill" : "decode") << "each model has its prefill worker";
  }
}

TEST(LocalClusterArgsTest, TheRouterGetsItsAddressesAndPolicy) {
  LocalClusterOptions o;
  o.models = {"m.gguf"};
  o.router_listen = "127.0.0.1:0";
  o.router_metrics_port = 0;
  // No --model: the router learns the models from the workers.
  EXPECT_THAT(RouterArgs(o, "127.0.0.1:4000"),
              ElementsAre("--listen", "127.0.0.1:0", "--metrics-port", "0", "--metrics-host", "127.0.0.1",
                          "--cachemanager", "127.0.0.1:4000"));
  o.policy = "round_robin";
  const std::vector<std::string> args = RouterArgs(o, "127.0.0.1:4000");
  EXPECT_THAT(std::vector<std::string>(args.end() - 2, args.end()), ElementsAre("--policy", "round_robin"));
  o.router_extra_args = {"--decision-memory", "60000"};
  const std::vector<std::string> tuned = RouterArgs(o, "127.0.0.1:4000");
  EXPECT_THAT(std::vector<std::string>(tuned.end() - 4, tuned.end()),
              ElementsAre("--policy", "round_robin", "--decision-memory", "60000"));
}

TEST(LocalClusterArgsTest, DefaultThreadsSplitTheMachine) {
  EXPECT_EQ(DefaultThreadsPerWorker(16, 2), 8);
  EXPECT_EQ(DefaultThreadsPerWorker(2, 4), 1);
  EXPECT_EQ(DefaultThreadsPerWorker(0, 2), 1) << "hardware_concurrency may be unknown (0)";
}

TEST(LocalClusterOptionsTest, ValidateNamesTheProblem) {
  LocalClusterOptions o;
  o.binaries = {.cachemanager = "c", .worker = "w", .router = "r"};
  o.models = {"m.gguf"};
  o.log_dir = "/tmp";
  EXPECT_TRUE(o.Validate().ok());
  LocalClusterOptions bad = o;
  bad.workers = 0;
  EXPECT_THAT(bad.Validate().message(), HasSubstr("workers"));
  bad = o;
  bad.binaries.router.clear();
  EXPECT_FALSE(bad.Validate().ok());
  bad = o;
  bad.router_metrics_port = 70000;
  EXPECT_FALSE(bad.Validate().ok());
  bad = o;
  bad.log_dir.clear();
  EXPECT_FALSE(bad.Validate().ok());
  bad = o;
  bad.models.clear();
  EXPECT_THAT(bad.Validate().message(), HasSubstr("model path"));
  bad = o;
  bad.models = {"m.gguf", "m.gguf"};
  EXPECT_THAT(bad.Validate().message(), HasSubstr("given twice"));
}

}  // namespace
}  // namespace kvfleet::cluster
