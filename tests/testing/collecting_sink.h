// An OutputSink that records everything a request receives, for tests.
// Thread-safe, so tests can also read it while the engine thread runs.
#pragma once

#include <condition_variable>
#include <mutex>
#include <vector>

#include "engine/request/request.h"

namespace kvfleet::testing {

class CollectingSink : public engine::OutputSink {
 public:
  void OnOutput(engine::RequestOutput output) override {
    std::lock_guard<std::mutex> lock(mu_);
    tokens_.insert(tokens_.end(), output.new_tokens.begin(), output.new_tokens.end());
    logprobs_.insert(logprobs_.end(), output.logprobs.begin(), output.logprobs.end());
    ++outputs_;
    if (output.finished) {
      finished_ = true;
      reason_ = output.finish_reason;
      usage_ = output.usage;
      queue_seconds_ = output.queue_seconds;
      done_.notify_all();
    }
  }

  void WaitFinished() {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [this] { return finished_; });
  }

  std::vector<model::TokenId> tokens() const {
    std::lock_guard<std::mutex> lock(mu_);
    return tokens_;
  }
  bool finished() const {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_;
  }
  engine::FinishReason reason() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }
  engine::Usage usage() const {
    std::lock_guard<std::mutex> lock(mu_);
    return usage_;
  }
  std::vector<engine::TokenLogprobs> logprobs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return logprobs_;
  }
  double queue_seconds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_seconds_;
  }
  int outputs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return outputs_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable done_;
  std::vector<model::TokenId> tokens_;
  bool finished_ = false;
  engine::FinishReason reason_ = engine::FinishReason::kError;
  engine::Usage usage_;
  std::vector<engine::TokenLogprobs> logprobs_;
  double queue_seconds_ = -1.0;
  int outputs_ = 0;
};

}  // namespace kvfleet::testing
