// kvfleet make-draft: a cheaper draft model for speculative decoding.
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/flags/flags.h"
#include "common/status_macros.h"
#include "model/model.h"
#include "tools/draft_model/make_draft.h"
#include "tools/kvfleet/commands.h"

namespace kvfleet::tools {

namespace {
constexpr char kUsage[] = R"usage(usage: kvfleet make-draft --model PATH --out PATH [--layers N]
                          [--type q4_0|q4_1|q8_0|f16|bf16|f32]

Writes a draft model for speculative decoding: the target's first N layers
(--layers, default all) with its vocabulary, embeddings, output head and
every metadata key, and with --type every weight matrix requantized (norms
stay F32). general.name gets " draft (N layers[, TYPE])". The draft is
checked to load before it replaces --out.
)usage";

absl::StatusOr<DType> ParseWeightType(const std::string& name) {
  const std::string upper = absl::AsciiStrToUpper(name);
  for (DType t : kAllDTypes) {
    if (upper == DTypeName(t)) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("--type '", name, "' is not one of q4_0, q4_1, q8_0, f16, bf16, f32"));
}
}  // namespace

absl::Status RunMakeDraft(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, {"model", "out", "layers", "type"}, {}));
  ASSIGN_OR_RETURN(std::string model_path, flags.GetString("model"));
  ASSIGN_OR_RETURN(std::string out, flags.GetString("out"));
  ASSIGN_OR_RETURN(int64_t layers, flags.GetInt("layers", 0));
  if (layers < 0 || layers > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("--layers must be 0 (all) or a layer count, not ", layers));
  }
  MakeDraftOptions o{.keep_layers = static_cast<int32_t>(layers)};
  if (flags.Has("type")) {
    ASSIGN_OR_RETURN(o.weight_type, ParseWeightType(flags.GetString("type", "")));
  }
  RETURN_IF_ERROR(MakeDraftModel(model_path, out, o));

  ASSIGN_OR_RETURN(auto draft, model::Model::Load(out));
  const std::string types =
      o.weight_type ? absl::StrCat(DTypeName(*o.weight_type), " matrices") : "the target's tensor types";
  const int64_t kept = draft->config().num_layers;
  std::printf("wrote %s: %lld %s, %s, %lld bytes (%s)\n", out.c_str(), static_cast<long long>(kept),
              kept == 1 ? "layer" : "layers", types.c_str(), static_cast<long long>(draft->weight_bytes()),
              draft->config().name.c_str());
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
