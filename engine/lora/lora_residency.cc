#include "engine/lora/lora_residency.h"

#include "common/logging.h"

namespace kvfleet::engine {

LoraResidency::LoraResidency(ModelExecutor& executor, int32_t slots)
    : executor_(executor), slots_(static_cast<size_t>(slots)) {
  stats_.slots = slots;
}

RunGate::Verdict LoraResidency::Acquire(Request& req) {
  if (req.params.lora == nullptr || req.lora_slot >= 0) return Verdict::kAdmit;
  if (slots_.empty()) return Verdict::kFail;
  int32_t chosen = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(slots_.size()); ++i) {
    if (slots_[i].adapter != nullptr && slots_[i].identity == req.lora_identity) {
      chosen = i;
      break;
    }
  }
  if (chosen < 0) {
    // A free slot, else the least recently used that nobody pins.
    for (int32_t i = 0; i < static_cast<int32_t>(slots_.size()); ++i) {
      const Slot& s = slots_[i];
      if (s.adapter == nullptr) {
        chosen = i;
        break;
      }
      if (s.pins == 0 && (chosen < 0 || s.last_used < slots_[chosen].last_used)) chosen = i;
    }
    if (chosen < 0) return Verdict::kWait;
    Slot& s = slots_[chosen];
    const bool evicting = s.adapter != nullptr;
    const auto start = std::chrono::steady_clock::now();
    if (const absl::Status loaded = executor_.LoadLora(chosen, req.params.lora); !loaded.ok()) {
      KVFLEET_LOG_ERROR("LoRA adapter '{}' cannot be loaded: {}", req.params.lora->name, loaded.ToString());
      if (evicting) Empty(chosen);  // what it held may be half overwritten
      Publish();
      return Verdict::kFail;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.loads += 1;
      stats_.evictions += evicting ? 1 : 0;
      stats_.load_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    s = Slot{.adapter = req.params.lora, .identity = req.lora_identity};
    Publish();
  }
  Slot& s = slots_[chosen];
  s.pins += 1;
  s.last_used = ++clock_;
  req.lora_slot = chosen;
  return Verdict::kAdmit;
}

void LoraResidency::Release(Request& req) {
  if (req.lora_slot < 0) return;
  Slot& s = slots_[static_cast<size_t>(req.lora_slot)];
  s.pins -= 1;
  if (s.pins == 0 && s.evict_when_unpinned) {
    Empty(req.lora_slot);
    Publish();
  }
  req.lora_slot = -1;
}

void LoraResidency::Evict(const std::string& name) {
  for (int32_t i = 0; i < static_cast<int32_t>(slots_.size()); ++i) {
    Slot& s = slots_[i];
    if (s.adapter == nullptr || s.adapter->name != name) continue;
    if (s.pins == 0) {
      Empty(i);
    } else {
      s.evict_when_unpinned = true;
    }
  }
  Publish();
}

void LoraResidency::Empty(int32_t slot) {
  (void)executor_.UnloadLora(slot);
  slots_[static_cast<size_t>(slot)] = Slot{};
}

void LoraResidency::Publish() {
  std::vector<std::string> now;
  for (const Slot& s : slots_) {
    if (s.adapter != nullptr) now.push_back(s.identity);
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.resident = static_cast<int32_t>(now.size());
  published_ = std::move(now);
}

std::vector<std::string> LoraResidency::resident() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_;
}

LoraResidencyStats LoraResidency::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace kvfleet::engine
