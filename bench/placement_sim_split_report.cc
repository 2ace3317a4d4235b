// placement_sim's roles sweep: parsing --prefill-workers and the tables
// (placement_sim_split_report.h).
#include "bench/placement_sim_split_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace kvfleet::bench::placement_sim {

namespace {

absl::StatusOr<int64_t> PositiveOrZero(absl::string_view text) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(text, &n) || n < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--prefill-workers: '", text, "' is not a count"));
  }
  return n;
}

// "0.123x" as aggregated / entry: above 1, the entry is better (lower).
double Better(double aggregated, double entry) { return entry > 0 ? aggregated / entry : 0.0; }

std::string Label(const RolesRun& run, size_t k) {
  if (run.specs[k].aggregated()) return "aggregated";
  const int32_t p = run.prefill_workers[k];
  return absl::StrCat(run.specs[k].Name(), " (", p, "P+", run.workers - p, "D)");
}

}  // namespace

absl::StatusOr<int32_t> RolesSpec::PrefillWorkers(int64_t workers) const {
  int64_t p = count;
  if (ratio_prefill > 0) {
    const double share = static_cast<double>(ratio_prefill) / static_cast<double>(ratio_prefill + ratio_decode);
    p = std::max<int64_t>(1, std::llround(share * static_cast<double>(workers)));
  }
  if (p >= workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prefill-workers ", Name(), " leaves no decode worker of ", workers));
  }
  return static_cast<int32_t>(p);
}

std::string RolesSpec::Name() const {
  if (aggregated()) return "aggregated";
  if (ratio_prefill > 0) return absl::StrCat(ratio_prefill, ":", ratio_decode);
  return absl::StrCat(count, "P");
}

absl::StatusOr<std::vector<RolesSpec>> ParseRoles(const std::string& list) {
  std::vector<RolesSpec> out;
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    RolesSpec s;
    const std::vector<absl::string_view> parts = absl::StrSplit(entry, ':');
    if (parts.size() == 2) {
      absl::StatusOr<int64_t> p = PositiveOrZero(parts[0]), d = PositiveOrZero(parts[1]);
      if (!p.ok() || !d.ok() || *p < 1 || *d < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("--prefill-workers: '", entry, "' is not a ratio p:d of counts >= 1"));
      }
      s.ratio_prefill = *p;
      s.ratio_decode = *d;
    } else if (parts.size() == 1) {
      ASSIGN_OR_RETURN(s.count, PositiveOrZero(parts[0]));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--prefill-workers: '", entry, "' is neither a count nor p:d"));
    }
    out.push_back(s);
  }
  return out;
}

size_t AggregatedIndex(const RolesRun& run) {
  for (size_t k = 0; k < run.specs.size(); ++k) {
    if (run.specs[k].aggregated()) return k;
  }
  return 0;
}

bool KeepsUp(const RolesRun& run, size_t k) {
  return run.results[k].requests_per_s >= 0.95 * run.results[AggregatedIndex(run)].requests_per_s;
}

int BestSplit(const RolesRun& run) {
  int best = -1;
  for (size_t k = 0; k < run.results.size(); ++k) {
    if (run.specs[k].aggregated() || !KeepsUp(run, k)) continue;
    const SimResult& r = run.results[k];
    if (best < 0) {
      best = static_cast<int>(k);
      continue;
    }
    const SimResult& b = run.results[static_cast<size_t>(best)];
    if (r.goodput_share > b.goodput_share || (r.goodput_share == b.goodput_share && r.itl_p99_s < b.itl_p99_s)) {
      best = static_cast<int>(k);
    }
  }
  return best;
}

void PrintRolesRun(const RolesRun& run, const SimOptions& sim, FILE* out) {
  std::fprintf(out,
               "\nroles, %lld workers, load %.2f, %g Gb/s links (objectives: TTFT <= %.3g s, own p99 inter-token gap "
               "<= %.0f ms; %.1f s to simulate)\n",
               static_cast<long long>(run.workers), run.load, run.network_gbps, sim.ttft_objective_s,
               sim.itl_objective_s * 1000, run.seconds);
  std::fprintf(out, "%-20s %8s %8s %8s %8s %8s %10s %8s %6s %6s %6s %6s %7s %7s %7s %8s %8s %8s %7s\n", "roles",
               "TTFT p50", "p90 s", "p99 s", "ITL p50", "p99 ms", "tok/s", "req/s", "TTFT", "ITL", "good", "long",
               "good/s", "splits", "whole", "gap p50", "p90 ms", "pull ms", "expired");
  for (size_t k = 0; k < run.results.size(); ++k) {
    const SimResult& r = run.results[k];
    std::fprintf(out,
                 "%-20s %8.3f %8.3f %8.3f %8.1f %8.1f %10.0f %8.1f %6.3f %6.3f %6.3f %6.3f %7.1f %7lld %7lld %8.1f "
                 "%8.1f %8.1f %7lld%s\n",
                 Label(run, k).c_str(), r.ttft_p50_s, r.ttft_p90_s, r.ttft_p99_s, r.itl_p50_s * 1000,
                 r.itl_p99_s * 1000, r.throughput_tokens_per_s, r.requests_per_s, r.ttft_met, r.itl_met,
                 r.goodput_share, r.goodput_long_share, r.goodput_per_s, static_cast<long long>(r.splits),
                 static_cast<long long>(r.splits_priced_out), r.handoff_gap_p50_s * 1000, r.handoff_gap_p90_s * 1000,
                 r.handoff_pull_mean_s * 1000, static_cast<long long>(r.leases_expired + r.leases_displaced),
                 r.audit.empty() ? "" : ("  AUDIT: " + r.audit).c_str());
  }
  std::fprintf(out,
               "  (TTFT, ITL: shares within each objective; good: within both; long: good among prompts of the "
               "split threshold or more; whole: of those, sent whole as the decode worker's measured pulls priced "
               "the handoff out; gap: a split request's first to second token; pull: a handoff pull's mean; "
               "expired: leases ended unpulled)\n");
  const size_t base = AggregatedIndex(run);
  const SimResult& a = run.results[base];
  for (size_t k = 0; k < run.results.size(); ++k) {
    if (k == base) continue;
    const SimResult& r = run.results[k];
    std::fprintf(out,
                 "  %s vs aggregated: ITL p99 %.2fx better, TTFT p90 %.2fx better, throughput %.2fx, goodput %.3f vs "
                 "%.3f (%.1f vs %.1f good requests/s)%s\n",
                 Label(run, k).c_str(), Better(a.itl_p99_s, r.itl_p99_s), Better(a.ttft_p90_s, r.ttft_p90_s),
                 a.throughput_tokens_per_s > 0 ? r.throughput_tokens_per_s / a.throughput_tokens_per_s : 0.0,
                 r.goodput_share, a.goodput_share, r.goodput_per_s, a.goodput_per_s,
                 KeepsUp(run, k) ? "" : "; does not keep up");
  }
  const int best = BestSplit(run);
  std::fprintf(out, "  best split (of those within 5%% of aggregated's requests/s: goodput, then ITL p99): %s\n",
               best >= 0 ? Label(run, static_cast<size_t>(best)).c_str() : "none keeps up");
}

void PrintRolesSummary(const std::vector<RolesRun>& runs, const SimOptions& sim, FILE* out) {
  std::fprintf(out,
               "\nBest split per run against aggregated (of the splits within 5%% of aggregated's requests/s, the best "
               "goodput: TTFT <= %.3g s and own p99 inter-token gap <= %.0f ms; in brackets, among the long "
               "prompts)\n\n| workers | load | link | aggregated: TTFT p90 s, ITL p99 "
               "ms, goodput | best split | its TTFT p90 s, ITL p99 ms, goodput | ITL p99 | TTFT p90 |\n"
               "|---|---|---|---|---|---|---|---|\n",
               sim.ttft_objective_s, sim.itl_objective_s * 1000);
  for (const RolesRun& run : runs) {
    const int best = BestSplit(run);
    const SimResult& a = run.results[AggregatedIndex(run)];
    if (best < 0) {
      std::fprintf(out, "| %lld | %.2f | %g Gb/s | %.3f, %.1f, %.3f (%.3f) | none keeps up | | | |\n",
                   static_cast<long long>(run.workers), run.load, run.network_gbps, a.ttft_p90_s, a.itl_p99_s * 1000,
                   a.goodput_share, a.goodput_long_share);
      continue;
    }
    const SimResult& b = run.results[static_cast<size_t>(best)];
    std::fprintf(out,
                 "| %lld | %.2f | %g Gb/s | %.3f, %.1f, %.3f (%.3f) | %s | %.3f, %.1f, %.3f (%.3f) | %.2fx | %.2fx |\n",
                 static_cast<long long>(run.workers), run.load, run.network_gbps, a.ttft_p90_s, a.itl_p99_s * 1000,
                 a.goodput_share, a.goodput_long_share, Label(run, static_cast<size_t>(best)).c_str(), b.ttft_p90_s,
                 b.itl_p99_s * 1000, b.goodput_share, b.goodput_long_share, Better(a.itl_p99_s, b.itl_p99_s),
                 Better(a.ttft_p90_s, b.ttft_p90_s));
  }
  std::fprintf(out, "\n(x: aggregated's figure over the split's; above 1 the split is better)\n");
}

nlohmann::json RolesJson(const RolesRun& run) {
  nlohmann::json entries = nlohmann::json::object();
  for (size_t k = 0; k < run.results.size(); ++k) {
    const SimResult& r = run.results[k];
    entries[Label(run, k)] = {{"prefill_workers", run.prefill_workers[k]},
                              {"keeps_up", KeepsUp(run, k)},
                              {"finished", r.finished},
                              {"ttft_p50_s", r.ttft_p50_s},
                              {"ttft_p90_s", r.ttft_p90_s},
                              {"ttft_p99_s", r.ttft_p99_s},
                              {"itl_p50_s", r.itl_p50_s},
                              {"itl_p90_s", r.itl_p90_s},
                              {"itl_p99_s", r.itl_p99_s},
                              {"throughput_tokens_per_s", r.throughput_tokens_per_s},
                              {"requests_per_s", r.requests_per_s},
                              {"ttft_met", r.ttft_met},
                              {"itl_met", r.itl_met},
                              {"goodput_share", r.goodput_share},
                              {"goodput_per_s", r.goodput_per_s},
                              {"goodput_long_share", r.goodput_long_share},
                              {"splits", r.splits},
                              {"splits_priced_out", r.splits_priced_out},
                              {"handoff_pulls", r.handoff_pulls},
                              {"handoff_pull_mean_s", r.handoff_pull_mean_s},
                              {"handoff_gap_p50_s", r.handoff_gap_p50_s},
                              {"handoff_gap_p90_s", r.handoff_gap_p90_s},
                              {"leases_expired", r.leases_expired},
                              {"leases_displaced", r.leases_displaced},
                              {"preemptions", r.preemptions},
                              {"makespan_s", r.makespan_s},
                              {"audit", r.audit}};
  }
  const int best = BestSplit(run);
  return {{"entries", entries}, {"best_split", best >= 0 ? Label(run, static_cast<size_t>(best)) : ""}};
}

}  // namespace kvfleet::bench::placement_sim
