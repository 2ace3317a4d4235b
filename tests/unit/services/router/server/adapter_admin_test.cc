// The admin's LoRA loads over a pool of fake workers: every worker of the
// model asked at once, failures named, and probes reconciling latecomers.
#include "services/router/server/adapter_admin.h"

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

// A worker of model "m" that loads whatever a path names unless told to refuse.
struct FakeWorker {
  std::shared_ptr<NiceMock<v1::MockWorkerStub>> stub = std::make_shared<NiceMock<v1::MockWorkerStub>>();
  std::mutex mu;
  std::set<std::string> loaded;
  grpc::Status refuse_loads = grpc::Status::OK;
  std::atomic<int> loads{0};

  FakeWorker() {
    ON_CALL(*stub, GetInfo(_, _, _)).WillByDefault([](auto*, const auto&, v1::WorkerInfo* info) {
      info->set_model_id("m");
      info->set_block_size(16);
      return grpc::Status::OK;
    });
    ON_CALL(*stub, GetStats(_, _, _)).WillByDefault([this](auto*, const auto&, v1::WorkerStats* stats) {
      std::lock_guard<std::mutex> lock(mu);
      for (const std::string& name : loaded) stats->add_lora_adapters()->set_name(name);
      return grpc::Status::OK;
    });
    ON_CALL(*stub, LoadLoraAdapter(_, _, _))
        .WillByDefault([this](auto*, const v1::LoadLoraAdapterRequest& r, v1::LoraAdapterInfo* info) {
          std::lock_guard<std::mutex> lock(mu);
          ++loads;
          if (!refuse_loads.ok()) return refuse_loads;
          loaded.insert(r.name());
          info->set_name(r.name());
          info->set_digest(std::string(64, 'd'));
          info->set_rank(8);
          return grpc::Status::OK;
        });
    ON_CALL(*stub, UnloadLoraAdapter(_, _, _))
        .WillByDefault([this](auto*, const v1::UnloadLoraAdapterRequest& r, v1::UnloadLoraAdapterResponse*) {
          std::lock_guard<std::mutex> lock(mu);
          return loaded.erase(r.name()) > 0 ? grpc::Status::OK : grpc::Status(grpc::StatusCode::NOT_FOUND, "none");
        });
  }
  bool Has(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    return loaded.contains(name);
  }
  void Refuse(grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    refuse_loads = std::move(s);
  }
};

bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 500; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

class AdapterAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* id : {"a", "b", "c"}) workers_[id] = std::make_unique<FakeWorker>();
    pool_ = std::make_unique<WorkerPool>(
        WorkerPoolOptions{.probe_interval = std::chrono::milliseconds(10),
                          .stub_factory = [this](const std::string& e) { return workers_.at(e)->stub; }});
    admin_ = std::make_unique<AdapterAdmin>(*pool_, AdapterAdminOptions{.call_timeout = std::chrono::seconds(5),
                                                                        .retry_after = std::chrono::milliseconds(50)});
    pool_->AddObserver(admin_.get());
    pool_->Upsert("a", "a", 0);
    pool_->Upsert("b", "b", 0);
    pool_->Start();
    ASSERT_TRUE(Eventually([&] { return pool_->Routable("m").size() == 2; }));
  }
  void TearDown() override { pool_->Stop(); }

  std::map<std::string, std::unique_ptr<FakeWorker>> workers_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<AdapterAdmin> admin_;
};

TEST_F(AdapterAdminTest, LoadsOnEveryWorkerAndOnOnesThatJoinLater) {
  absl::StatusOr<AdapterChange> loaded = admin_->Load("m", "sql", "/adapters/sql");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->workers, 2);
  EXPECT_EQ(loaded->digest, std::string(64, 'd'));
  EXPECT_EQ(loaded->rank, 8);
  EXPECT_TRUE(workers_["a"]->Has("sql") && workers_["b"]->Has("sql"));
  pool_->Upsert("c", "c", 0);
  EXPECT_TRUE(Eventually([&] { return workers_["c"]->Has("sql"); })) << "a worker that joins later gets it";
  // One that loses it (a restart) gets it back; a load only when missing.
  const int before = workers_["a"]->loads;
  {
    std::lock_guard<std::mutex> lock(workers_["a"]->mu);
    workers_["a"]->loaded.clear();
  }
  EXPECT_TRUE(Eventually([&] { return workers_["a"]->Has("sql"); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(workers_["a"]->loads, before + 1);

  absl::StatusOr<AdapterChange> unloaded = admin_->Unload("m", "sql");
  ASSERT_TRUE(unloaded.ok()) << unloaded.status();
  EXPECT_EQ(unloaded->workers, 3);
  // A worker that comes back holding it (its own --lora) has it taken away.
  {
    std::lock_guard<std::mutex> lock(workers_["b"]->mu);
    workers_["b"]->loaded.insert("sql");
  }
  EXPECT_TRUE(Eventually([&] { return !workers_["b"]->Has("sql"); }));
  EXPECT_EQ(admin_->Unload("m", "sql").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(AdapterAdminTest, ABadAdapterIsRefusedAsTheWorkersSayAndNothingIsRemembered) {
  for (auto& [id, w] : workers_) w->Refuse(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "use_dora is set"));
  const absl::Status refused = admin_->Load("m", "dora", "/adapters/dora").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("use_dora"), std::string_view::npos) << refused;
  workers_["c"]->Refuse(grpc::Status::OK);
  pool_->Upsert("c", "c", 0);
  ASSERT_TRUE(Eventually([&] { return pool_->Routable("m").size() == 3; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(workers_["c"]->loads, 0) << "a refused adapter is not pushed to newcomers";
  EXPECT_EQ(admin_->Load("none", "x", "/x").status().code(), absl::StatusCode::kUnavailable) << "no such model";
}

TEST_F(AdapterAdminTest, AWorkerThatFailsIsNamedAndAskedAgainLater) {
  workers_["b"]->Refuse(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "disk full"));
  const absl::Status partial = admin_->Load("m", "sql", "/adapters/sql").status();
  EXPECT_EQ(partial.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(partial.message().find("loaded on 1 of 2 workers"), std::string_view::npos) << partial;
  EXPECT_NE(partial.message().find("b: disk full"), std::string_view::npos) << partial;
  EXPECT_TRUE(workers_["a"]->Has("sql"));
  workers_["b"]->Refuse(grpc::Status::OK);
  EXPECT_TRUE(Eventually([&] { return workers_["b"]->Has("sql"); })) << "asked again after retry_after";
}

}  // namespace
}  // namespace kvfleet::router
