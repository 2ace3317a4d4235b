#include "common/flags/flags.h"

#include <gtest/gtest.h>

namespace kvfleet::flags {
namespace {

TEST(FlagsTest, ValuesSwitchesAndEqualsSyntax) {
  absl::StatusOr<Flags> f =
      Flags::Parse({"--model", "m.gguf", "--threads=4", "--ignore-eos"}, {"model", "threads"}, {"ignore-eos"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->GetString("model", ""), "m.gguf");
  EXPECT_EQ(*f->GetInt("threads", 0), 4);
  EXPECT_TRUE(f->GetSwitch("ignore-eos"));
  EXPECT_FALSE(f->Has("other"));
  EXPECT_TRUE(f->positional().empty());
}

TEST(FlagsTest, UnknownFlagsMissingValuesAndMalformedNumbersNameTheFlag) {
  EXPECT_NE(Flags::Parse({"--modle", "x"}, {"model"}, {}).status().message().find("--modle"), std::string::npos);
  EXPECT_NE(Flags::Parse({"--model"}, {"model"}, {}).status().message().find("needs a value"), std::string::npos);
  EXPECT_FALSE(Flags::Parse({"--ignore-eos=1"}, {}, {"ignore-eos"}).ok());
  absl::StatusOr<Flags> f = Flags::Parse({"--threads", "four"}, {"threads"}, {});
  ASSERT_TRUE(f.ok());
  EXPECT_NE(f->GetInt("threads", 0).status().message().find("--threads"), std::string::npos);
}

TEST(FlagsTest, ARepeatedFlagKeepsEveryValueAndSingleGettersTakeTheLast) {
  absl::StatusOr<Flags> f = Flags::Parse({"--stop", "a,b", "--stop", "\n", "--max-tokens", "3", "--max-tokens=5"},
                                         {"stop", "max-tokens"}, {});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->GetStrings("stop"), (std::vector<std::string>{"a,b", "\n"}));
  EXPECT_EQ(*f->GetInt("max-tokens", 0), 5);
  EXPECT_TRUE(f->GetStrings("absent").empty());
}

TEST(FlagsTest, PositionalArgumentsOnlyWhenAccepted) {
  const absl::StatusOr<Flags> none = Flags::Parse({"hello"}, {}, {});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("flags start with --"), std::string::npos);

  absl::StatusOr<Flags> f = Flags::Parse({"--system", "be brief", "What is 2+2?"}, {"system"}, {}, 1);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->positional(), (std::vector<std::string>{"What is 2+2?"}));
  EXPECT_EQ(f->GetString("system", ""), "be brief");

  const absl::StatusOr<Flags> two = Flags::Parse({"one", "two"}, {}, {}, 1);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("'two'"), std::string::npos) << two.status();
}

TEST(FlagsTest, ALoneDoubleDashMakesTheRestPositional) {
  absl::StatusOr<Flags> f = Flags::Parse({"--seed", "1", "--", "--not-a-flag"}, {"seed"}, {}, 1);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->positional(), (std::vector<std::string>{"--not-a-flag"}));
  EXPECT_FALSE(Flags::Parse({"--"}, {}, {}).ok()) << "no positional arguments: -- is an unknown flag";
}

TEST(FlagsTest, NumberListsAndTheirErrors) {
  absl::StatusOr<Flags> f = Flags::Parse({"--load", "0.3,0.7, 1.1"}, {"load", "other"}, {});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f->GetDoubleList("load", "1"), (std::vector<double>{0.3, 0.7, 1.1}));
  EXPECT_EQ(*f->GetDoubleList("other", "0.5"), (std::vector<double>{0.5}));
  absl::StatusOr<Flags> bad = Flags::Parse({"--load", "0.3,x"}, {"load"}, {});
  ASSERT_TRUE(bad.ok());
  EXPECT_NE(bad->GetDoubleList("load", "").status().message().find("'x' is not a number"), std::string::npos);
  EXPECT_FALSE(f->GetDoubleList("other", "").ok());
}

}  // namespace
}  // namespace kvfleet::flags
