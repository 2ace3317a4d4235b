// kvfleet export-hf: a GGUF file as a Hugging Face checkpoint directory.
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tools/hf_export/hf_export.h"
#include "tools/kvfleet/commands.h"

namespace kvfleet::tools {

namespace {
constexpr char kUsage[] =
    R"usage(usage: kvfleet export-hf --model PATH.gguf --out DIR [--dtype bf16|f16|f32] [--shards N]
                         [--tokenizer-only] [--config-extra JSON]

Writes DIR as a Hugging Face checkpoint of the GGUF model: config.json, the
weights in --dtype (default bf16; the GGUF's values dequantized exactly,
then rounded to it) as --shards safetensors files (default 2) with
model.safetensors.index.json, tokenizer.json, tokenizer_config.json (with
the chat template) and generation_config.json. --tokenizer-only writes the
two tokenizer files alone. --config-extra merges a JSON object into
config.json (a Llama 3 file's rope_scaling, which its GGUF keeps only as
frequency factors).
)usage";
}  // namespace

absl::Status RunExportHf(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags,
                   Flags::Parse(args, {"model", "out", "dtype", "shards", "config-extra"}, {"tokenizer-only"}));
  ASSIGN_OR_RETURN(std::string model_path, flags.GetString("model"));
  ASSIGN_OR_RETURN(std::string out, flags.GetString("out"));
  HfExportOptions o;
  const std::string dtype = absl::AsciiStrToLower(flags.GetString("dtype", "bf16"));
  if (dtype == "bf16") {
    o.dtype = DType::kBF16;
  } else if (dtype == "f16") {
    o.dtype = DType::kF16;
  } else if (dtype == "f32") {
    o.dtype = DType::kF32;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--dtype '", dtype, "': bf16, f16 or f32"));
  }
  ASSIGN_OR_RETURN(int64_t shards, flags.GetInt("shards", 2));
  o.shards = static_cast<int>(shards);
  o.tokenizer_only = flags.GetSwitch("tokenizer-only");
  if (flags.Has("config-extra")) {
    o.config_extras = nlohmann::json::parse(flags.GetString("config-extra", "{}"), nullptr, false);
    if (o.config_extras.is_discarded() || !o.config_extras.is_object()) {
      return absl::InvalidArgumentError("--config-extra must be a JSON object");
    }
  }
  RETURN_IF_ERROR(ExportHfCheckpoint(model_path, out, o));
  std::printf("wrote %s from %s (%s)\n", out.c_str(), model_path.c_str(),
              o.tokenizer_only ? "tokenizer only" : absl::StrCat(dtype, ", ", o.shards, " shard(s)").c_str());
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
