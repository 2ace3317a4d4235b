// A Prometheus server for a local cluster (`kvfleet up --prometheus`):
// scrapes every member's metrics port with the labels Kubernetes' scrape
// relabeling adds in a real deployment (namespace, pod, component, model),
// evaluates the chart's alert rules, and serves its UI and HTTP API on
// loopback. So the chart's dashboards and alerts work unchanged against a
// laptop cluster.
//
// PrometheusConfig is the whole policy (a pure function, unit-tested);
// LocalPrometheus runs Debian's `prometheus` binary with it as a child
// process (killed with the object), its data in a directory of its own.
// Thread-safety: none; one thread drives it.
//
//   ASSIGN_OR_RETURN(auto prom, LocalPrometheus::Start({.config = PrometheusConfig(targets, {...}), ...}));
//   std::cout << prom->url();
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/cluster/child_process.h"

namespace kvfleet::cluster {

// One metrics endpoint and the labels its series get.
struct ScrapeTarget {
  std::string address;    // host:port of /metrics (0.0.0.0 is scraped on 127.0.0.1)
  std::string pod;        // "router", "cachemanager", "worker-0", ...
  std::string component;  // "router", "cachemanager", "worker"
  // A worker's model id, as the chart labels a worker pod's series; empty
  // for the router and the cachemanager, which serve every model (the
  // router's series carry their own model label).
  std::string model;
};

struct PrometheusConfigOptions {
  std::string namespace_label = "local";
  int scrape_interval_seconds = 1;
  std::vector<std::string> rule_files;  // absolute paths
};

// prometheus.yml for `targets`.
std::string PrometheusConfig(const std::vector<ScrapeTarget>& targets, const PrometheusConfigOptions& options);

struct LocalPrometheusOptions {
  std::string binary = "prometheus";  // looked up in PATH
  std::string config;                 // the text of prometheus.yml
  std::string dir;                    // must exist: config, data and log go here
  int port = 9090;                    // on 127.0.0.1; 0 picks a free one
  absl::Duration ready_timeout = absl::Seconds(60);
};

class LocalPrometheus {
 public:
  // Writes the config, starts the server and returns once it says it is
  // ready. Fails with the log's last lines if it exits first (as it does on
  // a bad config or rule file, naming it) or the timeout passes.
  static absl::StatusOr<std::unique_ptr<LocalPrometheus>> Start(const LocalPrometheusOptions& options);

  const std::string& url() const { return url_; }  // "http://127.0.0.1:9090"
  const std::string& log_path() const { return log_path_; }

  // SIGTERM, then SIGKILL after `timeout`.
  absl::Status Stop(absl::Duration timeout = absl::Seconds(10));

 private:
  LocalPrometheus(std::unique_ptr<ChildProcess> process, std::string url, std::string log_path)
      : process_(std::move(process)), url_(std::move(url)), log_path_(std::move(log_path)) {}

  std::unique_ptr<ChildProcess> process_;
  std::string url_;
  std::string log_path_;
};

}  // namespace kvfleet::cluster
