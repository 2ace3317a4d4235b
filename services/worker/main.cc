// kvfleet-worker: wires the engine, the gRPC service, health, metrics and
// drain together. The order matters: what can be refused at once (the
// flags, the device, the model file) is checked before anything is bound
// or announced; then the server is bound (health NOT_SERVING) before the
// weights are prepared, so an orchestrator sees a live but not-ready
// process. What needs the weights prepared (the executor, the memory plan,
// a draft model, draft heads, the KV tiers) can still fail after
// "listening"; "ready" follows every step. SIGTERM drains before exit.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/flags/flags.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/engine.h"
#include "engine/executor/executor_factory.h"
#include "engine/executor/memory_plan.h"
#include "engine/executor_kv_tiers.h"
#include "model/model.h"
#include "model/model_card.h"
#include "model/model_fingerprint.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "services/transport/grpc/grpc_server.h"
#include "services/transport/metrics/metrics_exposer.h"
#include "services/transport/service_main.h"
#include "services/transport/termination_signals.h"
#include "services/transport/wire/model_card_convert.h"
#include "services/worker/server/health_watchdog.h"
#include "services/worker/server/kv_event_publisher.h"
#include "services/worker/server/worker_metrics.h"
#include "services/worker/server/worker_mode.h"
#include "services/worker/server/worker_options.h"
#include "services/worker/server/worker_service.h"
#include "services/worker/transfer/kv_peer_client.h"
#include "services/worker/transfer/kv_transfer_service.h"

namespace kvfleet::worker {
namespace {

using transport::TerminationSignals;

// What is checked before the worker binds or says anything: a refusal
// comes before "listening".
struct CheckedStart {
  std::unique_ptr<model::Model> model;  // read and bound: every tensor checked
  engine::Device device;                // present and usable
  engine::SchedulerConfig scheduler;    // the device's defaults with the flags given
  engine::ChosenMode mode;              // the flags', or the calibration record's, or exact
};

absl::StatusOr<CheckedStart> CheckStart(const WorkerOptions& o) {
  CheckedStart c;
  ASSIGN_OR_RETURN(c.device, engine::ResolveDevice(o.device));
  ASSIGN_OR_RETURN(c.scheduler, ResolveScheduler(o, c.device.kind));
  ASSIGN_OR_RETURN(c.model, model::Model::Load(o.model_path));
  ASSIGN_OR_RETURN(c.mode, ResolveWorkerMode(o, *c.model, c.device.kind));
  KVFLEET_LOG_INFO("numerics mode: {}", c.mode.reason);
  return c;
}

// What exists only once the model has loaded.
struct LoadedModel {
  std::unique_ptr<model::Model> model;
  engine::SchedulerConfig scheduler;  // the device's defaults with the flags given
  engine::ChosenMode mode;
  std::unique_ptr<engine::ModelExecutor> executor;
  std::unique_ptr<engine::spec::ProposerSet> proposers;
  std::vector<model::TokenId> end_of_turn;
  std::unique_ptr<GrammarCompiler> grammar;     // structured output
  std::string fingerprint;                      // roots the block hashes, with the id
  std::shared_ptr<const ModelCardChunks> card;  // what DescribeModel streams
  std::unique_ptr<LoraRegistry> loras;          // null without --max-loras
};

// The model as routers learn it: the card (with --served-model-name and
// --chat-template), cut into DescribeModel's chunks once.
std::shared_ptr<const ModelCardChunks> ChunkedCardOf(const WorkerOptions& o, const model::Model& m,
                                                     const std::string& fingerprint, const std::string& chat_template) {
  model::ModelCard card = model::CardOf(m, o.model_id, fingerprint);
  card.served_name = o.served_model_name;
  if (!chat_template.empty()) card.vocabulary.chat_template = chat_template;
  return std::make_shared<const ModelCardChunks>(transport::ChunkModelCard(card));
}

// Weights and scratch first (target and draft), then the memory plan sizes
// both KV caches from what is left.
absl::StatusOr<LoadedModel> LoadModel(const WorkerOptions& o, CheckedStart checked, WorkerMetrics& metrics,
                                      const std::string& chat_template) {
  LoadedModel m;
  m.model = std::move(checked.model);
  // Read once, then remembered in --cache-dir: about a second per GB the first time.
  const auto fingerprint_started = std::chrono::steady_clock::now();
  m.fingerprint = model::CachedModelFingerprint(*m.model, o.cache_dir);
  KVFLEET_LOG_INFO(
      "model {} fingerprint {} ({} ms)", o.model_id, m.fingerprint,
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - fingerprint_started)
          .count());
  m.card = ChunkedCardOf(o, *m.model, m.fingerprint, chat_template);
  m.scheduler = checked.scheduler;
  const engine::Device device = checked.device;
  ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tok, model::CreateTokenizer(m.model->vocabulary()));
  m.end_of_turn.assign(tok->StopTokens().begin(), tok->StopTokens().end());
  ASSIGN_OR_RETURN(m.grammar, GrammarCompiler::Create(*tok, static_cast<int32_t>(m.model->config().vocab_size),
                                                      [&metrics](double s) { metrics.RecordGrammarMask(s); }));
  m.mode = checked.mode;
  if (m.mode.kv != kernels::KvCacheDtype::kF16 && !m.mode.from_record) {
    // Offered for capacity; only a calibration record says whether it is
    // as accurate as llama.cpp's q8_0 cache on this model.
    KVFLEET_LOG_WARN(
        "--kv-cache-dtype {} holds about twice the tokens, but no calibration record for this model shows it "
        "passing the accuracy gate (docs/operations.md, \"Choosing a mode\"); run kvfleet eval --calibrate, or use "
        "f16 where answers must match",
        kernels::KvCacheDtypeName(m.mode.kv));
  }
  ASSIGN_OR_RETURN(m.executor,
                   engine::CreateExecutor(*m.model, {.device = device,
                                                     .block_size = o.block_size,
                                                     .num_threads = o.threads,
                                                     .cpu_activations = m.mode.activations,
                                                     .kv_cache_dtype = m.mode.kv,
                                                     .key_channel_scales = m.mode.key_channel_scales,
                                                     .free_window_blocks = o.free_window_blocks,
                                                     .tensor_parallel = o.tensor_parallel,
                                                     .rank_fault = o.fault_tensor_parallel_rank,
                                                     .lora = {.max_loras = o.max_loras, .max_rank = o.max_lora_rank},
                                                     .limits = engine::EngineOptions::ExecutorLimitsFor(
                                                         m.scheduler, o.speculation.max_draft_tokens)}));
  engine::spec::ProposerConfig proposers_config = o.proposers;
  // A draft model takes the target's activation mode (its KV cache stays
  // float16: drafts are proposals, and verification keeps tokens exact).
  proposers_config.cpu_activations = m.mode.activations;
  ASSIGN_OR_RETURN(
      std::unique_ptr<engine::spec::DraftModel> draft,
      engine::spec::ProposerSet::LoadDraftModel(proposers_config, m.executor->info(),
                                                {.model = *m.model, .path = o.model_path, .fingerprint = m.fingerprint},
                                                engine::CreateExecutor));
  ASSIGN_OR_RETURN(engine::MemoryPlan plan,
                   engine::PlanMemory({.kv_cache_memory = o.kv_cache_memory,
                                       .target = m.executor.get(),
                                       .draft = draft != nullptr ? draft->executor.get() : nullptr,
                                       .host_kv_tier_bytes = o.kv_tiers.host_bytes}));
  KVFLEET_LOG_INFO("{}", plan.ToString());
  RETURN_IF_ERROR(m.executor->AllocateKvCache(plan.num_blocks));
  if (draft != nullptr) RETURN_IF_ERROR(draft->executor->AllocateKvCache(plan.num_blocks));
  metrics.SetMemoryPlan(plan.Components());
  metrics.SetDevice(m.executor->info().device.ToString(), m.executor->info().numerics, m.mode.source);
  ASSIGN_OR_RETURN(engine::spec::ProposerSet proposers,
                   engine::spec::ProposerSet::Build(
                       proposers_config, *m.executor,
                       {.model = *m.model, .path = o.model_path, .fingerprint = m.fingerprint}, std::move(draft)));
  m.proposers = std::make_unique<engine::spec::ProposerSet>(std::move(proposers));
  if (o.max_loras > 0) {
    std::vector<std::string> reserved = {o.model_id};
    if (!o.served_model_name.empty()) reserved.push_back(o.served_model_name);
    m.loras = std::make_unique<LoraRegistry>(*m.model, LoraRegistryOptions{.max_rank = o.max_lora_rank,
                                                                           .base_fingerprint = m.fingerprint,
                                                                           .adapter_dir = o.lora_dir,
                                                                           .reserved_names = std::move(reserved)});
    for (const auto& [name, path] : o.loras) {
      absl::StatusOr<LoadedLora> loaded = m.loras->Load(name, path);
      if (!loaded.ok()) {
        return absl::Status(loaded.status().code(),
                            absl::StrCat("--lora ", name, "=", path, ": ", loaded.status().message()));
      }
      KVFLEET_LOG_INFO("LoRA adapter '{}' from {}: rank {}, {:.1f} MiB, read in {:.3f} s", name, path,
                       loaded->adapter->rank, loaded->adapter->parameters() * 4.0 / (1 << 20), loaded->load_seconds);
    }
  }
  return m;
}

// The transfer address as peers reach it: the bound one, or, bound to every
// interface, the advertised host with the bound port.
std::string KvTransferEndpoint(const WorkerOptions& o, const std::optional<transport::RunningServer>& server) {
  if (!server.has_value()) return "";
  const std::string_view host = std::string_view(server->address).substr(0, server->address.rfind(':'));
  if ((host == "0.0.0.0" || host == "[::]") && !o.advertise_address.empty()) {
    return absl::StrCat(o.advertise_address.substr(0, o.advertise_address.rfind(':')), ":", server->port);
  }
  return server->address;
}

v1::WorkerInfo MakeInfo(const WorkerOptions& o, const LoadedModel& m) {
  const engine::ExecutorInfo& e = m.executor->info();
  v1::WorkerInfo info;
  info.set_model_id(o.model_id);
  info.set_vocab_size(static_cast<int32_t>(e.vocab_size));
  info.set_block_size(static_cast<int32_t>(e.block_size));
  info.set_max_context(static_cast<int32_t>(e.context_length));
  info.set_kv_capacity_blocks(static_cast<int32_t>(e.num_blocks));
  info.set_kv_capacity_tokens(e.num_blocks * e.block_size);
  info.set_kv_bytes_per_token(e.kv_bytes_per_token);
  for (model::TokenId t : m.end_of_turn) info.add_end_of_turn_token_ids(t);
  info.set_max_num_seqs(m.scheduler.max_num_seqs);
  info.set_max_waiting_requests(o.max_waiting_requests);
  info.set_device(e.device.ToString());
  info.set_numerics(e.numerics);
  info.set_cpu_activations(std::string(engine::CpuActivationsName(m.mode.activations)));
  info.set_kv_cache_dtype(std::string(kernels::KvCacheDtypeName(m.mode.kv)));
  info.set_mode_source(m.mode.source);
  info.set_mode_reason(m.mode.reason);
  info.set_role(std::string(WorkerRoleName(o.role)));
  info.set_max_loras(e.lora_slots);
  info.set_max_lora_rank(e.lora_slots > 0 ? e.max_lora_rank : 0);
  return info;
}

// SIGTERM: stop taking requests, let the running ones finish (a second
// signal or the drain timeout cuts that short), then stop.
void Drain(const WorkerOptions& o, WorkerService& service, HealthWatchdog& watchdog, engine::Engine& engine) {
  KVFLEET_LOG_INFO("draining: {} streams in flight, up to {} ms", service.active_streams(), o.drain_timeout.count());
  watchdog.SetDraining(true);
  service.BeginDrain();
  const auto deadline = std::chrono::steady_clock::now() + o.drain_timeout;
  while (service.active_streams() > 0 && std::chrono::steady_clock::now() < deadline) {
    if (TerminationSignals::Poll(std::chrono::milliseconds(20))) {
      KVFLEET_LOG_WARN("second signal: cancelling the remaining streams");
      break;
    }
  }
  if (service.active_streams() > 0) {
    KVFLEET_LOG_WARN("drain: cancelling {} streams still running", service.active_streams());
    service.CancelAll();
    const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (service.active_streams() > 0 && std::chrono::steady_clock::now() < grace) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

absl::Status Run(const WorkerOptions& o) {
  // A chat template for the routers is checked before any weight is read.
  std::string chat_template;
  if (!o.chat_template_path.empty()) {
    ASSIGN_OR_RETURN(chat_template, model::ReadChatTemplateFile(o.chat_template_path));
    if (absl::StatusOr<model::ChatTemplate> t = model::ChatTemplate::FromTemplateSource(chat_template); !t.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--chat-template does not load: ", t.status().message()));
    }
  }
  ASSIGN_OR_RETURN(CheckedStart checked, CheckStart(o));
  WorkerMetrics metrics;
  ASSIGN_OR_RETURN(std::unique_ptr<transport::MetricsExposer> exposer,
                   transport::StartMetricsExposer(o.transport.metrics_host, o.transport.metrics_port));
  exposer->RegisterCollectable(metrics.registry());
  WorkerService service(metrics, o.limits);
  ASSIGN_OR_RETURN(transport::RunningServer server, transport::StartGrpcServer(transport::ServerOptionsFrom(
                                                        o.transport, {&service}, "kvfleet.v1.Worker")));
  // The KV transfer port is bound now, so peers learn it at once; it
  // answers UNAVAILABLE until the engine runs.
  KvTransferService transfer({.max_concurrent_pulls = o.kv_transfer_max_pulls,
                              .export_deadline = o.kv_transfer_deadline,
                              .fault = o.fault_kv_transfer});
  std::optional<transport::RunningServer> transfer_server;
  if (!o.kv_transfer_listen.empty()) {
    transport::GrpcServerOptions t = transport::ServerOptionsFrom(o.transport, {&transfer}, "kvfleet.v1.KvTransfer");
    t.address = o.kv_transfer_listen;
    t.allowed_peers = o.kv_transfer_allowed_peers;
    t.health_port = -1;
    ASSIGN_OR_RETURN(transfer_server, transport::StartGrpcServer(t));
    transfer_server->SetLive(true);
    transfer_server->SetReady(true);
  }
  transport::PrintListening("kvfleet-worker", server, o.transport.metrics_host, exposer->port(), "",
                            transfer_server ? transfer_server->address : "");

  ASSIGN_OR_RETURN(LoadedModel m, LoadModel(o, std::move(checked), metrics, chat_template));
  const std::string endpoint = o.advertise_address.empty() ? server.address : o.advertise_address;
  std::unique_ptr<KvEventPublisher> publisher;
  if (!o.cachemanager.empty()) {
    publisher = std::make_unique<KvEventPublisher>(
        KvEventPublisherOptions{.cachemanager_address = o.cachemanager,
                                .worker_id = o.worker_id.empty() ? endpoint : o.worker_id,
                                .endpoint = endpoint,
                                .model_id = o.model_id,
                                .block_size = static_cast<int32_t>(m.executor->info().block_size),
                                .capacity_blocks = static_cast<int32_t>(m.executor->info().num_blocks),
                                .numerics = m.executor->info().numerics,
                                .role = std::string(WorkerRoleName(o.role)),
                                .channel = transport::PeerChannelOptions(o.transport),
                                .fault_drop_event_batch = o.fault_drop_event_batch});
  }
  // The tiers sit between the engine's pool and the publisher.
  std::unique_ptr<engine::KvTierManager> tiers;
  if (o.kv_tiers.enabled()) {
    ASSIGN_OR_RETURN(tiers, engine::CreateKvTiers(o.kv_tiers, *m.executor, o.model_id, publisher.get()));
    const engine::KvTierStats t = tiers->stats();
    if (publisher) publisher->SetLowerTierCapacity(t.host.capacity_blocks, t.disk.capacity_blocks);
    KVFLEET_LOG_INFO("KV tiers below the device: host {} blocks, disk {} blocks ({} adopted)", t.host.capacity_blocks,
                     t.disk.capacity_blocks, t.disk.blocks);
  }
  const engine::KvTransferIdentity identity =
      KvTransferIdentityOf(m.executor->info(), o.model_id, std::string(kernels::KvCacheDtypeName(m.mode.kv)));
  transport::ClientChannelOptions peer_channel = transport::PeerChannelOptions(o.transport);
  peer_channel.server_name = o.kv_transfer_tls_name;
  KvPeerClient peers({.identity = identity,
                      .channel = peer_channel,
                      .deadline = o.kv_transfer_deadline,
                      .max_concurrent_pulls = o.kv_transfer_max_pulls,
                      .max_bytes_in_flight = o.kv_transfer_max_bytes,
                      .max_peer_bytes_in_flight = o.kv_transfer_max_peer_bytes});
  engine::Engine engine(*m.executor,
                        {.model_id = o.model_id,
                         .model_fingerprint = m.fingerprint,
                         .scheduler = m.scheduler,
                         .enable_prefix_caching = o.enable_prefix_caching,
                         .end_of_turn_tokens = m.end_of_turn,
                         .max_waiting_requests = o.max_waiting_requests,
                         .step_observer = &metrics,
                         .proposers = m.proposers->pointers(),
                         .speculation = o.speculation,
                         .kv_tiers = tiers.get(),
                         .kv_peer_fetcher = &peers,
                         .kv_lease_duration = o.kv_lease,
                         // A replica whose ranks disagree must not serve another step:
                         // unready, then gone, so the router resumes its streams elsewhere.
                         .on_executor_fault =
                             [&server](const absl::Status& fault) {
                               server.SetReady(false);
                               server.SetLive(false);
                               KVFLEET_LOG_ERROR("kvfleet-worker: {}; exiting", std::string(fault.message()));
                               spdlog::default_logger()->flush();
                               std::_Exit(1);
                             }},
                        publisher.get());
  auto engine_stats = std::make_shared<EngineStatsCollector>([&engine] { return engine.Stats(); });
  exposer->RegisterCollectable(engine_stats);
  std::shared_ptr<KvTierStatsCollector> tier_stats;
  if (tiers != nullptr) {
    tier_stats = std::make_shared<KvTierStatsCollector>([t = tiers.get()] { return t->stats(); });
    exposer->RegisterCollectable(tier_stats);
  }
  auto grammar_stats = std::make_shared<GrammarStatsCollector>(*m.grammar);
  exposer->RegisterCollectable(grammar_stats);
  service.SetGrammarCompiler(m.grammar.get());
  service.SetLoraRegistry(m.loras.get());
  engine.Start();
  transfer.Serve(engine, identity);
  if (publisher) service.OnAdmission([p = publisher.get()] { p->NotifyLoadChanged(); });
  v1::WorkerInfo info = MakeInfo(o, m);
  info.set_kv_transfer_endpoint(KvTransferEndpoint(o, transfer_server));
  info.set_model_fingerprint(m.fingerprint);
  info.set_model_card_digest(m.card->front().card_digest());
  service.Attach(engine, std::move(info), m.card);
  HealthWatchdog watchdog([&engine] { return engine.Heartbeat(); }, {.stall_timeout = o.stall_timeout},
                          [&server](HealthVerdict health) {
                            server.SetLive(health.live);
                            server.SetReady(health.ready);
                          });
  auto progress = std::make_shared<EngineProgressCollector>(
      [&watchdog] { return watchdog.Progress(HealthWatchdog::Clock::now()); });
  exposer->RegisterCollectable(progress);
  watchdog.SetLoaded(true);
  watchdog.Start();
  if (publisher)
    publisher->Start(
        engine, [&service] { return service.draining(); }, &service.admitted());
  KVFLEET_LOG_INFO("speculation: default proposer {}, at most {} drafted tokens, {}; loaded: {}",
                   o.speculation.proposer, o.speculation.max_draft_tokens,
                   o.speculation.adaptive ? "adaptive" : "fixed length", absl::StrJoin(o.proposers.names(), ", "));
  KVFLEET_LOG_INFO("serving {} on {} ({}, numerics {})", o.model_id, server.address,
                   m.executor->info().device.ToString(), m.executor->info().numerics);
  std::printf("kvfleet-worker ready\n");
  std::fflush(stdout);

  const int sig = TerminationSignals::Wait();
  KVFLEET_LOG_INFO("received signal {}", sig);
  Drain(o, service, watchdog, engine);
  server.Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  transfer.Stop();  // waits for the pulls it serves; later ones get UNAVAILABLE
  if (transfer_server) transfer_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  exposer->RemoveCollectable(progress);  // it reads the watchdog and the engine
  watchdog.Stop();
  if (publisher) publisher->Stop();
  exposer->RemoveCollectable(engine_stats);  // no scrape may read the engine past here
  if (tier_stats) exposer->RemoveCollectable(tier_stats);
  engine.Stop();
  KVFLEET_LOG_INFO("stopped");
  return absl::OkStatus();
}

}  // namespace
}  // namespace kvfleet::worker

int main(int argc, char** argv) {
  return kvfleet::transport::ServiceMain(argc, argv, "kvfleet-worker", kvfleet::worker::WorkerUsage(),
                                         kvfleet::worker::ParseWorkerOptions, kvfleet::worker::Run);
}
