// What the router knows of the model it serves: its id, tokenizer, chat
// template and context length, read through the model layer without its
// weights (the router never runs the model). Tokenization
// lives here because the router must hash the prompt's blocks before it
// can place the request (docs/design.md, Overview).
//
// Thread-safety: immutable after Load; every method may be called from
// many threads at once.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<RouterModel> m, RouterModel::Load("models/x.gguf"));
//   ASSIGN_OR_RETURN(std::vector<model::TokenId> ids, m->EncodeChat(messages, /*add_generation_prompt=*/true));
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_card.h"
#include "model/source/generation_defaults.h"
#include "model/token_id.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "services/router/chat/chat_output_parser.h"

namespace kvfleet::router {

struct RouterModelOptions {
  // Empty: the file's name without ".gguf", as the worker names it (the two
  // must agree: the id seeds every block hash).
  std::string model_id;
  // The name clients use for it (--served-model-name); empty: the id.
  std::string served_name;
  // Jinja source of a chat template that replaces the model's own
  // (--chat-template, as vLLM's); empty: the model's.
  std::string chat_template;
};

class RouterModel {
 public:
  // Errors name the file. A model without a usable chat template loads;
  // Chat then fails. A --chat-template that jinja2 would not compile fails
  // the load, naming the line.
  static absl::StatusOr<std::unique_ptr<RouterModel>> Load(const std::string& path, RouterModelOptions options = {});
  // The same from a card (the one a worker described); a tokenizer the
  // vocabulary cannot make is an error naming the model. The card's
  // fingerprint is not kept: the catalog pairs it with the model.
  static absl::StatusOr<std::unique_ptr<RouterModel>> Create(model::ModelCard card);

  const std::string& id() const { return id_; }
  // What clients call it: requests may name it or the id; listings show it.
  const std::string& served_name() const { return served_name_; }
  int32_t context_length() const { return context_length_; }
  int32_t vocab_size() const { return tokenizer_->vocab_size(); }
  const model::Tokenizer& tokenizer() const { return *tokenizer_; }

  // A raw prompt, with BOS as the vocabulary asks. Special-token texts in it
  // stay plain text (a caller that wants control tokens sends token ids).
  absl::StatusOr<std::vector<model::TokenId>> EncodePrompt(std::string_view text) const;

  // Messages through the chat template (model/tokenizer/chat_encoding.h:
  // only the template's own markers become control tokens);
  // FAILED_PRECONDITION when the model has none kvfleet can render (with the
  // template loader's reason).
  absl::StatusOr<std::vector<model::TokenId>> EncodeChat(std::span<const model::ChatMessage> messages,
                                                         bool add_generation_prompt) const;
  // The same for a whole chat request's inputs (tools, tool calls, kwargs).
  absl::StatusOr<std::vector<model::TokenId>> EncodeChat(const model::ChatInputs& inputs) const;
  // Whether a chat prompt ends inside an open reasoning block (a template
  // whose generation prompt ends in "<think>\n", as DeepSeek-R1's does).
  bool EndsInsideReasoning(std::span<const model::TokenId> prompt) const;

  // What the model's output holds besides text (reasoning tags, the tool
  // call format its template teaches), read from its template and vocabulary.
  const chat::ChatOutputFormat& chat_output_format() const { return chat_output_format_; }
  // Sampling defaults from the model's generation_config.json (none for GGUF).
  const model::GenerationDefaults& generation_defaults() const { return generation_defaults_; }

  // INVALID_ARGUMENT naming the first id outside the vocabulary.
  absl::Status CheckTokenIds(std::span<const model::TokenId> ids, std::string_view field) const;

 private:
  RouterModel() = default;

  std::string id_;
  std::string served_name_;
  int32_t context_length_ = 0;
  std::unique_ptr<model::Tokenizer> tokenizer_;
  absl::StatusOr<model::ChatTemplate> chat_template_ = absl::UnknownError("not loaded");
  bool add_bos_ = false;  // the vocabulary asks for BOS
  chat::ChatOutputFormat chat_output_format_;
  model::GenerationDefaults generation_defaults_;
};

// A model as a request meets it: its router side, and the fingerprint of
// the weights its workers hold, which its block hashes chain from
// (server/model_catalog.h pairs them).
struct ServedModel {
  std::shared_ptr<const RouterModel> model;
  std::string fingerprint;
  // A LoRA adapter of the model the request runs under (its name, and the
  // digest of the weights its workers hold); empty: the base model.
  std::string lora;
  std::string lora_digest;

  // What block hashes are salted with ("name@digest"; empty for the base).
  std::string LoraIdentity() const { return lora.empty() ? std::string() : lora + "@" + lora_digest; }
};

}  // namespace kvfleet::router
