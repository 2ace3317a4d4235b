// A Hugging Face checkpoint's JSON from an untrusted source. The first byte
// picks the file:
//   even: config.json, read as a bare config (HfSource::OpenConfig) and
//         parsed by its architecture into a validated ModelConfig;
//   odd:  tokenizer.json (the rest of the input) with a tokenizer_config.json
//         (a length-prefixed string before it), read into a vocabulary,
//         which then tokenizes and detokenizes a fixed text.
// Properties: an accepted config has the shape the kernels rely on (what
// ModelConfig::Validate promises); an accepted vocabulary only ever yields
// ids inside it.
#include <string>
#include <vector>

#include "model/hf/hf_source.h"
#include "model/hf/hf_vocabulary.h"
#include "model/hf/json_config_reader.h"
#include "model/model.h"
#include "model/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/memory_file.h"

namespace kvfleet::fuzz {
namespace {

void Config(const std::string& text) {
  MemoryFile file(text);
  auto source = model::HfSource::OpenConfig(file.path());
  if (!source.ok()) return;
  auto m = model::Model::FromSource(std::move(*source), {.weights = false, .vocabulary = false});
  if (!m.ok()) {
    Check(!m.status().message().empty(), "a refusal without a reason");
    return;
  }
  const model::ModelConfig& c = (*m)->config();
  Check(c.num_layers > 0 && static_cast<int64_t>(c.layers.size()) == c.num_layers, "layers");
  Check(c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, "heads");
  Check(c.head_dim > 0 && c.head_dim % 8 == 0 && c.hidden_size > 0 && c.vocab_size > 0, "sizes");
  Check(!c.ropes.empty(), "no RoPE");
  for (const model::LayerAttention& l : c.layers) {
    Check(l.window >= 0 && l.rope >= 0 && static_cast<size_t>(l.rope) < c.ropes.size(), "a layer's window or rope");
  }
}

void Tokenizer(FuzzInput& in) {
  const absl::StatusOr<nlohmann::json> config = model::ParseJson(in.String(255), "tokenizer_config.json");
  const absl::StatusOr<nlohmann::json> tokenizer = model::ParseJson(in.Rest(), "tokenizer.json");
  if (!tokenizer.ok()) return;
  auto vocab = model::VocabularyFromTokenizerJson(*tokenizer, config.ok() ? *config : nlohmann::json::object(),
                                                  "fuzz/tokenizer.json");
  if (!vocab.ok()) return;
  auto tok = model::CreateTokenizer(*vocab);
  if (!tok.ok()) return;
  for (bool special : {false, true}) {
    const absl::StatusOr<std::vector<model::TokenId>> ids =
        (*tok)->Encode("Hello, world! 12 345 <|im_start|> \xe2\x96\x81x\n", {.parse_special = special});
    if (!ids.ok()) continue;
    for (model::TokenId id : *ids) Check(id >= 0 && id < vocab->size(), "an id outside the vocabulary");
    (void)(*tok)->Decode(*ids);
  }
}

}  // namespace
}  // namespace kvfleet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvfleet::fuzz::FuzzInput in(data, size);
  if ((in.Byte() & 1) == 0) {
    kvfleet::fuzz::Config(in.Rest());
  } else {
    kvfleet::fuzz::Tokenizer(in);
  }
  return 0;
}
