#include "services/router/frontend/admin_identity.h"

#include <gtest/gtest.h>

#include <fstream>

#include "absl/strings/escaping.h"
#include "tests/testing/temp_dir.h"

namespace kvfleet::router {
namespace {

std::string HexDigest(const std::string& token) {
  const TenantTokens::Digest d = TenantTokens::Sha256(token);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

TEST(AdminIdentityTest, AnAdminIsATokenOfTheAdminFileOrAnAllowedCertificateName) {
  testing::TempDir dir;
  std::ofstream(dir.Path("admins")) << HexDigest("ops-secret") << " ops\n";
  absl::StatusOr<std::unique_ptr<AdminIdentity>> admins =
      AdminIdentity::Create({.tokens_path = dir.Path("admins"), .peers = {"deployer"}});
  ASSERT_TRUE(admins.ok()) << admins.status();
  const std::string good = "Bearer ops-secret", bad = "Bearer tenant-secret", malformed = "ops-secret";
  EXPECT_EQ(*(*admins)->Check(&good, {}), "ops");
  EXPECT_EQ(*(*admins)->Check(nullptr, {"router", "deployer"}), "peer:deployer");
  for (const std::string* auth : {&bad, &malformed, static_cast<const std::string*>(nullptr)}) {
    const absl::Status refused = (*admins)->Check(auth, {"router"}).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_NE(refused.message().find("needs an admin"), std::string_view::npos) << refused;
  }
}

TEST(AdminIdentityTest, WithoutOneEveryAdminCallIsRefusedSayingHowToConfigureIt) {
  absl::StatusOr<std::unique_ptr<AdminIdentity>> none = AdminIdentity::Create({});
  ASSERT_TRUE(none.ok());
  const std::string token = "Bearer anything";
  const absl::Status refused = (*none)->Check(&token, {"deployer"}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("--admin-tokens"), std::string_view::npos) << refused;
  EXPECT_EQ(AdminIdentity::Create({.tokens_path = "/no/such/file"}).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kvfleet::router
