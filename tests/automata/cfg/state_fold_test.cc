// FoldStatesForTokens (automata/cfg/state_fold.h) against brute force on real vocabularies: the
// fold promises that the states it puts together agree on every token, that is, every token of
// the trie run from either state over its bytes dies at the same byte and may finish the rule
// after the same prefixes (so one position serves them all). Checked the slow way, token by
// token, for the byte-only rules of small real grammars (counted runs that tokens cannot see
// the end of, runs of '-' and spaces longer than the fold's refinement rounds) and for the big
// `email` format automaton, which is what the fold is for. The fold does not promise the
// converse (states it keeps apart may still agree on every token: alphabets and rounds are
// sufficient conditions), so that is only reported. Also: the fold's output shape, no fold for
// a rule with rule edges, and no fold once the deadline has passed; and the fold's refinement
// (RefineToRounds, which looks only at the states next to a split) against Moore's refinement
// done the plain way, every state every round, on the email automaton and random automata.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "automata/cfg/cfg_grammar.h"
#include "automata/cfg/cfg_program.h"
#include "automata/cfg/state_fold.h"
#include "lockstep/compiler.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep {
namespace {

struct Case {
  const char* text;
  bool schema;
};

// Small grammars whose root lowers to one byte-only automaton (pure terminals are inlined), with
// states that no token can tell apart.
const Case kCases[] = {
    // Counted runs, as in an e-mail address: past the longest token every count looks alike.
    {R"(root ::= [a-z0-9]{1,48} "@" [a-z]{2,30} ("." [a-z]{2,8}){1,3})", false},
    // Runs of '-' and of spaces: Llama-3 has tokens of up to 96 '-' and long space runs, longer
    // than the fold's rounds of refinement (its node-by-node comparison of long tokens).
    {R"(root ::= "-"{0,120} [a-z]{1,40})", false},
    {R"(root ::= (" "{0,90} "x" | "ab" | "a" [0-9]{0,5})+ ";")", false},
    // The digits and signs of a date-time.
    {R"(root ::= [0-9]{4} "-" [0-9]{2} "-" [0-9]{2} ("T" [0-9]{2} ":" [0-9]{2})?)", false},
};

// The email format automaton is a rule of its own (a big byte automaton, copied as it is): the
// rule the fold exists for (25,098 states into 1,817 on Llama-3, state_fold.h).
constexpr const char* kEmailSchema = R"({"type": "string", "format": "email"})";

// The rules over bytes only (no rule or special-token edges), each as its states in order.
std::vector<std::vector<StateId>> ByteOnlyRules(const CfgProgram& p) {
  std::vector<std::vector<StateId>> by_rule(p.NumRules());
  std::vector<std::uint8_t> byte_only(p.NumRules(), 1);
  for (StateId s = 0; s < p.num_states; ++s) {
    const std::int32_t r = p.state_rule[s];
    by_rule[r].push_back(s);
    if (p.nt_begin[s] != p.nt_begin[s + 1]) byte_only[r] = 0;
    if (!p.sp_begin.empty() && p.sp_begin[s] != p.sp_begin[s + 1]) byte_only[r] = 0;
  }
  std::vector<std::vector<StateId>> out;
  for (std::int32_t r = 0; r < p.NumRules(); ++r) {
    if (byte_only[r] && by_rule[r].size() >= 2) out.push_back(std::move(by_rule[r]));
  }
  return out;
}

// A byte-only rule may finish exactly at its accepting states (no rule edge can finish it).
std::vector<std::uint8_t> Finish(const CfgProgram& p, const std::vector<StateId>& states) {
  std::vector<std::uint8_t> finish(states.size());
  for (std::size_t i = 0; i < states.size(); ++i) finish[i] = p.accepting[states[i]];
  return finish;
}

// The tokens of the trie: normal and byte tokens with bytes.
std::vector<std::string_view> TrieTokens(const Vocabulary& v) {
  std::vector<std::string_view> out;
  for (TokenId id = 0; id < v.size(); ++id) {
    const TokenKind kind = v.Kind(id);
    if ((kind == TokenKind::kNormal || kind == TokenKind::kByte) && !v.TokenBytes(id).empty()) {
      out.push_back(v.TokenBytes(id));
    }
  }
  return out;
}

// The slow way: `bytes` run from state s, one letter per byte read: 'x' where the run dies (and
// stops), 'f' alive where the rule may finish, 'a' alive where it may not.
void RunToken(const CfgProgram& p, StateId s, std::string_view bytes, std::string* out) {
  out->clear();
  for (unsigned char b : bytes) {
    s = p.Step(s, b);
    if (s == CfgProgram::kDead) {
      out->push_back('x');
      return;
    }
    out->push_back(p.accepting[s] ? 'f' : 'a');
  }
}

// The first token on which states a and b differ ("" when every token runs alike from both).
std::string FirstDifference(const CfgProgram& p, StateId a, StateId b,
                            const std::vector<std::string_view>& tokens) {
  std::string ra, rb;
  for (std::string_view t : tokens) {
    RunToken(p, a, t, &ra);
    RunToken(p, b, t, &rb);
    if (ra != rb) return "token '" + std::string(t) + "': " + ra + " vs " + rb;
  }
  return "";
}

// All tokens' runs from s, hashed (equal for states no token tells apart).
std::uint64_t RunsHash(const CfgProgram& p, StateId s,
                       const std::vector<std::string_view>& tokens) {
  std::uint64_t h = 1469598103934665603ull;
  std::string run;
  for (std::string_view t : tokens) {
    RunToken(p, s, t, &run);
    for (char c : run) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    h = (h ^ '|') * 1099511628211ull;
  }
  return h;
}

// Per rank the rank of the first state of its fold: at most its own, and a fold's first state
// is its own.
void ExpectFoldShape(const std::vector<std::int32_t>& rep, std::size_t n) {
  ASSERT_EQ(rep.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_GE(rep[i], 0);
    ASSERT_LE(rep[i], static_cast<std::int32_t>(i));
    ASSERT_EQ(rep[rep[i]], rep[i]) << "rank " << i;
  }
}

struct Checked {
  long folded = 0;   // states compared with their fold's first state
  long classes = 0;  // folds
};

// Every state in `ranks` that the fold puts with an earlier state runs every token as that state
// does.
Checked ExpectFoldedAgree(const CfgProgram& p, const std::vector<StateId>& states,
                          const std::vector<std::int32_t>& rep, const std::vector<std::size_t>& ranks,
                          const std::vector<std::string_view>& tokens) {
  Checked c;
  for (std::size_t i = 0; i < rep.size(); ++i) c.classes += rep[i] == static_cast<std::int32_t>(i);
  for (std::size_t i : ranks) {
    if (rep[i] == static_cast<std::int32_t>(i)) continue;
    const std::string diff = FirstDifference(p, states[rep[i]], states[i], tokens);
    EXPECT_EQ(diff, "") << "states " << states[rep[i]] << " and " << states[i]
                        << " are folded together but differ on " << diff;
    if (!diff.empty()) return c;
    ++c.folded;
  }
  return c;
}


// Moore's refinement the plain way: every state's row every round. Per state its class at its
// round (or when the classes stop splitting), as in RefineToRounds.
std::vector<std::int32_t> PlainRefinement(const std::vector<std::int32_t>& succ, std::int32_t n,
                                          std::int32_t k, const std::vector<std::uint8_t>& finish,
                                          const std::vector<std::int32_t>& round) {
  std::vector<std::int32_t> cls(n), decided(n, -1);
  for (std::int32_t i = 0; i < n; ++i) cls[i] = finish[i];
  const std::int32_t last = *std::max_element(round.begin(), round.end());
  for (std::int32_t r = 0; r <= last; ++r) {
    for (std::int32_t i = 0; i < n; ++i) {
      if (round[i] == r) decided[i] = cls[i];
    }
    std::map<std::vector<std::int32_t>, std::int32_t> ids;
    std::vector<std::int32_t> next(n);
    for (std::int32_t i = 0; i < n; ++i) {
      std::vector<std::int32_t> row = {cls[i]};
      for (std::int32_t c = 0; c < k; ++c) {
        const std::int32_t t = succ[static_cast<std::size_t>(i) * k + c];
        row.push_back(t < 0 ? -1 : cls[t]);
      }
      next[i] = ids.try_emplace(row, static_cast<std::int32_t>(ids.size())).first->second;
    }
    cls.swap(next);
  }
  return decided;
}

// Two states decided at the same round are together in `got` iff they are in `want`.
void ExpectSamePartition(const std::vector<std::int32_t>& got, const std::vector<std::int32_t>& want,
                         const std::vector<std::int32_t>& round) {
  ASSERT_EQ(got.size(), want.size());
  std::map<std::pair<std::int32_t, std::int32_t>, std::int32_t> to_want, to_got;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_GE(got[i], 0) << "state " << i << " undecided";
    const auto a = to_want.try_emplace({round[i], got[i]}, want[i]).first->second;
    const auto b = to_got.try_emplace({round[i], want[i]}, got[i]).first->second;
    ASSERT_EQ(a, want[i]) << "state " << i << " (round " << round[i]
                          << ") is put with states Moore's refinement keeps apart";
    ASSERT_EQ(b, got[i]) << "state " << i << " (round " << round[i]
                         << ") is kept apart from states Moore's refinement puts with it";
  }
}

class StateFoldTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    auto v = Vocabulary::Load(GetParam());
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vocab_ = *v;
    compiler_ = std::make_unique<GrammarCompiler>(vocab_);
    tokens_ = TrieTokens(*vocab_);
  }
  std::shared_ptr<const CompiledGrammar> Compile(const Case& k) {
    CompileOptions o;
    o.background_positions = false;
    // What is checked is the fold, not compile speed: no wall-clock deadline (the email
    // automaton's fold took over 10 s in the sanitizer build on a loaded host).
    o.compile_timeout_ms = 0;
    auto g = k.schema ? compiler_->CompileSchema(k.text, o) : compiler_->CompileGrammar(k.text, o);
    EXPECT_TRUE(g.ok()) << k.text << ": " << g.status().ToString();
    return g.ok() ? *g : nullptr;
  }

  std::shared_ptr<const Vocabulary> vocab_;
  std::unique_ptr<GrammarCompiler> compiler_;
  std::vector<std::string_view> tokens_;
};

// Small rules, every state: folded states agree on every token; how many states the fold keeps
// apart though no token tells them apart is reported.
TEST_P(StateFoldTest, FoldedStatesAgreeOnEveryTokenInSmallGrammars) {
  long folded = 0;
  for (const Case& k : kCases) {
    SCOPED_TRACE(k.text);
    auto g = Compile(k);
    ASSERT_NE(g, nullptr);
    const CfgProgram& p = CfgOf(*g)->program();
    const std::vector<std::vector<StateId>> rules = ByteOnlyRules(p);
    ASSERT_FALSE(rules.empty());
    for (const std::vector<StateId>& states : rules) {
      const std::vector<std::int32_t> rep =
          FoldStatesForTokens(p, states, Finish(p, states), *GrammarAccess::Trie(*compiler_));
      ExpectFoldShape(rep, states.size());
      std::vector<std::size_t> all(states.size());
      for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
      const Checked c = ExpectFoldedAgree(p, states, rep, all, tokens_);
      folded += c.folded;
      // The converse, measured: distinct token behaviours among the states, by brute force.
      std::set<std::uint64_t> behaviours;
      for (StateId s : states) behaviours.insert(RunsHash(p, s, tokens_));
      EXPECT_LE(static_cast<long>(behaviours.size()), c.classes);  // (follows from the above)
      std::printf("%s: %zu states, %ld folds, %zu behaviours by brute force\n", GetParam(),
                  states.size(), c.classes, behaviours.size());
    }
  }
  // The cases have states to fold: the check above compared some.
  EXPECT_GT(folded, 100);
}

// The email format automaton (tens of thousands of states): a sample of its folded states agree
// with their fold's first state on every token, and the fold is large.
TEST_P(StateFoldTest, FoldedStatesAgreeOnEveryTokenInTheEmailAutomaton) {
  auto g = Compile({kEmailSchema, true});
  ASSERT_NE(g, nullptr);
  const CfgProgram& p = CfgOf(*g)->program();
  const std::vector<StateId>* big = nullptr;
  const std::vector<std::vector<StateId>> rules = ByteOnlyRules(p);
  for (const std::vector<StateId>& states : rules) {
    if (big == nullptr || states.size() > big->size()) big = &states;
  }
  ASSERT_NE(big, nullptr);
  const std::vector<StateId>& states = *big;
  ASSERT_GT(states.size(), 10000u);
  EXPECT_NE(p.rules[p.state_rule[states[0]]].shared_source, 0u);
  const std::vector<std::int32_t> rep =
      FoldStatesForTokens(p, states, Finish(p, states), *GrammarAccess::Trie(*compiler_));
  ExpectFoldShape(rep, states.size());
  // The folded states, sampled (every state against the whole vocabulary takes minutes).
  std::vector<std::size_t> folded;
  for (std::size_t i = 0; i < rep.size(); ++i) {
    if (rep[i] != static_cast<std::int32_t>(i)) folded.push_back(i);
  }
  std::mt19937 rng(11);
  std::shuffle(folded.begin(), folded.end(), rng);
  const std::size_t sample =
      std::max<std::size_t>(50, static_cast<std::size_t>(400 * testing::TestScale()));
  folded.resize(std::min(folded.size(), sample));
  const Checked c = ExpectFoldedAgree(p, states, rep, folded, tokens_);
  EXPECT_EQ(c.folded, static_cast<long>(folded.size()));
  EXPECT_LT(c.classes * 4, static_cast<long>(states.size()));
  std::printf("%s: email: %zu states in %ld folds; %ld folded states checked\n", GetParam(),
              states.size(), c.classes, c.folded);
}

// The refinement against the plain one: on the email automaton (every class a column; each
// state's round drawn from 0 to 48, the most the fold uses) and on random automata with loops,
// chains and dead edges.
TEST_P(StateFoldTest, RefinementMatchesMooresRoundByRound) {
  auto g = Compile({kEmailSchema, true});
  ASSERT_NE(g, nullptr);
  const CfgProgram& p = CfgOf(*g)->program();
  const std::vector<std::vector<StateId>> rules = ByteOnlyRules(p);
  const std::vector<StateId>* big = nullptr;
  for (const std::vector<StateId>& states : rules) {
    if (big == nullptr || states.size() > big->size()) big = &states;
  }
  ASSERT_NE(big, nullptr);
  std::mt19937 rng(7);
  struct Automaton {
    std::vector<std::int32_t> succ;
    std::int32_t n, k;
    std::vector<std::uint8_t> finish;
  };
  std::vector<Automaton> cases;
  {
    const std::vector<StateId>& states = *big;
    Automaton a{{}, static_cast<std::int32_t>(states.size()), p.num_classes, Finish(p, states)};
    std::vector<std::int32_t> local(p.num_states, -1);
    for (std::size_t i = 0; i < states.size(); ++i) local[states[i]] = static_cast<std::int32_t>(i);
    for (StateId s : states) {
      for (std::int32_t c = 0; c < p.num_classes; ++c) {
        const StateId t = p.next[static_cast<std::size_t>(s) * p.num_classes + c];
        a.succ.push_back(t == CfgProgram::kDead ? -1 : local[t]);
        ASSERT_TRUE(t == CfgProgram::kDead || local[t] >= 0);
      }
    }
    cases.push_back(std::move(a));
  }
  for (int trial = 0; trial < 200; ++trial) {
    const std::int32_t n = 1 + static_cast<std::int32_t>(rng() % 300), k = 1 + rng() % 4;
    Automaton a{std::vector<std::int32_t>(static_cast<std::size_t>(n) * k), n, k,
                std::vector<std::uint8_t>(n)};
    // A chain (a counter: state i goes to i + 1) with random extra edges, some dead.
    for (std::int32_t i = 0; i < n; ++i) {
      for (std::int32_t c = 0; c < k; ++c) {
        const unsigned draw = rng() % 8;
        std::int32_t t = draw < 3 ? i + 1 : draw < 5 ? -1 : static_cast<std::int32_t>(rng() % n);
        if (t >= n) t = -1;
        a.succ[static_cast<std::size_t>(i) * k + c] = t;
      }
      a.finish[i] = rng() % 5 == 0;
    }
    cases.push_back(std::move(a));
  }
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    SCOPED_TRACE("automaton " + std::to_string(ci));
    const Automaton& a = cases[ci];
    std::vector<std::int32_t> round(a.n);
    for (std::int32_t& r : round) r = static_cast<std::int32_t>(rng() % 49);
    std::vector<std::int32_t> decided;
    ASSERT_TRUE(RefineToRounds(a.succ, a.n, a.k, a.finish, round, nullptr, decided));
    ExpectSamePartition(decided, PlainRefinement(a.succ, a.n, a.k, a.finish, round), round);
  }
}

// A rule with rule edges folds nothing, nor does any rule once the deadline has passed.
TEST_P(StateFoldTest, NoFoldForRuleEdgesOrAfterTheDeadline) {
  auto nested = Compile({R"g(root ::= "(" root ")" | [a-z]{1,40})g", false});
  ASSERT_NE(nested, nullptr);
  const CfgProgram& np = CfgOf(*nested)->program();
  std::vector<StateId> root_states;
  for (StateId s = 0; s < np.num_states; ++s) {
    if (np.state_rule[s] == np.root) root_states.push_back(s);
  }
  ASSERT_GT(root_states.size(), 2u);
  std::vector<std::int32_t> rep = FoldStatesForTokens(np, root_states, Finish(np, root_states),
                                                      *GrammarAccess::Trie(*compiler_));
  for (std::size_t i = 0; i < rep.size(); ++i) EXPECT_EQ(rep[i], static_cast<std::int32_t>(i));

  auto g = Compile({kEmailSchema, true});
  ASSERT_NE(g, nullptr);
  const CfgProgram& p = CfgOf(*g)->program();
  const std::vector<std::vector<StateId>> rules = ByteOnlyRules(p);
  ASSERT_FALSE(rules.empty());
  auto cancel = std::make_shared<std::atomic<bool>>(true);
  const CompileDeadline passed(0, cancel);
  for (const std::vector<StateId>& states : rules) {
    rep = FoldStatesForTokens(p, states, Finish(p, states), *GrammarAccess::Trie(*compiler_),
                              &passed);
    for (std::size_t i = 0; i < rep.size(); ++i) EXPECT_EQ(rep[i], static_cast<std::int32_t>(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, StateFoldTest, ::testing::Values("llama3", "qwen2.5"));

}  // namespace
}  // namespace lockstep
