#include "kernels/cuda/emulation/emulated_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

// Switches stacks: saves the callee-saved registers on the current stack,
// stores its pointer in *from, loads `to` and restores the registers saved
// there (x86-64 System V). A fiber's first switch lands in FiberEntry.
extern "C" void kvfleet_emu_switch(void** from, void* to);
asm(R"(
  .text
  .p2align 4
  .globl kvfleet_emu_switch
  .type kvfleet_emu_switch, @function
kvfleet_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kvfleet_emu_switch, .-kvfleet_emu_switch
)");

namespace kvfleet::cuda_emu {
namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr int kWarp = 32;

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "CUDA emulation: %s\n", what);
  std::abort();
}

struct Fiber {
  ThreadState state;
  void* sp = nullptr;
  char* stack = nullptr;
  bool done = false;
  // The barrier generation this fiber waits to see pass; 0: not waiting.
  const uint64_t* wait_on = nullptr;
  uint64_t wait_until = 0;
};

struct WarpState {
  int arrived = 0;
  uint64_t generation = 0;
  // Two sets of slots, used by alternate shuffles: a lane that has read one
  // shuffle's values writes the next into the other set, and a third
  // shuffle can only start once every lane passed the second's barrier,
  // after reading the first. One barrier per shuffle.
  uint32_t slots[2][kWarp] = {};
  uint64_t shuffles[kWarp] = {};  // per lane: how many shuffles it has done
  // Butterflies: the first lane past the barrier computes every lane's
  // result once (fibers never run at the same time).
  float results[2][kWarp] = {};
  uint64_t computed[2] = {~uint64_t{0}, ~uint64_t{0}};
};

struct BlockRun {
  const std::function<void()>* kernel = nullptr;
  std::vector<Fiber> fibers;
  std::vector<WarpState> warps;
  int arrived = 0;
  uint64_t generation = 0;
  int live = 0;
  std::vector<int> warp_live;
  void* scheduler_sp = nullptr;
  int current = -1;
};

thread_local BlockRun* g_run = nullptr;
bool g_reverse = false;

Fiber& Me() { return g_run->fibers[static_cast<size_t>(g_run->current)]; }
int MyIndex() { return g_run->current; }

void Yield() { kvfleet_emu_switch(&Me().sp, g_run->scheduler_sp); }

[[noreturn]] void FiberEntry() {
  (*g_run->kernel)();
  Fiber& f = Me();
  f.done = true;
  --g_run->live;
  --g_run->warp_live[static_cast<size_t>(MyIndex() / kWarp)];
  // The last fibers waiting at a barrier may now all have arrived.
  if (g_run->live > 0 && g_run->arrived == g_run->live) {
    g_run->arrived = 0;
    ++g_run->generation;
  }
  WarpState& w = g_run->warps[static_cast<size_t>(MyIndex() / kWarp)];
  if (g_run->warp_live[static_cast<size_t>(MyIndex() / kWarp)] > 0 &&
      w.arrived == g_run->warp_live[static_cast<size_t>(MyIndex() / kWarp)]) {
    w.arrived = 0;
    ++w.generation;
  }
  void* unused;
  kvfleet_emu_switch(&unused, g_run->scheduler_sp);
  Die("a finished fiber was resumed");
}

// Arrive at a barrier of `expected` live threads; wait until it opens.
void Arrive(int& arrived, uint64_t& generation, int expected) {
  const uint64_t gen = generation;
  if (++arrived == expected) {
    arrived = 0;
    ++generation;
    return;
  }
  Fiber& f = Me();
  f.wait_on = &generation;
  f.wait_until = gen + 1;
  Yield();
  f.wait_on = nullptr;
}

void* InitialStack(Fiber& f) {
  char* top = f.stack + kStackBytes;
  top = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(top) & ~uintptr_t{15});
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                                     // FiberEntry's return address: never used
  *--sp = reinterpret_cast<void*>(&FiberEntry);        // where the first switch's ret lands
  for (int i = 0; i < 6; ++i) *--sp = nullptr;         // rbp, rbx, r12-r15
  return sp;
}

void RunBlock(BlockRun& run) {
  const int n = static_cast<int>(run.fibers.size());
  run.live = n;
  run.arrived = 0;
  for (int w = 0; w < n / kWarp; ++w) run.warp_live[static_cast<size_t>(w)] = kWarp;
  for (Fiber& f : run.fibers) {
    f.done = false;
    f.wait_on = nullptr;
    f.sp = InitialStack(f);
  }
  for (WarpState& w : run.warps) {
    std::fill(std::begin(w.shuffles), std::end(w.shuffles), 0);
    w.computed[0] = w.computed[1] = ~uint64_t{0};
  }
  while (run.live > 0) {
    bool progressed = false;
    for (int k = 0; k < n; ++k) {
      const int i = g_reverse ? n - 1 - k : k;
      Fiber& f = run.fibers[static_cast<size_t>(i)];
      if (f.done || (f.wait_on != nullptr && *f.wait_on < f.wait_until)) continue;
      run.current = i;
      kvfleet_emu_switch(&run.scheduler_sp, f.sp);
      progressed = true;
    }
    if (!progressed) Die("deadlock: threads wait at a barrier that other threads of the block never reach");
  }
}

}  // namespace

const ThreadState& Current() { return Me().state; }

void SyncThreads() { Arrive(g_run->arrived, g_run->generation, g_run->live); }

void SyncWarp() {
  const size_t w = static_cast<size_t>(MyIndex() / kWarp);
  Arrive(g_run->warps[w].arrived, g_run->warps[w].generation, g_run->warp_live[w]);
}

int LaneId() { return MyIndex() % kWarp; }

uint32_t ShuffleWord(uint32_t value, int source) {
  WarpState& w = g_run->warps[static_cast<size_t>(MyIndex() / kWarp)];
  if (g_run->warp_live[static_cast<size_t>(MyIndex() / kWarp)] != kWarp) Die("a shuffle in a warp with exited lanes");
  const int lane = LaneId();
  uint32_t* slots = w.slots[w.shuffles[lane]++ & 1];
  slots[lane] = value;
  SyncWarp();
  return slots[source & (kWarp - 1)];
}

namespace {

template <typename Combine>
float Butterfly(float value, int lanes, Combine combine) {
  WarpState& w = g_run->warps[static_cast<size_t>(MyIndex() / kWarp)];
  if (g_run->warp_live[static_cast<size_t>(MyIndex() / kWarp)] != kWarp) Die("a shuffle in a warp with exited lanes");
  const int lane = LaneId();
  const uint64_t n = w.shuffles[lane]++;
  uint32_t* slots = w.slots[n & 1];
  std::memcpy(&slots[lane], &value, 4);
  SyncWarp();
  if (w.computed[n & 1] != n) {
    // The exchanges on the offered values, for every lane at once.
    float v[kWarp];
    std::memcpy(v, slots, sizeof(v));
    for (int offset = lanes / 2; offset > 0; offset /= 2) {
      float next[kWarp];
      for (int l = 0; l < kWarp; ++l) next[l] = combine(v[l], v[l ^ offset]);
      std::memcpy(v, next, sizeof(v));
    }
    std::memcpy(w.results[n & 1], v, sizeof(v));
    w.computed[n & 1] = n;
  }
  return w.results[n & 1][lane];
}

}  // namespace

float ButterflySum(float value, int lanes) {
  return Butterfly(value, lanes, [](float a, float b) { return a + b; });
}

float ButterflyMax(float value, int lanes) {
  return Butterfly(value, lanes, [](float a, float b) { return std::fmax(a, b); });
}

void SetReverseOrder(bool reverse) { g_reverse = reverse; }

void Launch(Dim3 grid, Dim3 block, size_t shared_bytes, const std::function<void()>& kernel) {
  if (g_run != nullptr) Die("a kernel launched from inside a kernel");
  const unsigned threads = block.x * block.y * block.z;
  if (threads == 0 || threads % kWarp != 0 || threads > 1024) {
    Die("a block must be a whole number of warps, at most 1024 threads");
  }
  BlockRun run;
  run.kernel = &kernel;
  run.fibers.resize(threads);
  run.warps.resize(threads / kWarp);
  run.warp_live.resize(threads / kWarp);
  if (shared_bytes > 0) Die("dynamic shared memory is not emulated: declare __shared__ arrays");
  // Stacks are kept across launches: a launch is often a few microseconds of work.
  thread_local std::vector<std::unique_ptr<char[]>> stacks;
  while (stacks.size() < threads) stacks.emplace_back(new char[kStackBytes]);
  for (unsigned t = 0; t < threads; ++t) run.fibers[t].stack = stacks[t].get();
  g_run = &run;
  for (unsigned bz = 0; bz < grid.z; ++bz) {
    for (unsigned by = 0; by < grid.y; ++by) {
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        for (unsigned t = 0; t < threads; ++t) {
          ThreadState& s = run.fibers[t].state;
          s = {.thread_idx = Dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y)),
               .block_idx = Dim3(bx, by, bz),
               .block_dim = block,
               .grid_dim = grid};
        }
        RunBlock(run);
      }
    }
  }
  g_run = nullptr;
}

}  // namespace kvfleet::cuda_emu
