// The project's default model (fetched by scripts/fetch_model.sh), for the
// tests that need the real thing. Tests skip, never fail, when it is absent.
//
//   if (!DefaultModelFetched()) GTEST_SKIP() << kDefaultModelMissing;
//   auto model = model::Model::Load(kDefaultModelPath);
#pragma once

#include <filesystem>

namespace kvfleet::testing {

inline constexpr char kDefaultModelPath[] = KVFLEET_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr char kDefaultModelMissing[] = "default model not fetched: run scripts/fetch_model.sh";

inline bool DefaultModelFetched() { return std::filesystem::exists(kDefaultModelPath); }

}  // namespace kvfleet::testing
