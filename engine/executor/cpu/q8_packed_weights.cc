#include "engine/executor/cpu/q8_packed_weights.h"

#include <new>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/dtype.h"
#include "kernels/cpu/matmul_q8.h"

namespace kvfleet::engine {

absl::StatusOr<Q8PackedWeights> Q8PackedWeights::Pack(const model::Model& model, ThreadPool& pool) {
  const model::DecoderWeights& w = model.weights();
  std::vector<const model::WeightView*> matrices;
  for (const model::LayerWeights& l : w.layers) {
    const auto layer = l.Matrices();
    matrices.insert(matrices.end(), layer.begin(), layer.end());
  }
  matrices.push_back(&w.output);  // the token embedding table itself when tied

  Q8PackedWeights packed;
  std::vector<int64_t> offsets;
  std::vector<const model::WeightView*> chosen;
  for (const model::WeightView* v : matrices) {
    if (!v->present() || !kernels::Q8ActivationsApply(v->dtype) || v->cols % 32 != 0) continue;
    offsets.push_back(packed.bytes_);
    chosen.push_back(v);
    packed.bytes_ += kernels::Q8PanelBytes(v->dtype, v->rows, v->cols);
    packed.source_bytes_ += RowBytes(v->dtype, v->rows * v->cols);
  }
  if (w.output.data == w.token_embd.data && kernels::Q8ActivationsApply(w.output.dtype)) {
    packed.reread_bytes_ = RowBytes(w.token_embd.dtype, w.token_embd.rows * w.token_embd.cols);
  }
  packed.storage_.reset(new (std::nothrow) uint8_t[static_cast<size_t>(packed.bytes_)]);
  if (packed.storage_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no host memory for the 8-bit activation weight panels (", packed.bytes_ >> 20,
        " MiB): free memory, or run with --cpu-activations f32, which reads the weights in place"));
  }
  struct Job {
    const std::vector<const model::WeightView*>& chosen;
    const std::vector<int64_t>& offsets;
    uint8_t* storage;
    const model::ModelSource& source;
  };
  const Job job{chosen, offsets, packed.storage_.get(), model.source()};
  const Job* j = &job;
  // Each tensor's mapped pages go as soon as it is packed, so the peak is
  // about one copy of the weights, not two.
  pool.ParallelFor(static_cast<int64_t>(chosen.size()), [j](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const model::WeightView& v = *j->chosen[i];
      kernels::PackQ8Panels(v.dtype, v.data, v.rows, v.cols, j->storage + j->offsets[i]);
      j->source.DropPages(v.data, static_cast<size_t>(RowBytes(v.dtype, v.rows * v.cols)));
    }
  });
  for (size_t i = 0; i < chosen.size(); ++i) {
    const model::WeightView& v = *chosen[i];
    packed.by_source_[v.data] = {.type = v.dtype, .n = v.rows, .k = v.cols, .data = packed.storage_.get() + offsets[i]};
  }
  return packed;
}

const kernels::Q8PanelWeights* Q8PackedWeights::Find(const void* rows) const {
  const auto it = by_source_.find(rows);
  return it == by_source_.end() ? nullptr : &it->second;
}

}  // namespace kvfleet::engine
