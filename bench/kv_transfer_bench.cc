// kv_transfer_bench: KV blocks between two workers over gRPC on loopback,
// against a plain gRPC stream of the same bytes in the same run.
//
//   kvfleet pull: KvPeerClient pulls N blocks of a computed prompt from a
//     KvTransferService over the real engine (each block copied out of the
//     KV cache, chunked with its CRC-32, streamed, reassembled, checked).
//   plain stream: the same KvTransfer method served by a stub that streams
//     the same number of chunk messages of the same size from memory, read
//     without reassembly or checks: what the transport itself costs.
//
// The serving side runs in a child process forked at the start, as a peer
// worker is another process. Prints GB/s of both, the median of --repeats
// runs alternated, and the ratio. Not part of CI; see bench/README.md.
//
//   build/bench/kv_transfer_bench --model models/SmolLM2-135M-Instruct.Q4_1.gguf --blocks 128
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "engine/engine.h"
#include "engine/executor/executor_factory.h"
#include "model/model.h"
#include "services/transport/grpc/grpc_channel.h"
#include "services/transport/grpc/grpc_server.h"
#include "services/worker/transfer/kv_peer_client.h"
#include "services/worker/transfer/kv_transfer_convert.h"
#include "services/worker/transfer/kv_transfer_service.h"

namespace kvfleet::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The plain baseline: every pull answered with `chunks` from memory.
class PlainStream final : public v1::KvTransfer::Service {
 public:
  explicit PlainStream(std::vector<v1::PullBlocksResponse> chunks) : chunks_(std::move(chunks)) {}
  grpc::Status PullBlocks(grpc::ServerContext*, const v1::PullBlocksRequest*,
                          grpc::ServerWriter<v1::PullBlocksResponse>* writer) override {
    for (const v1::PullBlocksResponse& c : chunks_) {
      if (!writer->Write(c)) return grpc::Status::CANCELLED;
    }
    return grpc::Status::OK;
  }

 private:
  std::vector<v1::PullBlocksResponse> chunks_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Settings {
  std::string path;
  int64_t blocks = 128, chunk_bytes = 1 << 20, repeats = 5, threads = 2;
};

// The prompt of `blocks` full blocks (and one token more) both halves build
// from the same seed, and its block hashes.
std::vector<model::TokenId> Prompt(int64_t blocks) {
  std::mt19937 rng(1);
  std::vector<model::TokenId> prompt;
  for (int64_t i = 0; i < blocks * 16 + 1; ++i) prompt.push_back(static_cast<model::TokenId>(rng() % 1000 + 10));
  return prompt;
}
std::vector<BlockHash> PromptHashes(int64_t blocks) {
  std::vector<model::TokenId> prompt = Prompt(blocks);
  prompt.pop_back();
  return HashFullBlocks(RootBlockHash("bench", ""), prompt, 16);
}

// What the serving process tells the measuring one, one line on a pipe.
struct Served {
  std::string pull_address, plain_address;
  int64_t block_bytes = 0;
  v1::KvTransferIdentity identity;
};

// The serving process: the model, an engine holding the prompt's blocks,
// the KvTransferService over it and the plain stream of the same chunks.
// Writes Served to `out`, then serves until `in` closes.
absl::Status Serve(const Settings& s, int out, int in) {
  ASSIGN_OR_RETURN(std::unique_ptr<model::Model> model, model::Model::Load(s.path));
  const engine::EngineOptions options{.model_id = "bench",
                                      .scheduler = {.max_num_batched_tokens = 512, .max_num_seqs = 4}};
  ASSIGN_OR_RETURN(std::unique_ptr<engine::ModelExecutor> executor,
                   engine::CreateExecutor(*model, {.num_blocks = s.blocks + 32,
                                                   .block_size = 16,
                                                   .num_threads = static_cast<int>(s.threads),
                                                   .limits = options.ExecutorLimitsNeeded()}));
  const engine::ExecutorInfo& info = executor->info();
  engine::Engine engine(*executor, options);
  engine.Start();
  engine::EngineRequest r{.id = RequestId(1), .prompt = Prompt(s.blocks)};
  r.stopping = {.max_tokens = 1, .ignore_eos = true};
  struct Done : engine::OutputSink {
    std::promise<void> finished;
    void OnOutput(engine::RequestOutput out) override {
      if (out.finished) finished.set_value();
    }
  } sink;
  std::future<void> computed = sink.finished.get_future();
  RETURN_IF_ERROR(engine.Submit(r, &sink));
  computed.wait();
  const std::vector<BlockHash> hashes = PromptHashes(s.blocks);

  const engine::KvTransferIdentity identity = worker::KvTransferIdentityOf(info, "bench", "f16");
  worker::KvTransferService service(engine, identity, {.max_chunk_bytes = static_cast<uint64_t>(s.chunk_bytes)});
  ASSIGN_OR_RETURN(
      transport::RunningServer server,
      transport::StartGrpcServer({.services = {&service}, .max_receive_message_bytes = 4 << 20, .reflection = false}));
  // The plain stream's messages: the same blocks' chunks, taken once.
  std::vector<v1::PullBlocksResponse> plain_chunks;
  {
    std::promise<std::vector<engine::KvBlockBytes>> p;
    engine.ExportKvBlocks(hashes, [&p](std::vector<engine::KvBlockBytes> b) { p.set_value(std::move(b)); });
    const std::vector<engine::KvBlockBytes> copied = p.get_future().get();
    if (static_cast<int64_t>(copied.size()) != s.blocks) {
      return absl::InternalError(absl::StrCat("only ", copied.size(), " of ", s.blocks, " blocks are cached"));
    }
    for (const engine::KvBlockBytes& b : copied) {
      for (const engine::KvBlockChunk& c : engine::SplitKvBlock(b.hash, b.parent, true, b.bytes, s.chunk_bytes)) {
        worker::ToProto(c, plain_chunks.emplace_back().mutable_chunk());
      }
    }
  }
  PlainStream plain(plain_chunks);
  ASSIGN_OR_RETURN(transport::RunningServer plain_server,
                   transport::StartGrpcServer({.services = {&plain}, .reflection = false}));
  v1::KvTransferIdentity wire;
  worker::ToProto(identity, &wire);
  const std::string line = absl::StrCat(server.address, " ", plain_server.address, " ", info.kv_block_bytes, " ",
                                        absl::BytesToHexString(wire.SerializeAsString()), "\n");
  if (write(out, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    return absl::InternalError("could not tell the measuring process the addresses");
  }
  close(out);
  char byte;
  while (read(in, &byte, 1) > 0) {
  }
  server.Shutdown(std::chrono::system_clock::now());
  plain_server.Shutdown(std::chrono::system_clock::now());
  engine.Stop();
  return absl::OkStatus();
}

absl::StatusOr<Served> ReadServed(int in) {
  std::string line;
  char c;
  while (read(in, &c, 1) == 1 && c != '\n') line.push_back(c);
  const std::vector<std::string> words = absl::StrSplit(line, ' ');
  Served s;
  if (words.size() != 4 || !absl::SimpleAtoi(words[2], &s.block_bytes) ||
      !s.identity.ParseFromString(absl::HexStringToBytes(words[3]))) {
    return absl::InternalError(absl::StrCat("the serving process failed (it said \"", line, "\")"));
  }
  s.pull_address = words[0];
  s.plain_address = words[1];
  return s;
}

// The measuring process: KvPeerClient against the service, and a bare
// reader against the plain stream, alternated.
absl::Status Measure(const Settings& s, const Served& served) {
  const std::vector<BlockHash> hashes = PromptHashes(s.blocks);
  worker::KvPeerClient client({.identity = worker::FromProto(served.identity),
                               .deadline = std::chrono::seconds(60),
                               .max_chunk_bytes = static_cast<uint64_t>(s.chunk_bytes)});
  const auto pull_once = [&]() -> absl::StatusOr<double> {
    std::promise<absl::Status> p;
    const Clock::time_point start = Clock::now();
    int64_t got = 0;
    client.Fetch(served.pull_address, /*adapter=*/"", hashes, /*lease_id=*/"",
                 [&](std::vector<engine::KvBlockBytes> b, absl::Status status) {
                   got = static_cast<int64_t>(b.size());
                   p.set_value(status);
                 });
    RETURN_IF_ERROR(p.get_future().get());
    if (got != s.blocks) return absl::InternalError(absl::StrCat("pulled ", got, " of ", s.blocks, " blocks"));
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  const auto plain_once = [&]() -> absl::StatusOr<double> {
    auto stub = v1::KvTransfer::NewStub(transport::CreateClientChannel(served.plain_address));
    grpc::ClientContext context;
    const Clock::time_point start = Clock::now();
    auto reader = stub->PullBlocks(&context, v1::PullBlocksRequest());
    v1::PullBlocksResponse m;
    int64_t bytes = 0;
    while (reader->Read(&m)) bytes += static_cast<int64_t>(m.chunk().data().size());
    if (!reader->Finish().ok()) return absl::InternalError("the plain stream failed");
    if (bytes != s.blocks * served.block_bytes) return absl::InternalError("the plain stream lost bytes");
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  std::vector<double> pull_s, plain_s;
  for (int64_t i = 0; i <= s.repeats; ++i) {  // the first of each is a warm-up
    ASSIGN_OR_RETURN(double a, pull_once());
    ASSIGN_OR_RETURN(double b, plain_once());
    if (i > 0) pull_s.push_back(a), plain_s.push_back(b);
  }
  const double bytes = static_cast<double>(s.blocks * served.block_bytes);
  const double pull_gbs = bytes / Median(pull_s) / 1e9, plain_gbs = bytes / Median(plain_s) / 1e9;
  std::printf("%s: %lld blocks of %lld bytes (%.1f MB), chunks of %lld bytes, two processes, median of %lld\n",
              s.path.c_str(), static_cast<long long>(s.blocks), static_cast<long long>(served.block_bytes), bytes / 1e6,
              static_cast<long long>(s.chunk_bytes), static_cast<long long>(s.repeats));
  std::printf("  kvfleet pull (engine copy-out, CRC-32C, reassembly): %.2f GB/s (%.1f ms)\n", pull_gbs,
              Median(pull_s) * 1e3);
  std::printf("  plain gRPC stream of the same chunks:               %.2f GB/s (%.1f ms)\n", plain_gbs,
              Median(plain_s) * 1e3);
  std::printf("  ratio: %.2fx the plain stream's rate\n", pull_gbs / plain_gbs);
  return absl::OkStatus();
}

absl::Status Run(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(flags::Flags f,
                   flags::Flags::Parse(args, {"model", "blocks", "chunk-bytes", "repeats", "threads"}, {}));
  Settings s;
  s.path = f.GetString("model", KVFLEET_DEFAULT_MODEL_PATH);
  ASSIGN_OR_RETURN(s.blocks, f.GetInt("blocks", s.blocks));
  ASSIGN_OR_RETURN(s.chunk_bytes, f.GetInt("chunk-bytes", s.chunk_bytes));
  ASSIGN_OR_RETURN(s.repeats, f.GetInt("repeats", s.repeats));
  ASSIGN_OR_RETURN(s.threads, f.GetInt("threads", s.threads));
  // Two processes, as two workers are: forked before either starts a thread.
  int to_measure[2], to_serve[2];
  if (pipe(to_measure) != 0 || pipe(to_serve) != 0) return absl::InternalError("pipe failed");
  const pid_t child = fork();
  if (child < 0) return absl::InternalError("fork failed");
  if (child == 0) {
    close(to_measure[0]);
    close(to_serve[1]);
    const absl::Status served = Serve(s, to_measure[1], to_serve[0]);
    if (!served.ok()) std::fprintf(stderr, "kv_transfer_bench (serving): %s\n", std::string(served.message()).c_str());
    _exit(served.ok() ? 0 : 1);
  }
  close(to_measure[1]);
  close(to_serve[0]);
  absl::StatusOr<Served> served = ReadServed(to_measure[0]);
  const absl::Status measured = served.ok() ? Measure(s, *served) : served.status();
  close(to_serve[1]);  // the serving process stops
  int status = 0;
  waitpid(child, &status, 0);
  return measured;
}

}  // namespace
}  // namespace kvfleet::bench

int main(int argc, char** argv) {
  const absl::Status s = kvfleet::bench::Run(std::vector<std::string>(argv + 1, argv + argc));
  if (!s.ok()) {
    std::fprintf(stderr, "kv_transfer_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
