#include "engine/kv/transfer/kv_transfer_identity.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvfleet::engine {
namespace {

KvTransferIdentity Gemma() {
  const std::vector<int64_t> windows = {0, 512, 512, 512, 512, 512};
  return {.model_id = "gemma-3-270m.Q4_K_M.gguf@3f2a",
          .numerics = "cpu/1+kv-int8_rotated",
          .kv_dtype = "int8_rotated",
          .block_size = 16,
          .block_bytes = 36864,
          .page_groups = DescribeKvPageGroups(3, windows)};
}

TEST(KvTransferIdentityTest, TheSameIdentityIsCompatible) {
  EXPECT_TRUE(CheckKvTransferCompatible(Gemma(), Gemma()).ok());
}

TEST(KvTransferIdentityTest, EachFieldThatDiffersIsNamedWithBothValues) {
  KvTransferIdentity peer = Gemma();
  peer.kv_dtype = "f16";
  peer.numerics = "cpu/1";
  peer.block_bytes = 73728;
  const absl::Status s = CheckKvTransferCompatible(Gemma(), peer);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  const std::string m(s.message());
  EXPECT_NE(m.find("KV dtype: here \"int8_rotated\", peer \"f16\""), std::string::npos) << m;
  EXPECT_NE(m.find("numerics: here \"cpu/1+kv-int8_rotated\", peer \"cpu/1\""), std::string::npos) << m;
  EXPECT_NE(m.find("block bytes: here \"36864\", peer \"73728\""), std::string::npos) << m;
  EXPECT_EQ(m.find("model:"), std::string::npos) << "only what differs is named: " << m;
  EXPECT_NE(m.find("recomputes"), std::string::npos) << "says what happens instead: " << m;
}

TEST(KvTransferIdentityTest, EveryFieldTakesPart) {
  // One change at a time, every field: each alone refuses.
  const auto refused = [](void (*edit)(KvTransferIdentity&)) {
    KvTransferIdentity peer = Gemma();
    edit(peer);
    return !CheckKvTransferCompatible(Gemma(), peer).ok();
  };
  EXPECT_TRUE(refused([](KvTransferIdentity& i) { i.model_id = "other"; }));
  EXPECT_TRUE(refused([](KvTransferIdentity& i) { i.numerics = "cuda/1+kv-int8_rotated"; }));
  EXPECT_TRUE(refused([](KvTransferIdentity& i) { i.kv_dtype = "int8"; }));
  EXPECT_TRUE(refused([](KvTransferIdentity& i) { i.block_size = 32; }));
  EXPECT_TRUE(refused([](KvTransferIdentity& i) { i.block_bytes = 1; }));
  EXPECT_TRUE(refused([](KvTransferIdentity& i) { i.page_groups = ""; }));
  EXPECT_TRUE(refused([](KvTransferIdentity& i) { i.tensor_parallel = 2; }));
  EXPECT_TRUE(refused([](KvTransferIdentity& i) { i.adapter = "sql-lora"; }));
}

TEST(KvTransferIdentityTest, AnAdapterIdentityIsANameAndASha256Digest) {
  const std::string digest(64, 'a');
  EXPECT_TRUE(CheckKvAdapterIdentity("").ok()) << "the base model";
  EXPECT_TRUE(CheckKvAdapterIdentity("sql@" + digest).ok());
  EXPECT_TRUE(CheckKvAdapterIdentity("team@sql@" + digest).ok()) << "the digest follows the last @";
  EXPECT_TRUE(CheckKvAdapterIdentity(std::string(128, 'n') + "@" + digest).ok());
  for (const std::string& bad : std::vector<std::string>{
           "sql", "sql@", "@" + digest, "sql@" + digest.substr(1), "sql@" + digest + "0", "sql@" + std::string(64, 'A'),
           "sql@" + std::string(64, 'g'), std::string(129, 'n') + "@" + digest}) {
    const absl::Status s = CheckKvAdapterIdentity(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("not name@digest"), std::string::npos) << s;
  }
}

TEST(KvTransferIdentityTest, PageGroupsAreDescribedOnlyWhenThereAreSeveral) {
  const std::vector<int64_t> one = {0};
  EXPECT_EQ(DescribeKvPageGroups(30, one), "");
  const std::vector<int64_t> gemma = {0, 512, 512};
  EXPECT_EQ(DescribeKvPageGroups(3, gemma), "3 layers per page; windows 0,512,512");
}

}  // namespace
}  // namespace kvfleet::engine
