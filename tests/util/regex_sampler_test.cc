// Tests for SampleRegex and ToRe2Pattern (tests/util/regex_sampler.h): every sample fully
// matches under RE2, samples reach non-ASCII members, and bad patterns give nullopt.
#include "util/regex_sampler.h"

#include <gtest/gtest.h>
#include <re2/re2.h>

#include <set>

namespace lockstep {
namespace {

TEST(RegexSamplerTest, SamplesFullMatchUnderRe2) {
  const char* kPatterns[] = {
      "\\d{4}-\\d{2}-\\d{2}",
      "[a-z]+(,[a-z]+)*",
      "(red|green|blue)",
      "[^\"\\\\]*",
      ".{0,5}",
      "\\s\\S\\w\\W\\d\\D",
      "[\\u{1F600}-\\u{1F64F}]",
      "\\uD83D\\uDE00",
      "(?<n>a|b){2,}?",
      "x{0}y{3}z*",
      "[α-ω]+|[^\\x00-\\x7f]",
      "[]|a",
  };
  std::mt19937_64 rng(1);
  for (const char* p : kPatterns) {
    std::optional<std::string> rp = ToRe2Pattern(p);
    ASSERT_TRUE(rp.has_value()) << p;
    RE2 re(*rp);
    ASSERT_TRUE(re.ok()) << *rp << ": " << re.error();
    for (int i = 0; i < 200; ++i) {
      std::optional<std::string> s = SampleRegex(p, rng);
      ASSERT_TRUE(s.has_value()) << p;
      EXPECT_TRUE(RE2::FullMatch(*s, re)) << p << " / " << *rp << ": " << *s;
    }
  }
}

TEST(RegexSamplerTest, ReachesNonAsciiAndRespectsBounds) {
  std::mt19937_64 rng(2);
  std::set<std::size_t> lengths;
  bool non_ascii = false;
  for (int i = 0; i < 500; ++i) {
    std::optional<std::string> s = SampleRegex("[a\\u00e9\\u{1F600}]{2,4}", rng);
    ASSERT_TRUE(s.has_value());
    for (unsigned char c : *s) non_ascii |= c >= 0x80;
    std::optional<std::string> t = SampleRegex("b*", rng, /*max_repeat_extra=*/2);
    ASSERT_TRUE(t.has_value());
    lengths.insert(t->size());
  }
  EXPECT_TRUE(non_ascii);
  EXPECT_EQ(lengths, (std::set<std::size_t>{0, 1, 2}));
}

TEST(RegexSamplerTest, NulloptForBadOrEmptyPatterns) {
  std::mt19937_64 rng(3);
  EXPECT_FALSE(SampleRegex("a(", rng).has_value());
  EXPECT_FALSE(SampleRegex("(?=a)", rng).has_value());
  EXPECT_FALSE(SampleRegex("a[]", rng).has_value());
  EXPECT_FALSE(SampleRegex("([]|[]b)+", rng).has_value());
  // Branches that match nothing are never drawn, so a non-empty language always samples.
  for (int i = 0; i < 100; ++i) {
    std::optional<std::string> s = SampleRegex("([]|[]|[]|[]|[]|[]|[]|x){3}[]*([]|y)", rng);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(*s, "xxxy");
  }
  EXPECT_FALSE(ToRe2Pattern("a(").has_value());
  EXPECT_EQ(*ToRe2Pattern("(?<y>\\u00e9.)"), "(?P<y>\\x{e9}[^\\n\\r\\x{2028}\\x{2029}])");
}

}  // namespace
}  // namespace lockstep
