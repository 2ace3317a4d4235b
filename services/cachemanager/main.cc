// kvfleet-cachemanager: the cluster's KV map behind gRPC. Wires the service,
// its metrics and the sweeper; SIGTERM stops it (its state is soft: workers
// re-register and re-send snapshots to whichever cachemanager comes next).
#include <cstdio>
#include <string>
#include <vector>

#include "common/flags/flags.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "services/cachemanager/server/cachemanager_metrics.h"
#include "services/cachemanager/server/cachemanager_service.h"
#include "services/transport/grpc_server.h"
#include "services/transport/metrics_exposer.h"
#include "services/transport/service_main.h"
#include "services/transport/termination_signals.h"

namespace kvfleet::cachemanager {
namespace {

const char kUsage[] = R"(kvfleet-cachemanager: the cluster's KV map (proto/kvfleet/v1/cachemanager.proto)

  --listen HOST:PORT          gRPC address (default 127.0.0.1:50050; port 0 picks a free one)
  --metrics-port N            Prometheus /metrics port (default 9465; 0 picks a free one)
  --metrics-host HOST         (default 0.0.0.0; the health port binds here too)
  --health-port N             also serve grpc.health.v1, and nothing else, in plaintext on this port, for
                              probes that cannot speak TLS (Kubernetes): readiness "" and kvfleet.v1.CacheManager
                              (off once SIGTERM arrives), liveness "liveness". Default: none; 0 picks a free one
  --liveness-deadline SECONDS a worker silent this long is removed (default 3)
  --heartbeat-interval MS     how often workers are told to report (default 500)
  --log-level LEVEL           trace, debug, info, warn, error (default info)

On start it prints "kvfleet-cachemanager listening grpc=HOST:PORT metrics=HOST:PORT[ health=HOST:PORT]",
then "kvfleet-cachemanager ready".
)";

struct Options {
  std::string listen = "127.0.0.1:50050";
  std::string metrics_host = "0.0.0.0";
  int metrics_port = 9465;
  int health_port = -1;
  CacheManagerOptions service;
  std::string log_level = "info";
};

absl::StatusOr<Options> Parse(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(flags::Flags f, flags::Flags::Parse(args,
                                                       {"listen", "metrics-port", "metrics-host", "health-port", "liveness-deadline",
                                                        "heartbeat-interval", "log-level"},
                                                       {}));
  Options o;
  o.listen = f.GetString("listen", o.listen);
  o.metrics_host = f.GetString("metrics-host", o.metrics_host);
  ASSIGN_OR_RETURN(int64_t port, f.GetInt("metrics-port", o.metrics_port));
  o.metrics_port = static_cast<int>(port);
  ASSIGN_OR_RETURN(o.health_port, transport::ParseHealthPort(f));
  ASSIGN_OR_RETURN(double deadline, f.GetDouble("liveness-deadline", 3.0));
  ASSIGN_OR_RETURN(int64_t heartbeat, f.GetInt("heartbeat-interval", 500));
  if (!(deadline > 0) || heartbeat <= 0 || heartbeat >= deadline * 1000) {
    return absl::InvalidArgumentError(
        "--liveness-deadline must be > 0 seconds and --heartbeat-interval > 0 ms and shorter than the deadline");
  }
  o.service.liveness_deadline = std::chrono::milliseconds(static_cast<int64_t>(deadline * 1000));
  o.service.heartbeat_interval = std::chrono::milliseconds(heartbeat);
  o.log_level = f.GetString("log-level", o.log_level);
  return o;
}

absl::Status Run(const Options& o) {
  CacheManagerMetrics metrics;
  ASSIGN_OR_RETURN(std::unique_ptr<transport::MetricsExposer> exposer,
                   transport::StartMetricsExposer(o.metrics_host, o.metrics_port));
  exposer->RegisterCollectable(metrics.registry());
  CacheManagerService service(o.service, metrics);
  auto map_collector = std::make_shared<KvMapCollector>([&service] {
    return service.Read([](const KvMap& map) {
      return KvMapSnapshot{
          .workers = map.List(""), .counters = map.counters(), .distinct_hashes = map.index().DistinctHashes()};
    });
  });
  exposer->RegisterCollectable(map_collector);
  ASSIGN_OR_RETURN(transport::RunningServer server,
                   transport::StartGrpcServer({.address = o.listen,
                                               .services = {&service},
                                               .max_receive_message_bytes = 64 << 20,  // snapshots are large
                                               .health_service_names = {"kvfleet.v1.CacheManager"},
                                               .health_port = o.health_port,
                                               .health_host = o.metrics_host}));
  service.StartSweeper();
  server.SetLive(true);
  server.SetReady(true);
  transport::PrintListening("kvfleet-cachemanager", server, o.metrics_host, exposer->port());
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
  return kvfleet::transport::ServiceMain(argc, argv, "kvfleet-cachemanager", kvfleet::cachemanager::kUsage,
                                         kvfleet::cachemanager::Parse, kvfleet::cachemanager::Run);
}
