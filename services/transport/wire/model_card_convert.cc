#include "services/transport/wire/model_card_convert.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace kvfleet::transport {
namespace {

void SetIfPresent(const std::optional<model::TokenId>& id, void (v1::ModelVocabulary::*set)(int32_t),
                  v1::ModelVocabulary& out) {
  if (id.has_value()) (out.*set)(*id);
}

// The id when the field is set; an error naming it when it is outside the vocabulary.
absl::Status ReadSpecial(bool has, int32_t value, const char* name, int32_t vocab_size,
                         std::optional<model::TokenId>& out) {
  if (!has) return absl::OkStatus();
  if (value < 0 || value >= vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model description's vocabulary.", name, " is ", value, ", outside [0, ", vocab_size, ")"));
  }
  out = value;
  return absl::OkStatus();
}

}  // namespace

v1::ModelDescription ToProto(const model::ModelCard& card) {
  v1::ModelDescription d;
  d.set_model_id(card.id);
  d.set_model_fingerprint(card.fingerprint);
  d.set_served_name(card.served_name);
  d.set_max_context(card.context_length);
  const model::Vocabulary& v = card.vocabulary;
  v1::ModelVocabulary& out = *d.mutable_vocabulary();
  out.set_model(v.model);
  out.set_pre(v.pre);
  for (const std::string& p : v.pre_patterns) out.add_pre_patterns(p);
  out.set_ignore_merges(v.ignore_merges);
  out.mutable_tokens()->Reserve(static_cast<int>(v.tokens.size()));
  for (const std::string& t : v.tokens) out.add_tokens(t);
  out.mutable_scores()->Add(v.scores.begin(), v.scores.end());
  out.mutable_token_types()->Reserve(static_cast<int>(v.token_types.size()));
  for (model::TokenType t : v.token_types) out.add_token_types(static_cast<int32_t>(t));
  out.mutable_merges()->Reserve(static_cast<int>(v.merges.size()));
  for (const std::string& m : v.merges) out.add_merges(m);
  SetIfPresent(v.bos, &v1::ModelVocabulary::set_bos, out);
  SetIfPresent(v.eos, &v1::ModelVocabulary::set_eos, out);
  SetIfPresent(v.unk, &v1::ModelVocabulary::set_unk, out);
  SetIfPresent(v.pad, &v1::ModelVocabulary::set_pad, out);
  SetIfPresent(v.eot, &v1::ModelVocabulary::set_eot, out);
  out.set_add_bos(v.add_bos);
  out.set_add_eos(v.add_eos);
  out.set_add_space_prefix(v.add_space_prefix);
  out.set_chat_template(v.chat_template);
  const model::GenerationDefaults& g = card.generation_defaults;
  v1::ModelGenerationDefaults& defaults = *d.mutable_generation_defaults();
  defaults.mutable_eos_token_ids()->Add(g.eos_token_ids.begin(), g.eos_token_ids.end());
  if (g.temperature.has_value()) defaults.set_temperature(*g.temperature);
  if (g.top_p.has_value()) defaults.set_top_p(*g.top_p);
  if (g.top_k.has_value()) defaults.set_top_k(*g.top_k);
  return d;
}

absl::StatusOr<model::ModelCard> FromProto(const v1::ModelDescription& d) {
  if (d.model_id().empty()) return absl::InvalidArgumentError("the model description has no model_id");
  if (d.max_context() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model description of ", d.model_id(), " has max_context ", d.max_context()));
  }
  const v1::ModelVocabulary& in = d.vocabulary();
  const int32_t size = in.tokens_size();
  if (size == 0)
    return absl::InvalidArgumentError(absl::StrCat("model ", d.model_id(), " is described with no tokens"));
  if (in.token_types_size() != size || (in.scores_size() != 0 && in.scores_size() != size)) {
    return absl::InvalidArgumentError(absl::StrCat("model ", d.model_id(), " is described with ", size, " tokens but ",
                                                   in.token_types_size(), " token types and ", in.scores_size(),
                                                   " scores"));
  }
  model::ModelCard card{.id = d.model_id(),
                        .served_name = d.served_name(),
                        .fingerprint = d.model_fingerprint(),
                        .context_length = d.max_context()};
  model::Vocabulary& v = card.vocabulary;
  v.model = in.model();
  v.pre = in.pre();
  v.pre_patterns.assign(in.pre_patterns().begin(), in.pre_patterns().end());
  v.ignore_merges = in.ignore_merges();
  v.tokens.assign(in.tokens().begin(), in.tokens().end());
  v.scores.assign(in.scores().begin(), in.scores().end());
  v.token_types.reserve(size);
  for (int32_t t : in.token_types()) {
    if (t < static_cast<int32_t>(model::TokenType::kUndefined) || t > static_cast<int32_t>(model::TokenType::kByte)) {
      return absl::InvalidArgumentError(absl::StrCat("model ", d.model_id(), " is described with token type ", t));
    }
    v.token_types.push_back(static_cast<model::TokenType>(t));
  }
  v.merges.assign(in.merges().begin(), in.merges().end());
  if (absl::Status s = ReadSpecial(in.has_bos(), in.bos(), "bos", size, v.bos); !s.ok()) return s;
  if (absl::Status s = ReadSpecial(in.has_eos(), in.eos(), "eos", size, v.eos); !s.ok()) return s;
  if (absl::Status s = ReadSpecial(in.has_unk(), in.unk(), "unk", size, v.unk); !s.ok()) return s;
  if (absl::Status s = ReadSpecial(in.has_pad(), in.pad(), "pad", size, v.pad); !s.ok()) return s;
  if (absl::Status s = ReadSpecial(in.has_eot(), in.eot(), "eot", size, v.eot); !s.ok()) return s;
  v.add_bos = in.add_bos();
  v.add_eos = in.add_eos();
  v.add_space_prefix = in.add_space_prefix();
  v.chat_template = in.chat_template();
  const v1::ModelGenerationDefaults& g = d.generation_defaults();
  for (int32_t id : g.eos_token_ids()) {
    if (id < 0 || id >= size) {
      return absl::InvalidArgumentError(absl::StrCat("model ", d.model_id(), " is described with end-of-sequence id ",
                                                     id, ", outside [0, ", size, ")"));
    }
    card.generation_defaults.eos_token_ids.push_back(id);
  }
  if (g.has_temperature()) card.generation_defaults.temperature = g.temperature();
  if (g.has_top_p()) card.generation_defaults.top_p = g.top_p();
  if (g.has_top_k()) card.generation_defaults.top_k = g.top_k();
  return card;
}

std::vector<v1::ModelDescriptionChunk> ChunkModelCard(const model::ModelCard& card, int64_t chunk_bytes) {
  const std::string bytes = ToProto(card).SerializeAsString();
  const size_t step = static_cast<size_t>(std::max<int64_t>(chunk_bytes, 1));
  std::vector<v1::ModelDescriptionChunk> chunks;
  for (size_t at = 0; at < bytes.size() || chunks.empty(); at += step) {
    v1::ModelDescriptionChunk& c = chunks.emplace_back();
    c.set_data(bytes.substr(std::min(at, bytes.size()), step));
    if (at == 0) {
      c.set_total_bytes(static_cast<int64_t>(bytes.size()));
      c.set_model_fingerprint(card.fingerprint);
      c.set_card_digest(kvfleet::Sha256Hex(bytes));
    }
  }
  return chunks;
}

absl::Status ModelCardReader::Add(const v1::ModelDescriptionChunk& chunk) {
  if (total_bytes_ < 0) {
    if (chunk.total_bytes() <= 0 || chunk.total_bytes() > kMaxBytes) {
      return absl::InvalidArgumentError(absl::StrCat("a model description of ", chunk.total_bytes(),
                                                     " bytes announced; at most ", kMaxBytes, " are read"));
    }
    total_bytes_ = chunk.total_bytes();
    fingerprint_ = chunk.model_fingerprint();
    digest_ = chunk.card_digest();
    // What the announcement may claim is not trusted with memory up front.
    bytes_.reserve(static_cast<size_t>(std::min<int64_t>(total_bytes_, int64_t{8} << 20)));
  }
  if (static_cast<int64_t>(bytes_.size() + chunk.data().size()) > total_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model description runs past the ", total_bytes_, " bytes its first chunk announced"));
  }
  bytes_.append(chunk.data());
  return absl::OkStatus();
}

absl::StatusOr<model::ModelCard> ModelCardReader::Finish() const {
  if (total_bytes_ < 0) return absl::InvalidArgumentError("the model description came with no chunk");
  if (static_cast<int64_t>(bytes_.size()) != total_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("the model description ended after ", bytes_.size(), " of ", total_bytes_, " bytes"));
  }
  if (kvfleet::Sha256Hex(bytes_) != digest_) {
    return absl::DataLossError(absl::StrCat("the model description's SHA-256 is not the ", digest_,
                                            " its first chunk announced: its bytes changed on the way"));
  }
  v1::ModelDescription d;
  if (!d.ParseFromString(bytes_)) return absl::InvalidArgumentError("the model description does not parse");
  if (d.model_fingerprint() != fingerprint_) {
    return absl::InvalidArgumentError(absl::StrCat("the model description is of fingerprint '", d.model_fingerprint(),
                                                   "', not the '", fingerprint_, "' its first chunk announced"));
  }
  return FromProto(d);
}

}  // namespace kvfleet::transport
