// A .safetensors shard from an untrusted source: the header parser, then the
// first and last value of every tensor it accepted. Properties: every
// accepted tensor's bytes are its elements times its element size, lie in
// the file's data and overlap no other tensor's; reading them stays in
// bounds (the sanitizers watch).
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cpu/quantize.h"
#include "model/hf/safetensors_file.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/memory_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kvfleet::fuzz::Check;
  kvfleet::fuzz::MemoryFile file(data, size);
  auto shard = kvfleet::model::SafetensorsFile::Open(file.path());
  if (!shard.ok()) {
    Check(!shard.status().message().empty(), "a refusal without a reason");
    return 0;
  }
  const std::vector<kvfleet::model::TensorView>& tensors = (*shard)->tensors();
  const uint8_t* lowest = nullptr;
  for (const auto& t : tensors) {
    if (t.num_bytes > 0 && (lowest == nullptr || t.data < lowest)) lowest = t.data;
  }
  const uint8_t* previous_end = nullptr;
  for (const auto& t : tensors) {
    const int64_t element = kvfleet::RowBytes(t.dtype, 1);
    Check(t.num_bytes == t.num_elements * element, "tensor " + t.name + ": bytes ≠ elements × element size");
    int64_t elements = 1;
    for (int64_t d : t.shape) elements *= d;
    Check(elements == t.num_elements, "tensor " + t.name + ": elements ≠ the product of its shape");
    if (t.num_bytes == 0) continue;
    Check(t.data - lowest + t.num_bytes <= (*shard)->file_size(), "tensor " + t.name + " runs past the file");
    Check(previous_end == nullptr || t.data >= previous_end, "tensor " + t.name + " overlaps the one before it");
    previous_end = t.data + t.num_bytes;
    float value = 0.0f;
    kvfleet::kernels::DequantizeRow(t.dtype, t.data, &value, 1);
    kvfleet::kernels::DequantizeRow(t.dtype, t.data + t.num_bytes - element, &value, 1);
  }
  return 0;
}
