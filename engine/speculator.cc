#include "engine/speculator.h"

#include <algorithm>

#include "common/check.h"
#include "common/logging.h"
#include "engine/spec/draft_lengths.h"

namespace kvfleet::engine {
namespace {

// A request that stopped drafting tries one token again after this many
// steps, so a text that turns repetitive is noticed.
constexpr int32_t kProbeInterval = 16;
// Weight of the newest measurement in a proposer's cost per drafted token.
constexpr double kCostSmoothing = 0.2;

// Lookups (cost 0) draft as long as allowed before the step sizes them.
bool IsLookup(const spec::Proposer& p) { return p.relative_cost() == 0.0; }

// The most a request may draft now: its limit, and never past max_tokens
// (verification yields at most k + 1 tokens).
int32_t LongestDraft(const Request& r) {
  const int32_t left = r.params.stopping.max_tokens - r.num_output_tokens() - 1;
  return std::max(0, std::min(r.max_draft_tokens, left));
}

}  // namespace

Speculator::Speculator(const spec::SpeculationOptions& options, std::vector<spec::Proposer*> proposers,
                       KvCacheManager& kv)
    : options_(options), kv_(kv) {
  for (spec::Proposer* p : proposers) {
    CHECK(p != nullptr);
    CHECK(Find(p->name()) == nullptr) << "two proposers named " << std::string(p->name());
    Loaded loaded{.proposer = p, .acceptance = spec::AcceptanceEstimate()};
    loaded.stats.proposer = std::string(p->name());
    loaded_.push_back(std::move(loaded));
  }
}

std::vector<std::string> Speculator::available() const {
  std::vector<std::string> names;
  for (const Loaded& l : loaded_) names.emplace_back(l.proposer->name());
  return names;
}

absl::Status Speculator::Validate(const spec::SpeculationParams& params) const { return params.Validate(available()); }

const Speculator::Loaded* Speculator::Find(std::string_view name) const {
  for (const Loaded& l : loaded_) {
    if (l.proposer->name() == name) return &l;
  }
  return nullptr;
}

Speculator::Loaded& Speculator::Of(const spec::Proposer* proposer) {
  for (Loaded& l : loaded_) {
    if (l.proposer == proposer) return l;
  }
  CHECK(false) << "proposer " << std::string(proposer->name()) << " is not loaded";
  return loaded_.front();
}

void Speculator::Resolve(Request& req) const {
  const spec::SpeculationParams& p = req.params.speculation;
  const std::string& name = p.proposer.empty() ? options_.proposer : p.proposer;
  req.auto_proposer = name == spec::kProposerAuto && !loaded_.empty();
  const Loaded* loaded = req.auto_proposer ? &loaded_.front() : Find(name);
  req.proposer = loaded != nullptr ? loaded->proposer : nullptr;
  req.max_draft_tokens =
      p.max_draft_tokens > 0 ? std::min(p.max_draft_tokens, options_.max_draft_tokens) : options_.max_draft_tokens;
  // A new request starts from what this proposer achieves lately.
  if (loaded != nullptr) req.acceptance = spec::AcceptanceEstimate(loaded->acceptance.rate());
}

std::vector<int32_t> Speculator::DraftLengths(const std::vector<Request*>& candidates,
                                              const std::list<Request*>& running, int32_t token_budget) {
  std::vector<int32_t> caps;
  for (const Request* r : candidates) {
    int32_t cap = std::min(LongestDraft(*r), r->proposer->max_draft_tokens());
    if (r->proposer->drafts_before_sizing()) cap = std::min(cap, static_cast<int32_t>(r->draft.size()));
    caps.push_back(cap);
  }
  if (!options_.adaptive) return caps;

  spec::PlainStep plain;
  int64_t pending = 0;
  for (const Request* r : running) {
    pending += r->num_pending_tokens();
    if (r->num_pending_tokens() == 1) plain.produced += 1.0;
  }
  plain.tokens = static_cast<int32_t>(std::min<int64_t>(pending, token_budget));
  std::vector<spec::DraftCandidate> offers;
  // Worths as verification has shown them (never rising along a draft).
  std::vector<std::vector<double>> worths(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Loaded* l = &Of(candidates[i]->proposer);
    // Before a measurement, a proposer model costs its share of a target step.
    const double cost =
        l->measured_cost ? l->seconds_per_token : l->proposer->relative_cost() * step_cost_.Seconds(1.0);
    // A draft model that is behind must first run the text it missed; that
    // pays off over the rest of the request (about two tokens per step), so
    // each step carries its share.
    const Request& r = *candidates[i];
    const int64_t behind = l->proposer->RowsBehind(r.id(), r.tokens);
    const double remaining = std::max(1.0, (r.params.stopping.max_tokens - r.num_output_tokens()) / 2.0);
    offers.push_back({.acceptance = Acceptance(r),
                      .max_tokens = caps[i],
                      .propose_seconds_per_token = cost,
                      .setup_seconds = static_cast<double>(behind) * cost / remaining});
    for (double w : r.draft_worths) {
      worths[i].push_back(std::min(l->by_worth.Rate(w), worths[i].empty() ? 1.0 : worths[i].back()));
    }
    offers.back().worths = worths[i];
  }
  std::vector<int32_t> lengths = spec::ChooseDraftLengths(offers, step_cost_, plain);
  if (!candidates.empty()) {
    KVFLEET_LOG_DEBUG(
        "speculation: step cost {:.2f} ms + {:.3f} ms/token, {} tokens, {} decoding; first candidate "
        "r={:.2f} propose {:.3f} ms/token -> k={}",
        step_cost_.fixed_seconds() * 1e3, step_cost_.seconds_per_token() * 1e3, plain.tokens, plain.produced,
        offers[0].acceptance, offers[0].propose_seconds_per_token * 1e3, lengths[0]);
  }
  const double step_seconds = step_cost_.Seconds(plain.tokens);
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double token_cost =
        step_cost_.seconds_per_token() + offers[i].propose_seconds_per_token + offers[i].setup_seconds;
    // A probe bets that the request's acceptance has changed, so it must be
    // cheap: a sure token would have to pay twice over. Never in a saturated
    // batch, nor with a proposer nearly as dear as the target (whose probe
    // would also first catch up on the whole text since its last draft).
    if (lengths[i] == 0 && caps[i] > 0 && candidates[i]->steps_since_draft >= kProbeInterval &&
        step_seconds > 2.0 * token_cost * std::max(plain.produced, 1.0)) {
      lengths[i] = 1;
    }
  }
  return lengths;
}

double Speculator::Acceptance(const Request& r) {
  // An auto request's own history mixes proposers: without evidence, its
  // proposer's recent rate across requests speaks for the draft.
  const Loaded& l = Of(r.proposer);
  return l.by_evidence.Rate(r.draft_evidence, r.auto_proposer ? l.acceptance.rate() : r.acceptance.rate());
}

void Speculator::Plan(const std::list<Request*>& running, int32_t token_budget) {
  for (Request* r : running) r->ClearDraft();
  if (loaded_.empty()) return;
  std::vector<Request*> candidates;
  for (Request* r : running) {
    if (r->proposer != nullptr && r->num_pending_tokens() == 1) candidates.push_back(r);
  }
  if (candidates.empty()) return;
  PlanAuto(candidates);
  const auto draft_with = [&](Loaded& l, const std::vector<int32_t>& lengths) {
    std::vector<Request*> mine;
    std::vector<int32_t> ks;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (candidates[i]->proposer == l.proposer && lengths[i] > 0) {
        mine.push_back(candidates[i]);
        ks.push_back(lengths[i]);
      }
    }
    if (!mine.empty()) Draft(l, mine, ks, static_cast<int32_t>(running.size()));
  };
  // Lookups cost nothing, and draft heads the same however much is kept:
  // they draft as long as allowed first, and what they found (the draft's
  // length, its evidence, its guesses' worths) decides how much of it the
  // step verifies. Auto requests already hold a lookup's draft, or were
  // sent elsewhere.
  std::vector<int32_t> longest;
  for (const Request* r : candidates) {
    // A proposer that costs something (draft heads' trees), whose last
    // draft for this request was sized to nothing, rests until the probe
    // interval: its guesses did not pay, so neither does making them.
    const bool resting = !IsLookup(*r->proposer) && r->steps_since_draft > 0 && r->steps_since_draft < kProbeInterval;
    longest.push_back((r->auto_proposer && IsLookup(*r->proposer)) || resting ? 0 : LongestDraft(*r));
  }
  for (Loaded& l : loaded_) {
    if (l.proposer->drafts_before_sizing()) draft_with(l, longest);
  }
  const std::vector<int32_t> lengths = DraftLengths(candidates, running, token_budget);
  for (size_t i = 0; i < candidates.size(); ++i) {
    Request& r = *candidates[i];
    if (r.proposer->drafts_before_sizing()) r.TruncateDraft(static_cast<size_t>(lengths[i]));
  }
  for (Loaded& l : loaded_) {
    if (!l.proposer->drafts_before_sizing()) draft_with(l, lengths);
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    Request* r = candidates[i];
    r->steps_since_draft = r->draft.empty() ? r->steps_since_draft + 1 : 0;
  }
}

void Speculator::Draft(Loaded& loaded, const std::vector<Request*>& requests, const std::vector<int32_t>& lengths,
                       int32_t reserve_blocks) {
  std::vector<spec::DraftSlot> slots;
  std::vector<Request*> owners;
  int64_t asked = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    Request& r = *requests[i];
    // Drafting into the target's KV needs the blocks now. They must leave
    // one free block per running request, so no plain decode token is ever
    // short of one because of a draft; short of that, this request decodes
    // plainly.
    if (loaded.proposer->uses_target_kv() &&
        (kv_.num_free_blocks() - kv_.MissingBlocks(r, 1 + lengths[i]) < reserve_blocks ||
         !kv_.Allocate(r, 1 + lengths[i]))) {
      continue;
    }
    slots.push_back({.id = r.id(),
                     .tenant = r.cache_root,
                     .context = r.tokens,
                     .num_computed = r.num_computed_tokens,
                     .block_table = r.block_table,
                     .lora_slot = r.lora_slot,
                     .max_tokens = lengths[i],
                     .hidden = r.last_hidden});
    owners.push_back(&r);
    asked += lengths[i];
  }
  if (slots.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status = loaded.proposer->Propose(slots);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  loaded.stats.propose_seconds += seconds;
  // Per token the proposer ran (a model's catch-up and draft rows), or per
  // guess for a lookup: what one more drafted token costs.
  int64_t rows = 0;
  for (const spec::DraftSlot& slot : slots) rows += slot.rows_computed;
  if (rows > 0 || asked > 0) {
    const double measured = seconds / static_cast<double>(rows > 0 ? rows : asked);
    loaded.seconds_per_token =
        loaded.measured_cost ? (1.0 - kCostSmoothing) * loaded.seconds_per_token + kCostSmoothing * measured : measured;
    loaded.measured_cost = true;
  }
  if (!status.ok()) {
    KVFLEET_LOG_ERROR("speculation: proposer {} failed, decoding without its drafts this step: {}",
                      std::string(loaded.proposer->name()), status.ToString());
    return;
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    spec::DraftSlot& slot = slots[i];
    Request& owner = *owners[i];
    owner.draft = std::move(slot.draft);
    // Malformed tree or worth arrays are dropped with the draft's shape:
    // the guesses are still verified, as a chain without worths.
    bool tree = slot.parents.size() == owner.draft.size();
    for (size_t j = 0; tree && j < slot.parents.size(); ++j) {
      tree = slot.parents[j] >= -1 && slot.parents[j] < static_cast<int32_t>(j);
    }
    owner.draft_parents = tree ? std::move(slot.parents) : std::vector<int32_t>{};
    owner.draft_worths = slot.worths.size() == owner.draft.size() ? std::move(slot.worths) : std::vector<double>{};
    owner.draft_evidence = owner.draft.empty() ? 0 : slot.evidence;
    owner.TruncateDraft(static_cast<size_t>(std::max(0, slot.max_tokens)));
  }
}

void Speculator::RecordVerification(Request& req, int32_t drafted, int32_t accepted, std::span<const int32_t> path) {
  if (drafted <= 0) return;
  req.acceptance.Observe(drafted, accepted);
  Loaded* l = &Of(req.proposer);
  if (req.draft_worths.size() >= static_cast<size_t>(drafted)) {
    for (int32_t i = 0; i < drafted; ++i) {
      l->by_worth.Observe(req.draft_worths[i], std::find(path.begin(), path.end(), i) != path.end());
    }
  }
  l->acceptance.Observe(drafted, accepted);
  l->by_evidence.Observe(req.draft_evidence, drafted, accepted);
  l->stats.drafted_tokens += drafted;
  l->stats.accepted_tokens += accepted;
  ++l->stats.verify_passes;
}

bool Speculator::NeedsHiddenState(const Request& req) const {
  if (!req.auto_proposer) return req.proposer != nullptr && req.proposer->needs_hidden_state();
  for (const Loaded& l : loaded_) {
    if (l.proposer->needs_hidden_state()) return true;
  }
  return false;
}

spec::Proposer* Speculator::PickForAuto() const {
  spec::Proposer* best = nullptr;
  double best_value = 0.0;
  for (const Loaded& l : loaded_) {
    if (IsLookup(*l.proposer)) continue;
    // Expected tokens a one-token draft adds, per unit of what drafting
    // and verifying it costs next to a plain token (the step's learnt
    // per-token slope plus the proposer's own measured cost).
    const double per_token = std::max(step_cost_.seconds_per_token(), 1e-9);
    const double own = l.measured_cost ? l.seconds_per_token : l.proposer->relative_cost() * step_cost_.Seconds(1.0);
    const double value = l.acceptance.rate() / (1.0 + own / per_token);
    if (value > best_value) {
      best_value = value;
      best = l.proposer;
    }
  }
  return best;
}

void Speculator::PlanAuto(const std::vector<Request*>& candidates) {
  std::vector<Request*> automatic;
  for (Request* r : candidates) {
    if (r->auto_proposer) automatic.push_back(r);
  }
  if (automatic.empty()) return;
  // Lookups first (free): every one drafts, and the draft copied from the
  // longest match (then the longest draft) keeps the request.
  std::vector<Request*> open;
  std::vector<int32_t> lengths;
  for (Request* r : automatic) {
    r->proposer = nullptr;
    if (LongestDraft(*r) == 0) continue;
    open.push_back(r);
    lengths.push_back(LongestDraft(*r));
  }
  struct Best {
    spec::Proposer* proposer = nullptr;
    std::vector<model::TokenId> draft;
    int32_t evidence = 0;
  };
  std::vector<Best> best(open.size());
  for (Loaded& l : loaded_) {
    if (!IsLookup(*l.proposer) || l.proposer->uses_target_kv() || open.empty()) continue;
    Draft(l, open, lengths, /*reserve_blocks=*/0);
    for (size_t i = 0; i < open.size(); ++i) {
      Request& r = *open[i];
      if (r.draft.empty()) continue;
      if (best[i].proposer == nullptr || r.draft_evidence > best[i].evidence ||
          (r.draft_evidence == best[i].evidence && r.draft.size() > best[i].draft.size())) {
        best[i] = {.proposer = l.proposer, .draft = r.draft, .evidence = r.draft_evidence};
      }
    }
  }
  for (size_t i = 0; i < open.size(); ++i) {
    open[i]->ClearDraft();
    open[i]->proposer = best[i].proposer;
    open[i]->draft = std::move(best[i].draft);
    open[i]->draft_evidence = best[i].evidence;
  }
  spec::Proposer* fallback = PickForAuto();
  for (Request* r : automatic) {
    if (r->proposer != nullptr) continue;
    // No match: the best model proposer, or the first lookup (an empty
    // draft: this request decodes plainly, and is a candidate again next step).
    r->proposer = fallback != nullptr ? fallback : loaded_.front().proposer;
  }
}

void Speculator::Forget(const Request& req) {
  if (req.auto_proposer) {
    for (Loaded& l : loaded_) l.proposer->Forget(req.id());
  } else if (req.proposer != nullptr) {
    req.proposer->Forget(req.id());
  }
  const std::span<const model::TokenId> output = std::span(req.tokens).subspan(req.num_prompt_tokens());
  for (Loaded& l : loaded_) l.proposer->Learn(req.cache_root, output);
}

std::vector<SpeculationStats> Speculator::Stats() const {
  std::vector<SpeculationStats> out;
  for (const Loaded& l : loaded_) {
    out.push_back(l.stats);
    SpeculationStats& s = out.back();
    s.memory_bytes = l.proposer->MemoryBytes();
    if (s.verify_passes > 0 && step_cost_.Seconds(1.0) > 0.0) {
      // At one stream: tokens a verify pass yields over what it costs next
      // to a plain step (the learnt step curve, plus drafting).
      const double passes = static_cast<double>(s.verify_passes);
      const double drafted = static_cast<double>(s.drafted_tokens) / passes;
      const double seconds = step_cost_.Seconds(1.0 + drafted) + s.propose_seconds / passes;
      s.estimated_speedup = (1.0 + static_cast<double>(s.accepted_tokens) / passes) * step_cost_.Seconds(1.0) / seconds;
    }
  }
  return out;
}

}  // namespace kvfleet::engine
