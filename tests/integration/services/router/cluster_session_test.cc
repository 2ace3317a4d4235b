// Sessions end to end on the real default model: a conversation sent with a
// session_id stays on one worker, and each turn reuses the KV of the turn
// before it through the chat template, the generated answer included (the
// router re-renders and re-tokenizes the history; the test measures how much
// of the previous turn's prompt and answer the next turn found cached).
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "tests/integration/services/router/router_cluster.h"
#include "tests/testing/default_model.h"

namespace kvfleet::testing {
namespace {

constexpr int kBlockSize = 16;

TEST(ClusterSessionTest, AConversationStaysOnItsWorkerAndReusesEachTurnsKv) {
  if (!DefaultModelFetched()) GTEST_SKIP() << kDefaultModelMissing;
  RouterCluster cluster;
  ASSERT_TRUE(cluster
                  .Start({.workers = 3,
                          .model_path = kDefaultModelPath,
                          .worker_args = {"--kv-cache-memory", "64MiB", "--threads", "1"}})
                  .ok());
  v1::ChatRequest chat;
  chat.mutable_options()->set_session_id("conversation-42");
  chat.mutable_options()->mutable_stopping()->set_max_tokens(40);
  v1::ChatMessage* system = chat.add_messages();
  system->set_role("system");
  system->set_content(
      "You are a helpful travel assistant. You answer questions about European cities: their history, their "
      "sights, their food and how to get around. Keep answers short and practical, and use plain text.");
  const char* questions[] = {"List five cities in France, separated by commas.",
                             "Now list five cities in Italy, separated by commas.",
                             "Which of all those cities would you visit first, and why?"};
  std::set<std::string> workers;
  int64_t previous_tokens = 0;  // the previous turn's prompt + answer
  for (int turn = 0; turn < 3; ++turn) {
    v1::ChatMessage* user = chat.add_messages();
    user->set_role("user");
    user->set_content(questions[turn]);
    const TextStreamResult r = cluster.Chat(chat);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    ASSERT_FALSE(r.worker_ids.empty());
    workers.insert(r.worker_ids.front());
    if (turn > 0) {
      // The previous turn's full blocks: its KV, up to the last token
      // (whose KV is never computed), in whole blocks.
      const int64_t reusable = ((previous_tokens - 1) / kBlockSize) * kBlockSize;
      std::printf("session turn %d: %d of %lld reusable tokens of turn %d (prompt + answer) found cached\n", turn + 1,
                  r.usage.cached_prompt_tokens(), static_cast<long long>(reusable), turn);
      EXPECT_GE(r.usage.cached_prompt_tokens(), reusable) << "turn " << turn + 1;
    }
    previous_tokens = r.usage.prompt_tokens() + r.usage.generated_tokens();
    v1::ChatMessage* answer = chat.add_messages();
    answer->set_role("assistant");
    answer->set_content(r.text);
  }
  EXPECT_EQ(workers.size(), 1u) << "the conversation moved between workers";
}

}  // namespace
}  // namespace kvfleet::testing
