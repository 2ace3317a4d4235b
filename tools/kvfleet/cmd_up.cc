// kvfleet up: a whole cluster on this machine's loopback (cachemanager,
// workers, router), served until Ctrl-C. The processes are
// tools/cluster/LocalCluster's; this file parses flags, tells the person
// how to call the cluster, and waits for the signal to stop it.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_cpus.h"
#include "common/status_macros.h"
#include "model/model.h"
#include "services/transport/termination_signals.h"
#include "tools/cluster/local_cluster.h"
#include "tools/cluster/local_pki.h"
#include "tools/cluster/local_prometheus.h"
#include "tools/cluster/service_binaries.h"
#include "tools/kvfleet/commands.h"
#include "tools/kvfleet/router_client.h"

namespace kvfleet::tools {
namespace {

using cluster::ClusterMember;
using cluster::LocalCluster;
using cluster::LocalClusterOptions;
using transport::TerminationSignals;

constexpr char kUsage[] =
    R"(usage: kvfleet up [--model PATH ...] [--workers N | --prefill-workers N --decode-workers M] [--threads T]
                  [--kv-cache-memory SIZE] [--split-min-uncached-tokens N] [--max-num-batched-tokens N]
                  [--cpu-activations A] [--kv-cache-dtype D] [--calibration PATH] [--tensor-parallel N]
                  [--kv-host-memory SIZE] [--kv-disk-dir DIR --kv-disk-size SIZE] [--keep-window-blocks]
                  [--listen HOST:PORT] [--http-listen HOST:PORT] [--cachemanager-listen HOST:PORT] [--metrics-port N]
                  [--policy prefix_aware|least_loaded|round_robin] [--log-dir DIR] [--bin-dir DIR]
                  [--device auto|cpu|cuda[:N]] [--speculation P] [--spec-self-layers N]
                  [--spec-draft-model PATH] [--spec-draft-heads DIR [--spec-heads-top-k K]]
                  [--ask TEXT [--exit-after-ask]]
                  [--prometheus [--prometheus-port N] [--prometheus-rules DIR]] [--tls | --internal-token]

Starts a cluster on loopback: one kvfleet-cachemanager, N kvfleet-workers
of each --model registered with it and one kvfleet-router in front, which
learns each model from its workers and routes by the request's model name.
--model is a GGUF file or a Hugging Face checkpoint directory (default
models/SmolLM2-135M-Instruct.Q4_1.gguf); repeat it to serve several models
(each is served under its file's name). Once every service is ready
it prints how to call the router and the line
  kvfleet up ready router=HOST:PORT http=HOST:PORT
then serves until SIGINT (Ctrl-C) or SIGTERM, and stops the router, the
workers (they drain) and the cachemanager in that order. A second Ctrl-C
kills what is still running.

  --workers N             workers of each model (default 2)
  --prefill-workers N     instead of --workers: N prefill workers and --decode-workers M (default 1) decode
  --decode-workers M      workers; a prompt with at least --split-min-uncached-tokens (the router's flag,
                          default 2048) uncached is prefilled on a prefill worker, and a decode worker pulls
                          its KV and continues (kvfleet-router --help)
  --threads T             CPU threads per worker (default: usable CPUs / N, at least 1)
  --kv-cache-memory SIZE  KV cache per worker (default 512MiB)
  --cpu-activations A     every CPU worker's activations: auto (default: the model's calibration record's
                          choice, else f32), f32 or q8
  --kv-cache-dtype D      every worker's KV element format: auto (default: the record's choice, else f16),
                          f16, int8, int8_rotated or fp8_e4m3 (about twice the tokens)
  --calibration PATH      the calibration record (default: beside the model); kvfleet-worker --help says how
                          auto chooses
  --tensor-parallel N     every worker splits the model across N ranks (also --tensor-parallel-size; on the
                          CPU they take turns on the worker's threads; kvfleet-worker --help)
  --kv-host-memory SIZE   every worker's host-memory KV tier below its device cache (default: none)
  --kv-disk-dir DIR       a disk KV tier per worker in DIR/worker-<i>, of --kv-disk-size SIZE each; a
                          restarted cluster finds and serves what its workers left there
  --lora NAME=PATH        every worker serves the LoRA adapter in PATH as model NAME (repeatable; one
                          --model); --max-loras N, --max-lora-rank R and --lora-dir DIR pass to the workers
  --admin-tokens FILE     the router's admin tokens: who may load and unload adapters at run time
                          (kvfleet-router --help)
  --keep-window-blocks    every worker keeps a sliding-window model's passed window blocks (see
                          kvfleet-worker --help; for measuring what freeing them saves)
  --listen HOST:PORT      the router's gRPC address (default 127.0.0.1:50060; port 0 picks a free one)
  --http-listen HOST:PORT the router's OpenAI-compatible HTTP address (default 127.0.0.1:8000; port 0 picks
                          a free one): base URL http://HOST:PORT/v1 for any OpenAI client
  --cachemanager-listen   the cachemanager's address (default 127.0.0.1:50050)
  --metrics-port N        the router's /metrics port (default 9466; the others pick free ports)
  --policy P              the router's placement policy (default: the router's, prefix_aware)
  --device D              every worker's device: auto (the default: GPU 0 when one is usable, else the CPU),
                          cpu, cuda or cuda:N. Workers on one GPU share it: give each a KV budget that fits
  --speculation P         every worker's default speculative proposer: ngram (the workers' default), suffix,
                          self, draft, heads, auto or off; --spec-self-layers N, --spec-draft-model PATH and
                          --spec-draft-heads DIR load self, draft and heads (--spec-heads-top-k K: trees)
  --log-dir DIR           each service's log goes to DIR/<name>.log (default: a new /tmp/kvfleet-up-*)
  --bin-dir DIR           where the service binaries are: a build tree or one directory
                          (default: the build tree this kvfleet belongs to)
  --prometheus            also start a local Prometheus (Debian's `prometheus`, from PATH) scraping every
                          service each second with the labels the Helm chart's ServiceMonitor adds
                          (namespace="local", pod, component, model) and evaluating the chart's alert
                          rules; prints "kvfleet up prometheus=URL" before the ready line
  --prometheus-port N     its port on 127.0.0.1 (default 9090; 0 picks a free one)
  --prometheus-rules DIR  the rule files it loads (default: this source tree's deploy/helm/kvfleet/rules)
  --tls                   the whole cluster over TLS: a throwaway CA (openssl) in the log directory
                          issues each service a certificate; mutual TLS on router -> worker,
                          worker -> cachemanager and router -> cachemanager, TLS on the router's
                          port (clients pass --tls-ca LOG_DIR/tls/ca.pem, as the banner shows)
  --internal-token        without TLS: a random token in LOG_DIR/internal-token (mode 0600) that workers
                          and the cachemanager require of every caller, so other local users cannot
                          drive them; `kvfleet load` and `kvfleet workers` take --internal-token-file
  --ask TEXT              once ready, send TEXT as a chat message through the router and print
                          the answer, then keep serving
  --exit-after-ask        stop the cluster once --ask has its answer (exit 1 if it failed)
)";

constexpr char kDefaultModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr char kDefaultHttpListen[] = "127.0.0.1:8000";  // where vLLM and SGLang listen
// How long the router may take to see every worker through the cachemanager
// before `up` says so and carries on.
constexpr absl::Duration kDiscoveryTimeout = absl::Seconds(30);
constexpr absl::Duration kPollInterval = absl::Milliseconds(200);

bool SignalArrived() { return TerminationSignals::Poll(std::chrono::milliseconds(0)); }

absl::StatusOr<std::string> MakeLogDir(const std::string& requested) {
  if (!requested.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(requested, ec);
    if (ec) {
      return absl::FailedPreconditionError(absl::StrCat("cannot create --log-dir ", requested, ": ", ec.message()));
    }
    return requested;
  }
  std::string pattern = "/tmp/kvfleet-up-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return absl::InternalError("cannot create a log directory under /tmp");
  return pattern;
}

absl::StatusOr<LocalClusterOptions> OptionsFromFlags(const Flags& flags) {
  LocalClusterOptions o;
  o.models = flags.GetStrings("model");
  if (o.models.empty()) o.models.push_back(kDefaultModel);
  std::map<std::string, std::string> ids;  // model id -> its path
  for (const std::string& path : o.models) {
    if (!std::filesystem::exists(path)) {
      return absl::NotFoundError(absl::StrCat(
          "no model at ", path, " (give a .gguf file or a Hugging Face checkpoint directory with --model PATH)"));
    }
    auto [it, fresh] = ids.emplace(model::DefaultModelId(path), path);
    if (!fresh && it->second != path) {
      return absl::InvalidArgumentError(absl::StrCat("--model ", it->second, " and --model ", path,
                                                     " would both be served as model ", it->first,
                                                     "; rename one of the files"));
    }
  }
  ASSIGN_OR_RETURN(int64_t workers, flags.GetInt("workers", 2));
  if (flags.Has("prefill-workers") || flags.Has("decode-workers")) {
    if (flags.Has("workers")) {
      return absl::InvalidArgumentError("give --workers or --prefill-workers with --decode-workers, not both");
    }
    ASSIGN_OR_RETURN(int64_t prefill, flags.GetInt("prefill-workers", 1));
    ASSIGN_OR_RETURN(int64_t decode, flags.GetInt("decode-workers", 1));
    if (prefill < 1 || decode < 1) {
      return absl::InvalidArgumentError("--prefill-workers and --decode-workers must each be at least 1");
    }
    o.prefill_workers = static_cast<int>(prefill);
    workers = prefill + decode;
  }
  if (workers < 1 || workers > 64) return absl::InvalidArgumentError("there must be between 1 and 64 workers");
  o.workers = static_cast<int>(workers);
  if (flags.Has("split-min-uncached-tokens")) {
    o.router_extra_args.push_back("--split-min-uncached-tokens");
    o.router_extra_args.push_back(flags.GetString("split-min-uncached-tokens", ""));
  }
  const int hardware = UsableCpus();
  const int all_workers = o.workers * static_cast<int>(o.models.size());
  ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", cluster::DefaultThreadsPerWorker(hardware, all_workers)));
  if (threads < 1 || threads > 1024) return absl::InvalidArgumentError("--threads must be between 1 and 1024");
  o.threads_per_worker = static_cast<int>(threads);
  o.kv_cache_memory = flags.GetString("kv-cache-memory", o.kv_cache_memory);
  o.router_listen = flags.GetString("listen", o.router_listen);
  o.router_http_listen = flags.GetString("http-listen", kDefaultHttpListen);
  if (o.router_http_listen.empty()) return absl::InvalidArgumentError("--http-listen needs HOST:PORT");
  o.cachemanager_listen = flags.GetString("cachemanager-listen", o.cachemanager_listen);
  ASSIGN_OR_RETURN(int64_t metrics_port, flags.GetInt("metrics-port", o.router_metrics_port));
  // Clamped so that an out-of-range port stays out of range for Validate().
  o.router_metrics_port = static_cast<int>(std::clamp<int64_t>(metrics_port, -1, 65536));
  o.policy = flags.GetString("policy", "");
  // Passed through: each worker checks them (and refuses to start on a bad one).
  for (const char* name : {"device", "cpu-activations", "kv-cache-dtype", "calibration", "kv-host-memory",
                           "kv-disk-size", "speculation", "spec-self-layers", "spec-draft-model", "spec-draft-heads",
                           "spec-heads-top-k", "max-num-batched-tokens", "tensor-parallel", "tensor-parallel-size"}) {
    if (flags.Has(name)) {
      o.worker_extra_args.push_back(absl::StrCat("--", name));
      o.worker_extra_args.push_back(flags.GetString(name, ""));
    }
  }
  if (flags.GetSwitch("keep-window-blocks")) o.worker_extra_args.push_back("--keep-window-blocks");
  // LoRA adapters: every worker of the one model loads them; the router's admins may load more.
  const std::vector<std::string> loras = flags.GetStrings("lora");
  if (!loras.empty() && o.models.size() > 1) {
    return absl::InvalidArgumentError(
        "--lora names an adapter of one base model; with several --model, load adapters at run time "
        "(POST /v1/load_lora_adapter with \"model\")");
  }
  for (const std::string& lora : loras) {
    o.worker_extra_args.push_back("--lora");
    o.worker_extra_args.push_back(lora);
  }
  for (const char* name : {"max-loras", "max-lora-rank", "lora-dir"}) {
    if (flags.Has(name)) {
      o.worker_extra_args.push_back(absl::StrCat("--", name));
      o.worker_extra_args.push_back(flags.GetString(name, ""));
    }
  }
  if (flags.Has("admin-tokens")) {
    o.router_extra_args.push_back("--admin-tokens");
    o.router_extra_args.push_back(flags.GetString("admin-tokens", ""));
  }
  o.kv_disk_dir = flags.GetString("kv-disk-dir", "");
  if (o.kv_disk_dir.empty() != !flags.Has("kv-disk-size")) {
    return absl::InvalidArgumentError("--kv-disk-dir and --kv-disk-size go together");
  }
  std::string bin_dir = flags.GetString("bin-dir", "");
  if (bin_dir.empty()) {
    ASSIGN_OR_RETURN(const std::string exe, cluster::CurrentExecutable());
    bin_dir = cluster::DefaultBinDir(exe);
  }
  ASSIGN_OR_RETURN(o.binaries, cluster::FindServiceBinaries(bin_dir));
  // Last: nothing is left behind when a flag is wrong.
  ASSIGN_OR_RETURN(o.log_dir, MakeLogDir(flags.GetString("log-dir", "")));
  o.on_ready = [](const ClusterMember& m) {
    std::fprintf(stderr, "kvfleet up: %s ready at %s (pid %d)\n", m.label.c_str(), m.endpoints.grpc_address.c_str(),
                 static_cast<int>(m.process->pid()));
  };
  o.interrupted = SignalArrived;
  RETURN_IF_ERROR(o.Validate());
  return o;
}

// Waits until the router lists every model with all its workers live
// (discovery through the cachemanager, and each model learnt from its first
// worker, are asynchronous); returns the models' ids in --model order. Carries
// on with a warning when that takes too long.
absl::StatusOr<std::vector<std::string>> AwaitWorkersSeen(LocalCluster& cluster, const LocalClusterOptions& options,
                                                          const CallSettings& router_call) {
  std::vector<std::string> ids;
  for (const std::string& path : options.models) ids.push_back(model::DefaultModelId(path));
  const absl::Time deadline = absl::Now() + kDiscoveryTimeout;
  std::string last_seen;
  while (absl::Now() < deadline) {
    RETURN_IF_ERROR(cluster.CheckRunning());
    const absl::StatusOr<v1::ListModelsResponse> models = ListModels(router_call, absl::Seconds(5));
    if (models.ok()) {
      std::map<std::string, int> live;
      for (const v1::ModelInfo& m : models->models()) live[m.id()] = m.live_workers();
      std::vector<std::string> short_of;
      for (const std::string& id : ids) {
        if (live[id] < options.workers) short_of.push_back(absl::StrCat(id, " has ", live[id]));
      }
      if (short_of.empty()) return ids;
      last_seen = absl::StrCat("of ", options.workers, " workers each, ", absl::StrJoin(short_of, ", "));
    } else {
      last_seen = absl::StrCat("ListModels: ", models.status().message());
    }
    if (SignalArrived()) return absl::CancelledError("interrupted while waiting for the router to see the workers");
    absl::SleepFor(kPollInterval);
  }
  std::fprintf(stderr,
               "kvfleet up: warning: the router did not count every worker live within %s (%s); serving anyway\n",
               absl::FormatDuration(kDiscoveryTimeout).c_str(), last_seen.c_str());
  return ids;
}

std::string MetricsUrl(const ClusterMember& m) {
  return absl::StrCat("http://", m.endpoints.metrics_address, "/metrics");
}

void PrintBanner(const LocalCluster& cluster, const LocalClusterOptions& o, const std::vector<std::string>& model_ids,
                 const CallSettings& router_call) {
  const std::string& model_id = model_ids.front();  // the examples' model
  const std::string& router = cluster.router().endpoints.grpc_address;
  std::string router_flag = router == kDefaultRouter ? "" : absl::StrCat(" --router ", router);
  if (!router_call.tls_ca.empty()) absl::StrAppend(&router_flag, " --tls-ca ", router_call.tls_ca);
  // With several models a request must name one: the examples name the first.
  if (model_ids.size() > 1) absl::StrAppend(&router_flag, " --model-name ", model_id);
  const std::string grpc_model =
      model_ids.size() > 1 ? absl::StrCat("\"options\":{\"model\":\"", model_id, "\"},") : "";
  std::vector<std::string> worker_metrics;
  for (const ClusterMember& w : cluster.workers()) worker_metrics.push_back(MetricsUrl(w));
  std::printf("kvfleet up: cluster ready — router %s (model%s %s, %d worker%s each)\n", router.c_str(),
              model_ids.size() == 1 ? "" : "s", absl::StrJoin(model_ids, ", ").c_str(), o.workers,
              o.workers == 1 ? "" : "s");
  std::printf("  kvfleet chat%s \"What is the capital of France?\"          # through the router\n",
              router_flag.c_str());
  std::printf("  kvfleet generate%s --prompt \"Once upon a time\" --max-tokens 32\n", router_flag.c_str());
  const std::string grpcurl_tls =
      router_call.tls_ca.empty() ? "-plaintext" : absl::StrCat("-cacert ", router_call.tls_ca);
  std::printf(
      "  grpcurl %s -d '{%s\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}' %s "
      "kvfleet.v1.Inference/Chat\n",
      grpcurl_tls.c_str(), grpc_model.c_str(), router.c_str());
  const std::string& http = cluster.router().endpoints.http_address;
  const std::string scheme = router_call.tls_ca.empty() ? "http" : "https";
  const std::string curl_tls = router_call.tls_ca.empty() ? "" : absl::StrCat(" --cacert ", router_call.tls_ca);
  std::printf("  OpenAI-compatible: %s://%s/v1 (model \"%s\")\n", scheme.c_str(), http.c_str(), model_id.c_str());
  std::printf(
      "  curl%s %s://%s/v1/chat/completions -H 'Content-Type: application/json' "
      "-d '{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}'\n",
      curl_tls.c_str(), scheme.c_str(), http.c_str(), model_id.c_str());
  std::printf("  python: OpenAI(base_url=\"%s://%s/v1\", api_key=\"none\").chat.completions.create(...)\n",
              scheme.c_str(), http.c_str());
  std::printf("  metrics: router %s, cachemanager %s, workers %s\n", MetricsUrl(cluster.router()).c_str(),
              MetricsUrl(cluster.cachemanager()).c_str(), absl::StrJoin(worker_metrics, " ").c_str());
  std::printf("  logs: %s\n", o.log_dir.c_str());
  std::printf("Ctrl-C stops the cluster.\n");
  std::printf("kvfleet up ready router=%s http=%s\n", router.c_str(), http.c_str());
  std::fflush(stdout);
}

absl::Status Ask(const CallSettings& router_call, const std::string& text, const std::string& model_id) {
  ASSIGN_OR_RETURN(Flags defaults, Flags::Parse({}, {}, {}));
  ASSIGN_OR_RETURN(v1::ChatRequest request, ChatRequestFromFlags(defaults, text));
  request.mutable_options()->set_model(model_id);
  std::fprintf(stderr, "kvfleet up: asking the router: %s\n", text.c_str());
  return StreamChat(router_call, request, stdout, stderr);
}

// --tls: certificates from a throwaway CA for every member, passed on their
// command lines, each authorising only the roles that call it (routers and
// workers call the cachemanager, routers call workers); returns the CA file
// clients verify the router with.
absl::StatusOr<std::string> UseTls(LocalClusterOptions& o) {
  const std::string dir = o.log_dir + "/tls";
  std::filesystem::create_directories(dir);
  ASSIGN_OR_RETURN(cluster::LocalCa ca, cluster::LocalCa::Create(dir + "/ca"));
  ASSIGN_OR_RETURN(cluster::CertificateFiles cachemanager, ca.Issue(dir + "/cachemanager", "cachemanager"));
  ASSIGN_OR_RETURN(cluster::CertificateFiles worker, ca.Issue(dir + "/worker", "worker"));
  ASSIGN_OR_RETURN(cluster::CertificateFiles router, ca.Issue(dir + "/router", "router"));
  const std::string& root = ca.files().cert;
  const auto identity = [](const cluster::CertificateFiles& f) {
    return std::vector<std::string>{"--tls-cert", f.cert, "--tls-key", f.key};
  };
  const auto append = [](std::vector<std::string>& to, std::vector<std::string> more) {
    to.insert(to.end(), more.begin(), more.end());
  };
  append(o.cachemanager_extra_args, identity(cachemanager));
  append(o.cachemanager_extra_args, {"--tls-client-ca", root, "--tls-allowed-peers", "router,worker"});
  append(o.worker_extra_args, identity(worker));
  append(o.worker_extra_args, {"--tls-ca", root, "--tls-client-ca", root, "--tls-allowed-peers", "router"});
  append(o.router_extra_args, identity(router));
  // Calls workers (whose certificates say "worker") and the cachemanager;
  // its own clients need no certificate.
  append(o.router_extra_args, {"--tls-ca", root, "--worker-tls-name", "worker"});
  return root;
}

// --internal-token: a fresh random token, readable by this user only, on
// every member's command line; returns its file.
absl::StatusOr<std::string> UseInternalToken(LocalClusterOptions& o) {
  const std::string path = o.log_dir + "/internal-token";
  std::random_device os;  // the kernel's random source
  std::string token;
  for (int i = 0; i < 8; ++i) absl::StrAppend(&token, absl::Hex(os(), absl::kZeroPad8));
  {
    std::ofstream out(path, std::ios::trunc);
    out << token << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::replace);
  for (std::vector<std::string>* args : {&o.cachemanager_extra_args, &o.worker_extra_args, &o.router_extra_args}) {
    args->insert(args->end(), {"--internal-token-file", path});
  }
  return path;
}

// The chart's rule files, for the local Prometheus; none (with a warning)
// when the directory is not there, e.g. a kvfleet installed without its source.
std::vector<std::string> RuleFiles(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string ext = entry.path().extension().string();
    if (ext == ".yaml" || ext == ".yml") files.push_back(std::filesystem::absolute(entry.path()).string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) std::fprintf(stderr, "kvfleet up: warning: no rule files in %s; alerts are off\n", dir.c_str());
  return files;
}

absl::StatusOr<std::unique_ptr<cluster::LocalPrometheus>> StartPrometheus(const Flags& flags,
                                                                          const LocalCluster& cluster,
                                                                          const LocalClusterOptions& options) {
  std::vector<cluster::ScrapeTarget> targets = {
      {.address = cluster.router().endpoints.metrics_address, .pod = "router", .component = "router"},
      {.address = cluster.cachemanager().endpoints.metrics_address,
       .pod = "cachemanager",
       .component = "cachemanager"}};
  for (size_t i = 0; i < cluster.workers().size(); ++i) {
    const ClusterMember& w = cluster.workers()[i];
    targets.push_back({.address = w.endpoints.metrics_address,
                       .pod = w.label,
                       .component = "worker",
                       .model = model::DefaultModelId(cluster::WorkerModel(options, static_cast<int>(i)))});
  }
  ASSIGN_OR_RETURN(int64_t port, flags.GetInt("prometheus-port", 9090));
  if (port < 0 || port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("--prometheus-port ", port, " is not a port"));
  const std::string dir = options.log_dir + "/prometheus";
  std::filesystem::create_directories(dir);
  const std::string config = cluster::PrometheusConfig(
      targets, {.rule_files = RuleFiles(flags.GetString("prometheus-rules", KVFLEET_RULES_DIR))});
  return cluster::LocalPrometheus::Start({.config = config, .dir = dir, .port = static_cast<int>(port)});
}

// Serves until a termination signal (OK) or a member's unexpected exit.
absl::Status Serve(LocalCluster& cluster) {
  while (!TerminationSignals::Poll(std::chrono::milliseconds(absl::ToInt64Milliseconds(kPollInterval)))) {
    RETURN_IF_ERROR(cluster.CheckRunning());
  }
  return absl::OkStatus();
}

// Stops the cluster; `status` (why it stops) wins over a stop problem.
absl::Status StopCluster(LocalCluster& cluster, absl::Status status) {
  std::fprintf(stderr, "kvfleet up: stopping the router, then the workers (they drain), then the cachemanager\n");
  const absl::Status stopped = cluster.Stop(SignalArrived);
  if (stopped.ok()) std::fprintf(stderr, "kvfleet up: stopped\n");
  return status.ok() ? stopped : status;
}

}  // namespace

absl::Status RunUp(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags,
                   Flags::Parse(args,
                                {"model",
                                 "workers",
                                 "prefill-workers",
                                 "decode-workers",
                                 "split-min-uncached-tokens",
                                 "max-num-batched-tokens",
                                 "threads",
                                 "tensor-parallel",
                                 "tensor-parallel-size",
                                 "kv-cache-memory",
                                 "listen",
                                 "http-listen",
                                 "cachemanager-listen",
                                 "metrics-port",
                                 "policy",
                                 "log-dir",
                                 "bin-dir",
                                 "ask",
                                 "device",
                                 "cpu-activations",
                                 "kv-cache-dtype",
                                 "calibration",
                                 "kv-host-memory",
                                 "kv-disk-dir",
                                 "kv-disk-size",
                                 "speculation",
                                 "spec-self-layers",
                                 "spec-draft-model",
                                 "spec-draft-heads",
                                 "spec-heads-top-k",
                                 "prometheus-port",
                                 "prometheus-rules",
                                 "lora",
                                 "max-loras",
                                 "max-lora-rank",
                                 "lora-dir",
                                 "admin-tokens"},
                                {"exit-after-ask", "prometheus", "tls", "internal-token", "keep-window-blocks"}));
  if (flags.GetSwitch("exit-after-ask") && !flags.Has("ask")) {
    return absl::InvalidArgumentError("--exit-after-ask needs --ask TEXT");
  }
  ASSIGN_OR_RETURN(LocalClusterOptions options, OptionsFromFlags(flags));
  std::string tls_ca;
  if (flags.GetSwitch("tls") && flags.GetSwitch("internal-token")) {
    return absl::InvalidArgumentError(
        "--tls and --internal-token are alternatives: with --tls, mutual TLS authorises the internal calls");
  }
  if (flags.GetSwitch("tls")) {
    ASSIGN_OR_RETURN(tls_ca, UseTls(options));
  }
  if (flags.GetSwitch("internal-token")) {
    ASSIGN_OR_RETURN(const std::string token_file, UseInternalToken(options));
    std::fprintf(stderr, "kvfleet up: internal calls require the token in %s (--internal-token-file)\n",
                 token_file.c_str());
  }
  std::fprintf(stderr,
               "kvfleet up: starting a cachemanager, %d worker%s of %zu model%s (%d thread%s, %s KV cache each) and "
               "a router; logs in %s\n",
               options.workers, options.workers == 1 ? "" : "s", options.models.size(),
               options.models.size() == 1 ? "" : "s", options.threads_per_worker,
               options.threads_per_worker == 1 ? "" : "s", options.kv_cache_memory.c_str(), options.log_dir.c_str());
  ASSIGN_OR_RETURN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Start(options));
  const CallSettings router_call{.router = cluster->router().endpoints.grpc_address, .tls_ca = tls_ca};
  absl::StatusOr<std::vector<std::string>> model_ids = AwaitWorkersSeen(*cluster, options, router_call);
  if (!model_ids.ok()) return StopCluster(*cluster, model_ids.status());
  std::unique_ptr<cluster::LocalPrometheus> prometheus;
  if (flags.GetSwitch("prometheus")) {
    absl::StatusOr<std::unique_ptr<cluster::LocalPrometheus>> started = StartPrometheus(flags, *cluster, options);
    if (!started.ok()) return StopCluster(*cluster, started.status());
    prometheus = std::move(*started);
    std::printf("kvfleet up prometheus=%s  (its log: %s; dashboards: docs/operations.md)\n", prometheus->url().c_str(),
                prometheus->log_path().c_str());
  }
  PrintBanner(*cluster, options, *model_ids, router_call);
  if (flags.Has("ask")) {
    const absl::Status asked = Ask(router_call, flags.GetString("ask", ""), model_ids->front());
    if (!asked.ok()) std::fprintf(stderr, "kvfleet up: --ask failed: %s\n", std::string(asked.message()).c_str());
    if (flags.GetSwitch("exit-after-ask")) return StopCluster(*cluster, asked);
  }
  return StopCluster(*cluster, Serve(*cluster));
}

}  // namespace kvfleet::tools
