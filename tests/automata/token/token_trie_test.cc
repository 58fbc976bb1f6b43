// The flat token trie holds exactly the vocabulary's text tokens, each under the path that
// spells its bytes, with subtree jumps that skip exactly the node's descendants. A region view
// (TokenTrie::Region) and a counted view (TokenTrie::Counted) hold exactly what running the
// region's table, or the unit, over each token on its own gives.
#include "automata/token/token_trie.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/vocabulary.h"

namespace lockstep {
namespace {

void CheckTrie(const std::string& name) {
  auto vocab = Vocabulary::Load(name);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  TokenTrie trie(**vocab);
  std::vector<int> seen((*vocab)->size(), 0);
  std::string path;
  auto nodes = trie.nodes();
  for (std::uint32_t i = 0; i < trie.num_nodes(); ++i) {
    const auto& n = nodes[i];
    ASSERT_GE(n.depth, 1);
    ASSERT_LE(n.depth, path.size() + 1) << "node " << i << " skips a level";
    path.resize(n.depth - 1);
    path.push_back(static_cast<char>(n.byte));
    // The subtree of i is the following run of nodes deeper than i.
    std::uint32_t j = i + 1;
    while (j < trie.num_nodes() && nodes[j].depth > n.depth) ++j;
    ASSERT_EQ(n.subtree_end, j) << "node " << i;
    for (TokenId id : trie.TokensAt(i)) {
      ASSERT_EQ((*vocab)->TokenBytes(id), path) << "token " << id;
      ++seen[id];
    }
  }
  std::size_t text_tokens = 0;
  for (TokenId id = 0; id < (*vocab)->size(); ++id) {
    bool text = ((*vocab)->Kind(id) == TokenKind::kNormal || (*vocab)->Kind(id) == TokenKind::kByte) &&
                !(*vocab)->TokenBytes(id).empty();
    EXPECT_EQ(seen[id], text ? 1 : 0) << name << " token " << id;
    text_tokens += text;
  }
  EXPECT_EQ(trie.num_tokens(), text_tokens);
  EXPECT_GT(text_tokens, static_cast<std::size_t>((*vocab)->size()) * 9 / 10);
}

// BelowIn against the tokens themselves: for every node, the classes that hold every byte any
// token has after the node on its path (a leaf: every class), and each class's bytes against
// its definition.
void CheckBelowIn(const std::string& name) {
  auto vocab = Vocabulary::Load(name);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  TokenTrie trie(**vocab);
  auto nodes = trie.nodes();
  std::array<std::uint8_t, 256> byte_in{};
  for (int k = 0; k < TokenTrie::kNumSubtreeClasses; ++k) {
    const auto bytes = TokenTrie::SubtreeClassBytes(k);
    for (int b = 0; b < 256; ++b) {
      const bool in = std::find(bytes.begin(), bytes.end(), b) != bytes.end();
      ASSERT_EQ(in, TokenTrie::InSubtreeClass(k, static_cast<std::uint8_t>(b))) << k << " " << b;
      if (in) byte_in[b] |= static_cast<std::uint8_t>(1u << k);
    }
  }
  EXPECT_EQ(TokenTrie::SubtreeClassBytes(TokenTrie::kDigits).size(), 10u);
  EXPECT_EQ(TokenTrie::SubtreeClassBytes(TokenTrie::kHexDigits).size(), 22u);
  EXPECT_EQ(TokenTrie::SubtreeClassBytes(TokenTrie::kPrintable).size(), 93u);
  std::vector<std::uint8_t> expected(trie.num_nodes(), 0xFF);
  std::vector<std::uint32_t> path;  // node index per depth - 1
  std::string bytes;
  std::size_t narrowed = 0;
  for (std::uint32_t j = 0; j < trie.num_nodes(); ++j) {
    path.resize(nodes[j].depth - 1);
    bytes.resize(nodes[j].depth - 1);
    path.push_back(j);
    bytes.push_back(static_cast<char>(nodes[j].byte));
    if (trie.TokensAt(j).empty()) continue;
    // The ancestor at depth p has bytes[p..] below it on this token's path.
    std::uint8_t in = 0xFF;
    for (std::size_t p = bytes.size(); p-- > 1;) {
      in &= byte_in[static_cast<std::uint8_t>(bytes[p])];
      expected[path[p - 1]] &= in;
    }
  }
  for (std::uint32_t i = 0; i < trie.num_nodes(); ++i) {
    ASSERT_EQ(trie.BelowIn(i), expected[i]) << name << " node " << i;
    narrowed += expected[i] != 0xFF && expected[i] != 0;
  }
  EXPECT_GT(narrowed, 1000u) << name;  // (the digits' and the letters' subtrees, at least)
}

TEST(TokenTrieTest, BelowInHoldsTheClassesOfEveryByteBelowLlama3) { CheckBelowIn("llama3"); }
TEST(TokenTrieTest, BelowInHoldsTheClassesOfEveryByteBelowGpt2) { CheckBelowIn("gpt2"); }

TEST(TokenTrieTest, Llama3HoldsEveryTextTokenOnce) { CheckTrie("llama3"); }
TEST(TokenTrieTest, MistralSharesNodesForDuplicateBytes) { CheckTrie("mistral"); }
TEST(TokenTrieTest, Gpt2) { CheckTrie("gpt2"); }

// Region tables (256 entries per state): byte b from state q goes to table[q * 256 + b], or dies
// (kRegionDead), or leaves the region (kRegionExit).
using Table = std::vector<std::int16_t>;
constexpr std::int16_t kDead = TokenTrie::kRegionDead, kExit = TokenTrie::kRegionExit;

Table NewTable(int states) { return Table(static_cast<std::size_t>(states) * 256, kDead); }
void Set(Table& t, int q, int from, int to, std::int16_t next) {
  for (int b = from; b <= to; ++b) t[static_cast<std::size_t>(q) * 256 + b] = next;
}

// A JSON string body: printable ASCII but `"` and `\` loop; `\` and an escape letter; UTF-8
// sequences of two and three bytes; `"` leaves. With `u_dies`, `\u` dies instead of leaving:
// a region of the same byte set, another view.
Table StringBody(bool u_dies = false) {
  Table t = NewTable(4);
  Set(t, 0, 0x20, 0x7F, 0);
  Set(t, 0, '"', '"', kExit);
  Set(t, 0, '\\', '\\', 1);
  Set(t, 0, 0xC2, 0xDF, 2);
  Set(t, 0, 0xE0, 0xEF, 3);
  for (int e : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'}) Set(t, 1, e, e, 0);
  Set(t, 1, 'u', 'u', u_dies ? kDead : kExit);  // (the hex digits are walked on by the caller)
  Set(t, 2, 0x80, 0xBF, 0);
  Set(t, 3, 0x80, 0xBF, 2);
  return t;
}

// Every well-formed UTF-8 character (Unicode, Table 3-7) loops in state 1, entered from state 0
// on the same bytes (the shape of a grammar's string view); with `but`, one two-byte character
// (C3 A9, `é`) dies instead, which no byte set tells.
Table Utf8Body(bool but) {
  Table t = NewTable(6);
  for (int q : {0, 1}) {
    Set(t, q, 0x20, 0x7F, 1);
    Set(t, q, '"', '"', kExit);
    Set(t, q, 0xC2, 0xDF, 2);
    Set(t, q, 0xE0, 0xE0, 3);
    Set(t, q, 0xE1, 0xEC, 4);
    Set(t, q, 0xED, 0xED, 5);
    Set(t, q, 0xEE, 0xEF, 4);
  }
  Set(t, 2, 0x80, 0xBF, 1);
  Set(t, 3, 0xA0, 0xBF, 2);
  Set(t, 4, 0x80, 0xBF, 2);
  Set(t, 5, 0x80, 0x9F, 2);
  // Four bytes: F0 90-BF, F1-F3 80-BF, F4 80-8F, then two continuation bytes (states 6, 7, 8).
  t.resize(static_cast<std::size_t>(9) * 256, kDead);
  for (int q : {0, 1}) {
    Set(t, q, 0xF0, 0xF0, 6);
    Set(t, q, 0xF1, 0xF3, 7);
    Set(t, q, 0xF4, 0xF4, 8);
  }
  Set(t, 6, 0x90, 0xBF, 4);
  Set(t, 7, 0x80, 0xBF, 4);
  Set(t, 8, 0x80, 0x8F, 4);
  if (but) {
    // C3 goes to a state of its own where A9 dies.
    t.resize(static_cast<std::size_t>(10) * 256, kDead);
    Set(t, 0, 0xC3, 0xC3, 9);
    Set(t, 1, 0xC3, 0xC3, 9);
    Set(t, 9, 0x80, 0xBF, 1);
    Set(t, 9, 0xA9, 0xA9, kDead);
  }
  return t;
}

// Adds to `t` every well-formed UTF-8 character from state q to state r (new states for the
// continuation bytes, after the table's last).
void AddUtf8(Table& t, int q, int r) {
  auto fresh = [&t] {
    const int n = static_cast<int>(t.size() / 256);
    t.resize(t.size() + 256, kDead);
    return n;
  };
  const int one = fresh(), two = fresh(), three = fresh();  // continuation bytes still to come
  Set(t, one, 0x80, 0xBF, r);
  Set(t, two, 0x80, 0xBF, one);
  Set(t, three, 0x80, 0xBF, two);
  Set(t, q, 0xC2, 0xDF, one);
  Set(t, q, 0xE1, 0xEC, two);
  Set(t, q, 0xEE, 0xEF, two);
  Set(t, q, 0xF1, 0xF3, three);
  const int e0 = fresh(), ed = fresh(), f0 = fresh(), f4 = fresh();
  Set(t, q, 0xE0, 0xE0, e0);
  Set(t, e0, 0xA0, 0xBF, one);
  Set(t, q, 0xED, 0xED, ed);
  Set(t, ed, 0x80, 0x9F, one);
  Set(t, q, 0xF0, 0xF0, f0);
  Set(t, f0, 0x90, 0xBF, two);
  Set(t, q, 0xF4, 0xF4, f4);
  Set(t, f4, 0x80, 0x8F, two);
}

// A string body of at least two characters: the first two are counted (states 0 and 1), then
// the loop (state 2); `"` leaves from the loop only, `\` dies anywhere.
Table CountedEntry() {
  Table t = NewTable(3);
  for (int q : {0, 1, 2}) {
    Set(t, q, 0x20, 0x7F, q == 2 ? 2 : q + 1);
    Set(t, q, '\\', '\\', kDead);
    AddUtf8(t, q, q == 2 ? 2 : q + 1);
  }
  Set(t, 0, '"', '"', kDead);
  Set(t, 1, '"', '"', kDead);
  Set(t, 2, '"', '"', kExit);
  return t;
}

// Words and single spaces: a letter or digit loops; a space must be followed by one; `"` leaves
// after a letter only.
Table Words() {
  Table t = NewTable(2);
  Set(t, 0, 'a', 'z', 0);
  Set(t, 0, 'A', 'Z', 0);
  Set(t, 0, '0', '9', 0);
  Set(t, 0, ' ', ' ', 1);
  Set(t, 0, '"', '"', kExit);
  Set(t, 1, 'a', 'z', 0);
  Set(t, 1, 'A', 'Z', 0);
  Set(t, 1, '0', '9', 0);
  return t;
}

// The shape the grammar's views have: an entry row (state 0: the first bytes, into the loop),
// then the loop (state 1), which `"` leaves; a digit may only come first.
Table EntryRow() {
  Table t = NewTable(2);
  Set(t, 0, 0x20, 0x7E, 1);
  Set(t, 0, '"', '"', kDead);
  Set(t, 1, 0x20, 0x7E, 1);
  Set(t, 1, '0', '9', kDead);
  Set(t, 1, '"', '"', kExit);
  return t;
}

// Two states that alternate on every byte: state 0 keeps itself on no byte, so no token is taken
// from its byte set and every one runs the table.
Table Alternating() {
  Table t = NewTable(2);
  Set(t, 0, 0x01, 0xFF, 1);
  Set(t, 1, 0x01, 0xFF, 0);
  Set(t, 0, '"', '"', kExit);
  Set(t, 1, '\n', '\n', kDead);
  return t;
}

// Lowercase letters only: most tokens leave (a space, a capital...), so there is no view.
Table Narrow() {
  Table t = NewTable(1);
  Set(t, 0, 'a', 'z', 0);
  Set(t, 0, 0x00, 'a' - 1, kExit);
  Set(t, 0, 'z' + 1, 0xFF, kExit);
  return t;
}

// A table's run form (TokenTrie::TableOfRuns): per state, (entry, last byte) for each maximal run
// of one entry, in byte order.
std::vector<std::int16_t> RunForm(const Table& t) {
  std::vector<std::int16_t> runs;
  for (std::size_t q = 0; q < t.size() / 256; ++q) {
    for (int b = 0; b < 256; ++b) {
      const std::int16_t e = t[q * 256 + static_cast<std::size_t>(b)];
      if (b == 255 || t[q * 256 + static_cast<std::size_t>(b) + 1] != e) {
        runs.push_back(e);
        runs.push_back(static_cast<std::int16_t>(b));
      }
    }
  }
  return runs;
}

void CheckRegions(const std::string& name) {
  auto vocab = Vocabulary::Load(name);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  const Vocabulary& v = **vocab;
  TokenTrie trie(v);
  const std::vector<std::pair<const char*, Table>> tables = {
      {"string body", StringBody()}, {"string body, \\u dead", StringBody(true)},
      {"words", Words()}, {"entry row", EntryRow()},
      {"alternating", Alternating()}, {"narrow", Narrow()}, {"UTF-8 body", Utf8Body(false)},
      {"UTF-8 body but one character", Utf8Body(true)}, {"counted entry", CountedEntry()}};
  for (const auto& [what, table] : tables) {
    // Every text token run over the table on its own: inside, or leaving from state q at byte d.
    std::vector<std::int8_t> inside(v.size(), 0);
    std::vector<std::pair<std::int32_t, std::int32_t>> exit(v.size(), {-1, -1});
    std::int64_t insides = 0, exits = 0;
    for (TokenId id = 0; id < v.size(); ++id) {
      const std::string_view bytes = v.TokenBytes(id);
      const bool text = (v.Kind(id) == TokenKind::kNormal || v.Kind(id) == TokenKind::kByte) &&
                        !bytes.empty();
      if (!text) continue;
      std::int32_t q = 0;
      std::size_t d = 0;
      for (; d < bytes.size(); ++d) {
        const std::int16_t t = table[static_cast<std::size_t>(q) * 256 +
                                     static_cast<std::uint8_t>(bytes[d])];
        if (t == kDead) break;
        if (t == kExit) {
          exit[id] = {q, static_cast<std::int32_t>(d)};
          ++exits;
          break;
        }
        q = t;
      }
      if (d == bytes.size()) inside[id] = 1, ++insides;
    }
    // The run form names the same table and finds the same view (or none); asking whether it
    // is built builds nothing.
    const std::vector<std::int16_t> runs = RunForm(table);
    EXPECT_EQ(TokenTrie::TableOfRuns(runs), table) << name << ", " << what;
    EXPECT_EQ(trie.BuiltRegionOfRuns(runs), nullptr) << name << ", " << what;
    EXPECT_EQ(trie.BuiltRegion(table), nullptr) << name << ", " << what;
    const TokenTrie::RegionView* view = trie.Region(table);
    EXPECT_EQ(trie.RegionOfRuns(runs), view) << name << ", " << what;
    EXPECT_EQ(trie.BuiltRegionOfRuns(runs), view) << name << ", " << what;
    if (exits > static_cast<std::int64_t>(trie.num_tokens() / 4)) {
      EXPECT_EQ(view, nullptr) << name << ", " << what << ": " << exits << " tokens leave";
      continue;
    }
    ASSERT_NE(view, nullptr) << name << ", " << what;
    EXPECT_EQ(view->inside_count, insides) << name << ", " << what;
    EXPECT_EQ(view->exit_tokens, exits) << name << ", " << what;
    for (TokenId id = 0; id < v.size(); ++id) {
      const bool bit = id / 32 < static_cast<TokenId>(view->inside_bits.size()) &&
                       ((view->inside_bits[id / 32] >> (id % 32)) & 1) != 0;
      ASSERT_EQ(bit, inside[id] == 1) << name << ", " << what << ": token " << id;
    }
    // Each leaving token once, in the group of the state it leaves from, under the path that
    // spells its bytes from the leaving byte on.
    std::vector<int> listed(v.size(), 0);
    for (const TokenTrie::RegionView::Group& g : view->groups) {
      std::string path;
      for (std::uint32_t i = g.begin; i < g.end; ++i) {
        const TokenTrie::Node& n = view->nodes[i];
        path.resize(n.depth - 1);
        path.push_back(static_cast<char>(n.byte));
        for (std::uint32_t k = n.token_begin; k < view->nodes[i + 1].token_begin; ++k) {
          const TokenId id = view->tokens[k];
          ASSERT_EQ(exit[id].first, g.q) << name << ", " << what << ": token " << id;
          ASSERT_EQ(exit[id].second, view->offsets[k]) << name << ", " << what << ": token " << id;
          ASSERT_EQ(v.TokenBytes(id).substr(view->offsets[k]), path) << name << ", " << what;
          ++listed[id];
        }
      }
    }
    for (TokenId id = 0; id < v.size(); ++id) {
      ASSERT_EQ(listed[id], exit[id].first >= 0 ? 1 : 0) << name << ", " << what << ": " << id;
    }
  }
}

TEST(TokenTrieTest, RegionViewsEqualRunningEveryTokenLlama3) { CheckRegions("llama3"); }
TEST(TokenTrieTest, RegionViewsEqualRunningEveryTokenMistral) { CheckRegions("mistral"); }
TEST(TokenTrieTest, RegionViewsEqualRunningEveryTokenQwen) { CheckRegions("qwen2.5"); }

// Counted units (TokenTrie::Counted): n states of 256 entries, then n "finished" flags.
Table NewUnit(int states) { return Table(static_cast<std::size_t>(states) * 257, kDead); }
void Finish(Table& u, int states, int q) { u[static_cast<std::size_t>(states) * 256 + q] = 1; }

// One character of a JSON string: printable ASCII but `"` and `\\`, an escape (`\\u` and four
// hex digits too), or a UTF-8 sequence of two or three bytes. State 1 is the finished one.
Table StringChar() {
  const int n = 9;
  Table u = NewUnit(n);
  Set(u, 0, 0x20, 0x7E, 1);
  Set(u, 0, '"', '"', kDead);
  Set(u, 0, '\\', '\\', 2);
  Set(u, 0, 0xC2, 0xDF, 3);
  Set(u, 0, 0xE0, 0xEF, 4);
  for (int e : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'}) Set(u, 2, e, e, 1);
  Set(u, 2, 'u', 'u', 5);
  for (int q = 5; q <= 8; ++q) {
    const std::int16_t next = q == 8 ? 1 : static_cast<std::int16_t>(q + 1);
    Set(u, q, '0', '9', next);
    Set(u, q, 'a', 'f', next);
    Set(u, q, 'A', 'F', next);
  }
  Set(u, 3, 0x80, 0xBF, 1);
  Set(u, 4, 0x80, 0xBF, 3);
  Finish(u, n, 1);
  return u;
}

// A letter then a digit: two bytes a unit, so a token may stop half way through one.
Table LetterDigit() {
  Table u = NewUnit(3);
  Set(u, 0, 'a', 'z', 1);
  Set(u, 1, '0', '9', 2);
  Finish(u, 3, 2);
  return u;
}

void CheckCounted(const std::string& name) {
  auto vocab = Vocabulary::Load(name);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  const Vocabulary& v = **vocab;
  TokenTrie trie(v);
  for (const auto& [what, unit] :
       std::vector<std::pair<const char*, Table>>{{"string char", StringChar()},
                                                  {"letter digit", LetterDigit()}}) {
    const std::size_t n = unit.size() / 257;
    // Every text token run unit after unit on its own: it ends inside needing `need` units of
    // room, or leaves between two units (`units` in, at byte `offset`), or dies.
    std::map<TokenId, int> need;
    std::map<TokenId, std::pair<int, int>> exits;
    for (TokenId id = 0; id < v.size(); ++id) {
      const std::string_view bytes = v.TokenBytes(id);
      const bool text = (v.Kind(id) == TokenKind::kNormal || v.Kind(id) == TokenKind::kByte) &&
                        !bytes.empty();
      if (!text) continue;
      int q = 0, units = 0;
      std::size_t d = 0;
      for (; d < bytes.size(); ++d) {
        int t = unit[static_cast<std::size_t>(q) * 256 + static_cast<std::uint8_t>(bytes[d])];
        if (t == kDead) {
          if (q == 0 && units > 0) exits[id] = {units, static_cast<int>(d)};
          break;
        }
        if (unit[n * 256 + static_cast<std::size_t>(t)] != 0) t = 0, ++units;
        q = t;
      }
      if (d == bytes.size()) need[id] = units + (q != 0 ? 1 : 0);
    }
    const TokenTrie::CountedView* view = trie.Counted(unit);
    ASSERT_NE(view, nullptr) << name << ", " << what;
    EXPECT_EQ(view->inside_count, static_cast<std::int32_t>(need.size())) << name << ", " << what;
    ASSERT_EQ(view->by_need.size(), need.size()) << name << ", " << what;
    for (std::size_t k = 0; k < view->by_need.size(); ++k) {
      const TokenId id = view->by_need[k];
      ASSERT_TRUE(need.count(id)) << name << ", " << what << ": token " << id;
      ASSERT_EQ(view->need[k], need[id]) << name << ", " << what << ": token " << id;
      ASSERT_TRUE(((view->inside_bits[id / 32] >> (id % 32)) & 1) != 0) << name << ": " << id;
      if (k > 0) {
        ASSERT_GE(view->need[k - 1], view->need[k]) << "the most units needed first";
      }
    }
    ASSERT_EQ(view->exits.size(), exits.size()) << name << ", " << what;
    for (std::size_t k = 0; k < view->exits.size(); ++k) {
      const auto& e = view->exits[k];
      ASSERT_TRUE(exits.count(e.id)) << name << ", " << what << ": token " << e.id;
      ASSERT_EQ(std::make_pair(static_cast<int>(e.units), static_cast<int>(e.offset)),
                exits[e.id])
          << name << ", " << what << ": token " << e.id;
      if (k > 0) {
        ASSERT_LE(view->exits[k - 1].units, e.units) << "exits by units";
      }
    }
  }
}

TEST(TokenTrieTest, CountedViewsEqualRunningEveryTokenLlama3) { CheckCounted("llama3"); }
TEST(TokenTrieTest, CountedViewsEqualRunningEveryTokenMistral) { CheckCounted("mistral"); }
TEST(TokenTrieTest, CountedViewsEqualRunningEveryTokenQwen) { CheckCounted("qwen2.5"); }

}  // namespace
}  // namespace lockstep
