// Matcher over a CompiledGrammar: a TokenSequence of the grammar's automaton
// (automata/token/token_automaton.h) and the history of its entries, one per accepted step, so
// a rollback is a truncation. The Matcher keeps what every kind shares (the history, the end of
// the sequence, the last error); the sequence knows its kind.
#include "lockstep/matcher.h"

#include <cstring>

#include "automata/token/token_automaton.h"

namespace lockstep {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)),
      seq_(GrammarAccess::Automaton(*grammar_).NewSequence()) {
  history_.reserve(64);
  history_.push_back(seq_->Start());
}

Matcher::Matcher(const Matcher& o)
    : grammar_(o.grammar_),
      seq_(o.seq_->Clone()),
      last_error_(o.last_error_),
      history_(o.history_),
      terminated_(o.terminated_),
      terminated_at_(o.terminated_at_) {}

Matcher& Matcher::operator=(const Matcher& o) {
  if (this != &o) {
    grammar_ = o.grammar_;
    seq_ = o.seq_->Clone();
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
  seq_->Fill(state(), words.first(n), grammar_);
  return true;
}

bool Matcher::Take(const TokenStep& step) {
  if (step.kind == TokenSequence::Step::kRejected) return false;
  history_.push_back(step.next);
  if (step.kind == TokenSequence::Step::kEnded) {
    terminated_ = true;
    terminated_at_ = static_cast<std::int32_t>(history_.size());
  }
  return true;
}

bool Matcher::AcceptToken(TokenId id) {
  if (terminated_) return false;
  last_error_ = Status();
  return Take(seq_->AcceptToken(state(), id, &last_error_));
}

bool Matcher::AcceptString(std::string_view bytes) {
  if (terminated_) return false;
  last_error_ = Status();
  return Take(seq_->AcceptBytes(state(), bytes, &last_error_));
}

bool Matcher::Rollback(std::int32_t n) {
  if (n < 0 || n > NumSteps()) return false;
  history_.resize(history_.size() - n);
  if (terminated_ && static_cast<std::int32_t>(history_.size()) < terminated_at_) {
    terminated_ = false;
    terminated_at_ = -1;
  }
  seq_->BackTo(history_.back());
  return true;
}

void Matcher::Reset() {
  history_.resize(1);
  terminated_ = false;
  terminated_at_ = -1;
  last_error_ = Status();
  seq_->BackTo(history_.back());
}

bool Matcher::CanEnd() const {
  if (terminated_) return false;
  return seq_->CanEnd(state());
}

std::string Matcher::ForcedBytes(std::size_t max_bytes) const {
  if (terminated_) return {};
  return seq_->ForcedBytes(state(), max_bytes);
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
