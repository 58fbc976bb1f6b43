// Exactness, soundness and completeness of regex token masks on real vocabularies (Llama-3,
// Qwen2.5, Mistral) over the shipped regex corpus:
// - exactness: along random walks, the fast mask (trie walk + cache) equals a brute-force mask
//   that runs every token's bytes through the byte DFA; over- and under-allowed ids counted apart;
// - soundness: strings generated under the mask until EOS all RE2::FullMatch the pattern;
// - completeness: strings drawn from the regex AST (tests/util/regex_sampler, independent of the
//   automata), tokenised canonically, are allowed token by token and may end.
#include <gtest/gtest.h>
#include <re2/re2.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "automata/token/token_dfa.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "util/regex_sampler.h"

namespace lockstep {
namespace {

using Mask = std::vector<std::uint32_t>;
bool Bit(const Mask& m, TokenId id) { return (m[id >> 5] >> (id & 31)) & 1; }

// Every id tried on its own: a text token is allowed iff its bytes leave the DFA alive, an EOS id
// iff the state accepts; nothing else ever.
Mask BruteForceMask(const Vocabulary& vocab, const ByteDfa& dfa, StateId s) {
  Mask m(BitmaskWords(vocab.logits_width()), 0);
  std::vector<bool> eos(vocab.size(), false);
  for (TokenId e : vocab.eos_ids()) eos[e] = true;
  for (TokenId id = 0; id < vocab.size(); ++id) {
    bool ok = false;
    TokenKind k = vocab.Kind(id);
    if (eos[id]) {
      ok = dfa.IsAccepting(s);
    } else if ((k == TokenKind::kNormal || k == TokenKind::kByte) && !vocab.TokenBytes(id).empty()) {
      ok = dfa.Run(s, vocab.TokenBytes(id)) != ByteDfa::kDead;
    }
    if (ok) m[id >> 5] |= 1u << (id & 31);
  }
  return m;
}

std::vector<TokenId> AllowedIds(const Mask& m) {
  std::vector<TokenId> out;
  for (std::size_t w = 0; w < m.size(); ++w) {
    for (std::uint32_t bits = m[w]; bits; bits &= bits - 1) {
      out.push_back(static_cast<TokenId>(w * 32 + __builtin_ctz(bits)));
    }
  }
  return out;
}

// Fewest bytes from each state to an accepting state (BFS on the reversed DFA).
std::vector<int> DistanceToAccept(const ByteDfa& dfa) {
  std::vector<int> dist(dfa.num_states, 1 << 30);
  std::vector<std::vector<StateId>> rev(dfa.num_states);
  for (StateId s = 1; s < dfa.num_states; ++s) {
    for (int c = 0; c < dfa.num_classes; ++c) rev[dfa.next[s * dfa.num_classes + c]].push_back(s);
  }
  std::deque<StateId> q;
  for (StateId s = dfa.accept_begin; s < dfa.num_states; ++s) dist[s] = 0, q.push_back(s);
  while (!q.empty()) {
    StateId t = q.front();
    q.pop_front();
    for (StateId s : rev[t]) {
      if (dist[s] > dist[t] + 1) dist[s] = dist[t] + 1, q.push_back(s);
    }
  }
  return dist;
}

struct Tally {
  long steps = 0, over = 0, under = 0, sound_ok = 0, sound_bad = 0, re2_skipped = 0;
  long complete_ok = 0, complete_bad = 0;
};

class RegexExactnessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RegexExactnessTest, FastMaskEqualsBruteForceAndOutputsMatchRe2) {
  const std::string vocab_name = GetParam();
  auto vocab_r = Vocabulary::Load(vocab_name);
  ASSERT_TRUE(vocab_r.ok()) << vocab_r.status().ToString();
  std::shared_ptr<const Vocabulary> vocab = *vocab_r;
  GrammarCompiler compiler(vocab);
  std::vector<std::string> patterns =
      testing::ReadLines(testing::SourceDataDir() + "/regex/corpus.txt");
  ASSERT_GE(patterns.size(), 30u) << "schemas/regex/corpus.txt must hold at least 30 patterns";

  const double scale = testing::TestScale();
  const int walks_per_pattern = std::max(1, static_cast<int>(8 * scale));
  const int steps_per_walk = 24;
  const long sound_target = std::max(30L, static_cast<long>(1000 * scale));
  const int samples_per_pattern = std::max(2, static_cast<int>(20 * scale));
  std::mt19937_64 rng(0x10c5'7e9 ^ std::hash<std::string>()(vocab_name));
  Tally t;
  const long sound_per_pattern = (sound_target + patterns.size() - 1) / patterns.size();

  for (const std::string& pattern : patterns) {
    auto g = compiler.CompileRegex(pattern);
    ASSERT_TRUE(g.ok()) << pattern << ": " << g.status().ToString();
    const ByteDfa& dfa = TokenDfaOf(**g)->dfa();
    std::vector<int> dist = DistanceToAccept(dfa);
    std::optional<std::string> re2_pattern = ToRe2Pattern(pattern);
    RE2 re2(re2_pattern.value_or("(?!)"), RE2::Quiet);

    // Exactness along random walks (uniform over allowed ids, EOS included).
    for (int w = 0; w < walks_per_pattern; ++w) {
      Matcher m(*g);
      for (int step = 0; step < steps_per_walk && !m.IsTerminated(); ++step) {
        Mask fast(BitmaskWords(vocab->logits_width()));
        m.FillNextTokenBitmask(fast);
        Mask brute = BruteForceMask(*vocab, dfa, m.state());
        ++t.steps;
        for (std::size_t i = 0; i < fast.size(); ++i) {
          t.over += __builtin_popcount(fast[i] & ~brute[i]);
          t.under += __builtin_popcount(~fast[i] & brute[i]);
        }
        ASSERT_EQ(fast, brute) << vocab_name << " " << pattern << " step " << step;
        std::vector<TokenId> ids = AllowedIds(fast);
        ASSERT_FALSE(ids.empty()) << "dead end: " << pattern;
        ASSERT_TRUE(m.AcceptToken(ids[rng() % ids.size()]));
      }
    }

    // Soundness: generate until EOS; a walk drifts toward acceptance after a few steps.
    long finished = 0;
    for (long k = 0; finished < sound_per_pattern && k < 4 * sound_per_pattern; ++k) {
      Matcher m(*g);
      std::vector<TokenId> out;
      for (int step = 0; step < 400 && !m.IsTerminated(); ++step) {
        Mask mask(BitmaskWords(vocab->logits_width()));
        m.FillNextTokenBitmask(mask);
        std::vector<TokenId> ids = AllowedIds(mask);
        ASSERT_FALSE(ids.empty()) << "dead end: " << pattern;
        TokenId pick;
        if (m.CanEnd() && (rng() % 3 == 0 || step > 8)) {
          pick = vocab->eos();
        } else if (step < 4) {
          pick = ids[rng() % ids.size()];
        } else {  // best of a few random candidates by remaining distance
          pick = ids[rng() % ids.size()];
          int best = 1 << 30;
          for (int c = 0; c < 16; ++c) {
            TokenId cand = ids[rng() % ids.size()];
            StateId ns = vocab->IsSpecial(cand) ? m.state() : dfa.Run(m.state(), vocab->TokenBytes(cand));
            if (ns != ByteDfa::kDead && dist[ns] < best) best = dist[ns], pick = cand;
          }
        }
        ASSERT_TRUE(m.AcceptToken(pick));
        if (!vocab->IsSpecial(pick)) out.push_back(pick);
      }
      if (!m.IsTerminated()) continue;
      ++finished;
      std::string text = *vocab->Decode(out);
      ASSERT_TRUE(dfa.FullMatch(text)) << pattern << " produced " << text;
      if (!re2_pattern || !re2.ok()) {
        ++t.re2_skipped;
        continue;
      }
      if (RE2::FullMatch(text, re2)) {
        ++t.sound_ok;
      } else {
        ++t.sound_bad;
        ADD_FAILURE() << vocab_name << ": /" << pattern << "/ generated '" << text
                      << "' which RE2 rejects";
      }
    }

    // Completeness: independent samples, canonical tokens, accepted one by one.
    for (int k = 0; k < samples_per_pattern; ++k) {
      std::optional<std::string> s = SampleRegex(pattern, rng);
      ASSERT_TRUE(s.has_value()) << pattern;
      auto ids = vocab->Encode(*s, EncodeOptions{false});
      ASSERT_TRUE(ids.ok()) << ids.status().ToString();
      Matcher m(*g);
      bool ok = true;
      for (TokenId id : *ids) {
        Mask mask(BitmaskWords(vocab->logits_width()));
        m.FillNextTokenBitmask(mask);
        if (!Bit(mask, id) || !m.AcceptToken(id)) {
          ok = false;
          ADD_FAILURE() << vocab_name << ": /" << pattern << "/ blocked token " << id << " '"
                        << vocab->TokenBytes(id) << "' of the valid string '" << *s << "'";
          break;
        }
      }
      ok = ok && m.CanEnd() && m.AcceptToken(vocab->eos());
      (ok ? t.complete_ok : t.complete_bad)++;
    }
  }
  std::printf("[%s] %zu patterns: exactness %ld steps, %ld over-allowed, %ld under-allowed; "
              "soundness %ld/%ld RE2 full matches (%ld without an RE2 spelling); "
              "completeness %ld/%ld samples accepted\n",
              vocab_name.c_str(), patterns.size(), t.steps, t.over, t.under, t.sound_ok,
              t.sound_ok + t.sound_bad, t.re2_skipped, t.complete_ok,
              t.complete_ok + t.complete_bad);
  RecordProperty("steps", static_cast<int>(t.steps));
  EXPECT_EQ(t.over, 0);
  EXPECT_EQ(t.under, 0);
  EXPECT_EQ(t.sound_bad, 0);
  EXPECT_EQ(t.complete_bad, 0);
  EXPECT_GE(t.sound_ok + t.re2_skipped, sound_target);
  EXPECT_LE(t.re2_skipped * 10, t.sound_ok) << "too few patterns have an RE2 spelling";
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, RegexExactnessTest,
                         ::testing::Values("llama3", "qwen2.5", "mistral"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '.', '_');
                           return n;
                         });

}  // namespace
}  // namespace lockstep
