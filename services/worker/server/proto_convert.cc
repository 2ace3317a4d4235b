#include "services/worker/server/proto_convert.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "services/transport/wire/load_report_convert.h"

namespace kvfleet::worker {
namespace {

engine::SamplingParams ToSampling(const v1::SamplingParams& p) {
  engine::SamplingParams s;
  s.temperature = p.temperature();  // proto default 0: greedy
  s.top_k = p.top_k();
  if (p.has_top_p()) s.top_p = p.top_p();
  s.min_p = p.min_p();
  if (p.has_repetition_penalty()) s.repetition_penalty = p.repetition_penalty();
  s.presence_penalty = p.presence_penalty();
  s.frequency_penalty = p.frequency_penalty();
  if (p.has_seed()) s.seed = p.seed();
  s.logit_bias.assign(p.logit_bias().begin(), p.logit_bias().end());
  std::sort(s.logit_bias.begin(), s.logit_bias.end());  // a map's order is not the proto's
  return s;
}

}  // namespace

absl::StatusOr<engine::EngineRequest> ToEngineRequest(const v1::GenerateRequest& request, RequestId id,
                                                      int64_t context_length, const limits::RequestLimits& limits) {
  RETURN_IF_ERROR(limits::CheckGeneration(limits, {.request_id = request.request_id(),
                                                   .cache_salt = request.cache_salt(),
                                                   .priority = request.priority(),
                                                   .stopping = &request.stopping(),
                                                   .top_logprobs = request.top_logprobs()}));
  if (!request.prompt_token_ids().empty()) {
    RETURN_IF_ERROR(
        limits::CheckLength(limits, request.prompt_token_ids_size(), request.stopping().max_tokens(), context_length));
  }
  engine::EngineRequest r{.id = id, .priority = request.priority(), .cache_salt = request.cache_salt()};
  r.prompt.assign(request.prompt_token_ids().begin(), request.prompt_token_ids().end());
  r.sampling = ToSampling(request.sampling());
  const v1::StoppingParams& stopping = request.stopping();
  r.stopping.max_tokens = stopping.max_tokens();
  if (r.stopping.max_tokens == 0) {
    const int64_t room = context_length - static_cast<int64_t>(r.prompt.size());
    if (room < 1 && !r.prompt.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("the prompt has ", r.prompt.size(),
                                                     " tokens, which leaves no room in the model's context of ",
                                                     context_length, " tokens; shorten the prompt"));
    }
    r.stopping.max_tokens = static_cast<int32_t>(std::max<int64_t>(room, 1));
  }
  r.stopping.stop_token_ids.assign(stopping.stop_token_ids().begin(), stopping.stop_token_ids().end());
  r.stopping.ignore_eos = stopping.ignore_eos();
  r.logprobs = {.enabled = request.logprobs(), .top_n = request.top_logprobs()};
  r.resumed_output.assign(request.resumed_output_token_ids().begin(), request.resumed_output_token_ids().end());
  r.speculation = {.proposer = request.speculation().proposer(),
                   .max_draft_tokens = request.speculation().max_draft_tokens()};
  if (request.has_kv_peer()) {
    const v1::KvPeerSource& peer = request.kv_peer();
    if (peer.endpoint().empty() || peer.endpoint().size() > 256 || peer.blocks() < 0) {
      return absl::InvalidArgumentError(
          "kv_peer needs the peer's KV transfer address (host:port, at most 256 bytes) and a block count >= 0");
    }
    if (peer.lease_id().size() > 128) {
      return absl::InvalidArgumentError("kv_peer.lease_id is over 128 bytes");
    }
    r.kv_peer = engine::KvPeerSource{.endpoint = peer.endpoint(), .blocks = peer.blocks(), .lease_id = peer.lease_id()};
  }
  if (request.has_prefill_handoff()) {
    const std::string& lease = request.prefill_handoff().lease_id();
    if (lease.empty() || lease.size() > 128) {
      return absl::InvalidArgumentError("prefill_handoff.lease_id must be 1 to 128 bytes");
    }
    if (!request.resumed_output_token_ids().empty()) {
      return absl::InvalidArgumentError(
          "prefill_handoff computes a prompt's first token; a request with resumed_output_token_ids already has it");
    }
    r.prefill_only = true;
    r.kv_lease_id = lease;
  }
  return r;
}

v1::FinishReason ToProto(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    case engine::FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case engine::FinishReason::kCancelled:
      return v1::FINISH_REASON_CANCELLED;
    case engine::FinishReason::kError:
      return v1::FINISH_REASON_ERROR;
    case engine::FinishReason::kHandoff:
      return v1::FINISH_REASON_HANDOFF;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

void AppendOutput(const engine::RequestOutput& output, v1::GenerateResponse* response) {
  for (model::TokenId t : output.new_tokens) response->add_token_ids(t);
  for (const engine::TokenLogprobs& lp : output.logprobs) {
    v1::TokenLogprob* out = response->add_logprobs();
    out->set_token_id(lp.token);
    out->set_logprob(lp.logprob);
    for (const auto& [token, logprob] : lp.top) {
      v1::TopLogprob* top = out->add_top();
      top->set_token_id(token);
      top->set_logprob(logprob);
    }
  }
  // Usage on every message (the latest wins when outputs are merged): a
  // caller that stops reading early, e.g. at a stop string, still knows how
  // much of the prompt was cached.
  v1::Usage* usage = response->mutable_usage();
  usage->set_prompt_tokens(output.usage.prompt_tokens);
  usage->set_cached_prompt_tokens(output.usage.cached_prompt_tokens);
  usage->set_generated_tokens(output.usage.generated_tokens);
  if (output.finished) response->set_finish_reason(ToProto(output.finish_reason));
}

WorkerLoad LoadOf(const engine::EngineStats& s, bool draining, const std::vector<v1::PlacementTicket>& admitted) {
  WorkerLoad out{.running = s.running,
                 .waiting = s.waiting,
                 .blocks_used = s.blocks_used,
                 .blocks_free = s.blocks_free,
                 .blocks_total = s.blocks_total,
                 .pending_prefill_tokens = s.pending_prefill_tokens,
                 .draining = draining,
                 .prefill_tokens_per_second = s.prefill_tokens_per_second,
                 .host_load_seconds_per_block = s.host_load_seconds_per_block,
                 .disk_load_seconds_per_block = s.disk_load_seconds_per_block,
                 .peer_pull_seconds_per_block = s.kv_peer.seconds_per_block,
                 .kv_block_bytes = s.kv_block_bytes};
  for (const v1::PlacementTicket& t : admitted) out.admitted.push_back({.router = t.router(), .ticket = t.ticket()});
  out.resident_lora = s.resident_lora;
  if (s.lora.loads > 0) out.lora_slot_load_seconds = s.lora.load_seconds / static_cast<double>(s.lora.loads);
  return out;
}

v1::WorkerStats ToProto(const engine::EngineStats& s, int32_t max_num_seqs, const WorkerLoad& load) {
  v1::WorkerStats out;
  *out.mutable_load_report() = transport::ToProto(load);
  out.set_running(load.running);
  out.set_waiting(load.waiting);
  out.set_blocks_total(load.blocks_total);
  out.set_blocks_used(load.blocks_used);
  out.set_blocks_cached(s.blocks_cached);
  out.set_blocks_free(load.blocks_free);
  out.set_pending_prefill_tokens(load.pending_prefill_tokens);
  out.set_load(max_num_seqs > 0 ? static_cast<double>(load.running + load.waiting) / max_num_seqs : 0.0);
  out.set_kv_usage(load.blocks_total > 0 ? static_cast<double>(load.blocks_used) / load.blocks_total : 0.0);
  out.set_draining(load.draining);
  out.set_steps(s.steps);
  out.set_prefill_tokens_per_second(load.prefill_tokens_per_second);
  *out.mutable_admitted() = out.load_report().admitted();
  for (const std::string& identity : load.resident_lora) out.add_resident_lora_adapters(identity);
  out.set_lora_slot_load_seconds(load.lora_slot_load_seconds);
  return out;
}

}  // namespace kvfleet::worker
