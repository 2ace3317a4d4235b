#include "tools/tiny_model/tiny_vocabulary.h"

#include <string>
#include <utility>

namespace kvfleet::tools {
namespace {

// GPT-2's reversible byte → printable code point map, as UTF-8 strings.
std::vector<std::string> ByteSymbols() {
  std::vector<std::string> out(256);
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const int cp = printable ? b : 256 + extra++;
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    out[b] = s;
  }
  return out;
}

}  // namespace

TinyVocabulary MakeTinyVocabulary() {
  TinyVocabulary v;
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.push_back(special);
    v.token_types.push_back(3);  // control
  }
  for (const std::string& s : ByteSymbols()) {
    v.tokens.push_back(s);
    v.token_types.push_back(1);  // normal
  }
  const std::string sp = "\xC4\xA0";  // "Ġ", the byte-level symbol of a space
  const std::pair<std::string, std::string> merges[] = {
      {sp, "t"}, {"h", "e"}, {"i", "n"}, {"e", "r"}, {"a", "n"}, {sp, "a"}, {"o", "n"}, {"r", "e"},
      {sp + "t", "he"}, {sp, "s"}, {"e", "n"}, {"a", "t"}, {"o", "r"}, {sp, "w"}, {sp, "c"}, {"i", "s"},
      {sp, "o"}, {sp, "b"}, {"e", "s"}, {sp, "f"}, {sp, "p"}, {"i", "t"}, {"a", "l"}, {sp, "m"},
      {sp, "d"}, {"in", "g"}, {"o", "u"}, {sp, "P"}, {sp, "i"}, {"l", "l"}, {sp, "is"}, {"c", "a"},
  };
  for (const auto& [a, b] : merges) {
    v.merges.push_back(a + " " + b);
    v.tokens.push_back(a + b);
    v.token_types.push_back(1);
  }
  return v;
}

void AddTinyVocabulary(const TinyVocabulary& vocab, model::GgufWriter& w) {
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", "smollm");
  w.SetStringArray("tokenizer.ggml.tokens", vocab.tokens);
  w.SetInt32Array("tokenizer.ggml.token_type", vocab.token_types);
  w.SetStringArray("tokenizer.ggml.merges", vocab.merges);
  w.SetUint32("tokenizer.ggml.bos_token_id", 1);
  w.SetUint32("tokenizer.ggml.eos_token_id", 2);
  w.SetUint32("tokenizer.ggml.unknown_token_id", 0);
  w.SetUint32("tokenizer.ggml.padding_token_id", 2);
  w.SetBool("tokenizer.ggml.add_bos_token", false);
  w.SetString("tokenizer.chat_template",
              "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
              "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
              "{% endif %}");
}

}  // namespace kvfleet::tools
