// A LoRA adapter in PEFT's format from an untrusted source, for a fixed tiny
// base model: the input is adapter_config.json's length (2 bytes, little
// endian), its text, then adapter_model.safetensors. Properties: every
// refusal blames the file (no INTERNAL or UNKNOWN) and names the adapter; an accepted adapter's pairs have the base
// projection's shape at its rank, and a scale that is a number.
#include <unistd.h>

#include <cmath>
#include <string>

#include "model/lora/peft_adapter_reader.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/memory_file.h"
#include "tools/tiny_model/tiny_model.h"

namespace {

const kvfleet::model::Model& Base() {
  static const kvfleet::model::Model* base = [] {
    char path[] = "/tmp/kvfleet-fuzz-XXXXXX";
    const int fd = mkstemp(path);
    kvfleet::fuzz::Check(fd >= 0, "cannot make a temporary file");
    close(fd);
    kvfleet::fuzz::Check(kvfleet::tools::WriteTinyModel({}, path).ok(), "tiny model");
    auto m = kvfleet::model::Model::Load(path);
    unlink(path);
    kvfleet::fuzz::Check(m.ok(), "tiny model load");
    return m->release();
  }();
  return *base;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kvfleet::fuzz::Check;
  if (size < 2) return 0;
  const size_t config_size = std::min<size_t>(data[0] | (static_cast<size_t>(data[1]) << 8), size - 2);
  const std::string config(reinterpret_cast<const char*>(data + 2), config_size);
  kvfleet::fuzz::MemoryFile weights(data + 2 + config_size, size - 2 - config_size);
  auto adapter = kvfleet::model::ParsePeftAdapter(config, weights.path(), "fuzz", "fuzz", Base(), {.max_rank = 16});
  if (!adapter.ok()) {
    const absl::StatusCode code = adapter.status().code();
    Check(code != absl::StatusCode::kInternal && code != absl::StatusCode::kUnknown,
          "a refusal that blames kvfleet, not the file: " + adapter.status().ToString());
    Check(adapter.status().message().find("fuzz") != std::string::npos, "a refusal that names no adapter");
    return 0;
  }
  Check(std::isfinite(adapter->scale), "a scale that is not a number");
  const auto& layers = Base().weights().layers;
  for (size_t l = 0; l < adapter->layers.size(); ++l) {
    const auto matrices = layers[l].Matrices();
    for (int t = 0; t < kvfleet::model::kLoraTargets; ++t) {
      const auto& p = adapter->layers[l][static_cast<size_t>(t)];
      if (!p.has_value()) continue;
      Check(p->in == matrices[static_cast<size_t>(t)]->cols && p->out == matrices[static_cast<size_t>(t)]->rows,
            "a pair whose widths are not its projection's");
      Check(static_cast<int64_t>(p->a.size()) == adapter->rank * p->in &&
                static_cast<int64_t>(p->b.size()) == p->out * adapter->rank,
            "a pair of the wrong size for its rank");
    }
  }
  return 0;
}
