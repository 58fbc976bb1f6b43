// Uncertain tails (automata/cfg/tail_sort.h): the radix sort of (tail bytes, token) pairs gives
// std::sort's order on tails taken from real vocabularies, and a tail trie, built or reused,
// spells exactly the distinct pairs it was given, with no reuse across lists that differ only in
// their bytes (the same token ids of another vocabulary).
#include "automata/cfg/tail_sort.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/vocabulary.h"

namespace lockstep {
namespace {

std::vector<Tail> Sorted(std::vector<Tail> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// The (tail, token) pairs a trie spells: node i's path from the root is its tail.
std::set<std::pair<std::string, TokenId>> Spelled(const CfgPosition& pos) {
  std::set<std::pair<std::string, TokenId>> out;
  std::string path;
  for (std::size_t i = 0; i + 1 < pos.tails.size(); ++i) {
    const CfgPosition::TailNode& n = pos.tails[i];
    path.resize(n.depth - 1);
    path.push_back(static_cast<char>(n.byte));
    for (std::uint32_t j = n.token_begin; j < pos.tails[i + 1].token_begin; ++j) {
      out.emplace(path, pos.tail_tokens[j]);
    }
  }
  return out;
}

std::set<std::pair<std::string, TokenId>> Distinct(const std::vector<Tail>& v) {
  std::set<std::pair<std::string, TokenId>> out;
  for (const auto& [t, id] : v) out.emplace(std::string(t), id);
  return out;
}

class TailSortTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    auto v = Vocabulary::Load(GetParam());
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vocab_ = *v;
  }
  // Every token's bytes from its first `"` on: the tails after a JSON string's closing quote.
  std::vector<Tail> QuoteTails() const {
    std::vector<Tail> out;
    for (TokenId t = 0; t < vocab_->size(); ++t) {
      const std::string_view b = vocab_->TokenBytes(t);
      const std::size_t q = b.find('"');
      if (q != std::string_view::npos) out.emplace_back(b.substr(q), t);
    }
    return out;
  }
  std::shared_ptr<const Vocabulary> vocab_;
};

TEST_P(TailSortTest, SortsAsStdSortDoes) {
  TailSortBuffers buf;
  std::mt19937 rng(7);
  std::vector<std::vector<Tail>> lists;
  lists.push_back(QuoteTails());
  lists.push_back(lists[0]);
  std::reverse(lists.back().begin(), lists.back().end());  // tokens in descending order
  // Random suffixes of random tokens, repeats included, at sizes on both sides of the cutoff
  // (32) for std::sort.
  for (std::size_t n : {0, 1, 2, 31, 32, 33, 200, 1000, 6000}) {
    std::vector<Tail> v;
    for (std::size_t i = 0; i < n; ++i) {
      const TokenId t = static_cast<TokenId>(rng() % static_cast<std::uint32_t>(vocab_->size()));
      const std::string_view b = vocab_->TokenBytes(t);
      if (b.empty()) continue;
      v.emplace_back(b.substr(rng() % b.size()), t);
      if (rng() % 4 == 0) v.push_back(v[rng() % v.size()]);
    }
    lists.push_back(std::move(v));
  }
  // Tails 8 bytes and longer sharing their first 8, tails that differ only by trailing zero
  // bytes, and one tail for many tokens.
  static const std::string kEdge[] = {std::string("abcdefgh1"), std::string("abcdefgh"),
                                      std::string("abcdefgh0zz"), std::string("abcdefgh\0", 9),
                                      std::string("a"), std::string("a\0", 2),
                                      std::string("a\0\0", 3), std::string("\0", 1),
                                      std::string("abcdefg"), std::string("\xff\xfe", 2)};
  std::vector<Tail> edge;
  for (int rep = 0; rep < 12; ++rep) {
    for (const std::string& s : kEdge) {
      edge.emplace_back(s, static_cast<TokenId>(1000 - rep * 7 - s.size()));
    }
  }
  lists.push_back(edge);
  for (std::vector<Tail>& v : lists) {
    const std::vector<Tail> want = Sorted(v);
    SortTails(v, buf);
    ASSERT_EQ(v, want) << GetParam() << ": a list of " << v.size();
  }
}

TEST_P(TailSortTest, TriesSpellTheirListsAndAreReusedOnlyForTheSameBytes) {
  std::vector<Tail> quote = QuoteTails();
  ASSERT_GE(quote.size(), TailTrieBuilder::kMinKept);
  TailTrieBuilder builder;
  CfgPosition first;
  std::vector<Tail> copy = quote;
  builder.Build(copy, first);
  EXPECT_EQ(builder.reused(), 0);
  EXPECT_EQ(Spelled(first), Distinct(quote));
  EXPECT_EQ(first.num_uncertain, static_cast<std::int32_t>(Distinct(quote).size()));
  // The same list again: reused, the same trie.
  CfgPosition again;
  copy = quote;
  builder.Build(copy, again);
  EXPECT_EQ(builder.reused(), 1);
  EXPECT_TRUE(again.SameContent(first));
  EXPECT_EQ(again.num_uncertain, first.num_uncertain);
  // The same tokens and lengths with other bytes (the hash reads no bytes): built, not reused.
  std::string other;
  for (const auto& [t, id] : quote) other.append(t);
  for (char& c : other) c = c == 'a' ? 'b' : c == '"' ? '\'' : c;
  std::vector<Tail> changed;
  std::size_t at = 0;
  for (const auto& [t, id] : quote) {
    changed.emplace_back(std::string_view(other).substr(at, t.size()), id);
    at += t.size();
  }
  CfgPosition built;
  copy = changed;
  builder.Build(copy, built);
  EXPECT_EQ(builder.reused(), 1);
  EXPECT_EQ(Spelled(built), Distinct(changed));
  // A list longer than kMaxKept is built each time (what a thread keeps stays bounded).
  std::vector<Tail> longer;
  for (TokenId t = 0; longer.size() <= TailTrieBuilder::kMaxKept && t < vocab_->size(); ++t) {
    if (!vocab_->TokenBytes(t).empty()) longer.emplace_back(vocab_->TokenBytes(t), t);
  }
  ASSERT_GT(longer.size(), TailTrieBuilder::kMaxKept);
  for (int twice = 0; twice < 2; ++twice) {
    CfgPosition p;
    copy = longer;
    builder.Build(copy, p);
    EXPECT_EQ(Spelled(p), Distinct(longer));
  }
  EXPECT_EQ(builder.reused(), 1);
  // Short lists are built each time; a list of random tails spells itself.
  std::mt19937 rng(11);
  for (int round = 0; round < 20; ++round) {
    std::vector<Tail> v;
    const std::size_t n = rng() % 400;
    for (std::size_t i = 0; i < n; ++i) {
      const TokenId t = static_cast<TokenId>(rng() % static_cast<std::uint32_t>(vocab_->size()));
      const std::string_view b = vocab_->TokenBytes(t);
      if (!b.empty()) v.emplace_back(b.substr(rng() % b.size()), t);
    }
    const auto want = Distinct(v);
    for (int twice = 0; twice < 2; ++twice) {
      CfgPosition p;
      std::vector<Tail> c = v;
      builder.Build(c, p);
      EXPECT_EQ(Spelled(p), want) << "round " << round << ", list of " << n;
      ASSERT_FALSE(p.tails.empty());
      EXPECT_EQ(p.tails.back().token_begin, p.tail_tokens.size());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, TailSortTest,
                         ::testing::Values("llama3", "qwen2.5", "mistral"));

}  // namespace
}  // namespace lockstep
