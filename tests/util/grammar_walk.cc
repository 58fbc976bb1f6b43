#include "util/grammar_walk.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

namespace lockstep::testing {

const GrammarCompiler& CompilerFor(const std::string& vocab) {
  static std::mutex mu;
  static auto* compilers = new std::map<std::string, std::unique_ptr<GrammarCompiler>>;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*compilers)[vocab];
  if (!slot) {
    auto v = Vocabulary::Load(vocab);
    if (!v.ok()) {
      std::fprintf(stderr, "vocabulary %s: %s\n", vocab.c_str(), v.status().ToString().c_str());
      std::abort();
    }
    slot = std::make_unique<GrammarCompiler>(*v);
  }
  return *slot;
}

std::string WalkStats::Summary() const {
  return std::to_string(steps) + " steps, " + std::to_string(walks) + " walks (" +
         std::to_string(completed) + " ended with EOS), " + std::to_string(over) + " over, " +
         std::to_string(under) + " under, " + std::to_string(dead_ends) + " dead ends";
}

std::string WalkStats::Failure() const {
  return "first mismatch: " + first_mismatch + "; first dead end after '" + first_dead_end + "'";
}

Mask BruteForceMask(Matcher& m) {
  const Vocabulary& vocab = m.grammar().vocabulary();
  Mask mask(BitmaskWords(vocab.logits_width()), 0);
  for (TokenId id = 0; id < vocab.logits_width(); ++id) {
    if (m.AcceptToken(id)) {
      mask[id >> 5] |= 1u << (id & 31);
      m.Rollback(1);
    }
  }
  return mask;
}

int BruteForceStride() {
  const char* s = std::getenv("LOCKSTEP_TEST_SCALE");
  const double scale = s ? std::atof(s) : 1.0;
  return scale > 0 && scale < 1 ? 16 : 1;
}

Mask BruteForceMaskFor(Matcher& m, const Mask& fast, Mask* tried) {
  const int stride = BruteForceStride();
  if (stride == 1) {
    if (tried) tried->assign(fast.size(), ~0u);
    return BruteForceMask(m);
  }
  static std::atomic<unsigned> calls{0};
  const unsigned offset = calls.fetch_add(1, std::memory_order_relaxed) % stride;
  const Vocabulary& vocab = m.grammar().vocabulary();
  Mask mask = fast;
  if (tried) tried->assign(fast.size(), 0);
  for (TokenId id = 0; id < vocab.logits_width(); ++id) {
    const bool bytes = id < vocab.size();
    const std::size_t len = bytes ? vocab.TokenBytes(id).size() : 0;
    if (len > 2 && static_cast<unsigned>(id) % stride != offset) continue;
    const std::uint32_t bit = 1u << (id & 31);
    mask[id >> 5] &= ~bit;
    if (tried) (*tried)[id >> 5] |= bit;
    if (m.AcceptToken(id)) {
      mask[id >> 5] |= bit;
      m.Rollback(1);
    }
  }
  return mask;
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

namespace {

bool Punctuated(std::string_view bytes) {
  for (unsigned char c : bytes) {
    if (c < 0x80 && !std::isalnum(c) && c != ' ') return true;
  }
  return false;
}

}  // namespace

WalkStats ExactnessWalks(const std::shared_ptr<const CompiledGrammar>& grammar, long steps,
                         std::uint64_t seed, int target_len) {
  WalkStats st;
  const Vocabulary& vocab = grammar->vocabulary();
  std::mt19937_64 rng(seed);
  Matcher m(grammar);
  Mask fast(BitmaskWords(vocab.logits_width()), 0);
  std::string text;
  int len = 0;
  std::vector<bool> eos(vocab.size(), false);
  for (TokenId e : vocab.eos_ids()) eos[e] = true;
  while (st.steps < steps) {
    m.FillNextTokenBitmask(fast);
    Mask tried;
    Mask slow = BruteForceMaskFor(m, fast, &tried);
    ++st.steps;
    for (std::size_t w = 0; w < fast.size(); ++w) {
      std::uint32_t over = fast[w] & ~slow[w], under = slow[w] & ~fast[w];
      st.over += __builtin_popcount(over);
      st.under += __builtin_popcount(under);
      if ((over | under) && st.first_mismatch.empty()) {
        TokenId id = static_cast<TokenId>(w * 32 + __builtin_ctz(over | under));
        std::ostringstream os;
        os << (over ? "over" : "under") << "-allowed id " << id << " '"
           << (id < vocab.size() ? std::string(vocab.TokenBytes(id)) : std::string("?"))
           << "' after text '" << text << "'";
        st.first_mismatch = os.str();
      }
    }
    // The walk goes on with ids brute force allowed (all of them at full scale).
    for (std::size_t w = 0; w < slow.size(); ++w) tried[w] &= slow[w];
    std::vector<TokenId> allowed = AllowedIds(tried);
    if (allowed.empty()) {
      ++st.dead_ends;
      if (st.first_dead_end.empty()) st.first_dead_end = text;
    }
    bool restart = allowed.empty() || len >= 3 * target_len;
    TokenId pick = kNoToken;
    if (!restart) {
      std::vector<TokenId> eos_ok, punct, closers;
      for (TokenId id : allowed) {
        if (id >= vocab.size()) continue;
        if (eos[id]) {
          eos_ok.push_back(id);
          continue;
        }
        std::string_view bytes = vocab.TokenBytes(id);
        if (Punctuated(bytes)) punct.push_back(id);
        if (bytes.find_first_not_of("]})\"'>;") == std::string_view::npos) closers.push_back(id);
      }
      std::uniform_real_distribution<double> u(0, 1);
      if (!eos_ok.empty() && (len >= target_len || u(rng) < 0.02)) {
        pick = eos_ok[0];
      } else if (len >= target_len && !closers.empty() && u(rng) < 0.8) {
        pick = closers[rng() % closers.size()];
      } else if (!punct.empty() && u(rng) < 0.5) {
        pick = punct[rng() % punct.size()];
      } else {
        pick = allowed[rng() % allowed.size()];
      }
    }
    if (pick != kNoToken && m.AcceptToken(pick)) {
      ++len;
      if (pick < vocab.size() && !eos[pick]) text += std::string(vocab.TokenBytes(pick));
      if (!m.IsTerminated()) continue;
      ++st.completed;
    }
    ++st.walks;
    m.Reset();
    text.clear();
    len = 0;
  }
  return st;
}

}  // namespace lockstep::testing
