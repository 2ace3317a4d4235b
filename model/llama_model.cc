#include "model/llama_model.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/gguf/gguf_vocabulary.h"

namespace kvfleet::model {

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::string& path) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  ASSIGN_OR_RETURN(m->file_, GgufFile::Open(path));
  ASSIGN_OR_RETURN(m->hparams_, ReadLlamaHparams(*m->file_));
  ASSIGN_OR_RETURN(m->weights_, BindLlamaWeights(*m->file_, m->hparams_));
  ASSIGN_OR_RETURN(m->vocabulary_, ReadGgufVocabulary(*m->file_));
  if (m->vocabulary_.size() != m->hparams_.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the vocabulary has ", m->vocabulary_.size(),
                                                   " tokens but tensor 'token_embd.weight' has ",
                                                   m->hparams_.vocab_size, " rows"));
  }
  return m;
}

}  // namespace kvfleet::model
