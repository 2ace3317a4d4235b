// The CUDA backend's ops (model/arch/op_set.h's concept): each one launches
// a kernels/cuda kernel on the executor's stream, over device memory.
// Launches are asynchronous; the executor checks for errors once per pass
// (cuda::CheckLaunches) when it synchronizes for the logits.
//
// An ops object lives for one forward pass. Prepare plans the attention of
// the batch (attention_plan.h) on the host and copies the plan to the
// device; every layer's Attention reuses it (a windowed layer skips the
// partitions before its window).
//
// Thread-safety: one thread at a time (the engine thread).
//
//   CudaOps ops(stream, config, step, workspace);
//   ops.Prepare();
//   forward(ops, model_config, device_weights, model_step, activations);
//   RETURN_IF_ERROR(ops.status());
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/executor/backend_common.h"
#include "engine/executor/collective.h"
#include "engine/executor/forward_batch.h"
#include "kernels/common/paged_kv.h"
#include "kernels/common/rope_tables.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/stream.h"
#include "model/arch/model_config.h"
#include "model/arch/op_set.h"

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {

// Device buffers the attention plan is copied into, and the partial results
// of one group of attention work; sized once by the executor.
struct CudaAttentionWorkspace {
  kernels::cuda::AttentionPlan plan;  // host side, reused
  kernels::cuda::AttentionWorkItem* items = nullptr;
  int64_t item_capacity = 0;
  int64_t* partial_offsets = nullptr;  // [max_batch_tokens]
  float* partial_o = nullptr;          // [partial_capacity × heads × head_dim]
  float* partial_ml = nullptr;         // [partial_capacity × heads × 2]
  int64_t partial_capacity = 0;        // (token, partition) pairs

  // The capacities for a model and batch limits, within a workspace budget
  // (but always room for one tile at the end of the context).
  static int64_t PartialsFor(const model::ModelConfig& c, int64_t max_tokens, int64_t budget_bytes);
  static int64_t ItemsFor(int64_t max_tokens, int64_t context_length);
};

class CudaOps {
 public:
  // What stays the same for every step of one model.
  struct Config {
    std::vector<kernels::RopeParams> ropes;  // mode, head_dim and rot_dim of each RoPE configuration
    std::vector<const float*> rope_cos;      // device [context_length, rot_dim / 2], one per RoPE configuration
    std::vector<const float*> rope_sin;
    float rms_norm_eps = 1e-5f;
    int64_t group = 1;  // query heads per KV head
    // A tensor-parallel rank's side of its replica's collectives, called
    // with the stream synchronized; null for one rank (they do nothing).
    // On the host emulation an InProcessGroup's (device memory is host
    // memory); on GPUs an NcclCollective (cuda_ranks.h).
    Collective* collective = nullptr;

    // Without the tables (the executor adds them once uploaded).
    static Config For(const model::ModelConfig& c);
  };

  // One forward pass's inputs: the host batch (the attention plan reads its
  // positions) and its arrays on the device.
  struct Step {
    const ForwardBatch* batch = nullptr;
    BatchArrays arrays;
    KvCacheView kv;
    LoraStep lora;  // its table in device memory
  };

  CudaOps(::kvfleet::cuda::Stream stream, const Config& config, const Step& step, CudaAttentionWorkspace& workspace)
      : stream_(stream), config_(config), step_(step), workspace_(workspace) {}

  // The first error of a host-side step (a copy, a plan too large); kernels'
  // errors are the executor's check.
  const absl::Status& status() const { return status_; }

  // Plans the step's attention and copies the plan to the device.
  void Prepare();

  void Embed(const model::WeightView& table, int64_t tokens, float* out);
  void RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t n);
  // On one rank, RmsNorm. Across ranks it is not built on CUDA (CudaRanks
  // refuses a model that needs it): the step fails, on every rank alike.
  void RmsNormAcrossRanks(const float* x, const float* weight, float* y, int64_t rows, int64_t n);
  void MatMul(const model::WeightView& w, const float* x, int64_t m, float* y);
  void AddLora(const model::LoraSite& site, const model::WeightView& w, const float* x, int64_t m, float* y);
  void AddBias(float* y, const float* bias, int64_t rows, int64_t n);
  void Scale(float* x, int64_t count, float s);
  void Rope(float* x, int64_t tokens, int64_t heads, int32_t rope);
  void WriteKv(int32_t layer, const float* k, const float* v, int64_t tokens);
  void Attention(const model::AttentionCall& call, const float* q, float* out, int64_t tokens);
  void SwiGlu(const float* gate, const float* up, float* out, int64_t count);
  void Silu(const float* x, float* out, int64_t count);
  void GeluTanhMul(const float* gate, const float* up, float* out, int64_t count);
  void Add(float* y, const float* x, int64_t count);
  void Logits(const float* x, const float* norm_weight, const model::WeightView& head, float* gathered, float* logits,
              int64_t rows);
  void AllReduce(float* x, int64_t count);
  void AllGather(float* x, int64_t rows, int64_t width);

 private:
  // Waits for the stream before a collective (status_ keeps a failure).
  void SynchronizeForCollective();

  ::kvfleet::cuda::Stream stream_;
  const Config& config_;
  Step step_;
  CudaAttentionWorkspace& workspace_;
  absl::Status status_;
};

static_assert(model::OpSet<CudaOps>);

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine
