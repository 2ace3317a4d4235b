// LoRA adapters on a real kvfleet-worker: loaded at start (--lora), at run
// time (LoadLoraAdapter) and on first use (--lora-dir); requests name them;
// unknown names, bad directories, corrupt files and another base's adapters
// get errors that name the problem, and the worker keeps serving.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "model/lora/peft_adapter_writer.h"
#include "model/model.h"
#include "tests/integration/services/worker/worker_harness.h"
#include "tools/tiny_model/tiny_lora.h"

namespace kvfleet::testing {
namespace {

class WorkerLoraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteHarnessModel(dir_.Path("tiny.gguf")).ok());
    auto model = model::Model::Load(dir_.Path("tiny.gguf"));
    ASSERT_TRUE(model.ok()) << model.status();
    // a and c in the adapter directory; b elsewhere, loaded only by name.
    for (const auto& [name, seed] : {std::pair<std::string, uint32_t>{"a", 1}, {"b", 2}, {"c", 3}}) {
      const model::LoraAdapter adapter = tools::RandomLoraAdapter(**model, {.name = name, .rank = 4, .seed = seed});
      ASSERT_TRUE(model::WritePeftAdapter(adapter, dir_.Path((name == "b" ? "runtime/" : "adapters/") + name), {},
                                          &(*model)->config())
                      .ok());
    }
    // Recorded for other weights: refused by name.
    ASSERT_TRUE(model::WritePeftAdapter(tools::RandomLoraAdapter(**model, {.name = "other"}),
                                        dir_.Path("elsewhere/other"), std::string(64, 'e'))
                    .ok());
    std::filesystem::create_directories(dir_.Path("elsewhere/corrupt"));
    std::ofstream(dir_.Path("elsewhere/corrupt/adapter_config.json")) << "{\"peft_type\": \"LORA\", \"r\": ";
    ASSERT_TRUE(
        harness_
            .Start({"--lora", "a=" + dir_.Path("adapters/a"), "--max-loras", "2", "--lora-dir", dir_.Path("adapters")},
                   dir_.Path("tiny.gguf"))
            .ok());
  }

  StreamResult Run(const std::string& adapter) {
    v1::GenerateRequest r = TinyRequest(7, 20, 8);
    r.set_lora_adapter(adapter);
    return harness_.Generate(r);
  }

  TempDir dir_;
  WorkerHarness harness_;
};

TEST_F(WorkerLoraTest, ServesAdaptersLoadedAtStartAtRunTimeAndOnFirstUse) {
  absl::StatusOr<v1::WorkerInfo> info = harness_.Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->max_loras(), 2);
  EXPECT_EQ(info->max_lora_rank(), 16);
  ASSERT_EQ(info->lora_adapters_size(), 1);
  EXPECT_EQ(info->lora_adapters(0).name(), "a");
  EXPECT_EQ(info->lora_adapters(0).rank(), 4);
  EXPECT_EQ(info->lora_adapters(0).digest().size(), 64u);

  const StreamResult base = Run(""), a = Run("a");
  ASSERT_TRUE(base.status.ok()) << base.status.error_message();
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_NE(a.tokens, base.tokens) << "the adapter changes the tokens";
  const StreamResult a_again = Run("a");
  EXPECT_EQ(a_again.tokens, a.tokens);
  EXPECT_GT(a_again.usage.cached_prompt_tokens(), 0) << "its own KV, cached";

  // Loaded at run time.
  auto stub = harness_.Stub();
  {
    grpc::ClientContext ctx;
    v1::LoadLoraAdapterRequest req;
    req.set_name("b");
    req.set_path(dir_.Path("runtime/b"));
    v1::LoraAdapterInfo loaded;
    const grpc::Status s = stub->LoadLoraAdapter(&ctx, req, &loaded);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(loaded.rank(), 4);
    EXPECT_GT(loaded.load_seconds(), 0.0);
  }
  const StreamResult b = Run("b");
  ASSERT_TRUE(b.status.ok()) << b.status.error_message();
  EXPECT_NE(b.tokens, a.tokens);
  // On first use, from --lora-dir; three adapters now share two slots.
  const StreamResult c = Run("c");
  ASSERT_TRUE(c.status.ok()) << c.status.error_message();
  EXPECT_NE(c.tokens, base.tokens);
  EXPECT_EQ(Run("a").tokens, a.tokens) << "evicted and loaded again: the same tokens";
  absl::StatusOr<v1::WorkerStats> stats = harness_.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->resident_lora_adapters_size(), 2);
  absl::StatusOr<PrometheusScrape> scrape = harness_.ScrapeMetrics();
  ASSERT_TRUE(scrape.ok());
  EXPECT_GE(scrape->Value("kvfleet_worker_lora_loads_total").value_or(0), 4);
  EXPECT_GE(scrape->Value("kvfleet_worker_lora_evictions_total").value_or(0), 2);
  EXPECT_EQ(scrape->Value("kvfleet_worker_lora_slots").value_or(0), 2);

  // Unloaded: new requests are refused by name.
  {
    grpc::ClientContext ctx;
    v1::UnloadLoraAdapterRequest req;
    req.set_name("b");
    v1::UnloadLoraAdapterResponse out;
    ASSERT_TRUE(stub->UnloadLoraAdapter(&ctx, req, &out).ok());
  }
  const StreamResult gone = Run("b");
  EXPECT_EQ(gone.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(gone.status.error_message().find("load_lora_adapter"), std::string::npos) << gone.status.error_message();
}

TEST_F(WorkerLoraTest, BadAdaptersAreRefusedByNameAndTheWorkerKeepsServing) {
  const StreamResult unknown = Run("nope");
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(unknown.status.error_message().find("'nope'"), std::string::npos);

  auto stub = harness_.Stub();
  const auto load = [&](const std::string& name, const std::string& path) {
    grpc::ClientContext ctx;
    v1::LoadLoraAdapterRequest req;
    req.set_name(name);
    req.set_path(path);
    v1::LoraAdapterInfo out;
    return stub->LoadLoraAdapter(&ctx, req, &out);
  };
  const grpc::Status missing = load("x", dir_.Path("no/such/dir"));
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(missing.error_message().find("not a directory"), std::string::npos) << missing.error_message();
  const grpc::Status corrupt = load("x", dir_.Path("elsewhere/corrupt"));
  EXPECT_EQ(corrupt.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(corrupt.error_message().find("adapter_config.json"), std::string::npos) << corrupt.error_message();
  const grpc::Status other = load("x", dir_.Path("elsewhere/other"));
  EXPECT_EQ(other.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(other.error_message().find("fingerprint eeeeeeeeeeee"), std::string::npos) << other.error_message();
  const grpc::Status reserved = load("tiny", dir_.Path("runtime/b"));
  EXPECT_EQ(reserved.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const grpc::Status bad_name = load("../b", dir_.Path("runtime/b"));
  EXPECT_EQ(bad_name.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Run("../a").status.error_code(), grpc::StatusCode::NOT_FOUND) << "no path out of --lora-dir";

  EXPECT_TRUE(Run("a").status.ok()) << "still serving";
  EXPECT_TRUE(Run("").status.ok());
}

}  // namespace
}  // namespace kvfleet::testing
