#include "tools/cluster/local_prometheus.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "tools/cluster/service_process.h"

namespace kvfleet::cluster {
namespace {

// What Prometheus logs once its HTTP API answers.
constexpr char kReadyLogLine[] = "Server is ready to receive web requests";

std::string Quoted(const std::string& s) {
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\"");
}

std::string ScrapeAddress(const std::string& address) {
  return absl::StartsWith(address, "0.0.0.0:") ? absl::StrCat("127.0.0.1", address.substr(7)) : address;
}

// A port nothing listens on now (the kernel's pick for an ephemeral bind).
absl::StatusOr<int> FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) return absl::InternalError("cannot bind an ephemeral loopback port");
  return ntohs(addr.sin_port);
}

std::string ReadAll(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

}  // namespace

std::string PrometheusConfig(const std::vector<ScrapeTarget>& targets, const PrometheusConfigOptions& options) {
  const std::string interval = absl::StrCat(options.scrape_interval_seconds, "s");
  std::string out =
      absl::StrCat("# Written by kvfleet up --prometheus; the labels match the chart's scrape relabeling.\n",
                   "global:\n  scrape_interval: ", interval, "\n  evaluation_interval: ", interval, "\n");
  if (!options.rule_files.empty()) {
    out += "rule_files:\n";
    for (const std::string& f : options.rule_files) absl::StrAppend(&out, "  - ", Quoted(f), "\n");
  }
  out += "scrape_configs:\n  - job_name: kvfleet\n    static_configs:\n";
  for (const ScrapeTarget& t : targets) {
    absl::StrAppend(&out, "      - targets: [", Quoted(ScrapeAddress(t.address)), "]\n", "        labels:\n",
                    "          namespace: ", Quoted(options.namespace_label), "\n", "          pod: ", Quoted(t.pod),
                    "\n", "          component: ", Quoted(t.component), "\n");
    if (!t.model.empty()) absl::StrAppend(&out, "          model: ", Quoted(t.model), "\n");
  }
  return out;
}

absl::StatusOr<std::unique_ptr<LocalPrometheus>> LocalPrometheus::Start(const LocalPrometheusOptions& options) {
  int port = options.port;
  if (port == 0) {
    ASSIGN_OR_RETURN(port, FreeLoopbackPort());
  }
  const std::string config_path = options.dir + "/prometheus.yml";
  const std::string log_path = options.dir + "/prometheus.log";
  {
    std::ofstream config(config_path);
    config << options.config;
    if (!config) return absl::FailedPreconditionError(absl::StrCat("cannot write ", config_path));
  }
  const std::string listen = absl::StrCat("127.0.0.1:", port);
  ASSIGN_OR_RETURN(
      std::unique_ptr<ChildProcess> child,
      ChildProcess::Start(
          options.binary,
          {absl::StrCat("--config.file=", config_path), absl::StrCat("--storage.tsdb.path=", options.dir, "/data"),
           absl::StrCat("--web.listen-address=", listen), "--storage.tsdb.retention.time=1d"},
          log_path));
  const absl::Time deadline = absl::Now() + options.ready_timeout;
  while (!absl::StrContains(ReadAll(log_path), kReadyLogLine)) {
    if (!child->Running() || absl::Now() > deadline) {
      return absl::UnavailableError(absl::StrCat("prometheus did not start (",
                                                 child->Running() ? "timed out" : "exited", "); its log ", log_path,
                                                 " ends:\n", LogTail(log_path)));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return std::unique_ptr<LocalPrometheus>(
      new LocalPrometheus(std::move(child), absl::StrCat("http://", listen), log_path));
}

absl::Status LocalPrometheus::Stop(absl::Duration timeout) {
  if (!process_->Running()) return absl::OkStatus();
  process_->Signal(SIGTERM);
  const absl::StatusOr<int> code = process_->Wait(timeout);
  if (code.ok()) return absl::OkStatus();
  process_->Signal(SIGKILL);
  return absl::DeadlineExceededError(
      absl::StrCat("prometheus did not stop within ", absl::FormatDuration(timeout), "; killed"));
}

}  // namespace kvfleet::cluster
