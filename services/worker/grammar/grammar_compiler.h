// Structured output for one model: turns an OutputConstraint (JSON object,
// JSON Schema, regex, choice, EBNF grammar, a tool call's shape) into a
// per-request TokenConstraint the engine masks logits with. Compilation
// (xgrammar's, against the model's vocabulary) is cached by the constraint's
// text, so a schema repeated across requests compiles once; a worker
// compiles on its gRPC threads, never on the engine's.
//
// The vocabulary as xgrammar sees it: each token's bytes; control tokens
// are never allowed (their text is not output text) except the model's stop
// tokens, which end a complete match.
//
// Errors are INVALID_ARGUMENT naming what is wrong: a schema error names
// its JSON path (json_schema_check.h), a grammar or regex error xgrammar's
// position.
//
// Thread-safety: Compile may be called from many threads; each constraint
// it returns belongs to one request.
//
//   ASSIGN_OR_RETURN(auto compiler, GrammarCompiler::Create(tokenizer, vocab_size));
//   ASSIGN_OR_RETURN(r.constraint, compiler->NewConstraint(request.constraint()));
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/sampler/token_constraint.h"
#include "kvfleet/v1/types.pb.h"
#include "model/tokenizer/tokenizer.h"

namespace kvfleet::worker {

struct GrammarStats {
  int64_t compiles = 0;         // constraints compiled (cache misses)
  int64_t cache_hits = 0;       // constraints served from the cache
  double compile_seconds = 0;   // total spent compiling
};

class GrammarCompiler {
 public:
  // Called with each mask's fill time, on the thread that filled it.
  using MaskObserver = std::function<void(double seconds)>;

  // `vocab_size`: the width of the model's logits (it may exceed the
  // tokenizer's vocabulary; the extra ids are never allowed).
  static absl::StatusOr<std::unique_ptr<GrammarCompiler>> Create(const model::Tokenizer& tokenizer,
                                                                 int32_t vocab_size, MaskObserver on_mask = {});
  ~GrammarCompiler();

  absl::StatusOr<std::shared_ptr<engine::TokenConstraint>> NewConstraint(const v1::OutputConstraint& constraint);

  GrammarStats stats() const;

 private:
  struct Impl;
  explicit GrammarCompiler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvfleet::worker
