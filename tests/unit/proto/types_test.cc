// The generated API types build, link and round-trip: the proto toolchain
// (protoc, the gRPC plugin, libprotobuf) works end to end.
#include <gtest/gtest.h>

#include "kvfleet/v1/types.pb.h"

namespace kvfleet {
namespace {

TEST(ProtoTypesTest, SamplingParamsRoundTripAndPresence) {
  v1::SamplingParams p;
  p.set_temperature(0.7f);
  p.set_top_p(0.9f);
  p.set_seed(42);
  const std::string wire = p.SerializeAsString();
  v1::SamplingParams back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_FLOAT_EQ(back.temperature(), 0.7f);
  EXPECT_TRUE(back.has_top_p());
  EXPECT_TRUE(back.has_seed());
  EXPECT_EQ(back.seed(), 42u);
  // Unset optional fields are distinguishable from zero: "off" vs an error.
  EXPECT_FALSE(back.has_repetition_penalty());
}

TEST(ProtoTypesTest, GarbageDoesNotParse) {
  v1::StoppingParams s;
  EXPECT_FALSE(s.ParseFromString(std::string("\xff\xff\xff\xff", 4)));
}

}  // namespace
}  // namespace kvfleet
