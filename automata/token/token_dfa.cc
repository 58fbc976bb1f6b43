// Regex constraints at the token level: GrammarCompiler::CompileRegex and the trie walk that
// computes a DFA state's token mask.
#include "automata/token/token_dfa.h"

#include "automata/token/mask_words.h"

#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

namespace lockstep {
namespace {

std::uint32_t* AllocMask(std::size_t words) {
  void* p = ::operator new(words * sizeof(std::uint32_t), std::align_val_t{64}, std::nothrow);
  return static_cast<std::uint32_t*>(p);
}
void FreeMask(std::uint32_t* p) { ::operator delete(p, std::align_val_t{64}); }

}  // namespace

// --- GrammarCompiler ---------------------------------------------------------------------------

GrammarCompiler::GrammarCompiler(std::shared_ptr<const Vocabulary> vocab)
    : vocab_(std::move(vocab)),
      trie_(std::make_shared<TokenTrie>(*vocab_)),
      vocab_fingerprint_(vocab_->Fingerprint()) {
  // The JSON string body's view of the trie (TokenTrie::Region), which nearly every schema's
  // first string value needs, is built here with the trie it belongs to, and a plain string's
  // positions go into the trie's store: not in the fill that first needs them, where this was
  // a walk of the whole trie (2-5 ms on Llama-3, the slowest fill of most tool schemas).
  CompileOptions warm;
  warm.precompute_masks = true;
  warm.background_positions = false;
  (void)CompileSchema(R"({"type": "string"})", warm);
}

GrammarCompiler::~GrammarCompiler() = default;

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::CompileRegex(
    std::string_view pattern, const CompileOptions& options) const {
  auto t0 = std::chrono::steady_clock::now();
  const CompileDeadline deadline(options.compile_timeout_ms, options.cancel);
  Result<ByteDfa> dfa = CompileRegexToDfa(pattern, RegexOptionsFrom(options, deadline));
  if (!dfa.ok() && dfa.status().location().empty()) {
    return Status(dfa.status().code(), dfa.status().message(), "offset 0");
  }
  if (!dfa.ok()) return dfa.status();
  if (dfa->start == ByteDfa::kDead) {
    return Status(StatusCode::kUnsatisfiable, "the regex matches no string", "offset 0");
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
  auto token_dfa = std::make_unique<TokenDfa>(vocab_, trie_, std::move(dfa).value(), options, ms);
  if (options.precompute_masks) {
    for (StateId s = 1; s < token_dfa->dfa().num_states; ++s) {
      if (deadline.PassedNow()) return deadline.Error("offset 0 (precomputing the masks)");
      token_dfa->CachedMask(s);
    }
  }
  return GrammarAccess::Make(std::move(token_dfa));
}

// --- CompiledGrammar ---------------------------------------------------------------------------

CompiledGrammar::CompiledGrammar(std::unique_ptr<TokenAutomaton> automaton)
    : automaton_(std::move(automaton)) {}
CompiledGrammar::~CompiledGrammar() = default;

const Vocabulary& CompiledGrammar::vocabulary() const { return automaton_->vocabulary(); }
bool CompiledGrammar::is_grammar() const { return automaton_->is_grammar(); }
CompiledGrammarStats CompiledGrammar::Stats() const { return automaton_->CompiledStats(); }
void CompiledGrammar::PrecomputeAllMasks() const { automaton_->PrecomputeAllMasks(); }
std::vector<std::int64_t> CompiledGrammar::AllowedTokensPerState() const {
  return automaton_->AllowedTokensPerState();
}

std::shared_ptr<const CompiledGrammar> GrammarAccess::Make(
    std::unique_ptr<TokenAutomaton> automaton) {
  return std::shared_ptr<const CompiledGrammar>(new CompiledGrammar(std::move(automaton)));
}

const TokenDfa* TokenDfaOf(const CompiledGrammar& g) {
  return dynamic_cast<const TokenDfa*>(&GrammarAccess::Automaton(g));
}

// --- TokenDfa ----------------------------------------------------------------------------------

namespace {

// A regex's sequence: a history entry is the DFA state after the text so far; masks come from
// the per-state cache.
class RegexSequence final : public TokenSequence {
 public:
  explicit RegexSequence(const TokenDfa& d) : d_(d) {}
  std::unique_ptr<TokenSequence> Clone() const override {
    return std::make_unique<RegexSequence>(*this);
  }
  StateId Start() const override { return d_.dfa().start; }
  void Fill(StateId at, std::span<std::uint32_t> out,
            const std::shared_ptr<const CompiledGrammar>&) const override {
    if (const std::uint32_t* cached = d_.CachedMask(at)) {
      std::memcpy(out.data(), cached, out.size() * sizeof(std::uint32_t));
    } else {
      d_.ComputeMask(at, out);
    }
  }
  Step AcceptToken(StateId at, TokenId id, Status*) override {
    if (d_.IsEos(id)) {
      if (!d_.dfa().IsAccepting(at)) return {};
      return {Step::kEnded, at};
    }
    if (!d_.IsTextToken(id)) return {};
    const StateId next = d_.StepToken(at, id);
    if (next == ByteDfa::kDead) return {};
    return {Step::kTaken, next};
  }
  Step AcceptBytes(StateId at, std::string_view bytes, Status*) override {
    const StateId next = d_.dfa().Run(at, bytes);
    if (next == ByteDfa::kDead) return {};
    return {Step::kTaken, next};
  }
  void BackTo(StateId) override {}  // the entry is the whole state
  bool CanEnd(StateId at) const override { return d_.dfa().IsAccepting(at); }
  // Follows states with exactly one live byte and no option to end; bounded by the state count
  // (a forced path that revisits a state is a forced infinite loop, impossible in a trimmed DFA).
  std::string ForcedBytes(StateId at, std::size_t max_bytes) const override {
    std::string out;
    const ByteDfa& dfa = d_.dfa();
    StateId s = at;
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

 private:
  const TokenDfa& d_;
};

}  // namespace

std::unique_ptr<TokenSequence> TokenDfa::NewSequence() const {
  return std::make_unique<RegexSequence>(*this);
}

std::vector<std::int64_t> TokenDfa::AllowedTokensPerState() const {
  std::vector<std::int64_t> out;
  std::vector<std::uint32_t> scratch(mask_words());
  for (StateId s = 1; s < dfa_.num_states; ++s) {
    const std::uint32_t* m = CachedMask(s);
    if (m == nullptr) {
      ComputeMask(s, scratch);
      m = scratch.data();
    }
    std::int64_t n = 0;
    for (std::size_t w = 0; w < mask_words(); ++w) n += std::popcount(m[w]);
    out.push_back(n);
  }
  return out;
}

void TokenDfa::PrecomputeAllMasks() const {
  for (StateId s = 1; s < dfa_.num_states; ++s) CachedMask(s);
}

TokenDfa::TokenDfa(std::shared_ptr<const Vocabulary> vocab, std::shared_ptr<const TokenTrie> trie,
                   ByteDfa dfa, const CompileOptions& options, double compile_ms)
    : vocab_(std::move(vocab)),
      trie_(std::move(trie)),
      dfa_(std::move(dfa)),
      options_(options),
      compile_ms_(compile_ms),
      width_(vocab_->logits_width()),
      is_eos_(EosFlags(*vocab_)),
      cache_(new std::atomic<std::uint32_t*>[dfa_.num_states]) {
  for (StateId s = 0; s < dfa_.num_states; ++s) cache_[s].store(nullptr);
}

TokenDfa::~TokenDfa() {
  for (StateId s = 0; s < dfa_.num_states; ++s) {
    if (std::uint32_t* p = cache_[s].load()) FreeMask(p);
  }
}

void TokenDfa::ComputeMask(StateId state, std::span<std::uint32_t> out) const {
  std::memset(out.data(), 0, out.size() * sizeof(std::uint32_t));
  if (state == ByteDfa::kDead) return;
  if (dfa_.IsAccepting(state)) {
    for (TokenId id : vocab_->eos_ids()) {
      if (id >= 0 && id < width_) mask_words::SetBit(out, id);
    }
  }
  // states[d] = DFA state after the first d bytes of the current trie path.
  StateId states[1024];
  std::vector<StateId> big;
  StateId* st = states;
  if (trie_->max_depth() + 1 > 1024) {
    big.resize(trie_->max_depth() + 1);
    st = big.data();
  }
  st[0] = state;
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  const std::uint32_t n = static_cast<std::uint32_t>(trie_->num_nodes());
  const StateId* next = dfa_.next.data();
  const std::uint8_t* cls = dfa_.byte_class.data();
  const std::int32_t num_classes = dfa_.num_classes;
  std::uint32_t i = 0;
  while (i < n) {
    const TokenTrie::Node& node = nodes[i];
    StateId s = next[st[node.depth - 1] * num_classes + cls[node.byte]];
    if (s == ByteDfa::kDead) {
      i = node.subtree_end;
      continue;
    }
    st[node.depth] = s;
    for (TokenId id : trie_->TokensAt(i)) mask_words::SetBit(out, id);
    ++i;
  }
}

const std::uint32_t* TokenDfa::CachedMask(StateId state) const {
  std::uint32_t* p = cache_[state].load(std::memory_order_acquire);
  if (p != nullptr) return p;
  const std::size_t padded = PaddedBitmaskWords(width_);
  const std::int64_t bytes = static_cast<std::int64_t>(padded * sizeof(std::uint32_t));
  if (cache_bytes_.fetch_add(bytes) + bytes > options_.max_mask_cache_bytes) {
    cache_bytes_.fetch_sub(bytes);
    return nullptr;
  }
  p = AllocMask(padded);
  if (p == nullptr) {
    cache_bytes_.fetch_sub(bytes);
    return nullptr;
  }
  std::memset(p, 0, padded * sizeof(std::uint32_t));
  ComputeMask(state, {p, mask_words()});
  std::uint32_t* expected = nullptr;
  if (!cache_[state].compare_exchange_strong(expected, p, std::memory_order_acq_rel)) {
    FreeMask(p);  // another thread won the race; its mask is identical
    cache_bytes_.fetch_sub(bytes);
    return expected;
  }
  cached_masks_.fetch_add(1);
  return p;
}

CompiledGrammarStats TokenDfa::Stats() const {
  CompiledGrammarStats s;
  s.dfa_states = dfa_.num_states;
  s.byte_classes = dfa_.num_classes;
  s.accepting_states = dfa_.num_states - dfa_.accept_begin;
  s.compile_ms = compile_ms_;
  s.cached_masks = cached_masks_.load();
  s.mask_cache_bytes = cache_bytes_.load();
  return s;
}

}  // namespace lockstep
