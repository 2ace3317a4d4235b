#include "services/router/frontend/admin_identity.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace kvfleet::router {

absl::StatusOr<std::unique_ptr<AdminIdentity>> AdminIdentity::Create(const AdminIdentityOptions& options) {
  std::unique_ptr<TenantTokens> tokens;
  if (!options.tokens_path.empty()) {
    ASSIGN_OR_RETURN(tokens, TenantTokens::Load(options.tokens_path));
  }
  return std::unique_ptr<AdminIdentity>(new AdminIdentity(std::move(tokens), options.peers));
}

AdminIdentity::AdminIdentity(std::unique_ptr<TenantTokens> tokens, std::vector<std::string> peers)
    : tokens_(std::move(tokens)), peers_(peers.begin(), peers.end()) {}

absl::StatusOr<std::string> AdminIdentity::Check(const std::string* authorization,
                                                 const std::vector<std::string>& peer_names) const {
  if (tokens_ == nullptr && peers_.empty()) {
    return absl::PermissionDeniedError(
        "this router has no admin identity: start it with --admin-tokens FILE (or --admin-peers NAMES with mutual "
        "TLS) to load and unload adapters");
  }
  for (const std::string& name : peer_names) {
    if (peers_.count(name) > 0) return absl::StrCat("peer:", name);
  }
  if (tokens_ != nullptr && authorization != nullptr) {
    absl::string_view value(*authorization);
    if (absl::ConsumePrefix(&value, "Bearer ") || absl::ConsumePrefix(&value, "bearer ")) {
      if (std::optional<std::string> admin = tokens_->Lookup(std::string_view(value.data(), value.size()))) {
        return *admin;
      }
    }
  }
  return absl::PermissionDeniedError(
      "this call changes what the cluster serves and needs an admin: `authorization: Bearer <admin token>` "
      "(--admin-tokens) or an admin client certificate (--admin-peers)");
}

}  // namespace kvfleet::router
