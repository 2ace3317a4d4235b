#include "services/worker/server/worker_metrics.h"

#include "services/transport/metrics/registry_metrics.h"
#include "services/transport/metrics/scrape_families.h"

namespace kvfleet::worker {
using transport::AddCounter;
using transport::AddHistogram;
using transport::InterTokenBuckets;
using transport::MaskBuckets;
using transport::RequestBuckets;
using transport::StepTokenBuckets;
using transport::TtftBuckets;

WorkerMetrics::WorkerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  rejected_ = &prometheus::BuildCounter()
                   .Name("kvfleet_worker_requests_rejected_total")
                   .Help("Generate calls refused before reaching the engine, by gRPC status code")
                   .Register(r);
  // The refusals a worker makes, at 0 from start-up so their rate() exists before the first.
  for (const char* code : {"invalid_argument", "resource_exhausted", "unavailable"}) rejected_->Add({{"code", code}});
  auto& finished = prometheus::BuildCounter()
                       .Name("kvfleet_worker_requests_total")
                       .Help("Requests that reached the engine and finished, by finish reason")
                       .Register(r);
  for (engine::FinishReason reason :
       {engine::FinishReason::kStop, engine::FinishReason::kLength, engine::FinishReason::kCancelled,
        engine::FinishReason::kError, engine::FinishReason::kHandoff}) {
    finished_[static_cast<size_t>(reason)] = &finished.Add({{"finish_reason", engine::FinishReasonName(reason)}});
  }
  prompt_tokens_ = AddCounter(r, "kvfleet_worker_prompt_tokens_total", "Prompt tokens of finished requests");
  cached_prompt_tokens_ = AddCounter(r, "kvfleet_worker_cached_prompt_tokens_total",
                                     "Prompt tokens of finished requests served from the prefix cache");
  generated_tokens_ = AddCounter(r, "kvfleet_worker_generated_tokens_total", "Tokens generated");
  ttft_ = AddHistogram(r, "kvfleet_worker_time_to_first_token_seconds",
                       "From the request's arrival to its first generated token", TtftBuckets());
  inter_token_ = AddHistogram(r, "kvfleet_worker_inter_token_latency_seconds",
                              "Between consecutive generated tokens of one request", InterTokenBuckets());
  e2e_ = AddHistogram(r, "kvfleet_worker_e2e_request_latency_seconds",
                      "From the request's arrival to its end, all finish reasons", RequestBuckets());
  queue_ = AddHistogram(r, "kvfleet_worker_queue_time_seconds",
                        "From the request's arrival to the first engine step that ran it", RequestBuckets());
  step_seconds_ = AddHistogram(r, "kvfleet_worker_engine_step_seconds",
                               "Duration of one engine step that ran the model", InterTokenBuckets());
  step_tokens_ = AddHistogram(r, "kvfleet_worker_engine_step_tokens",
                              "Tokens computed in one engine step (prefill and decode)", StepTokenBuckets());
  grammar_mask_ = AddHistogram(r, "kvfleet_worker_grammar_mask_seconds",
                               "Filling one constrained token's grammar mask (off the engine thread when it "
                               "overlaps the forward pass)",
                               MaskBuckets());
  // TTFT's buckets: a pull stands in for part of a prefill.
  peer_pull_ = AddHistogram(r, "kvfleet_worker_kv_peer_pull_seconds",
                            "From asking a peer for a prompt's KV blocks to their arrival, any outcome", TtftBuckets());
  memory_bytes_ = &prometheus::BuildGauge()
                       .Name("kvfleet_worker_memory_bytes")
                       .Help(
                           "The memory plan at start: bytes on the device by component (weights, scratch, "
                           "draft_weights, draft_scratch, draft_kv_cache, kv_cache, lora_adapters)")
                       .Register(r);
  device_info_ = &prometheus::BuildGauge()
                      .Name("kvfleet_worker_device_info")
                      .Help(
                          "1, labelled with the device the model runs on, its numerics identity and how its mode was "
                          "chosen (calibration, flags or exact)")
                      .Register(r);
}

void WorkerMetrics::SetMemoryPlan(const std::vector<std::pair<std::string, int64_t>>& components) {
  for (const auto& [component, bytes] : components) {
    // "part", not "component": the scrape adds component (router, worker, cachemanager).
    memory_bytes_->Add({{"part", component}}).Set(static_cast<double>(bytes));
  }
}

void WorkerMetrics::SetDevice(const std::string& device, const std::string& numerics, const std::string& mode_source) {
  device_info_->Add({{"device", device}, {"numerics", numerics}, {"mode_source", mode_source}}).Set(1.0);
}

void WorkerMetrics::RecordRejected(const std::string& code) { rejected_->Add({{"code", code}}).Increment(); }

void WorkerMetrics::RecordFirstToken(double seconds) { ttft_->Observe(seconds); }

void WorkerMetrics::RecordInterToken(double seconds) { inter_token_->Observe(seconds); }

void WorkerMetrics::RecordFinished(engine::FinishReason reason, const engine::Usage& usage, double e2e_seconds,
                                   double queue_seconds) {
  finished_[static_cast<size_t>(reason)]->Increment();
  prompt_tokens_->Increment(usage.prompt_tokens);
  cached_prompt_tokens_->Increment(usage.cached_prompt_tokens);
  generated_tokens_->Increment(usage.generated_tokens);
  e2e_->Observe(e2e_seconds);
  if (queue_seconds >= 0) queue_->Observe(queue_seconds);
}

void WorkerMetrics::RecordGrammarMask(double seconds) { grammar_mask_->Observe(seconds); }

void WorkerMetrics::OnPeerPull(double seconds) { peer_pull_->Observe(seconds); }

void WorkerMetrics::OnStep(const engine::StepReport& report) {
  step_seconds_->Observe(report.seconds);
  step_tokens_->Observe(report.num_tokens);
}

std::vector<prometheus::MetricFamily> GrammarStatsCollector::Collect() const {
  const GrammarStats s = compiler_.stats();
  transport::ScrapeFamilies out;
  out.Counter("kvfleet_worker_grammar_compiles_total", "Output constraints compiled (grammar cache misses)",
              static_cast<double>(s.compiles));
  out.Counter("kvfleet_worker_grammar_cache_hits_total", "Output constraints served from the grammar cache",
              static_cast<double>(s.cache_hits));
  out.Counter("kvfleet_worker_grammar_compile_seconds_total", "Time spent compiling output constraints",
              s.compile_seconds);
  return std::move(out).Take();
}

std::vector<prometheus::MetricFamily> EngineStatsCollector::Collect() const {
  const engine::EngineStats s = stats_();
  transport::ScrapeFamilies out;
  out.Gauge("kvfleet_worker_requests_running", "Requests in the running batch", s.running);
  out.Gauge("kvfleet_worker_requests_waiting", "Requests waiting for a running slot", s.waiting);
  out.Family("kvfleet_worker_kv_blocks", "KV cache blocks by state", prometheus::MetricType::Gauge)
      .Add(s.blocks_used, {{"state", "used"}})
      .Add(s.blocks_cached, {{"state", "cached"}})
      .Add(s.blocks_free - s.blocks_cached, {{"state", "empty"}});
  out.Gauge("kvfleet_worker_kv_blocks_total", "KV cache capacity in blocks", s.blocks_total);
  out.Gauge("kvfleet_worker_kv_usage_ratio", "Blocks held by requests over all blocks",
            s.blocks_total > 0 ? static_cast<double>(s.blocks_used) / s.blocks_total : 0.0);
  out.Gauge("kvfleet_worker_kv_waste_ratio",
            "Allocated but unfilled token slots over allocated slots, running requests", s.kv_waste);
  out.Gauge("kvfleet_worker_pending_prefill_tokens", "Prompt and recompute tokens not yet computed",
            static_cast<double>(s.pending_prefill_tokens));
  out.Counter("kvfleet_worker_prefix_cache_queried_tokens_total", "Prompt tokens looked up in the prefix cache",
              static_cast<double>(s.prefix_queried_tokens));
  out.Counter("kvfleet_worker_prefix_cache_hit_tokens_total", "Prompt tokens found in the prefix cache",
              static_cast<double>(s.prefix_hit_tokens));
  out.Counter("kvfleet_worker_preemptions_total", "Running requests preempted for lack of KV blocks",
              static_cast<double>(s.preemptions));
  out.Counter("kvfleet_worker_engine_steps_total", "Engine steps that ran the model", static_cast<double>(s.steps));
  out.Gauge("kvfleet_worker_lora_slots", "LoRA adapters the device holds at once (--max-loras)", s.lora.slots);
  out.Gauge("kvfleet_worker_lora_adapters_resident", "LoRA adapters in the device's slots now", s.lora.resident);
  out.Counter("kvfleet_worker_lora_loads_total", "LoRA adapters put into a device slot",
              static_cast<double>(s.lora.loads));
  out.Counter("kvfleet_worker_lora_evictions_total", "LoRA slot loads that replaced another adapter",
              static_cast<double>(s.lora.evictions));
  out.Counter("kvfleet_worker_lora_load_seconds_total", "Time spent putting LoRA adapters into device slots",
              s.lora.load_seconds);
  const engine::KvPeerStats& peer = s.kv_peer;
  auto pulls = out.Family("kvfleet_worker_kv_peer_pulls_total",
                          "Prefix pulls from peer workers by outcome: done, partial (the peer held fewer), or a "
                          "fallback to computing by reason",
                          prometheus::MetricType::Counter);
  pulls.Add(static_cast<double>(peer.pulls_done), {{"outcome", "done"}})
      .Add(static_cast<double>(peer.pulls_partial), {{"outcome", "partial"}});
  for (const auto& [reason, n] : peer.failed_by_reason) pulls.Add(static_cast<double>(n), {{"outcome", reason}});
  out.Family("kvfleet_worker_kv_peer_blocks_total", "KV blocks copied between workers, pulled here or served",
             prometheus::MetricType::Counter)
      .Add(static_cast<double>(peer.blocks_pulled), {{"direction", "pulled"}})
      .Add(static_cast<double>(peer.blocks_served), {{"direction", "served"}});
  out.Family("kvfleet_worker_kv_peer_bytes_total", "KV bytes copied between workers, pulled here or served",
             prometheus::MetricType::Counter)
      .Add(static_cast<double>(peer.bytes_pulled), {{"direction", "pulled"}})
      .Add(static_cast<double>(peer.bytes_served), {{"direction", "served"}});
  out.Counter("kvfleet_worker_kv_peer_pulls_served_total", "Pulls this worker answered for peers",
              static_cast<double>(peer.pulls_served));
  const engine::KvLeaseCounters& leases = s.kv_lease_counters;
  out.Family("kvfleet_worker_kv_leases_total",
             "Handed-off prefills whose blocks were held for a decode worker's pull, by how the lease ended: "
             "released (pulled), expired (never pulled: the blocks became ordinary cache), displaced (ended early "
             "to keep leased blocks under half the cache)",
             prometheus::MetricType::Counter)
      .Add(static_cast<double>(leases.released), {{"outcome", "released"}})
      .Add(static_cast<double>(leases.expired), {{"outcome", "expired"}})
      .Add(static_cast<double>(leases.displaced), {{"outcome", "displaced"}});
  out.Counter("kvfleet_worker_kv_lease_renewals_total",
              "Lease renewals taken from decode workers whose split request queued before its pull",
              static_cast<double>(leases.renewed));
  out.Gauge("kvfleet_worker_kv_leased_blocks", "KV blocks held for decode workers' pulls right now",
            static_cast<double>(s.kv_leased_blocks));
  out.Counter("kvfleet_worker_grammar_mask_wait_seconds_total",
              "Time steps waited after the forward pass for grammar masks (mask time not hidden by it)",
              s.mask_wait_seconds);
  if (!s.speculation.empty()) {
    auto drafted = out.Family("kvfleet_worker_spec_draft_tokens_total",
                              "Speculative tokens drafted and verified, by proposer", prometheus::MetricType::Counter);
    auto accepted =
        out.Family("kvfleet_worker_spec_accepted_tokens_total",
                   "Drafted tokens the target's sampling kept, by proposer", prometheus::MetricType::Counter);
    auto passes = out.Family("kvfleet_worker_spec_verify_passes_total",
                             "Request-steps that verified a draft, by proposer", prometheus::MetricType::Counter);
    auto rate = out.Family("kvfleet_worker_spec_acceptance_ratio",
                           "Accepted over drafted tokens since start, by proposer", prometheus::MetricType::Gauge);
    auto length = out.Family("kvfleet_worker_spec_mean_accepted_length",
                             "Accepted tokens per verify pass since start, by proposer", prometheus::MetricType::Gauge);
    auto seconds = out.Family("kvfleet_worker_spec_propose_seconds_total", "Time spent drafting, by proposer",
                              prometheus::MetricType::Counter);
    auto speedup = out.Family("kvfleet_worker_spec_estimated_speedup",
                              "Tokens per verify pass over the pass's cost next to a plain step, at one stream, by "
                              "proposer (0 before any pass)",
                              prometheus::MetricType::Gauge);
    auto memory = out.Family("kvfleet_worker_spec_proposer_memory_bytes",
                             "Host memory a proposer keeps across requests (the suffix store), by proposer",
                             prometheus::MetricType::Gauge);
    for (const engine::SpeculationStats& p : s.speculation) {
      const std::vector<prometheus::ClientMetric::Label> label = {{"proposer", p.proposer}};
      drafted.Add(static_cast<double>(p.drafted_tokens), label);
      accepted.Add(static_cast<double>(p.accepted_tokens), label);
      passes.Add(static_cast<double>(p.verify_passes), label);
      rate.Add(p.drafted_tokens > 0 ? static_cast<double>(p.accepted_tokens) / p.drafted_tokens : 0.0, label);
      length.Add(p.verify_passes > 0 ? static_cast<double>(p.accepted_tokens) / p.verify_passes : 0.0, label);
      seconds.Add(p.propose_seconds, label);
      memory.Add(static_cast<double>(p.memory_bytes), label);
      speedup.Add(p.estimated_speedup, label);
    }
  }
  return std::move(out).Take();
}

std::vector<prometheus::MetricFamily> KvTierStatsCollector::Collect() const {
  const engine::KvTierStats s = stats_();
  transport::ScrapeFamilies out;
  auto blocks = out.Family("kvfleet_worker_kv_tier_blocks", "KV blocks held below the device, by tier",
                           prometheus::MetricType::Gauge);
  auto capacity = out.Family("kvfleet_worker_kv_tier_capacity_blocks", "Blocks each lower KV tier can hold",
                             prometheus::MetricType::Gauge);
  auto bytes = out.Family("kvfleet_worker_kv_tier_bytes", "Bytes of KV held below the device, by tier",
                          prometheus::MetricType::Gauge);
  auto hits = out.Family("kvfleet_worker_kv_tier_hit_blocks_total",
                         "Blocks a prefix lookup brought back to the device from a lower tier",
                         prometheus::MetricType::Counter);
  auto loads = out.Family("kvfleet_worker_kv_tier_loads_total",
                          "Loads from a lower tier (host: one per block; disk: one per background read)",
                          prometheus::MetricType::Counter);
  auto load_seconds = out.Family("kvfleet_worker_kv_tier_load_seconds_total", "Time spent loading from a lower tier",
                                 prometheus::MetricType::Counter);
  auto moved = out.Family("kvfleet_worker_kv_tier_bytes_moved_total",
                          "Bytes written down into a tier or read back up from it", prometheus::MetricType::Counter);
  auto evictions = out.Family("kvfleet_worker_kv_tier_evictions_total", "Blocks a full lower tier dropped",
                              prometheus::MetricType::Counter);
  for (const auto& [name, t] : {std::pair<const char*, engine::KvTierCounters>{"host", s.host}, {"disk", s.disk}}) {
    if (t.capacity_blocks == 0) continue;  // this tier is off
    const std::vector<prometheus::ClientMetric::Label> tier = {{"tier", name}};
    blocks.Add(static_cast<double>(t.blocks), tier);
    capacity.Add(static_cast<double>(t.capacity_blocks), tier);
    bytes.Add(static_cast<double>(t.blocks * t.block_bytes), tier);
    hits.Add(static_cast<double>(t.hit_blocks), tier);
    loads.Add(static_cast<double>(t.loads), tier);
    load_seconds.Add(t.load_seconds, tier);
    moved.Add(static_cast<double>(t.bytes_down), {{"tier", name}, {"direction", "down"}});
    moved.Add(static_cast<double>(t.bytes_up), {{"tier", name}, {"direction", "up"}});
    evictions.Add(static_cast<double>(t.evictions), tier);
  }
  if (s.disk.capacity_blocks > 0) {
    out.Counter("kvfleet_worker_kv_disk_errors_total",
                "Disk tier blocks that read back damaged or foreign, and writes that failed",
                static_cast<double>(s.disk.errors));
    out.Gauge("kvfleet_worker_kv_disk_writable", "1 while the disk tier takes writes (0 after a failed write)",
              s.disk.writable ? 1.0 : 0.0);
  }
  return std::move(out).Take();
}

std::vector<prometheus::MetricFamily> EngineProgressCollector::Collect() const {
  const EngineProgress p = progress_();
  transport::ScrapeFamilies out;
  out.Gauge("kvfleet_worker_engine_seconds_since_progress",
            "Seconds since the engine last made progress while requests were in flight (0 when idle)",
            p.seconds_since_progress);
  out.Gauge("kvfleet_worker_engine_stalled", "1 while the health watchdog judges the engine stalled",
            p.stalled ? 1.0 : 0.0);
  return std::move(out).Take();
}

}  // namespace kvfleet::worker
