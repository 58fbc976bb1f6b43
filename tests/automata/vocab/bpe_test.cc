// Direct tests of the BPE merge engine (automata/vocab/bpe.h): StringIdMap and PairMap against
// the standard containers, and BpeModel::Encode against a naive BPE written here (symbols as
// strings; find the adjacent pair of lowest rank, leftmost on ties, merge it, repeat: quadratic
// and obviously right). The models are built in the test from hand-written merge tables, random
// ones, and the real GPT-2, Mistral and cl100k vocabularies read straight from the shared data
// (the Vocabulary loaders' own BpeModel is checked on the same pieces).
#include "automata/vocab/bpe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "automata/vocab/vocab_test_util.h"
#include "automata/vocab/vocabulary_impl.h"

namespace lockstep::vocab {
namespace {

// ---- The naive BPE ----------------------------------------------------------------------------

struct NaiveModel {
  bool chars = false;          // initial symbols: UTF-8 characters (else bytes)
  bool by_concat = false;      // tiktoken: a pair's rank is the id of its concatenation
  bool ignore_merges = false;  // a piece that is a token is that token
  bool byte_fallback = false;  // chars: an unknown character becomes its "<0xNN>" tokens
  bool fuse_unk = false;
  std::optional<std::string> unk;
  std::unordered_map<std::string, TokenId> vocab;  // model-space string -> id
  std::unordered_map<std::string, int> ranks;      // PairKey(left, right) -> rank

  static std::string PairKey(const std::string& a, const std::string& b) {
    return std::to_string(a.size()) + ":" + a + b;
  }
  std::optional<int> Rank(const std::string& a, const std::string& b) const {
    if (by_concat) {
      auto it = vocab.find(a + b);
      return it == vocab.end() ? std::nullopt : std::optional<int>(it->second);
    }
    auto it = ranks.find(PairKey(a, b));
    return it == ranks.end() ? std::nullopt : std::optional<int>(it->second);
  }
};

// Length of the well-formed UTF-8 sequence at s[i], or 1 for an ill-formed byte.
std::size_t CharLen(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t len = b < 0x80                 ? 1
                    : b >= 0xC2 && b <= 0xDF ? 2
                    : b >= 0xE0 && b <= 0xEF ? 3
                    : b >= 0xF0 && b <= 0xF4 ? 4
                                             : 0;
  if (len <= 1 || i + len > s.size()) return 1;
  auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned lo = 0x80, hi = 0xBF;  // the second byte's range (Unicode table 3-7)
  if (b == 0xE0) lo = 0xA0;
  if (b == 0xED) hi = 0x9F;
  if (b == 0xF0) lo = 0x90;
  if (b == 0xF4) hi = 0x8F;
  if (at(1) < lo || at(1) > hi) return 1;
  for (std::size_t k = 2; k < len; ++k) {
    if (at(k) < 0x80 || at(k) > 0xBF) return 1;
  }
  return len;
}

std::string ByteToken(const NaiveModel& m, unsigned char b) {
  if (!m.chars) return std::string(1, static_cast<char>(b));
  char buf[8];
  std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
  return buf;
}

// The ids of `piece`, or the byte offset of the first character that has no token.
using NaiveResult = std::variant<std::vector<TokenId>, std::size_t>;

NaiveResult NaiveEncode(const NaiveModel& m, std::string_view piece) {
  if (piece.empty()) return std::vector<TokenId>{};
  if (m.ignore_merges && m.vocab.count(std::string(piece))) {
    return std::vector<TokenId>{m.vocab.at(std::string(piece))};
  }
  std::vector<std::string> syms;
  bool last_unk = false;
  for (std::size_t i = 0; i < piece.size();) {
    const std::size_t len = m.chars ? CharLen(piece, i) : 1;
    const std::string ch(piece.substr(i, len));
    bool fallback = m.chars && m.byte_fallback;
    for (char b : ch) fallback = fallback && m.vocab.count(ByteToken(m, b));
    if (m.vocab.count(ch)) {
      syms.push_back(ch);
      last_unk = false;
    } else if (fallback) {
      for (char b : ch) syms.push_back(ByteToken(m, b));
      last_unk = false;
    } else if (m.chars && m.unk) {
      if (!(m.fuse_unk && last_unk)) syms.push_back(*m.unk);
      last_unk = true;
    } else {
      return i;
    }
    i += len;
  }
  for (;;) {
    std::optional<int> best_rank;
    std::size_t best = 0;
    for (std::size_t i = 0; i + 1 < syms.size(); ++i) {
      std::optional<int> r = m.Rank(syms[i], syms[i + 1]);
      if (r && (!best_rank || *r < *best_rank)) {
        best_rank = r;
        best = i;
      }
    }
    if (!best_rank) break;
    syms[best] += syms[best + 1];
    syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  std::vector<TokenId> ids;
  for (const std::string& s : syms) ids.push_back(m.vocab.at(s));
  return ids;
}

// ---- One model description, built twice: as a BpeModel and as a NaiveModel --------------------

struct ModelSpec {
  std::vector<std::string> tokens;  // model-space string of each id ("" for an unused id)
  std::vector<std::pair<std::string, std::string>> merges;  // by rank; ignored with by_concat
  bool chars = false;
  bool by_concat = false;
  bool ignore_merges = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  std::optional<std::string> unk;
};

struct TestModel {
  BpeModel bpe;
  NaiveModel naive;
  std::string pool;  // by_concat: the bytes of every token, for BpeModel::token_pool
  std::vector<std::uint32_t> off;
};

ModelSpec Spec(std::vector<std::string> tokens,
               std::vector<std::pair<std::string, std::string>> merges) {
  ModelSpec spec;
  spec.tokens = std::move(tokens);
  spec.merges = std::move(merges);
  return spec;
}

std::unique_ptr<TestModel> Build(const ModelSpec& spec) {
  auto t = std::make_unique<TestModel>();
  NaiveModel& n = t->naive;
  BpeModel& b = t->bpe;
  n.chars = spec.chars;
  n.by_concat = spec.by_concat;
  n.ignore_merges = b.ignore_merges = spec.ignore_merges;
  n.byte_fallback = b.byte_fallback = spec.byte_fallback;
  n.fuse_unk = b.fuse_unk = spec.fuse_unk;
  n.unk = spec.unk;
  b.symbols = spec.chars ? BpeModel::Symbols::kChars : BpeModel::Symbols::kBytes;
  t->off.push_back(0);
  for (std::size_t id = 0; id < spec.tokens.size(); ++id) {
    const std::string& s = spec.tokens[id];
    t->pool += s;
    t->off.push_back(static_cast<std::uint32_t>(t->pool.size()));
    if (s.empty()) continue;
    n.vocab[s] = static_cast<TokenId>(id);
    b.vocab.Insert(s, static_cast<TokenId>(id));
  }
  for (int v = 0; v < 256; ++v) {
    auto it = n.vocab.find(ByteToken(n, static_cast<unsigned char>(v)));
    if (it != n.vocab.end() && (!spec.chars || spec.byte_fallback)) b.byte_ids_[v] = it->second;
  }
  if (spec.unk) b.unk = n.vocab.at(*spec.unk);
  if (spec.by_concat) {
    b.merge_by_concat = true;
    b.token_pool = &t->pool;
    b.token_off = &t->off;
  }
  for (std::size_t r = 0; !spec.by_concat && r < spec.merges.size(); ++r) {
    const auto& [l, rt] = spec.merges[r];
    const TokenId joined = n.vocab.at(l + rt);
    n.ranks[NaiveModel::PairKey(l, rt)] = static_cast<int>(r);
    b.merges.Insert(n.vocab.at(l), n.vocab.at(rt), PairMap::Merge{static_cast<int>(r), joined});
  }
  return t;
}

std::string Show(const NaiveResult& r) {
  if (std::holds_alternative<std::size_t>(r)) return "error at " + std::to_string(std::get<1>(r));
  std::string s;
  for (TokenId id : std::get<0>(r)) s += std::to_string(id) + " ";
  return s;
}

// Encode through `bpe`, in the shape NaiveEncode answers in. Checks on the way that Encode
// appends to what *out already holds.
NaiveResult Encode(const BpeModel& bpe, std::string_view piece) {
  std::vector<TokenId> out = {-7};
  std::size_t bad = std::string_view::npos;
  if (!bpe.Encode(piece, &out, &bad)) return bad;
  EXPECT_EQ(out.front(), -7) << "Encode must append";
  out.erase(out.begin());
  return out;
}

// Compares BpeModel (twice: the second call may be served from its cache) with the naive BPE.
void ExpectSameAsNaive(const BpeModel& bpe, const NaiveModel& naive, std::string_view piece) {
  const NaiveResult want = NaiveEncode(naive, piece);
  EXPECT_EQ(Show(Encode(bpe, piece)), Show(want)) << "piece \"" << piece << "\"";
  EXPECT_EQ(Show(Encode(bpe, piece)), Show(want)) << "again: piece \"" << piece << "\"";
}

std::vector<TokenId> Ids(std::initializer_list<TokenId> ids) { return ids; }

// ---- The hash maps ----------------------------------------------------------------------------

TEST(StringIdMapTest, AgreesWithUnorderedMap) {
  std::mt19937_64 rng(1);
  StringIdMap map;
  std::unordered_map<std::string, TokenId> want;
  EXPECT_EQ(map.Find("absent"), kNoToken);
  for (int i = 0; i < 20000; ++i) {
    std::string key(std::uniform_int_distribution<int>(0, 6)(rng), '\0');
    for (char& c : key) c = static_cast<char>("ab\0\xff"[rng() % 4]);
    const auto id = static_cast<TokenId>(rng() % 1000000);
    if (i % 3 == 0) {
      map.Insert(key, id, StringIdMap::Hash(key));  // the batch form
    } else {
      map.Insert(key, id);
    }
    want[key] = id;  // last one wins in both
    if (i == 5000) map.Reserve(50000);
  }
  EXPECT_EQ(map.size(), want.size());
  for (const auto& [key, id] : want) {
    EXPECT_EQ(map.Find(key), id);
    EXPECT_EQ(map.Find(key, StringIdMap::Hash(key)), id);
  }
  EXPECT_EQ(map.Find("abababa"), kNoToken);  // longer than every key
  const std::string with_nul("a\0b", 3);
  EXPECT_EQ(map.Find(with_nul), want.count(with_nul) ? want.at(with_nul) : kNoToken);
}

TEST(PairMapTest, AgreesWithMap) {
  std::mt19937_64 rng(2);
  PairMap map;
  std::map<std::pair<TokenId, TokenId>, std::pair<int, TokenId>> want;
  EXPECT_EQ(map.Find(1, 2), nullptr);
  for (int i = 0; i < 20000; ++i) {
    const auto a = static_cast<TokenId>(rng() % 200), b = static_cast<TokenId>(rng() % 200);
    const PairMap::Merge m{static_cast<int>(rng() % 100000), static_cast<TokenId>(rng() % 5000)};
    map.Insert(a, b, m);
    want[{a, b}] = {m.rank, m.id};
    if (i == 100) map.Reserve(30000);
  }
  EXPECT_EQ(map.size(), want.size());
  for (TokenId a = 0; a < 200; ++a) {
    for (TokenId b = 0; b < 200; ++b) {
      const PairMap::Merge* got = map.Find(a, b);
      auto it = want.find({a, b});
      ASSERT_EQ(got != nullptr, it != want.end()) << a << "," << b;
      if (got) {
        EXPECT_EQ(std::make_pair(got->rank, got->id), it->second);
      }
    }
  }
}

// ---- Hand-written merge tables ----------------------------------------------------------------

TEST(BpeModelTest, MergesApplyInRankOrderNotTextOrder) {
  // ids:                 0    1    2    3     4     5
  ModelSpec spec = Spec({"a", "b", "c", "ab", "bc", "abc"}, {{"b", "c"}, {"a", "b"}, {"a", "bc"}});
  auto m = Build(spec);
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "abc")), Ids({5}));  // b+c first, then a+bc
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "abab")), Ids({3, 3}));
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "cab")), Ids({2, 3}));
  spec.merges = {{"a", "b"}, {"b", "c"}};  // now a+b wins, and "ab c" has no merge
  m = Build(spec);
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "abc")), Ids({3, 2}));
  for (const char* p : {"abc", "abab", "cab", "cbabcba", "a", ""}) {
    ExpectSameAsNaive(m->bpe, m->naive, p);
  }
}

TEST(BpeModelTest, TiesGoToTheLeftmostPair) {
  ModelSpec spec = Spec({"a", "aa", "aaaa"}, {{"a", "a"}, {"aa", "aa"}});
  auto m = Build(spec);
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "aaa")), Ids({1, 0}));
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "aaaaa")), Ids({2, 0}));
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "aaaaaaa")), Ids({2, 1, 0}));
  // Long pieces take the heap path (more than 64 symbols) and skip the cache (over 96 bytes).
  for (std::size_t n : {63, 64, 65, 96, 97, 200, 601}) {
    ExpectSameAsNaive(m->bpe, m->naive, std::string(n, 'a'));
  }
}

TEST(BpeModelTest, MissingByteIsAnErrorAtItsOffset) {
  auto m = Build(Spec({"a", "b", "ab"}, {{"a", "b"}}));
  EXPECT_EQ(Show(Encode(m->bpe, "abz")), "error at 2");
  EXPECT_EQ(Show(Encode(m->bpe, "z")), "error at 0");
  ExpectSameAsNaive(m->bpe, m->naive, "ab\xff");
}

TEST(BpeModelTest, CharactersFallBackToBytesThenUnk) {
  // ids:               0    1    2         3         4          5       6
  ModelSpec spec = Spec({"h", "i", "<0xC3>", "<0xA9>", "<unk>", "hi", "\xc3\xa9"}, {{"h", "i"}});
  spec.tokens[6].clear();  // é is not a token: its bytes are
  spec.chars = true;
  spec.byte_fallback = true;
  spec.unk = "<unk>";
  auto m = Build(spec);
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "hi\xc3\xa9")), Ids({5, 2, 3}));
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "\xc3\xa8h")), Ids({4, 0}));  // no <0xA8>: unk
  spec.byte_fallback = false;
  m = Build(spec);
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "h\xc3\xa9\xc3\xa9i")), Ids({0, 4, 4, 1}));
  spec.fuse_unk = true;
  m = Build(spec);
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "h\xc3\xa9\xc3\xa9i")), Ids({0, 4, 1}));
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "\xc3\xa9h\xc3\xa9")), Ids({4, 0, 4}));
  spec.unk.reset();
  m = Build(spec);
  EXPECT_EQ(Show(Encode(m->bpe, "hi\xc3\xa9")), "error at 2");
  for (bool fallback : {false, true}) {
    for (bool fuse : {false, true}) {
      spec.byte_fallback = fallback;
      spec.fuse_unk = fuse;
      spec.unk = "<unk>";
      m = Build(spec);
      for (const char* p :
           {"hi\xc3\xa9", "\xc3\xa9\xc3\xa9hi\xc3\xa8\xc3\xa8", "\xff\xfeh", "ih"}) {
        ExpectSameAsNaive(m->bpe, m->naive, p);
      }
    }
  }
}

TEST(BpeModelTest, IgnoreMergesTakesAWholeTokenAsIs) {
  // "abc" is a token, but the merges alone give "ab" "c".
  ModelSpec spec = Spec({"a", "b", "c", "ab", "abc"}, {{"a", "b"}});
  auto m = Build(spec);
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "abc")), Ids({3, 2}));
  spec.ignore_merges = true;
  m = Build(spec);
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "abc")), Ids({4}));
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "abcc")), Ids({3, 2, 2}));
  for (const char* p : {"abc", "abcc", "cab", "c"}) ExpectSameAsNaive(m->bpe, m->naive, p);
}

TEST(BpeModelTest, MergeByConcatRanksByTheMergedId) {
  // tiktoken: any adjacent pair whose bytes are a token merges, the lowest resulting id first.
  ModelSpec spec = Spec({"a", "b", "c", "bc", "ab", "abc"}, {});
  spec.by_concat = true;
  auto m = Build(spec);
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "abc")), Ids({5}));  // b+c (3) before a+b (4)
  EXPECT_EQ(std::get<0>(Encode(m->bpe, "abab")), Ids({4, 4}));
  for (const char* p : {"abc", "abab", "cbacba", "cccc"}) ExpectSameAsNaive(m->bpe, m->naive, p);
}

// ---- Random merge tables ----------------------------------------------------------------------

// A random merge table over `alphabet`: each merge joins two existing tokens, a new token when
// the concatenation is new.
ModelSpec RandomSpec(const std::vector<std::string>& alphabet, int merges, std::mt19937_64& rng) {
  ModelSpec spec;
  spec.tokens = alphabet;
  std::map<std::string, int> known;
  for (const std::string& s : alphabet) known[s] = 1;
  std::set<std::pair<std::string, std::string>> seen;
  while (static_cast<int>(spec.merges.size()) < merges) {
    const std::string a = spec.tokens[rng() % spec.tokens.size()];
    const std::string b = spec.tokens[rng() % spec.tokens.size()];
    if (a.size() + b.size() > 12 || !seen.insert({a, b}).second) continue;
    if (known[a + b]++ == 0) spec.tokens.push_back(a + b);
    spec.merges.push_back({a, b});
  }
  return spec;
}

TEST(BpeModelTest, RandomTablesAgreeWithNaive) {
  std::mt19937_64 rng(3);
  int pieces = 0;
  for (int round = 0; round < 12; ++round) {
    const bool chars = round % 2 == 1;
    std::vector<std::string> alphabet = {"a", "b", "c", "d"};
    if (chars) alphabet = {"a", "\xc3\xa9", "\xc3\x9f", "\xe4\xb8\xad", "<unk>"};
    ModelSpec spec = RandomSpec(alphabet, 10 + round * 10, rng);
    spec.chars = chars;
    if (chars) spec.unk = "<unk>";
    spec.fuse_unk = round % 4 == 1;
    spec.ignore_merges = round % 3 == 0;
    spec.by_concat = round % 5 == 4;
    auto m = Build(spec);
    std::vector<std::string> letters = alphabet;
    letters.back() = chars ? "z" : "d";  // an unknown character for the unk paths
    for (int i = 0; i < 150; ++i) {
      std::string piece;
      const int n = i < 100 ? static_cast<int>(rng() % 40) : static_cast<int>(rng() % 300);
      for (int k = 0; k < n; ++k) piece += letters[rng() % letters.size()];
      ExpectSameAsNaive(m->bpe, m->naive, piece);
      ++pieces;
    }
    if (::testing::Test::HasFailure()) return;
  }
  std::printf("[ compared   ] %d random pieces\n", pieces);
}

// ---- Real vocabularies ------------------------------------------------------------------------

// GPT-2's byte <-> printable character table, as in its encoder.py.
std::map<std::string, unsigned char> Gpt2CharToByte() {
  std::vector<int> bs;
  for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
  std::vector<int> cs = bs;
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    if (std::find(bs.begin(), bs.end(), b) == bs.end()) {
      bs.push_back(b);
      cs.push_back(256 + extra++);
    }
  }
  std::map<std::string, unsigned char> out;
  for (std::size_t i = 0; i < bs.size(); ++i) {
    std::string utf8;
    const int c = cs[i];
    if (c < 0x80) {
      utf8 += static_cast<char>(c);
    } else {
      utf8 += static_cast<char>(0xC0 | (c >> 6));
      utf8 += static_cast<char>(0x80 | (c & 0x3F));
    }
    out[utf8] = static_cast<unsigned char>(bs[i]);
  }
  return out;
}

std::string Gpt2Bytes(const std::map<std::string, unsigned char>& table, const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = CharLen(text, i);
    out += static_cast<char>(table.at(text.substr(i, len)));
    i += len;
  }
  return out;
}

// A BPE tokenizer.json's model as a ModelSpec; `decode` maps its strings to model space.
template <typename Decode>
ModelSpec SpecFromTokenizerJson(const std::string& path, Decode decode) {
  const nlohmann::json model = nlohmann::json::parse(testing::ReadFile(path)).at("model");
  ModelSpec spec;
  for (const auto& entry : model.at("vocab").items()) {
    const auto i = entry.value().get<std::size_t>();
    if (spec.tokens.size() <= i) spec.tokens.resize(i + 1);
    spec.tokens[i] = decode(entry.key());
  }
  for (const auto& m : model.at("merges")) {
    const std::string s = m.get<std::string>();
    const std::size_t sp = s.find(' ', 1);
    spec.merges.push_back({decode(s.substr(0, sp)), decode(s.substr(sp + 1))});
  }
  auto flag = [&](const char* key) { return model.contains(key) && model.at(key) == true; };
  spec.byte_fallback = flag("byte_fallback");
  spec.fuse_unk = flag("fuse_unk");
  if (model.contains("unk_token") && model.at("unk_token").is_string()) {
    spec.unk = model.at("unk_token").get<std::string>();
  }
  return spec;
}

std::string Base64Decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string out;
  int bits = 0, acc = 0;
  for (char c : in) {
    const int v = value(c);
    if (v < 0) continue;  // '=' padding
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

ModelSpec SpecFromTiktoken(const std::string& path) {
  ModelSpec spec;
  spec.by_concat = true;
  std::istringstream in(testing::ReadFile(path));
  std::string b64;
  std::size_t rank;
  while (in >> b64 >> rank) {
    if (spec.tokens.size() <= rank) spec.tokens.resize(rank + 1);
    spec.tokens[rank] = Base64Decode(b64);
  }
  return spec;
}

// Pieces of the corpus in model space: words with their leading space (or "▁"), and whole lines
// cut to at most `long_cap` bytes (long pieces: the heap merge path, no cache).
std::vector<std::string> CorpusPieces(bool metaspace, std::size_t long_cap) {
  std::vector<std::string> pieces;
  const std::string space = metaspace ? "\xe2\x96\x81" : " ";
  for (const std::string& text : testing::CorpusTexts()) {
    std::string t;
    if (metaspace) t = space;
    for (char c : text) t += c == ' ' ? space : std::string(1, c);
    std::size_t start = 0;
    for (std::size_t i = 1; i <= t.size(); ++i) {
      if (i == t.size() || t.compare(i, space.size(), space) == 0) {
        pieces.push_back(t.substr(start, i - start));
        start = i;
      }
    }
    if (t.size() > 64) {
      std::size_t cut = std::min(t.size(), long_cap);
      while (cut < t.size() && (t[cut] & 0xC0) == 0x80) --cut;  // a character boundary
      pieces.push_back(t.substr(0, cut));
    }
  }
  return pieces;
}

class RealVocabularyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RealVocabularyTest, EncodeAgreesWithNaiveBpe) {
  LOCKSTEP_REQUIRE_SHARED_DATA();
  const std::string name = GetParam();
  ModelSpec spec;
  if (name == "gpt2") {
    const auto table = Gpt2CharToByte();
    spec = SpecFromTokenizerJson(testing::SharedVocabPath(name),
                                 [&](const std::string& s) { return Gpt2Bytes(table, s); });
  } else if (name == "mistral") {
    spec = SpecFromTokenizerJson(testing::SharedVocabPath(name),
                                 [](const std::string& s) { return s; });
    spec.chars = true;
  } else {
    spec = SpecFromTiktoken(testing::SharedVocabPath(name));
  }
  ASSERT_GT(spec.tokens.size(), 30000u);
  auto m = Build(spec);
  auto loaded = testing::SharedVocab(name);
  ASSERT_NE(loaded, nullptr);
  const BpeModel& loaded_bpe = VocabularyAccess::Tables(*loaded).bpe_;
  const std::vector<std::string> pieces = CorpusPieces(spec.chars, 400);
  ASSERT_GT(pieces.size(), 5000u);
  int compared = 0, shown = 0;
  for (const std::string& piece : pieces) {
    const std::string want = Show(NaiveEncode(m->naive, piece));
    const std::string direct = Show(Encode(m->bpe, piece));
    const std::string via_loader = Show(Encode(loaded_bpe, piece));
    if ((direct != want || via_loader != want) && shown++ < 5) {
      ADD_FAILURE() << name << " piece " << nlohmann::json(piece).dump() << "\n  naive  " << want
                    << "\n  direct " << direct << "\n  loaded " << via_loader;
    }
    ++compared;
  }
  std::printf("[ compared   ] %s: %d pieces\n", name.c_str(), compared);
}

INSTANTIATE_TEST_SUITE_P(SharedData, RealVocabularyTest,
                         ::testing::Values("gpt2", "mistral", "cl100k_base"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace lockstep::vocab
