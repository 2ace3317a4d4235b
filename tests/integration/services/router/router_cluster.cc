#include "tests/integration/services/router/router_cluster.h"

#include <signal.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tests/testing/http_get.h"

namespace kvfleet::testing {
namespace {

TextStreamResult ReadStream(std::unique_ptr<grpc::ClientReader<v1::GenerateTextResponse>> reader,
                            grpc::ClientContext& context,
                            const std::function<bool(const TextStreamResult&)>& cancel_when) {
  TextStreamResult result;
  v1::GenerateTextResponse response;
  bool cancelled = false;
  while (reader->Read(&response)) {
    ++result.messages;
    result.text += response.text();
    result.tokens.insert(result.tokens.end(), response.token_ids().begin(), response.token_ids().end());
    result.worker_ids.push_back(response.worker_id());
    if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      result.finish_reason = response.finish_reason();
      result.usage = response.usage();
    }
    if (!cancelled && cancel_when && cancel_when(result)) {
      context.TryCancel();
      cancelled = true;
    }
  }
  result.status = reader->Finish();
  return result;
}

}  // namespace

absl::Status RouterCluster::StartCacheManager(const std::string& listen) {
  std::vector<std::string> args = {
      "--listen", listen, "--metrics-port", "0", "--liveness-deadline", "1", "--heartbeat-interval", "200"};
  args.insert(args.end(), options_.cachemanager_args.begin(), options_.cachemanager_args.end());
  ASSIGN_OR_RETURN(
      cachemanager_,
      StartServiceProcess("kvfleet-cachemanager", ServiceBinary("kvfleet-cachemanager", KVFLEET_CACHEMANAGER_BINARY),
                          args, dir_.Path("cachemanager.log"), absl::Seconds(30)));
  return absl::OkStatus();
}

absl::Status RouterCluster::Start(const RouterClusterOptions& options) {
  options_ = options;
  model_path_ = options.model_path;
  if (model_path_.empty()) {
    model_path_ = dir_.Path("tiny.gguf");
    RETURN_IF_ERROR(WriteHarnessModel(model_path_));
  }
  RETURN_IF_ERROR(StartCacheManager("127.0.0.1:0"));
  for (int i = 0; i < options.workers; ++i) RETURN_IF_ERROR(StartWorker(i));
  RETURN_IF_ERROR(StartRouter("127.0.0.1:0"));
  if (!WaitForLiveWorkers(options.workers, std::chrono::seconds(30))) {
    return absl::DeadlineExceededError(
        absl::StrCat("the router sees ", LiveWorkers(), " live workers, not ", options.workers));
  }
  return absl::OkStatus();
}

absl::Status RouterCluster::StartRouter(const std::string& listen) {
  std::vector<std::string> args = {"--listen", listen, "--metrics-port", "0", "--cachemanager", cachemanager_.address};
  if (options_.router_reads_model) args.insert(args.end(), {"--model", model_path_});
  args.insert(args.end(), options_.router_args.begin(), options_.router_args.end());
  ASSIGN_OR_RETURN(router_,
                   StartServiceProcess("kvfleet-router", ServiceBinary("kvfleet-router", KVFLEET_ROUTER_BINARY), args,
                                       dir_.Path("router.log"), absl::Seconds(30)));
  return absl::OkStatus();
}

void RouterCluster::KillRouter() {
  router_.process->Signal(SIGKILL);
  (void)router_.process->Wait(absl::Seconds(10));
}

absl::Status RouterCluster::RestartRouter() {
  const std::string address = router_.address;
  KillRouter();
  return StartRouter(address);
}

absl::StatusOr<v1::ListWorkersResponse> RouterCluster::CacheManagerWorkers() const {
  auto stub = v1::CacheManager::NewStub(NewTestChannel(cachemanager_.address));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListWorkersResponse response;
  const grpc::Status s = stub->ListWorkers(&context, v1::ListWorkersRequest(), &response);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return response;
}

absl::Status RouterCluster::StartWorker(int index) {
  auto w = std::make_unique<WorkerHarness>();
  std::vector<std::string> args = {"--cachemanager", cachemanager_.address, "--worker-id",
                                   absl::StrCat("worker-", index)};
  args.insert(args.end(), options_.worker_args.begin(), options_.worker_args.end());
  if (auto own = options_.worker_args_of.find(index); own != options_.worker_args_of.end()) {
    args.insert(args.end(), own->second.begin(), own->second.end());
  }
  if (!options_.kv_disk_size.empty()) {
    args.insert(args.end(), {"--kv-disk-dir", KvDiskDir(index), "--kv-disk-size", options_.kv_disk_size});
  }
  auto own_model = options_.model_path_of.find(index);
  RETURN_IF_ERROR(w->Start(args, own_model != options_.model_path_of.end() ? own_model->second : model_path_));
  if (index >= static_cast<int>(workers_.size())) workers_.resize(index + 1);
  workers_[index] = std::move(w);
  return absl::OkStatus();
}

void RouterCluster::KillWorker(int index) {
  ChildProcess& p = workers_.at(index)->worker().process();
  p.Signal(SIGKILL);
  (void)p.Wait(absl::Seconds(10));
}

void RouterCluster::KillCacheManager() {
  cachemanager_.process->Signal(SIGKILL);
  (void)cachemanager_.process->Wait(absl::Seconds(10));
}

absl::Status RouterCluster::RestartCacheManager() {
  const std::string address = cachemanager_.address;
  KillCacheManager();
  return StartCacheManager(address);
}

std::unique_ptr<v1::Inference::Stub> RouterCluster::Stub() const {
  return v1::Inference::NewStub(NewTestChannel(router_.address));
}

absl::StatusOr<PrometheusScrape> RouterCluster::ScrapeRouter() const {
  ASSIGN_OR_RETURN(std::string body, HttpGet("127.0.0.1", router_.metrics_port, "/metrics", absl::Seconds(10)));
  return PrometheusScrape::Parse(body);
}

absl::StatusOr<PrometheusScrape> RouterCluster::ScrapeCacheManager() const {
  ASSIGN_OR_RETURN(std::string body, HttpGet("127.0.0.1", cachemanager_.metrics_port, "/metrics", absl::Seconds(10)));
  return PrometheusScrape::Parse(body);
}

absl::StatusOr<v1::ListModelsResponse> RouterCluster::ListModels() const {
  grpc::ClientContext context;
  if (!options_.bearer_token.empty()) context.AddMetadata("authorization", "Bearer " + options_.bearer_token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListModelsResponse response;
  const grpc::Status s = Stub()->ListModels(&context, v1::ListModelsRequest(), &response);
  if (!s.ok()) return absl::UnavailableError(absl::StrCat("ListModels: ", s.error_message()));
  return response;
}

int RouterCluster::LiveWorkers() const {
  absl::StatusOr<v1::ListModelsResponse> models = ListModels();
  if (!models.ok()) return -1;
  int live = 0;
  // Base models only: a LoRA adapter's entry counts its base's workers again.
  for (const v1::ModelInfo& m : models->models()) live += m.parent().empty() ? m.live_workers() : 0;
  return live;
}

bool RouterCluster::WaitForLiveWorkers(int n, std::chrono::milliseconds timeout) const {
  return WaitUntil([&] { return LiveWorkers() == n; }, timeout);
}

TextStreamResult RouterCluster::Generate(const v1::GenerateTextRequest& request,
                                         std::optional<std::chrono::milliseconds> deadline,
                                         const std::function<bool(const TextStreamResult&)>& cancel_when) const {
  auto stub = Stub();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline.value_or(std::chrono::minutes(2)));
  context.set_wait_for_ready(true);
  return ReadStream(stub->Generate(&context, request), context, cancel_when);
}

TextStreamResult RouterCluster::Chat(const v1::ChatRequest& request) const {
  auto stub = Stub();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(2));
  context.set_wait_for_ready(true);
  return ReadStream(stub->Chat(&context, request), context, nullptr);
}

v1::GenerateTextRequest TinyTextRequest(uint64_t seed, int prompt_tokens, int max_tokens) {
  const v1::GenerateRequest ids = TinyRequest(seed, prompt_tokens, max_tokens);
  v1::GenerateTextRequest r;
  *r.mutable_prompt_token_ids() = ids.prompt_token_ids();
  *r.mutable_options()->mutable_stopping() = ids.stopping();
  return r;
}

std::vector<TextStreamResult> RunConcurrently(const RouterCluster& cluster,
                                              const std::vector<v1::GenerateTextRequest>& requests,
                                              const std::function<void(size_t, const TextStreamResult&)>& on_message) {
  std::vector<TextStreamResult> results(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = cluster.Generate(requests[i], std::nullopt, [&, i](const TextStreamResult& partial) {
        if (on_message) on_message(i, partial);
        return false;
      });
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

}  // namespace kvfleet::testing
