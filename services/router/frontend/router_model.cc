#include "services/router/frontend/router_model.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/model.h"
#include "model/tokenizer/chat_encoding.h"

namespace kvfleet::router {

absl::StatusOr<std::unique_ptr<RouterModel>> RouterModel::Load(const std::string& path, RouterModelOptions options) {
  // The config and vocabulary only: the router never runs the model.
  ASSIGN_OR_RETURN(std::unique_ptr<model::Model> loaded, model::Model::Load(path, {.weights = false}));
  model::ModelCard card =
      model::CardOf(*loaded, options.model_id.empty() ? model::DefaultModelId(path) : std::move(options.model_id));
  card.served_name = std::move(options.served_name);
  if (!options.chat_template.empty()) {
    card.vocabulary.chat_template = std::move(options.chat_template);
    if (absl::StatusOr<model::ChatTemplate> t = model::ChatTemplate::FromVocabulary(card.vocabulary); !t.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--chat-template does not load: ", t.status().message()));
    }
  }
  return Create(std::move(card));
}

absl::StatusOr<std::unique_ptr<RouterModel>> RouterModel::Create(model::ModelCard card) {
  std::unique_ptr<RouterModel> m(new RouterModel());
  m->id_ = std::move(card.id);
  m->served_name_ = card.served_name.empty() ? m->id_ : std::move(card.served_name);
  m->context_length_ = card.context_length;
  const model::Vocabulary& vocab = card.vocabulary;
  absl::StatusOr<std::unique_ptr<model::Tokenizer>> tokenizer = model::CreateTokenizer(vocab);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat("model ", m->id_, ": its tokenizer: ", tokenizer.status().message()));
  }
  m->tokenizer_ = *std::move(tokenizer);
  m->chat_template_ = model::ChatTemplate::FromVocabulary(vocab);
  m->add_bos_ = vocab.add_bos;
  const bool has_think_tokens =
      m->tokenizer_->FindToken("<think>").has_value() && m->tokenizer_->FindToken("</think>").has_value();
  m->chat_output_format_ = chat::DetectChatOutputFormat(vocab.chat_template, has_think_tokens);
  m->generation_defaults_ = std::move(card.generation_defaults);
  return m;
}

absl::StatusOr<std::vector<model::TokenId>> RouterModel::EncodePrompt(std::string_view text) const {
  return tokenizer_->Encode(text, {.add_special = true, .parse_special = false});
}

absl::StatusOr<std::vector<model::TokenId>> RouterModel::EncodeChat(std::span<const model::ChatMessage> messages,
                                                                    bool add_generation_prompt) const {
  if (!chat_template_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("model ", id_, " has no chat template kvfleet can render (",
                                                      chat_template_.status().message(),
                                                      "); use Generate with a formatted prompt"));
  }
  return model::EncodeChat(*tokenizer_, *chat_template_, add_bos_, messages, add_generation_prompt);
}

absl::StatusOr<std::vector<model::TokenId>> RouterModel::EncodeChat(const model::ChatInputs& inputs) const {
  if (!chat_template_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("model ", id_, " has no chat template kvfleet can render (",
                                                      chat_template_.status().message(),
                                                      "); use Generate with a formatted prompt"));
  }
  return model::EncodeChat(*tokenizer_, *chat_template_, add_bos_, inputs);
}

bool RouterModel::EndsInsideReasoning(std::span<const model::TokenId> prompt) const {
  if (chat_output_format_.think_start.empty()) return false;
  const size_t tail = std::min<size_t>(prompt.size(), 8);
  absl::StatusOr<std::string> text = tokenizer_->Decode(prompt.subspan(prompt.size() - tail));
  if (!text.ok()) return false;
  std::string_view t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.remove_suffix(1);
  const std::string& start = chat_output_format_.think_start;
  return t.size() >= start.size() && t.substr(t.size() - start.size()) == start;
}

absl::Status RouterModel::CheckTokenIds(std::span<const model::TokenId> ids, std::string_view field) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(field), "[", i, "] is ", ids[i],
                                                     ", outside the vocabulary [0, ", vocab_size(), ") of model ",
                                                     id_));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvfleet::router
