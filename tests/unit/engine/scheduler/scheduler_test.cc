// The scheduler without a model: a step "computes" what was scheduled, and a
// request that reaches its end gets a fake token.
#include "engine/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>

namespace kvfleet::engine {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  void Init(SchedulerConfig config, int32_t num_blocks, std::vector<int64_t> group_windows = {0},
            RunGate* gate = nullptr) {
    config_ = config;
    pool_ = std::make_unique<BlockPool>(num_blocks, nullptr);
    kv_ = std::make_unique<KvCacheManager>(*pool_, 4, "m", true, std::move(group_windows));
    scheduler_ = std::make_unique<Scheduler>(config, *kv_, gate);
  }

  Request* Add(int prompt_len, int max_tokens, int priority = 0) {
    EngineRequest params{.id = RequestId(next_id_), .priority = priority};
    for (int i = 0; i < prompt_len; ++i) params.prompt.push_back(static_cast<model::TokenId>((next_id_ * 31 + i) % 97));
    params.stopping.max_tokens = max_tokens;
    requests_.push_back(std::make_unique<Request>(std::move(params), 0, next_id_, nullptr));
    ++next_id_;
    scheduler_->Add(requests_.back().get());
    return requests_.back().get();
  }

  // One step: returns what was scheduled after applying it.
  SchedulerOutput Step() {
    SchedulerOutput out = scheduler_->Schedule();
    EXPECT_LE(out.num_tokens, config_.max_num_batched_tokens);
    EXPECT_LE(static_cast<int32_t>(out.chunks.size()), config_.max_num_seqs);
    for (const ScheduledChunk& c : out.chunks) {
      Request* r = c.request;
      EXPECT_GT(c.num_tokens, 0);
      EXPECT_GE(static_cast<int64_t>(kv_->HeldBlocks(*r)) * 4, r->num_computed_tokens + c.num_tokens);
      r->num_computed_tokens += c.num_tokens;
      kv_->CommitFullBlocks(*r);
      if (r->num_computed_tokens == r->num_tokens()) {
        r->tokens.push_back(1);
        if (r->num_output_tokens() >= r->params.stopping.max_tokens) {
          scheduler_->Remove(r);
          r->state = RequestState::kFinished;
        }
      }
    }
    return out;
  }

  void ExpectBlocksToAdmitIsWhatAnAdmissionTakes(const std::vector<int64_t>& windows);

  SchedulerConfig config_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Request>> requests_;
  uint64_t next_id_ = 1;
};

TEST_F(SchedulerTest, LongPromptsArePrefilledInChunksWithinTheBudget) {
  Init({.max_num_batched_tokens = 10, .max_num_seqs = 8}, 64);
  Request* r = Add(35, 3);
  std::vector<int32_t> chunks;
  while (r->state != RequestState::kFinished) chunks.push_back(Step().num_tokens);
  EXPECT_EQ(chunks, (std::vector<int32_t>{10, 10, 10, 5, 1, 1}));
}

TEST_F(SchedulerTest, DecodesComeFirstAndNewRequestsFillTheRest) {
  Init({.max_num_batched_tokens = 8, .max_num_seqs = 8}, 64);
  Request* a = Add(6, 5);
  Step();  // a's prompt
  Request* b = Add(20, 2);
  const SchedulerOutput out = Step();
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[0].request, a);
  EXPECT_EQ(out.chunks[0].num_tokens, 1);
  EXPECT_EQ(out.chunks[1].request, b);
  EXPECT_EQ(out.chunks[1].num_tokens, 7);
}

TEST_F(SchedulerTest, BudgetAndSeatsAreRespectedUnderRandomArrivals) {
  Init({.max_num_batched_tokens = 24, .max_num_seqs = 5}, 40);
  std::mt19937 rng(1);
  for (int step = 0; step < 2000; ++step) {
    if (rng() % 3 == 0) Add(1 + rng() % 40, 1 + rng() % 16, static_cast<int>(rng() % 2));
    Step();
    EXPECT_LE(scheduler_->num_running(), 5);
    EXPECT_LE(pool_->Stats().used, 40);
  }
}

TEST_F(SchedulerTest, NoStarvationUnderContinuousArrivals) {
  // A long request arrives first; short ones keep arriving every step. FIFO
  // admission and oldest-first decoding must let it finish.
  Init({.max_num_batched_tokens = 16, .max_num_seqs = 4}, 64);
  Request* first = Add(30, 40);
  int steps = 0;
  while (first->state != RequestState::kFinished) {
    Add(8, 4);
    Step();
    ASSERT_LT(++steps, 200) << "the first request starves";
  }
  // Every request that arrived before the last ~30 steps finished too.
  for (const auto& r : requests_) {
    if (r->arrival + 40 < static_cast<uint64_t>(steps)) {
      EXPECT_EQ(r->state, RequestState::kFinished) << r->arrival;
    }
  }
}

TEST_F(SchedulerTest, GrowthReserveHoldsBackAdmissionsThatWouldPreempt) {
  // Same pool and requests as above, with one block kept per running request:
  // the third request waits instead of squeezing into the last free blocks.
  Init({.max_num_batched_tokens = 64, .max_num_seqs = 4, .growth_reserve_blocks = 1}, 6);
  Request* a = Add(8, 12);
  Request* b = Add(8, 12);
  Request* c = Add(4, 2);
  const SchedulerOutput first = Step();
  ASSERT_EQ(first.chunks.size(), 2u);  // a and b; c would leave less than one free block each
  for (int step = 0; step < 500; ++step) Step();
  EXPECT_EQ(a->state, RequestState::kFinished);
  EXPECT_EQ(b->state, RequestState::kFinished);
  EXPECT_EQ(c->state, RequestState::kFinished);
  EXPECT_EQ(pool_->Stats().used, 0);
}

TEST_F(SchedulerTest, PriorityThenArrival) {
  Init({.max_num_batched_tokens = 4, .max_num_seqs = 1}, 64);
  Request* low = Add(4, 1, /*priority=*/1);
  Request* high = Add(4, 1, /*priority=*/0);
  Request* high2 = Add(4, 1, /*priority=*/0);
  // One seat, one token each: each request finishes in the step that admits it.
  EXPECT_EQ(Step().chunks[0].request, high);
  EXPECT_EQ(Step().chunks[0].request, high2);
  EXPECT_EQ(Step().chunks[0].request, low);
}

TEST_F(SchedulerTest, OutOfBlocksPreemptsTheNewestWhichReturnsFirst) {
  // 6 blocks of 4: two requests of 8-token prompts fit (2 blocks each), but
  // their growth does not.
  Init({.max_num_batched_tokens = 64, .max_num_seqs = 4, .growth_reserve_blocks = 0}, 6);
  Request* a = Add(8, 12);
  Request* b = Add(8, 12);
  Request* c = Add(4, 2);
  bool preempted = false;
  for (int step = 0; step < 200 && !preempted; ++step) {
    const SchedulerOutput out = Step();
    if (!out.preempted.empty()) {
      preempted = true;
      EXPECT_NE(out.preempted[0], a);  // never the oldest while a newer one runs
      EXPECT_EQ(out.preempted[0]->block_table.size(), 0u);
      EXPECT_EQ(out.preempted[0]->num_computed_tokens, 0);
    }
  }
  EXPECT_TRUE(preempted);
  for (int step = 0; step < 500; ++step) Step();
  EXPECT_EQ(a->state, RequestState::kFinished);
  EXPECT_EQ(b->state, RequestState::kFinished);
  EXPECT_EQ(c->state, RequestState::kFinished);
  EXPECT_EQ(pool_->Stats().used, 0);
  EXPECT_GT(scheduler_->num_preemptions(), 0);
}

TEST_F(SchedulerTest, RequestsThatFitPassAHeadThatDoesNotUpToTheLimit) {
  // 10 blocks of 4. a runs and holds 5; the head b needs 6 (a 24-token
  // prompt) and does not fit; c and d (one block each) go ahead of it, two
  // admissions, the limit: then e waits behind b although it would fit.
  Init({.max_num_batched_tokens = 64, .max_num_seqs = 8, .growth_reserve_blocks = 0, .admission_bypass_limit = 2}, 10);
  Request* a = Add(16, 4);
  Step();
  Request* b = Add(24, 1);
  Request* c = Add(4, 6);
  Step();
  EXPECT_EQ(c->state, RequestState::kRunning);
  EXPECT_EQ(b->state, RequestState::kWaiting);
  EXPECT_EQ(b->admissions_bypassed, 1);
  Request* d = Add(3, 6);
  Step();
  EXPECT_EQ(d->state, RequestState::kRunning);
  EXPECT_EQ(b->admissions_bypassed, 2);
  Request* e = Add(3, 1);
  ASSERT_GE(pool_->num_free(), 2) << "e would fit";
  Step();
  EXPECT_EQ(e->state, RequestState::kWaiting) << "b has been passed twice: nothing passes it now";
  EXPECT_EQ(b->state, RequestState::kWaiting);
  for (int step = 0; step < 500; ++step) Step();
  for (Request* r : {a, b, c, d, e}) EXPECT_EQ(r->state, RequestState::kFinished);
  EXPECT_EQ(b->admissions_bypassed, 0);
  EXPECT_EQ(pool_->Stats().used, 0);
}

TEST_F(SchedulerTest, StrictOrderWithoutBypass) {
  Init({.max_num_batched_tokens = 64, .max_num_seqs = 8, .growth_reserve_blocks = 0, .admission_bypass_limit = 0}, 10);
  Add(16, 4);
  Step();
  Request* b = Add(24, 1);
  Request* c = Add(4, 6);
  Step();
  EXPECT_EQ(b->state, RequestState::kWaiting);
  EXPECT_EQ(c->state, RequestState::kWaiting);
}

TEST_F(SchedulerTest, NoRequestOfLowerPriorityPassesABlockedOne) {
  Init({.max_num_batched_tokens = 64, .max_num_seqs = 8, .growth_reserve_blocks = 0}, 10);
  Add(16, 4);
  Step();
  Request* b = Add(24, 1, /*priority=*/0);
  Request* low = Add(4, 6, /*priority=*/1);
  Step();
  EXPECT_EQ(b->state, RequestState::kWaiting);
  EXPECT_EQ(low->state, RequestState::kWaiting);
}

TEST_F(SchedulerTest, BlocksToAdmitIsWhatAnAdmissionTakes) {
  // Random prompts over a few shared prefixes, run by the scheduler; at
  // every step each waiting request's estimate equals the free blocks its
  // lookup and allocation take (or exceeds the free blocks when they fail):
  // with one page a block, and with two window groups beside group 0
  // (window 8: two blocks), whose freed pages shorten hits.
  for (const std::vector<int64_t>& windows : {std::vector<int64_t>{0}, std::vector<int64_t>{0, 8, 8}}) {
    SCOPED_TRACE(windows.size());
    ExpectBlocksToAdmitIsWhatAnAdmissionTakes(windows);
  }
}

void SchedulerTest::ExpectBlocksToAdmitIsWhatAnAdmissionTakes(const std::vector<int64_t>& windows) {
  requests_.clear();
  Init({.max_num_batched_tokens = 24, .max_num_seqs = 6, .growth_reserve_blocks = 0},
       48 * static_cast<int32_t>(windows.size()), windows);
  std::mt19937 rng(3);
  int checked = 0;
  for (int step = 0; step < 1500; ++step) {
    if (rng() % 2 == 0) {
      const int shared = static_cast<int>(rng() % 3) * 8;
      Request* r = Add(shared + 1 + static_cast<int>(rng() % 20), 1 + static_cast<int>(rng() % 8));
      r->tokens.clear();
      for (int i = 0; i < shared; ++i) r->tokens.push_back(static_cast<model::TokenId>(shared * 7 + i));
      while (r->tokens.size() < r->params.prompt.size()) r->tokens.push_back(static_cast<model::TokenId>(rng() % 97));
    }
    for (Request* r : std::vector<Request*>(scheduler_->waiting().begin(), scheduler_->waiting().end())) {
      const int32_t budget = 1 + static_cast<int32_t>(rng() % 24);
      const int32_t estimate = kv_->BlocksToAdmit(*r, budget).value();
      const int32_t before = pool_->num_free();
      kv_->AcquireCachedPrefix(*r);
      if (kv_->Allocate(*r, std::min(r->num_pending_tokens(), budget))) {
        EXPECT_EQ(before - pool_->num_free(), estimate);
        ++checked;
      } else {
        EXPECT_GT(estimate, before);
      }
      kv_->Free(*r);
    }
    Step();
  }
  EXPECT_GT(checked, 100);
}

// A run gate that admits by priority: 0 admit, 1 wait, 2 fail; counts what it holds.
class PriorityGate : public RunGate {
 public:
  Verdict Acquire(Request& req) override {
    if (req.params.priority == 1) return Verdict::kWait;
    if (req.params.priority == 2) return Verdict::kFail;
    if (req.lora_slot < 0) ++held;
    req.lora_slot = 0;
    return Verdict::kAdmit;
  }
  void Release(Request& req) override {
    if (req.lora_slot >= 0) --held;
    req.lora_slot = -1;
  }
  int held = 0;
};

TEST_F(SchedulerTest, TheRunGateHoldsBackRefusesOrAdmitsAndIsReleasedWhenARequestStops) {
  PriorityGate gate;
  Init({.max_num_batched_tokens = 64, .admission_bypass_limit = 16}, 64, {0}, &gate);
  // Lower priorities run first: the waiting and failing ones come first here.
  Request* failing = Add(4, 2, /*priority=*/2);
  Request* waiting = Add(4, 2, /*priority=*/1);
  Request* admitted = Add(4, 2, /*priority=*/0);
  const SchedulerOutput out = Step();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].request, admitted);
  EXPECT_EQ(out.failed, std::vector<Request*>{failing});
  EXPECT_EQ(scheduler_->num_waiting(), 1) << "the waiting one stays queued";
  EXPECT_EQ(waiting->lora_slot, -1);
  EXPECT_EQ(kv_->HeldBlocks(*waiting), 0) << "a request the gate holds back keeps no blocks";
  EXPECT_EQ(gate.held, 1);
  while (admitted->state != RequestState::kFinished) Step();
  EXPECT_EQ(gate.held, 0) << "released when it finished";
}

}  // namespace
}  // namespace kvfleet::engine
