// `kvfleet workers`: the cluster's live workers as the cachemanager sees
// them: endpoint, model, indexed KV blocks and load.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kvfleet/v1/cachemanager.grpc.pb.h"
#include "services/transport/grpc/grpc_channel.h"
#include "tools/kvfleet/client_tls.h"
#include "tools/kvfleet/commands.h"

namespace kvfleet::tools {
namespace {

constexpr char kUsage[] =
    R"(usage: kvfleet workers --cachemanager HOST:PORT [--model ID] [--tls-ca PEM --tls-cert PEM --tls-key PEM]

Lists the live workers registered with the cachemanager: id, endpoint,
model, KV blocks indexed / capacity, running and waiting requests, KV blocks
in use, and how long ago the worker was last heard from.
)";

}  // namespace

absl::Status RunWorkers(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(absl::StrCat(kUsage, "\n", kClientTlsUsage).c_str());
  ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, WithClientTlsFlags({"cachemanager", "model"}), {}));
  ASSIGN_OR_RETURN(std::string address, flags.GetString("cachemanager"));
  ASSIGN_OR_RETURN(transport::ClientChannelOptions tls, ClientTlsFromFlags(flags));
  auto stub = v1::CacheManager::NewStub(transport::CreateClientChannel(address, tls));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListWorkersRequest request;
  request.set_model_id(flags.GetString("model", ""));
  v1::ListWorkersResponse response;
  const grpc::Status status = stub->ListWorkers(&context, request, &response);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("cachemanager at ", address, ": ", status.error_message()));
  }
  std::printf("%-20s %-22s %-28s %-14s %-7s %15s %7s %7s %11s %9s\n", "worker", "endpoint", "model", "numerics", "role",
              "indexed/cap", "running", "waiting", "blocks_used", "seen_ago");
  for (const v1::WorkerEntry& w : response.workers()) {
    const std::string indexed = absl::StrCat(w.indexed_blocks(), "/", w.capacity_blocks());
    std::printf("%-20s %-22s %-28s %-14s %-7s %15s %7d %7d %11d %7lldms%s\n", w.worker_id().c_str(),
                w.endpoint().c_str(), w.model_id().c_str(), w.numerics().c_str(), w.role().c_str(), indexed.c_str(),
                w.load().running(), w.load().waiting(), w.load().blocks_used(),
                static_cast<long long>(w.last_seen_ms_ago()), w.load().draining() ? " draining" : "");
  }
  std::printf("%d live worker%s\n", response.workers_size(), response.workers_size() == 1 ? "" : "s");
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
