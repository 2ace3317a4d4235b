#include "model/gguf/gguf_vocabulary.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/gguf/gguf_file.h"

namespace kvfleet::model {
namespace {

absl::Status ReadOptionalId(const GgufFile& file, const std::string& key, int32_t vocab_size,
                            std::optional<TokenId>& out) {
  if (!file.Has(key)) return absl::OkStatus();
  ASSIGN_OR_RETURN(int64_t id, file.GetInt(key));
  if (id < 0 || id >= vocab_size) {
    // Some converters write -1 or an out-of-range id to mean "none".
    return absl::OkStatus();
  }
  out = static_cast<TokenId>(id);
  return absl::OkStatus();
}

absl::Status ReadOptionalBool(const GgufFile& file, const std::string& key, bool& out) {
  if (!file.Has(key)) return absl::OkStatus();
  ASSIGN_OR_RETURN(out, file.GetBool(key));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Vocabulary> ReadGgufVocabulary(const GgufFile& file) {
  Vocabulary v;
  ASSIGN_OR_RETURN(v.model, file.GetString("tokenizer.ggml.model"));
  if (v.model != "gpt2" && v.model != "llama") {
    return absl::UnimplementedError(absl::StrCat(file.path(), ": tokenizer model '", v.model,
                                                 "' (metadata 'tokenizer.ggml.model') is not supported; "
                                                 "supported: gpt2 (byte-level BPE), llama (SentencePiece BPE)"));
  }
  if (file.Has("tokenizer.ggml.pre")) {
    ASSIGN_OR_RETURN(v.pre, file.GetString("tokenizer.ggml.pre"));
  } else {
    v.pre = "default";
  }
  ASSIGN_OR_RETURN(v.tokens, file.GetStringArray("tokenizer.ggml.tokens"));
  if (v.tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": metadata 'tokenizer.ggml.tokens' is empty"));
  }
  const size_t n = v.tokens.size();
  if (file.Has("tokenizer.ggml.scores")) {
    ASSIGN_OR_RETURN(v.scores, file.GetFloatArray("tokenizer.ggml.scores"));
    if (v.scores.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(file.path(), ": metadata 'tokenizer.ggml.scores' has ",
                                                     v.scores.size(), " entries for ", n, " tokens"));
    }
  }
  v.token_types.assign(n, TokenType::kNormal);
  if (file.Has("tokenizer.ggml.token_type")) {
    ASSIGN_OR_RETURN(std::vector<int64_t> types, file.GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(file.path(), ": metadata 'tokenizer.ggml.token_type' has ",
                                                     types.size(), " entries for ", n, " tokens"));
    }
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < 0 || types[i] > static_cast<int64_t>(TokenType::kByte)) {
        return absl::InvalidArgumentError(absl::StrCat(file.path(), ": metadata 'tokenizer.ggml.token_type'[", i,
                                                       "] = ", types[i], " is not a token type"));
      }
      v.token_types[i] = static_cast<TokenType>(types[i]);
    }
  }
  if (file.Has("tokenizer.ggml.merges")) {
    ASSIGN_OR_RETURN(v.merges, file.GetStringArray("tokenizer.ggml.merges"));
  } else if (v.model == "gpt2") {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path(), ": metadata 'tokenizer.ggml.merges' is missing (required by a gpt2 tokenizer)"));
  }
  const int32_t size = v.size();
  RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.bos_token_id", size, v.bos));
  RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.eos_token_id", size, v.eos));
  RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.unknown_token_id", size, v.unk));
  RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.padding_token_id", size, v.pad));
  RETURN_IF_ERROR(ReadOptionalId(file, "tokenizer.ggml.eot_token_id", size, v.eot));
  RETURN_IF_ERROR(ReadOptionalBool(file, "tokenizer.ggml.add_bos_token", v.add_bos));
  RETURN_IF_ERROR(ReadOptionalBool(file, "tokenizer.ggml.add_eos_token", v.add_eos));
  // SentencePiece vocabularies add a leading space unless told otherwise;
  // many Llama 2 GGUFs omit the key (llama.cpp defaults it the same way).
  v.add_space_prefix = v.model == "llama";
  RETURN_IF_ERROR(ReadOptionalBool(file, "tokenizer.ggml.add_space_prefix", v.add_space_prefix));
  if (file.Has("tokenizer.chat_template")) {
    ASSIGN_OR_RETURN(v.chat_template, file.GetString("tokenizer.chat_template"));
  }
  return v;
}

}  // namespace kvfleet::model
