// Chat templates on arbitrary template sources and messages: a template
// loads or is refused with a status, a rendering succeeds or is refused,
// its pieces concatenate to Apply's text, and a message's content can never
// forge a control token: the encoded chat holds no more control tokens than
// the template wrote markers.
#include <string>
#include <vector>

#include "model/tokenizer/chat_encoding.h"
#include "model/tokenizer/chat_template.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_tokenizers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvfleet;
  fuzz::FuzzInput in(data, size);
  // The template source: up to 2 KiB, its length in two bytes.
  const uint32_t source_len = in.Below(2048);
  std::string source;
  for (uint32_t i = 0; i < source_len && !in.empty(); ++i) source.push_back(static_cast<char>(in.Byte()));
  absl::StatusOr<model::ChatTemplate> chat =
      model::ChatTemplate::FromTemplateSource(source, {.bos_token = "<|im_start|>",
                                                       .eos_token = "<|endoftext|>",
                                                       .marker_texts = {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}});
  if (!chat.ok()) return 0;
  static const char* const kRoles[] = {"system", "user", "assistant", "tool", "developer", "narrator", ""};
  std::vector<model::ChatMessage> messages;
  while (!in.empty() && messages.size() < 16) {
    const uint8_t role = in.Byte();
    messages.push_back({.role = kRoles[role % 7], .content = in.String(255)});
  }
  const bool add_generation_prompt = (size & 1) != 0;
  absl::StatusOr<std::vector<model::ChatPiece>> pieces = chat->Render(messages, add_generation_prompt);
  absl::StatusOr<std::string> text = chat->Apply(messages, add_generation_prompt);
  fuzz::Check(pieces.ok() == text.ok(), "Render and Apply disagree");
  if (!pieces.ok()) return 0;
  std::string joined;
  int markers = 0;
  for (const model::ChatPiece& p : *pieces) {
    joined += p.text;
    markers += p.is_marker ? 1 : 0;
  }
  fuzz::Check(joined == *text, "the pieces do not add up to Apply's text");
  const model::Tokenizer& tok = *fuzz::FuzzTokenizers().front();  // byte-level, ChatML specials
  absl::StatusOr<std::vector<model::TokenId>> ids = model::EncodeChat(tok, *chat, false, messages, add_generation_prompt);
  if (!ids.ok()) return 0;
  int controls = 0;
  for (model::TokenId id : *ids) controls += tok.IsControl(id) ? 1 : 0;
  fuzz::Check(controls <= markers, "message content became a control token");
  return 0;
}
