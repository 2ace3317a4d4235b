#include "tools/hf_export/tokenizer_json.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/tokenizer/pre_tokenizer.h"

namespace kvfleet::tools {
namespace {

using model::TokenId;
using model::TokenType;
using Json = nlohmann::ordered_json;

constexpr char kSpaceMark[] = "\u2581";

Json AddedTokens(const model::Vocabulary& v) {
  Json added = Json::array();
  for (TokenId i = 0; i < v.size(); ++i) {
    const TokenType t = v.token_types[static_cast<size_t>(i)];
    if (t != TokenType::kControl && t != TokenType::kUserDefined && t != TokenType::kUnknown) continue;
    added.push_back({{"id", i},
                     {"content", v.tokens[static_cast<size_t>(i)]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", t != TokenType::kUserDefined}});
  }
  return added;
}

// In id order, as Hugging Face writes it. Appended to the ordered object
// directly: its operator[] searches linearly, quadratic over 262,144 pieces.
// A piece spelled twice keeps its first id.
Json Vocab(const model::Vocabulary& v) {
  Json vocab = Json::object();
  Json::object_t& entries = vocab.get_ref<Json::object_t&>();
  absl::flat_hash_set<std::string_view> seen;
  for (TokenId i = 0; i < v.size(); ++i) {
    const std::string& piece = v.tokens[static_cast<size_t>(i)];
    if (seen.insert(piece).second) entries.emplace_back(piece, i);
  }
  return vocab;
}

Json ByteLevel(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", use_regex}};
}

absl::StatusOr<Json> ByteLevelTokenizer(const model::Vocabulary& v) {
  bool ignore_merges = false;
  ASSIGN_OR_RETURN(std::vector<std::string> patterns,
                   model::PreTokenizer::NamedPatterns(v.pre.empty() ? "default" : v.pre, &ignore_merges));
  Json pre = Json::array();
  for (const std::string& p : patterns) {
    pre.push_back({{"type", "Split"}, {"pattern", {{"Regex", p}}}, {"behavior", "Isolated"}, {"invert", false}});
  }
  pre.push_back(ByteLevel(false));
  Json merges = Json::array();
  for (const std::string& m : v.merges) {
    const size_t sp = m.find(' ', 1);
    merges.push_back(Json::array({m.substr(0, sp), m.substr(sp + 1)}));
  }
  return Json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", AddedTokens(v)},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", pre}}},
              {"post_processor", nullptr},
              {"decoder", ByteLevel(false)},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", ignore_merges},
                {"vocab", Vocab(v)},
                {"merges", merges}}}};
}

// transformers' SentencePieceExtractor: every split of a piece into two
// pieces is a merge, ranked by the whole piece's score (highest first), then
// by the halves' ids.
Json SynthesizedMerges(const model::Vocabulary& v) {
  std::map<std::string, TokenId, std::less<>> id_of;
  for (TokenId i = 0; i < v.size(); ++i) id_of.emplace(v.tokens[static_cast<size_t>(i)], i);
  std::vector<std::tuple<float, TokenId, TokenId>> merges;  // (score, left id, right id)
  for (TokenId i = 0; i < v.size(); ++i) {
    if (v.token_types[static_cast<size_t>(i)] != TokenType::kNormal) continue;
    const std::string& piece = v.tokens[static_cast<size_t>(i)];
    for (size_t cut = 1; cut < piece.size(); ++cut) {
      const auto l = id_of.find(std::string_view(piece).substr(0, cut));
      const auto r = id_of.find(std::string_view(piece).substr(cut));
      if (l != id_of.end() && r != id_of.end()) merges.emplace_back(v.scores[static_cast<size_t>(i)], l->second, r->second);
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const auto& a, const auto& b) {
    if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) > std::get<0>(b);
    return std::tie(std::get<1>(a), std::get<2>(a)) < std::tie(std::get<1>(b), std::get<2>(b));
  });
  Json out = Json::array();
  for (const auto& [score, l, r] : merges) {
    out.push_back(Json::array({v.tokens[static_cast<size_t>(l)], v.tokens[static_cast<size_t>(r)]}));
  }
  return out;
}

Json SentencePieceTokenizer(const model::Vocabulary& v) {
  Json normalizers = Json::array();
  if (v.add_space_prefix) normalizers.push_back({{"type", "Prepend"}, {"prepend", kSpaceMark}});
  normalizers.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpaceMark}});
  Json decoders = Json::array({{{"type", "Replace"}, {"pattern", {{"String", kSpaceMark}}}, {"content", " "}},
                               {{"type", "ByteFallback"}},
                               {{"type", "Fuse"}}});
  if (v.add_space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  Json post = nullptr;
  if (v.add_bos && v.bos.has_value()) {
    const std::string& bos = v.tokens[static_cast<size_t>(*v.bos)];
    post = {{"type", "TemplateProcessing"},
            {"single", Json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
            {"pair", Json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                  {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
                                  {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
            {"special_tokens", {{bos, {{"id", bos}, {"ids", Json::array({*v.bos})}, {"tokens", Json::array({bos})}}}}}};
  }
  return Json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", AddedTokens(v)},
              {"normalizer", {{"type", "Sequence"}, {"normalizers", normalizers}}},
              {"pre_tokenizer", nullptr},
              {"post_processor", post},
              {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", v.unk.has_value() ? Json(v.tokens[static_cast<size_t>(*v.unk)]) : Json(nullptr)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false},
                {"vocab", Vocab(v)},
                {"merges", SynthesizedMerges(v)}}}};
}

}  // namespace

absl::StatusOr<nlohmann::ordered_json> TokenizerJson(const model::Vocabulary& vocab) {
  if (vocab.model == "gpt2") return ByteLevelTokenizer(vocab);
  if (vocab.model == "llama") {
    if (vocab.scores.size() != vocab.tokens.size()) {
      return absl::InvalidArgumentError("a SentencePiece vocabulary without scores cannot give merges");
    }
    return SentencePieceTokenizer(vocab);
  }
  return absl::UnimplementedError(absl::StrCat("tokenizer model '", vocab.model, "' cannot be exported"));
}

nlohmann::ordered_json TokenizerConfigJson(const model::Vocabulary& v, int64_t context_length) {
  Json config{{"tokenizer_class", "PreTrainedTokenizerFast"},
              {"model_max_length", context_length},
              {"add_bos_token", v.add_bos},
              {"add_eos_token", v.add_eos},
              {"clean_up_tokenization_spaces", false}};
  const auto name = [&](const char* key, const std::optional<TokenId>& id) {
    if (id.has_value()) config[key] = v.tokens[static_cast<size_t>(*id)];
  };
  name("bos_token", v.bos);
  name("eos_token", v.eos);
  name("unk_token", v.unk);
  name("pad_token", v.pad);
  if (!v.chat_template.empty()) config["chat_template"] = v.chat_template;
  return config;
}

}  // namespace kvfleet::tools
