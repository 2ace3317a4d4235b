#include "services/router/frontend/tenant_tokens.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::router {
namespace {

using ::testing::HasSubstr;

std::string HexDigest(const std::string& token) {
  const TenantTokens::Digest d = TenantTokens::Sha256(token);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(TenantTokensTest, TheFileHoldsDigestsAndATokenFindsItsTenant) {
  // sha256("test"), as `printf %s test | sha256sum` prints it.
  EXPECT_EQ(HexDigest("test"), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
  testing::TempDir dir;
  Write(dir.Path("tokens"), "# digest tenant\n" + HexDigest("alpha-secret") + " team-a\n\n" +
                                absl::AsciiStrToUpper(HexDigest("beta-secret")) + "\tteam.b  # upper-case hex\n");
  auto tokens = TenantTokens::Load(dir.Path("tokens"));
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ((*tokens)->Lookup("alpha-secret"), "team-a");
  EXPECT_EQ((*tokens)->Lookup("beta-secret"), "team.b");
  EXPECT_EQ((*tokens)->Lookup("alpha-secre"), std::nullopt);
  EXPECT_EQ((*tokens)->Lookup(""), std::nullopt);
  EXPECT_EQ((*tokens)->Lookup(HexDigest("alpha-secret")), std::nullopt) << "the digest is not a token";
}

TEST(TenantTokensTest, MalformedFilesAreRefusedNamingTheLine) {
  const std::string d = HexDigest("x");
  EXPECT_THAT(TenantTokens::Parse("plain-token team\n", "f").status().message(),
              HasSubstr("f:1: the first field must be the token's SHA-256"));
  EXPECT_THAT(TenantTokens::Parse("\n" + d + "\n", "f").status().message(), HasSubstr("f:2: want"));
  EXPECT_THAT(TenantTokens::Parse(d + " team/evil\n", "f").status().message(), HasSubstr("tenant name"));
  EXPECT_THAT(TenantTokens::Parse(d + " a\n" + d + " b\n", "f").status().message(), HasSubstr("f:2: this digest"));
  EXPECT_EQ(TenantTokens::Load("/nonexistent/tokens").status().code(), absl::StatusCode::kNotFound);
}

TEST(TenantTokensTest, AChangedFileIsReloadedAndABrokenOneKeepsTheLastGoodTokens) {
  testing::TempDir dir;
  const std::string path = dir.Path("tokens");
  Write(path, HexDigest("old") + " team-a\n");
  auto tokens = TenantTokens::Load(path);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ((*tokens)->Lookup("old"), "team-a");

  Write(path, HexDigest("new") + " team-a\n");  // "old" revoked
  std::filesystem::last_write_time(path, std::filesystem::last_write_time(path) + std::chrono::seconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the file is looked at once a second
  EXPECT_EQ((*tokens)->Lookup("new"), "team-a");
  EXPECT_EQ((*tokens)->Lookup("old"), std::nullopt) << "revoked without a restart";

  Write(path, "not a token file\n");
  std::filesystem::last_write_time(path, std::filesystem::last_write_time(path) + std::chrono::seconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ((*tokens)->Lookup("new"), "team-a") << "a broken file keeps the previous tokens";
}

}  // namespace
}  // namespace kvfleet::router
