#include "services/worker/server/proto_convert.h"

#include <gtest/gtest.h>

#include <functional>

#include "services/transport/wire/load_report_convert.h"

namespace kvfleet::worker {
namespace {

v1::GenerateRequest Basic() {
  v1::GenerateRequest r;
  r.add_prompt_token_ids(3);
  r.add_prompt_token_ids(4);
  return r;
}

TEST(ProtoConvertTest, UnsetFieldsMeanGreedyAndTheRestOfTheContext) {
  auto r = ToEngineRequest(Basic(), RequestId(9), /*context_length=*/100);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id, RequestId(9));
  EXPECT_EQ(r->prompt, (std::vector<model::TokenId>{3, 4}));
  EXPECT_TRUE(r->sampling.greedy());
  EXPECT_EQ(r->sampling.top_p, 1.0f);
  EXPECT_EQ(r->sampling.repetition_penalty, 1.0f);
  EXPECT_FALSE(r->sampling.seed.has_value());
  EXPECT_EQ(r->stopping.max_tokens, 98);
  EXPECT_FALSE(r->logprobs.enabled);
}

TEST(ProtoConvertTest, EveryFieldCarriesOver) {
  v1::GenerateRequest p = Basic();
  p.mutable_sampling()->set_temperature(0.7f);
  p.mutable_sampling()->set_top_k(5);
  p.mutable_sampling()->set_top_p(0.9f);
  p.mutable_sampling()->set_seed(42);
  p.mutable_stopping()->set_max_tokens(7);
  p.mutable_stopping()->add_stop_token_ids(11);
  p.mutable_stopping()->set_ignore_eos(true);
  p.set_cache_salt("tenant-a");
  p.set_priority(-2);
  p.set_logprobs(true);
  p.set_top_logprobs(3);
  p.add_resumed_output_token_ids(8);
  p.add_resumed_output_token_ids(9);
  auto r = ToEngineRequest(p, RequestId(1), 100);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sampling.temperature, 0.7f);
  EXPECT_EQ(r->sampling.top_k, 5);
  EXPECT_EQ(r->sampling.top_p, 0.9f);
  EXPECT_EQ(r->sampling.seed, 42u);
  EXPECT_EQ(r->stopping.max_tokens, 7);
  EXPECT_EQ(r->stopping.stop_token_ids, (std::vector<model::TokenId>{11}));
  EXPECT_TRUE(r->stopping.ignore_eos);
  EXPECT_EQ(r->cache_salt, "tenant-a");
  EXPECT_EQ(r->priority, -2);
  EXPECT_TRUE(r->logprobs.enabled);
  EXPECT_EQ(r->logprobs.top_n, 3);
  EXPECT_EQ(r->resumed_output, (std::vector<model::TokenId>{8, 9}));
}

TEST(ProtoConvertTest, APrefillHandoffCarriesItsLeaseAndIsCheckedAndTheHandoffReachesTheRouter) {
  v1::GenerateRequest p = Basic();
  p.mutable_prefill_handoff()->set_lease_id("5f3a-17");
  p.mutable_kv_peer()->set_endpoint("10.0.0.5:50052");
  p.mutable_kv_peer()->set_blocks(3);
  p.mutable_kv_peer()->set_lease_id("5f3a-16");
  auto r = ToEngineRequest(p, RequestId(1), 100);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->prefill_only);
  EXPECT_EQ(r->kv_lease_id, "5f3a-17");
  EXPECT_EQ(r->kv_peer->lease_id, "5f3a-16");
  EXPECT_FALSE(ToEngineRequest(Basic(), RequestId(1), 100)->prefill_only);
  p.mutable_prefill_handoff()->set_lease_id("");
  EXPECT_NE(ToEngineRequest(p, RequestId(1), 100).status().message().find("lease_id"), std::string::npos);
  p.mutable_prefill_handoff()->set_lease_id(std::string(129, 'x'));
  EXPECT_NE(ToEngineRequest(p, RequestId(1), 100).status().message().find("lease_id"), std::string::npos);
  p.mutable_prefill_handoff()->set_lease_id("ok");
  p.add_resumed_output_token_ids(8);
  EXPECT_NE(ToEngineRequest(p, RequestId(1), 100).status().message().find("resumed_output_token_ids"),
            std::string::npos);
  EXPECT_EQ(ToProto(engine::FinishReason::kHandoff), v1::FINISH_REASON_HANDOFF);
}

TEST(ProtoConvertTest, OversizedStringsAndAFullContextAreRefused) {
  v1::GenerateRequest p = Basic();
  p.set_request_id(std::string(200, 'x'));
  EXPECT_NE(ToEngineRequest(p, RequestId(1), 100).status().message().find("request_id"), std::string::npos);
  p = Basic();
  p.set_cache_salt(std::string(300, 'x'));
  EXPECT_NE(ToEngineRequest(p, RequestId(1), 100).status().message().find("cache_salt"), std::string::npos);
  const auto full = ToEngineRequest(Basic(), RequestId(1), /*context_length=*/2);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(full.status().message().find("2 tokens"), std::string::npos) << full.status();
}

TEST(ProtoConvertTest, OutputsMergeAndTheLastCarriesTheEnd) {
  v1::GenerateResponse response;
  AppendOutput({.new_tokens = {5}, .logprobs = {{.token = 5, .logprob = -0.5f, .top = {{5, -0.5f}}}}}, &response);
  AppendOutput({.new_tokens = {6},
                .finished = true,
                .finish_reason = engine::FinishReason::kLength,
                .usage = {.prompt_tokens = 2, .cached_prompt_tokens = 1, .generated_tokens = 2}},
               &response);
  EXPECT_EQ(response.token_ids_size(), 2);
  EXPECT_EQ(response.token_ids(1), 6);
  ASSERT_EQ(response.logprobs_size(), 1);
  EXPECT_EQ(response.logprobs(0).top(0).token_id(), 5);
  EXPECT_EQ(response.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(response.usage().cached_prompt_tokens(), 1);
}

TEST(ProtoConvertTest, StatsDeriveLoadAndUsage) {
  v1::PlacementTicket ticket;
  ticket.set_router(7);
  ticket.set_ticket(42);
  engine::EngineStats stats{.running = 4,
                            .waiting = 4,
                            .blocks_total = 10,
                            .blocks_used = 5,
                            .blocks_free = 5,
                            .pending_prefill_tokens = 30,
                            .prefill_tokens_per_second = 900,
                            .host_load_seconds_per_block = 0.002};
  stats.resident_lora = {"sql@" + std::string(64, 'a'), "chat@" + std::string(64, 'b')};
  stats.lora.loads = 4;
  stats.lora.load_seconds = 0.002;
  const WorkerLoad load = LoadOf(stats, true, {ticket});
  EXPECT_EQ(load.running, 4);
  EXPECT_EQ(load.blocks_free, 5);
  EXPECT_EQ(load.pending_prefill_tokens, 30);
  EXPECT_TRUE(load.draining);
  EXPECT_DOUBLE_EQ(load.host_load_seconds_per_block, 0.002);
  ASSERT_EQ(load.admitted.size(), 1u);
  EXPECT_EQ(load.admitted[0], (AdmittedTicket{.router = 7, .ticket = 42}));
  EXPECT_EQ(load.resident_lora, stats.resident_lora) << "the cachemanager learns the resident adapters";
  EXPECT_DOUBLE_EQ(load.lora_slot_load_seconds, 0.0005);
  const v1::WorkerStats s = ToProto(stats, 8, load);
  EXPECT_EQ(s.resident_lora_adapters_size(), 2);
  EXPECT_DOUBLE_EQ(s.lora_slot_load_seconds(), 0.0005);
  EXPECT_DOUBLE_EQ(s.prefill_tokens_per_second(), 900);
  ASSERT_EQ(s.admitted_size(), 1);
  EXPECT_EQ(s.admitted(0).ticket(), 42u);
  EXPECT_DOUBLE_EQ(s.load(), 1.0);
  EXPECT_DOUBLE_EQ(s.kv_usage(), 0.5);
  EXPECT_TRUE(s.draining());
  // The load report inside is the cachemanager's form, field for field.
  EXPECT_EQ(transport::FromProto(s.load_report()), load);
}

// A report read from the wire keeps at most WorkerLoad's bounds.
TEST(ProtoConvertTest, AReportOfTooManyResidentAdaptersIsCut) {
  v1::LoadReport report;
  for (size_t i = 0; i < WorkerLoad::kMaxResidentLora + 10; ++i) report.add_resident_lora("a" + std::to_string(i));
  const WorkerLoad load = transport::FromProto(report);
  ASSERT_EQ(load.resident_lora.size(), WorkerLoad::kMaxResidentLora);
  EXPECT_EQ(load.resident_lora.front(), "a0");
}

// A worker may be called without a router in front: it checks the limits
// table again, each value one over its (lowered) limit refused by name.
TEST(ProtoConvertTest, TheWorkerChecksTheLimitsTableItself) {
  const limits::RequestLimits l{.max_prompt_tokens = 2,
                                .max_output_tokens = 8,
                                .max_stop_token_ids = 1,
                                .max_top_logprobs = 2,
                                .max_request_id_bytes = 4,
                                .max_cache_salt_bytes = 4,
                                .max_priority = 3};
  const std::vector<std::pair<std::string, std::function<void(v1::GenerateRequest&)>>> over = {
      {"--max-prompt-tokens", [](auto& r) { r.add_prompt_token_ids(5); }},
      {"--max-output-tokens", [](auto& r) { r.mutable_stopping()->set_max_tokens(9); }},
      {"--max-stop-token-ids",
       [](auto& r) { r.mutable_stopping()->add_stop_token_ids(1), r.mutable_stopping()->add_stop_token_ids(2); }},
      {"--max-top-logprobs", [](auto& r) { r.set_top_logprobs(3); }},
      {"--max-request-id-bytes", [](auto& r) { r.set_request_id("12345"); }},
      {"--max-cache-salt-bytes", [](auto& r) { r.set_cache_salt("12345"); }},
      {"--max-priority", [](auto& r) { r.set_priority(-4); }},
  };
  ASSERT_TRUE(ToEngineRequest(Basic(), RequestId(1), 100, l).ok());
  for (const auto& [flag, make_over] : over) {
    SCOPED_TRACE(flag);
    v1::GenerateRequest r = Basic();
    make_over(r);
    const absl::Status s = ToEngineRequest(r, RequestId(1), 100, l).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(flag), std::string::npos) << s;
  }
  v1::GenerateRequest sum = Basic();
  sum.mutable_stopping()->set_max_tokens(99);
  EXPECT_NE(ToEngineRequest(sum, RequestId(1), 100).status().message().find("101 exceeds"), std::string::npos);
}

}  // namespace
}  // namespace kvfleet::worker
