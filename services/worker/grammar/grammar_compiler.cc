#include "services/worker/grammar/grammar_compiler.h"

#include <xgrammar/xgrammar.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "services/worker/grammar/json_schema_check.h"

namespace kvfleet::worker {
namespace {

using Json = nlohmann::ordered_json;  // a schema keeps its properties in order
using Clock = std::chrono::steady_clock;

constexpr int kMaxParallelCalls = 4;

// xgrammar's messages start "[HH:MM:SS] ../cpp/file.cc:NNN: ".
std::string CleanMessage(std::string_view what) {
  const size_t cpp = what.find(".cc:");
  if (cpp != std::string_view::npos) {
    const size_t colon = what.find(": ", cpp);
    if (colon != std::string_view::npos) what.remove_prefix(colon + 2);
  }
  while (!what.empty() && what.back() == '\n') what.remove_suffix(1);
  return std::string(what);
}

// An EBNF string literal.
std::string EbnfString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: out.push_back(c);
    }
  }
  return out + "\"";
}

absl::StatusOr<Json> ParseSchema(const std::string& text, std::string_view what) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(std::string(what), " is not valid JSON"));
  RETURN_IF_ERROR(CheckJsonSchema(j));
  return j;
}

// A tool's arguments schema, checked; any object when it gives none.
absl::StatusOr<Json> ToolParameters(const v1::ToolSchema& tool) {
  if (tool.parameters_json().empty()) return Json{{"type", "object"}};
  return ParseSchema(tool.parameters_json(), absl::StrCat("the parameters of tool '", tool.name(), "'"));
}

class XGrammarConstraint final : public engine::TokenConstraint {
 public:
  // `on_mask` (it may be empty) outlives the constraint: the compiler outlives every request.
  XGrammarConstraint(const xgrammar::CompiledGrammar& grammar, int32_t vocab_size,
                     const GrammarCompiler::MaskObserver& on_mask)
      : matcher_(grammar), bitmask_((vocab_size + 31) / 32), vocab_size_(vocab_size), on_mask_(on_mask) {}

  void PrepareMask() override {
    const auto start = Clock::now();
    int64_t shape[1] = {static_cast<int64_t>(bitmask_.size())};
    DLTensor tensor{};
    tensor.data = bitmask_.data();
    tensor.device = DLDevice{kDLCPU, 0};
    tensor.ndim = 1;
    tensor.dtype = DLDataType{kDLInt, 32, 1};
    tensor.shape = shape;
    try {
      restricted_ = matcher_.FillNextTokenBitmask(&tensor);
    } catch (const std::exception&) {
      std::fill(bitmask_.begin(), bitmask_.end(), 0);  // a finished grammar allows nothing more
      restricted_ = true;
    }
    prepared_ = true;
    if (on_mask_) on_mask_(std::chrono::duration<double>(Clock::now() - start).count());
  }

  void MaskLogits(std::span<float> logits) override {
    if (!prepared_) PrepareMask();
    if (!restricted_) return;
    const float kBanned = -std::numeric_limits<float>::infinity();
    const size_t n = logits.size();
    for (size_t i = 0; i < n; ++i) {
      if (static_cast<int64_t>(i) >= vocab_size_ || ((bitmask_[i >> 5] >> (i & 31)) & 1) == 0) logits[i] = kBanned;
    }
  }

  bool Accept(model::TokenId token) override {
    prepared_ = false;
    try {
      return matcher_.AcceptToken(token);
    } catch (const std::exception&) {
      return false;
    }
  }

 private:
  xgrammar::GrammarMatcher matcher_;
  std::vector<int32_t> bitmask_;  // for the state after the tokens accepted so far, once prepared_
  bool prepared_ = false;
  bool restricted_ = true;
  int64_t vocab_size_;
  const GrammarCompiler::MaskObserver& on_mask_;
};

}  // namespace

struct GrammarCompiler::Impl {
  Impl(xgrammar::TokenizerInfo info, int32_t vocab_size, GrammarCompiler::MaskObserver on_mask)
      : compiler(info, /*max_threads=*/1, /*cache_enabled=*/true), vocab_size(vocab_size),
        on_mask(std::move(on_mask)) {}

  // The grammar for a constraint; INVALID_ARGUMENT for what cannot be one.
  absl::StatusOr<xgrammar::CompiledGrammar> Compile(const v1::OutputConstraint& c) {
    switch (c.kind_case()) {
      case v1::OutputConstraint::kJsonObject:
        // OpenAI's JSON mode answers with an object: xgrammar's built-in
        // JSON grammar would also take an array or a bare value ("[1]").
        return compiler.CompileJSONSchema(R"({"type": "object"})", /*any_whitespace=*/true);
      case v1::OutputConstraint::kJsonSchema: {
        ASSIGN_OR_RETURN(Json schema, ParseSchema(c.json_schema(), "json_schema"));
        return compiler.CompileJSONSchema(schema.dump(), /*any_whitespace=*/false);
      }
      case v1::OutputConstraint::kRegex:
        return compiler.CompileRegex(c.regex());
      case v1::OutputConstraint::kChoice: {
        if (c.choice().choices().empty()) return absl::InvalidArgumentError("choice lists no strings");
        std::string ebnf = "root ::= ";
        for (int i = 0; i < c.choice().choices_size(); ++i) {
          absl::StrAppend(&ebnf, i > 0 ? " | " : "", EbnfString(c.choice().choices(i)));
        }
        return compiler.CompileGrammar(ebnf);
      }
      case v1::OutputConstraint::kGrammar:
        return compiler.CompileGrammar(c.grammar());
      case v1::OutputConstraint::kToolCalls:
        return CompileToolCalls(c.tool_calls());
      case v1::OutputConstraint::KIND_NOT_SET:
        break;
    }
    return absl::InvalidArgumentError("the output constraint is empty");
  }

  // One call (or up to kMaxParallelCalls) in the model's format, naming one
  // of the tools, its arguments valid for that tool's schema.
  absl::StatusOr<xgrammar::CompiledGrammar> CompileToolCalls(const v1::ToolCallConstraint& t) {
    if (t.tools().empty()) return absl::InvalidArgumentError("a tool-call constraint needs at least one tool");
    const bool hermes = t.format() == "hermes";
    if (!hermes && t.format() != "llama3_json") {
      return absl::InvalidArgumentError(absl::StrCat("tool calls in format '", t.format(),
                                                     "' cannot be enforced; hermes and llama3_json can"));
    }
    if (t.triggered()) return CompileTriggeredToolCalls(t);
    Json any_of = Json::array();
    for (const v1::ToolSchema& tool : t.tools()) {
      ASSIGN_OR_RETURN(Json parameters, ToolParameters(tool));
      Json call = {{"type", "object"},
                   {"properties", {{"name", {{"const", tool.name()}}}, {hermes ? "arguments" : "parameters", parameters}}},
                   {"required", {"name", hermes ? "arguments" : "parameters"}},
                   {"additionalProperties", false}};
      any_of.push_back(std::move(call));
    }
    const Json schema = any_of.size() == 1 ? any_of[0] : Json{{"anyOf", any_of}};
    xgrammar::Grammar json = xgrammar::Grammar::FromJSONSchema(schema.dump(), /*any_whitespace=*/false);
    xgrammar::Grammar one = json;
    std::string separator = "; ";
    if (hermes) {
      one = xgrammar::Grammar::Concat({xgrammar::Grammar::FromEBNF("root ::= \"<tool_call>\\n\""), json,
                                       xgrammar::Grammar::FromEBNF("root ::= \"\\n</tool_call>\"")});
      separator = "\n";
    }
    if (!t.parallel()) return compiler.CompileGrammar(one);
    std::vector<xgrammar::Grammar> options;
    std::vector<xgrammar::Grammar> calls = {one};
    for (int n = 1; n <= kMaxParallelCalls; ++n) {
      options.push_back(xgrammar::Grammar::Concat(calls));
      calls.push_back(xgrammar::Grammar::FromEBNF("root ::= " + EbnfString(separator)));
      calls.push_back(one);
    }
    return compiler.CompileGrammar(xgrammar::Grammar::Union(options));
  }

  // Free text in which each "<tool_call>" the model writes starts a call
  // that must name a tool and match its schema: xgrammar's triggered
  // structural tags, as the Hermes template teaches the call.
  absl::StatusOr<xgrammar::CompiledGrammar> CompileTriggeredToolCalls(const v1::ToolCallConstraint& t) {
    if (t.format() != "hermes") {
      return absl::InvalidArgumentError(
          absl::StrCat("tool calls in format '", t.format(), "' cannot be enforced on demand; hermes can"));
    }
    Json tags = Json::array();
    for (const v1::ToolSchema& tool : t.tools()) {
      ASSIGN_OR_RETURN(Json parameters, ToolParameters(tool));
      tags.push_back({{"type", "tag"},
                      {"begin", absl::StrCat("<tool_call>\n{\"name\": ", Json(tool.name()).dump(), ", \"arguments\": ")},
                      {"content", {{"type", "json_schema"}, {"json_schema", parameters}}},
                      {"end", "}\n</tool_call>"}});
    }
    const Json structural = {{"type", "structural_tag"},
                             {"format",
                              {{"type", "triggered_tags"},
                               {"triggers", {"<tool_call>"}},
                               {"tags", tags},
                               {"at_least_one", false},
                               {"stop_after_first", false}}}};
    return compiler.CompileStructuralTag(structural.dump());
  }

  xgrammar::GrammarCompiler compiler;
  int32_t vocab_size;
  GrammarCompiler::MaskObserver on_mask;  // may be empty
  std::mutex mu;
  absl::flat_hash_set<std::string> seen;  // constraints compiled so far (for the hit count)
  GrammarStats stats;
};

GrammarCompiler::GrammarCompiler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrammarCompiler::~GrammarCompiler() = default;

absl::StatusOr<std::unique_ptr<GrammarCompiler>> GrammarCompiler::Create(const model::Tokenizer& tokenizer,
                                                                         int32_t vocab_size, MaskObserver on_mask) {
  const std::span<const model::TokenId> stops = tokenizer.StopTokens();
  std::vector<std::string> encoded(vocab_size);
  for (model::TokenId id = 0; id < std::min(vocab_size, tokenizer.vocab_size()); ++id) {
    // Control tokens are not text: "" keeps them out of every match (stop
    // tokens are allowed where a match may end, by their ids below).
    if (tokenizer.IsControl(id)) continue;
    absl::StatusOr<std::string> piece = tokenizer.TokenToPiece(id);
    if (piece.ok()) encoded[id] = *std::move(piece);
  }
  std::vector<int32_t> stop_ids(stops.begin(), stops.end());
  try {
    xgrammar::TokenizerInfo info(encoded, xgrammar::VocabType::RAW, vocab_size, stop_ids);
    return std::unique_ptr<GrammarCompiler>(new GrammarCompiler(std::make_unique<Impl>(std::move(info), vocab_size, std::move(on_mask))));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot prepare the vocabulary for constrained decoding: ",
                                            CleanMessage(e.what())));
  }
}

absl::StatusOr<std::shared_ptr<engine::TokenConstraint>> GrammarCompiler::NewConstraint(
    const v1::OutputConstraint& constraint) {
  const std::string key = constraint.SerializeAsString();
  const auto start = Clock::now();
  absl::StatusOr<xgrammar::CompiledGrammar> compiled = absl::InternalError("not compiled");
  try {
    compiled = impl_->Compile(constraint);
  } catch (const std::exception& e) {
    compiled = absl::InvalidArgumentError(absl::StrCat("the output constraint cannot be compiled: ",
                                                       CleanMessage(e.what())));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->seen.insert(key).second) {
      ++impl_->stats.compiles;
      impl_->stats.compile_seconds += seconds;
    } else {
      ++impl_->stats.cache_hits;
    }
  }
  if (!compiled.ok()) return compiled.status();
  try {
    return std::shared_ptr<engine::TokenConstraint>(
        std::make_shared<XGrammarConstraint>(*compiled, impl_->vocab_size, impl_->on_mask));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("the output constraint cannot be matched: ", CleanMessage(e.what())));
  }
}

GrammarStats GrammarCompiler::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace kvfleet::worker
