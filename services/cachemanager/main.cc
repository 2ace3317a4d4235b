// kvfleet-cachemanager: the cluster's KV map behind gRPC. Wires the service,
// its metrics and the sweeper; SIGTERM stops it (its state is soft: workers
// re-register and re-send snapshots to whichever cachemanager comes next).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "services/cachemanager/server/cachemanager_metrics.h"
#include "services/cachemanager/server/cachemanager_service.h"
#include "services/transport/grpc/grpc_server.h"
#include "services/transport/metrics/metrics_exposer.h"
#include "services/transport/service_main.h"
#include "services/transport/termination_signals.h"
#include "services/transport/transport_options.h"

namespace kvfleet::cachemanager {
namespace {

// Snapshots of a large worker's blocks are large messages.
const transport::TransportOptions kTransportDefaults{
    .listen = "127.0.0.1:50050", .metrics_port = 9465, .max_message_bytes = 64 << 20};

const char kUsageHead[] = R"(kvfleet-cachemanager: the cluster's KV map (proto/kvfleet/v1/cachemanager.proto)

)";

const char kUsageTail[] = R"(  --liveness-deadline SECONDS  a worker silent this long is removed (default 3)
  --heartbeat-interval MS      how often workers are told to report (default 500)

On start it prints "kvfleet-cachemanager listening grpc=HOST:PORT metrics=HOST:PORT[ health=HOST:PORT]",
then "kvfleet-cachemanager ready". Readiness turns off once SIGTERM arrives.
)";

std::string Usage() {
  return absl::StrCat(kUsageHead, transport::TransportUsage(kTransportDefaults, "kvfleet.v1.CacheManager"),
                      kUsageTail);
}

struct Options {
  transport::TransportOptions transport = kTransportDefaults;
  CacheManagerOptions service;
};

absl::StatusOr<Options> Parse(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(flags::Flags f, flags::Flags::Parse(
                                       args, transport::WithTransportFlags({"liveness-deadline", "heartbeat-interval"}),
                                       transport::WithTransportSwitches({})));
  Options o;
  ASSIGN_OR_RETURN(o.transport, transport::ParseTransportOptions(f, kTransportDefaults));
  ASSIGN_OR_RETURN(double deadline, f.GetDouble("liveness-deadline", 3.0));
  ASSIGN_OR_RETURN(int64_t heartbeat, f.GetInt("heartbeat-interval", 500));
  if (!(deadline > 0) || heartbeat <= 0 || heartbeat >= deadline * 1000) {
    return absl::InvalidArgumentError(
        "--liveness-deadline must be > 0 seconds and --heartbeat-interval > 0 ms and shorter than the deadline");
  }
  o.service.liveness_deadline = std::chrono::milliseconds(static_cast<int64_t>(deadline * 1000));
  o.service.heartbeat_interval = std::chrono::milliseconds(heartbeat);
  return o;
}

absl::Status Run(const Options& o) {
  CacheManagerMetrics metrics;
  ASSIGN_OR_RETURN(std::unique_ptr<transport::MetricsExposer> exposer,
                   transport::StartMetricsExposer(o.transport.metrics_host, o.transport.metrics_port));
  exposer->RegisterCollectable(metrics.registry());
  CacheManagerService service(o.service, metrics);
  auto map_collector = std::make_shared<KvMapCollector>([&service] {
    return service.Read([](const KvMap& map) {
      return KvMapSnapshot{.workers = map.List(""),
                           .counters = map.counters(),
                           .distinct_hashes = map.index().DistinctHashes(),
                           .broken_chain_workers = map.index().WorkersWithBrokenChains()};
    });
  });
  exposer->RegisterCollectable(map_collector);
  ASSIGN_OR_RETURN(transport::RunningServer server,
                   transport::StartGrpcServer(transport::ServerOptionsFrom(o.transport, {&service}, "kvfleet.v1.CacheManager")));
  service.StartSweeper();
  server.SetLive(true);
  server.SetReady(true);
  transport::PrintListening("kvfleet-cachemanager", server, o.transport.metrics_host, exposer->port());
  std::printf("kvfleet-cachemanager ready\n");
  std::fflush(stdout);
  KVFLEET_LOG_INFO("cachemanager serving on {}", server.address);

  const int sig = transport::TerminationSignals::Wait();
  KVFLEET_LOG_INFO("received signal {}; stopping", sig);
  server.SetReady(false);
  server.Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  service.StopSweeper();
  exposer->RemoveCollectable(map_collector);
  return absl::OkStatus();
}

}  // namespace
}  // namespace kvfleet::cachemanager

int main(int argc, char** argv) {
  return kvfleet::transport::ServiceMain(argc, argv, "kvfleet-cachemanager", kvfleet::cachemanager::Usage(),
                                         kvfleet::cachemanager::Parse, kvfleet::cachemanager::Run);
}
