// tokenize_dump: runs kvfleet's tokenizer and chat templates over inputs
// written by the Python reference scripts (tokenizer_*.py), and writes what
// kvfleet produced so the scripts can compare it with their oracles. Inputs
// and outputs are hex, one item per line, so any bytes survive the trip.
//
//   tokenize_dump encode --model (M.gguf | DIR) [--pre llama-bpe] [--no-parse-special] --input in.hex --output out.tsv
//     DIR: a Hugging Face checkpoint, or a directory with its tokenizer.json
//     out line: <comma-separated ids> TAB <hex of Decode(ids)> TAB <hex of streamed deltas + Finish>
//   tokenize_dump chat (--model M.gguf | --template T.jinja [--bos TEXT]) --input in.txt --output out.txt
//     in line:  <0|1 add_generation_prompt> SP <role>:<hex content> SP ...
//     out line: <hex of the rendered prompt>, or "ERROR <status code> <message>"
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf/gguf_vocabulary.h"
#include "model/hf/hf_vocabulary.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/incremental_detokenizer.h"
#include "model/tokenizer/tokenizer.h"

namespace kvfleet::model {
namespace {

using Flags = std::map<std::string, std::string>;

absl::StatusOr<std::string> FromHex(const std::string& hex) {
  if (hex.size() % 2 != 0) return absl::InvalidArgumentError("odd-length hex line");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

absl::StatusOr<Vocabulary> LoadVocabulary(const Flags& flags) {
  auto it = flags.find("model");
  if (it == flags.end()) return absl::InvalidArgumentError("--model is required");
  Vocabulary vocab;
  if (std::filesystem::is_directory(it->second)) {
    // A checkpoint directory, or a directory holding only tokenizer.json
    // and tokenizer_config.json.
    ASSIGN_OR_RETURN(vocab, ReadHfVocabulary(it->second));
  } else {
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(it->second));
    ASSIGN_OR_RETURN(vocab, ReadGgufVocabulary(*file));
  }
  // Lets one vocabulary stand in for a model family whose pre-tokenizer it
  // was not trained with (the reference does the same on its side).
  if (auto pre = flags.find("pre"); pre != flags.end()) vocab.pre = pre->second;
  return vocab;
}

absl::StatusOr<std::string> Stream(const Tokenizer& tok, const std::vector<TokenId>& ids) {
  IncrementalDetokenizer detok(tok);
  std::string text;
  for (TokenId id : ids) {
    ASSIGN_OR_RETURN(std::string delta, detok.Push(id));
    text += delta;
  }
  return text + detok.Finish();
}

absl::Status RunEncode(const Flags& flags) {
  ASSIGN_OR_RETURN(Vocabulary vocab, LoadVocabulary(flags));
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, CreateTokenizer(vocab));
  ASSIGN_OR_RETURN(std::vector<std::string> lines, ReadLines(flags.at("input")));
  std::vector<std::string> texts;
  for (const std::string& line : lines) {
    ASSIGN_OR_RETURN(std::string text, FromHex(line));
    texts.push_back(std::move(text));
  }
  const EncodeOptions options{.add_special = flags.count("add-special") > 0,
                              .parse_special = flags.count("no-parse-special") == 0};
  std::vector<std::vector<TokenId>> encoded;
  size_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& text : texts) {
    ASSIGN_OR_RETURN(std::vector<TokenId> ids, tok->Encode(text, options));
    encoded.push_back(std::move(ids));
    bytes += text.size();
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::ofstream out(flags.at("output"));
  for (const std::vector<TokenId>& ids : encoded) {
    std::string joined;
    for (size_t i = 0; i < ids.size(); ++i) absl::StrAppend(&joined, i ? "," : "", ids[i]);
    ASSIGN_OR_RETURN(std::string decoded, tok->Decode(ids));
    ASSIGN_OR_RETURN(std::string streamed, Stream(*tok, ids));
    out << joined << '\t' << ToHex(decoded) << '\t' << ToHex(streamed) << '\n';
  }
  std::printf("tokenize_dump: encoded %zu strings (%zu bytes) in %.1f ms\n", texts.size(), bytes, ms);
  return out ? absl::OkStatus() : absl::InternalError("cannot write " + flags.at("output"));
}

absl::StatusOr<ChatTemplate> LoadTemplate(const Flags& flags) {
  if (flags.count("template")) {
    std::ifstream in(flags.at("template"), std::ios::binary);
    if (!in) return absl::NotFoundError("cannot read " + flags.at("template"));
    std::stringstream source;
    source << in.rdbuf();
    ChatTemplateOptions options;
    if (flags.count("bos")) options.bos_token = flags.at("bos");
    return ChatTemplate::FromTemplateSource(source.str(), options);
  }
  ASSIGN_OR_RETURN(Vocabulary vocab, LoadVocabulary(flags));
  return ChatTemplate::FromVocabulary(vocab);
}

std::string ErrorLine(const absl::Status& status) {
  std::string message(status.message());
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  return absl::StrCat("ERROR ", absl::StatusCodeToString(status.code()), " ", message);
}

absl::Status RunChat(const Flags& flags) {
  ASSIGN_OR_RETURN(std::vector<std::string> lines, ReadLines(flags.at("input")));
  std::ofstream out(flags.at("output"));
  absl::StatusOr<ChatTemplate> chat = LoadTemplate(flags);
  for (const std::string& line : lines) {
    if (!chat.ok()) {
      out << ErrorLine(chat.status()) << '\n';
      continue;
    }
    std::istringstream fields(line);
    std::string gen, field;
    fields >> gen;
    std::vector<ChatMessage> messages;
    while (fields >> field) {
      const size_t colon = field.find(':');
      if (colon == std::string::npos) return absl::InvalidArgumentError("bad message field: " + field);
      ASSIGN_OR_RETURN(std::string content, FromHex(field.substr(colon + 1)));
      messages.push_back({field.substr(0, colon), std::move(content)});
    }
    absl::StatusOr<std::string> prompt = chat->Apply(messages, gen == "1");
    out << (prompt.ok() ? ToHex(*prompt) : ErrorLine(prompt.status())) << '\n';
  }
  std::printf("tokenize_dump: rendered %zu chats\n", lines.size());
  return out ? absl::OkStatus() : absl::InternalError("cannot write " + flags.at("output"));
}

absl::Status Main(int argc, char** argv) {
  if (argc < 2) return absl::InvalidArgumentError("usage: tokenize_dump encode|chat --input F --output F ...");
  const std::string mode = argv[1];
  Flags flags;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) return absl::InvalidArgumentError("unexpected argument " + arg);
    arg = arg.substr(2);
    const bool is_switch = arg == "no-parse-special" || arg == "add-special";
    if (!is_switch && i + 1 >= argc) return absl::InvalidArgumentError("--" + arg + " needs a value");
    flags[arg] = is_switch ? "1" : argv[++i];
  }
  if (!flags.count("input") || !flags.count("output")) {
    return absl::InvalidArgumentError("--input and --output are required");
  }
  if (mode == "encode") return RunEncode(flags);
  if (mode == "chat") return RunChat(flags);
  return absl::InvalidArgumentError("unknown mode " + mode + " (encode, chat)");
}

}  // namespace
}  // namespace kvfleet::model

int main(int argc, char** argv) {
  absl::Status status = kvfleet::model::Main(argc, argv);
  if (!status.ok()) {
    std::cerr << "tokenize_dump: " << status << "\n";
    return 1;
  }
  return 0;
}
