// The local-disk KV tier: one file per block (kv_block_file.h) in a
// directory, written and read by one I/O thread so the engine never waits
// on the disk. The index of what is on disk (least recently used order,
// bounded by a byte capacity) lives on the engine thread.
//
// Writes are queued with a copy of the block's bytes and enter the index at
// once; until the I/O thread has written one, a read of it is served from
// the queued copy. Reads come in jobs (a run of consecutive blocks of one
// prompt) and go before queued writes. A job's result holds the leading
// blocks that read back whole: the first missing, foreign, corrupt or
// truncated file ends it, and the blocks after it are recomputed.
//
// A failed write (a full disk, a vanished directory) turns the tier
// read-only: the failure is logged once and reported, and nothing is
// written again; reads of what is on disk keep working.
//
// Opening the directory adopts the block files a previous run left with the
// same identity (header checked now, payload on read), oldest first, and
// removes half-written temporary files. Files of another identity are left
// alone and never read.
//
// Thread-safety: every public method is for the engine thread; the I/O
// thread touches only the queue and the results, under a mutex.
//
//   ASSIGN_OR_RETURN(auto disk, DiskKvTier::Open({.dir = "/kv", .identity = id, .block_bytes = n,
//                                                 .capacity_bytes = c}));
//   disk->Write(hash, parent, bytes, &evicted);
//   disk->Read(job_id, {h1, h2, h3});
//   for (DiskKvTier::ReadResult& r : disk->TakeCompletions().reads) ...

#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/block_hash.h"

namespace kvfleet::engine {

class DiskKvTier {
 public:
  struct Options {
    std::string dir;
    std::string identity;  // kv_block_file.h: what decides the bytes
    int64_t block_bytes = 0;
    int64_t capacity_bytes = 0;  // files, headers included
    // Writes queued and not yet on disk, at most (each holds a copy of its
    // block): a disk slower than the evictions drops blocks rather than
    // grow memory without bound.
    int64_t max_queued_writes = 256;
  };
  struct Entry {
    BlockHash hash;
    std::optional<BlockHash> parent;
    bool published = true;  // false: a window page (kv_block_file.h), never announced
  };
  struct ReadResult {
    uint64_t job = 0;
    std::vector<BlockHash> hashes;             // what the job asked for
    std::vector<std::vector<uint8_t>> blocks;  // the leading ones read whole, in order
    absl::Status error;                        // why the block after them was not read (OK when all were)
    double seconds = 0.0;                      // the I/O thread's time on the job
  };
  struct Completions {
    std::vector<ReadResult> reads;
    std::vector<Entry> failed_writes;  // dropped from the index: announce the published ones gone
    int64_t written_bytes = 0;
  };

  // INVALID_ARGUMENT when the directory cannot be created or listed, or the
  // capacity holds no block.
  static absl::StatusOr<std::unique_ptr<DiskKvTier>> Open(const Options& options);
  ~DiskKvTier();  // finishes queued writes and deletes; drops queued reads

  int64_t num_blocks() const { return static_cast<int64_t>(index_.size()); }
  int64_t capacity_blocks() const { return capacity_blocks_; }
  int64_t file_bytes() const { return file_bytes_; }
  // Seconds one adopted block took to read and check at Open (the newest
  // file, its pages most likely cold after a restart); 0 with none
  // adopted. What a load costs until the tier has measured real loads.
  double startup_read_seconds() const { return startup_read_seconds_; }
  bool writable() const;
  bool Contains(const BlockHash& hash) const { return index_.contains(hash); }
  // Of a block it holds.
  std::optional<BlockHash> ParentOf(const BlockHash& hash) const;
  bool IsPublished(const BlockHash& hash) const;
  // Blocks adopted at Open or written since, least recently used first.
  std::vector<Entry> Entries() const;

  // Queues writing a block (its bytes copied now). Blocks pushed out to stay
  // within capacity are appended to `evicted`. False (nothing queued) when
  // the tier is read-only, already holds the hash, or has
  // max_queued_writes writes queued already.
  bool Write(const BlockHash& hash, const std::optional<BlockHash>& parent, std::span<const uint8_t> bytes,
             std::vector<Entry>* evicted, bool published = true);
  // Queues reading `hashes` in order for `job`; each becomes the most
  // recently used.
  void Read(uint64_t job, std::vector<BlockHash> hashes);
  // Drops a block from the index and its file (it read back damaged).
  void Forget(const BlockHash& hash);
  // What the I/O thread finished since the last call.
  Completions TakeCompletions();
  // Waits until the queue is empty (tests; a clean shutdown).
  void Flush();

 private:
  struct Op {
    enum Kind { kWrite, kRead, kDelete } kind;
    BlockHash hash;                               // kWrite, kDelete
    std::optional<BlockHash> parent;              // kWrite
    bool published = true;                        // kWrite
    std::shared_ptr<std::vector<uint8_t>> bytes;  // kWrite: the encoded file
    uint64_t job = 0;                             // kRead
    std::vector<BlockHash> hashes;                // kRead
  };
  struct Indexed {
    Entry entry;
    std::list<BlockHash>::iterator lru;
  };

  explicit DiskKvTier(const Options& options);
  absl::Status Scan();
  void Adopt(const Entry& entry);
  void Evict(std::vector<Entry>* evicted);
  void Enqueue(Op op);
  void IoLoop();
  void DoWrite(const Op& op);
  ReadResult DoRead(Op op);
  std::string PathOf(const BlockHash& hash) const;

  const Options options_;
  const int64_t file_bytes_;
  const int64_t capacity_blocks_;
  double startup_read_seconds_ = 0.0;
  // Engine thread.
  absl::flat_hash_map<BlockHash, Indexed> index_;
  std::list<BlockHash> lru_;  // least recently used first

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_;
  std::deque<Op> reads_ ABSL_GUARDED_BY(mu_);
  std::deque<Op> writes_ ABSL_GUARDED_BY(mu_);  // writes and deletes, in order
  // Encoded files queued and not yet on disk, for reads that overtake them.
  absl::flat_hash_map<BlockHash, std::shared_ptr<std::vector<uint8_t>>> unwritten_ ABSL_GUARDED_BY(mu_);
  Completions done_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool writable_ ABSL_GUARDED_BY(mu_) = true;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread io_;
};

}  // namespace kvfleet::engine
