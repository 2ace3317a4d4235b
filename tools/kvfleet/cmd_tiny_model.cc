// kvfleet tiny-model: a small random-weight GGUF for tests.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "model/arch/architecture_registry.h"
#include "tools/hf_export/hf_export.h"
#include "tools/kvfleet/commands.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::tools {

namespace {

std::string DTypeNames() {
  std::string known;
  for (DType t : kAllDTypes) known += (known.empty() ? "" : ", ") + std::string(DTypeName(t));
  return known;
}

std::string Usage() {
  return absl::StrCat(R"(usage: kvfleet tiny-model --out PATH [--arch NAME] [--dtype TYPE] [--seed N]
                          [--layers N] [--hidden N] [--heads N] [--kv-heads N] [--ffn N]
                          [--context N] [--vocab N] [--tied] [--window N] [--llama3-rope]
                          [--hf-out DIR [--hf-dtype f32|bf16|f16]]
       kvfleet tiny-model --list-architectures | --list-types

Writes a random-weight GGUF of the architecture (default llama) with a small
byte-level BPE vocabulary and a ChatML chat template: its config at this
shape with the architecture's own defaults, its tensors from its specs. The
same options and seed always give the same file. --vocab N pads the
vocabulary with unused tokens to N (a real model's shape: 49152 for SmolLM2,
128256 for Llama 3). --window sets the window of an architecture's windowed
layers (gemma3's local ones; default 8); --llama3-rope gives a llama Llama
3's scaled RoPE. --hf-out also writes the same model as a Hugging Face
checkpoint (kvfleet export-hf; default f32, one file).
--list-architectures and --list-types print the architectures and the
tensor types, one a line.
NAME: )",
                      TinyArchitectureNames(), "\nTYPE: ", DTypeNames(),
                      "\n(a K-quant needs --hidden and --ffn multiples of 256: without --hidden, --ffn\n"
                      "and --heads the shape is widened to them).\n");
}

absl::StatusOr<DType> ParseDType(const std::string& name) {
  if (const std::optional<DType> t = DTypeNamed(name)) return *t;
  return absl::InvalidArgumentError(absl::StrCat("--dtype '", name, "' is not one of ", DTypeNames()));
}
}  // namespace

absl::Status RunTinyModel(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(Usage().c_str());
  ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args,
                                             {"out", "arch", "dtype", "seed", "layers", "hidden", "heads", "kv-heads",
                                              "ffn", "context", "vocab", "window", "hf-out", "hf-dtype"},
                                             {"tied", "llama3-rope", "list-architectures", "list-types"}));
  if (flags.GetSwitch("list-types")) {
    for (DType t : kAllDTypes) std::printf("%s\n", DTypeName(t));
    return absl::OkStatus();
  }
  if (flags.GetSwitch("list-architectures")) {
    for (const model::Architecture& a : model::Architectures()) std::printf("%s\n", std::string(a.name).c_str());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::string out, flags.GetString("out"));
  TinyModelOptions o;
  o.architecture = flags.GetString("arch", "llama");
  ASSIGN_OR_RETURN(o.dtype, ParseDType(flags.GetString("dtype", "F32")));
  ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed", 1));
  o.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(o.num_layers, flags.GetInt("layers", o.num_layers));
  ASSIGN_OR_RETURN(o.hidden_size, flags.GetInt("hidden", o.hidden_size));
  ASSIGN_OR_RETURN(o.num_heads, flags.GetInt("heads", o.num_heads));
  ASSIGN_OR_RETURN(o.num_kv_heads, flags.GetInt("kv-heads", o.num_kv_heads));
  ASSIGN_OR_RETURN(o.ffn_size, flags.GetInt("ffn", o.ffn_size));
  ASSIGN_OR_RETURN(o.context_length, flags.GetInt("context", o.context_length));
  ASSIGN_OR_RETURN(o.vocab_size, flags.GetInt("vocab", 0));
  o.tied_embeddings = flags.GetSwitch("tied");
  ASSIGN_OR_RETURN(o.sliding_window, flags.GetInt("window", o.sliding_window));
  o.llama3_rope = flags.GetSwitch("llama3-rope");
  // A type whose blocks are wider than the default rows widens them.
  if (!flags.Has("hidden") && !flags.Has("ffn") && !flags.Has("heads")) o = ShapedForType(o);
  RETURN_IF_ERROR(WriteTinyModel(o, out));
  if (flags.Has("hf-out")) {
    const std::string hf_dtype = flags.GetString("hf-dtype", "f32");
    HfExportOptions e{.dtype = hf_dtype == "bf16"  ? DType::kBF16
                               : hf_dtype == "f16" ? DType::kF16
                                                   : DType::kF32,
                      .shards = 1,
                      .config_extras = nlohmann::json::parse(TinyHfConfigExtras(o))};
    RETURN_IF_ERROR(ExportHfCheckpoint(out, flags.GetString("hf-out", ""), e));
  }
  std::printf("wrote %s (%s, seed %llu)\n", out.c_str(), std::string(DTypeName(o.dtype)).c_str(),
              static_cast<unsigned long long>(o.seed));
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
