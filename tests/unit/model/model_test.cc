// Opening a model by path and naming it: the rules the router, the workers
// and `kvfleet up` share.
#include "model/model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/testing/temp_dir.h"

namespace kvfleet::model {
namespace {

TEST(DefaultModelIdTest, AFileIsNamedWithoutItsExtension) {
  EXPECT_EQ(DefaultModelId("/a/b/SmolLM2-135M-Instruct.Q4_1.gguf"), "SmolLM2-135M-Instruct.Q4_1");
  EXPECT_EQ(DefaultModelId("model.gguf"), "model");
}

TEST(DefaultModelIdTest, ACheckpointDirectoryIsNamedWholeWithOrWithoutItsSlash) {
  const testing::TempDir tmp;
  const std::string dir = tmp.Path("qwen2.5-ft.v2");
  std::filesystem::create_directories(dir);
  EXPECT_EQ(DefaultModelId(dir), "qwen2.5-ft.v2");
  EXPECT_EQ(DefaultModelId(dir + "/"), "qwen2.5-ft.v2");
}

TEST(OpenModelSourceTest, AMissingPathSaysWhichFormsAreAccepted) {
  const absl::StatusOr<std::unique_ptr<ModelSource>> source = OpenModelSource("/no/such/model");
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(source.status().message().find("/no/such/model"), std::string::npos);
  EXPECT_NE(source.status().message().find("checkpoint directory"), std::string::npos);
}

}  // namespace
}  // namespace kvfleet::model
