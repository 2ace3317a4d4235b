#include "kernels/cpu/lora.h"

#include <algorithm>
#include <array>

namespace kvfleet::kernels {
namespace {

constexpr int kLanes = 16;

// Σ a[i]·b[i] in kLanes lane sums (lane i mod kLanes, in index order), then
// the lanes in order: a fixed order the compiler can vectorise without
// reassociating anything.
float Dot(const float* a, const float* b, int64_t n) {
  std::array<float, kLanes> lanes{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) lanes[l] += a[i] * b[i];
  float sum = 0.0f;
  for (float v : lanes) sum += v;
  return sum;
}

struct Job {
  std::span<const LoraSegment> segments;
  const float* x;
  int64_t in;
  float* y;
  int64_t out;
};

void AddRow(const LoraSegment& s, const Job& job, int64_t row) {
  std::array<float, kMaxLoraRank> h;
  const float* xr = job.x + row * job.in;
  for (int32_t r = 0; r < s.rank; ++r) h[r] = Dot(s.a + r * job.in, xr, job.in);
  float* yr = job.y + row * job.out;
  for (int64_t o = 0; o < job.out; ++o) yr[o] += s.scale * Dot(s.b + o * s.rank, h.data(), s.rank);
}

}  // namespace

void AddLora(std::span<const LoraSegment> segments, const float* x, int64_t in, float* y, int64_t out,
             ThreadPool& pool) {
  int64_t rows = 0;
  for (const LoraSegment& s : segments) {
    if (s.a != nullptr) rows += s.rows;
  }
  if (rows == 0) return;
  const Job job{.segments = segments, .x = x, .in = in, .y = y, .out = out};
  const Job* j = &job;  // one pointer captured: the pool's function never allocates
  // The segments' rows, counted in segment order, are the loop's indices.
  pool.ParallelFor(rows, [j](int64_t begin, int64_t end) {
    int64_t base = 0;
    for (const LoraSegment& s : j->segments) {
      if (s.a == nullptr) continue;
      for (int64_t i = std::max(begin, base); i < std::min(end, base + s.rows); ++i) {
        AddRow(s, *j, s.first_row + (i - base));
      }
      base += s.rows;
      if (base >= end) break;
    }
  });
}

}  // namespace kvfleet::kernels
