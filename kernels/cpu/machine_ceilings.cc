#include "kernels/cpu/machine_ceilings.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_f32_avx512.h"
#include "kernels/cpu/matmul_q8.h"

namespace kvfleet::kernels {

// matmul_q8_vnni.cc: `iterations` rounds of 8 independent 512-bit vpdpbusd
// chains (64 multiply-adds each; Avx2DotLoop's make 32).
int64_t VnniDotLoop(int64_t iterations);

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::atomic<double> g_sink{0};  // keeps every loop's result alive

double FmaLoop(int64_t iterations) {
  __m256 a[10];
  for (int i = 0; i < 10; ++i) a[i] = _mm256_set1_ps(1.0f + 1e-7f * static_cast<float>(i));
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 10
    for (int i = 0; i < 10; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < 10; ++i) s = _mm256_add_ps(s, a[i]);
  return _mm256_cvtss_f32(s);
}

int64_t Avx2DotLoop(int64_t iterations) {
  __m256i acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_set1_epi32(i);
  const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  for (int64_t it = 0; it < iterations; ++it) {
    // Opaque to the compiler, so the products are not hoisted out of the loop.
    __m256i a = u;
    asm volatile("" : "+x"(a));
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, s), ones));
  }
  __m256i t = acc[0];
  for (int i = 1; i < 8; ++i) t = _mm256_add_epi32(t, acc[i]);
  return _mm256_extract_epi32(t, 0);
}

// Each ceiling is the best of this many passes: a pass takes milliseconds,
// and on a shared machine one in three can lose a core to someone else.
constexpr int kPasses = 7;

// The best of `passes` runs of `work` on every thread at once: seconds.
template <class Work>
double BestParallel(ThreadPool& pool, int passes, const Work& work) {
  double best = 1e30;
  for (int p = 0; p < passes; ++p) {
    const Clock::time_point start = Clock::now();
    pool.RunOnEachThread(work);
    best = std::min(best, Seconds(start, Clock::now()));
  }
  return best;
}

}  // namespace

MachineCeilings MeasureMachineCeilings(ThreadPool& pool, size_t buffer_bytes) {
  MachineCeilings c;
  const int threads = pool.num_threads();
  // Read bandwidth: each thread sums its own slice, the one it first
  // touched (on a NUMA machine, memory on its own node).
  const size_t floats = buffer_bytes / sizeof(float) / 64 * 64;
  std::unique_ptr<float[]> buffer(new float[floats]);
  const size_t slice = floats / static_cast<size_t>(threads) / 64 * 64;
  std::mutex mu;
  std::map<std::thread::id, size_t> slice_of;
  pool.RunOnEachThread([&] {
    size_t t;
    {
      std::lock_guard lock(mu);
      t = slice_of.size();
      slice_of[std::this_thread::get_id()] = t;
    }
    std::fill(buffer.get() + t * slice, buffer.get() + (t + 1) * slice, 1.0f);
  });
  const double read_s = BestParallel(pool, kPasses, [&] {
    size_t t;
    {
      std::lock_guard lock(mu);
      t = slice_of.at(std::this_thread::get_id());
    }
    const float* p = buffer.get() + t * slice;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < slice; i += 32) {
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
      a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
      a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
    }
    g_sink = g_sink + _mm256_cvtss_f32(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  });
  c.read_bytes_per_s = static_cast<double>(slice * threads * sizeof(float)) / read_s;

  constexpr int64_t kIterations = 4'000'000;
  // With the instruction set the float matmul runs (matmul.h).
  const bool wide = ActiveFloatDotIsa() == FloatDotIsa::kAvx512;
  c.fma_isa = std::string(FloatDotIsaName(ActiveFloatDotIsa()));
  const double fma_s = BestParallel(
      pool, kPasses, [&] { g_sink = g_sink + (wide ? Avx512FmaLoop(kIterations) : FmaLoop(kIterations)); });
  c.fma_flops_per_s = 2.0 * 10 * (wide ? 16 : 8) * kIterations * threads / fma_s;

  const Q8DotIsa isa = ActiveQ8DotIsa();
  c.int8_isa = std::string(Q8DotIsaName(isa));
  const double dot_s = BestParallel(pool, kPasses, [&] {
    const int64_t r = isa == Q8DotIsa::kAvx512Vnni ? VnniDotLoop(kIterations) : Avx2DotLoop(kIterations);
    g_sink = g_sink + static_cast<double>(r);
  });
  const double macs_per_instruction = isa == Q8DotIsa::kAvx512Vnni ? 64.0 : 32.0;
  c.int8_macs_per_s = macs_per_instruction * 8 * kIterations * threads / dot_s;
  return c;
}

}  // namespace kvfleet::kernels
