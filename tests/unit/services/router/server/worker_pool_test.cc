// WorkerPool with fake workers (gMock stubs, no network): a worker is
// routable only once it answered and its admission agreed, listed under its
// own model only, out of rotation after a failed call until a probe
// succeeds again, and kept through a listing that omits it while it still
// answers.
#include "services/router/server/worker_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "kvfleet/v1/worker_mock.grpc.pb.h"

namespace kvfleet::router {
namespace {

using ::testing::_;
using ::testing::NiceMock;

struct FakeWorker {
  std::shared_ptr<NiceMock<v1::MockWorkerStub>> stub = std::make_shared<NiceMock<v1::MockWorkerStub>>();
  std::atomic<bool> up{true};
  std::string model = "m";
  int32_t block = 16;

  FakeWorker() {
    ON_CALL(*stub, GetInfo(_, _, _)).WillByDefault([this](auto*, const auto&, v1::WorkerInfo* info) {
      if (!up) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "down");
      info->set_model_id(model);
      info->set_block_size(block);
      info->set_max_num_seqs(4);
      return grpc::Status::OK;
    });
    ON_CALL(*stub, GetStats(_, _, _)).WillByDefault([this](auto*, const auto&, v1::WorkerStats* stats) {
      if (!up) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "down");
      stats->set_running(2);
      return grpc::Status::OK;
    });
  }
};

// Refuses the workers named in `refused`; records what it was told.
class FakeAdmission final : public ModelAdmission {
 public:
  absl::Status Admit(const std::string& worker_id, const v1::WorkerInfo& info, v1::Worker::StubInterface&) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++asked_[worker_id];
    if (refused_.contains(worker_id)) return absl::FailedPreconditionError("refused for the test");
    return absl::OkStatus();
  }
  void Release(const std::string& worker_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    released_.push_back(worker_id);
  }
  void Refuse(const std::string& id, bool refuse) {
    std::lock_guard<std::mutex> lock(mu_);
    if (refuse) {
      refused_.insert(id);
    } else {
      refused_.erase(id);
    }
  }
  int Asked(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return asked_[id];
  }
  std::vector<std::string> Released() {
    std::lock_guard<std::mutex> lock(mu_);
    return released_;
  }

 private:
  std::mutex mu_;
  std::set<std::string> refused_;
  std::map<std::string, int> asked_;
  std::vector<std::string> released_;
};

bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 500; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

class WorkerPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    workers_["a"] = std::make_unique<FakeWorker>();
    workers_["b"] = std::make_unique<FakeWorker>();
    workers_["b"]->model = "other";
    pool_ = std::make_unique<WorkerPool>(
        WorkerPoolOptions{.admission = &admission_,
                          .probe_interval = std::chrono::milliseconds(10),
                          .admission_retry_first = std::chrono::milliseconds(10),
                          .admission_retry_most = std::chrono::milliseconds(40),
                          .stub_factory = [this](const std::string& e) { return workers_.at(e)->stub; }});
    pool_->Start();
  }
  void TearDown() override { pool_->Stop(); }

  size_t Routable() { return pool_->Routable("m").size(); }

  FakeAdmission admission_;
  std::map<std::string, std::unique_ptr<FakeWorker>> workers_;
  std::unique_ptr<WorkerPool> pool_;
};

TEST_F(WorkerPoolTest, AWorkerIsRoutableOnceItAnswersWithItsInfoAndLoad) {
  EXPECT_EQ(Routable(), 0u);
  pool_->Upsert("a", "a", 1);
  ASSERT_TRUE(Eventually([&] { return Routable() == 1; }));
  const PooledWorker w = pool_->Routable("m").front();
  EXPECT_EQ(w.worker_id, "a");
  EXPECT_EQ(w.block_size, 16);
  EXPECT_EQ(w.max_num_seqs, 4);
  EXPECT_EQ(w.stats.running(), 2);
  EXPECT_EQ(pool_->block_size("m"), 16);
  EXPECT_EQ(pool_->block_size("other"), 0) << "no worker of it";
}

TEST_F(WorkerPoolTest, EachModelsWorkersAreListedUnderItAlone) {
  workers_["b"]->block = 32;
  pool_->Upsert("b", "b", 1);
  pool_->Upsert("a", "a", 1);
  ASSERT_TRUE(Eventually([&] { return pool_->Routable("").size() == 2; }));
  ASSERT_EQ(Routable(), 1u);
  EXPECT_EQ(pool_->Routable("m").front().worker_id, "a");
  ASSERT_EQ(pool_->Routable("other").size(), 1u);
  EXPECT_EQ(pool_->Routable("other").front().worker_id, "b");
  EXPECT_TRUE(pool_->Routable("nobody").empty());
  EXPECT_EQ(pool_->block_size("m"), 16);
  EXPECT_EQ(pool_->block_size("other"), 32);
  EXPECT_EQ(pool_->Counts("m").routable, 1);
  EXPECT_EQ(pool_->Counts("other").routable, 1);
  EXPECT_EQ(pool_->Counts().routable, 2);
}

TEST_F(WorkerPoolTest, ARefusedWorkerIsAskedAgainUntilAdmittedAndReleasedWhenItLeaves) {
  admission_.Refuse("a", true);
  pool_->Upsert("a", "a", 1);
  ASSERT_TRUE(Eventually([&] { return admission_.Asked("a") >= 3; })) << "asked again each probe";
  EXPECT_EQ(Routable(), 0u);
  EXPECT_EQ(pool_->Counts("m").unreachable, 1) << "known, not routable";
  admission_.Refuse("a", false);
  ASSERT_TRUE(Eventually([&] { return Routable() == 1; }));
  const int asked = admission_.Asked("a");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(admission_.Asked("a"), asked) << "an admitted worker is not asked again";
  pool_->Upsert("a", "a", 2);  // a new incarnation is admitted afresh
  EXPECT_EQ(admission_.Released(), (std::vector<std::string>{"a"}));
  ASSERT_TRUE(Eventually([&] { return Routable() == 1 && admission_.Asked("a") > asked; }));
  EXPECT_TRUE(pool_->Remove("a", 2));
  EXPECT_EQ(admission_.Released(), (std::vector<std::string>{"a", "a"}));
}

TEST_F(WorkerPoolTest, AWorkerBackFromUnreachableIsDescribedAndAdmittedAfresh) {
  pool_->Upsert("a", "a", 0);  // a static --workers entry: the same incarnation whatever it runs
  ASSERT_TRUE(Eventually([&] { return Routable() == 1; }));
  workers_["a"]->up = false;
  pool_->ReportFailure("a");
  EXPECT_EQ(admission_.Released(), (std::vector<std::string>{"a"})) << "it no longer holds its model";
  // It comes back at the same address serving another model.
  workers_["a"]->model = "other";
  workers_["a"]->up = true;
  ASSERT_TRUE(Eventually([&] { return pool_->Routable("other").size() == 1; }));
  EXPECT_EQ(Routable(), 0u);
  EXPECT_GE(admission_.Asked("a"), 2);
}

TEST_F(WorkerPoolTest, AFailedCallTakesAWorkerOutUntilAProbeSucceeds) {
  pool_->Upsert("a", "a", 1);
  ASSERT_TRUE(Eventually([&] { return Routable() == 1; }));
  workers_["a"]->up = false;
  pool_->ReportFailure("a");
  EXPECT_EQ(Routable(), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(Routable(), 0u);  // probes fail too
  workers_["a"]->up = true;
  EXPECT_TRUE(Eventually([&] { return Routable() == 1; }));
}

TEST_F(WorkerPoolTest, AListingKeepsReachableWorkersAndDropsDeadOnes) {
  workers_["c"] = std::make_unique<FakeWorker>();
  pool_->Upsert("a", "a", 1);
  pool_->Upsert("c", "c", 1);
  ASSERT_TRUE(Eventually([&] { return Routable() == 2; }));
  // A cachemanager that just restarted lists nobody: both still answer.
  EXPECT_TRUE(pool_->RemoveUnreachableExcept({}).empty());
  workers_["c"]->up = false;
  pool_->ReportFailure("c");
  EXPECT_EQ(pool_->RemoveUnreachableExcept({}), (std::vector<std::string>{"c"}));
  EXPECT_EQ(pool_->Counts().known, 1);
}

TEST_F(WorkerPoolTest, RemoveIgnoresAReplacedIncarnation) {
  pool_->Upsert("a", "a", 1);
  pool_->Upsert("a", "a", 2);  // restarted
  EXPECT_FALSE(pool_->Remove("a", 1));
  EXPECT_EQ(pool_->Counts().known, 1);
  EXPECT_TRUE(pool_->Remove("a", 2));
  EXPECT_EQ(pool_->Counts().known, 0);
}

TEST_F(WorkerPoolTest, DrainingWorkersAreFlagged) {
  pool_->Upsert("a", "a", 1);
  ASSERT_TRUE(Eventually([&] { return Routable() == 1; }));
  pool_->SetDraining("a");
  EXPECT_TRUE(pool_->Routable("m").front().draining);
  EXPECT_EQ(pool_->Counts().draining, 1);
}

}  // namespace
}  // namespace kvfleet::router
