#include "engine/engine.h"

#include <algorithm>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/pending_prefill.h"

namespace kvfleet::engine {

absl::Status EngineOptions::Validate() const {
  RETURN_IF_ERROR(scheduler.Validate());
  std::vector<std::string> names;
  for (const spec::Proposer* p : proposers) names.emplace_back(p->name());
  return speculation.Validate(names);
}

ExecutorLimits EngineOptions::ExecutorLimitsNeeded() const {
  return ExecutorLimitsFor(scheduler, proposers.empty() ? 0 : speculation.max_draft_tokens);
}

ExecutorLimits EngineOptions::ExecutorLimitsFor(const SchedulerConfig& scheduler, int32_t max_draft_tokens) {
  const int32_t tokens = scheduler.max_num_batched_tokens;
  const int32_t chunks = std::min(scheduler.max_num_seqs, tokens);
  const int32_t per_chunk = 1 + max_draft_tokens;
  return {.max_batch_tokens = tokens,
          .max_batch_chunks = chunks,
          .max_logits_rows = static_cast<int32_t>(std::min<int64_t>(tokens, int64_t{chunks} * per_chunk))};
}

Engine::Engine(ModelExecutor& executor, const EngineOptions& options, KvEventListener* listener)
    : executor_(executor),
      options_(options),
      listener_(listener),
      pending_prefill_(static_cast<int32_t>(executor.info().block_size),
                       options.kv_tiers != nullptr ? static_cast<KvEventListener*>(options.kv_tiers) : listener,
                       options.enable_prefix_caching),
      pool_(static_cast<int32_t>(executor.info().num_blocks), &pending_prefill_),
      kv_(pool_, static_cast<int32_t>(executor.info().block_size), options.model_id, options.enable_prefix_caching,
          executor.info().kv_groups.group_window.empty() ? std::vector<int64_t>{0}
                                                         : executor.info().kv_groups.group_window,
          options.model_fingerprint),
      lora_(executor.info().lora_slots > 0 ? std::make_unique<LoraResidency>(executor, executor.info().lora_slots)
                                           : nullptr),
      scheduler_(options.scheduler, kv_, lora_.get()),
      speculator_(options.speculation, options.proposers, kv_),
      batch_builder_(BatchBuilderFor(executor.info())),
      kv_leases_(pool_, pool_.num_blocks() / 2) {
  CHECK(options.Validate().ok()) << options.Validate();
  pending_prefill_.Attach(pool_);
  if (options.kv_tiers != nullptr) {
    options.kv_tiers->Attach(pool_);
    kv_.set_lower_tiers(options.kv_tiers);
  }
  if (options.kv_peer_fetcher != nullptr) kv_.set_peer_pull([this](Request& req) { return StartPeerPull(req); });
  const ExecutorLimits need = options.ExecutorLimitsNeeded(), have = executor.info().limits;
  CHECK(need.max_batch_tokens <= have.max_batch_tokens && need.max_batch_chunks <= have.max_batch_chunks &&
        need.logits_rows() <= have.logits_rows())
      << "the executor takes batches of " << have.max_batch_tokens << " tokens, " << have.max_batch_chunks
      << " chunks and " << have.logits_rows() << " logits rows; this engine needs " << need.max_batch_tokens << ", "
      << need.max_batch_chunks << " and " << need.logits_rows();
  PublishStats(0);
}

Engine::~Engine() {
  Stop();
  // A pull's `done` reaches into the inbox: wait for those in flight (the
  // fetcher's deadline bounds them).
  std::unique_lock<std::mutex> lock(mu_);
  wake_.wait(lock, [this] { return pulls_in_flight_ == 0; });
}

absl::Status Engine::Validate(const EngineRequest& r) const {
  const ExecutorInfo& info = executor_.info();
  if (r.prompt.empty()) return absl::InvalidArgumentError("the prompt is empty; send at least one token");
  RETURN_IF_ERROR(r.sampling.Validate());
  RETURN_IF_ERROR(r.logprobs.Validate());
  RETURN_IF_ERROR(r.stopping.Validate(info.vocab_size));
  RETURN_IF_ERROR(speculator_.Validate(r.speculation));
  if (r.kv_peer.has_value() && (r.kv_peer->endpoint.empty() || r.kv_peer->blocks < 0)) {
    return absl::InvalidArgumentError("a KV peer source needs the peer's address and a block count of 0 or more");
  }
  for (model::TokenId t : r.prompt) {
    if (t < 0 || t >= info.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token id ", t, " is outside the vocabulary [0, ", info.vocab_size, ")"));
    }
  }
  for (model::TokenId t : r.resumed_output) {
    if (t < 0 || t >= info.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("resumed output token id ", t, " is outside the vocabulary [0, ", info.vocab_size, ")"));
    }
  }
  if (static_cast<int64_t>(r.resumed_output.size()) >= r.stopping.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("resumed output has ", r.resumed_output.size(),
                                                   " tokens and max_tokens is ", r.stopping.max_tokens,
                                                   ": nothing is left to generate"));
  }
  if (r.lora != nullptr) {
    if (lora_ == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("this worker serves no LoRA adapters (start it with --max-loras N); "
                       "adapter '",
                       r.lora->name, "' cannot run here"));
    }
    if (r.lora->rank > info.max_lora_rank || static_cast<int64_t>(r.lora->layers.size()) != info.num_layers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "adapter '", r.lora->name, "' (rank ", r.lora->rank, ", ", r.lora->layers.size(),
          " layers) does not fit this worker (rank up to ", info.max_lora_rank, ", ", info.num_layers, " layers)"));
    }
  }
  const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.stopping.max_tokens;
  if (total > info.context_length) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt has ", r.prompt.size(), " tokens and max_tokens is ",
                                                   r.stopping.max_tokens, ": ", total,
                                                   " exceeds the model's context length of ", info.context_length,
                                                   " tokens; shorten the prompt or lower max_tokens"));
  }
  const int32_t pages =
      kv_.MostPagesHeld(total, options_.scheduler.max_num_batched_tokens + options_.speculation.max_draft_tokens);
  if (pages > pool_.num_blocks()) {
    return absl::InvalidArgumentError(absl::StrCat("prompt + max_tokens = ", total, " tokens needs ", pages,
                                                   " KV blocks but the whole cache has ", pool_.num_blocks(),
                                                   "; lower max_tokens"));
  }
  return absl::OkStatus();
}

absl::Status Engine::Submit(EngineRequest request, OutputSink* sink) {
  CHECK(sink != nullptr);
  RETURN_IF_ERROR(Validate(request));
  const uint64_t seed = request.sampling.seed.value_or(std::random_device{}());
  auto req = std::make_unique<Request>(std::move(request), seed, 0, sink);
  if (req->params.lora != nullptr) req->lora_identity = req->params.lora->identity();
  req->cache_root =
      RootBlockHash(options_.model_id, options_.model_fingerprint, req->params.cache_salt, req->lora_identity);
  req->prompt_block_hashes = HashFullBlocks(req->cache_root, req->params.prompt, kv_.block_size());
  const RequestId id = req->id();
  const std::optional<KvPeerSource> peer = req->params.kv_peer;
  const std::string lora_identity = req->lora_identity;
  std::vector<BlockHash> early_pull;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Everything in flight beyond the running slots waits. Counted from the
    // in-flight set rather than the last step's stats, so a burst that
    // arrives between two steps is counted exactly.
    const int64_t waiting = static_cast<int64_t>(active_ids_.size()) - options_.scheduler.max_num_seqs;
    if (options_.max_waiting_requests > 0 && waiting >= options_.max_waiting_requests) {
      return absl::ResourceExhaustedError(absl::StrCat("the waiting queue is full (", waiting,
                                                       " requests wait for a running slot); retry later or "
                                                       "send the request to another worker"));
    }
    if (!active_ids_.insert(req->id()).second) {
      return absl::AlreadyExistsError(absl::StrCat("request id ", req->id().value(), " is already in flight"));
    }
    // Only while nothing waits: a request queued for KV room is admitted
    // later, and what its pull brought could be evicted meanwhile.
    if (waiting < 0 && stats_.waiting == 0 && inbox_.submitted.empty()) early_pull = ClaimPullAtArrival(*req);
    // Leading blocks some active request already computes (or holds).
    size_t covered = 0;
    while (covered < req->prompt_block_hashes.size() &&
           active_prompt_blocks_.contains(req->prompt_block_hashes[covered])) {
      ++covered;
    }
    // And those its pull is bringing.
    if (!early_pull.empty()) {
      covered =
          std::max(covered, std::min(req->prompt_block_hashes.size(), static_cast<size_t>(std::max(peer->blocks, 0))));
    }
    inbox_pending_tokens_ += std::max<int64_t>(0, req->num_tokens() - static_cast<int64_t>(covered) * kv_.block_size());
    for (const BlockHash& h : req->prompt_block_hashes) ++active_prompt_blocks_[h];
    inbox_.submitted.push_back(std::move(req));
  }
  wake_.notify_one();
  if (!early_pull.empty()) FetchFromPeer(id, *peer, lora_identity, std::move(early_pull));
  return absl::OkStatus();
}

void Engine::Cancel(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.cancelled.push_back(id);
  }
  wake_.notify_one();
}

void Engine::RequestKvSnapshot() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.snapshot = true;
  }
  wake_.notify_one();
}

void Engine::EvictLora(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.lora_evictions.push_back(name);
  }
  wake_.notify_one();
}

bool Engine::HasWork() const {
  if (!requests_.empty()) return true;
  std::lock_guard<std::mutex> lock(mu_);
  return !inbox_.empty();
}

void Engine::DrainInbox() {
  Inbox inbox;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::swap(inbox, inbox_);
    drained_requests_ += static_cast<int32_t>(inbox.submitted.size());
    drained_pending_tokens_ += inbox_pending_tokens_;
    inbox_pending_tokens_ = 0;
  }
  if (lora_ != nullptr) {
    for (const std::string& name : inbox.lora_evictions) lora_->Evict(name);
  }
  for (auto& req : inbox.submitted) {
    req->arrival = next_arrival_++;
    speculator_.Resolve(*req);
    Request* raw = req.get();
    pending_prefill_.Add(*raw);
    pending_prefill_.Arriving(raw->kv_pulling);  // a split request's pull, started at arrival
    // One that queues before its pull keeps its prefill worker's lease.
    if (raw->params.kv_peer.has_value() && !raw->params.kv_peer->lease_id.empty() && !raw->kv_peer_tried &&
        options_.kv_peer_fetcher != nullptr) {
      queued_handoffs_[raw->id()] = std::chrono::steady_clock::time_point::min();
    }
    requests_[raw->id()] = std::move(req);
    scheduler_.Add(raw);
  }
  for (RequestId id : inbox.cancelled) {
    auto it = requests_.find(id);
    if (it != requests_.end()) Finish(*it->second, FinishReason::kCancelled);
  }
  if (inbox.snapshot && options_.kv_tiers != nullptr) {
    options_.kv_tiers->OnSnapshot(pool_.CachedBlocks());  // then the lower tiers' blocks
  } else if (inbox.snapshot && listener_ != nullptr) {
    listener_->OnSnapshot(pool_.CachedBlocks());
  }
  // Exports before expiries: a pull that arrived in time finds its lease.
  for (Inbox::Export& e : inbox.exports) ServeExport(e.hashes, std::move(e.done), e.lease_id);
  for (const Inbox::StagedServed& s : inbox.staged_served) {
    kv_leases_.Release(s.lease_id);
    ++kv_peer_stats_.pulls_served;
    kv_peer_stats_.blocks_served += s.blocks;
    kv_peer_stats_.bytes_served += s.bytes;
  }
  const auto now = std::chrono::steady_clock::now();
  for (const std::string& id : inbox.renewals) kv_leases_.Renew(id, now + options_.kv_lease_duration);
  if (kv_leases_.Expire(now) > 0) DropStagedWithoutLease();
  for (Inbox::Pulled& pulled : inbox.pulled) FinishPeerPull(pulled);
  if (options_.kv_tiers != nullptr) {
    for (RequestId id : options_.kv_tiers->Poll()) {
      if (auto it = requests_.find(id); it != requests_.end()) it->second->kv_loading = false;
    }
  }
}

void Engine::Finish(Request& req, FinishReason reason, std::vector<model::TokenId> last_tokens,
                    std::vector<TokenLogprobs> last_logprobs) {
  if (reason == FinishReason::kHandoff) HoldForHandoff(req);
  scheduler_.Remove(&req);
  speculator_.Forget(req);
  pending_prefill_.Remove(req);
  req.state = RequestState::kFinished;
  RequestOutput out{.id = req.id(),
                    .new_tokens = std::move(last_tokens),
                    .logprobs = std::move(last_logprobs),
                    .finished = true,
                    .finish_reason = reason};
  if (req.first_scheduled_at) {
    out.queue_seconds = std::chrono::duration<double>(*req.first_scheduled_at - req.submitted_at).count();
  }
  out.usage = UsageSoFar(req);
  req.sink->OnOutput(std::move(out));
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_ids_.erase(req.id());
    for (const BlockHash& h : req.prompt_block_hashes) {
      auto it = active_prompt_blocks_.find(h);
      if (it != active_prompt_blocks_.end() && --it->second == 0) active_prompt_blocks_.erase(it);
    }
  }
  requests_.erase(req.id());  // destroys req
}

bool Engine::IsStopToken(const Request& req, model::TokenId token) const {
  const auto& stops = req.params.stopping.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return true;
  if (req.params.stopping.ignore_eos) return false;
  return std::find(options_.end_of_turn_tokens.begin(), options_.end_of_turn_tokens.end(), token) !=
         options_.end_of_turn_tokens.end();
}

absl::Status Engine::Step() {
  const auto start = std::chrono::steady_clock::now();
  DrainInbox();
  speculator_.Plan(scheduler_.running(), options_.scheduler.max_num_batched_tokens);
  const SchedulerOutput scheduled = scheduler_.Schedule();
  for (Request* failed : scheduled.failed) Finish(*failed, FinishReason::kError);
  if (!queued_handoffs_.empty()) RenewQueuedHandoffLeases(std::chrono::steady_clock::now());
  last_step_empty_ = scheduled.empty();
  if (scheduled.empty()) {
    PublishStats(0);
    return absl::OkStatus();
  }
  for (const ScheduledChunk& c : scheduled.chunks) {
    if (!c.request->first_scheduled_at) c.request->first_scheduled_at = start;
  }
  const ForwardBatch& batch = BuildForwardBatch(scheduled);
  PrefetchMasks(scheduled);
  const auto forward_start = std::chrono::steady_clock::now();
  absl::StatusOr<ForwardOutput> forward = executor_.Forward(batch);
  mask_wait_seconds_ += mask_prefetcher_.Wait();
  if (!forward.ok()) {
    KVFLEET_LOG_ERROR("engine step failed: {}", forward.status().ToString());
    for (const ScheduledChunk& c : scheduled.chunks) Finish(*c.request, FinishReason::kError);
    PublishStats(0);
    if (const absl::Status fault = executor_.Fault(); !fault.ok() && !executor_fault_reported_) {
      executor_fault_reported_ = true;
      if (options_.on_executor_fault) options_.on_executor_fault(fault);
    }
    return forward.status();
  }
  // The step-cost curve is learnt from decode steps only: a long prefill
  // chunk's attention would bend it away from where drafts are decided.
  bool decode_only = true;
  for (const ScheduledChunk& c : scheduled.chunks) decode_only = decode_only && c.num_tokens - c.num_draft_tokens == 1;
  if (decode_only) {
    speculator_.ObserveStep(scheduled.num_tokens,
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count());
  }
  ReportStep(scheduled, start);  // before outputs retire the requests it reads
  ObservePrefillRate(scheduled, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  ProcessOutputs(scheduled, batch, *forward);
  // Blocks only rejected or unscheduled guesses reached go back now.
  for (Request* r : scheduler_.running()) kv_.ReleaseBlocksPastTokens(*r);
  ++steps_;
  PublishStats(scheduled.num_tokens);
  return absl::OkStatus();
}

const ForwardBatch& Engine::BuildForwardBatch(const SchedulerOutput& scheduled) {
  batch_builder_.Clear();
  for (const ScheduledChunk& c : scheduled.chunks) {
    const Request& r = *c.request;
    if (c.num_draft_tokens > 0) {
      verify_tokens_.assign(1, r.tokens.back());
      verify_tokens_.insert(verify_tokens_.end(), r.draft.begin(), r.draft.begin() + c.num_draft_tokens);
      verify_parents_.clear();
      if (!r.draft_parents.empty()) {
        // Node 0 is the pending token; guess i is node i + 1.
        verify_parents_.push_back(-1);
        for (int32_t i = 0; i < c.num_draft_tokens; ++i) verify_parents_.push_back(r.draft_parents[i] + 1);
      }
      batch_builder_.AddChunk(verify_tokens_, r.num_computed_tokens, r.block_table, LogitsWanted::kAll, verify_parents_,
                              r.lora_slot);
      continue;
    }
    const bool reaches_end = r.num_computed_tokens + c.num_tokens == r.num_tokens();
    batch_builder_.AddChunk(std::span(r.tokens).subspan(r.num_computed_tokens, c.num_tokens), r.num_computed_tokens,
                            r.block_table, reaches_end ? LogitsWanted::kLast : LogitsWanted::kNone, {}, r.lora_slot);
  }
  bool want_hidden = false;
  for (const ScheduledChunk& c : scheduled.chunks)
    want_hidden = want_hidden || speculator_.NeedsHiddenState(*c.request);
  batch_builder_.SetWantHidden(want_hidden);
  return batch_builder_.Finish();
}

void Engine::PrefetchMasks(const SchedulerOutput& scheduled) {
  std::vector<std::shared_ptr<TokenConstraint>> constraints;
  for (const ScheduledChunk& c : scheduled.chunks) {
    const Request& r = *c.request;
    const bool samples = r.num_computed_tokens + c.num_tokens - c.num_draft_tokens == r.num_tokens();
    if (samples && r.params.constraint != nullptr) constraints.push_back(r.params.constraint);
  }
  mask_prefetcher_.Start(std::move(constraints));
}

void Engine::ReportStep(const SchedulerOutput& scheduled, std::chrono::steady_clock::time_point start) const {
  if (options_.step_observer == nullptr) return;
  StepReport report{.num_tokens = scheduled.num_tokens, .num_sequences = static_cast<int32_t>(scheduled.chunks.size())};
  for (const ScheduledChunk& c : scheduled.chunks) {
    const int32_t known = c.num_tokens - c.num_draft_tokens;
    const bool produces_token = c.request->num_computed_tokens + known == c.request->num_tokens();
    report.num_prefill_tokens += produces_token ? known - 1 : known;
    report.num_draft_tokens += c.num_draft_tokens;
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  options_.step_observer->OnStep(report);
}

void Engine::ProcessOutputs(const SchedulerOutput& scheduled, const ForwardBatch& batch, const ForwardOutput& forward) {
  for (size_t i = 0; i < scheduled.chunks.size(); ++i) {
    const ScheduledChunk& chunk = scheduled.chunks[i];
    Request& req = *chunk.request;
    req.num_computed_tokens += chunk.num_tokens - chunk.num_draft_tokens;
    if (req.num_computed_tokens < req.num_tokens()) {  // a prefill chunk; no token yet
      kv_.CommitFullBlocks(req);
      continue;
    }
    pending_prefill_.Computed(req);
    EmitTokens(req, chunk, forward, batch.first_logits_row(static_cast<int32_t>(i)));
  }
}

void Engine::KeepHiddenState(Request& req, const ForwardOutput& forward, int64_t row) {
  if (!speculator_.NeedsHiddenState(req)) return;
  if (forward.hidden == nullptr) {
    req.last_hidden.clear();
    return;
  }
  const std::span<const float> hidden = forward.HiddenRow(row);
  req.last_hidden.assign(hidden.begin(), hidden.end());
}

void Engine::EmitTokens(Request& req, const ScheduledChunk& chunk, const ForwardOutput& forward, int64_t first_row) {
  const int32_t drafted = chunk.num_draft_tokens;
  std::vector<model::TokenId> emitted;
  std::vector<TokenLogprobs> logprobs;
  const bool tree = !req.draft_parents.empty();
  // The guesses kept, in order: each the child of the one before (the
  // pending token first) that equals the token sampled after it.
  std::vector<int32_t> path;
  std::optional<FinishReason> finish;
  for (int32_t node = -1;;) {
    // The row of `node` (-1: the pending token) saw the pending token and
    // the guesses on its path: exactly what plain decoding would have
    // computed if those guesses are the tokens so far.
    const int64_t row_index = first_row + node + 1;
    const std::span<const float> row = forward.Row(row_index);
    model::TokenId token;
    if (TokenConstraint* constraint = req.params.constraint.get(); constraint != nullptr) {
      // The mask follows the tokens emitted so far, draft guesses included
      // only once sampled: row j's mask is the constraint after token j-1
      // (row 0's was prepared during the forward pass).
      std::vector<float> masked(row.begin(), row.end());
      constraint->MaskLogits(masked);
      token = req.sampler.Sample(masked, req.num_tokens());
      constraint->Accept(token);
    } else {
      token = req.sampler.Sample(row, req.num_tokens());
    }
    req.sampler.Accept(token);
    req.tokens.push_back(token);
    emitted.push_back(token);
    if (req.params.logprobs.enabled) logprobs.push_back(ComputeLogprobs(row, token, req.params.logprobs.top_n));
    int32_t next = -1;
    for (int32_t i = node + 1; i < drafted && next < 0; ++i) {
      if ((tree ? req.draft_parents[i] : i - 1) == node && req.draft[i] == token) next = i;
    }
    const bool agrees = next >= 0;
    if (agrees) path.push_back(next);
    if (IsStopToken(req, token)) {
      finish = FinishReason::kStop;
    } else if (req.num_output_tokens() >= req.params.stopping.max_tokens) {
      finish = FinishReason::kLength;
    } else if (req.params.prefill_only) {
      finish = FinishReason::kHandoff;
    }
    if (finish || !agrees) {
      KeepHiddenState(req, forward, row_index);
      break;
    }
    node = next;
  }
  const int32_t accepted = static_cast<int32_t>(path.size());
  // An agreeing guess was computed at its position: its KV is valid.
  req.num_computed_tokens += KeepPathKv(req, path);
  if (drafted > 0) {
    // Every guess counts as drafted, except those a stop or the length
    // limit left untested.
    const int32_t tested = finish ? std::min<int32_t>(drafted, static_cast<int32_t>(emitted.size())) : drafted;
    speculator_.RecordVerification(req, tested, accepted, path);
    req.ClearDraft();
  }
  kv_.CommitFullBlocks(req);
  if (finish) {
    // The last tokens and the end travel together in one output.
    Finish(req, *finish, std::move(emitted), std::move(logprobs));
    return;
  }
  req.sink->OnOutput(
      {.id = req.id(), .new_tokens = std::move(emitted), .logprobs = std::move(logprobs), .usage = UsageSoFar(req)});
}

int32_t Engine::KeepPathKv(const Request& req, const std::vector<int32_t>& path) {
  // Guess i's KV was written at pending + 1 + i; plain decoding's place for
  // the k-th kept guess is pending + k. A chain's (and a tree's first
  // branch's) are there already.
  const int64_t pending = req.num_computed_tokens - 1;
  int32_t in_place = 0;
  while (in_place < static_cast<int32_t>(path.size()) && path[in_place] == in_place) ++in_place;
  if (in_place == static_cast<int32_t>(path.size())) return in_place;
  move_from_.clear();
  move_to_.clear();
  for (int32_t k = in_place; k < static_cast<int32_t>(path.size()); ++k) {
    for (int32_t g = 0; g < kv_.num_groups(); ++g) {
      move_from_.push_back(kv_.SlotOf(req, pending + 1 + path[k], g));
      move_to_.push_back(kv_.SlotOf(req, pending + 1 + k, g));
    }
  }
  if (const absl::Status moved = executor_.MoveKvSlots(move_from_, move_to_); !moved.ok()) {
    // Those tokens are kept all the same; the next step computes them again.
    if (!warned_no_kv_move_) {
      KVFLEET_LOG_WARN("tree verification: {}; recomputing kept guesses off the first branch instead",
                       moved.ToString());
      warned_no_kv_move_ = true;
    }
    return in_place;
  }
  return static_cast<int32_t>(path.size());
}

void Engine::Start() {
  CHECK(!thread_.joinable()) << "engine already started";
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // A disk read for a peer's pull finishes at a step's Poll, requests or
      // not; an idle engine still ends leases at their deadline.
      const auto ready = [this] {
        return stop_ || !requests_.empty() || !inbox_.empty() ||
               (options_.kv_tiers != nullptr && options_.kv_tiers->loads_in_flight());
      };
      if (const std::optional<std::chrono::steady_clock::time_point> lease_ends = kv_leases_.NextDeadline()) {
        wake_.wait_until(lock, *lease_ends, ready);
      } else {
        wake_.wait(lock, ready);
      }
      if (stop_) return;
      // Waiting idle is not stalling: progress is measured from the wake.
      last_progress_ = std::chrono::steady_clock::now();
    }
    const absl::Status status = Step();
    if (!status.ok()) KVFLEET_LOG_ERROR("engine: {}", status.ToString());
    if (last_step_empty_ && options_.kv_tiers != nullptr && options_.kv_tiers->loads_in_flight()) {
      // Everyone waits on the disk: poll it again shortly rather than spin.
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, std::chrono::milliseconds(1), [this] { return stop_ || !inbox_.empty(); });
    }
  }
}

}  // namespace kvfleet::engine
