// A Llama-family model loaded from GGUF: the mapped file, its validated
// hyperparameters, its weight views and its vocabulary. Loading checks
// everything up front, so a corrupt or unsupported file fails here with a
// status that names the problem — not later inside a kernel.
//
//   ASSIGN_OR_RETURN(auto model, LlamaModel::Load("SmolLM2-135M-Instruct.Q4_1.gguf"));
//   int64_t layers = model->hparams().num_layers;
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/gguf/gguf_file.h"
#include "model/llama_hparams.h"
#include "model/llama_weights.h"
#include "model/vocabulary.h"

namespace kvfleet::model {

class LlamaModel {
 public:
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(const std::string& path);

  const GgufFile& file() const { return *file_; }
  const LlamaHparams& hparams() const { return hparams_; }
  const LlamaWeights& weights() const { return weights_; }
  const Vocabulary& vocabulary() const { return vocabulary_; }

 private:
  LlamaModel() = default;

  std::unique_ptr<GgufFile> file_;
  LlamaHparams hparams_;
  LlamaWeights weights_;
  Vocabulary vocabulary_;
};

}  // namespace kvfleet::model
