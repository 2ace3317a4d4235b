// What the front of a cluster needs of a model, without its weights: its
// names, its context length, its tokenizer's inputs (the vocabulary, with
// the chat template it is served with) and its publisher's generation
// defaults. A router builds its tokenizer and chat template from a card:
// one it read from a model file, or one a worker sent it (the Worker
// service's DescribeModel), so a router needs no model file.
//
//   model::ModelCard card = model::CardOf(*model, "SmolLM2-135M-Instruct", fingerprint);
#pragma once

#include <cstdint>
#include <string>

#include "model/model.h"
#include "model/source/generation_defaults.h"
#include "model/vocabulary.h"

namespace kvfleet::model {

struct ModelCard {
  std::string id;           // what block hashes chain from, with the fingerprint
  std::string served_name;  // what clients call it (--served-model-name); empty: the id
  std::string fingerprint;  // model_fingerprint.h's; empty: not known
  int32_t context_length = 0;
  Vocabulary vocabulary;  // its chat_template is the one served
  GenerationDefaults generation_defaults;
};

// A loaded model's card (its weights need not be loaded).
ModelCard CardOf(const Model& model, std::string id, std::string fingerprint = "");

}  // namespace kvfleet::model
