// kvfleet chat: one user message (after an optional system message) through
// the router's Chat, the answer streamed to stdout as it is generated.
#include <cstdio>

#include "common/status_macros.h"
#include "tools/kvfleet/commands.h"
#include "tools/kvfleet/router_client.h"

namespace kvfleet::tools {
namespace {

constexpr char kUsage[] =
    R"(usage: kvfleet chat TEXT [--system TEXT] [--router HOST:PORT [--tls-ca PEM]] [--model-name NAME] [--stop TEXT]...
                    [--cache-salt S]
                    [--speculation P] [--timeout SECONDS] [sampling flags as for kvfleet generate]
       kvfleet chat --message TEXT ...

Sends TEXT as the user's message, rendered through the served model's chat
template by the router (--router, default 127.0.0.1:50060; start a cluster
with `kvfleet up`), and streams the answer to stdout; a summary goes to
stderr. Text starting with -- goes after a lone --, or in --message.
--model-name names the model (its served name or id; `kvfleet models` lists
them) when the router serves several.
--output ids prints the generated token ids as one comma-separated line.
--tls-ca PEM calls the router over TLS, its certificate checked against that
CA (`kvfleet up --tls` prints the flag to use). A router with --auth-tokens
needs a bearer token: --token-file FILE (its first line), else
$KVFLEET_API_TOKEN; never on the command line, where other users see it.
)";

}  // namespace

absl::Status RunChat(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, WithRouterFlags({"message", "system"}), RouterSwitches(),
                                             /*max_positional=*/1));
  if (flags.Has("message") == !flags.positional().empty()) {
    return absl::InvalidArgumentError("give the message once: as `kvfleet chat TEXT` or with --message TEXT");
  }
  const std::string message = flags.Has("message") ? flags.GetString("message", "") : flags.positional()[0];
  ASSIGN_OR_RETURN(CallSettings call, CallSettingsFromFlags(flags));
  ASSIGN_OR_RETURN(v1::ChatRequest request, ChatRequestFromFlags(flags, message));
  return StreamChat(call, request, stdout, stderr);
}

}  // namespace kvfleet::tools
