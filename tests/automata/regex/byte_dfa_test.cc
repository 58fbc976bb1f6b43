// Tests for the byte automata behind CompileRegexToDfa (automata/regex/regex_compiler.h): UTF-8 range
// splitting, hand-written golden dumps, invariants (trimmed, minimal by brute force, valid UTF-8
// only), budgets, and a cross-check of FullMatch against RE2 on sampled, random and mutated
// strings.
#include "automata/regex/regex_compiler.h"

#include <gtest/gtest.h>
#include <re2/re2.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "automata/regex/byte_nfa.h"
#include "automata/regex/dfa_builder.h"
#include "grammar/regex/regex_parser.h"
#include "util/regex_sampler.h"

namespace lockstep {
namespace {

// --- UTF-8 range splitting ---------------------------------------------------------------------

std::string Seqs(char32_t lo, char32_t hi) {
  std::vector<Utf8Sequence> seqs;
  SplitUtf8Range(lo, hi, &seqs);
  std::string out;
  char buf[16];
  for (const Utf8Sequence& s : seqs) {
    if (!out.empty()) out += ' ';
    for (int k = 0; k < s.len; ++k) {
      std::snprintf(buf, sizeof(buf), "[%02x-%02x]", s.lo[k], s.hi[k]);
      out += buf;
    }
  }
  return out;
}

TEST(Utf8RangeTest, SplitsByLengthAndPrefix) {
  EXPECT_EQ(Seqs(0x00, 0x7F), "[00-7f]");
  EXPECT_EQ(Seqs(0x80, 0x7FF), "[c2-df][80-bf]");
  EXPECT_EQ(Seqs(0x800, 0xFFFF), "[e0-e0][a0-bf][80-bf] [e1-ef][80-bf][80-bf]");
  EXPECT_EQ(Seqs(0x10000, 0x10FFFF),
            "[f0-f0][90-bf][80-bf][80-bf] [f1-f3][80-bf][80-bf][80-bf] "
            "[f4-f4][80-8f][80-bf][80-bf]");
  EXPECT_EQ(Seqs(0x41, 0x41), "[41-41]");
  EXPECT_EQ(Seqs(0xE9, 0xE9), "[c3-c3][a9-a9]");
  EXPECT_EQ(Seqs(0x7F, 0x80), "[7f-7f] [c2-c2][80-80]");
}

bool InSeq(const Utf8Sequence& s, const std::string& enc) {
  if (static_cast<int>(enc.size()) != s.len) return false;
  for (int k = 0; k < s.len; ++k) {
    const auto b = static_cast<std::uint8_t>(enc[k]);
    if (b < s.lo[k] || b > s.hi[k]) return false;
  }
  return true;
}

TEST(Utf8RangeTest, ExactCoverOnRandomRanges) {
  std::mt19937_64 rng(7);
  std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x0, 0xD7FF}, {0xE000, 0x10FFFF}, {0x3B1, 0x3C9}, {0xFFF0, 0x10010}};
  std::uniform_int_distribution<std::uint32_t> cp(0, 0x10FFFF);
  while (ranges.size() < 10) {
    char32_t a = cp(rng), b = cp(rng);
    if (a > b) std::swap(a, b);
    if (b >= 0xD800 && a <= 0xDFFF) continue;  // callers never pass surrogates
    ranges.push_back({a, b});
  }
  for (auto [lo, hi] : ranges) {
    std::vector<Utf8Sequence> seqs;
    SplitUtf8Range(lo, hi, &seqs);
    for (char32_t c = 0; c <= 0x10FFFF; ++c) {
      if (c == 0xD800) c = 0xE000;
      std::string enc;
      AppendUtf8(c, &enc);
      int hits = 0;
      for (const Utf8Sequence& s : seqs) hits += InSeq(s, enc);
      ASSERT_EQ(hits, (c >= lo && c <= hi) ? 1 : 0)
          << std::hex << static_cast<std::uint32_t>(lo) << "-" << static_cast<std::uint32_t>(hi)
          << " " << static_cast<std::uint32_t>(c);
    }
  }
}

// --- Golden dumps, written by hand --------------------------------------------------------------

std::string Dump(std::string_view pattern) {
  Result<ByteDfa> d = CompileRegexToDfa(pattern);
  if (!d.ok()) return d.status().ToString();
  return DumpDfa(*d);
}

TEST(ByteDfaTest, GoldenDumps) {
  EXPECT_EQ(Dump("a|b"), "start 1\n1: 61-62->2\n2*:\n");
  EXPECT_EQ(Dump("ab"), "start 1\n1: 61->2\n2: 62->3\n3*:\n");
  EXPECT_EQ(Dump("^ab$"), "start 1\n1: 61->2\n2: 62->3\n3*:\n");
  EXPECT_EQ(Dump("a*"), "start 1\n1*: 61->1\n");
  EXPECT_EQ(Dump("a*?"), "start 1\n1*: 61->1\n");
  EXPECT_EQ(Dump("a+"), "start 1\n1: 61->2\n2*: 61->2\n");
  EXPECT_EQ(Dump("(?:a|b)*"), "start 1\n1*: 61-62->1\n");
  EXPECT_EQ(Dump(""), "start 1\n1*:\n");
  EXPECT_EQ(Dump("[]"), "start 0\n");
  EXPECT_EQ(Dump("a[]b"), "start 0\n");
  EXPECT_EQ(Dump("[]*"), "start 1\n1*:\n");
  EXPECT_EQ(Dump("[]|a"), "start 1\n1: 61->2\n2*:\n");
  EXPECT_EQ(Dump("ab|ac"), "start 1\n1: 61->2\n2: 62-63->3\n3*:\n");
  EXPECT_EQ(Dump("\\d{1,3}"), "start 1\n1: 30-39->2\n2*: 30-39->3\n3*: 30-39->4\n4*:\n");
  EXPECT_EQ(Dump("a{2,}"), "start 1\n1: 61->2\n2: 61->3\n3*: 61->3\n");
  // The start state and the state after a comma both wait for a letter: one state.
  EXPECT_EQ(Dump("[a-z]+(,[a-z]+)*"), "start 1\n1: 61-7a->2\n2*: 2c->1 61-7a->2\n");
  EXPECT_EQ(Dump("(a|b)*abb"),
            "start 1\n1: 61->2 62->1\n2: 61->2 62->3\n3: 61->2 62->4\n4*: 61->2 62->1\n");
  EXPECT_EQ(Dump("é"), "start 1\n1: c3->2\n2: a9->3\n3*:\n");
  EXPECT_EQ(Dump("\\u{10000}"), "start 1\n1: f0->2\n2: 90->3\n3: 80->4\n4: 80->5\n5*:\n");
  // Any scalar value: the canonical valid-UTF-8 automaton.
  EXPECT_EQ(Dump("[^]"),
            "start 1\n"
            "1: 00-7f->9 c2-df->2 e0->3 e1-ec->4 ed->5 ee-ef->4 f0->6 f1-f3->7 f4->8\n"
            "2: 80-bf->9\n"
            "3: a0-bf->2\n"
            "4: 80-bf->2\n"
            "5: 80-9f->2\n"
            "6: 90-bf->4\n"
            "7: 80-bf->4\n"
            "8: 80-8f->4\n"
            "9*:\n");
}

TEST(ByteDfaTest, ContractShape) {
  Result<ByteDfa> d = CompileRegexToDfa("a|b");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->num_states, 3);
  EXPECT_EQ(d->start, 1);
  EXPECT_EQ(d->accept_begin, 2);
  EXPECT_EQ(d->num_classes, 2);  // {a, b} and everything else
  EXPECT_EQ(d->byte_class['a'], d->byte_class['b']);
  EXPECT_NE(d->byte_class['a'], d->byte_class['c']);
  for (int c = 0; c < d->num_classes; ++c) EXPECT_EQ(d->next[c], ByteDfa::kDead);
  EXPECT_TRUE(d->FullMatch("a"));
  EXPECT_FALSE(d->FullMatch("ab"));
  EXPECT_FALSE(d->FullMatch(""));

  Result<ByteDfa> e = CompileRegexToDfa("[^\\s\\S]");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->start, ByteDfa::kDead);
  EXPECT_EQ(e->num_states, 1);
  EXPECT_EQ(CheckDfaInvariants(*e), "");
  EXPECT_FALSE(e->FullMatch(""));
}

TEST(ByteDfaTest, UnicodeSemantics) {
  auto m = [](std::string_view p, std::string_view s) {
    Result<ByteDfa> d = CompileRegexToDfa(p);
    EXPECT_TRUE(d.ok()) << p;
    return d.ok() && d->FullMatch(s);
  };
  // \s is ECMA-262's set.
  for (const char* ws : {" ", "\t", "\n", "\v", "\f", "\r", "\u00a0", "\u1680", "\u2000", "\u200a",
                         "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff"}) {
    EXPECT_TRUE(m("\\s", ws)) << ws;
    EXPECT_FALSE(m("\\S", ws)) << ws;
  }
  EXPECT_FALSE(m("\\s", "\u200b"));
  EXPECT_FALSE(m("\\s", "\u0085"));
  // . excludes exactly the ECMA line terminators.
  for (const char* lt : {"\n", "\r", "\u2028", "\u2029"}) EXPECT_FALSE(m(".", lt));
  for (const char* ok : {"a", "\t", "\u0085", "\u00e9", "\uffff", "\U0001F600", "\U0010FFFF"}) {
    EXPECT_TRUE(m(".", ok)) << ok;
  }
  // \d and \w are ASCII.
  EXPECT_FALSE(m("\\d", "\u0663"));
  EXPECT_FALSE(m("\\w", "\u00e9"));
  EXPECT_TRUE(m("\\W", "\u00e9"));
  // Surrogate-pair escapes are one code point.
  EXPECT_TRUE(m("\\uD83D\\uDE00", "\U0001F600"));
  EXPECT_TRUE(m("[\\uD83D\\uDE00-\\uD83D\\uDE4F]+", "\U0001F600\U0001F64F"));
  EXPECT_FALSE(m("[\\uD83D\\uDE00-\\uD83D\\uDE4F]", "\U0001F650"));
  // Encoded surrogates, overlong forms and stray bytes never match, even for [^a].
  for (const char* bad :
       {"\xed\xa0\x80", "\xc0\x80", "\xe0\x80\x80", "\xf4\x90\x80\x80", "\x80", "\xff", "\xc3"}) {
    EXPECT_FALSE(m("[^a]", bad));
    EXPECT_FALSE(m(".*", bad));
  }
}

// --- Invariants --------------------------------------------------------------------------------

// Brute-force minimality (table filling, independent of Hopcroft): every pair of states must be
// distinguishable.
bool IsMinimal(const ByteDfa& d, std::string* why) {
  const int n = d.num_states;
  std::vector<std::uint8_t> dist(static_cast<std::size_t>(n) * n, 0);
  for (int p = 0; p < n; ++p) {
    for (int q = 0; q < n; ++q) dist[p * n + q] = d.IsAccepting(p) != d.IsAccepting(q);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) {
        if (dist[p * n + q]) continue;
        for (int b = 0; b < 256; ++b) {
          const int tp = d.Step(p, b), tq = d.Step(q, b);
          if (dist[tp * n + tq]) {
            dist[p * n + q] = dist[q * n + p] = 1;
            changed = true;
            break;
          }
        }
      }
    }
  }
  for (int p = 0; p < n; ++p) {
    for (int q = p + 1; q < n; ++q) {
      if (!dist[p * n + q]) {
        *why = "states " + std::to_string(p) + " and " + std::to_string(q) + " are equivalent";
        return false;
      }
    }
  }
  return true;
}

// A hand-written UTF-8 validator: 0 is a character boundary, 8 is an error.
int Utf8Step(int u, std::uint8_t b) {
  auto cont = [b](std::uint8_t lo, std::uint8_t hi, int to) { return b >= lo && b <= hi ? to : 8; };
  switch (u) {
    case 0:
      if (b < 0x80) return 0;
      if (b >= 0xC2 && b <= 0xDF) return 1;
      if (b == 0xE0) return 4;
      if (b == 0xED) return 5;
      if (b >= 0xE1 && b <= 0xEF) return 2;
      if (b == 0xF0) return 6;
      if (b >= 0xF1 && b <= 0xF3) return 3;
      if (b == 0xF4) return 7;
      return 8;
    case 1:
      return cont(0x80, 0xBF, 0);
    case 2:
      return cont(0x80, 0xBF, 1);
    case 3:
      return cont(0x80, 0xBF, 2);
    case 4:
      return cont(0xA0, 0xBF, 1);
    case 5:
      return cont(0x80, 0x9F, 1);
    case 6:
      return cont(0x90, 0xBF, 2);
    case 7:
      return cont(0x80, 0x8F, 2);
    default:
      return 8;
  }
}

// Exhaustive: no accepted string is invalid UTF-8 (product of the DFA with the validator).
bool AcceptsOnlyValidUtf8(const ByteDfa& d) {
  if (d.start == ByteDfa::kDead) return true;
  std::vector<std::uint8_t> seen(static_cast<std::size_t>(d.num_states) * 9, 0);
  std::vector<std::pair<int, int>> queue = {{d.start, 0}};
  seen[d.start * 9] = 1;
  for (std::size_t i = 0; i < queue.size(); ++i) {
    auto [s, u] = queue[i];
    if (d.IsAccepting(s) && u != 0) return false;
    for (int b = 0; b < 256; ++b) {
      const int t = d.Step(s, b);
      if (t == ByteDfa::kDead) continue;
      const int v = Utf8Step(u, b);
      if (v == 8) return false;  // a live state after an invalid byte can still accept
      if (!seen[t * 9 + v]) {
        seen[t * 9 + v] = 1;
        queue.push_back({t, v});
      }
    }
  }
  return true;
}

bool IsValidUtf8(std::string_view s) {
  int u = 0;
  for (unsigned char c : s) {
    u = Utf8Step(u, c);
    if (u == 8) return false;
  }
  return u == 0;
}

// --- Cross-check against RE2 -------------------------------------------------------------------

struct CrossCase {
  const char* pattern;
};

const CrossCase kCross[] = {
    {"\\d{4}-\\d{2}-\\d{2}"},
    {"(19|20)\\d\\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])"},
    {"([01]\\d|2[0-3]):[0-5]\\d(:[0-5]\\d)?"},
    {"\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,6})?(Z|[+-]\\d{2}:\\d{2})"},
    {"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
    {"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}"},
    {"((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)"},
    {"\\(?\\d{3}\\)?[-. ]?\\d{3}[-. ]?\\d{4}"},
    {"\\+[1-9]\\d{1,14}"},
    {"(red|green|blue)"},
    {"yes|no|maybe"},
    {"-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?"},
    {"[a-z]+(,[a-z]+)*"},
    {"\\d{1,5}"},
    {"a{0}b{2,}c{1,3}d?"},
    {"(ab|a)(bc|c)*"},
    {"a*?b+?c??d{2,4}?e{2,}?"},
    {"((a|b)(c|d)){2,3}"},
    {"(?:x(?:y(?:z)?)?)+"},
    {"(?<year>\\d{4})-(?P<month>\\d{2})"},
    {"[^a-z]+"},
    {"[^\"\\\\]*"},
    {"\"([^\"\\\\]|\\\\.)*\""},
    {"[\\w.-]+"},
    {"\\W+"},
    {"\\D*x"},
    {"\\s*\\S+\\s*"},
    {"[α-ω]+"},
    {"[\\u4e00-\\u9fff]{1,4}"},
    {"[\\u{1F600}-\\u{1F64F}]+"},
    {"\\uD83D\\uDE00|\\u00e9"},
    {".+"},
    {"a.c"},
    {"[^\\n]*"},
    {"#[0-9a-fA-F]{6}|#[0-9a-fA-F]{3}"},
    {"(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(-[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*)?"},
    {"\\d{5}(-\\d{4})?"},
    {"https?://[a-zA-Z0-9.-]+(:\\d+)?(/[a-zA-Z0-9._~%-]*)*"},
    {"[A-Z][a-z]+( [a-z]+){2,8}\\."},
    {"^[a-z_][a-z0-9_]{0,30}$"},
    {"(a|ab)(c|bcd)(d*)"},
    {"(a+|b+)*c"},
    {"x*y*z*"},
    {"[\\x00-\\x1f]|\\t\\n"},
    {"(?:)|a"},
    {"[^\\u0000-\\u007f]+"},
    {"[\\s\\d]+"},
    {"[\\[\\]\\-\\\\]+"},
    {"\\$\\d+\\.\\d\\d"},
    {"(a{2}|b{3}){1,2}c{0,2}"},
    {"[\\u00C0-\\u024F ]+"},
    {"[^\\s]"},
    {"\\/path\\/to"},
    {"a|"},
    {"\\d{2,}?"},
    {"[^]{2}"},
    {"(a|b)*a(a|b){3}"},
    {"\\u{10FFFF}|[\\u{FFFF}-\\u{10000}]"},
    {"é|e\\u0301"},
    {"^(\\([0-9]{3}\\))?[0-9]{3}-[0-9]{4}$"},
};

std::int64_t g_cross_checks = 0;

std::string Mutate(std::string s, std::mt19937_64& rng) {
  static const std::string kBytes = "a0-. \n\xc3\xa9\xff\x80\xe2\x80\xa8,\"\\Z9";
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n)(rng); };
  const int ops = 1 + static_cast<int>(pick(2));
  for (int k = 0; k < ops; ++k) {
    switch (pick(4)) {
      case 0:
        if (!s.empty()) s.erase(pick(s.size() - 1), 1);
        break;
      case 1:
        s.insert(s.begin() + pick(s.size()), kBytes[pick(kBytes.size() - 1)]);
        break;
      case 2:
        if (!s.empty()) s[pick(s.size() - 1)] = kBytes[pick(kBytes.size() - 1)];
        break;
      case 3:
        if (!s.empty()) s.resize(pick(s.size() - 1));
        break;
      default: {
        const std::size_t a = pick(s.size());
        s.insert(a, s.substr(a, pick(4)));
      }
    }
  }
  return s;
}

TEST(ByteDfaCrossCheck, MatchesRe2) {
  std::mt19937_64 rng(12345);
  int patterns = 0;
  for (const CrossCase& c : kCross) {
    SCOPED_TRACE(c.pattern);
    Result<ByteDfa> d = CompileRegexToDfa(c.pattern);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(CheckDfaInvariants(*d), "");
    EXPECT_TRUE(AcceptsOnlyValidUtf8(*d));
    if (d->num_states <= 300) {
      std::string why;
      EXPECT_TRUE(IsMinimal(*d, &why)) << why;
    }
    std::optional<std::string> re2_pattern = ToRe2Pattern(c.pattern);
    ASSERT_TRUE(re2_pattern.has_value());
    RE2::Options opts;
    opts.set_log_errors(false);
    RE2 re(*re2_pattern, opts);
    ASSERT_TRUE(re.ok()) << *re2_pattern << ": " << re.error();
    ++patterns;

    auto check = [&](const std::string& s) {
      const bool ours = d->FullMatch(s);
      if (!IsValidUtf8(s)) {
        EXPECT_FALSE(ours) << "accepted invalid UTF-8";
      } else {
        EXPECT_EQ(ours, RE2::FullMatch(s, re)) << "input: " << s;
      }
      ++g_cross_checks;
    };
    // Strings drawn from the regex: all must match.
    std::vector<std::string> samples;
    for (int i = 0; i < 150; ++i) {
      std::optional<std::string> s = SampleRegex(c.pattern, rng);
      ASSERT_TRUE(s.has_value());
      EXPECT_TRUE(d->FullMatch(*s)) << *s;
      check(*s);
      samples.push_back(*s);
    }
    // Mutations of samples: mostly near misses.
    for (int i = 0; i < 600; ++i) check(Mutate(samples[i % samples.size()], rng));
    // Random strings over the pattern's own characters plus a few strangers.
    std::vector<std::string> alphabet = {"a", "0", "-", ".", " ", "\n", "\xc3\xa9", "\xff"};
    for (const std::string& s : samples) {
      for (std::size_t i = 0; i < s.size();) {
        std::size_t len = 1;
        const auto b = static_cast<unsigned char>(s[i]);
        if (b >= 0xF0)
          len = 4;
        else if (b >= 0xE0)
          len = 3;
        else if (b >= 0xC0)
          len = 2;
        alphabet.push_back(s.substr(i, len));
        i += len;
      }
    }
    for (int i = 0; i < 400; ++i) {
      std::string s;
      const int n = std::uniform_int_distribution<int>(0, 12)(rng);
      for (int k = 0; k < n; ++k) {
        s += alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng)];
      }
      check(s);
    }
    // Raw random bytes.
    for (int i = 0; i < 50; ++i) {
      std::string s(std::uniform_int_distribution<int>(0, 6)(rng), '\0');
      for (char& ch : s) ch = static_cast<char>(rng());
      check(s);
    }
  }
  EXPECT_GE(patterns, 40);
  std::cout << "[ cross-checks ] " << patterns << " patterns, " << g_cross_checks
            << " strings compared with RE2\n";
}

// Hopcroft's refinement (automata over 16,384 states x classes and more) against Moore's, which
// MinimizeDfa uses below that size: on large random automata built with equivalent states to
// merge (each state of a random core copied up to four times, every edge to a random copy of its
// target), both give the same canonical DFA, state for state.
TEST(ByteDfaTest, HopcroftAgreesWithMooreOnLargeAutomata) {
  std::mt19937_64 rng(2026);
  int merged = 0;
  for (int trial = 0; trial < 24; ++trial) {
    // Half the trials: few classes and long chains, where each split reaches back one state at
    // a time (the case Hopcroft's smaller-half rule is for); the others: many classes.
    const bool chains = trial % 2 == 0;
    const int core = chains ? 9000 + static_cast<int>(rng() % 4000)
                            : 2100 + static_cast<int>(rng() % 3000);
    const int copies = 1 + static_cast<int>(rng() % 4);
    const int k = chains ? 2 + static_cast<int>(rng() % 3) : 8 + static_cast<int>(rng() % 33);
    // The core: a counter-like chain (state i goes to i + 1 on class 0) with random edges, many
    // of them dead, and random acceptance.
    std::vector<int> core_next(static_cast<std::size_t>(core) * k);
    std::vector<std::uint8_t> core_acc(core);
    for (int i = 0; i < core; ++i) {
      for (int c = 0; c < k; ++c) {
        const unsigned draw = rng() % (chains ? 40 : 10);
        int t = c == 0 ? i + 1 : draw < 6 ? -1 : static_cast<int>(rng() % core);
        if (chains && c > 0 && draw >= 6) t = draw < 30 ? i + 2 : static_cast<int>(rng() % core);
        if (t >= core) t = -1;
        core_next[static_cast<std::size_t>(i) * k + c] = t;
      }
      core_acc[i] = (!chains && rng() % 7 == 0) || (chains && rng() % 500 == 0) || i == core - 1;
    }
    SubsetDfa d;
    d.num_classes = k;
    for (int b = 0; b < 256; ++b) d.byte_class[b] = static_cast<std::uint8_t>(b % k);
    d.num_states = 1 + core * copies;  // 0: dead; copy j of core state i: 1 + i * copies + j
    d.next.assign(static_cast<std::size_t>(d.num_states) * k, 0);
    d.accepting.assign(d.num_states, 0);
    for (int i = 0; i < core; ++i) {
      for (int j = 0; j < copies; ++j) {
        const int s = 1 + i * copies + j;
        d.accepting[s] = core_acc[i];
        for (int c = 0; c < k; ++c) {
          const int t = core_next[static_cast<std::size_t>(i) * k + c];
          d.next[static_cast<std::size_t>(s) * k + c] =
              t < 0 ? 0 : 1 + t * copies + static_cast<int>(rng() % copies);
        }
      }
    }
    d.start = 1;
    ASSERT_GT(static_cast<long>(d.num_states) * k, 16384);
    const ByteDfa hopcroft = MinimizeDfa(d);
    const ByteDfa moore = MinimizeDfaWith(d, false, true);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + std::to_string(d.num_states) +
                 " states, " + std::to_string(k) + " classes");
    ASSERT_EQ(hopcroft.num_states, moore.num_states);
    ASSERT_EQ(hopcroft.num_classes, moore.num_classes);
    ASSERT_EQ(hopcroft.byte_class, moore.byte_class);
    ASSERT_EQ(hopcroft.next, moore.next);
    ASSERT_EQ(hopcroft.start, moore.start);
    ASSERT_EQ(hopcroft.accept_begin, moore.accept_begin);
    EXPECT_EQ(CheckDfaInvariants(hopcroft), "");
    merged += d.num_states - hopcroft.num_states;
  }
  EXPECT_GT(merged, 10000);  // the copies were merged
}

// --- Budgets -----------------------------------------------------------------------------------

void ExpectLimit(std::string_view pattern, const RegexCompileOptions& o, std::string_view budget) {
  const auto t0 = std::chrono::steady_clock::now();
  Result<ByteDfa> d = CompileRegexToDfa(pattern, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(d.ok()) << pattern;
  EXPECT_EQ(d.status().code(), StatusCode::kResourceLimit) << d.status().ToString();
  EXPECT_NE(d.status().ToString().find("resource limit"), std::string::npos);
  EXPECT_NE(d.status().message().find(budget), std::string::npos) << d.status().ToString();
  EXPECT_LT(s, 10.0) << "budget error took too long";  // generous: sanitizer builds
}

TEST(ByteDfaTest, BudgetsEndInResourceLimit) {
  RegexCompileOptions o;
  o.max_dfa_states = 1000;
  ExpectLimit("(a|b)*a(a|b){20}", o, "max_dfa_states");
  ExpectLimit("(a|b)*a(a|b){20}", RegexCompileOptions{}, "max_dfa_states");
  o = {};
  o.max_nfa_states = 500;
  ExpectLimit("a{1000}", o, "max_nfa_states");
  ExpectLimit("((a{1000}){1000}){1000}", RegexCompileOptions{}, "max_nfa_states");
  ExpectLimit("((((.{100}){100}){100}){100}){100}", RegexCompileOptions{}, "max_nfa_states");
  o = {};
  o.max_repeat = 10;
  ExpectLimit("a{11}", o, "max_repeat");
  ExpectLimit("a{2,11}", o, "max_repeat");
  o = {};
  o.max_nesting_depth = 5;
  ExpectLimit("((((((a))))))", o, "max_nesting_depth");
  o = {};
  o.max_subset_elements = 1000;
  ExpectLimit("(a|b)*a(a|b){20}", o, "max_subset_elements");

  // Within budget, a moderately large DFA still compiles exactly.
  Result<ByteDfa> d = CompileRegexToDfa("(a|b)*a(a|b){9}");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->num_states, 1 + (1 << 10));  // dead + the last 10 letters remembered
  EXPECT_TRUE(d->FullMatch("bbbabbbbbbbbb"));
  EXPECT_FALSE(d->FullMatch("bbbbabbbbbbbb"));
  Result<ByteDfa> big = CompileRegexToDfa("[a-z]{5000}");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->num_states, 5002);
}

TEST(ByteDfaTest, ParseErrorsPassThrough) {
  Result<ByteDfa> d = CompileRegexToDfa("ab(?=c)");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidRegex);
  EXPECT_EQ(d.status().location(), "offset 2");
  EXPECT_NE(d.status().message().find("^"), std::string::npos);
}

// --- The shipped corpus ------------------------------------------------------------------------

TEST(ByteDfaTest, CorpusCompilesAndAgreesWithSamples) {
  std::ifstream in(std::string(LOCKSTEP_SOURCE_DATA_DIR) + "/regex/corpus.txt");
  ASSERT_TRUE(in.good());
  std::string line;
  std::vector<double> micros;
  std::string slowest;
  double slowest_us = 0;
  std::mt19937_64 rng(99);
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    SCOPED_TRACE(line);
    const auto t0 = std::chrono::steady_clock::now();
    Result<ByteDfa> d = CompileRegexToDfa(line);
    micros.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (micros.back() > slowest_us) {
      slowest_us = micros.back();
      slowest = line;
    }
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(CheckDfaInvariants(*d), "");
    EXPECT_NE(d->start, ByteDfa::kDead);
    std::optional<std::string> rp = ToRe2Pattern(line);
    ASSERT_TRUE(rp.has_value());
    RE2 re(*rp);
    ASSERT_TRUE(re.ok()) << re.error();
    for (int i = 0; i < 50; ++i) {
      std::optional<std::string> s = SampleRegex(line, rng);
      ASSERT_TRUE(s.has_value());
      EXPECT_TRUE(d->FullMatch(*s)) << *s;
      EXPECT_TRUE(RE2::FullMatch(*s, re)) << *s;
      std::string m = Mutate(*s, rng);
      if (IsValidUtf8(m)) {
        EXPECT_EQ(d->FullMatch(m), RE2::FullMatch(m, re)) << m;
      } else {
        EXPECT_FALSE(d->FullMatch(m)) << m;
      }
    }
  }
  ASSERT_GE(micros.size(), 40u);
  std::sort(micros.begin(), micros.end());
  std::cout << "[ corpus ] " << micros.size() << " patterns, compile median "
            << micros[micros.size() / 2] << " us, max " << micros.back() << " us (" << slowest
            << ")\n";
}

}  // namespace
}  // namespace lockstep
