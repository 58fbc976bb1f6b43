// Matcher over a CompiledGrammar. Regex constraints: the state is the byte-DFA state after the
// text so far, masks come from the per-state cache. Grammars: the state is an Earley parser
// (one set per byte); history_ records the number of sets after each accepted step, so a
// rollback is a truncation; masks come from CfgGrammar's adaptive cache.
#include "lockstep/matcher.h"

#include <cstring>

#include "automata/cfg/cfg_grammar.h"
#include "automata/cfg/earley.h"
#include "automata/token/token_dfa.h"

namespace lockstep {

struct Matcher::CfgState {
  explicit CfgState(const CfgGrammar& g) : parser(&g.program(), g.max_depth(), g.max_step_items()) {
    parser.InitRoot();
  }
  mutable EarleyParser parser;  // FillNextTokenBitmask pushes and pops scratch sets
  // sigs[j]: the interned signature of set j, for a prefix of the sets (FillMask extends it).
  // Sets popped by a rollback lose theirs at once: a later token may rebuild a set j with other
  // items while sigs still covers j.
  mutable std::vector<std::int32_t> sigs;
  void PopTo(std::int32_t n) {
    parser.PopTo(n);
    if (static_cast<std::int32_t>(sigs.size()) > n) sigs.resize(static_cast<std::size_t>(n));
  }
};

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  history_.reserve(64);
  if (grammar_->is_grammar()) {
    cfg_ = std::make_unique<CfgState>(grammar_->cfg());
    history_.push_back(cfg_->parser.num_sets());
  } else {
    history_.push_back(grammar_->impl().dfa().start);
  }
}

Matcher::Matcher(const Matcher& o)
    : grammar_(o.grammar_),
      cfg_(o.cfg_ ? std::make_unique<CfgState>(*o.cfg_) : nullptr),
      last_error_(o.last_error_),
      history_(o.history_),
      terminated_(o.terminated_),
      terminated_at_(o.terminated_at_) {}

Matcher& Matcher::operator=(const Matcher& o) {
  if (this != &o) {
    grammar_ = o.grammar_;
    cfg_ = o.cfg_ ? std::make_unique<CfgState>(*o.cfg_) : nullptr;
    last_error_ = o.last_error_;
    history_ = o.history_;
    terminated_ = o.terminated_;
    terminated_at_ = o.terminated_at_;
  }
  return *this;
}

Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;
Matcher::~Matcher() = default;

StateId Matcher::state() const { return history_.back(); }

const FillTrace& Matcher::LastFillTrace() { return CurrentFillTrace(); }

bool Matcher::FillNextTokenBitmask(std::span<std::uint32_t> words) const {
  CurrentFillTrace() = FillTrace{};
  const std::size_t n = BitmaskWords(grammar_->logits_width());
  if (words.size() < n) return false;
  if (terminated_) {
    std::memset(words.data(), 0, n * sizeof(std::uint32_t));
    return false;
  }
  if (cfg_) {
    const CfgGrammar& cfg = grammar_->cfg();
    cfg.FillMask(cfg_->parser, cfg_->sigs, words.first(n));
    cfg.NoteFill(grammar_, CurrentFillTrace().positions_walked > 0);
    return true;
  }
  const CompiledGrammar::Impl& g = grammar_->impl();
  if (const std::uint32_t* cached = g.CachedMask(state())) {
    std::memcpy(words.data(), cached, n * sizeof(std::uint32_t));
  } else {
    g.ComputeMask(state(), words.first(n));
  }
  return true;
}

bool Matcher::CfgAcceptBytes(std::string_view bytes) {
  EarleyParser& p = cfg_->parser;
  const std::int32_t before = p.num_sets();
  p.ClearLimitFlags();
  for (unsigned char c : bytes) {
    if (!p.StepByte(c)) {
      if (p.items_exceeded()) {
        last_error_ = Status(StatusCode::kResourceLimit,
                             "grammar parse of one byte exceeds max_earley_items_per_byte (" +
                                 std::to_string(p.max_step_items()) + " items)",
                             "byte " + std::to_string(p.num_sets() - 1));
      } else if (p.depth_exceeded() || p.truncated(p.num_sets() - 1)) {
        last_error_ = Status(StatusCode::kResourceLimit,
                             "grammar nesting deeper than max_nesting_depth (" +
                                 std::to_string(p.max_depth()) + ")",
                             "byte " + std::to_string(p.num_sets() - 1));
      }
      cfg_->PopTo(before);
      return false;
    }
  }
  history_.push_back(p.num_sets());
  return true;
}

bool Matcher::AcceptToken(TokenId id) {
  if (terminated_) return false;
  last_error_ = Status();
  if (cfg_) {
    const CfgGrammar& g = grammar_->cfg();
    if (g.IsEos(id)) {
      if (!cfg_->parser.CanEnd()) return false;
      history_.push_back(cfg_->parser.num_sets());
      terminated_ = true;
      terminated_at_ = static_cast<std::int32_t>(history_.size());
      return true;
    }
    if (std::int32_t sp = g.SpecialIndex(id); sp >= 0) {
      if (!cfg_->parser.StepSpecial(sp)) return false;
      history_.push_back(cfg_->parser.num_sets());
      return true;
    }
    if (!g.IsTextToken(id)) return false;
    return CfgAcceptBytes(g.vocab().TokenBytes(id));
  }
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
  last_error_ = Status();
  if (cfg_) return CfgAcceptBytes(bytes);
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
  if (cfg_) cfg_->PopTo(history_.back());
  return true;
}

void Matcher::Reset() {
  history_.resize(1);
  terminated_ = false;
  terminated_at_ = -1;
  last_error_ = Status();
  if (cfg_) cfg_->PopTo(history_.back());
}

bool Matcher::CanEnd() const {
  if (terminated_) return false;
  if (cfg_) return cfg_->parser.CanEnd();
  return grammar_->impl().dfa().IsAccepting(state());
}

std::string Matcher::ForcedBytes(std::size_t max_bytes) const {
  std::string out;
  if (terminated_) return out;
  if (cfg_) {
    EarleyParser& p = cfg_->parser;
    const std::int32_t base = p.num_sets();
    // A byte is forced when it is the only live one and the grammar cannot end (or take a
    // special token) here.
    while (out.size() < max_bytes && !p.CanEnd()) {
      bool special = false;
      for (std::size_t i = 0; i < p.program().special_tokens.size() && !special; ++i) {
        if (p.StepSpecial(static_cast<std::int32_t>(i))) {
          p.PopTo(p.num_sets() - 1);
          special = true;
        }
      }
      if (special) break;
      int live = -1;
      bool several = false;
      const std::int32_t here = p.num_sets();
      for (int b = 0; b < 256 && !several; ++b) {
        if (p.StepByte(static_cast<std::uint8_t>(b))) {
          p.PopTo(here);
          if (live >= 0) several = true;
          live = b;
        }
      }
      if (several || live < 0) break;
      p.StepByte(static_cast<std::uint8_t>(live));
      out.push_back(static_cast<char>(live));
    }
    p.PopTo(base);
    p.ClearLimitFlags();
    return out;
  }
  const ByteDfa& dfa = grammar_->impl().dfa();
  StateId s = state();
  // Follow states with exactly one live byte and no option to end; bounded by the state count
  // (a forced path that revisits a state is a forced infinite loop, impossible in a trimmed DFA).
  for (std::int32_t steps = 0;
       steps < dfa.num_states && !dfa.IsAccepting(s) && out.size() < max_bytes; ++steps) {
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

std::vector<TokenId> Matcher::ForcedTokens() const {
  std::vector<TokenId> out;
  const std::string forced = ForcedBytes();
  if (forced.empty()) return out;
  const Vocabulary& vocab = grammar_->vocabulary();
  EncodeOptions eo;
  eo.add_dummy_prefix = false;
  Result<std::vector<TokenId>> ids = vocab.Encode(forced, eo);
  if (!ids.ok() || ids->empty()) return out;
  // Keep back the last token: the text after the forced bytes is free, and a longer token
  // starting with the last token's bytes might be the model's canonical choice.
  out.assign(ids->begin(), ids->end() - 1);
  // The kept tokens must be accepted in order (they are: their bytes are forced), and must not
  // include special or byte-fallback pieces that split a character differently; verify.
  Matcher probe(*this);
  std::size_t ok = 0;
  for (TokenId id : out) {
    if (!probe.AcceptToken(id)) break;
    ++ok;
  }
  out.resize(ok);
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
