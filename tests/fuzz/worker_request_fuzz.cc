// A Generate call as a worker receives it, from anyone who can reach its
// port: any bytes parsed as the request, converted and checked against the
// limits table and the engine's own rules. Nothing crashes; what passes is
// within every limit.
#include "kvfleet/v1/worker.pb.h"
#include "services/worker/server/proto_convert.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvfleet;
  constexpr int64_t kContext = 2048;
  constexpr int64_t kVocab = 49152;
  v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  const limits::RequestLimits limits;
  absl::StatusOr<engine::EngineRequest> r = worker::ToEngineRequest(request, RequestId(1), kContext, limits);
  if (!r.ok()) {
    fuzz::Check(r.status().code() == absl::StatusCode::kInvalidArgument, "a refusal that is not INVALID_ARGUMENT");
    return 0;
  }
  fuzz::Check(r->stopping.max_tokens >= 1, "max_tokens below 1 accepted");
  if (!r->prompt.empty()) {
    fuzz::Check(static_cast<int64_t>(r->prompt.size()) + r->stopping.max_tokens <= kContext,
                "prompt + max_tokens over the context accepted");
  }
  fuzz::Check(r->stopping.stop_token_ids.size() <= static_cast<size_t>(limits.max_stop_token_ids), "stop ids");
  fuzz::Check(r->cache_salt.size() <= static_cast<size_t>(limits.max_cache_salt_bytes), "salt");
  (void)r->sampling.Validate();
  (void)r->stopping.Validate(kVocab);
  return 0;
}
