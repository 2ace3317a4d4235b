#include "model/hf/hf_vocabulary.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/hf/json_config_reader.h"
#include "model/tokenizer/pre_tokenizer.h"

namespace kvfleet::model {
namespace {

constexpr char kSpaceMark[] = "\u2581";  // ▁

class Reader {
 public:
  Reader(const nlohmann::json& tok, const nlohmann::json& config, std::string origin)
      : tok_(tok), config_(config), origin_(std::move(origin)) {}

  absl::StatusOr<Vocabulary> Read();

 private:
  absl::Status Refuse(const std::string& field, const std::string& what, const std::string& supported) const {
    return absl::UnimplementedError(absl::StrCat(origin_, ": ", field, " ", what, " is not supported (supported: ",
                                                 supported, ")"));
  }
  absl::Status Malformed(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": ", what));
  }
  absl::Status ReadModel(Vocabulary& v);
  absl::Status ReadPreTokenizer(const nlohmann::json& pre, Vocabulary& v, bool* byte_level, bool* metaspace);
  absl::Status ReadNormalizer(const nlohmann::json& norm, bool* spaces_marked, bool* prefix);
  absl::Status ReadAddedTokens(Vocabulary& v);
  absl::Status ReadSpecialIds(Vocabulary& v);
  void ScoresFromMerges(Vocabulary& v) const;

  const nlohmann::json& tok_;
  const nlohmann::json& config_;
  std::string origin_;
  std::vector<std::pair<std::string, std::string>> merges_;
};

// A merge entry: "a b" (older files) or ["a", "b"].
bool ParseMerge(const nlohmann::json& m, std::pair<std::string, std::string>* out) {
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ', 1);
    if (sp == std::string::npos) return false;
    *out = {s.substr(0, sp), s.substr(sp + 1)};
    return true;
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    *out = {m[0].get<std::string>(), m[1].get<std::string>()};
    return true;
  }
  return false;
}

std::string TypeOf(const nlohmann::json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "?";
}

// A Split pattern: {"Regex": R} or {"String": S} (escaped into a regex).
absl::StatusOr<std::string> SplitPattern(const nlohmann::json& split) {
  const nlohmann::json& p = split.value("pattern", nlohmann::json());
  if (p.contains("Regex") && p["Regex"].is_string()) return p["Regex"].get<std::string>();
  if (p.contains("String") && p["String"].is_string()) {
    std::string out;
    for (char c : p["String"].get<std::string>()) {
      if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
      out.push_back(c);
    }
    return out;
  }
  return absl::InvalidArgumentError("a Split without a Regex or String pattern");
}

absl::Status Reader::ReadModel(Vocabulary& v) {
  const nlohmann::json& model = tok_.value("model", nlohmann::json());
  const std::string type = TypeOf(model);
  if (type != "BPE") return Refuse("model.type", type, "BPE");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && !(model[key].is_string() && model[key].get<std::string>().empty())) {
      return Refuse(absl::StrCat("model.", key), model[key].dump(), "none");
    }
  }
  const nlohmann::json& vocab = model.value("vocab", nlohmann::json());
  if (!vocab.is_object() || vocab.empty()) return Malformed("model.vocab is missing or empty");
  int64_t max_id = -1;
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (int64_t{1} << 24)) {
      return Malformed(absl::StrCat("model.vocab['", text, "'] = ", id.dump(), " is not a token id"));
    }
    max_id = std::max(max_id, id.get<int64_t>());
  }
  v.tokens.assign(static_cast<size_t>(max_id + 1), std::string());
  v.token_types.assign(v.tokens.size(), TokenType::kUnused);
  for (const auto& [text, id] : vocab.items()) {
    v.tokens[static_cast<size_t>(id.get<int64_t>())] = text;
    v.token_types[static_cast<size_t>(id.get<int64_t>())] = TokenType::kNormal;
  }
  for (const auto& m : model.value("merges", nlohmann::json::array())) {
    std::pair<std::string, std::string> merge;
    if (!ParseMerge(m, &merge)) return Malformed(absl::StrCat("model.merges has an entry ", m.dump()));
    merges_.push_back(std::move(merge));
  }
  v.ignore_merges = model.value("ignore_merges", false);
  return absl::OkStatus();
}

absl::Status Reader::ReadPreTokenizer(const nlohmann::json& pre, Vocabulary& v, bool* byte_level, bool* metaspace) {
  if (pre.is_null()) return absl::OkStatus();
  const std::string type = TypeOf(pre);
  const std::string supported = "ByteLevel, Split (isolated), Digits, Metaspace, and a Sequence of them";
  if (type == "Sequence") {
    for (const auto& p : pre.value("pretokenizers", nlohmann::json::array())) {
      RETURN_IF_ERROR(ReadPreTokenizer(p, v, byte_level, metaspace));
    }
  } else if (type == "ByteLevel") {
    *byte_level = true;
    if (pre.value("add_prefix_space", false)) return Refuse("pre_tokenizer ByteLevel", "add_prefix_space true", "false");
    if (pre.value("use_regex", true)) v.pre_patterns.emplace_back(PreTokenizer::Gpt2Pattern());
  } else if (type == "Split") {
    const std::string behavior = pre.value("behavior", "");
    if (behavior != "Isolated" || pre.value("invert", false)) {
      return Refuse("pre_tokenizer Split behavior", behavior, "Isolated, not inverted");
    }
    absl::StatusOr<std::string> pattern = SplitPattern(pre);
    if (!pattern.ok()) return Malformed(absl::StrCat("pre_tokenizer: ", pattern.status().message()));
    v.pre_patterns.push_back(*pattern);
  } else if (type == "Digits") {
    v.pre_patterns.push_back(pre.value("individual_digits", false) ? std::string(PreTokenizer::EachDigitPattern())
                                                                   : std::string(R"(\p{N}+)"));
  } else if (type == "Metaspace") {
    // SentencePiece-style: spaces as ▁, a prefix unless prepend_scheme says never.
    *metaspace = true;
    v.add_space_prefix = pre.value("prepend_scheme", std::string("always")) != "never" &&
                         pre.value("add_prefix_space", true);
    if (pre.value("split", false)) return Refuse("pre_tokenizer Metaspace", "split true", "split false");
  } else {
    return Refuse("pre_tokenizer", type, supported);
  }
  return absl::OkStatus();
}

absl::Status Reader::ReadNormalizer(const nlohmann::json& norm, bool* spaces_marked, bool* prefix) {
  if (norm.is_null()) return absl::OkStatus();
  const std::string type = TypeOf(norm);
  if (type == "Sequence") {
    for (const auto& n : norm.value("normalizers", nlohmann::json::array())) {
      RETURN_IF_ERROR(ReadNormalizer(n, spaces_marked, prefix));
    }
  } else if (type == "NFC") {
    // Not applied (llama.cpp does not either); see the header.
  } else if (type == "Replace") {
    const nlohmann::json& p = norm.value("pattern", nlohmann::json());
    if (!(p.contains("String") && p["String"] == " " && norm.value("content", "") == kSpaceMark)) {
      return Refuse("normalizer Replace", norm.dump(), "\" \" -> \"\u2581\"");
    }
    *spaces_marked = true;
  } else if (type == "Prepend") {
    if (norm.value("prepend", "") != kSpaceMark) return Refuse("normalizer Prepend", norm.dump(), "\"\u2581\"");
    *prefix = true;
  } else {
    return Refuse("normalizer", type, "NFC, Replace(\" \", \"\u2581\"), Prepend(\"\u2581\") and a Sequence of them");
  }
  return absl::OkStatus();
}

absl::Status Reader::ReadAddedTokens(Vocabulary& v) {
  for (const auto& t : tok_.value("added_tokens", nlohmann::json::array())) {
    if (!t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") || !t["content"].is_string()) {
      return Malformed(absl::StrCat("added_tokens has an entry ", t.dump().substr(0, 100)));
    }
    const int64_t id = t["id"].get<int64_t>();
    if (id < 0 || id > (int64_t{1} << 24)) return Malformed(absl::StrCat("added token id ", id));
    if (static_cast<size_t>(id) >= v.tokens.size()) {
      v.tokens.resize(static_cast<size_t>(id) + 1);
      v.token_types.resize(v.tokens.size(), TokenType::kUnused);
    }
    v.tokens[static_cast<size_t>(id)] = t["content"].get<std::string>();
    v.token_types[static_cast<size_t>(id)] = t.value("special", false) ? TokenType::kControl : TokenType::kUserDefined;
  }
  // Ids no entry names: placeholders that never match text.
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i].empty()) v.tokens[i] = absl::StrCat("<|kvfleet_unused_", i, "|>");
  }
  return absl::OkStatus();
}

// tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}.
std::optional<std::string> TokenText(const nlohmann::json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const nlohmann::json& t = config[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) return t["content"].get<std::string>();
  return std::nullopt;
}

absl::Status Reader::ReadSpecialIds(Vocabulary& v) {
  std::map<std::string, TokenId> by_text;
  for (TokenId i = 0; i < v.size(); ++i) by_text.emplace(v.tokens[static_cast<size_t>(i)], i);
  const auto id_of = [&](const std::optional<std::string>& text, std::optional<TokenId>* out) -> absl::Status {
    if (!text.has_value()) return absl::OkStatus();
    const auto it = by_text.find(*text);
    if (it == by_text.end()) return Malformed(absl::StrCat("tokenizer_config.json names token '", *text, "', which is not in the vocabulary"));
    *out = it->second;
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(id_of(TokenText(config_, "bos_token"), &v.bos));
  RETURN_IF_ERROR(id_of(TokenText(config_, "eos_token"), &v.eos));
  RETURN_IF_ERROR(id_of(TokenText(config_, "unk_token"), &v.unk));
  RETURN_IF_ERROR(id_of(TokenText(config_, "pad_token"), &v.pad));
  if (v.unk.has_value()) v.token_types[static_cast<size_t>(*v.unk)] = TokenType::kUnknown;
  // BOS: tokenizer_config's add_bos_token, else the post-processor's template
  // ("<bos> $A" adds it).
  if (config_.contains("add_bos_token") && config_["add_bos_token"].is_boolean()) {
    v.add_bos = config_["add_bos_token"].get<bool>();
  } else if (const nlohmann::json& post = tok_.value("post_processor", nlohmann::json()); TypeOf(post) == "TemplateProcessing") {
    const nlohmann::json& single = post.value("single", nlohmann::json::array());
    if (!single.empty() && single[0].contains("SpecialToken")) {
      RETURN_IF_ERROR(id_of(single[0]["SpecialToken"].value("id", std::string()), &v.bos));
      v.add_bos = v.bos.has_value();
    }
  }
  v.add_eos = config_.value("add_eos_token", false);
  return absl::OkStatus();
}

// SentencePiece-style BPE merges by piece score: a piece's score is minus
// the rank of the merge that makes it, so the highest-scoring pair is the
// earliest merge, as Hugging Face's BPE applies them.
void Reader::ScoresFromMerges(Vocabulary& v) const {
  std::map<std::string, TokenId> by_text;
  for (TokenId i = 0; i < v.size(); ++i) by_text.emplace(v.tokens[static_cast<size_t>(i)], i);
  v.scores.assign(v.tokens.size(), -1e9f);
  for (size_t rank = 0; rank < merges_.size(); ++rank) {
    const auto it = by_text.find(merges_[rank].first + merges_[rank].second);
    if (it != by_text.end() && v.scores[static_cast<size_t>(it->second)] == -1e9f) {
      v.scores[static_cast<size_t>(it->second)] = -static_cast<float>(rank);
    }
  }
}

absl::StatusOr<Vocabulary> Reader::Read() {
  Vocabulary v;
  RETURN_IF_ERROR(ReadModel(v));
  bool byte_level = false, metaspace = false, spaces_marked = false, prefix = false;
  RETURN_IF_ERROR(ReadPreTokenizer(tok_.value("pre_tokenizer", nlohmann::json()), v, &byte_level, &metaspace));
  RETURN_IF_ERROR(ReadNormalizer(tok_.value("normalizer", nlohmann::json()), &spaces_marked, &prefix));
  if (byte_level) {
    v.model = "gpt2";
    v.pre = "tokenizer.json";
    for (const auto& [a, b] : merges_) v.merges.push_back(absl::StrCat(a, " ", b));
  } else if (spaces_marked || metaspace) {
    v.model = "llama";
    if (spaces_marked) v.add_space_prefix = prefix;
    ScoresFromMerges(v);
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      const std::string& t = v.tokens[i];
      if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>') v.token_types[i] = TokenType::kByte;
    }
  } else {
    return Refuse("tokenizer", "(neither byte-level nor SentencePiece-style)",
                  "BPE with a ByteLevel pre-tokenizer, or with spaces as \u2581 and byte fallback");
  }
  RETURN_IF_ERROR(ReadAddedTokens(v));
  if (v.model == "llama") v.scores.resize(v.tokens.size(), -1e9f);
  RETURN_IF_ERROR(ReadSpecialIds(v));
  if (config_.contains("chat_template")) {
    const nlohmann::json& t = config_["chat_template"];
    if (t.is_string()) {
      v.chat_template = t.get<std::string>();
    } else if (t.is_array()) {  // [{"name": "default", "template": ...}, ...]
      for (const auto& named : t) {
        if (named.value("name", "") == "default" && named.contains("template")) v.chat_template = named["template"];
      }
    }
  }
  return v;
}

}  // namespace

absl::StatusOr<Vocabulary> VocabularyFromTokenizerJson(const nlohmann::json& tokenizer,
                                                        const nlohmann::json& tokenizer_config,
                                                        const std::string& origin) {
  // The reader walks a tree of typed fields; one of the wrong JSON type
  // (a number where an object belongs) throws inside nlohmann's accessors.
  try {
    return Reader(tokenizer, tokenizer_config, origin).Read();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": a field has the wrong JSON type (", e.what(),
                                                    "); is it a Hugging Face tokenizers file?"));
  }
}

absl::StatusOr<Vocabulary> ReadHfVocabulary(const std::string& dir) {
  const std::filesystem::path d(dir);
  ASSIGN_OR_RETURN(nlohmann::json tok, ReadJsonFile((d / "tokenizer.json").string()));
  nlohmann::json config = nlohmann::json::object();
  if (std::filesystem::exists(d / "tokenizer_config.json")) {
    ASSIGN_OR_RETURN(config, ReadJsonFile((d / "tokenizer_config.json").string()));
  }
  // Newer checkpoints keep the template in a file of its own.
  if (!config.contains("chat_template") && std::filesystem::exists(d / "chat_template.jinja")) {
    std::ifstream in(d / "chat_template.jinja");
    std::stringstream text;
    text << in.rdbuf();
    config["chat_template"] = text.str();
  }
  return VocabularyFromTokenizerJson(tok, config, (d / "tokenizer.json").string());
}

}  // namespace kvfleet::model
