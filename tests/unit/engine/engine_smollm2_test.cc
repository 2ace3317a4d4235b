// Engine exactness on the real default model, for a handful of chat prompts:
// alone vs batched, chunked prefill, prefix-cache hits, preemption and
// speculative decoding with each proposer.
#include <gtest/gtest.h>

#include <map>

#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "engine/engine.h"
#include "engine/executor/executor_factory.h"
#include "tests/testing/test_executor.h"
#include "engine/spec/proposer_set.h"
#include "tests/testing/collecting_sink.h"
#include "tests/testing/default_model.h"

namespace kvfleet::engine {
namespace {

using ::kvfleet::testing::kDefaultModelPath;

class SmolLm2EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!kvfleet::testing::DefaultModelFetched()) return;
    model_ = model::Model::Load(kDefaultModelPath)->release();
    auto tok = *model::CreateTokenizer(model_->vocabulary());
    auto chat = *model::ChatTemplate::FromTemplateSource(model_->vocabulary().chat_template);
    const char* questions[] = {
        "What is the capital of France?", "Name three colors.", "Write one sentence about the sea.",
        "What is 12 plus 30?",
        // Copying work, where drafts get accepted.
        "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the river bank."};
    uint64_t id = 1;
    for (const char* q : questions) {
      const model::ChatMessage message{.role = "user", .content = q};
      const std::string text = *chat.Apply({&message, 1}, true);
      EngineRequest r{.id = RequestId(id),
                      .prompt = *tok->Encode(text, {.parse_special = true}),
                      .stopping = {.max_tokens = 24, .ignore_eos = true}};
      // The fourth samples with a seed; the others are greedy.
      r.sampling = id == 4 ? SamplingParams{.temperature = 0.9f, .top_p = 0.95f, .seed = 11}
                           : SamplingParams{.temperature = 0.0f};
      requests_->push_back(r);
      ++id;
    }
  }
  static void TearDownTestSuite() { delete model_; }

  void SetUp() override {
    if (model_ == nullptr) GTEST_SKIP() << kvfleet::testing::kDefaultModelMissing;
  }

  static std::map<uint64_t, std::vector<model::TokenId>> Run(const std::vector<EngineRequest>& requests,
                                                             SchedulerConfig config, int64_t blocks,
                                                             EngineStats* stats = nullptr,
                                                             const std::string& proposer = "off",
                                                             CpuActivations activations = CpuActivations::kF32) {
    auto executor = testing::NewExecutor(*model_, {.num_blocks = blocks,
                                                   .block_size = 16,
                                                   .num_threads = 2,
                                                   .cpu_activations = activations,
                                                   .limits = EngineOptions::ExecutorLimitsFor(config, 5)});
    // The draft model is the target file itself: a real second model with
    // its own cache, whose greedy guesses the target always accepts.
    const spec::ProposerConfig loaded =
        proposer == "off" ? spec::ProposerConfig{}
                          : spec::ProposerConfig{.self_layers = 12,
                                                 .draft_model_path = kDefaultModelPath,
                                                 .num_threads = 2,
                                                 .cpu_activations = activations};
    auto proposers = spec::ProposerSet::Load(loaded, *executor, CreateExecutor);
    EXPECT_TRUE(proposers.ok()) << proposers.status();
    EngineOptions options{.model_id = "smollm2", .scheduler = config};
    options.proposers = proposers->pointers();
    options.speculation = {.proposer = proposer, .max_draft_tokens = 5, .adaptive = false};
    Engine engine(*executor, options);
    std::map<uint64_t, kvfleet::testing::CollectingSink> sinks;
    for (const auto& r : requests) EXPECT_TRUE(engine.Submit(r, &sinks[r.id.value()]).ok());
    while (engine.HasWork()) EXPECT_TRUE(engine.Step().ok());
    if (stats != nullptr) *stats = engine.Stats();
    std::map<uint64_t, std::vector<model::TokenId>> out;
    for (auto& [id, sink] : sinks) out[id] = sink.tokens();
    return out;
  }

  static model::Model* model_;
  static std::vector<EngineRequest>* requests_;
};

model::Model* SmolLm2EngineTest::model_ = nullptr;
std::vector<EngineRequest>* SmolLm2EngineTest::requests_ = new std::vector<EngineRequest>();

TEST_F(SmolLm2EngineTest, AloneBatchedChunkedCachedAndPreemptedAgree) {
  std::map<uint64_t, std::vector<model::TokenId>> alone;
  for (const auto& r : *requests_) alone[r.id.value()] = Run({r}, {.max_num_batched_tokens = 512}, 64)[r.id.value()];
  for (const auto& [id, tokens] : alone) EXPECT_EQ(tokens.size(), 24u) << id;

  EXPECT_EQ(Run(*requests_, {.max_num_batched_tokens = 512}, 64), alone) << "batched";
  EXPECT_EQ(Run(*requests_, {.max_num_batched_tokens = 7}, 64), alone) << "chunks of 7";

  // One at a time: every request after the first hits the shared system prompt.
  EngineStats cached;
  EXPECT_EQ(Run(*requests_, {.max_num_batched_tokens = 512, .max_num_seqs = 1}, 64, &cached), alone) << "cached";
  EXPECT_GE(cached.prefix_hit_tokens, 3 * 16);

  // Each request needs 4 blocks of 16 at its longest (about 40 + 24 tokens);
  // 6 blocks hold one and a half.
  EngineStats tight;
  EXPECT_EQ(Run(*requests_, {.max_num_batched_tokens = 512, .growth_reserve_blocks = 0}, 6, &tight), alone)
      << "preempted";
  EXPECT_GT(tight.preemptions, 0);

  for (const std::string proposer : {"ngram", "self", "draft"}) {
    EngineStats spec;
    EXPECT_EQ(Run(*requests_, {.max_num_batched_tokens = 512}, 64, &spec, proposer), alone) << proposer;
    int64_t drafted = 0, accepted = 0;
    for (const SpeculationStats& p : spec.speculation) {
      drafted += p.drafted_tokens;
      accepted += p.accepted_tokens;
    }
    EXPECT_GT(drafted, 0) << proposer;
    EXPECT_GT(accepted, 0) << proposer;
  }
}

// The 8-bit activation path keeps every exactness rule: its tokens may
// differ from float32's, but not between alone, batched, chunked, cached,
// preempted and speculative (n-gram, self, draft) runs.
TEST_F(SmolLm2EngineTest, EightBitActivationsAgreeAloneBatchedChunkedCachedPreemptedAndSpeculative) {
  const CpuActivations q8 = CpuActivations::kQ8;
  std::map<uint64_t, std::vector<model::TokenId>> alone;
  for (const auto& r : *requests_) {
    alone[r.id.value()] = Run({r}, {.max_num_batched_tokens = 512}, 64, nullptr, "off", q8)[r.id.value()];
  }
  EXPECT_EQ(Run(*requests_, {.max_num_batched_tokens = 512}, 64, nullptr, "off", q8), alone) << "batched";
  EXPECT_EQ(Run(*requests_, {.max_num_batched_tokens = 7}, 64, nullptr, "off", q8), alone) << "chunks of 7";
  EngineStats cached;
  EXPECT_EQ(Run(*requests_, {.max_num_batched_tokens = 512, .max_num_seqs = 1}, 64, &cached, "off", q8), alone)
      << "cached";
  EXPECT_GE(cached.prefix_hit_tokens, 3 * 16);
  EngineStats tight;
  EXPECT_EQ(Run(*requests_, {.max_num_batched_tokens = 512, .growth_reserve_blocks = 0}, 6, &tight, "off", q8), alone)
      << "preempted";
  EXPECT_GT(tight.preemptions, 0);
  for (const std::string proposer : {"ngram", "self", "draft"}) {
    EngineStats spec;
    EXPECT_EQ(Run(*requests_, {.max_num_batched_tokens = 512}, 64, &spec, proposer, q8), alone) << proposer;
    int64_t accepted = 0;
    for (const SpeculationStats& p : spec.speculation) accepted += p.accepted_tokens;
    EXPECT_GT(accepted, 0) << proposer;
  }
  // Not asserted: that the answers match float32's. On this model they do
  // not (8-bit activations move its logits by ~24%; kernels/cpu/README.md).
}

}  // namespace
}  // namespace kvfleet::engine
