// Peer prefix fetch between real kvfleet-worker processes over gRPC: worker
// B, told that worker A holds a prompt's leading blocks, copies them from
// A's KV transfer port and computes only the rest; its tokens equal those
// of worker C computing everything, greedy and seeded, on the tiny model,
// on SmolLM2 (its default 8-bit KV) and on Gemma 3 270M past its 512-token
// sliding window (the window pages travel too). A peer that corrupts what it sends, or that runs another
// KV format, or that cuts a block short, is refused and B computes, with
// the same tokens.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/integration/services/worker/worker_harness.h"
#include "tests/testing/default_model.h"

namespace kvfleet::testing {
namespace {

constexpr int kPromptTokens = 100;  // 6 full blocks of 16 and a partial one
constexpr int kFullBlocks = kPromptTokens / 16;

v1::GenerateRequest Request(bool seeded, int prompt_tokens = kPromptTokens) {
  v1::GenerateRequest r = TinyRequest(/*seed=*/7, prompt_tokens, /*max_tokens=*/12);
  if (seeded) {
    r.mutable_sampling()->set_temperature(0.8f);
    r.mutable_sampling()->set_seed(11);
    r.set_cache_salt("seeded");  // other block hashes: pulled afresh, not hit from the greedy run's pull
  }
  return r;
}

v1::GenerateRequest FromPeer(v1::GenerateRequest r, const WorkerHarness& peer) {
  r.mutable_kv_peer()->set_endpoint(const_cast<WorkerHarness&>(peer).worker().kv_transfer_address());
  r.mutable_kv_peer()->set_blocks(r.prompt_token_ids_size() / 16);
  return r;
}

void ExpectPulledTokensEqualComputed(const std::string& model, int prompt_tokens = kPromptTokens) {
  const int full_blocks = prompt_tokens / 16;
  WorkerHarness a, b, c;
  ASSERT_TRUE(a.Start({"--kv-transfer-listen", "127.0.0.1:0"}, model).ok());
  ASSERT_FALSE(a.worker().kv_transfer_address().empty()) << "the listening line names the transfer port";
  {
    grpc::ClientContext ctx;
    v1::WorkerInfo info;
    ASSERT_TRUE(a.Stub()->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok());
    EXPECT_EQ(info.kv_transfer_endpoint(), a.worker().kv_transfer_address()) << "GetInfo names it for routers";
  }
  ASSERT_TRUE(b.Start({}, model).ok());
  ASSERT_TRUE(c.Start({}, model).ok());
  for (const bool seeded : {false, true}) {
    const v1::GenerateRequest r = Request(seeded, prompt_tokens);
    const StreamResult computed = c.Generate(r);
    ASSERT_TRUE(computed.status.ok()) << computed.status.error_message();
    ASSERT_TRUE(a.Generate(r).status.ok());  // A now holds the prefix
    const StreamResult pulled = b.Generate(FromPeer(r, a));
    ASSERT_TRUE(pulled.status.ok()) << pulled.status.error_message();
    EXPECT_EQ(pulled.tokens, computed.tokens) << model << ", seeded " << seeded;
    EXPECT_EQ(computed.usage.cached_prompt_tokens(), 0);
    EXPECT_EQ(pulled.usage.cached_prompt_tokens(), full_blocks * 16) << "the partial block is computed";
  }
  auto scrape = b.ScrapeMetrics();
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  EXPECT_EQ(scrape->Value("kvfleet_worker_kv_peer_pulls_total", {{"outcome", "done"}}), 2);
  // With a sliding window, the window pages the hit's end reaches travel too.
  EXPECT_GE(scrape->Value("kvfleet_worker_kv_peer_blocks_total", {{"direction", "pulled"}}), 2 * full_blocks);
  auto served = a.ScrapeMetrics();
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->Value("kvfleet_worker_kv_peer_blocks_total", {{"direction", "served"}}),
            scrape->Value("kvfleet_worker_kv_peer_blocks_total", {{"direction", "pulled"}}));
}

TEST(KvPeerFetchTest, APulledPrefixGivesTheTokensOfComputingItOnTheTinyModel) {
  TempDir dir;
  ASSERT_TRUE(WriteHarnessModel(dir.Path("tiny.gguf")).ok());
  ExpectPulledTokensEqualComputed(dir.Path("tiny.gguf"));
}

TEST(KvPeerFetchTest, APulledPrefixGivesTheTokensOfComputingItOnSmolLm2) {
  if (!DefaultModelFetched()) GTEST_SKIP() << kDefaultModelMissing;
  ExpectPulledTokensEqualComputed(kDefaultModelPath);
}

TEST(KvPeerFetchTest, APulledPrefixPastTheSlidingWindowGivesTheTokensOfComputingItOnGemma3) {
  const std::string gemma = KVFLEET_SOURCE_DIR "/models/gemma-3-270m.Q4_K_M.gguf";
  if (!std::filesystem::exists(gemma)) GTEST_SKIP() << "scripts/fetch_model.sh gemma-3-270m fetches " << gemma;
  ExpectPulledTokensEqualComputed(gemma, 700);  // past the 512-token window: 43 full blocks
}

TEST(KvPeerFetchTest, ACorruptOrForeignPeerIsRefusedAndThePrefixComputed) {
  TempDir dir;
  const std::string model = dir.Path("tiny.gguf");
  ASSERT_TRUE(WriteHarnessModel(model).ok());
  WorkerHarness corrupt, truncated, foreign, b, c;
  ASSERT_TRUE(
      corrupt.Start({"--kv-transfer-listen", "127.0.0.1:0", "--fault-kv-transfer", "corrupt-chunk"}, model).ok());
  ASSERT_TRUE(
      truncated.Start({"--kv-transfer-listen", "127.0.0.1:0", "--fault-kv-transfer", "truncate-block"}, model).ok());
  ASSERT_TRUE(foreign.Start({"--kv-transfer-listen", "127.0.0.1:0", "--kv-cache-dtype", "int8"}, model).ok());
  ASSERT_TRUE(b.Start({}, model).ok());
  ASSERT_TRUE(c.Start({}, model).ok());
  const v1::GenerateRequest r = Request(/*seeded=*/true);
  const StreamResult computed = c.Generate(r);
  ASSERT_TRUE(computed.status.ok());
  for (WorkerHarness* peer : {&corrupt, &truncated, &foreign}) {
    v1::GenerateRequest again = FromPeer(r, *peer);
    again.set_cache_salt(peer == &corrupt ? "a" : peer == &truncated ? "t" : "b");  // nothing earlier to hit
    v1::GenerateRequest held = again;
    held.clear_kv_peer();
    ASSERT_TRUE(peer->Generate(held).status.ok());  // the peer holds this salt's blocks
    const StreamResult pulled = b.Generate(again);
    ASSERT_TRUE(pulled.status.ok()) << "a failed pull never fails the request: " << pulled.status.error_message();
    EXPECT_EQ(pulled.usage.cached_prompt_tokens(), 0) << (peer == &foreign ? "foreign" : "damaged");
    EXPECT_EQ(pulled.tokens, computed.tokens) << "a salt changes block names, never tokens";
  }
  auto scrape = b.ScrapeMetrics();
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  EXPECT_EQ(scrape->Value("kvfleet_worker_kv_peer_pulls_total", {{"outcome", "data_loss"}}), 2);
  EXPECT_EQ(scrape->Value("kvfleet_worker_kv_peer_pulls_total", {{"outcome", "failed_precondition"}}), 1);
  EXPECT_EQ(scrape->Value("kvfleet_worker_kv_peer_blocks_total", {{"direction", "pulled"}}), 0);
}

}  // namespace
}  // namespace kvfleet::testing
