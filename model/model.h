// A model ready to run: its source (a GGUF file or a Hugging Face
// checkpoint directory, read into one format-neutral shape), its
// architecture's typed config, its weights bound by role, and its
// vocabulary. Loading checks everything up front, so a corrupt or
// unsupported file fails here with a status that names the file, the tensor
// or key, and what to do: never later inside a kernel.
//
// What the executors, the proposers, the q8 packer and the tools take; the
// router and the capacity planner load without weights (the config and the
// vocabulary only; nothing is bound, though the files are mapped).
//
// Thread-safety: immutable after Load; safe to share for reading.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Model> m, Model::Load("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
//   int64_t layers = m->config().num_layers;
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/arch/decoder_weights.h"
#include "model/arch/model_config.h"
#include "model/arch/shard_plan.h"
#include "model/arch/tensor_binder.h"
#include "model/source/model_source.h"
#include "model/vocabulary.h"

namespace kvfleet::model {

// A GGUF file, a Hugging Face checkpoint directory, or (config only) a bare
// config.json. Errors name the path and say which forms are accepted.
absl::StatusOr<std::unique_ptr<ModelSource>> OpenModelSource(const std::string& path);

// The name a model is served under when none is given: a file's name
// without its extension ("SmolLM2-135M-Instruct.Q4_1"), a checkpoint
// directory's own name ("qwen-ft" for "ckpt/qwen-ft/"). The router and the
// workers derive it the same way, so the ids they compare agree.
std::string DefaultModelId(std::string_view path);

class Model {
 public:
  struct LoadOptions {
    // False: the config and vocabulary only (the router, the capacity planner).
    bool weights = true;
    // False: a source without a vocabulary loads (a bare config.json).
    bool vocabulary = true;
  };

  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path, LoadOptions options);
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path) { return Load(path, LoadOptions{}); }
  // The same, from a source already open (tests that build sources in memory).
  static absl::StatusOr<std::unique_ptr<Model>> FromSource(std::unique_ptr<ModelSource> source, LoadOptions options);

  const ModelSource& source() const { return *source_; }
  const ModelConfig& config() const { return config_; }
  // Empty (no layers) when loaded without weights.
  const DecoderWeights& weights() const { return weights_; }
  // Empty when loaded without a vocabulary.
  const Vocabulary& vocabulary() const { return vocabulary_; }
  // What the weights can cost at most: the bytes of the model's files, or
  // of a shard's own share.
  int64_t weight_bytes() const { return shard_bytes_ >= 0 ? shard_bytes_ : source_->mapped_bytes(); }

  // One rank's share of the model for tensor parallelism (arch/shard_plan.h):
  // the config with the rank's query heads, KV heads and feed-forward width
  // (the vocabulary size stays the model's, as token ids do), and weights
  // that view the rank's rows in place (Wq, Wk, Wv, their biases, gate and
  // up, the vocabulary's rows of the embedding and head), with copies of
  // the row-parallel matrices' columns (Wo, Wdown), which are not
  // contiguous in the file. No vocabulary. This model must outlive it.
  // INVALID_ARGUMENT for a rank outside the plan, or a model whose layers
  // need a sum across ranks not yet built (a query norm over every head).
  absl::StatusOr<std::unique_ptr<Model>> Shard(const ShardPlan& plan, int32_t rank) const;

 private:
  Model() = default;

  std::shared_ptr<ModelSource> source_;
  ModelConfig config_;
  WeightStorage storage_;
  // A shard's copies of its row-parallel columns, and its weights' bytes
  // (-1: not a shard).
  std::vector<std::unique_ptr<uint8_t[]>> shard_storage_;
  int64_t shard_bytes_ = -1;
  DecoderWeights weights_;
  Vocabulary vocabulary_;
};

}  // namespace kvfleet::model
