#include "model/arch/shard_plan.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dtype.h"
#include "model/arch/tensor_spec.h"

namespace kvfleet::model {

namespace {

// `units` in `parts` contiguous runs, the first runs one larger when they
// do not divide: the most even split.
std::vector<int64_t> Spread(int64_t units, int32_t parts) {
  std::vector<int64_t> out(static_cast<size_t>(parts), units / parts);
  for (int64_t i = 0; i < units % parts; ++i) ++out[static_cast<size_t>(i)];
  return out;
}

// The fewest of `step`-sized things whose total is a multiple of `align`.
int64_t UnitFor(int64_t step, int64_t align) { return align / std::gcd(step, align); }

std::string Alignment(int64_t values, const std::string& dtype) {
  return absl::StrCat(dtype, ": ", values, "-value blocks");
}

// The plan, or why `degree` breaks a rule (without the degrees that work).
absl::StatusOr<ShardPlan> Plan(const ModelConfig& c, int32_t degree, const ShardAlignment& a) {
  if (degree < 1)
    return absl::InvalidArgumentError(absl::StrCat("a tensor-parallel degree is at least 1, not ", degree));
  const int64_t heads = c.num_heads, kv_heads = c.num_kv_heads, head_dim = c.head_dim;
  if (heads < 1 || kv_heads < 1 || heads % kv_heads != 0 || head_dim < 1 || c.ffn_size < 1 || c.vocab_size < 1) {
    return absl::InvalidArgumentError("the model's config has no heads, feed-forward or vocabulary to split");
  }
  const int64_t group = heads / kv_heads;
  ShardPlan plan{.degree = degree, .ranks = std::vector<RankShare>(static_cast<size_t>(degree))};

  // Attention: whole runs of KV heads and their groups, or, past the KV
  // heads, replicas of each splitting its group.
  const std::string output_rule =
      absl::StrCat("attn_output (blk.*.attn_output.weight, ", Alignment(a.attn_output, a.attn_output_dtype), ")");
  if (degree <= kv_heads) {
    const int64_t unit = UnitFor(group * head_dim, a.attn_output);  // KV heads a rank's run is a multiple of
    if (kv_heads % unit != 0 || kv_heads / unit < degree) {
      return absl::InvalidArgumentError(
          absl::StrCat(output_rule, ": a rank's query heads must fill whole blocks of its ", heads * head_dim,
                       " input columns, so each rank takes a multiple of ", unit, " of the ", kv_heads, " KV heads (",
                       group, " query heads of ", head_dim, " each); ", degree, " ranks cannot"));
    }
    const std::vector<int64_t> runs = Spread(kv_heads / unit, degree);
    int64_t kv = 0;
    for (int32_t r = 0; r < degree; ++r) {
      RankShare& s = plan.ranks[static_cast<size_t>(r)];
      s.kv_head_begin = kv;
      s.kv_heads = runs[static_cast<size_t>(r)] * unit;
      s.q_head_begin = kv * group;
      s.q_heads = s.kv_heads * group;
      kv += s.kv_heads;
    }
  } else {
    if (degree % kv_heads != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attn_k and attn_v (blk.*.attn_k.weight): ", kv_heads, " KV heads are split across a degree that divides ",
          kv_heads, ", or replicated across a multiple of it; ", degree, " is neither"));
    }
    plan.kv_replicas = static_cast<int32_t>(degree / kv_heads);
    const int64_t unit = UnitFor(head_dim, a.attn_output);  // query heads a rank's run is a multiple of
    if (group % unit != 0 || group / unit < plan.kv_replicas) {
      return absl::InvalidArgumentError(absl::StrCat(
          output_rule, ": with each of the ", kv_heads, " KV heads on ", plan.kv_replicas, " ranks, its ", group,
          " query heads split ", plan.kv_replicas, " ways in runs of ", unit, " (whole blocks of ", head_dim,
          "-value heads); ", group < plan.kv_replicas ? "there are fewer heads than ranks" : "they do not"));
    }
    const std::vector<int64_t> runs = Spread(group / unit, plan.kv_replicas);
    for (int32_t r = 0; r < degree; ++r) {
      RankShare& s = plan.ranks[static_cast<size_t>(r)];
      const int64_t kv = r / plan.kv_replicas, part = r % plan.kv_replicas;
      s.kv_head_begin = kv;
      s.kv_heads = 1;
      s.q_head_begin = kv * group;
      for (int64_t p = 0; p < part; ++p) s.q_head_begin += runs[static_cast<size_t>(p)] * unit;
      s.q_heads = runs[static_cast<size_t>(part)] * unit;
    }
  }

  // Feed-forward: runs of whole ffn_down blocks.
  const int64_t ffn_unit = std::max<int64_t>(a.ffn_down, 1);
  if (c.ffn_size % ffn_unit != 0 || c.ffn_size / ffn_unit < degree) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ffn_down (blk.*.ffn_down.weight, ", Alignment(a.ffn_down, a.ffn_down_dtype), "): its ", c.ffn_size,
        " input columns hold ", c.ffn_size / ffn_unit, " whole blocks, fewer than ", degree, " ranks"));
  }
  const std::vector<int64_t> ffn = Spread(c.ffn_size / ffn_unit, degree);
  // Vocabulary: rows, any split.
  if (c.vocab_size < degree) {
    return absl::InvalidArgumentError(
        absl::StrCat("token_embd (token_embd.weight): ", c.vocab_size, " vocabulary rows across ", degree, " ranks"));
  }
  const std::vector<int64_t> vocab = Spread(c.vocab_size, degree);
  int64_t f = 0, v = 0;
  for (int32_t r = 0; r < degree; ++r) {
    RankShare& s = plan.ranks[static_cast<size_t>(r)];
    s.ffn_begin = f;
    s.ffn_columns = ffn[static_cast<size_t>(r)] * ffn_unit;
    f += s.ffn_columns;
    s.vocab_begin = v;
    s.vocab_rows = vocab[static_cast<size_t>(r)];
    v += s.vocab_rows;
  }
  return plan;
}

}  // namespace

ShardAlignment ShardAlignmentOf(std::span<const TensorView> tensors) {
  ShardAlignment a;
  const auto widen = [](DType dtype, int64_t& values, std::string& name) {
    const int64_t block = std::max<int64_t>(Traits(dtype).block_elems, 32);
    if (block > values || (block == values && name == "F32")) {
      values = block;
      name = DTypeName(dtype);
    }
  };
  // Every layer's tensor: "blk.3.ffn_down.weight", "model.layers.3.mlp.down_proj.weight".
  const auto is = [](const std::string& name, const TensorSpec& spec) {
    const auto ends_with = [&](std::string_view suffix) {
      return name.size() > suffix.size() && name[name.size() - suffix.size() - 1] == '.' &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return ends_with(spec.gguf) || ends_with(spec.hf);
  };
  for (const TensorView& t : tensors) {
    if (is(t.name, names::kAttnOutput)) widen(t.dtype, a.attn_output, a.attn_output_dtype);
    if (is(t.name, names::kFfnDown)) widen(t.dtype, a.ffn_down, a.ffn_down_dtype);
  }
  return a;
}

bool ShardPlan::even() const {
  return std::all_of(ranks.begin(), ranks.end(), [&](const RankShare& s) {
    return s.q_heads == ranks.front().q_heads && s.ffn_columns == ranks.front().ffn_columns;
  });
}

int64_t ShardPlan::max_kv_heads_per_rank() const {
  int64_t most = 0;
  for (const RankShare& s : ranks) most = std::max(most, s.kv_heads);
  return most;
}

std::string ShardPlan::Describe() const {
  std::string out = absl::StrCat("tp", degree);
  if (even()) return out;
  std::vector<int64_t> q, f;
  for (const RankShare& s : ranks) {
    q.push_back(s.q_heads);
    f.push_back(s.ffn_columns);
  }
  return absl::StrCat(out, "[q", absl::StrJoin(q, ","), ";f", absl::StrJoin(f, ","), "]");
}

absl::StatusOr<ShardPlan> PlanShards(const ModelConfig& config, int32_t degree, const ShardAlignment& alignment) {
  absl::StatusOr<ShardPlan> plan = Plan(config, degree, alignment);
  if (plan.ok() || degree < 1) return plan;
  return absl::InvalidArgumentError(
      absl::StrCat("--tensor-parallel ", degree, " cannot split this model: ", plan.status().message(),
                   ". Degrees that can: ", absl::StrJoin(DegreesThatSplit(config, alignment), ", ")));
}

std::vector<int32_t> DegreesThatSplit(const ModelConfig& config, const ShardAlignment& alignment, int32_t max_degree) {
  std::vector<int32_t> out;
  for (int32_t d = 1; d <= max_degree; ++d) {
    if (Plan(config, d, alignment).ok()) out.push_back(d);
  }
  return out;
}

}  // namespace kvfleet::model
