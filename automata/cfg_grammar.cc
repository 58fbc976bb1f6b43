#include "automata/cfg_grammar.h"

#include <algorithm>
#include <bit>
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
  std::vector<std::uint8_t>& null_state = null_state_;
  null_state.assign(ns, 0);
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
  first_bytes_ = std::move(first_state);
  ComputeRepeatEdges(class_bytes);
  follow_.assign(nr, std::array<bool, 256>{});
  for (std::int32_t r = 0; r < nr; ++r) {
    for (int b = 0; b < 256; ++b) follow_[r][b] = (follow[r][b >> 6] >> (b & 63)) & 1;
  }
}

void CfgGrammar::ComputeRepeatEdges(const std::vector<std::array<std::uint64_t, 4>>& class_bytes) {
  // A simple repetition: a counter rule whose child is a DFA rule that takes exactly one byte
  // of a class (start not accepting, no rule edges, every byte to an accepting dead end).
  const CfgProgram& p = program_;
  const std::int32_t nr = p.NumRules();
  std::vector<std::int32_t> simple(nr, -1);  // index into repeat_classes
  struct Repeat {
    std::array<std::uint64_t, 4> bytes;
    std::int32_t min, max;
  };
  std::vector<Repeat> repeat_classes;
  auto has_nt = [&](StateId s) { return p.nt_begin[s] != p.nt_begin[s + 1]; };
  for (std::int32_t r = 0; r < nr; ++r) {
    const auto& ri = p.rules[r];
    if (ri.kind != CfgProgram::RuleKind::kCounter || p.IsCounter(ri.child)) continue;
    const StateId s0 = p.rules[ri.child].start;
    if (s0 == CfgProgram::kDead || p.accepting[s0] || has_nt(s0)) continue;
    std::array<std::uint64_t, 4> bytes{};
    bool ok = true;
    const StateId* row = &p.next[static_cast<std::size_t>(s0) * p.num_classes];
    for (std::int32_t c = 0; c < p.num_classes && ok; ++c) {
      const StateId t = row[c];
      if (t == CfgProgram::kDead) continue;
      ok = p.accepting[t] && !p.has_bytes[t] && !has_nt(t) &&
           p.sp_begin[t] == p.sp_begin[t + 1];
      for (int w = 0; w < 4; ++w) bytes[w] |= class_bytes[c][w];
    }
    if (!ok) continue;
    simple[r] = static_cast<std::int32_t>(repeat_classes.size());
    repeat_classes.push_back({bytes, ri.min, ri.max});
  }
  // A DFA rule that is only such a repetition (`ws ::= [ \t\n\r]{0,32}` names one) is one too.
  for (std::int32_t r = 0; r < nr; ++r) {
    const auto& ri = p.rules[r];
    if (ri.kind != CfgProgram::RuleKind::kDfa || ri.start == CfgProgram::kDead) continue;
    const StateId s0 = ri.start;
    if (p.accepting[s0] || p.has_bytes[s0] || p.sp_begin[s0] != p.sp_begin[s0 + 1] ||
        p.nt_begin[s0 + 1] - p.nt_begin[s0] != 1) {
      continue;
    }
    const auto [inner, t] = p.nt_edges[p.nt_begin[s0]];
    if (simple[inner] < 0 || !p.accepting[t] || p.has_bytes[t] || has_nt(t) ||
        p.sp_begin[t] != p.sp_begin[t + 1]) {
      continue;
    }
    simple[r] = simple[inner];
  }
  // A state whose only edge is such a repetition, to a state that takes none of its bytes and
  // has no rule edges: the walk counts the repetition itself (no parser).
  repeat_of_.assign(p.num_states, -1);
  repeat_edges_.clear();
  for (StateId s = 0; s < p.num_states; ++s) {
    if (p.nt_begin[s + 1] - p.nt_begin[s] != 1 || p.has_bytes[s] ||
        p.sp_begin[s] != p.sp_begin[s + 1]) {
      continue;
    }
    const auto [r, after] = p.nt_edges[p.nt_begin[s]];
    if (simple[r] < 0 || has_nt(after)) continue;
    const Repeat& rep = repeat_classes[simple[r]];
    const std::array<std::uint64_t, 4>& bytes = rep.bytes;
    bool clash = false;
    const StateId* row = &p.next[static_cast<std::size_t>(after) * p.num_classes];
    for (std::int32_t c = 0; c < p.num_classes && !clash; ++c) {
      if (row[c] == CfgProgram::kDead) continue;
      for (int w = 0; w < 4; ++w) clash |= (class_bytes[c][w] & bytes[w]) != 0;
    }
    if (clash) continue;
    repeat_of_[s] = static_cast<std::int32_t>(repeat_edges_.size());
    repeat_edges_.push_back({bytes, after, rep.min, rep.max});
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

// Scratch of one position's computation: local parsers by level, accepted tokens as bits,
// uncertain (tail, token) pairs.
struct CfgGrammar::WalkScratch {
  std::vector<std::unique_ptr<EarleyParser>> parsers;
  std::vector<std::uint32_t> bits;
  std::vector<std::pair<std::string_view, TokenId>> unc;
  std::int32_t accepted = 0;
};

// Walks the depth-first trie nodes[begin, end) (token ranges into `toks`; offsets[t] is where
// token toks[t]'s walked bytes start in its bytes, or null for 0) from DFA state `start` of
// `rule` (or the counter item when the rule is a counter), into `out`. The walk runs on the
// rule's byte automaton alone while it stays in states without rule edges (string bodies,
// literals, numbers), and hands a subtree to a local Earley parser started at the state it
// reached once a rule edge is in sight. Both agree: a state without rule edges predicts nothing,
// so the parser's set there is that single item.
void CfgGrammar::WalkTrie(std::span<const TokenTrie::Node> nodes, std::uint32_t begin,
                          std::uint32_t end, const TokenId* toks, const std::uint16_t* offsets,
                          const EarleyItem& item, StateId start, WalkScratch& out) const {
  const CfgProgram& p = program_;
  const bool counter = p.IsCounter(item.rule);
  auto has_nt = [&](StateId s) { return p.nt_begin[s] != p.nt_begin[s + 1]; };
  // Per trie depth: the DFA state (level < 0) or the local parser level and the depth of that
  // parser's set 0. A parser level hands back to the automaton as soon as its latest set is the
  // position's own item alone at a state without rule edges (after `ws "\""`, say); a later rule
  // edge on the same path starts a parser one level up, so the outer one keeps its sets.
  const std::int32_t maxd = trie_->max_depth() + 2;
  std::vector<StateId> dstate(maxd, CfgProgram::kDead);
  std::vector<std::int32_t> level(maxd, -1), base(maxd, 0), used(maxd, 0);
  std::vector<std::uint8_t> path_byte(maxd, 0);
  std::vector<std::unique_ptr<EarleyParser>>& parsers = out.parsers;
  auto parser = [&](std::int32_t l) -> EarleyParser& {
    while (static_cast<std::int32_t>(parsers.size()) <= l) {
      parsers.push_back(std::make_unique<EarleyParser>(&program_, INT_MAX));
    }
    return *parsers[l];
  };
  // wcount[d] >= 0: at depth d the walk is inside the simple repetition on the rule edge of
  // dstate[d] (RepeatEdge), after wcount[d] repetitions; -1: at dstate[d] itself.
  std::vector<std::int32_t> wcount(maxd, -1);
  dstate[0] = start;
  if (!counter && has_nt(start) && repeat_of_[start] >= 0) {
    wcount[0] = 0;
  } else if (counter || has_nt(start)) {
    parser(0).InitLocal(item.rule, counter ? item.state : start, 0);
    level[0] = 0;
    base[0] = 0;
    used[0] = 1;
  }
  std::vector<std::int32_t> splits;
  const std::array<bool, 256>& follow = follow_[item.rule];
  std::uint32_t i = begin;
  while (i < end) {
    const TokenTrie::Node& node = nodes[i];
    const std::int32_t d = node.depth;
    while (!splits.empty() && splits.back() >= d) splits.pop_back();
    bool ok, completed = false;
    if (d == 1 && !counter && !FirstByte(start, node.byte)) {
      // A token failing on its first byte never completes the rule on the way: rejected.
      ok = false;
    } else if (level[d - 1] < 0) {
      StateId t;
      wcount[d] = -1;
      if (wcount[d - 1] >= 0) {
        // Inside a simple repetition (`ws`): one more byte of its class, or on after it.
        const RepeatEdge& r = repeat_edges_[repeat_of_[dstate[d - 1]]];
        const std::int32_t c = wcount[d - 1];
        if ((r.bytes[node.byte >> 6] >> (node.byte & 63)) & 1) {
          t = c < r.max || r.max < 0 ? dstate[d - 1] : CfgProgram::kDead;
          if (t != CfgProgram::kDead) wcount[d] = c + 1;
        } else {
          t = c >= r.min ? p.Step(r.after, node.byte) : CfgProgram::kDead;
        }
      } else {
        t = p.Step(dstate[d - 1], node.byte);
      }
      ok = t != CfgProgram::kDead;
      if (ok && wcount[d] >= 0) {
        const RepeatEdge& r = repeat_edges_[repeat_of_[t]];
        dstate[d] = t;
        completed = wcount[d] >= r.min && null_state_[r.after] != 0;
        used[d] = used[d - 1];
        level[d] = -1;
      } else if (ok) {
        dstate[d] = t;
        completed = null_state_[t] != 0;
        used[d] = used[d - 1];
        level[d] = -1;
        if (has_nt(t) && repeat_of_[t] >= 0) {
          wcount[d] = 0;
        } else if (has_nt(t)) {
          parser(used[d]).InitLocal(item.rule, t, 0);
          level[d] = used[d];
          base[d] = d;
          ++used[d];
        }
      }
    } else {
      const std::int32_t l = level[d - 1], b0 = base[d - 1];
      EarleyParser& local = parser(l);
      local.PopTo(d - b0);
      ok = local.StepByte(node.byte);
      if (ok) {
        completed = local.bottom_completed(d - b0);
        level[d] = l;
        base[d] = b0;
        used[d] = used[d - 1];
        std::span<const EarleyItem> last = local.set(d - b0);
        wcount[d] = -1;
        if (!counter && last.size() == 1 && last[0].origin == -1 && last[0].rule == item.rule &&
            !has_nt(last[0].state)) {
          level[d] = -1;
          dstate[d] = last[0].state;
        }
      }
    }
    path_byte[d] = node.byte;
    if (!ok) {
      // The subtree's tokens are uncertain at every split whose next byte (on the shared path)
      // can follow the rule.
      for (std::int32_t sp : splits) {
        if (!follow[path_byte[sp + 1]]) continue;
        for (std::uint32_t j = node.token_begin; j < nodes[node.subtree_end].token_begin; ++j) {
          const TokenId tok = toks[j];
          const std::size_t off = offsets != nullptr ? offsets[j] : 0;
          out.unc.emplace_back(vocab_->TokenBytes(tok).substr(off + sp), tok);
        }
      }
      i = node.subtree_end;
      continue;
    }
    for (std::uint32_t j = node.token_begin; j < nodes[i + 1].token_begin; ++j) {
      out.bits[static_cast<std::size_t>(toks[j]) >> 5] |= 1u << (toks[j] & 31);
      ++out.accepted;
    }
    if (completed) splits.push_back(d);
    ++i;
  }
}

// The region of DFA state s that tokens can share across grammars: the states reachable from s
// by bytes through states without rule edges that cannot finish the rule (a string body with
// its escapes and UTF-8 continuations, say), numbered breadth-first from s so that equal
// regions of different grammars have equal tables. Empty when it would not pay: no wide loop
// inside (a literal), or too many states.
std::vector<std::int16_t> CfgGrammar::RegionTable(StateId s, std::vector<StateId>& states) const {
  const CfgProgram& p = program_;
  auto plain = [&](StateId t) { return p.nt_begin[t] == p.nt_begin[t + 1] && !null_state_[t]; };
  states.clear();
  if (!plain(s)) return {};
  constexpr std::size_t kMaxRegion = 64;
  std::unordered_map<StateId, std::int32_t> canon{{s, 0}};
  states.push_back(s);
  bool wide = false;
  for (std::size_t k = 0; k < states.size(); ++k) {
    int loop = 0;
    for (int b = 0; b < 256; ++b) {
      const StateId t = p.Step(states[k], static_cast<std::uint8_t>(b));
      if (t == states[k]) ++loop;
      if (t == CfgProgram::kDead || !plain(t) || canon.count(t)) continue;
      if (states.size() == kMaxRegion) return {};
      canon[t] = static_cast<std::int32_t>(states.size());
      states.push_back(t);
    }
    wide |= loop >= 48;
  }
  if (!wide) return {};
  std::vector<std::int16_t> table(states.size() * 256);
  for (std::size_t k = 0; k < states.size(); ++k) {
    for (int b = 0; b < 256; ++b) {
      const StateId t = p.Step(states[k], static_cast<std::uint8_t>(b));
      std::int16_t v;
      if (t == CfgProgram::kDead) {
        v = TokenTrie::kRegionDead;
      } else if (auto f = canon.find(t); f != canon.end()) {
        v = static_cast<std::int16_t>(f->second);
      } else {
        v = TokenTrie::kRegionExit;
      }
      table[k * 256 + b] = v;
    }
  }
  return table;
}

std::unique_ptr<CfgPosition> CfgGrammar::ComputePosition(const EarleyItem& item) const {
  WalkScratch scratch;
  const std::size_t words = PaddedBitmaskWords(width_);
  scratch.bits.assign(words, 0);
  const bool counter = program_.IsCounter(item.rule);
  std::vector<StateId> region_states;
  std::vector<std::int16_t> table;
  if (!counter) table = RegionTable(item.state, region_states);
  const TokenTrie::RegionView* view = table.empty() ? nullptr : trie_->Region(table, *vocab_);
  if (view != nullptr) {
    // Tokens inside the region: shared; tokens leaving it: walked from where they leave (no
    // split before: region states cannot finish the rule).
    for (std::size_t w = 0; w < view->inside_bits.size() && w < words; ++w) {
      scratch.bits[w] |= view->inside_bits[w];
    }
    scratch.accepted = view->inside_count;
    for (const auto& g : view->groups) {
      WalkTrie(view->nodes, g.begin, g.end, view->tokens.data(), view->offsets.data(), item,
               region_states[g.q], scratch);
    }
  } else {
    WalkTrie(trie_->nodes(), 0, static_cast<std::uint32_t>(trie_->num_nodes()),
             trie_->tokens().data(), nullptr, item, item.state, scratch);
  }
  auto pos = std::make_unique<CfgPosition>();
  std::vector<std::uint32_t>& bits = scratch.bits;
  std::vector<std::pair<std::string_view, TokenId>>& unc = scratch.unc;
  const std::int32_t accepted = scratch.accepted;
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

// A finished mask is kept in the smallest of three forms (JSON masks are mostly a handful of
// tokens, or nearly the whole vocabulary): blob[0] = form, blob[1] = n, then
//   kFinalBits: the mask words;   kFinalList: n allowed ids;   kFinalComplement: n blocked ids.
// Restoring a list form is a memset and n bit writes, cheaper than copying 16 KB from memory
// that has left the cache, and the cache holds several times more signatures per byte.
enum : std::uint32_t { kFinalBits = 0, kFinalList = 1, kFinalComplement = 2 };

namespace {

__attribute__((target("popcnt"))) std::size_t CountOnesPopcnt(const std::uint32_t* w,
                                                             std::size_t n) {
  std::size_t c = 0;
  for (std::size_t i = 0; i < n; ++i) c += static_cast<std::size_t>(__builtin_popcount(w[i]));
  return c;
}

std::size_t CountOnes(const std::uint32_t* w, std::size_t n) {
  static const bool has_popcnt = __builtin_cpu_supports("popcnt");
  if (has_popcnt) return CountOnesPopcnt(w, n);
  std::size_t c = 0;
  for (std::size_t i = 0; i < n; ++i) c += static_cast<std::size_t>(std::popcount(w[i]));
  return c;
}

}  // namespace

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
  const std::size_t words = mask.size();
  // Lists up to words / 8 ids (an eighth of the bitset's bytes): restoring them stays cheaper
  // than a copy.
  const std::size_t limit = words / 8;
  const std::size_t ones = CountOnes(mask.data(), words);
  thread_local std::vector<std::uint32_t> ids;
  ids.clear();
  std::uint32_t form = kFinalBits;
  if (ones <= limit || static_cast<std::size_t>(width_) - ones <= limit) {
    const bool complement = ones > limit;
    form = complement ? kFinalComplement : kFinalList;
    ids.resize(complement ? static_cast<std::size_t>(width_) - ones : ones);
    std::uint32_t* dst = ids.data();
    const std::uint32_t flip = complement ? ~0u : 0u;
    for (std::size_t w = 0; w < words; ++w) {
      std::uint32_t x = mask[w] ^ flip;
      if (x == 0) continue;
      if (complement && w + 1 == words && (width_ & 31) != 0) x &= (1u << (width_ & 31)) - 1;
      while (x != 0) {
        *dst++ = static_cast<std::uint32_t>(w * 32 + __builtin_ctz(x));
        x &= x - 1;
      }
    }
  }
  const std::size_t n = form == kFinalBits ? words : ids.size();
  const std::int64_t bytes = static_cast<std::int64_t>((n + 2) * 4);
  if (!ReserveBytes(bytes)) return;
  std::uint32_t* p = AllocWords(n + 2);
  if (p == nullptr) {
    cache_bytes_.fetch_sub(bytes);
    return;
  }
  p[0] = form;
  p[1] = static_cast<std::uint32_t>(n);
  if (form == kFinalBits) {
    std::memcpy(p + 2, mask.data(), words * 4);
  } else if (n != 0) {
    std::memcpy(p + 2, ids.data(), n * 4);
  }
  std::uint32_t* expected = nullptr;
  if (!chunk[sig % kChunk].compare_exchange_strong(expected, p, std::memory_order_acq_rel)) {
    FreeWords(p);
    cache_bytes_.fetch_sub(bytes);
    return;
  }
  cached_masks_.fetch_add(1);
}

void CfgGrammar::RestoreFinal(const std::uint32_t* blob, std::span<std::uint32_t> out) const {
  const std::size_t words = mask_words();
  const std::uint32_t n = blob[1];
  const std::uint32_t* ids = blob + 2;
  switch (blob[0]) {
    case kFinalBits:
      std::memcpy(out.data(), ids, words * 4);
      return;
    case kFinalList:
      std::memset(out.data(), 0, words * 4);
      for (std::uint32_t i = 0; i < n; ++i) out[ids[i] >> 5] |= 1u << (ids[i] & 31);
      return;
    default:
      std::memset(out.data(), 0xFF, words * 4);
      if ((width_ & 31) != 0) out[words - 1] = (1u << (width_ & 31)) - 1;
      for (std::uint32_t i = 0; i < n; ++i) out[ids[i] >> 5] &= ~(1u << (ids[i] & 31));
      return;
  }
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
      RestoreFinal(m, out);
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
