// What the LoRA slots of an engine have done (LoraResidency's counters).
#pragma once

#include <cstdint>

namespace kvfleet::engine {

struct LoraResidencyStats {
  int64_t loads = 0;        // adapters put into a slot
  int64_t evictions = 0;    // loads that replaced another adapter
  double load_seconds = 0;  // summed over loads
  int32_t resident = 0;     // adapters in slots now
  int32_t slots = 0;
};

}  // namespace kvfleet::engine
