// The LoRA adapters a worker can serve: loaded from PEFT directories at
// start (--lora NAME=PATH), at run time (LoadLoraAdapter), or on first use
// from the adapter directory (--lora-dir DIR: DIR/NAME). Each is read and
// checked against the worker's base model once (peft_adapter_reader.h) and
// kept in host memory; the engine decides which sit in the executor's
// slots (engine/lora/lora_residency.h).
//
// A name loaded again with other files replaces the old adapter; requests
// already running keep the old one (they hold it), new ones get the new.
//
// Thread-safety: every method is thread-safe. Reading a file happens
// outside the lock.
//
//   LoraRegistry registry(*model, {.max_rank = 16, .base_fingerprint = fp, .adapter_dir = "/adapters"});
//   RETURN_IF_ERROR(registry.Load("sql", "/adapters/sql").status());
//   ASSIGN_OR_RETURN(std::shared_ptr<const model::LoraAdapter> a, registry.Find("sql"));
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/lora/lora_adapter.h"
#include "model/model.h"

namespace kvfleet::worker {

struct LoraRegistryOptions {
  int32_t max_rank = 16;         // --max-lora-rank
  std::string base_fingerprint;  // refuses an adapter recorded for other weights
  std::string adapter_dir;       // --lora-dir; empty: no loading on first use
  // Names a client may not give an adapter (the base model's own names).
  std::vector<std::string> reserved_names;
};

struct LoadedLora {
  std::shared_ptr<const model::LoraAdapter> adapter;
  std::string path;
  double load_seconds = 0;  // reading and checking the files
};

class LoraRegistry {
 public:
  LoraRegistry(const model::Model& base, LoraRegistryOptions options);

  // INVALID_ARGUMENT for a malformed name or a reserved one, or an adapter
  // the reader refuses (its message names the field or tensor); NOT_FOUND
  // for a missing directory.
  absl::StatusOr<LoadedLora> Load(const std::string& name, const std::string& path);
  // NOT_FOUND when no adapter has that name.
  absl::Status Unload(const std::string& name);
  // A loaded adapter, or one the adapter directory holds (loaded now);
  // NOT_FOUND saying how to load it otherwise.
  absl::StatusOr<std::shared_ptr<const model::LoraAdapter>> Find(const std::string& name);
  // Every loaded adapter, by name.
  std::vector<LoadedLora> List() const;

  // "sql", "team/sql-v2": 1 to 128 of [A-Za-z0-9._:/-], not starting with '/' or '.'.
  static absl::Status CheckName(const std::string& name);

 private:
  const model::Model& base_;
  const LoraRegistryOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, LoadedLora> loaded_;  // under mu_
};

}  // namespace kvfleet::worker
