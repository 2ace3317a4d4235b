// Who may change what a cluster serves (load and unload LoRA adapters):
// the admin identity. A caller is an admin when it presents a bearer token
// listed in the admin token file (--admin-tokens, the tenant token file's
// format: SHA-256 of each token and a name), or, over gRPC with mutual TLS,
// when its client certificate names an allowed admin peer (--admin-peers,
// a DNS subject alternative name or common name). Tenant tokens never
// make an admin. A router with neither refuses every admin call, saying
// how to configure one.
//
// Thread-safety: Check is safe from any thread.
//
//   ASSIGN_OR_RETURN(auto admins, AdminIdentity::Create({.tokens_path = "/etc/kvfleet/admin-tokens"}));
//   ASSIGN_OR_RETURN(std::string who, admins->Check(authorization, peer_names));
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/router/frontend/tenant_tokens.h"

namespace kvfleet::router {

struct AdminIdentityOptions {
  std::string tokens_path;         // --admin-tokens; empty: no admin tokens
  std::vector<std::string> peers;  // --admin-peers; empty: no admin certificates
};

class AdminIdentity {
 public:
  // Errors of the token file, as TenantTokens::Load's.
  static absl::StatusOr<std::unique_ptr<AdminIdentity>> Create(const AdminIdentityOptions& options);

  // The admin's name: the token's entry, or "peer:NAME" for a certificate.
  // `authorization` is the header's value (null: none); `peer_names` the
  // names the caller's verified client certificate carries (empty: none).
  // PERMISSION_DENIED when no admin identity is configured, or the caller
  // is not an admin (one answer either way, naming no token).
  absl::StatusOr<std::string> Check(const std::string* authorization, const std::vector<std::string>& peer_names) const;

 private:
  AdminIdentity(std::unique_ptr<TenantTokens> tokens, std::vector<std::string> peers);

  std::unique_ptr<TenantTokens> tokens_;
  std::set<std::string> peers_;
};

}  // namespace kvfleet::router
