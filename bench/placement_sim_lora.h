// The simulator's LoRA slots (placement_sim.h, "Adapters"): per worker, the
// scheduler's run gate as the engine's LoraResidency is, without an
// executor. A request under an adapter is admitted once its adapter sits in
// one of max_loras slots (a resident one, a free one, or the least recently
// used one no running request pins: a load, whose time the worker's next
// step pays); when every slot is pinned it waits. Counts what happened.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/scheduler/scheduler.h"

namespace kvfleet::bench::placement_sim {

class SimLoraSlots : public engine::RunGate {
 public:
  SimLoraSlots(int32_t slots, double load_seconds) : slots_(static_cast<size_t>(slots)), load_seconds_(load_seconds) {}

  Verdict Acquire(engine::Request& req) override {
    if (req.lora_identity.empty() || req.lora_slot >= 0) return Verdict::kAdmit;
    ++acquires_;
    int32_t chosen = -1;
    for (int32_t i = 0; i < static_cast<int32_t>(slots_.size()); ++i) {
      if (slots_[i].identity == req.lora_identity) chosen = i;
    }
    if (chosen >= 0) {
      ++hits_;
    } else {
      for (int32_t i = 0; i < static_cast<int32_t>(slots_.size()); ++i) {
        const Slot& s = slots_[i];
        if (s.identity.empty()) {
          chosen = i;
          break;
        }
        if (s.pins == 0 && (chosen < 0 || s.last_used < slots_[chosen].last_used)) chosen = i;
      }
      if (chosen < 0) {
        --acquires_;  // asked again next step
        ++waits_;
        return Verdict::kWait;
      }
      ++loads_;
      pending_load_seconds_ += load_seconds_;
      slots_[chosen] = Slot{.identity = req.lora_identity};
    }
    Slot& s = slots_[chosen];
    ++s.pins;
    s.last_used = ++clock_;
    req.lora_slot = chosen;
    return Verdict::kAdmit;
  }
  void Release(engine::Request& req) override {
    if (req.lora_slot < 0) return;
    --slots_[static_cast<size_t>(req.lora_slot)].pins;
    req.lora_slot = -1;
  }

  // The identities in the slots now (what the worker's stats report).
  std::vector<std::string> Resident() const {
    std::vector<std::string> out;
    for (const Slot& s : slots_) {
      if (!s.identity.empty()) out.push_back(s.identity);
    }
    return out;
  }
  // The loads since the last call's time, for the next step.
  double TakeLoadSeconds() { return std::exchange(pending_load_seconds_, 0.0); }

  int64_t acquires() const { return acquires_; }  // admissions under an adapter
  int64_t hits() const { return hits_; }          // of those, found resident
  int64_t loads() const { return loads_; }
  int64_t waits() const { return waits_; }  // admission tries that found every slot pinned

 private:
  struct Slot {
    std::string identity;
    int32_t pins = 0;
    uint64_t last_used = 0;
  };
  std::vector<Slot> slots_;
  double load_seconds_;
  double pending_load_seconds_ = 0;
  uint64_t clock_ = 0;
  int64_t acquires_ = 0, hits_ = 0, loads_ = 0, waits_ = 0;
};

}  // namespace kvfleet::bench::placement_sim
