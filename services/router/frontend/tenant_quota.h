// Per-tenant quotas on the public API: requests per second and tokens per
// second (token buckets), and streams in flight. One tenant's burst cannot
// take the cluster from the others; a refused request costs nothing and is
// told when to come back.
//
// Tokens are charged as they are known: the prompt's at admission, the
// generated ones when the request ends. A request is admitted while the
// tenant's token bucket is not in debt, so one long prompt may overdraw it;
// the next request then waits until the debt is repaid at the tenant's rate.
// With auth off every caller is the tenant "".
//
// Thread-safety: thread-safe.
//
//   TenantQuotas quotas({.requests_per_second = 5, .max_streams = 8});
//   TenantQuotas::Admission a = quotas.Admit("team-a", prompt_tokens);
//   if (!a.lease) refuse with a.refusal; else run, then a.lease->Finish(generated_tokens);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kvfleet::router {

struct TenantQuotaOptions {
  double requests_per_second = 0;  // 0: no limit
  double request_burst = 0;        // the bucket's size; 0: one second's worth (at least 1)
  double tokens_per_second = 0;    // prompt + generated; 0: no limit
  double token_burst = 0;          // 0: one second's worth
  int64_t max_streams = 0;         // generating calls in flight; 0: no limit

  bool any() const { return requests_per_second > 0 || tokens_per_second > 0 || max_streams > 0; }
  absl::Status Validate() const;
};

// Which quota refused a request (the metrics' `quota` label).
enum class QuotaKind { kRequests, kTokens, kStreams };
const char* QuotaName(QuotaKind kind);

class TenantQuotas {
 public:
  using Clock = std::chrono::steady_clock;

  explicit TenantQuotas(TenantQuotaOptions options, std::function<Clock::time_point()> now = Clock::now);

  // An admitted request's share of its tenant's quotas: it holds a stream
  // slot until Finish or destruction.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    ~Lease();
    // Charges the generated tokens and frees the stream slot (once).
    void Finish(int64_t generated_tokens);

   private:
    friend class TenantQuotas;
    Lease(TenantQuotas* quotas, std::string tenant) : quotas_(quotas), tenant_(std::move(tenant)) {}
    TenantQuotas* quotas_ = nullptr;
    std::string tenant_;
  };

  struct Refusal {
    QuotaKind kind;
    std::chrono::milliseconds retry_after;
    std::string message;  // names the tenant, the quota and when to retry
  };

  // A lease, or the refusal (not a status, so the caller puts the retry
  // hint where its protocol wants it). Nothing is charged for a refusal.
  struct Admission {
    std::optional<Lease> lease;  // empty when refused
    Refusal refusal;
  };
  Admission Admit(const std::string& tenant, int64_t prompt_tokens);

  const TenantQuotaOptions& options() const { return options_; }

 private:
  struct Bucket {
    double level = 0;
    Clock::time_point at{};
  };
  struct Tenant {
    Bucket requests, tokens;
    int64_t streams = 0;
    bool started = false;
  };
  void Refill(Bucket& b, double rate, double burst, Clock::time_point now) const;
  void Release(const std::string& tenant, int64_t generated_tokens);

  const TenantQuotaOptions options_;
  const std::function<Clock::time_point()> now_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Tenant> tenants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvfleet::router
