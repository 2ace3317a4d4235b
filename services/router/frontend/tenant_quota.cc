#include "services/router/frontend/tenant_quota.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvfleet::router {
namespace {

double BurstOr(double burst, double rate) { return burst > 0 ? burst : std::max(rate, 1.0); }

std::string Who(const std::string& tenant) { return tenant.empty() ? "this router's callers" : "tenant " + tenant; }

std::chrono::milliseconds Ceil(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(std::max(seconds, 0.001) * 1000)));
}

}  // namespace

absl::Status TenantQuotaOptions::Validate() const {
  if (requests_per_second < 0 || request_burst < 0 || tokens_per_second < 0 || token_burst < 0 || max_streams < 0) {
    return absl::InvalidArgumentError("tenant quotas must be >= 0 (0: no limit)");
  }
  if ((request_burst > 0 && requests_per_second == 0) || (token_burst > 0 && tokens_per_second == 0)) {
    return absl::InvalidArgumentError("a tenant burst needs its rate (--tenant-requests-per-second, "
                                      "--tenant-tokens-per-second)");
  }
  if (request_burst > 0 && request_burst < 1) {
    return absl::InvalidArgumentError("--tenant-request-burst must be >= 1 so a request can ever be admitted");
  }
  return absl::OkStatus();
}

const char* QuotaName(QuotaKind kind) {
  switch (kind) {
    case QuotaKind::kRequests:
      return "requests";
    case QuotaKind::kTokens:
      return "tokens";
    case QuotaKind::kStreams:
      return "streams";
  }
  return "unknown";
}

TenantQuotas::TenantQuotas(TenantQuotaOptions options, std::function<Clock::time_point()> now)
    : options_(options), now_(std::move(now)) {}

void TenantQuotas::Refill(Bucket& b, double rate, double burst, Clock::time_point now) const {
  const double elapsed = std::chrono::duration<double>(now - b.at).count();
  b.level = std::min(burst, b.level + rate * std::max(elapsed, 0.0));
  b.at = now;
}

TenantQuotas::Admission TenantQuotas::Admit(const std::string& tenant, int64_t prompt_tokens) {
  const Clock::time_point now = now_();
  const double request_burst = BurstOr(options_.request_burst, options_.requests_per_second);
  const double token_burst = BurstOr(options_.token_burst, options_.tokens_per_second);
  absl::MutexLock lock(&mu_);
  Tenant& t = tenants_[tenant];
  if (!t.started) {  // a new tenant starts with full buckets
    t.requests = {.level = request_burst, .at = now};
    t.tokens = {.level = token_burst, .at = now};
    t.started = true;
  }
  Admission a;
  if (options_.max_streams > 0 && t.streams >= options_.max_streams) {
    a.refusal = {QuotaKind::kStreams, std::chrono::milliseconds(1000),
                 absl::StrCat(Who(tenant), " has ", t.streams, " generating calls in flight, its limit (--tenant-max-",
                              "streams ", options_.max_streams, "); retry once one ends")};
    return a;
  }
  if (options_.requests_per_second > 0) {
    Refill(t.requests, options_.requests_per_second, request_burst, now);
    if (t.requests.level < 1) {
      const auto wait = Ceil((1 - t.requests.level) / options_.requests_per_second);
      a.refusal = {QuotaKind::kRequests, wait,
                   absl::StrCat(Who(tenant), " is over its quota of ", options_.requests_per_second,
                                " requests per second (--tenant-requests-per-second); retry in ", wait.count(), " ms")};
      return a;
    }
  }
  if (options_.tokens_per_second > 0) {
    Refill(t.tokens, options_.tokens_per_second, token_burst, now);
    if (t.tokens.level < 0) {
      const auto wait = Ceil(-t.tokens.level / options_.tokens_per_second);
      a.refusal = {QuotaKind::kTokens, wait,
                   absl::StrCat(Who(tenant), " is over its quota of ", options_.tokens_per_second,
                                " tokens per second (--tenant-tokens-per-second); retry in ", wait.count(), " ms")};
      return a;
    }
    t.tokens.level -= static_cast<double>(prompt_tokens);
  }
  if (options_.requests_per_second > 0) t.requests.level -= 1;
  ++t.streams;
  a.lease.emplace(Lease(this, tenant));
  return a;
}

void TenantQuotas::Release(const std::string& tenant, int64_t generated_tokens) {
  absl::MutexLock lock(&mu_);
  Tenant& t = tenants_[tenant];
  --t.streams;
  if (options_.tokens_per_second > 0) t.tokens.level -= static_cast<double>(generated_tokens);
}

TenantQuotas::Lease::Lease(Lease&& other) noexcept
    : quotas_(std::exchange(other.quotas_, nullptr)), tenant_(std::move(other.tenant_)) {}

TenantQuotas::Lease& TenantQuotas::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Finish(0);
    quotas_ = std::exchange(other.quotas_, nullptr);
    tenant_ = std::move(other.tenant_);
  }
  return *this;
}

TenantQuotas::Lease::~Lease() { Finish(0); }

void TenantQuotas::Lease::Finish(int64_t generated_tokens) {
  if (quotas_ == nullptr) return;
  std::exchange(quotas_, nullptr)->Release(tenant_, generated_tokens);
}

}  // namespace kvfleet::router
