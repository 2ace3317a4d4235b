// The cachemanager's dense handle for a registered worker. The worker
// registry assigns slots 0, 1, 2, ... and reuses a slot after its worker is
// removed, so per-worker tables (the prefix index, the load table) can be
// plain vectors indexed by slot. A slot is not the worker's name: the same
// worker gets a new slot after it is removed and registers again, and tables
// must be cleared for a slot before it is handed out again.
//
//   WorkerSlot w(3);
//   index.Store(w, hashes);
#pragma once

#include <cstdint>

#include "common/strong_id.h"

namespace kvfleet::cachemanager {

using WorkerSlot = StrongId<struct WorkerSlotTag, int32_t>;

}  // namespace kvfleet::cachemanager
