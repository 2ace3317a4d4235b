#include "model/arch/architecture_registry.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/arch/all_architectures.h"
#include "model/arch/decoder_binding.h"

namespace kvfleet::model {
namespace {

template <class A>
constexpr std::span<const TensorSpec> ConfigTensorsOf() {
  if constexpr (requires { A::kConfigTensors; }) {
    return A::kConfigTensors;
  } else {
    return names::kDecoderConfigTensors;
  }
}

template <class A>
constexpr Architecture EntryOf() {
  return {.name = A::kName,
          .gguf_names = A::kGgufNames,
          .hf_names = A::kHfNames,
          .read_config = &A::ReadConfig,
          .layer_tensors = A::kLayerTensors,
          .write_config = &A::WriteConfig,
          .default_config = &A::DefaultConfig,
          .hf_model_type = A::kHfModelType,
          .gguf_rope_pairing = A::kGgufRopePairing,
          .hf_norm_offset = A::kHfNormOffset,
          .config_tensors = ConfigTensorsOf<A>()};
}

template <class... A>
constexpr std::array<Architecture, sizeof...(A)> EntriesOf(ArchitectureList<A...>) {
  return {EntryOf<A>()...};
}

constexpr auto kEntries = EntriesOf(AllArchitectures{});

}  // namespace

std::span<const Architecture> Architectures() { return kEntries; }

std::string SupportedArchitectures() {
  const auto join = [](std::span<const std::string_view> names) {
    std::string out;
    for (std::string_view n : names) out += (out.empty() ? "" : ", ") + std::string(n);
    return out;
  };
  std::string out;
  for (const Architecture& a : kEntries) {
    if (!out.empty()) out += "; ";
    out += absl::StrCat(std::string(a.name), " (GGUF ", join(a.gguf_names), "; Hugging Face ", join(a.hf_names), ")");
  }
  return out;
}

absl::StatusOr<const Architecture*> FindArchitecture(const ModelSource& source) {
  const bool gguf = source.format() == ModelFormat::kGguf;
  for (const Architecture& a : kEntries) {
    for (std::string_view n : gguf ? a.gguf_names : a.hf_names) {
      if (n == source.architecture()) return &a;
    }
  }
  return absl::UnimplementedError(absl::StrCat(
      source.path(), ": architecture '", source.architecture(), "' (",
      gguf ? "metadata 'general.architecture'" : "config.json 'architectures'",
      ") is not supported; supported: ", SupportedArchitectures()));
}

const Architecture* FindArchitectureByName(std::string_view name) {
  for (const Architecture& a : kEntries) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

absl::StatusOr<ModelConfig> ReadModelConfig(const ModelSource& source) {
  ASSIGN_OR_RETURN(const Architecture* arch, FindArchitecture(source));
  ASSIGN_OR_RETURN(ModelConfig c, arch->read_config(source));
  c.architecture = std::string(arch->name);
  RETURN_IF_ERROR(c.Validate(source.path()));
  return c;
}

absl::StatusOr<DecoderWeights> BindWeights(const Architecture& arch, TensorBinder& b, const ModelConfig& c) {
  const float offset = b.source().format() == ModelFormat::kHuggingFace ? arch.hf_norm_offset : 0.0f;
  ASSIGN_OR_RETURN(DecoderWeights w, BindModelTensors(b, c, offset));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    ASSIGN_OR_RETURN(LayerWeights l, BindLayer(b, c, i, arch.layer_tensors, offset));
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace kvfleet::model
