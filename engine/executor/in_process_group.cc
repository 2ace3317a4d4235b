#include "engine/executor/in_process_group.h"

#include <algorithm>

namespace kvfleet::engine {

namespace {
using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}
}  // namespace

class InProcessGroup::Rank : public Collective {
 public:
  Rank(InProcessGroup& group, int32_t rank) : group_(group), rank_(rank) {}

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return group_.size(); }

  void Abort() override { group_.Abort(); }

  void AllReduce(float* x, int64_t count) override {
    if (group_.size() == 1) return;
    group_.Arrive(rank_, x, count, count,
                  [count](std::vector<float*>& buffers, std::vector<int64_t>&, std::vector<float>& sum) {
                    sum.assign(buffers[0], buffers[0] + count);
                    for (size_t q = 1; q < buffers.size(); ++q) {
                      const float* b = buffers[q];
                      for (int64_t i = 0; i < count; ++i) sum[static_cast<size_t>(i)] += b[i];
                    }
                    for (float* b : buffers) std::copy(sum.begin(), sum.end(), b);
                  });
  }

  void AllGather(float* x, int64_t rows, int64_t width) override {
    if (group_.size() == 1) return;
    group_.Arrive(rank_, x, width, rows * width,
                  [rows](std::vector<float*>& buffers, std::vector<int64_t>& widths, std::vector<float>& whole) {
                    int64_t total = 0;
                    for (int64_t w : widths) total += w;
                    whole.resize(static_cast<size_t>(rows * total));
                    int64_t column = 0;
                    for (size_t q = 0; q < buffers.size(); ++q) {
                      for (int64_t r = 0; r < rows; ++r) {
                        std::copy_n(buffers[q] + r * widths[q], widths[q], whole.data() + r * total + column);
                      }
                      column += widths[q];
                    }
                    for (float* b : buffers) std::copy(whole.begin(), whole.end(), b);
                  });
  }

 private:
  InProcessGroup& group_;
  const int32_t rank_;
};

InProcessGroup::InProcessGroup(int32_t size)
    : done_(static_cast<size_t>(size)), buffers_(static_cast<size_t>(size)), widths_(static_cast<size_t>(size)) {
  for (int32_t r = 0; r < size; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
}

InProcessGroup::~InProcessGroup() = default;

Collective& InProcessGroup::rank(int32_t r) { return *ranks_[static_cast<size_t>(r)]; }

void InProcessGroup::BeginTurn(int32_t r) {
  std::unique_lock<std::mutex> lock(mu_);
  turn_changed_.wait(lock, [&] { return turn_ == r; });
  // Rank 0 starts a round without a handoff.
  if (r != 0) costs_.handoff_seconds += Seconds(turn_passed_, Clock::now());
}

void InProcessGroup::EndTurn(int32_t r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_[static_cast<size_t>(r)] = true;
    const int32_t next = NextTurn(r);
    if (next == r) {
      // The round is over: rank 0 starts the next one.
      std::fill(done_.begin(), done_.end(), false);
      turn_ = 0;
    } else {
      turn_ = next;
    }
    turn_passed_ = Clock::now();
  }
  turn_changed_.notify_all();
}

void InProcessGroup::Abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
}

InProcessGroup::Costs InProcessGroup::costs() {
  std::lock_guard<std::mutex> lock(mu_);
  return costs_;
}

int32_t InProcessGroup::NextTurn(int32_t r) const {
  for (int32_t i = 1; i <= size(); ++i) {
    const int32_t next = (r + i) % size();
    if (!done_[static_cast<size_t>(next)]) return next;
  }
  return r;
}

void InProcessGroup::PassTurnAndWait(std::unique_lock<std::mutex>& lock, int32_t r, int32_t next) {
  if (next == r) return;
  turn_ = next;
  turn_passed_ = Clock::now();
  turn_changed_.notify_all();
  turn_changed_.wait(lock, [&] { return turn_ == r; });
  costs_.handoff_seconds += Seconds(turn_passed_, Clock::now());
}

template <class Meet>
void InProcessGroup::Arrive(int32_t r, float* x, int64_t width, int64_t floats, Meet meet) {
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) {
    // No meeting, but the turns still go round the ranks still running,
    // one at a time (they share a thread pool), until each has ended.
    PassTurnAndWait(lock, r, NextTurn(r));
    return;
  }
  buffers_[static_cast<size_t>(r)] = x;
  widths_[static_cast<size_t>(r)] = width;
  if (r + 1 < size()) {
    PassTurnAndWait(lock, r, r + 1);
    return;
  }
  // The last rank: every buffer is on the table and every other rank waits.
  const Clock::time_point start = Clock::now();
  meet(buffers_, widths_, staging_);
  costs_.meet_seconds += Seconds(start, Clock::now());
  ++costs_.meetings;
  costs_.message_bytes += floats * static_cast<int64_t>(sizeof(float));
  PassTurnAndWait(lock, r, 0);
}

}  // namespace kvfleet::engine
