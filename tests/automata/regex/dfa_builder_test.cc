// Direct tests of the subset construction (automata/regex/dfa_builder.h): ComputeByteClasses and
// BuildSubsetDfa on NFAs compiled from real regexes with the module's own front end
// (ParseRegex, CompileAstToNfa), before minimisation. Two independent oracles: a naive subset
// construction written here (std::set of NFA states, one step per byte, no classes, no caches),
// to which the SubsetDfa must be isomorphic state for state, and RE2's FullMatch on sampled,
// mutated and random strings. Also the promises of the header: state 0 is the dead empty set,
// classes are the coarsest ones numbered by smallest byte, and the two budgets are exact.
#include "automata/regex/dfa_builder.h"

#include <gtest/gtest.h>
#include <re2/re2.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "automata/regex/byte_nfa.h"
#include "grammar/regex/regex_parser.h"
#include "util/regex_sampler.h"

namespace lockstep {
namespace {

// Patterns in our syntax, each with a subset DFA small enough for the naive oracle.
const char* const kPatterns[] = {
    "abc",
    "",
    "a|b|c",
    "(ab|a)(bc|c)*",
    "(a|b)*a(a|b){3}",
    "(a+|b+)*c",
    "x*y*z*",
    "a{0}b{2,}c{1,3}d?",
    "((a|b)(c|d)){2,3}",
    "(?:x(?:y(?:z)?)?)+",
    "[a-z]+(,[a-z]+)*",
    "-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?",
    "\\d{4}-\\d{2}-\\d{2}",
    "([01]\\d|2[0-3]):[0-5]\\d(:[0-5]\\d)?",
    "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}",
    "(red|green|blue)",
    "\"([^\"\\\\]|\\\\.)*\"",
    "[^a-z]+",
    "\\s*\\S+\\s*",
    "[\\w.-]+@[\\w-]+\\.[a-z]{2,}",
    "[α-ω]+",
    "[\\u4e00-\\u9fff]{1,4}",
    "[\\u{1F600}-\\u{1F64F}]+",
    "é|e\\u0301",
    ".+",
    "a.c",
    "[^]{2}",
    "(a|ab)(c|bcd)(d*)",
    "[\\x00-\\x1f]|\\t\\n",
    "a|",
    "[]",
    "a[]b|cd",
};

Result<ByteNfa> NfaOf(std::string_view pattern) {
  LOCKSTEP_ASSIGN_OR_RETURN(RegexAst ast, ParseRegex(pattern));
  return CompileAstToNfa(ast, RegexCompileOptions{}.max_nfa_states);
}

// The NFA of `pattern` and its subset DFA under the default budgets.
struct Built {
  ByteNfa nfa;
  SubsetDfa dfa;
};

Result<Built> BuildFrom(std::string_view pattern) {
  LOCKSTEP_ASSIGN_OR_RETURN(ByteNfa nfa, NfaOf(pattern));
  LOCKSTEP_ASSIGN_OR_RETURN(SubsetDfa dfa, BuildSubsetDfa(nfa, RegexCompileOptions{}));
  return Built{std::move(nfa), std::move(dfa)};
}

// Builds the subset DFA of each pattern and runs `check(pattern, nfa, dfa)` on it.
template <typename Patterns, typename Check>
void ForEachBuilt(const Patterns& patterns, Check check) {
  for (const char* pattern : patterns) {
    SCOPED_TRACE(pattern);
    Result<Built> built = BuildFrom(pattern);
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    check(pattern, built->nfa, built->dfa);
  }
}

// ---- The naive subset construction ------------------------------------------------------------

using StateSet = std::set<StateId>;

// The byte and match states reachable from `seeds` by epsilon moves (the "important" states the
// builder keeps; two sets of all reachable states agree iff their important parts do).
StateSet Closure(const ByteNfa& nfa, const StateSet& seeds) {
  StateSet out;
  std::set<StateId> seen(seeds.begin(), seeds.end());
  std::vector<StateId> stack(seeds.begin(), seeds.end());
  while (!stack.empty()) {
    const StateId s = stack.back();
    stack.pop_back();
    const NfaState& ns = nfa.states[s];
    std::vector<StateId> succ;
    if (ns.kind == NfaStateKind::kByte || ns.kind == NfaStateKind::kMatch) out.insert(s);
    if (ns.kind == NfaStateKind::kEps || ns.kind == NfaStateKind::kSplit) succ.push_back(ns.out);
    if (ns.kind == NfaStateKind::kSplit) succ.push_back(ns.out1);
    for (StateId t : succ) {
      if (seen.insert(t).second) stack.push_back(t);
    }
  }
  return out;
}

StateSet Step(const ByteNfa& nfa, const StateSet& set, int byte) {
  StateSet targets;
  for (StateId q : set) {
    const NfaState& ns = nfa.states[q];
    if (ns.kind == NfaStateKind::kByte && ns.lo <= byte && byte <= ns.hi) targets.insert(ns.out);
  }
  return Closure(nfa, targets);
}

bool Accepts(const ByteNfa& nfa, const StateSet& set) {
  for (StateId q : set) {
    if (nfa.states[q].kind == NfaStateKind::kMatch) return true;
  }
  return false;
}

// Every subset reachable from the start, and the total size of them all.
struct NaiveDfa {
  std::set<StateSet> sets;
  std::int64_t elements = 0;
};

NaiveDfa NaiveSubsets(const ByteNfa& nfa) {
  NaiveDfa out;
  std::vector<StateSet> queue = {Closure(nfa, {nfa.start})};
  out.sets.insert(queue[0]);
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const StateSet cur = queue[i];  // copied: queue grows below
    for (int b = 0; b < 256; ++b) {
      StateSet t = Step(nfa, cur, b);
      if (out.sets.insert(t).second) queue.push_back(std::move(t));
    }
  }
  out.sets.insert(StateSet{});  // the builder always creates the dead state
  for (const StateSet& s : out.sets) out.elements += static_cast<std::int64_t>(s.size());
  return out;
}

StateId Next(const SubsetDfa& d, StateId s, int byte) {
  return d.next[static_cast<std::size_t>(s) * d.num_classes + d.byte_class[byte]];
}

bool RunDfa(const SubsetDfa& d, std::string_view s) {
  StateId q = d.start;
  for (char c : s) q = Next(d, q, static_cast<unsigned char>(c));
  return d.accepting[q] != 0;
}

// Checks that `d` is the naive subset automaton of `nfa` up to renaming: a bijection between DFA
// states and reachable subsets that maps the start to the start closure, state 0 to the empty
// set, every byte transition to the naive step, and acceptance to "holds the match state".
void ExpectIsomorphicToNaive(const ByteNfa& nfa, const SubsetDfa& d, const NaiveDfa& naive) {
  ASSERT_EQ(static_cast<std::size_t>(d.num_states), naive.sets.size());
  std::map<StateId, StateSet> set_of = {{0, StateSet{}}};
  std::map<StateSet, StateId> state_of = {{StateSet{}, 0}};
  auto pair = [&](StateId s, const StateSet& set) -> bool {
    auto [a, new_state] = set_of.emplace(s, set);
    auto [b, new_set] = state_of.emplace(set, s);
    EXPECT_EQ(a->second, set) << "DFA state " << s << " stands for two NFA state sets";
    EXPECT_EQ(b->second, s) << "one NFA state set is two DFA states";
    return new_state;
  };
  std::vector<StateId> queue = {d.start};
  pair(d.start, Closure(nfa, {nfa.start}));
  if (d.start != 0) queue.insert(queue.begin(), 0);
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const StateId s = queue[i];
    const StateSet set = set_of[s];
    EXPECT_EQ(d.accepting[s] != 0, Accepts(nfa, set)) << "state " << s;
    for (int b = 0; b < 256; ++b) {
      const StateId t = Next(d, s, b);
      if (pair(t, Step(nfa, set, b))) queue.push_back(t);
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(queue.size(), naive.sets.size()) << "states not reachable from the start";
}

// ---- Byte classes -----------------------------------------------------------------------------

// The distinct ranges of the NFA's byte states that hold `byte`.
std::set<std::pair<int, int>> RangesHolding(const ByteNfa& nfa, int byte) {
  std::set<std::pair<int, int>> out;
  for (const NfaState& s : nfa.states) {
    if (s.kind == NfaStateKind::kByte && s.lo <= byte && byte <= s.hi) out.insert({s.lo, s.hi});
  }
  return out;
}

// Coarsest partition (same class iff in the same ranges), numbered by smallest byte.
void ExpectCoarsestClasses(const ByteNfa& nfa, const std::array<std::uint8_t, 256>& cls,
                           std::int32_t num) {
  std::map<std::set<std::pair<int, int>>, int> class_of_signature;
  for (int b = 0; b < 256; ++b) {
    auto [it, fresh] = class_of_signature.emplace(RangesHolding(nfa, b),
                                                  static_cast<int>(class_of_signature.size()));
    EXPECT_EQ(cls[b], it->second) << "byte " << b << (fresh ? " (first of its class)" : "");
  }
  EXPECT_EQ(num, static_cast<std::int32_t>(class_of_signature.size()));
}

TEST(ByteClassesTest, CoarsestPartitionNumberedBySmallestByte) {
  for (const char* pattern : kPatterns) {
    SCOPED_TRACE(pattern);
    Result<ByteNfa> nfa = NfaOf(pattern);
    ASSERT_TRUE(nfa.ok()) << nfa.status().ToString();
    std::array<std::uint8_t, 256> cls{};
    const std::int32_t num = ComputeByteClasses(*nfa, &cls);
    ExpectCoarsestClasses(*nfa, cls, num);
  }
}

TEST(ByteClassesTest, HandWrittenRanges) {
  // [b-d] and [c-f]: {a and below, g and above}, {b}, {c-d}, {e-f}.
  Result<ByteNfa> nfa = NfaOf("[b-d]|[c-f]");
  ASSERT_TRUE(nfa.ok());
  std::array<std::uint8_t, 256> cls{};
  EXPECT_EQ(ComputeByteClasses(*nfa, &cls), 4);
  EXPECT_EQ(cls['a'], 0);
  EXPECT_EQ(cls['b'], 1);
  EXPECT_EQ(cls['c'], 2);
  EXPECT_EQ(cls['d'], 2);
  EXPECT_EQ(cls['e'], 3);
  EXPECT_EQ(cls['f'], 3);
  EXPECT_EQ(cls['g'], 0);
  EXPECT_EQ(cls[0xFF], 0);
  // No byte ranges at all: one class.
  nfa = NfaOf("");
  ASSERT_TRUE(nfa.ok());
  EXPECT_EQ(ComputeByteClasses(*nfa, &cls), 1);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(cls[b], 0);
}

// ---- The subset DFA ---------------------------------------------------------------------------

// The table shape, and the dead state: state 0 loops to itself, never accepts, and no byte
// that never occurs in valid UTF-8 leaves any state alive.
void ExpectShapeAndDeadState(const SubsetDfa& d) {
  ASSERT_GE(d.num_states, 1);
  ASSERT_EQ(d.next.size(), static_cast<std::size_t>(d.num_states) * d.num_classes);
  ASSERT_EQ(d.accepting.size(), static_cast<std::size_t>(d.num_states));
  ASSERT_GE(d.start, 0);
  ASSERT_LT(d.start, d.num_states);
  for (int b = 0; b < 256; ++b) ASSERT_LT(d.byte_class[b], d.num_classes);
  for (StateId t : d.next) ASSERT_TRUE(t >= 0 && t < d.num_states) << t;
  for (std::uint8_t a : d.accepting) ASSERT_LE(a, 1);
  EXPECT_EQ(d.accepting[0], 0);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(Next(d, 0, b), 0) << "dead state leaves on " << b;
  for (StateId s = 0; s < d.num_states; ++s) {
    for (int b : {0xC0, 0xC1, 0xF5, 0xF8, 0xFE, 0xFF}) {
      EXPECT_EQ(Next(d, s, b), 0) << "state " << s << " survives byte " << b;
    }
  }
}

TEST(SubsetDfaTest, IsTheNaiveSubsetAutomaton) {
  ForEachBuilt(kPatterns, [](const char*, const ByteNfa& nfa, const SubsetDfa& d) {
    ExpectShapeAndDeadState(d);
    ExpectCoarsestClasses(nfa, d.byte_class, d.num_classes);
    ExpectIsomorphicToNaive(nfa, d, NaiveSubsets(nfa));
  });
}

TEST(SubsetDfaTest, EmptyLanguageStartsDead) {
  const char* const patterns[] = {"[]", "[]a", "a{0}[]"};
  ForEachBuilt(patterns, [](const char*, const ByteNfa&, const SubsetDfa& d) {
    EXPECT_EQ(d.start, 0);
    EXPECT_EQ(d.num_states, 1);
    EXPECT_FALSE(RunDfa(d, ""));
    EXPECT_FALSE(RunDfa(d, "a"));
  });
}

// Both budgets are exact: a DFA of N states with E set entries in all builds under
// max_dfa_states = N and max_subset_elements = E, and not under one less of either.
TEST(SubsetDfaTest, BudgetsAreExact) {
  for (const char* pattern :
       {"(a|b)*a(a|b){3}", "abc", "[\\u4e00-\\u9fff]{1,4}", "(ab|a)(bc|c)*"}) {
    SCOPED_TRACE(pattern);
    Result<ByteNfa> nfa = NfaOf(pattern);
    ASSERT_TRUE(nfa.ok());
    const NaiveDfa naive = NaiveSubsets(*nfa);
    const auto states = static_cast<std::int32_t>(naive.sets.size());
    RegexCompileOptions o;
    o.max_dfa_states = states;
    o.max_subset_elements = naive.elements;
    Result<SubsetDfa> d = BuildSubsetDfa(*nfa, o);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->num_states, states);
    for (int which = 0; which < 2; ++which) {
      RegexCompileOptions tight = o;
      if (which == 0) {
        tight.max_dfa_states -= 1;
      } else {
        tight.max_subset_elements -= 1;
      }
      Result<SubsetDfa> over = BuildSubsetDfa(*nfa, tight);
      ASSERT_FALSE(over.ok());
      EXPECT_EQ(over.status().code(), StatusCode::kResourceLimit);
      EXPECT_NE(over.status().message().find(which == 0 ? "max_dfa_states" : "max_subset_elements"),
                std::string::npos)
          << over.status().ToString();
    }
  }
  // The textbook blow-up: (a|b)*a(a|b){n} needs 2^(n+1) live subsets, plus the dead one.
  Result<Built> built = BuildFrom("(a|b)*a(a|b){5}");
  ASSERT_TRUE(built.ok());
  EXPECT_GE(built->dfa.num_states, (1 << 6) + 1);
}

// ---- Against RE2 ------------------------------------------------------------------------------

bool IsValidUtf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t len;
    char32_t cp;
    if (b < 0x80) {
      len = 1;
      cp = b;
    } else if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
      cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      cp = b & 0x0F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      cp = b & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    const char32_t min_of_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_of_len[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// Strings to compare on: samples of the regex, their mutations, random strings over their
// characters and a few strangers, and raw random bytes.
std::vector<std::string> TestStrings(const char* pattern, std::mt19937_64& rng) {
  std::vector<std::string> out;
  std::vector<std::string> alphabet = {"a", "b", "0", "-", " ", "\n", "\xc3\xa9", "\xff"};
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n)(rng); };
  for (int i = 0; i < 100; ++i) {
    std::optional<std::string> s = SampleRegex(pattern, rng);
    if (!s) break;  // the empty language
    out.push_back(*s);
    for (char c : *s) alphabet.push_back(std::string(1, c));
  }
  const std::size_t samples = out.size();
  for (std::size_t i = 0; i < samples * 3; ++i) {
    std::string s = out[i % samples];
    for (int edits = 1 + static_cast<int>(pick(2)); edits > 0; --edits) {
      const std::size_t at = pick(s.size());
      switch (pick(3)) {
        case 0:
          s.insert(at, alphabet[pick(alphabet.size() - 1)]);
          break;
        case 1:
          if (at < s.size()) s.erase(at, 1);
          break;
        case 2:
          if (at < s.size()) s[at] = static_cast<char>(rng());
          break;
        default:
          s.resize(at);
      }
    }
    out.push_back(s);
  }
  for (int i = 0; i < 300; ++i) {
    std::string s;
    for (std::size_t n = pick(10); n > 0; --n) s += alphabet[pick(alphabet.size() - 1)];
    out.push_back(s);
  }
  for (int i = 0; i < 50; ++i) {
    std::string s(pick(5), '\0');
    for (char& c : s) c = static_cast<char>(rng());
    out.push_back(s);
  }
  return out;
}

TEST(SubsetDfaTest, VerdictsMatchRe2) {
  std::mt19937_64 rng(2024);
  std::int64_t compared = 0;
  ForEachBuilt(kPatterns, [&](const char* pattern, const ByteNfa&, const SubsetDfa& d) {
    std::optional<std::string> re2_pattern = ToRe2Pattern(pattern);
    ASSERT_TRUE(re2_pattern.has_value());
    RE2::Options opts;
    opts.set_log_errors(false);
    RE2 re(*re2_pattern, opts);
    ASSERT_TRUE(re.ok()) << *re2_pattern << ": " << re.error();
    int mismatches = 0;
    for (const std::string& s : TestStrings(pattern, rng)) {
      const bool ours = RunDfa(d, s);
      const bool want = IsValidUtf8(s) && RE2::FullMatch(s, re);
      if (ours != want && mismatches++ < 5) {
        ADD_FAILURE() << "input \"" << s << "\": DFA " << ours << ", RE2 " << want;
      }
      ++compared;
    }
  });
  std::cout << "[ compared   ] " << compared << " strings with RE2\n";
}

}  // namespace
}  // namespace lockstep
