// NCCL loaded at run time: from the loader's search (the toolkit's
// library where the build machine has one), with every function bound and
// a version NCCL's own header would accept; and a missing file refused
// with what to do. No GPU is needed to load it.
#include "engine/executor/cuda/nccl_library.h"

#include <gtest/gtest.h>

namespace kvfleet::engine {
namespace {

TEST(NcclLibraryTest, LoadsWithEveryFunctionBound) {
  auto nccl = NcclLibrary::Load();
  if (!nccl.ok()) GTEST_SKIP() << "no NCCL on this machine's loader path: " << nccl.status();
  EXPECT_GE((*nccl)->version(), 21800);
  EXPECT_EQ((*nccl)->version() / 100, NCCL_VERSION_CODE / 100) << "the header built against and the library loaded";
  EXPECT_NE((*nccl)->AllGather, nullptr);
  EXPECT_NE((*nccl)->CommInitAll, nullptr);
  EXPECT_NE((*nccl)->Send, nullptr);
  EXPECT_NE((*nccl)->Recv, nullptr);
  EXPECT_EQ((*nccl)->Describe(ncclInvalidArgument).find("NCCL error 4"), 0u) << (*nccl)->Describe(ncclInvalidArgument);
  // Loaded once: a second call gives the same library.
  EXPECT_EQ(*NcclLibrary::Load(), *nccl);
}

TEST(NcclLibraryTest, AMissingLibraryIsRefusedSayingWhatToInstall) {
  auto missing = NcclLibrary::LoadFrom("/nonexistent/libnccl.so.2");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("/nonexistent/libnccl.so.2"), std::string::npos) << missing.status();
  EXPECT_NE(missing.status().message().find("nvidia-nccl-cu13"), std::string::npos) << missing.status();
}

TEST(NcclLibraryTest, ALibraryThatIsNotNcclIsRefusedNamingWhatItLacks) {
  auto other = NcclLibrary::LoadFrom("libm.so.6");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("ncclGetVersion"), std::string::npos) << other.status();
}

}  // namespace
}  // namespace kvfleet::engine
