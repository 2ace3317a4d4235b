// The model fingerprint and its cache: the cached value is the computed
// one; a record is read back instead of the weights while the files keep
// their size and modification time (a record planted with another value is
// what comes back), and is recomputed once a file changes; no cache
// directory, or one that cannot be written, still gives the right value.
#include "model/model_fingerprint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/testing/temp_dir.h"
#include "tools/tiny_model/tiny_model.h"

namespace kvfleet::model {
namespace {

namespace fs = std::filesystem;

class ModelFingerprintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tools::WriteTinyModel({.dtype = DType::kQ8_0, .seed = 5}, path_).ok());
    model_ = *Model::Load(path_);
  }

  // The one record in the cache, or "" when there is none.
  std::string OnlyRecord() const {
    const fs::path dir = fs::path(cache_) / "fingerprints";
    if (!fs::exists(dir)) return "";
    std::vector<fs::path> records{fs::directory_iterator(dir), fs::directory_iterator()};
    EXPECT_EQ(records.size(), 1u);
    return records.empty() ? "" : records[0].string();
  }

  testing::TempDir dir_;
  const std::string path_ = dir_.Path("t.gguf");
  const std::string cache_ = dir_.Path("cache");
  std::unique_ptr<Model> model_;
};

TEST_F(ModelFingerprintTest, TheCachedValueIsTheComputedOneAndIsReadBackWhileTheFileIsUnchanged) {
  const std::string computed = ModelFingerprint(*model_);
  ASSERT_EQ(computed.size(), 64u);
  EXPECT_EQ(CachedModelFingerprint(*model_, cache_), computed);
  const std::string record = OnlyRecord();
  ASSERT_FALSE(record.empty());
  // Plant another value: a second start must read it, not the weights.
  std::stringstream text;
  text << std::ifstream(record).rdbuf();
  std::string planted = text.str();
  const size_t at = planted.rfind(computed);
  ASSERT_NE(at, std::string::npos);
  const std::string other(64, 'a');
  planted.replace(at, 64, other);
  std::ofstream(record, std::ios::trunc) << planted;
  EXPECT_EQ(CachedModelFingerprint(*model_, cache_), other);
  // A model file whose modification time changed is read again.
  fs::last_write_time(path_, fs::last_write_time(path_) + std::chrono::seconds(5));
  const std::unique_ptr<Model> touched = *Model::Load(path_);
  EXPECT_EQ(CachedModelFingerprint(*touched, cache_), computed);
}

TEST_F(ModelFingerprintTest, ADamagedRecordIsIgnoredAndRewritten) {
  ASSERT_EQ(CachedModelFingerprint(*model_, cache_), ModelFingerprint(*model_));
  std::ofstream(OnlyRecord(), std::ios::trunc) << "kvfleet-fingerprint-v1\ngarbage";
  EXPECT_EQ(CachedModelFingerprint(*model_, cache_), ModelFingerprint(*model_));
  std::stringstream text;
  text << std::ifstream(OnlyRecord()).rdbuf();
  EXPECT_NE(text.str().find(ModelFingerprint(*model_)), std::string::npos);
}

TEST_F(ModelFingerprintTest, WithoutAWritableCacheItIsStillComputed) {
  EXPECT_EQ(CachedModelFingerprint(*model_, ""), ModelFingerprint(*model_));
  // A file where the cache directory should be: nothing can be written under it.
  std::ofstream(dir_.Path("blocked")) << "a file, not a directory";
  EXPECT_EQ(CachedModelFingerprint(*model_, dir_.Path("blocked")), ModelFingerprint(*model_));
}

}  // namespace
}  // namespace kvfleet::model
