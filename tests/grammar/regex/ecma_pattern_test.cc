// Tests for EcmaPatternChecker and IsEcmaPattern (grammar/regex/ecma_pattern.h): whole patterns
// against V8's verdicts (tests/data/ecma_patterns.jsonl, from ecma_patterns_gen.js); viability
// as a prefix property of the corpus, as exact (every live prefix has a completion, found by a
// bounded search) and, for escapes in names and range ends, against brute force; the local key;
// PlainRunsFree; and the subtle rules one by one.
#include "grammar/regex/ecma_pattern.h"

#include <gtest/gtest.h>
#include <unicode/uchar.h>

#include <algorithm>
#include <array>
#include <deque>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/base/utf8.h"
#include "test_data.h"

namespace lockstep {
namespace {

// The corpus is well-formed UTF-8 (it came out of JSON.stringify).
std::u32string Decode(std::string_view s) {
  std::u32string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    char32_t c = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) c = c << 6 | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(c);
    i += len;
  }
  return out;
}

std::string Encode(std::u32string_view s) {
  std::string out;
  for (char32_t c : s) AppendUtf8(c, &out);
  return out;
}

// Feeds `text`; true iff every Step succeeded.
bool Feed(EcmaPatternChecker* c, std::u32string_view text) {
  for (char32_t ch : text) {
    if (!c->Step(ch)) return false;
  }
  return true;
}

bool Viable(std::string_view utf8) {
  EcmaPatternChecker c;
  return Feed(&c, Decode(utf8));
}

std::string Key(const EcmaPatternChecker& c) {
  std::string k;
  c.AppendLocalKey(&k);
  return k;
}

struct Case {
  std::string pattern;
  bool valid;
};

const std::vector<Case>& Corpus() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> out;
    for (const std::string& line :
         testing::ReadLines(std::string(LOCKSTEP_TEST_DATA_DIR) + "/ecma_patterns.jsonl")) {
      const auto j = nlohmann::json::parse(line);
      out.push_back({j.at("pattern").get<std::string>(), j.at("valid").get<bool>()});
    }
    return out;
  }();
  return cases;
}

TEST(EcmaPatternTest, CorpusMatchesV8) {
  const auto& corpus = Corpus();
  ASSERT_GT(corpus.size(), 10000u) << "tests/data/ecma_patterns.jsonl is missing or short";
  std::size_t valid = 0, failures = 0;
  for (const Case& c : corpus) {
    valid += c.valid;
    if (IsEcmaPattern(c.pattern) != c.valid && ++failures <= 50) {
      ADD_FAILURE() << "V8 says " << (c.valid ? "valid" : "invalid") << ": " << c.pattern;
    }
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_GT(valid * 4, corpus.size());  // the corpus is not all errors
}

// Step never fails inside a valid pattern, and a prefix Step kills starts no valid pattern.
TEST(EcmaPatternTest, ViabilityIsAPrefixProperty) {
  std::unordered_set<std::string> valid_prefixes;
  for (const Case& c : Corpus()) {
    if (!c.valid) continue;
    const std::u32string p = Decode(c.pattern);
    for (std::size_t i = 0; i <= p.size(); ++i) valid_prefixes.insert(Encode(p.substr(0, i)));
  }
  std::size_t failures = 0;
  for (const Case& c : Corpus()) {
    const std::u32string p = Decode(c.pattern);
    EcmaPatternChecker checker;
    std::size_t i = 0;
    while (i < p.size() && checker.Step(p[i])) ++i;
    if (c.valid) {
      EXPECT_TRUE(i == p.size() && checker.Complete()) << c.pattern << " dies at " << i;
      failures += i != p.size();
    } else if (i < p.size()) {
      const std::string dead = Encode(p.substr(0, i + 1));
      EXPECT_FALSE(valid_prefixes.count(dead)) << "a valid pattern starts with " << dead;
      failures += valid_prefixes.count(dead);
      EXPECT_TRUE(checker.dead() && !checker.Step('a') && !checker.Complete());
    }
    if (failures > 50) break;
  }
}

// Read off the text: the largest decimal escape (\12, capped at 10^9) and the names of \k<...>.
std::uint64_t MaxDecimalEscape(const std::u32string& text) {
  std::uint64_t max = 0;
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] != '\\') continue;
    std::size_t j = ++i;  // the escaped character starts no escape of its own
    std::uint64_t v = 0;
    for (; j < text.size() && text[j] >= '0' && text[j] <= '9' && v < 1000000000; ++j) {
      v = v * 10 + (text[j] - '0');
    }
    max = std::max(max, v);
    if (j > i) i = j - 1;
  }
  return max;
}
std::vector<std::u32string> NamesReferenced(const std::u32string& text) {
  std::vector<std::u32string> out;
  for (std::size_t i = 0; i + 2 < text.size(); ++i) {
    if (text[i] != '\\') continue;
    if (text[++i] != 'k' || text[i + 1] != '<') continue;
    const std::size_t close = text.find('>', i);
    if (close != std::u32string::npos) out.push_back(text.substr(i + 2, close - i - 2));
  }
  return out;
}

// A bounded search for a completion of a live prefix. Tokens are single characters that close or
// continue what can be open, a few multi-character ones for surrogate pairs and \u{...}, and, in
// an open \p{...}, the rest of each property name of the corpus. Open groups are closed, and back
// references and \k names settled by appending groups for them, when a node is tested (the local
// key, which dedupes the search, leaves them out).
class Completer {
 public:
  Completer() {
    const std::regex body(R"(\\[pP]\{([A-Za-z0-9_=]*)\})");
    for (const Case& c : Corpus()) {
      if (!c.valid) continue;
      for (std::sregex_iterator it(c.pattern.begin(), c.pattern.end(), body), end; it != end;
           ++it) {
        bodies_.insert((*it)[1].str());
      }
    }
    for (const char* t :
         {"]", "}", ">",       "a",       "\\",   "u",    "{",   "-",       ",",           "<",
          ":", "=", "\\uDC00", "\\uDFFF", "0000", "00FF", "FF}", "10FFFF}", "9999999999}", "{L}"}) {
      tokens_.push_back(Decode(t));
    }
    for (char32_t h : std::u32string_view(U"0123456789ABCDEF")) tokens_.push_back({h});
  }

  // Some text of at most `max_depth` tokens completes `text` (Step succeeded on all of it), or
  // nullopt; sets *exhausted if the node budget ran out first.
  std::optional<std::u32string> Find(const std::u32string& text, int max_depth, std::size_t budget,
                                     bool* exhausted) const {
    EcmaPatternChecker start;
    if (!Feed(&start, text)) return std::nullopt;
    struct Node {
      EcmaPatternChecker checker;
      std::u32string added;
      int depth;
    };
    std::deque<Node> queue{{start, U"", 0}};
    std::unordered_set<std::string> seen{Key(start)};
    std::size_t expanded = 0;
    *exhausted = false;
    while (!queue.empty()) {
      Node n = std::move(queue.front());
      queue.pop_front();
      if (Completes(n.checker, text + n.added)) return n.added;
      if (n.depth == max_depth) continue;
      if (++expanded > budget) {
        *exhausted = true;
        return std::nullopt;
      }
      for (const std::u32string& t : TokensFor(text + n.added)) {
        EcmaPatternChecker next = n.checker;
        if (!Feed(&next, t) || !seen.insert(Key(next)).second) continue;
        queue.push_back({std::move(next), n.added + t, n.depth + 1});
      }
    }
    return std::nullopt;
  }

 private:
  std::vector<std::u32string> TokensFor(const std::u32string& text) const {
    std::vector<std::u32string> out = tokens_;
    // An open \p{...: the rest of every corpus name it begins (shortest first, a few).
    const std::string s = Encode(text);
    static const std::regex open(R"(\\[pP]\{([A-Za-z0-9_=]*)$)");
    std::smatch m;
    if (std::regex_search(s, m, open)) {
      std::vector<std::string> rests;
      for (const std::string& b : bodies_) {
        if (b.compare(0, m[1].length(), m[1].str()) == 0) rests.push_back(b.substr(m[1].length()));
      }
      std::sort(rests.begin(), rests.end(), [](const auto& x, const auto& y) {
        return x.size() != y.size() ? x.size() < y.size() : x < y;
      });
      for (std::size_t i = 0; i < rests.size() && i < 8; ++i) out.push_back(Decode(rests[i] + "}"));
    }
    return out;
  }

  // Complete once the open groups are closed (so the search need not spell the `)`s out) and
  // groups are appended for the back references and \k names in `text`.
  static bool Completes(const EcmaPatternChecker& c, const std::u32string& text) {
    EcmaPatternChecker closed = c;
    for (int i = 0; i < 64 && !closed.Complete(); ++i) {
      EcmaPatternChecker next = closed;
      if (!next.Step(')')) break;
      closed = next;
    }
    if (closed.Complete()) return true;
    std::u32string groups;
    for (std::uint64_t g = MaxDecimalEscape(text); g > 0; --g) groups += U"()";
    for (bool with_names : {false, true}) {
      std::u32string s = groups;
      for (const std::u32string& r : NamesReferenced(text)) {
        const std::u32string def = U"(?<" + r + U">";
        if (with_names && text.find(def) == std::u32string::npos && s.find(def) == s.npos) {
          s += def + U")";
        }
      }
      EcmaPatternChecker d = closed;
      if (Feed(&d, s) && d.Complete()) return true;
    }
    return false;
  }

  std::set<std::string> bodies_;
  std::vector<std::u32string> tokens_;
};

// Live prefixes for the exactness tests: prefixes of corpus patterns, and random walks that only
// take characters Step allows.
std::vector<std::u32string> LivePrefixes(std::size_t walks) {
  std::set<std::u32string> out;
  std::size_t k = 0;
  for (const Case& c : Corpus()) {
    if (++k % 3 != 0) continue;
    const std::u32string p = Decode(c.pattern);
    EcmaPatternChecker checker;
    for (std::size_t i = 0; i < p.size() && checker.Step(p[i]); ++i) out.insert(p.substr(0, i + 1));
  }
  const std::u32string alphabet = U"abz0129\\()[]{},-^$.*+?|<>=!:kuxcpPdDwsbBn_$éAEF8DCL😀";
  std::mt19937 rng(12345);
  for (std::size_t w = 0; w < walks; ++w) {
    EcmaPatternChecker checker;
    std::u32string text;
    const std::size_t len = 1 + rng() % 14;
    for (std::size_t i = 0; i < len; ++i) {
      std::u32string live;
      for (char32_t ch : alphabet) {
        EcmaPatternChecker next = checker;
        if (next.Step(ch)) live.push_back(ch);
      }
      if (live.empty()) break;
      const char32_t ch = live[rng() % live.size()];
      checker.Step(ch);
      text.push_back(ch);
      out.insert(text);
    }
  }
  return {out.begin(), out.end()};
}

TEST(EcmaPatternTest, EveryLivePrefixHasACompletion) {
  const Completer completer;
  const auto prefixes = LivePrefixes(static_cast<std::size_t>(3000 * testing::TestScale()));
  ASSERT_GT(prefixes.size(), 5000u);
  std::cout << prefixes.size() << " live prefixes\n";
  std::size_t failures = 0, exhausted_count = 0;
  std::size_t skipped = 0;
  for (const std::u32string& p : prefixes) {
    if (MaxDecimalEscape(p) > 20000) {  // (completing it takes that many groups)
      ++skipped;
      continue;
    }
    bool exhausted = false;
    if (completer.Find(p, 10, 20000, &exhausted)) continue;
    exhausted_count += exhausted;
    if (++failures <= 50) {
      ADD_FAILURE() << "no completion found for " << Encode(p)
                    << (exhausted ? " (search budget ran out)" : "");
    }
  }
  EXPECT_EQ(failures, 0u) << exhausted_count << " ran out of budget";
  EXPECT_LT(skipped, 50u);
}

std::string WholeKey(const EcmaPatternChecker& c) {
  std::string k;
  c.AppendKey(&k);
  return k;
}

// Live prefixes grouped by key (the local key, or with `whole` AppendKey's), up to four per key:
// f(a, b, text_a, text_b) for the first checker of each group against each other one. Returns
// the number of pairs.
template <typename F>
std::size_t ForPairsWithEqualKeys(bool whole, F f) {
  std::unordered_map<std::string, std::vector<std::u32string>> by_key;
  for (const std::u32string& p : LivePrefixes(1000)) {
    EcmaPatternChecker c;
    Feed(&c, p);
    auto& v = by_key[whole ? WholeKey(c) : Key(c)];
    if (v.size() < 4) v.push_back(p);
  }
  std::size_t pairs = 0;
  for (const auto& [key, texts] : by_key) {
    for (std::size_t i = 1; i < texts.size(); ++i) {
      ++pairs;
      EcmaPatternChecker a, b;
      Feed(&a, texts[0]);
      Feed(&b, texts[i]);
      f(a, b, texts[0], texts[i]);
    }
  }
  return pairs;
}

// Equal local keys give equal Step results, two characters deep.
TEST(EcmaPatternTest, EqualKeysStepAlike) {
  const std::u32string alphabet = U"a0F9\\u{}()[]<>-,=:^$|*?+kpdbBxcLé";
  std::size_t failures = 0;
  const std::size_t pairs = ForPairsWithEqualKeys(false, [&](const EcmaPatternChecker& a,
                                                             const EcmaPatternChecker& b,
                                                             const std::u32string& ta,
                                                             const std::u32string& tb) {
    for (char32_t x : alphabet) {
      EcmaPatternChecker ax = a, bx = b;
      const bool ra = ax.Step(x), rb = bx.Step(x);
      bool same =
          ra == rb && (!ra || Key(ax) == Key(bx)) && a.PlainRunsFree() == b.PlainRunsFree();
      for (char32_t y : alphabet) {
        if (!same || !ra) break;
        EcmaPatternChecker axy = ax, bxy = bx;
        same = axy.Step(y) == bxy.Step(y);
      }
      if (!same && ++failures <= 20) {
        ADD_FAILURE() << Encode(ta) << " and " << Encode(tb) << " share a key but differ after "
                      << Encode(std::u32string(1, x));
      }
    }
  });
  EXPECT_GT(pairs, 1000u);
  EXPECT_EQ(failures, 0u);
}

// Equal whole keys (AppendKey) give equal Complete() and Step results, two characters deep, and
// a whole key tells apart what the local key leaves out (`(a)\\1` from `a\\1`).
TEST(EcmaPatternTest, EqualWholeKeysCompleteAlike) {
  const std::u32string alphabet = U"a0F9\\u{}()[]<>-,=:^$|*?+kpdbBxcL1é";
  std::size_t failures = 0;
  const std::size_t pairs = ForPairsWithEqualKeys(true, [&](const EcmaPatternChecker& a,
                                                            const EcmaPatternChecker& b,
                                                            const std::u32string& ta,
                                                            const std::u32string& tb) {
    bool same = a.Complete() == b.Complete();
    for (char32_t x : alphabet) {
      EcmaPatternChecker ax = a, bx = b;
      same = same && ax.Step(x) == bx.Step(x) && ax.Complete() == bx.Complete() &&
             WholeKey(ax) == WholeKey(bx);
      for (char32_t y : alphabet) {
        if (!same) break;
        EcmaPatternChecker axy = ax, bxy = bx;
        same = axy.Step(y) == bxy.Step(y) && axy.Complete() == bxy.Complete();
      }
    }
    if (!same && ++failures <= 20) {
      ADD_FAILURE() << Encode(ta) << " and " << Encode(tb)
                    << " share a whole key but complete differently";
    }
  });
  EXPECT_GT(pairs, 1000u);
  EXPECT_EQ(failures, 0u);
  EcmaPatternChecker with_group, without;
  Feed(&with_group, U"(a)\\1");
  Feed(&without, U"a\\1");
  EXPECT_NE(with_group.Complete(), without.Complete());
  EXPECT_NE(WholeKey(with_group), WholeKey(without));
}

// PlainRunsFree() is exact: when true, runs of plain characters all pass; when false, one fails.
TEST(EcmaPatternTest, PlainRunsFreeIsExact) {
  const std::u32string plain = U" \"!#%&',/:;<=>@_`~09aAgkzé😀";
  std::mt19937 rng(7);
  std::size_t free = 0, not_free = 0;
  for (const std::u32string& p : LivePrefixes(1000)) {
    EcmaPatternChecker c;
    Feed(&c, p);
    bool one_fails = false;
    for (char32_t x : plain) {
      EcmaPatternChecker d = c;
      one_fails |= !d.Step(x);
    }
    if (!c.PlainRunsFree()) {
      ++not_free;
      EXPECT_TRUE(one_fails) << Encode(p);
      continue;
    }
    ++free;
    EXPECT_FALSE(one_fails) << Encode(p);
    for (int run = 0; run < 8; ++run) {
      EcmaPatternChecker d = c;
      std::u32string r;
      for (std::size_t i = 0, n = 2 + rng() % 5; i < n; ++i)
        r.push_back(plain[rng() % plain.size()]);
      EXPECT_TRUE(Feed(&d, r)) << Encode(p) << " then " << Encode(r);
    }
  }
  EXPECT_GT(free, 1000u);
  EXPECT_GT(not_free, 1000u);
}

// The escapes being read in a group name or as the end of a class range, against brute force
// over every value they can still become (identifiers from ICU directly).
TEST(EcmaPatternTest, EscapePrefixesMatchBruteForce) {
  std::vector<bool> id_start(0x110000), id_continue(0x110000);
  for (UChar32 c = 0; c < 0x110000; ++c) {
    id_start[c] = u_hasBinaryProperty(c, UCHAR_ID_START) || c == '$' || c == '_';
    id_continue[c] =
        u_hasBinaryProperty(c, UCHAR_ID_CONTINUE) || c == '$' || c == 0x200C || c == 0x200D;
  }
  auto hex = [](std::uint32_t v, int digits) {
    std::string s;
    for (int i = digits - 1; i >= 0; --i) s.push_back("0123456789ABCDEF"[(v >> (4 * i)) & 15]);
    return s;
  };
  // \uXXXX then, for a lead, any \uYYYY trail: the code points it can write.
  auto each_value = [](std::uint32_t x, auto f) {
    if (x >= 0xD800 && x <= 0xDBFF) {
      for (std::uint32_t t = 0xDC00; t <= 0xDFFF; ++t)
        f(0x10000 + ((x - 0xD800) << 10) + t - 0xDC00);
    }
    f(x);
  };
  std::size_t failures = 0;
  for (int k = 1; k <= 3; ++k) {
    for (std::uint32_t p = 0; p < (1u << (4 * k)); ++p) {
      bool start = false, cont = false, above[3] = {};
      const std::uint32_t kLows[3] = {0x41, 0xFFFF, 0x1F600};
      for (std::uint32_t r = 0; r < (1u << (4 * (4 - k))); ++r) {
        const std::uint32_t x = p << (4 * (4 - k)) | r;
        each_value(x, [&](std::uint32_t v) {
          const bool pair_or_scalar = v > 0xFFFF || v < 0xD800 || v > 0xDFFF;
          start |= pair_or_scalar && id_start[v];
          cont |= pair_or_scalar && id_continue[v];
          for (int i = 0; i < 3; ++i) above[i] |= v >= kLows[i];
        });
      }
      const std::string u = "\\u" + hex(p, k);
      failures += Viable("(?<" + u) != start;
      failures += Viable("(?<a" + u) != cont;
      EXPECT_EQ(Viable("(?<" + u), start) << u;
      for (int i = 0; i < 3; ++i) {
        const std::string text = "[\\u{" + hex(kLows[i], 6) + "}-" + u;
        EXPECT_EQ(Viable(text), above[i]) << text;
        failures += Viable(text) != above[i];
      }
    }
  }
  // \u{...}: a value can be reached iff its hex digits (no leading zeros) start with the prefix's.
  std::map<std::string, std::array<bool, 2>> braced;  // prefix -> {an id start, an id continue}
  for (std::uint32_t v = 1; v < 0x110000; ++v) {
    std::string h = hex(v, 6);
    h.erase(0, h.find_first_not_of('0'));
    for (std::size_t len = 1; len <= 3 && len <= h.size(); ++len) {
      auto& b = braced[h.substr(0, len)];
      b[0] = b[0] || id_start[v];
      b[1] = b[1] || id_continue[v];
    }
  }
  for (const auto& [prefix, ids] : braced) {
    EXPECT_EQ(Viable("(?<\\u{" + prefix), ids[0]) << prefix;
    EXPECT_EQ(Viable("(?<a\\u{00" + prefix), ids[1]) << prefix;
    failures += Viable("(?<\\u{" + prefix) != ids[0];
    if (failures > 20) break;
  }
  EXPECT_EQ(failures, 0u);
}

// SomeStepIn against brute force. States: the live prefixes, with a few awkward ones added,
// one per local key (equal keys step alike).
struct KeyedState {
  std::u32string text;
  EcmaPatternChecker checker;
};
const std::vector<KeyedState>& SomeStepStates() {
  static const std::vector<KeyedState> states = [] {
    std::vector<std::u32string> texts = LivePrefixes(1000);
    // clang-format off
    for (const char* t :
         {"\\0", "[\\0", "\\12", "(", "(?", "(?<", "(?<a", "(?<a>)\\k<", "\\k<a", "\\k", "a{",
          "a{1", "a{1,", "a{12,3", "[", "[^", "[a", "[a-", "[\\d-", "[\\u{10FFFF}-", "[é-",
          "[\\uD83D", "[\\uD83D\\", "[\\uD83D\\u", "[\\uD83D\\uD", "[a-\\uD83D", "[\\uFFFF-\\uD83D",
          "[\\uFFFF-\\uD83D\\", "[\\uE000-\\uD83D", "(?<\\uD801", "(?<\\uD801\\", "(?<\\uD801\\uD",
          "(?<a\\uD801", "(?<\\u", "(?<\\u{", "(?<\\u{1", "(?<a\\u{2", "\\", "[\\", "[z-\\",
          "\\c", "[\\c", "[z-\\c", "[\\x01-\\c", "\\x", "\\x4", "[z-\\x", "[z-\\x7", "\\u", "\\u{",
          "\\u{10", "[z-\\u{", "[z-\\u{0", "\\p", "\\p{", "\\p{L", "\\p{Script=", "\\p{Script=Gr",
          "[\\p{L", "[a-\\u00", "(?<a>)(?<a", "[\\cJ-", "[\\x7F-", "[\\u{80}-", "[\\u{D7FF}-",
          "[\\u{E000}-", "[\\uD7FF-", "[\\u{10000}-", "[\\u{10FFFE}-", "(?<a\\u{1F600}"}) {
      // clang-format on
      texts.push_back(Decode(t));
    }
    std::vector<KeyedState> out;
    std::unordered_set<std::string> keys;
    for (const std::u32string& t : texts) {
      EcmaPatternChecker c;
      if (Feed(&c, t) && keys.insert(Key(c)).second) out.push_back({t, c});
    }
    return out;
  }();
  return states;
}

// The ranges a partial UTF-8 sequence can still become: lead bytes alone, and a lead with one
// (and, for four-byte sequences, two) continuation bytes; past U+10FFFF and over surrogates too.
std::vector<std::pair<char32_t, char32_t>> PartialUtf8Ranges() {
  std::vector<std::pair<char32_t, char32_t>> out;
  for (char32_t b = 0xC2; b <= 0xDF; ++b) out.push_back({(b & 0x1F) << 6, (b & 0x1F) << 6 | 0x3F});
  for (char32_t b = 0xE0; b <= 0xEF; ++b) {
    const char32_t base = (b & 0xF) << 12;
    out.push_back({std::max<char32_t>(base, 0x800), base | 0xFFF});
    for (char32_t b2 = b == 0xE0 ? 0xA0 : 0x80; b2 <= 0xBF; ++b2) {
      out.push_back({base | (b2 & 0x3F) << 6, base | (b2 & 0x3F) << 6 | 0x3F});
    }
  }
  for (char32_t b = 0xF0; b <= 0xF4; ++b) {
    const char32_t base = (b & 0x7) << 18;
    out.push_back({std::max<char32_t>(base, 0x10000), base | 0x3FFFF});
    for (char32_t b2 = b == 0xF0 ? 0x90 : 0x80; b2 <= 0xBF; ++b2) {
      const char32_t base2 = base | (b2 & 0x3F) << 12;
      out.push_back({base2, base2 | 0xFFF});
      for (char32_t b3 : {0x80, 0x9F, 0xBF}) {
        out.push_back({base2 | (b3 & 0x3F) << 6, base2 | (b3 & 0x3F) << 6 | 0x3F});
      }
    }
  }
  return out;
}

// Ranges around ASCII, the surrogates and U+10FFFF, single ASCII characters and control sets.
std::vector<std::pair<char32_t, char32_t>> EdgeRanges() {
  // clang-format off
  std::vector<std::pair<char32_t, char32_t>> out = {
      {0, 0x1F},          {0x9, 0xD},           {0x7F, 0x9F},         {0, 0x7F},
      {0x7F, 0x80},       {0x70, 0x90},         {0x80, 0xFF},         {0x20, 0x7E},
      {0, 0x10FFFF},      {0x80, 0x10FFFF},     {0xD7F0, 0xD810},     {0xD7FF, 0xD800},
      {0xD800, 0xDFFF},   {0xD800, 0xD800},     {0xDFFF, 0xE000},     {0xDFF0, 0xE010},
      {0xE000, 0xE000},   {0xD000, 0xDFFF},     {0xFFF0, 0x10010},    {0x10FFF0, 0x110010},
      {0x10FFFF, 0x10FFFF}, {0x110000, 0x1FFFFF}, {0xFFFFFFF0, 0xFFFFFFFF}, {0x30, 0x39},
      {0x41, 0x5A},       {0x61, 0x7A},         {0x24, 0x24},         {0x5F, 0x5F},
      {0x200C, 0x200D},   {0x1F600, 0x1F64F},   {0x10400, 0x1044F},   {0xE0100, 0xE01EF}};
  // clang-format on
  for (char32_t c = 0; c < 0x80; ++c) out.push_back({c, c});
  return out;
}

bool BruteSomeStep(const EcmaPatternChecker& c, char32_t lo, char32_t hi) {
  for (std::uint64_t x = lo; x <= hi; ++x) {
    EcmaPatternChecker d = c;
    if (d.Step(static_cast<char32_t>(x))) return true;
  }
  return false;
}

// Every state, against a literal loop of Steps over ranges up to 0x11000 code points wide.
TEST(EcmaPatternTest, SomeStepInMatchesBruteForce) {
  const auto& states = SomeStepStates();
  ASSERT_GT(states.size(), 2000u);
  std::vector<std::pair<char32_t, char32_t>> fixed = EdgeRanges();
  for (const auto& r : PartialUtf8Ranges()) {
    if (r.second - r.first < 4096) fixed.push_back(r);
  }
  std::mt19937 rng(99);
  std::size_t checks = 0, failures = 0, passes = 0;
  auto check = [&](const KeyedState& s, char32_t lo, char32_t hi) {
    ++checks;
    const bool want = BruteSomeStep(s.checker, lo, hi);
    passes += want;
    if (s.checker.SomeStepIn(lo, hi) != want && ++failures <= 30) {
      ADD_FAILURE() << Encode(s.text) << " [" << std::hex << std::uint32_t{lo} << ", "
                    << std::uint32_t{hi} << "]: brute " << want;
    }
  };
  const std::size_t sample = static_cast<std::size_t>(40 * testing::TestScale());
  for (const KeyedState& s : states) {
    for (const auto& [lo, hi] : EdgeRanges()) {
      if (hi - lo <= 0x11000) check(s, lo, hi);
    }
    for (std::size_t i = 0; i < sample; ++i) {  // some of the partial sequences
      const auto& r = fixed[rng() % fixed.size()];
      check(s, r.first, r.second);
    }
    for (std::size_t i = 0; i < sample; ++i) {  // small random ranges, mostly low
      const char32_t top = std::array<char32_t, 4>{0x100, 0x3000, 0x20000, 0x110010}[rng() % 4];
      const char32_t lo = rng() % top;
      check(s, lo, lo + rng() % (1 + rng() % 300));
    }
  }
  std::cout << states.size() << " states, " << checks << " ranges, " << passes << " pass\n";
  EXPECT_EQ(failures, 0u);
  EXPECT_GT(passes * 10, checks);
  EXPECT_LT(passes, checks);
}

// A sample of states covering every (mode, escape, class phase, flags), against the Step result
// of every code point: all the partial UTF-8 ranges, whole planes and large random ranges.
TEST(EcmaPatternTest, SomeStepInMatchesEveryCodePoint) {
  std::map<std::string, std::vector<const KeyedState*>> buckets;
  for (const KeyedState& s : SomeStepStates()) {
    const std::string k = Key(s.checker);
    buckets[k.substr(0, 3) + k[5]].push_back(&s);
  }
  std::mt19937 rng(5);
  const std::size_t per_bucket = static_cast<std::size_t>(2 * testing::TestScale());
  std::vector<std::uint32_t> below(0x110001);  // below[c]: how many code points < c pass
  std::vector<std::pair<char32_t, char32_t>> ranges = PartialUtf8Ranges();
  for (const auto& r : EdgeRanges()) ranges.push_back(r);
  for (char32_t lo = 0; lo < 0x110000; lo += 0x10000) ranges.push_back({lo, lo + 0xFFFF});
  std::size_t states = 0, failures = 0;
  for (auto& [bucket, members] : buckets) {
    std::shuffle(members.begin(), members.end(), rng);
    for (std::size_t m = 0; m < members.size() && m < per_bucket; ++m) {
      const KeyedState& s = *members[m];
      ++states;
      for (char32_t c = 0; c < 0x110000; ++c) {
        EcmaPatternChecker d = s.checker;
        below[c + 1] = below[c] + d.Step(c);
      }
      auto want = [&](char32_t lo, char32_t hi) {
        hi = std::min<char32_t>(hi, 0x10FFFF);
        return lo <= hi && below[hi + 1] > below[lo];
      };
      auto check = [&](char32_t lo, char32_t hi) {
        if (s.checker.SomeStepIn(lo, hi) != want(lo, hi) && ++failures <= 30) {
          ADD_FAILURE() << Encode(s.text) << " [" << std::hex << std::uint32_t{lo} << ", "
                        << std::uint32_t{hi} << "]: brute " << want(lo, hi);
        }
      };
      for (const auto& [lo, hi] : ranges) check(lo, hi);
      for (int i = 0; i < 2000; ++i) {
        const char32_t lo = rng() % 0x110000;
        check(lo, lo + rng() % (1u << (rng() % 21)));
      }
    }
  }
  std::cout << states << " states in " << buckets.size() << " buckets\n";
  EXPECT_GT(buckets.size(), 40u);
  EXPECT_EQ(failures, 0u);
}

TEST(EcmaPatternTest, SubtleRules) {
  const char* kValid[] = {"\\u{10FFFF}",
                          "\\u{0000000000041}",
                          "[\\uD83D\\uDE00-\\uD83D\\uDE01]",
                          "(?<a>x)\\k<a>",
                          "\\k<a>(?<a>x)",
                          "\\1()",
                          "()\\1",
                          "\\0",
                          "[\\0-9]",
                          "[a-b-c]",
                          "[--a]",
                          "[a-]",
                          "[-a]",
                          "[\\d-]",
                          "[\\uFFFF-\\uD83D\\uDE00]",
                          "[\\uD83D-\\uDE00]",
                          "[\\b-\\n]",
                          "[\\cJ-\\cK]",
                          "a{3,10}",
                          "a{003,0010}",
                          "a{2147483648,2147483647}",
                          "(?<\\ud801\\udc00>x)",
                          "(?<$_\\u200c>x)",
                          "\\p{Script=Greek}",
                          "\\p{scx=Latn}",
                          "\\p{WSpace}",
                          "\\p{Lu}",
                          "\\p{General_Category=Letter}",
                          "(?<=a)b",
                          "(?<!a)b",
                          "a{1}?",
                          "[^]",
                          "[]",
                          "\\/"};
  for (const char* p : kValid) EXPECT_TRUE(IsEcmaPattern(p)) << p;
  const char* kInvalid[] = {"\\u{110000}",
                            "\\u{}",
                            "[\\uD83D\\uDE01-\\uD83D\\uDE00]",
                            "\\k<a>",
                            "\\k",
                            "\\2()",
                            "\\00",
                            "\\01",
                            "[\\01]",
                            "[\\1]",
                            "[\\B]",
                            "[\\d-a]",
                            "[a-\\d]",
                            "[\\d--]",
                            "[a--]",
                            "[\\uFFFF-\\uD83D]",
                            "a{3,2}",
                            "a{2147483647,2147483646}",
                            "a{",
                            "a{,5}",
                            "}",
                            "]",
                            "(?<a>x)(?<a>y)",
                            "(?<a>x)|(?<a>y)",
                            "(?<\\ud801>x)",
                            "(?<1>x)",
                            "(?=a)*",
                            "^*",
                            "\\b+",
                            "a**",
                            "a*??",
                            "\\-",
                            "\\a",
                            "\\ ",
                            "\\c1",
                            "[\\c_]",
                            "\\x4",
                            "\\p{letter}",
                            "\\p{Script=greek}",
                            "\\p{Script=Hrkt}",
                            "\\p{Alpha=Y}",
                            "\\pL",
                            "(?i:a)",
                            "(?<a>",
                            "\xC3",
                            "\xED\xA0\x80",
                            "\xC0\x80"};
  for (const char* p : kInvalid) EXPECT_FALSE(IsEcmaPattern(p)) << p;

  // Viability: alive iff some continuation is valid.
  EXPECT_TRUE(Viable("a{3,1"));  // a{3,10}
  EXPECT_FALSE(Viable("a{5,3}"));
  EXPECT_FALSE(Viable("[z-a"));
  EXPECT_TRUE(Viable("[z-\\"));    // [z-\u00ff]
  EXPECT_TRUE(Viable("[z-\\x7"));  // \x7A
  EXPECT_FALSE(Viable("[z-\\x6"));
  EXPECT_FALSE(Viable("[z-\\c"));
  EXPECT_TRUE(Viable("[\\x01-\\c"));
  EXPECT_FALSE(Viable("[\\u{10FFFF}-\\u{2"));
  EXPECT_TRUE(Viable("[\\u{10FFFF}-\\u{1"));
  EXPECT_TRUE(Viable("[\\u{10FFFF}-\\u{0000"));
  EXPECT_TRUE(Viable("[\\uFFFF-\\uD83D"));  // \uDE00 makes U+1F600
  EXPECT_FALSE(Viable("[\\uFFFF-\\uD83D]"));
  EXPECT_FALSE(Viable("[\\uFFFF-\\uD83D\\uD8"));
  EXPECT_TRUE(Viable("[\\uFFFF-\\uD"));  // a pair
  EXPECT_FALSE(Viable("[\\uFFFF-\\uE"));
  EXPECT_TRUE(Viable("[\\d-]"));
  EXPECT_FALSE(Viable("[\\d-\\"));
  EXPECT_FALSE(Viable("[\\d-a"));
  EXPECT_FALSE(Viable("[a-\\p"));
  EXPECT_TRUE(Viable("\\p{Scr"));
  EXPECT_TRUE(Viable("\\p{Script=Gre"));
  EXPECT_FALSE(Viable("\\p{Script=gre"));
  EXPECT_FALSE(Viable("\\p{Lx"));
  EXPECT_TRUE(Viable("(?<\\u00"));
  EXPECT_FALSE(Viable("(?<\\u003"));   // digits and :;<=>? only
  EXPECT_TRUE(Viable("(?<\\u002"));    // $
  EXPECT_TRUE(Viable("(?<a\\u003"));   // a digit may continue a name
  EXPECT_FALSE(Viable("(?<\\uD83D"));  // U+1F400..U+1F7FF: no identifier start
  EXPECT_TRUE(Viable("(?<\\uD801"));
  EXPECT_TRUE(Viable("\\5"));  // groups may follow
  EXPECT_TRUE(Viable("\\k<zz>"));
  EXPECT_FALSE(Viable("(?<a>)(?<a>"));
  EXPECT_TRUE(Viable("(?<a>)(?<a"));  // (?<ab>
  EXPECT_FALSE(
      Viable("\\0"
             "1"));
  EXPECT_FALSE(Viable(")"));

  // Copies are independent; a dead checker stays dead.
  EcmaPatternChecker c;
  ASSERT_TRUE(Feed(&c, U"(a"));
  EcmaPatternChecker d = c;
  EXPECT_TRUE(d.Step(')'));
  EXPECT_TRUE(d.Complete());
  EXPECT_FALSE(c.Complete());
  EXPECT_FALSE(c.Step('}'));
  EXPECT_TRUE(c.dead());
  EXPECT_FALSE(c.Step(')'));
  EXPECT_FALSE(c.Complete());
  EcmaPatternChecker e;
  EXPECT_FALSE(e.Step(0xD800));
  EcmaPatternChecker f;
  EXPECT_FALSE(f.Step(0x110000));
}

}  // namespace
}  // namespace lockstep
