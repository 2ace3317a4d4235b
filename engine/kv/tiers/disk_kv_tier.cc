#include "engine/kv/tiers/disk_kv_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "engine/kv/tiers/kv_block_file.h"

namespace kvfleet::engine {
namespace {

namespace fs = std::filesystem;

constexpr char kTempSuffix[] = ".tmp";

absl::Status WriteWhole(int fd, std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, "write");
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// The whole file, or NOT_FOUND when it is gone.
absl::StatusOr<std::vector<uint8_t>> ReadWhole(const std::string& path, size_t at_most) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  std::vector<uint8_t> out;
  struct stat st {};
  if (::fstat(fd, &st) == 0) out.resize(std::min<size_t>(static_cast<size_t>(st.st_size), at_most));
  size_t done = 0;
  absl::Status status;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = absl::ErrnoToStatus(errno, absl::StrCat("read ", path));
      break;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (!status.ok()) return status;
  out.resize(done);
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DiskKvTier>> DiskKvTier::Open(const Options& options) {
  if (options.block_bytes <= 0) return absl::InvalidArgumentError("disk KV tier: block bytes must be positive");
  std::unique_ptr<DiskKvTier> tier(new DiskKvTier(options));
  if (tier->capacity_blocks_ < 1) {
    return absl::InvalidArgumentError(absl::StrCat("disk KV tier: ", options.capacity_bytes, " bytes hold no block of ",
                                                   tier->file_bytes_, " bytes; raise the disk tier's size"));
  }
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("disk KV tier: cannot create directory '", options.dir, "': ", ec.message()));
  }
  RETURN_IF_ERROR(tier->Scan());
  tier->io_ = std::thread([t = tier.get()] { t->IoLoop(); });
  return tier;
}

DiskKvTier::DiskKvTier(const Options& options)
    : options_(options),
      file_bytes_(static_cast<int64_t>(KvBlockHeaderBytes(options.identity)) + options.block_bytes),
      capacity_blocks_(options.capacity_bytes / file_bytes_) {}

DiskKvTier::~DiskKvTier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (io_.joinable()) io_.join();
}

absl::Status DiskKvTier::Scan() {
  struct Found {
    fs::file_time_type mtime;
    Entry entry;
  };
  std::vector<Found> found;
  std::error_code ec;
  fs::directory_iterator it(options_.dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("disk KV tier: cannot list directory '", options_.dir, "': ", ec.message()));
  }
  const size_t header_bytes = KvBlockHeaderBytes(options_.identity);
  int64_t foreign = 0, damaged = 0;
  for (const fs::directory_entry& e : it) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(kTempSuffix)) {
      fs::remove(e.path(), ec);  // a write a crash interrupted
      continue;
    }
    if (!name.ends_with(kKvBlockFileExtension) || !e.is_regular_file(ec)) continue;
    absl::StatusOr<std::vector<uint8_t>> head = ReadWhole(e.path().string(), header_bytes);
    absl::StatusOr<KvBlockFileHeader> h =
        head.ok() ? DecodeKvBlockHeader(options_.identity, *head) : absl::StatusOr<KvBlockFileHeader>(head.status());
    if (!h.ok()) {
      (absl::IsFailedPrecondition(h.status()) ? foreign : damaged)++;
      continue;
    }
    if (static_cast<int64_t>(h->payload_bytes) != options_.block_bytes || name != KvBlockFileName(h->hash)) {
      ++damaged;
      continue;
    }
    found.push_back(
        {.mtime = e.last_write_time(ec), .entry = {.hash = h->hash, .parent = h->parent, .published = h->published}});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  for (const Found& f : found) Adopt(f.entry);
  std::vector<Entry> over;
  Evict(&over);
  for (const Entry& e : over) fs::remove(PathOf(e.hash), ec);
  if (!lru_.empty()) {
    // A restarted worker's disk blocks are priced by their load time; time
    // one read now, or they would be priced as a recompute until the first
    // request happened to load some.
    const BlockHash& newest = lru_.back();
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<uint8_t>> file = ReadWhole(PathOf(newest), static_cast<size_t>(file_bytes_) + 1);
    if (file.ok() &&
        DecodeKvBlockFile(options_.identity, newest, static_cast<uint64_t>(options_.block_bytes), *file).ok()) {
      startup_read_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }
  KVFLEET_LOG_INFO("disk KV tier {}: adopted {} blocks ({} foreign files ignored, {} damaged), capacity {} blocks",
                   options_.dir, index_.size(), foreign, damaged, capacity_blocks_);
  return absl::OkStatus();
}

void DiskKvTier::Adopt(const Entry& entry) {
  lru_.push_back(entry.hash);
  index_[entry.hash] = {.entry = entry, .lru = std::prev(lru_.end())};
}

void DiskKvTier::Evict(std::vector<Entry>* evicted) {
  while (static_cast<int64_t>(index_.size()) > capacity_blocks_) {
    const BlockHash victim = lru_.front();
    lru_.pop_front();
    auto it = index_.find(victim);
    if (evicted != nullptr) evicted->push_back(it->second.entry);
    index_.erase(it);
    Enqueue({.kind = Op::kDelete, .hash = victim});
  }
}

bool DiskKvTier::writable() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writable_;
}

std::optional<BlockHash> DiskKvTier::ParentOf(const BlockHash& hash) const {
  const auto it = index_.find(hash);
  CHECK(it != index_.end()) << "ParentOf a block the disk tier does not hold";
  return it->second.entry.parent;
}

bool DiskKvTier::IsPublished(const BlockHash& hash) const {
  const auto it = index_.find(hash);
  CHECK(it != index_.end()) << "IsPublished of a block the disk tier does not hold";
  return it->second.entry.published;
}

std::vector<DiskKvTier::Entry> DiskKvTier::Entries() const {
  std::vector<Entry> out;
  out.reserve(lru_.size());
  for (const BlockHash& h : lru_) out.push_back(index_.at(h).entry);
  return out;
}

bool DiskKvTier::Write(const BlockHash& hash, const std::optional<BlockHash>& parent, std::span<const uint8_t> bytes,
                       std::vector<Entry>* evicted, bool published) {
  CHECK_EQ(static_cast<int64_t>(bytes.size()), options_.block_bytes);
  if (index_.contains(hash)) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!writable_ || static_cast<int64_t>(unwritten_.size()) >= options_.max_queued_writes) return false;
  }
  auto file =
      std::make_shared<std::vector<uint8_t>>(EncodeKvBlockFile(options_.identity, hash, parent, bytes, published));
  Adopt({.hash = hash, .parent = parent, .published = published});
  {
    std::lock_guard<std::mutex> lock(mu_);
    unwritten_[hash] = file;
  }
  Enqueue({.kind = Op::kWrite, .hash = hash, .parent = parent, .published = published, .bytes = std::move(file)});
  Evict(evicted);
  return true;
}

void DiskKvTier::Read(uint64_t job, std::vector<BlockHash> hashes) {
  for (const BlockHash& h : hashes) {
    if (auto it = index_.find(h); it != index_.end()) lru_.splice(lru_.end(), lru_, it->second.lru);
  }
  Enqueue({.kind = Op::kRead, .job = job, .hashes = std::move(hashes)});
}

void DiskKvTier::Forget(const BlockHash& hash) {
  const auto it = index_.find(hash);
  if (it == index_.end()) return;
  lru_.erase(it->second.lru);
  index_.erase(it);
  Enqueue({.kind = Op::kDelete, .hash = hash});
}

DiskKvTier::Completions DiskKvTier::TakeCompletions() {
  Completions out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::swap(out, done_);
  }
  for (const Entry& failed : out.failed_writes) {
    if (auto it = index_.find(failed.hash); it != index_.end()) {
      lru_.erase(it->second.lru);
      index_.erase(it);
    }
  }
  return out;
}

void DiskKvTier::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return reads_.empty() && writes_.empty() && !busy_; });
}

void DiskKvTier::Enqueue(Op op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    (op.kind == Op::kRead ? reads_ : writes_).push_back(std::move(op));
  }
  cv_.notify_one();
}

std::string DiskKvTier::PathOf(const BlockHash& hash) const {
  return (fs::path(options_.dir) / KvBlockFileName(hash)).string();
}

void DiskKvTier::IoLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !reads_.empty() || !writes_.empty(); });
    // Stopping: no one waits for reads any more; writes and deletes finish,
    // so a clean restart finds what this run put down.
    if (stop_) reads_.clear();
    if (stop_ && writes_.empty()) return;
    // Reads first: a request waits on them; writes only free host memory.
    std::deque<Op>& queue = reads_.empty() ? writes_ : reads_;
    Op op = std::move(queue.front());
    queue.pop_front();
    busy_ = true;
    lock.unlock();
    if (op.kind == Op::kRead) {
      ReadResult r = DoRead(std::move(op));
      lock.lock();
      done_.reads.push_back(std::move(r));
    } else if (op.kind == Op::kWrite) {
      DoWrite(op);
      lock.lock();
      unwritten_.erase(op.hash);
    } else {
      std::error_code ec;
      fs::remove(PathOf(op.hash), ec);
      lock.lock();
    }
    busy_ = false;
    if (reads_.empty() && writes_.empty()) idle_.notify_all();
  }
}

void DiskKvTier::DoWrite(const Op& op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!writable_) {
      done_.failed_writes.push_back({.hash = op.hash, .parent = op.parent, .published = op.published});
      return;
    }
  }
  const std::string path = PathOf(op.hash);
  const std::string temp = absl::StrCat(path, kTempSuffix);
  absl::Status status;
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("create ", temp));
  } else {
    status = WriteWhole(fd, *op.bytes);
    if (::close(fd) != 0 && status.ok()) status = absl::ErrnoToStatus(errno, absl::StrCat("close ", temp));
    // Renamed only once whole: a crash leaves a temporary file, never a short block file.
    if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
      status = absl::ErrnoToStatus(errno, absl::StrCat("rename ", temp));
    }
    if (!status.ok()) ::unlink(temp.c_str());
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (status.ok()) {
    done_.written_bytes += static_cast<int64_t>(op.bytes->size());
    return;
  }
  done_.failed_writes.push_back({.hash = op.hash, .parent = op.parent, .published = op.published});
  if (writable_) {
    writable_ = false;
    KVFLEET_LOG_ERROR("disk KV tier {}: {}; writing no more blocks there (reads go on)", options_.dir,
                      status.ToString());
  }
}

DiskKvTier::ReadResult DiskKvTier::DoRead(Op op) {
  const auto start = std::chrono::steady_clock::now();
  ReadResult r{.job = op.job, .hashes = std::move(op.hashes)};
  const size_t file_bytes = static_cast<size_t>(file_bytes_);
  for (const BlockHash& h : r.hashes) {
    std::shared_ptr<std::vector<uint8_t>> queued;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = unwritten_.find(h); it != unwritten_.end()) queued = it->second;
    }
    absl::StatusOr<std::vector<uint8_t>> file =
        queued ? absl::StatusOr<std::vector<uint8_t>>(*queued) : ReadWhole(PathOf(h), file_bytes + 1);
    if (!file.ok()) {
      r.error = file.status();
      break;
    }
    absl::StatusOr<std::span<const uint8_t>> payload =
        DecodeKvBlockFile(options_.identity, h, static_cast<uint64_t>(options_.block_bytes), *file);
    if (!payload.ok()) {
      r.error = payload.status();
      break;
    }
    r.blocks.emplace_back(payload->begin(), payload->end());
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace kvfleet::engine
