// A model file from an untrusted source: the GGUF parser, then everything a
// worker reads from the file before serving (the architecture's config, the
// vocabulary, its tokenizer and chat template, the weights' shapes), then
// the first and last row of every tensor dequantized, which reads exactly
// the bytes the parser promised are in the file.
#include <string>
#include <vector>

#include "kernels/cpu/quantize.h"
#include "model/arch/architecture_registry.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf/gguf_source.h"
#include "model/gguf/gguf_vocabulary.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/memory_file.h"

namespace kvfleet::fuzz {
namespace {

void Exercise(const model::GgufSource& source) {
  const model::GgufFile& file = source.file();
  const uint8_t* begin = nullptr;
  for (const model::TensorInfo& t : file.tensors()) {
    if (begin == nullptr || t.data < begin) begin = t.data;
  }
  for (const model::TensorInfo& t : file.tensors()) {
    Check(t.num_bytes >= 0 && t.data != nullptr, "tensor " + t.name + " has no data");
    Check(t.data - begin + t.num_bytes <= file.file_size(), "tensor " + t.name + " runs past the end of the file");
  }
  absl::StatusOr<model::Vocabulary> vocab = model::ReadGgufVocabulary(file);
  if (vocab.ok()) {
    absl::StatusOr<std::unique_ptr<model::Tokenizer>> tok = model::CreateTokenizer(*vocab);
    if (tok.ok()) (void)(*tok)->Encode("Hello, world! 12345 <|im_start|>", {.parse_special = true});
    absl::StatusOr<model::ChatTemplate> chat = model::ChatTemplate::FromVocabulary(*vocab);
    if (chat.ok()) {
      const std::vector<model::ChatMessage> messages = {{.role = "user", .content = "hi"}};
      (void)chat->Apply(messages, true);
    }
  }
  absl::StatusOr<model::ModelConfig> config = model::ReadModelConfig(source);
  if (!config.ok()) return;
  model::WeightStorage storage;
  model::TensorBinder binder(source, storage);
  if (!model::BindWeights(**model::FindArchitecture(source), binder, *config).ok()) return;
  std::vector<float> row;
  for (const model::TensorInfo& t : file.tensors()) {
    if (t.shape.empty() || t.shape[0] <= 0 || t.shape[0] > (1 << 20)) continue;
    const int64_t rows = t.num_elements / t.shape[0];
    const int64_t row_bytes = RowBytes(t.dtype, t.shape[0]);
    if (rows <= 0 || row_bytes * rows > t.num_bytes) continue;
    row.resize(static_cast<size_t>(t.shape[0]));
    kernels::DequantizeRow(t.dtype, t.data, row.data(), t.shape[0]);
    kernels::DequantizeRow(t.dtype, t.data + row_bytes * (rows - 1), row.data(), t.shape[0]);
  }
}

}  // namespace
}  // namespace kvfleet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvfleet::fuzz::MemoryFile file(data, size);
  absl::StatusOr<std::unique_ptr<kvfleet::model::GgufSource>> gguf = kvfleet::model::GgufSource::Open(file.path());
  if (gguf.ok()) kvfleet::fuzz::Exercise(**gguf);
  return 0;
}
