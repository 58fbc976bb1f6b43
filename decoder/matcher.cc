// Matcher over a regex CompiledGrammar: the state is the byte-DFA state after the text so far;
// masks come from the compiled grammar's per-state cache.
#include "lockstep/matcher.h"

#include <cstring>

#include "automata/token_dfa.h"

namespace lockstep {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  history_.reserve(64);
  history_.push_back(grammar_->impl().dfa().start);
}

bool Matcher::FillNextTokenBitmask(std::span<std::uint32_t> words) const {
  const CompiledGrammar::Impl& g = grammar_->impl();
  const std::size_t n = g.mask_words();
  if (words.size() < n) return false;
  if (terminated_) {
    std::memset(words.data(), 0, n * sizeof(std::uint32_t));
    return false;
  }
  if (const std::uint32_t* cached = g.CachedMask(state())) {
    std::memcpy(words.data(), cached, n * sizeof(std::uint32_t));
  } else {
    g.ComputeMask(state(), words.first(n));
  }
  return true;
}

bool Matcher::AcceptToken(TokenId id) {
  if (terminated_) return false;
  const CompiledGrammar::Impl& g = grammar_->impl();
  if (g.IsEos(id)) {
    if (!g.dfa().IsAccepting(state())) return false;
    history_.push_back(state());
    terminated_ = true;
    terminated_at_ = static_cast<std::int32_t>(history_.size());
    return true;
  }
  if (!g.IsTextToken(id)) return false;
  StateId next = g.StepToken(state(), id);
  if (next == ByteDfa::kDead) return false;
  history_.push_back(next);
  return true;
}

bool Matcher::AcceptString(std::string_view bytes) {
  if (terminated_) return false;
  StateId next = grammar_->impl().dfa().Run(state(), bytes);
  if (next == ByteDfa::kDead) return false;
  history_.push_back(next);
  return true;
}

bool Matcher::Rollback(std::int32_t n) {
  if (n < 0 || n > NumSteps()) return false;
  history_.resize(history_.size() - n);
  if (terminated_ && static_cast<std::int32_t>(history_.size()) < terminated_at_) {
    terminated_ = false;
    terminated_at_ = -1;
  }
  return true;
}

void Matcher::Reset() {
  history_.resize(1);
  terminated_ = false;
  terminated_at_ = -1;
}

bool Matcher::CanEnd() const {
  return !terminated_ && grammar_->impl().dfa().IsAccepting(state());
}

std::string Matcher::ForcedBytes() const {
  std::string out;
  if (terminated_) return out;
  const ByteDfa& dfa = grammar_->impl().dfa();
  StateId s = state();
  // Follow states with exactly one live byte and no option to end; bounded by the state count
  // (a forced path that revisits a state is a forced infinite loop, impossible in a trimmed DFA).
  for (std::int32_t steps = 0; steps < dfa.num_states && !dfa.IsAccepting(s); ++steps) {
    int live_byte = -1;
    StateId live_next = ByteDfa::kDead;
    for (int b = 0; b < 256; ++b) {
      StateId t = dfa.Step(s, static_cast<std::uint8_t>(b));
      if (t == ByteDfa::kDead) continue;
      if (live_byte >= 0) return out;
      live_byte = b;
      live_next = t;
    }
    if (live_byte < 0) break;
    out.push_back(static_cast<char>(live_byte));
    s = live_next;
  }
  return out;
}

std::int32_t Matcher::ValidateDraft(std::span<const TokenId> draft) const {
  Matcher probe = Fork();
  std::int32_t n = 0;
  for (TokenId id : draft) {
    if (!probe.AcceptToken(id)) break;
    ++n;
  }
  return n;
}

}  // namespace lockstep
