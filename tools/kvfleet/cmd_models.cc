// `kvfleet models`: the models a router serves (ListModels), one line each.
// Fails when none has a live worker, so a script (the chart's `helm test`,
// a readiness check) can ask "does this cluster serve?" with one command.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tools/kvfleet/commands.h"
#include "tools/kvfleet/router_client.h"

namespace kvfleet::tools {
namespace {

constexpr char kUsage[] =
    R"(usage: kvfleet models [--router HOST:PORT] [--tls-ca PEM] [--token-file FILE] [--timeout SECONDS]

Lists the models the router serves (--router, default 127.0.0.1:50060): id,
context length, vocabulary size and live workers (--tls-ca: over TLS, the
router's certificate checked against that CA; a router with --auth-tokens
needs a token: --token-file FILE, else $KVFLEET_API_TOKEN). Exits 1 when the router
cannot be reached or no model has a live worker.
)";

}  // namespace

absl::Status RunModels(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, {"router", "tls-ca", "token-file", "timeout"}, {}));
  ASSIGN_OR_RETURN(std::string token, BearerTokenFromFlags(flags));
  const CallSettings call{.router = flags.GetString("router", kDefaultRouter),
                          .tls_ca = flags.GetString("tls-ca", ""),
                          .bearer_token = token};
  const std::string& router = call.router;
  ASSIGN_OR_RETURN(double timeout, flags.GetDouble("timeout", 10.0));
  ASSIGN_OR_RETURN(v1::ListModelsResponse response, ListModels(call, absl::Seconds(timeout)));
  std::printf("%-32s %11s %10s %12s\n", "model", "max_context", "vocab", "live_workers");
  int serving = 0;
  for (const v1::ModelInfo& m : response.models()) {
    std::printf("%-32s %11d %10d %12d\n", m.id().c_str(), m.max_context(), m.vocab_size(), m.live_workers());
    if (m.live_workers() > 0) ++serving;
  }
  if (serving == 0) {
    return absl::UnavailableError(absl::StrCat("router ", router,
                                               " has no model with a live worker; are the workers "
                                               "up and registered with the cachemanager?"));
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
