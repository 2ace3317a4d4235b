#include "services/transport/wire/load_report_convert.h"

#include <algorithm>

namespace kvfleet::transport {

v1::LoadReport ToProto(const WorkerLoad& l) {
  v1::LoadReport out;
  out.set_running(l.running);
  out.set_waiting(l.waiting);
  out.set_blocks_used(l.blocks_used);
  out.set_blocks_free(l.blocks_free);
  out.set_blocks_total(l.blocks_total);
  out.set_pending_prefill_tokens(l.pending_prefill_tokens);
  out.set_draining(l.draining);
  out.set_prefill_tokens_per_second(l.prefill_tokens_per_second);
  out.set_host_load_seconds_per_block(l.host_load_seconds_per_block);
  out.set_disk_load_seconds_per_block(l.disk_load_seconds_per_block);
  out.set_peer_pull_seconds_per_block(l.peer_pull_seconds_per_block);
  out.set_kv_block_bytes(l.kv_block_bytes);
  for (const AdmittedTicket& t : l.admitted) {
    v1::PlacementTicket& a = *out.add_admitted();
    a.set_router(t.router);
    a.set_ticket(t.ticket);
  }
  for (const std::string& identity : l.resident_lora) out.add_resident_lora(identity);
  out.set_lora_slot_load_seconds(l.lora_slot_load_seconds);
  return out;
}

WorkerLoad FromProto(const v1::LoadReport& l) {
  WorkerLoad out{.running = l.running(),
                 .waiting = l.waiting(),
                 .blocks_used = l.blocks_used(),
                 .blocks_free = l.blocks_free(),
                 .blocks_total = l.blocks_total(),
                 .pending_prefill_tokens = l.pending_prefill_tokens(),
                 .draining = l.draining(),
                 .prefill_tokens_per_second = l.prefill_tokens_per_second(),
                 .host_load_seconds_per_block = l.host_load_seconds_per_block(),
                 .disk_load_seconds_per_block = l.disk_load_seconds_per_block(),
                 .peer_pull_seconds_per_block = l.peer_pull_seconds_per_block(),
                 .kv_block_bytes = l.kv_block_bytes()};
  const size_t n = std::min<size_t>(static_cast<size_t>(l.admitted_size()), WorkerLoad::kMaxAdmittedRouters);
  out.admitted.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const v1::PlacementTicket& t = l.admitted(static_cast<int>(i));
    out.admitted.push_back({.router = t.router(), .ticket = t.ticket()});
  }
  const size_t resident = std::min<size_t>(static_cast<size_t>(l.resident_lora_size()), WorkerLoad::kMaxResidentLora);
  out.resident_lora.assign(l.resident_lora().begin(), l.resident_lora().begin() + static_cast<int>(resident));
  out.lora_slot_load_seconds = l.lora_slot_load_seconds();
  return out;
}

}  // namespace kvfleet::transport
