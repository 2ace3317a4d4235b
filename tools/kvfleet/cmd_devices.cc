// `kvfleet devices`: what a worker on this machine, from this build, could
// run on: the CPU, every usable GPU, and the NCCL a replica split across
// GPUs would load. Like llama.cpp's --list-devices; an operator runs it in
// the image on a node before scheduling workers there.
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/status_macros.h"
#include "engine/executor/executor_factory.h"
#include "kernels/cpu/matmul_q8.h"
#include "tools/kvfleet/commands.h"

namespace kvfleet::tools {
namespace {

constexpr char kUsage[] = R"(usage: kvfleet devices [--require-nccl]

Lists what a worker here could run on: the CPU (hardware threads and the
int8 dot-product instructions the 8-bit path uses), every usable GPU (name,
compute capability, memory) or why there is none, and the NCCL library a
replica split across GPUs (--tensor-parallel N on a GPU) would load, from
KVFLEET_NCCL_LIBRARY or libnccl.so.2 on the loader's path. Loading NCCL needs
no GPU. --require-nccl: exit 1 when NCCL cannot be loaded.
)";

}  // namespace

absl::Status RunDevices(const Args& args) {
  if (WantsHelp(args)) return PrintHelp(kUsage);
  ASSIGN_OR_RETURN(Flags flags, Flags::Parse(args, {}, {"require-nccl"}));
  std::printf("cpu    %u hardware threads, int8 dot: %s\n", std::thread::hardware_concurrency(),
              std::string(kernels::Q8DotIsaName(kernels::ActiveQ8DotIsa())).c_str());
  std::string why_none;
  const std::vector<engine::GpuDescription> gpus = engine::DescribeCudaDevices(&why_none);
  if (gpus.empty()) std::printf("cuda   none: %s\n", why_none.c_str());
  for (const engine::GpuDescription& g : gpus) {
    std::printf("cuda:%d %s, sm_%d%d, %d multiprocessors, %.1f GiB\n", g.index, g.name.c_str(), g.major, g.minor,
                g.multiprocessors, static_cast<double>(g.total_memory) / (1 << 30));
  }
  absl::StatusOr<std::string> nccl = engine::DescribeNccl();
  std::printf("nccl   %s\n", nccl.ok() ? nccl->c_str() : std::string(nccl.status().message()).c_str());
  if (!nccl.ok() && flags.GetSwitch("require-nccl")) return nccl.status();
  return absl::OkStatus();
}

}  // namespace kvfleet::tools
