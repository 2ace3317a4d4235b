// router_bench: how fast the router decides, without a network or a model
// to wait for (bench/README.md, "Router: decisions and added latency").
//
// 1. Placement decisions per second on one core: Placement::Choose alone,
//    given the prompt's block hashes and every worker's overlap and load, for
//    4, 16 and 64 workers and 8k-token (512-block) prompts, with the decision
//    memory and in-flight accounting on and full (every Choose records).
// 2. The router's whole added latency per request, in process: tokenize the
//    prompt text with the default model's tokenizer, hash its full blocks,
//    FindOverlaps on the cachemanager's real index (every worker holding its
//    share of the tenants' contexts), turn the answer into candidates and
//    Choose, while --streams earlier decisions are still in flight (the
//    state 1,000 open streams leave in the router). p50 / p99 over the
//    requests; one thread, then --threads threads at once (the placement
//    mutex is shared). What it leaves out: gRPC's own cost (a stream's
//    threads, serialization, the network hop to the cachemanager), measured
//    by router_placement_bench's router overhead histogram instead.
//
//   router_bench                       # defaults: 64 workers, 8k-token prompts, 1,000 streams
//   router_bench --workers 16 --prompt-tokens 2048
#include <algorithm>
#include <chrono>
#include <mutex>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/engine_bench.h"
#include "common/block_hash.h"
#include "common/check.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "services/cachemanager/index/kv_map.h"
#include "services/router/frontend/router_model.h"
#include "services/router/placement/placement.h"

namespace kvfleet::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct Cluster {
  int32_t workers = 64;
  int32_t tenants = 150;
  int32_t prompt_tokens = 8192;
  int32_t block_size = 16;
};

// Random token ids of the default model's vocabulary (0-2 are special).
std::vector<int32_t> RandomTokens(std::mt19937_64& rng, int32_t n) {
  std::uniform_int_distribution<int32_t> token(3, 49151);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = token(rng);
  return t;
}

// The cachemanager's index with `tenants` contexts of prompt_tokens - 256
// spread over the workers (each on two), and every worker's load report.
cachemanager::KvMap BuildIndex(const Cluster& c, const std::vector<std::vector<BlockHash>>& contexts) {
  cachemanager::KvMap map({});
  const auto now = cachemanager::Clock::now();
  for (int32_t w = 0; w < c.workers; ++w) {
    CHECK(map.Register({.worker_id = absl::StrCat("worker-", w),
                        .incarnation = 1,
                        .endpoint = absl::StrCat("10.0.0.", w, ":50051"),
                        .model_id = "SmolLM2",
                        .block_size = c.block_size,
                        .capacity_blocks = 1 << 20},
                       now)
              .ok());
  }
  std::vector<uint64_t> sequence(static_cast<size_t>(c.workers), 0);
  for (size_t t = 0; t < contexts.size(); ++t) {
    for (int copy = 0; copy < 2; ++copy) {
      const size_t w = (t * 2 + static_cast<size_t>(copy)) % static_cast<size_t>(c.workers);
      cachemanager::KvEventBatch batch{.worker_id = absl::StrCat("worker-", w),
                                       .incarnation = 1,
                                       .sequence = ++sequence[w]};
      batch.events.push_back({.kind = cachemanager::KvEventRecord::Kind::kStored,
                              .hashes = contexts[t],
                              .parent = cachemanager::ChainParent::Root()});
      batch.load = cachemanager::WorkerLoad{
          .running = 20, .waiting = 2, .blocks_used = 3000, .blocks_free = 5000, .blocks_total = 8192};
      CHECK(map.Apply(batch, now).ok());
    }
  }
  return map;
}

std::vector<router::WorkerCandidate> Candidates(const std::vector<cachemanager::WorkerOverlapInfo>& overlaps) {
  std::vector<router::WorkerCandidate> out;
  out.reserve(overlaps.size());
  for (const cachemanager::WorkerOverlapInfo& o : overlaps) {
    router::WorkerCandidate c{.worker_id = o.worker.descriptor.worker_id,
                              .endpoint = o.worker.descriptor.endpoint,
                              .matched_blocks = o.matched_blocks,
                              .load = o.worker.load,
                              .max_num_seqs = 256};
    c.load.prefill_tokens_per_second = 20000;
    out.push_back(std::move(c));
  }
  return out;
}

void DecisionsPerSecond(const Cluster& base, std::mt19937_64& rng) {
  std::printf("\n1. Placement::Choose alone, one thread (%d-token prompts, %d tenants, memory and in-flight on)\n",
              base.prompt_tokens, base.tenants);
  std::printf("%8s %14s %12s %12s\n", "workers", "decisions/s", "p50 us", "p99 us");
  for (int32_t workers : {4, 16, 64}) {
    Cluster c = base;
    c.workers = workers;
    const BlockHash root = RootBlockHash("SmolLM2", "");
    std::vector<std::vector<BlockHash>> prompts;
    for (int32_t t = 0; t < c.tenants; ++t) prompts.push_back(HashFullBlocks(root, RandomTokens(rng, c.prompt_tokens), 16));
    // Overlaps as the cachemanager would answer: each tenant's context on two workers.
    router::Placement placement({});
    std::vector<double> us;
    const int kDecisions = 20000;
    const auto start = Clock::now();
    for (int i = 0; i < kDecisions; ++i) {
      const int32_t t = static_cast<int32_t>(rng() % static_cast<uint64_t>(c.tenants));
      std::vector<router::WorkerCandidate> candidates;
      for (int32_t w = 0; w < workers; ++w) {
        const bool holds = w == (t * 2) % workers || w == (t * 2 + 1) % workers;
        candidates.push_back({.worker_id = absl::StrCat("worker-", w),
                              .endpoint = "e",
                              .matched_blocks = holds ? static_cast<int32_t>(prompts[t].size()) - 16 : 0,
                              .load = {.running = 20, .blocks_used = 3000, .blocks_free = 5000, .blocks_total = 8192},
                              .max_num_seqs = 256});
      }
      const router::PlacementRequest r{.block_hashes = prompts[t], .prompt_tokens = c.prompt_tokens, .block_size = 16};
      const auto t0 = Clock::now();
      absl::StatusOr<router::Decision> d = placement.Choose(r, std::move(candidates));
      us.push_back(Micros(Clock::now() - t0));
      CHECK(d.ok());
      placement.Settle(*d);
    }
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    double choose_s = 0;
    for (double x : us) choose_s += x / 1e6;
    std::printf("%8d %14.0f %12.1f %12.1f   (memory: %lld pairs; building the candidates: %.0f%% of the loop)\n",
                workers, kDecisions / choose_s, Percentile(us, 50), Percentile(us, 99),
                static_cast<long long>(placement.remembered_blocks()), 100.0 * (1.0 - choose_s / wall));
  }
}

absl::Status AddedLatency(const Cluster& c, int streams, int threads, const std::string& model_path,
                          std::mt19937_64& rng) {
  ASSIGN_OR_RETURN(std::unique_ptr<router::RouterModel> model,
                   router::RouterModel::Load(model_path, {.model_id = "SmolLM2"}));
  // Prompt texts: a tenant's context as text, then a question; tokenized by
  // the real tokenizer each time, as the router does.
  std::vector<std::string> context_text;
  std::vector<std::vector<BlockHash>> contexts;
  const BlockHash root = RootBlockHash("SmolLM2", "");
  for (int32_t t = 0; t < c.tenants; ++t) {
    std::string text;
    std::uniform_int_distribution<int> word(0, 25);
    while (true) {
      for (int k = 0; k < 200; ++k) {
        text.push_back(' ');
        for (int j = 0; j < 5; ++j) text.push_back(static_cast<char>('a' + word(rng)));
      }
      ASSIGN_OR_RETURN(std::vector<int32_t> ids, model->EncodePrompt(text));
      if (static_cast<int32_t>(ids.size()) >= c.prompt_tokens - 256) {
        contexts.push_back(HashFullBlocks(root, ids, c.block_size));
        break;
      }
    }
    context_text.push_back(std::move(text));
  }
  cachemanager::KvMap index = BuildIndex(c, contexts);
  router::Placement placement({});
  // The state 1,000 open streams leave: their decisions are in flight.
  for (int s = 0; s < streams; ++s) {
    const std::vector<BlockHash>& hashes = contexts[static_cast<size_t>(s) % contexts.size()];
    ASSIGN_OR_RETURN(router::Decision d,
                     placement.Choose({.block_hashes = hashes,
                                       .prompt_tokens = static_cast<int32_t>(hashes.size()) * c.block_size + 1,
                                       .block_size = c.block_size},
                                      Candidates(index.FindOverlaps("SmolLM2", {}))));
    (void)d;
  }
  std::printf("\n2. added latency per request, in process: tokenize + hash + FindOverlaps (real index) + Choose\n");
  std::printf("   %d workers, %d tenants' contexts of ~%d tokens, %lld decisions in flight\n", c.workers, c.tenants,
              c.prompt_tokens - 256, static_cast<long long>(placement.in_flight()));
  std::printf("%8s %9s %10s %10s %10s %10s %10s %10s\n", "threads", "requests", "tokens", "p50 ms", "p99 ms",
              "tokenize", "hash", "overlaps+choose");
  for (int n : {1, threads}) {
    const int per_thread = 200;
    std::vector<std::vector<double>> total(static_cast<size_t>(n)), tok(static_cast<size_t>(n)),
        hash(static_cast<size_t>(n));
    std::vector<std::thread> pool;
    std::vector<int64_t> tokens(static_cast<size_t>(n), 0);
    std::mutex index_mu;  // the cachemanager serializes its index too (KvMap: callers serialize)
    for (int k = 0; k < n; ++k) {
      pool.emplace_back([&, k] {
        std::mt19937_64 local(static_cast<uint64_t>(k) + 11);
        for (int i = 0; i < per_thread; ++i) {
          const size_t t = local() % context_text.size();
          const std::string prompt = absl::StrCat(context_text[t], " question ", i, " from thread ", k);
          const auto t0 = Clock::now();
          absl::StatusOr<std::vector<int32_t>> ids = model->EncodePrompt(prompt);
          CHECK(ids.ok());
          const auto t1 = Clock::now();
          std::vector<BlockHash> hashes = HashFullBlocks(root, *ids, c.block_size);
          const auto t2 = Clock::now();
          std::vector<cachemanager::WorkerOverlapInfo> overlaps;
          {
            std::lock_guard<std::mutex> lock(index_mu);
            overlaps = index.FindOverlaps("SmolLM2", hashes);
          }
          absl::StatusOr<router::Decision> d = placement.Choose({.block_hashes = hashes,
                                                                 .prompt_tokens = static_cast<int32_t>(ids->size()),
                                                                 .block_size = c.block_size},
                                                                Candidates(overlaps));
          CHECK(d.ok());
          const auto t3 = Clock::now();
          placement.Settle(*d);
          total[static_cast<size_t>(k)].push_back(Micros(t3 - t0) / 1000);
          tok[static_cast<size_t>(k)].push_back(Micros(t1 - t0) / 1000);
          hash[static_cast<size_t>(k)].push_back(Micros(t2 - t1) / 1000);
          tokens[static_cast<size_t>(k)] += static_cast<int64_t>(ids->size());
        }
      });
    }
    for (std::thread& t : pool) t.join();
    std::vector<double> all, all_tok, all_hash;
    int64_t all_tokens = 0;
    for (int k = 0; k < n; ++k) {
      all.insert(all.end(), total[static_cast<size_t>(k)].begin(), total[static_cast<size_t>(k)].end());
      all_tok.insert(all_tok.end(), tok[static_cast<size_t>(k)].begin(), tok[static_cast<size_t>(k)].end());
      all_hash.insert(all_hash.end(), hash[static_cast<size_t>(k)].begin(), hash[static_cast<size_t>(k)].end());
      all_tokens += tokens[static_cast<size_t>(k)];
    }
    const double p50 = Percentile(all, 50);
    std::printf("%8d %9zu %10lld %10.3f %10.3f %10.3f %10.3f %10.3f\n", n, all.size(),
                static_cast<long long>(all_tokens / static_cast<int64_t>(all.size())), p50, Percentile(all, 99),
                Percentile(all_tok, 50), Percentile(all_hash, 50),
                p50 - Percentile(all_tok, 50) - Percentile(all_hash, 50));
  }
  return absl::OkStatus();
}

absl::Status Main(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(Flags f, Flags::Parse(args, {"workers", "tenants", "prompt-tokens", "streams", "threads", "model",
                                                "seed"},
                                         {}));
  Cluster c;
  ASSIGN_OR_RETURN(int64_t workers, f.GetInt("workers", c.workers));
  ASSIGN_OR_RETURN(int64_t tenants, f.GetInt("tenants", c.tenants));
  ASSIGN_OR_RETURN(int64_t prompt, f.GetInt("prompt-tokens", c.prompt_tokens));
  ASSIGN_OR_RETURN(int64_t streams, f.GetInt("streams", 1000));
  ASSIGN_OR_RETURN(int64_t threads, f.GetInt("threads", 2));
  ASSIGN_OR_RETURN(int64_t seed, f.GetInt("seed", 1));
  if (workers < 1 || tenants < 1 || prompt < 512 || streams < 0 || threads < 1) {
    return absl::InvalidArgumentError("--workers, --tenants, --threads >= 1, --prompt-tokens >= 512, --streams >= 0");
  }
  c.workers = static_cast<int32_t>(workers);
  c.tenants = static_cast<int32_t>(tenants);
  c.prompt_tokens = static_cast<int32_t>(prompt);
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::printf("router_bench: %s; load average %s\n", f.GetString("model", DefaultModelPath()).c_str(),
              LoadAverage().c_str());
  DecisionsPerSecond(c, rng);
  RETURN_IF_ERROR(AddedLatency(c, static_cast<int>(streams), static_cast<int>(threads),
                               f.GetString("model", DefaultModelPath()), rng));
  return absl::OkStatus();
}

}  // namespace
}  // namespace kvfleet::bench

int main(int argc, char** argv) {
  const absl::Status s = kvfleet::bench::Main(std::vector<std::string>(argv + 1, argv + argc));
  if (!s.ok()) {
    std::fprintf(stderr, "router_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
