#include "engine/executor/cuda/nccl_collective.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/cuda/device_runtime.h"
#include "kernels/cuda/rank_sum.h"

namespace kvfleet::engine {
inline namespace KVFLEET_CUDA_BUILD {

namespace cu = ::kvfleet::cuda;

namespace {

// NCCL's stream type is cudaStream_t, whose underlying type cu::Stream is.
cudaStream_t Native(cu::Stream stream) { return reinterpret_cast<cudaStream_t>(stream); }

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<NcclCollective>>> NcclCollective::CreateGroup(
    const std::vector<int>& devices) {
  ASSIGN_OR_RETURN(const NcclLibrary* nccl, NcclLibrary::Load());
  const int n = static_cast<int>(devices.size());
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  if (const ncclResult_t r = nccl->CommInitAll(comms.data(), n, devices.data()); r != ncclSuccess) {
    return absl::UnavailableError(
        absl::StrCat("NCCL could not join ", n, " GPUs into one replica: ", nccl->Describe(r)));
  }
  std::vector<std::unique_ptr<NcclCollective>> group;
  for (int r = 0; r < n; ++r) {
    group.emplace_back(new NcclCollective(*nccl, comms[static_cast<size_t>(r)], devices[static_cast<size_t>(r)], r, n));
  }
  for (auto& rank : group) {
    RETURN_IF_ERROR(cu::SetDevice(rank->device_));
    ASSIGN_OR_RETURN(rank->stream_, cu::CreateStream());
  }
  return group;
}

NcclCollective::~NcclCollective() {
  if (stream_ != nullptr) {
    (void)cu::SetDevice(device_);
    (void)cu::Synchronize(stream_);
    cu::DestroyStream(stream_);
  }
  if (!aborted_.load()) (void)nccl_.CommDestroy(comm_);
}

// From any rank's thread: ncclCommAbort is how NCCL ends calls another
// thread is blocked in.
void NcclCollective::Abort() {
  if (!aborted_.exchange(true)) (void)nccl_.CommAbort(comm_);
}

absl::Status NcclCollective::status() const {
  if (!status_.ok()) return status_;
  return aborted_.load() ? absl::AbortedError("another rank of the replica failed") : absl::OkStatus();
}

bool NcclCollective::Check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess && status_.ok()) {
    status_ = absl::InternalError(absl::StrCat("NCCL ", what, " on rank ", rank_, ": ", nccl_.Describe(result)));
  }
  return status_.ok();
}

bool NcclCollective::Check(const absl::Status& status) {
  if (!status.ok() && status_.ok()) status_ = status;
  return status_.ok();
}

bool NcclCollective::Reserve(cu::DeviceBuffer& buffer, size_t bytes) {
  if (buffer.size() >= bytes) return true;
  absl::StatusOr<cu::DeviceBuffer> grown = cu::DeviceBuffer::Allocate(bytes);
  if (!Check(grown.status())) return false;
  buffer = std::move(*grown);
  return true;
}

void NcclCollective::AllReduce(float* x, int64_t count) {
  if (size_ == 1 || !status().ok() || !Check(cu::SetDevice(device_))) return;
  const int64_t chunk = (count + size_ - 1) / size_;
  const auto offset = [&](int32_t q) { return std::min<int64_t>(count, q * chunk); };
  const auto length = [&](int32_t q) { return std::min<int64_t>(count, (q + 1) * chunk) - offset(q); };
  const size_t chunk_bytes = static_cast<size_t>(chunk) * sizeof(float);
  if (!Reserve(received_, chunk_bytes * static_cast<size_t>(size_)) || !Reserve(staged_, chunk_bytes) ||
      !Reserve(gathered_, chunk_bytes * static_cast<size_t>(size_))) {
    return;
  }
  // Every rank's piece of this rank's chunk, and this rank's of theirs.
  if (!Check(nccl_.GroupStart(), "group start")) return;
  for (int32_t q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    Check(nccl_.Send(x + offset(q), static_cast<size_t>(length(q)), ncclFloat32, q, comm_, Native(stream_)), "send");
    Check(nccl_.Recv(received_.as<float>() + q * chunk, static_cast<size_t>(length(rank_)), ncclFloat32, q, comm_,
                     Native(stream_)),
          "receive");
  }
  if (!Check(nccl_.GroupEnd(), "group end")) return;
  kernels::cuda::LaunchSumInRankOrder(x + offset(rank_), received_.as<float>(), chunk, size_, rank_, length(rank_),
                                      stream_);
  // The summed chunks back to every rank (all-gather needs equal sizes: padded).
  if (!Check(cu::CopyOnDevice(staged_.get(), x + offset(rank_), static_cast<size_t>(length(rank_)) * sizeof(float),
                              stream_)) ||
      !Check(nccl_.AllGather(staged_.get(), gathered_.get(), static_cast<size_t>(chunk), ncclFloat32, comm_,
                             Native(stream_)),
             "all-gather")) {
    return;
  }
  for (int32_t q = 0; q < size_; ++q) {
    if (length(q) == 0) continue;
    Check(cu::CopyOnDevice(x + offset(q), gathered_.as<float>() + q * chunk,
                           static_cast<size_t>(length(q)) * sizeof(float), stream_));
  }
  Check(cu::Synchronize(stream_));
}

void NcclCollective::AllGather(float* x, int64_t rows, int64_t width) {
  if (size_ == 1 || !status().ok() || !Check(cu::SetDevice(device_))) return;
  // Every rank's width.
  std::vector<int64_t> widths(static_cast<size_t>(size_));
  if (!Reserve(staged_, sizeof(int64_t)) || !Reserve(gathered_, sizeof(int64_t) * static_cast<size_t>(size_)) ||
      !Check(cu::CopyToDevice(staged_.get(), &width, sizeof(int64_t), stream_)) ||
      !Check(nccl_.AllGather(staged_.get(), gathered_.get(), 1, ncclInt64, comm_, Native(stream_)), "all-gather") ||
      !Check(cu::CopyToHost(widths.data(), gathered_.get(), widths.size() * sizeof(int64_t), stream_)) ||
      !Check(cu::Synchronize(stream_))) {
    return;
  }
  const int64_t widest = *std::max_element(widths.begin(), widths.end());
  int64_t total = 0;
  for (int64_t w : widths) total += w;
  const size_t padded = static_cast<size_t>(rows * widest) * sizeof(float);
  if (!Reserve(staged_, padded) || !Reserve(gathered_, padded * static_cast<size_t>(size_))) return;
  for (int64_t r = 0; r < rows; ++r) {
    Check(cu::CopyOnDevice(staged_.as<float>() + r * widest, x + r * width, static_cast<size_t>(width) * sizeof(float),
                           stream_));
  }
  if (!Check(nccl_.AllGather(staged_.get(), gathered_.get(), static_cast<size_t>(rows * widest), ncclFloat32, comm_,
                             Native(stream_)),
             "all-gather")) {
    return;
  }
  int64_t column = 0;
  for (int32_t q = 0; q < size_; ++q) {
    const int64_t w = widths[static_cast<size_t>(q)];
    for (int64_t r = 0; r < rows; ++r) {
      Check(cu::CopyOnDevice(x + r * total + column, gathered_.as<float>() + (q * rows + r) * widest,
                             static_cast<size_t>(w) * sizeof(float), stream_));
    }
    column += w;
  }
  Check(cu::Synchronize(stream_));
}

}  // namespace KVFLEET_CUDA_BUILD
}  // namespace kvfleet::engine
