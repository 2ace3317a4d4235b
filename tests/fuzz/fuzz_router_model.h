// The router-side fuzzers' model: a tiny GGUF written once per process to
// a temporary file, loaded as the router loads one, and kept; and what
// counts as the client's fault.
#pragma once

#include <unistd.h>

#include "services/router/frontend/router_model.h"
#include "tests/fuzz/fuzz_input.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::fuzz {

inline const router::ServedModel& FuzzRouterModel() {
  static const router::ServedModel* model = [] {
    char path[] = "/tmp/kvfleet-fuzz-XXXXXX";
    const int fd = mkstemp(path);
    Check(fd >= 0, "cannot make a temporary file");
    close(fd);
    Check(tools::WriteTinyModel({.context_length = 256}, path).ok(), "tiny model");
    auto m = router::RouterModel::Load(path, {.model_id = "tiny"});
    unlink(path);
    Check(m.ok(), "tiny model load");
    return new router::ServedModel{.model = *std::move(m), .fingerprint = "fuzz"};
  }();
  return *model;
}

// A refusal the router blames on the request: what a fuzzed call may get.
inline bool IsRouterClientError(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound;
}

}  // namespace kvfleet::fuzz
