#include "services/worker/transfer/kv_transfer_convert.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

namespace kvfleet::worker {
namespace {

engine::KvTransferIdentity SmolLm2() {
  return {.model_id = "SmolLM2-135M-Instruct.Q4_1.gguf@9c1e",
          .numerics = "cpu/1+kv-int8_rotated",
          .kv_dtype = "int8_rotated",
          .block_size = 16,
          .block_bytes = 184320};
}

// What the wire does to a message: its bytes, parsed back.
template <typename M>
M OverTheWire(const M& m) {
  M back;
  EXPECT_TRUE(back.ParseFromString(m.SerializeAsString()));
  return back;
}

TEST(KvTransferConvertTest, TheIdentityCrossesTheWireUnchanged) {
  v1::KvTransferIdentity p;
  ToProto(SmolLm2(), &p);
  const engine::KvTransferIdentity back = FromProto(OverTheWire(p));
  EXPECT_TRUE(engine::CheckKvTransferCompatible(SmolLm2(), back).ok());
  EXPECT_EQ(back.block_bytes, 184320);
  EXPECT_EQ(back.tensor_parallel, 1);
}

TEST(KvTransferConvertTest, AnUnsetTensorParallelDegreeIsOne) {
  v1::KvTransferIdentity p;
  ToProto(SmolLm2(), &p);
  p.clear_tensor_parallel();
  EXPECT_EQ(FromProto(p).tensor_parallel, 1);
}

TEST(KvTransferConvertTest, BlocksCrossTheWireAsTheSendersBytes) {
  const std::vector<BlockHash> hashes = {{.hi = 1, .lo = 2}, {.hi = 3, .lo = 4}};
  std::vector<std::vector<uint8_t>> blocks(2, std::vector<uint8_t>(5000));
  std::iota(blocks[0].begin(), blocks[0].end(), 0);
  std::iota(blocks[1].begin(), blocks[1].end(), 100);
  engine::KvBlockAssembler in(hashes, 5000);
  for (int b = 0; b < 2; ++b) {
    const std::optional<BlockHash> parent = b == 0 ? std::nullopt : std::optional<BlockHash>(hashes[0]);
    for (const engine::KvBlockChunk& c : engine::SplitKvBlock(hashes[b], parent, b == 0, blocks[b], 2048)) {
      v1::PullBlocksResponse r;
      ToProto(c, r.mutable_chunk());
      const v1::PullBlocksResponse wire = OverTheWire(r);
      ASSERT_TRUE(wire.has_chunk());
      auto chunk = FromProto(wire.chunk());
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      ASSERT_TRUE(in.Add(*chunk).ok());
    }
  }
  ASSERT_TRUE(in.Finish().ok());
  const std::vector<engine::KvBlockBytes> got = in.TakeCompleted();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].bytes, blocks[0]);
  EXPECT_EQ(got[1].bytes, blocks[1]);
  EXPECT_EQ(got[0].parent, std::nullopt);
  EXPECT_EQ(got[1].parent, hashes[0]);
  EXPECT_TRUE(got[0].published);
  EXPECT_FALSE(got[1].published);
}

TEST(KvTransferConvertTest, MalformedHashesAreRefusedWithTheirLength) {
  v1::KvBlockChunk c;
  c.set_hash(std::string(15, 'h'));
  EXPECT_EQ(FromProto(c).status().code(), absl::StatusCode::kDataLoss);
  c.set_hash(std::string(16, 'h'));
  c.set_parent(std::string(3, 'p'));
  const absl::Status s = FromProto(c).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("parent hash has 3 bytes"), std::string::npos) << s;
}

TEST(KvTransferConvertTest, APullNamesOneToTheLimitOfWellFormedHashes) {
  v1::PullBlocksRequest r;
  EXPECT_EQ(HashesFromProto(r, 8).status().code(), absl::StatusCode::kInvalidArgument);
  for (int i = 0; i < 3; ++i) r.add_block_hashes(BlockHash{.hi = 9, .lo = static_cast<uint64_t>(i)}.ToBytes());
  auto hashes = HashesFromProto(r, 8);
  ASSERT_TRUE(hashes.ok()) << hashes.status();
  EXPECT_EQ((*hashes)[2], (BlockHash{.hi = 9, .lo = 2}));
  const absl::Status many = HashesFromProto(r, 2).status();
  EXPECT_NE(many.message().find("at most 2 per pull"), std::string::npos) << many;
  r.add_block_hashes("short");
  const absl::Status bad = HashesFromProto(r, 8).status();
  EXPECT_NE(bad.message().find("block hash 3 of the pull has 5 bytes"), std::string::npos) << bad;
}

}  // namespace
}  // namespace kvfleet::worker
