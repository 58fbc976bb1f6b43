#include "automata/cfg_grammar.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <thread>

namespace lockstep {
namespace {

std::uint32_t* AllocWords(std::size_t words) {
  void* p = ::operator new(words * sizeof(std::uint32_t), std::align_val_t{64}, std::nothrow);
  return static_cast<std::uint32_t*>(p);
}
void FreeWords(std::uint32_t* p) { ::operator delete(p, std::align_val_t{64}); }

inline void SetBit(std::span<std::uint32_t> out, TokenId id) {
  out[static_cast<std::size_t>(id) >> 5] |= 1u << (id & 31);
}

}  // namespace

std::size_t CfgGrammar::KeyHash::operator()(const std::vector<std::int32_t>& v) const {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
  for (std::int32_t x : v) {
    h ^= static_cast<std::uint32_t>(x);
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  return static_cast<std::size_t>(h);
}

CfgGrammar::CfgGrammar(std::shared_ptr<const Vocabulary> vocab,
                       std::shared_ptr<const TokenTrie> trie, CfgProgram program,
                       const CompileOptions& options, double compile_ms)
    : vocab_(std::move(vocab)),
      trie_(std::move(trie)),
      program_(std::move(program)),
      options_(options),
      compile_ms_(compile_ms),
      width_(vocab_->logits_width()),
      max_depth_(options.max_nesting_depth),
      is_eos_(vocab_->size(), false),
      dfa_positions_(new std::atomic<const CfgPosition*>[std::max(program_.num_states, 1)]),
      counter_clamp_(trie_->max_depth() + 2),
      final_chunks_(new std::atomic<std::atomic<std::uint32_t*>*>[kMaxSignatures / kChunk]) {
  depth_margin_ = static_cast<std::int64_t>(program_.NumRules() + 1) * (trie_->max_depth() + 1);
  for (TokenId id : vocab_->eos_ids()) {
    if (id >= 0 && id < vocab_->size()) is_eos_[id] = true;
  }
  for (std::int32_t s = 0; s < program_.num_states; ++s) dfa_positions_[s].store(nullptr);
  for (std::int32_t c = 0; c < kMaxSignatures / kChunk; ++c) final_chunks_[c].store(nullptr);
  for (std::size_t i = 0; i < program_.special_tokens.size(); ++i) {
    special_of_token_.emplace_back(program_.special_tokens[i], static_cast<std::int32_t>(i));
  }
  ComputeFollow();
}

void CfgGrammar::ComputeFollow() {
  const CfgProgram& p = program_;
  const std::int32_t ns = p.num_states, nr = p.NumRules();
  // Byte sets as 4 words: merging is 4 ORs (this runs at every compile, on every state).
  using Bits = std::array<std::uint64_t, 4>;
  auto merge = [](Bits& into, const Bits& from) {
    bool changed = false;
    for (int w = 0; w < 4; ++w) {
      const std::uint64_t v = into[w] | from[w];
      changed |= v != into[w];
      into[w] = v;
    }
    return changed;
  };
  // null_state[s]: from s the rule can finish without consuming a byte.
  std::vector<std::uint8_t> null_state(ns, 0);
  bool changed = true;
  while (changed) {
    changed = false;
    for (StateId s = 0; s < ns; ++s) {
      if (null_state[s]) continue;
      bool v = p.accepting[s] != 0;
      for (std::int32_t e = p.nt_begin[s]; e < p.nt_begin[s + 1] && !v; ++e) {
        v = p.rules[p.nt_edges[e].first].nullable && null_state[p.nt_edges[e].second];
      }
      if (v) null_state[s] = 1, changed = true;
    }
  }
  // The bytes of each byte class, then first_state from one step per class.
  std::vector<Bits> class_bytes(p.num_classes, Bits{});
  for (int b = 0; b < 256; ++b) class_bytes[p.byte_class[b]][b >> 6] |= std::uint64_t{1} << (b & 63);
  std::vector<Bits> first_state(ns, Bits{}), first_rule(nr, Bits{});
  for (StateId s = 0; s < ns; ++s) {
    const StateId* row = &p.next[static_cast<std::size_t>(s) * p.num_classes];
    for (std::int32_t c = 0; c < p.num_classes; ++c) {
      if (row[c] != CfgProgram::kDead) merge(first_state[s], class_bytes[c]);
    }
  }
  changed = true;
  while (changed) {
    changed = false;
    for (StateId s = 0; s < ns; ++s) {
      for (std::int32_t e = p.nt_begin[s]; e < p.nt_begin[s + 1]; ++e) {
        auto [r, t] = p.nt_edges[e];
        changed |= merge(first_state[s], first_rule[r]);
        if (p.rules[r].nullable) changed |= merge(first_state[s], first_state[t]);
      }
    }
    for (std::int32_t r = 0; r < nr; ++r) {
      const auto& ri = p.rules[r];
      changed |= merge(first_rule[r], ri.kind == CfgProgram::RuleKind::kDfa ? first_state[ri.start]
                                                                          : first_rule[ri.child]);
    }
  }
  std::vector<Bits> follow(nr, Bits{});
  changed = true;
  while (changed) {
    changed = false;
    for (StateId s = 0; s < ns; ++s) {
      for (std::int32_t e = p.nt_begin[s]; e < p.nt_begin[s + 1]; ++e) {
        auto [r, t] = p.nt_edges[e];
        changed |= merge(follow[r], first_state[t]);
        if (null_state[t]) changed |= merge(follow[r], follow[p.state_rule[s]]);
      }
    }
    for (std::int32_t c = 0; c < nr; ++c) {
      const auto& ri = p.rules[c];
      if (ri.kind != CfgProgram::RuleKind::kCounter || ri.max == 0) continue;
      changed |= merge(follow[ri.child], first_rule[ri.child]);
      changed |= merge(follow[ri.child], follow[c]);
    }
  }
  follow_.assign(nr, std::array<bool, 256>{});
  for (std::int32_t r = 0; r < nr; ++r) {
    for (int b = 0; b < 256; ++b) follow_[r][b] = (follow[r][b >> 6] >> (b & 63)) & 1;
  }
}

CfgGrammar::~CfgGrammar() {
  for (std::int32_t c = 0; c < kMaxSignatures / kChunk; ++c) {
    std::atomic<std::uint32_t*>* chunk = final_chunks_[c].load();
    if (chunk == nullptr) continue;
    for (std::int32_t i = 0; i < kChunk; ++i) {
      if (std::uint32_t* p = chunk[i].load()) FreeWords(p);
    }
    delete[] chunk;
  }
}

std::int32_t CfgGrammar::SpecialIndex(TokenId id) const {
  for (const auto& [tok, idx] : special_of_token_) {
    if (tok == id) return idx;
  }
  return -1;
}

bool CfgGrammar::ReserveBytes(std::int64_t n) const {
  if (cache_bytes_.fetch_add(n) + n > options_.max_mask_cache_bytes) {
    cache_bytes_.fetch_sub(n);
    return false;
  }
  return true;
}

// --- positions ---------------------------------------------------------------------------------

std::unique_ptr<CfgPosition> CfgGrammar::ComputePosition(const EarleyItem& item) const {
  EarleyParser local(&program_, INT_MAX);
  local.InitLocal(item.rule, item.state, 0);
  auto pos = std::make_unique<CfgPosition>();
  const std::size_t words = PaddedBitmaskWords(width_);
  std::vector<std::uint32_t> bits(words, 0);
  std::vector<std::pair<std::string_view, TokenId>> unc;
  std::int32_t accepted = 0;
  std::vector<std::int32_t> splits;
  const std::array<bool, 256>& follow = follow_[item.rule];
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  const std::uint32_t n = static_cast<std::uint32_t>(trie_->num_nodes());
  std::uint32_t i = 0;
  while (i < n) {
    const TokenTrie::Node& node = nodes[i];
    const std::int32_t d = node.depth;
    local.PopTo(d);
    while (!splits.empty() && splits.back() >= d) splits.pop_back();
    if (!local.StepByte(node.byte)) {
      if (!splits.empty()) {
        for (std::uint32_t j = i; j < node.subtree_end; ++j) {
          for (TokenId tok : trie_->TokensAt(j)) {
            std::string_view bytes = vocab_->TokenBytes(tok);
            for (std::int32_t s : splits) {
              if (follow[static_cast<std::uint8_t>(bytes[s])]) unc.emplace_back(bytes.substr(s), tok);
            }
          }
        }
      }
      i = node.subtree_end;
      continue;
    }
    for (TokenId tok : trie_->TokensAt(i)) {
      bits[static_cast<std::size_t>(tok) >> 5] |= 1u << (tok & 31);
      ++accepted;
    }
    if (local.bottom_completed(d)) splits.push_back(d);
    ++i;
  }
  pos->num_accepted = accepted;
  if (static_cast<std::size_t>(accepted) < words) {
    for (std::size_t w = 0; w < words; ++w) {
      std::uint32_t x = bits[w];
      while (x != 0) {
        int b = __builtin_ctz(x);
        pos->accepted_list.push_back(static_cast<TokenId>(w * 32 + b));
        x &= x - 1;
      }
    }
  } else {
    pos->accepted_bits = std::move(bits);
  }
  // Uncertain tails as a depth-first trie.
  std::sort(unc.begin(), unc.end());
  unc.erase(std::unique(unc.begin(), unc.end()), unc.end());
  pos->num_uncertain = static_cast<std::int32_t>(unc.size());
  std::vector<std::uint32_t> open;  // node indices on the current path, by depth - 1
  std::string_view prev;
  for (std::size_t u = 0; u < unc.size();) {
    std::string_view tail = unc[u].first;
    std::size_t c = 0;
    while (c < prev.size() && c < tail.size() && prev[c] == tail[c]) ++c;
    while (open.size() > c) {
      pos->tails[open.back()].subtree_end = static_cast<std::uint32_t>(pos->tails.size());
      open.pop_back();
    }
    for (std::size_t dd = c; dd < tail.size(); ++dd) {
      open.push_back(static_cast<std::uint32_t>(pos->tails.size()));
      pos->tails.push_back({0, static_cast<std::uint32_t>(pos->tail_tokens.size()),
                            static_cast<std::uint16_t>(dd + 1),
                            static_cast<std::uint8_t>(tail[dd])});
    }
    while (u < unc.size() && unc[u].first == tail) pos->tail_tokens.push_back(unc[u++].second);
    prev = tail;
  }
  while (!open.empty()) {
    pos->tails[open.back()].subtree_end = static_cast<std::uint32_t>(pos->tails.size());
    open.pop_back();
  }
  pos->tails.push_back({static_cast<std::uint32_t>(pos->tails.size() + 1),
                        static_cast<std::uint32_t>(pos->tail_tokens.size()), 0, 0});
  pos->accepted_bits.shrink_to_fit();
  pos->accepted_list.shrink_to_fit();
  pos->tails.shrink_to_fit();
  pos->tail_tokens.shrink_to_fit();
  return pos;
}

std::uint64_t CfgPosition::ContentHash() const {
  std::uint64_t h = 0x84222325CBF29CE4ull;
  auto mix = [&](std::uint64_t x) {
    h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  };
  for (std::uint32_t w : accepted_bits) mix(w);
  for (TokenId t : accepted_list) mix(static_cast<std::uint32_t>(t));
  for (TokenId t : tail_tokens) mix(static_cast<std::uint32_t>(t));
  for (const TailNode& n : tails) mix((std::uint64_t{n.subtree_end} << 32) ^ (n.depth << 8) ^ n.byte);
  return h;
}

const CfgPosition* CfgGrammar::Publish(std::unique_ptr<CfgPosition> pos) const {
  const std::uint64_t h = pos->ContentHash();
  std::lock_guard<std::mutex> lock(owned_mu_);
  auto& bucket = by_content_[h];
  for (const CfgPosition* p : bucket) {
    if (p->SameContent(*pos)) return p;
  }
  if (!ReserveBytes(pos->Bytes())) return nullptr;
  num_positions_.fetch_add(1);
  sum_accepted_.fetch_add(pos->num_accepted);
  sum_uncertain_.fetch_add(pos->num_uncertain);
  owned_.push_back(std::move(pos));
  bucket.push_back(owned_.back().get());
  return owned_.back().get();
}

const CfgPosition* CfgGrammar::PositionFor(const EarleyItem& it) const {
  if (!program_.IsCounter(it.rule)) {
    std::atomic<const CfgPosition*>& slot = dfa_positions_[it.state];
    if (const CfgPosition* p = slot.load(std::memory_order_acquire)) return p;
    const CfgPosition* p = Publish(ComputePosition(it));
    if (p != nullptr) slot.store(p, std::memory_order_release);
    return p;
  }
  const CfgProgram::RuleInfo& r = program_.rules[it.rule];
  const std::int32_t to_min = std::min(std::max(r.min - it.state, 0), counter_clamp_);
  const std::int32_t to_max =
      r.max == CfgProgram::kUnbounded ? -1 : std::min(r.max - it.state, counter_clamp_);
  auto key = std::make_tuple(it.rule, to_min, to_max);
  {
    std::lock_guard<std::mutex> lock(counter_mu_);
    auto f = counter_positions_.find(key);
    if (f != counter_positions_.end()) return f->second;
  }
  const CfgPosition* p = Publish(ComputePosition(it));
  if (p == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(counter_mu_);
  counter_positions_.emplace(key, p);
  return p;
}

void CfgGrammar::PrecomputePositions(int threads) const {
  // Kernel items sit in states reached by a transition (and the root's start state).
  // Rules reachable from the root (inlined rules keep automata of their own that nothing uses).
  std::vector<std::uint8_t> reach(program_.NumRules(), 0);
  std::vector<std::int32_t> stack = {program_.root};
  reach[program_.root] = 1;
  std::vector<std::vector<StateId>> states_of(program_.NumRules());
  for (StateId s = 0; s < program_.num_states; ++s) states_of[program_.state_rule[s]].push_back(s);
  while (!stack.empty()) {
    std::int32_t r = stack.back();
    stack.pop_back();
    auto visit = [&](std::int32_t x) {
      if (!reach[x]) reach[x] = 1, stack.push_back(x);
    };
    if (program_.IsCounter(r)) {
      visit(program_.rules[r].child);
      continue;
    }
    for (StateId s : states_of[r]) {
      for (std::int32_t e = program_.nt_begin[s]; e < program_.nt_begin[s + 1]; ++e) {
        visit(program_.nt_edges[e].first);
      }
    }
  }
  std::vector<std::uint8_t> candidate(program_.num_states, 0);
  candidate[program_.rules[program_.root].start] = 1;
  for (std::size_t i = 0; i < program_.next.size(); ++i) {
    if (program_.next[i] != CfgProgram::kDead) candidate[program_.next[i]] = 1;
  }
  for (const auto& e : program_.nt_edges) candidate[e.second] = 1;
  for (const auto& e : program_.sp_edges) candidate[e.second] = 1;
  for (StateId s = 0; s < program_.num_states; ++s) {
    if (!reach[program_.state_rule[s]]) candidate[s] = 0;
  }
  std::vector<std::int32_t> todo;
  EarleyParser probe(&program_, INT_MAX);
  for (std::int32_t s = 0; s < program_.num_states; ++s) {
    EarleyItem it{program_.state_rule[s], s, 0, 0};
    if (candidate[s] && probe.ItemHasFuture(it)) todo.push_back(s);
  }
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next.fetch_add(1); i < todo.size(); i = next.fetch_add(1)) {
      PositionFor({program_.state_rule[todo[i]], todo[i], 0, 0});
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

// --- signatures and the finished-mask cache ---------------------------------------------------

std::int32_t CfgGrammar::Signature(const EarleyParser& parser, std::vector<std::int32_t>& sigs,
                                   std::int32_t k) const {
  if (static_cast<std::int32_t>(sigs.size()) > parser.num_sets()) sigs.resize(parser.num_sets());
  std::vector<std::int32_t> key;
  std::vector<std::array<std::int32_t, 4>> items;
  for (std::int32_t j = static_cast<std::int32_t>(sigs.size()); j <= k; ++j) {
    items.clear();
    bool unknown = false;
    for (const EarleyItem& it : parser.set(j)) {
      if (!parser.IsKernel(j, it)) continue;
      std::int32_t osig = it.origin == j ? -3 : sigs[it.origin];
      if (osig == -1) unknown = true;
      items.push_back({it.rule, it.state, osig, it.depth});
    }
    std::int32_t id = -1;
    if (!unknown) {
      std::sort(items.begin(), items.end());
      key.clear();
      for (const auto& a : items) key.insert(key.end(), a.begin(), a.end());
      std::lock_guard<std::mutex> lock(sig_mu_);
      auto f = sig_ids_.find(key);
      if (f != sig_ids_.end()) {
        id = f->second;
      } else if (static_cast<std::int32_t>(sig_ids_.size()) < kMaxSignatures &&
                 ReserveBytes(static_cast<std::int64_t>(key.size() * 4 + 64))) {
        id = static_cast<std::int32_t>(sig_ids_.size());
        sig_ids_.emplace(key, id);
      }
    }
    sigs.push_back(id);
  }
  return sigs[k];
}

const std::uint32_t* CfgGrammar::CachedFinal(std::int32_t sig) const {
  std::atomic<std::uint32_t*>* chunk = final_chunks_[sig / kChunk].load(std::memory_order_acquire);
  if (chunk == nullptr) return nullptr;
  return chunk[sig % kChunk].load(std::memory_order_acquire);
}

void CfgGrammar::StoreFinal(std::int32_t sig, std::span<const std::uint32_t> mask) const {
  std::atomic<std::atomic<std::uint32_t*>*>& cslot = final_chunks_[sig / kChunk];
  std::atomic<std::uint32_t*>* chunk = cslot.load(std::memory_order_acquire);
  if (chunk == nullptr) {
    std::lock_guard<std::mutex> lock(chunk_mu_);
    chunk = cslot.load(std::memory_order_acquire);
    if (chunk == nullptr) {
      chunk = new std::atomic<std::uint32_t*>[kChunk];
      for (std::int32_t i = 0; i < kChunk; ++i) chunk[i].store(nullptr);
      cslot.store(chunk, std::memory_order_release);
    }
  }
  const std::size_t padded = PaddedBitmaskWords(width_);
  const std::int64_t bytes = static_cast<std::int64_t>(padded * 4);
  if (!ReserveBytes(bytes)) return;
  std::uint32_t* p = AllocWords(padded);
  if (p == nullptr) {
    cache_bytes_.fetch_sub(bytes);
    return;
  }
  std::memset(p, 0, padded * 4);
  std::memcpy(p, mask.data(), mask.size() * 4);
  std::uint32_t* expected = nullptr;
  if (!chunk[sig % kChunk].compare_exchange_strong(expected, p, std::memory_order_acq_rel)) {
    FreeWords(p);
    cache_bytes_.fetch_sub(bytes);
    return;
  }
  cached_masks_.fetch_add(1);
}

// --- masks -------------------------------------------------------------------------------------

void CfgGrammar::FullWalkMask(EarleyParser& parser, std::span<std::uint32_t> out) const {
  std::memset(out.data(), 0, mask_words() * 4);
  const std::int32_t base = parser.num_sets();
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  const std::uint32_t n = static_cast<std::uint32_t>(trie_->num_nodes());
  std::uint32_t i = 0;
  while (i < n) {
    const TokenTrie::Node& node = nodes[i];
    parser.PopTo(base + node.depth - 1);
    if (!parser.StepByte(node.byte)) {
      i = node.subtree_end;
      continue;
    }
    for (TokenId tok : trie_->TokensAt(i)) SetBit(out, tok);
    ++i;
  }
  parser.PopTo(base);
  AddEndAndSpecials(parser, out);
}

void CfgGrammar::AddEndAndSpecials(EarleyParser& parser, std::span<std::uint32_t> out) const {
  const std::int32_t base = parser.num_sets();
  if (parser.CanEnd()) {
    for (TokenId id : vocab_->eos_ids()) {
      if (id >= 0 && id < width_) SetBit(out, id);
    }
  }
  for (const auto& [tok, idx] : special_of_token_) {
    if (parser.StepSpecial(idx)) {
      if (tok < width_) SetBit(out, tok);
      parser.PopTo(base);
    }
  }
  parser.ClearDepthFlag();
}

void CfgGrammar::FillMask(EarleyParser& parser, std::vector<std::int32_t>& sigs,
                          std::span<std::uint32_t> out) const {
  const std::int32_t k = parser.num_sets() - 1;
  std::int32_t deepest = 0;
  for (const EarleyItem& it : parser.set(k)) deepest = std::max(deepest, it.depth);
  if (static_cast<std::int64_t>(max_depth_) - deepest < depth_margin_) {
    FullWalkMask(parser, out);
    return;
  }
  const std::size_t words = mask_words();
  const std::int32_t sig = Signature(parser, sigs, k);
  if (sig >= 0) {
    if (const std::uint32_t* m = CachedFinal(sig)) {
      std::memcpy(out.data(), m, words * 4);
      return;
    }
  }
  std::memset(out.data(), 0, words * 4);
  // Kernel positions (few: usually one to three).
  EarleyItem kernels[64];
  const CfgPosition* positions[64];
  std::int32_t nk = 0;
  for (const EarleyItem& it : parser.set(k)) {
    if (!parser.IsKernel(k, it) || !parser.ItemHasFuture(it)) continue;
    const CfgPosition* pos = PositionFor(it);
    if (pos == nullptr || nk == 64) {
      FullWalkMask(parser, out);  // over the cache budget (or pathological): exact, slower
      return;
    }
    kernels[nk] = it;
    positions[nk] = pos;
    ++nk;
  }
  for (std::int32_t a = 0; a < nk; ++a) {
    const CfgPosition* pos = positions[a];
    if (!pos->accepted_bits.empty()) {
      const std::uint32_t* src = pos->accepted_bits.data();
      std::uint32_t* dst = out.data();
      for (std::size_t w = 0; w < words; ++w) dst[w] |= src[w];
    } else {
      for (TokenId tok : pos->accepted_list) SetBit(out, tok);
    }
  }
  const std::int32_t base = parser.num_sets();
  for (std::int32_t a = 0; a < nk; ++a) {
    const CfgPosition* pos = positions[a];
    if (pos->tails.size() <= 1) continue;
    const EarleyItem it = kernels[a];
    if (!parser.PushCompletion(it.rule, it.origin)) continue;
    const std::uint32_t n = static_cast<std::uint32_t>(pos->tails.size() - 1);
    std::uint32_t i = 0;
    while (i < n) {
      const CfgPosition::TailNode& node = pos->tails[i];
      parser.PopTo(base + node.depth);
      if (!parser.StepByte(node.byte)) {
        i = node.subtree_end;
        continue;
      }
      for (std::uint32_t t = node.token_begin; t < pos->tails[i + 1].token_begin; ++t) {
        SetBit(out, pos->tail_tokens[t]);
      }
      ++i;
    }
    parser.PopTo(base);
  }
  AddEndAndSpecials(parser, out);
  if (sig >= 0) StoreFinal(sig, out.first(words));
}

CfgStats CfgGrammar::Stats() const {
  CfgStats s;
  s.rules = program_.NumRules();
  for (const auto& r : program_.rules) s.counter_rules += r.kind == CfgProgram::RuleKind::kCounter;
  s.states = program_.num_states;
  s.byte_classes = program_.num_classes;
  s.positions = num_positions_.load();
  s.accepted_tokens = sum_accepted_.load();
  s.uncertain_tokens = sum_uncertain_.load();
  s.cached_masks = cached_masks_.load();
  {
    std::lock_guard<std::mutex> lock(sig_mu_);
    s.signatures = static_cast<std::int32_t>(sig_ids_.size());
  }
  s.cache_bytes = cache_bytes_.load();
  s.compile_ms = compile_ms_;
  return s;
}

}  // namespace lockstep
