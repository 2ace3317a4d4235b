// Teacher-forced evaluation's arithmetic: llama.cpp's window rule, the
// perplexity and its error, the divergence statistics on distributions
// whose answers are known, and the reference file's round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <vector>

#include "tests/testing/temp_dir.h"
#include "tools/eval/distribution_stats.h"
#include "tools/eval/eval_windows.h"
#include "tools/eval/reference_file.h"

namespace kvfleet::tools {
namespace {

TEST(EvalWindowsTest, WholeWindowsScoredFromTheirMiddle) {
  const std::vector<EvalWindow> w = EvalWindows(1100, 512);
  ASSERT_EQ(w.size(), 2u);  // the last 76 tokens make no whole window
  EXPECT_EQ(w[1].start, 512);
  EXPECT_EQ(w[0].first_scored, 256);
  EXPECT_EQ(w[0].scored(), 255);  // positions 256 .. 510 predict tokens 257 .. 511
  EXPECT_TRUE(EvalWindows(511, 512).empty());
  EXPECT_TRUE(EvalWindows(100, 3).empty());
}

TEST(DistributionStatsTest, AUniformModelsPerplexityIsItsVocabulary) {
  const std::vector<float> logits(1000, 0.25f);
  const std::vector<double> lp = LogSoftmax(logits);
  PerplexityStats ppl;
  for (int i = 0; i < 10; ++i) ppl.Add(-lp[static_cast<size_t>(i)]);
  EXPECT_NEAR(ppl.perplexity(), 1000.0, 1e-9);
  EXPECT_NEAR(ppl.perplexity_stderr(), 0.0, 1e-3);  // every NLL the same (up to rounding)
  PerplexityStats two;
  two.Add(1.0);
  two.Add(3.0);
  EXPECT_NEAR(two.perplexity(), std::exp(2.0), 1e-12);
  EXPECT_NEAR(two.perplexity_stderr(), std::exp(2.0) * 1.0, 1e-12);  // sample sd √2, over √2
}

TEST(DistributionStatsTest, TheDivergenceOfKnownDistributions) {
  const std::vector<double> p = {std::log(0.5), std::log(0.5)};
  const std::vector<double> q = {std::log(0.75), std::log(0.25)};
  DivergenceStats same, other;
  same.Add(p, p, 0);
  other.Add(p, q, 1);
  other.Add(q, q, 0);
  EXPECT_EQ(same.Summary().mean_kl, 0.0);
  EXPECT_EQ(same.Summary().same_top1, 1.0);
  const DivergenceSummary s = other.Summary();
  const double kl = 0.5 * std::log(0.5 / 0.75) + 0.5 * std::log(0.5 / 0.25);
  EXPECT_NEAR(s.max_kl, kl, 1e-12);
  EXPECT_NEAR(s.mean_kl, kl / 2, 1e-12);
  EXPECT_EQ(s.positions, 2);
  EXPECT_NEAR(s.same_top1, 1.0, 1e-12);                             // both argmax 0 (a tie goes to the first)
  EXPECT_NEAR(s.rms_delta_p, std::sqrt((0.25 * 0.25) / 2), 1e-12);  // p(token 1): 0.5 → 0.25
}

TEST(ReferenceFileTest, RoundTripsWithinTheFormatsErrorAndRefusesOtherFiles) {
  testing::TempDir dir;
  std::vector<float> logits(300);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)) * 6);
  const std::vector<double> lp = LogSoftmax(logits);
  {
    auto w = ReferenceWriter::Create(dir.Path("ref"), 300);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->Add(7, lp).ok());
    ASSERT_TRUE(w->Add(9, lp).ok());
    ASSERT_TRUE(w->Finish().ok());
  }
  auto r = ReferenceReader::Open(dir.Path("ref"), 300);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->positions(), 2);
  std::vector<double> back;
  auto token = r->Next(back);
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, 7);
  DivergenceStats d;
  d.Add(back, lp, 7);
  EXPECT_LT(d.Summary().mean_kl, 1e-5);
  EXPECT_GE(d.Summary().mean_kl, 0.0);
  ASSERT_TRUE(r->Next(back).ok());
  EXPECT_FALSE(r->Next(back).ok());  // two positions only

  const absl::Status vocab = ReferenceReader::Open(dir.Path("ref"), 301).status();
  EXPECT_NE(vocab.message().find("over 300 tokens; the model has 301"), std::string::npos) << vocab;
  std::ofstream(dir.Path("ref"), std::ios::binary | std::ios::app) << "x";
  EXPECT_NE(ReferenceReader::Open(dir.Path("ref"), 300).status().message().find("truncated"), std::string::npos);
  std::ofstream(dir.Path("junk")) << "not a reference at all, but long enough for a header";
  EXPECT_NE(ReferenceReader::Open(dir.Path("junk"), 300).status().message().find("not a kvfleet evaluation reference"),
            std::string::npos);
}

}  // namespace
}  // namespace kvfleet::tools
