// Regex constraints at the token level: GrammarCompiler::CompileRegex and the trie walk that
// computes a DFA state's token mask.
#include "automata/token/token_dfa.h"

#include "automata/cfg/cfg_grammar.h"
#include "automata/token/mask_words.h"

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
  auto impl = std::make_unique<CompiledGrammar::Impl>(vocab_, trie_, std::move(dfa).value(),
                                                      options, ms);
  auto grammar = std::make_shared<const CompiledGrammar>(std::move(impl));
  if (options.precompute_masks) {
    const CompiledGrammar::Impl& im = grammar->impl();
    for (StateId s = 1; s < im.dfa().num_states; ++s) {
      if (deadline.PassedNow()) return deadline.Error("offset 0 (precomputing the masks)");
      im.CachedMask(s);
    }
  }
  return grammar;
}

// --- CompiledGrammar ---------------------------------------------------------------------------

CompiledGrammar::CompiledGrammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledGrammar::CompiledGrammar(std::unique_ptr<CfgGrammar> cfg) : cfg_(std::move(cfg)) {}
CompiledGrammar::~CompiledGrammar() = default;
const Vocabulary& CompiledGrammar::vocabulary() const {
  return cfg_ ? cfg_->vocab() : impl_->vocab();
}
CompiledGrammarStats CompiledGrammar::Stats() const {
  if (!cfg_) return impl_->Stats();
  CfgStats c = cfg_->Stats();
  CompiledGrammarStats s;
  s.is_grammar = true;
  s.dfa_states = c.states;
  s.byte_classes = c.byte_classes;
  s.compile_ms = c.compile_ms;
  s.cached_masks = c.cached_masks;
  s.mask_cache_bytes = c.cache_bytes;
  s.rules = c.rules;
  s.counter_rules = c.counter_rules;
  s.positions = c.positions;
  s.shared_positions = c.shared_positions;
  s.accepted_tokens = c.accepted_tokens;
  s.uncertain_tokens = c.uncertain_tokens;
  s.signatures = c.signatures;
  return s;
}
void CompiledGrammar::PrecomputeAllMasks() const {
  if (cfg_) {
    static_cast<void>(cfg_->PrecomputePositions(0));  // without a deadline it cannot fail
    return;
  }
  for (StateId s = 1; s < impl_->dfa().num_states; ++s) impl_->CachedMask(s);
}

CompiledGrammar::Impl::Impl(std::shared_ptr<const Vocabulary> vocab,
                            std::shared_ptr<const TokenTrie> trie, ByteDfa dfa,
                            const CompileOptions& options, double compile_ms)
    : vocab_(std::move(vocab)),
      trie_(std::move(trie)),
      dfa_(std::move(dfa)),
      options_(options),
      compile_ms_(compile_ms),
      width_(vocab_->logits_width()),
      is_eos_(vocab_->size(), false),
      cache_(new std::atomic<std::uint32_t*>[dfa_.num_states]) {
  for (TokenId id : vocab_->eos_ids()) {
    if (id >= 0 && id < vocab_->size()) is_eos_[id] = true;
  }
  for (StateId s = 0; s < dfa_.num_states; ++s) cache_[s].store(nullptr);
}

CompiledGrammar::Impl::~Impl() {
  for (StateId s = 0; s < dfa_.num_states; ++s) {
    if (std::uint32_t* p = cache_[s].load()) FreeMask(p);
  }
}

void CompiledGrammar::Impl::ComputeMask(StateId state, std::span<std::uint32_t> out) const {
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

const std::uint32_t* CompiledGrammar::Impl::CachedMask(StateId state) const {
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

CompiledGrammarStats CompiledGrammar::Impl::Stats() const {
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
