// The tier manager over a fake device: the tiers reach device blocks only
// through KvBlockCopier, so eviction and reload are tested without an
// executor (the engine suites run them over the real ones).
#include "engine/kv/tiers/kv_tier_manager.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/block_hash.h"
#include "engine/kv/block_pool.h"
#include "tests/testing/recording_kv_listener.h"

namespace kvfleet::engine {
namespace {

constexpr int64_t kBlockBytes = 64;

// Device memory as one byte vector per block; counts the copies.
class FakeDevice final : public KvBlockCopier {
 public:
  explicit FakeDevice(int32_t blocks) : bytes_(static_cast<size_t>(blocks), std::vector<uint8_t>(kBlockBytes)) {}
  absl::Status CopyKvBlockOut(BlockId block, std::span<uint8_t> out) override {
    ++outs_;
    std::memcpy(out.data(), bytes_[static_cast<size_t>(block.value())].data(), kBlockBytes);
    return absl::OkStatus();
  }
  absl::Status CopyKvBlockIn(BlockId block, std::span<const uint8_t> in) override {
    ++ins_;
    std::memcpy(bytes_[static_cast<size_t>(block.value())].data(), in.data(), kBlockBytes);
    return absl::OkStatus();
  }
  std::vector<uint8_t>& block(BlockId b) { return bytes_[static_cast<size_t>(b.value())]; }
  int outs_ = 0;
  int ins_ = 0;

 private:
  std::vector<std::vector<uint8_t>> bytes_;
};

BlockHash HashOf(int32_t i) { return ChainBlockHash(RootBlockHash("fake", ""), std::vector<int32_t>{i}); }

TEST(KvTierManagerTest, AnEvictedBlockComesBackFromHostMemoryBitIdentical) {
  auto device = std::make_unique<FakeDevice>(2);
  FakeDevice& d = *device;
  testing::RecordingKvListener events;
  auto made = KvTierManager::Create({.host_bytes = 4 * kBlockBytes}, std::move(device),
                                    {.block_bytes = kBlockBytes, .block_size = 16, .numerics = "fake"},
                                    /*allocate_host=*/{}, "fake", &events);
  ASSERT_TRUE(made.ok()) << made.status();
  KvTierManager& tiers = **made;
  BlockPool pool(2, &tiers);
  tiers.Attach(pool);

  // Block 0 computed and cached, then released: it is evicted to host
  // memory when the device needs both blocks for other work.
  const BlockId b = *pool.Allocate();
  for (int i = 0; i < kBlockBytes; ++i) d.block(b)[static_cast<size_t>(i)] = static_cast<uint8_t>(i * 7 + 1);
  const std::vector<uint8_t> computed = d.block(b);
  pool.Commit(b, HashOf(1), std::nullopt);
  pool.Release(b);
  const BlockId x = *pool.Allocate();
  const BlockId y = *pool.Allocate();
  EXPECT_EQ(d.outs_, 1);
  EXPECT_TRUE(tiers.InHost(HashOf(1)));
  EXPECT_FALSE(pool.IsCached(HashOf(1)));
  std::memset(d.block(b).data(), 0xEE, kBlockBytes);  // the slot is reused

  // A lookup copies it back into a free device block, committed.
  pool.Release(x);
  const std::optional<BlockId> back = tiers.LoadFromHost(HashOf(1));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(d.ins_, 1);
  EXPECT_EQ(d.block(*back), computed);
  EXPECT_TRUE(pool.IsCached(HashOf(1)));
  tiers.Poll();  // publishes the counters
  EXPECT_EQ(tiers.stats().host.hit_blocks, 1);
  pool.Release(y);
  pool.Release(*back);
}

TEST(KvTierManagerTest, AFormatThatCannotBeCopiedOrAHostTierUnderTwoBlocksIsRefused) {
  auto none = KvTierManager::Create({.host_bytes = 1 << 20}, std::make_unique<FakeDevice>(1), {.block_bytes = 0}, {},
                                    "fake", nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("cannot copy KV blocks"), std::string::npos) << none.status();
  auto small = KvTierManager::Create({.host_bytes = kBlockBytes}, std::make_unique<FakeDevice>(1),
                                     {.block_bytes = kBlockBytes}, {}, "fake", nullptr);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("two blocks"), std::string::npos) << small.status();
  // The allocator's refusal is the operator's to fix.
  auto no_memory = KvTierManager::Create(
      {.host_bytes = 4 * kBlockBytes}, std::make_unique<FakeDevice>(1), {.block_bytes = kBlockBytes},
      [](size_t) { return nullptr; }, "fake", nullptr);
  ASSERT_FALSE(no_memory.ok());
  EXPECT_NE(no_memory.status().message().find("--kv-host-memory"), std::string::npos) << no_memory.status();
}

}  // namespace
}  // namespace kvfleet::engine
