// Bearer tokens of the public API, mapped to tenants. The file holds the
// SHA-256 of each token (hex), never the token, so a leaked file or backup
// leaks no credential:
//
//   # sha256(token) in hex          tenant
//   9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 team-search
//
// Lookup hashes the presented token and compares it with every entry in
// constant time (no early exit, CRYPTO_memcmp), so timing says nothing about
// which or how many bytes matched. The file is re-read when its modification
// time changes (looked at no more than once a second), so tokens are added
// and revoked without a restart; a file that no longer parses keeps the last
// good table and is logged.
//
// Thread-safety: Lookup is safe from any thread.
//
//   ASSIGN_OR_RETURN(auto tokens, TenantTokens::Load("/etc/kvfleet/tokens"));
//   std::optional<std::string> tenant = tokens->Lookup(bearer);
#pragma once

#include <array>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kvfleet::router {

class TenantTokens {
 public:
  using Digest = std::array<unsigned char, 32>;
  struct Entry {
    Digest digest;
    std::string tenant;
  };

  // INVALID_ARGUMENT naming the file and line for a malformed entry (a
  // digest that is not 64 hex digits, a tenant name not [A-Za-z0-9._-]{1,64},
  // a digest listed twice); NOT_FOUND when it cannot be read.
  static absl::StatusOr<std::unique_ptr<TenantTokens>> Load(const std::string& path);
  static absl::StatusOr<std::vector<Entry>> Parse(std::string_view text, const std::string& path);

  // The tenant `token` belongs to; nullopt for an unknown or empty one.
  std::optional<std::string> Lookup(std::string_view token);

  static Digest Sha256(std::string_view text);

 private:
  TenantTokens(std::string path, std::vector<Entry> entries, std::filesystem::file_time_type mtime);
  void ReloadIfChanged() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  std::shared_ptr<const std::vector<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::filesystem::file_time_type mtime_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_check_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvfleet::router
