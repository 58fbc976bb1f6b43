#include "automata/cfg/cfg_grammar.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <climits>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <chrono>
#include <unordered_map>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "automata/cfg/state_fold.h"

namespace lockstep {
namespace {

// Finished masks (read with memcpy and scalar loads: no alignment needed). Not over-aligned:
// glibc serves an aligned request outside its per-thread cache, and right after a big grammar
// was freed that meant sorting its thousands of free chunks inside a fill (a 60-byte mask took
// 450k cycles, 200 µs, in BM_SchemaPrecomputedWarm's slowest fill).
std::uint32_t* AllocWords(std::size_t words) {
  void* p = ::operator new(words * sizeof(std::uint32_t), std::nothrow);
  return static_cast<std::uint32_t*>(p);
}
void FreeWords(std::uint32_t* p) { ::operator delete(p); }

inline void SetBit(std::span<std::uint32_t> out, TokenId id) {
  out[static_cast<std::size_t>(id) >> 5] |= 1u << (id & 31);
}
// SetBit, appending id to `added` (if given) when its bit was clear.
inline void SetBitRecording(std::span<std::uint32_t> out, TokenId id, std::vector<TokenId>* added) {
  std::uint32_t& w = out[static_cast<std::size_t>(id) >> 5];
  const std::uint32_t bit = 1u << (id & 31);
  if (added != nullptr && (w & bit) == 0) added->push_back(id);
  w |= bit;
}

// Word kernels over whole masks (4,008 words on Llama-3), with AVX2 versions picked at run time
// (this file compiles for baseline x86-64).
#if defined(__x86_64__)
#define LOCKSTEP_CFG_AVX2 __attribute__((target("avx2,popcnt")))

LOCKSTEP_CFG_AVX2 std::size_t CountOnesAvx2(const std::uint32_t* w, std::size_t n) {
  std::uint64_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t x[4];
    std::memcpy(x, w + i, sizeof x);
    c0 += static_cast<std::uint64_t>(__builtin_popcountll(x[0]));
    c1 += static_cast<std::uint64_t>(__builtin_popcountll(x[1]));
    c2 += static_cast<std::uint64_t>(__builtin_popcountll(x[2]));
    c3 += static_cast<std::uint64_t>(__builtin_popcountll(x[3]));
  }
  for (; i < n; ++i) c0 += static_cast<std::uint64_t>(__builtin_popcount(w[i]));
  return static_cast<std::size_t>(c0 + c1 + c2 + c3);
}

LOCKSTEP_CFG_AVX2 std::size_t SkipWordsAvx2(const std::uint32_t* w, std::size_t i, std::size_t n,
                                            std::uint32_t skip) {
  const __m256i s = _mm256_set1_epi32(static_cast<int>(skip));
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(v, s)) != -1) return i;
  }
  return i;
}

bool HasAvx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  return avx2;
}
#endif

// (Vectorised by the compiler.)
void OrWords(std::uint32_t* dst, const std::uint32_t* __restrict src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] |= src[i];
}

std::size_t CountOnes(const std::uint32_t* w, std::size_t n) {
#if defined(__x86_64__)
  if (HasAvx2()) return CountOnesAvx2(w, n);
#endif
  std::size_t c = 0;
  for (std::size_t i = 0; i < n; ++i) c += static_cast<std::size_t>(std::popcount(w[i]));
  return c;
}

// The first index >= i, in steps of 8 words, where a block holds a word other than `skip`
// (or the last partial block); the caller scans from there word by word.
std::size_t SkipWords(const std::uint32_t* w, std::size_t i, std::size_t n, std::uint32_t skip) {
#if defined(__x86_64__)
  if (HasAvx2()) return SkipWordsAvx2(w, i, n, skip);
#endif
  for (; i + 8 <= n; i += 8) {
    for (std::size_t j = 0; j < 8; ++j) {
      if (w[i + j] != skip) return i;
    }
  }
  return i;
}

// The most rules on one path of the graph succ from `from` (every rule when from < 0), by an
// iterative depth-first search (the rule graph is user input); -1 when a path meets a cycle.
std::int64_t LongestPath(const std::vector<std::vector<std::int32_t>>& succ, std::int32_t from) {
  const std::int32_t n = static_cast<std::int32_t>(succ.size());
  std::vector<std::int64_t> longest(n, 0);
  std::vector<std::uint8_t> color(n, 0);  // 0 new, 1 on the stack, 2 done
  std::vector<std::pair<std::int32_t, std::size_t>> stack;
  std::int64_t best_all = 0;
  for (std::int32_t top = from < 0 ? 0 : from; top < (from < 0 ? n : from + 1); ++top) {
    if (color[top] != 0) continue;
    stack.push_back({top, 0});
    color[top] = 1;
    while (!stack.empty()) {
      const std::int32_t r = stack.back().first;
      if (stack.back().second < succ[r].size()) {
        const std::int32_t b = succ[r][stack.back().second++];
        if (color[b] == 1) return -1;
        if (color[b] == 0) {
          color[b] = 1;
          stack.push_back({b, 0});
        }
        continue;
      }
      std::int64_t best = 0;
      for (std::int32_t b : succ[r]) best = std::max(best, longest[b]);
      longest[r] = best + 1;
      best_all = std::max(best_all, longest[r]);
      color[r] = 2;
      stack.pop_back();
    }
  }
  return best_all;
}

// The most rules one Earley set can predict in a chain below one item: 1 (the item's own
// prediction) plus the longest path of the graph "rule A predicts rule B without consuming a
// byte" (B is referenced at A's start state, or at a state reached from it over nullable rules
// only; a counter predicts its child). Every byte of a token adds at most that much depth, so a
// state with (token length + 1) times as much depth left cannot reach the nesting limit within
// one token. Left recursion (a cycle) bounds it by the rule count. Iterative: the rule graph is
// user input.
std::int64_t PredictionChain(const CfgProgram& p) {
  const std::int32_t n = p.NumRules();
  std::vector<std::vector<std::int32_t>> succ(n);
  std::vector<StateId> work, touched;
  std::vector<std::uint8_t> seen(p.num_states, 0);
  for (std::int32_t r = 0; r < n; ++r) {
    const CfgProgram::RuleInfo& info = p.rules[r];
    if (info.kind != CfgProgram::RuleKind::kDfa) {
      if (info.child >= 0) succ[r].push_back(info.child);
      continue;
    }
    if (info.start < 0 || info.start >= p.num_states) continue;
    work.assign(1, info.start);
    touched.assign(1, info.start);
    seen[info.start] = 1;
    while (!work.empty()) {
      const StateId s = work.back();
      work.pop_back();
      for (std::int32_t e = p.nt_begin[s]; e < p.nt_begin[s + 1]; ++e) {
        const auto [sub, target] = p.nt_edges[e];
        succ[r].push_back(sub);
        if (p.rules[sub].nullable && !seen[target]) {
          seen[target] = 1;
          touched.push_back(target);
          work.push_back(target);
        }
      }
    }
    for (StateId s : touched) seen[s] = 0;
  }
  // Left recursion (a cycle): the rule count.
  const std::int64_t longest = LongestPath(succ, -1);
  return longest < 0 ? n + 1 : std::min<std::int64_t>(longest + 1, n + 1);
}

// The deepest nesting any parse of the program reaches (root at depth 0, one more per rule
// entered): the longest path of the graph "rule A references rule B" (anywhere in A, not only
// at its start), or -1 when that graph has a cycle (recursion: no bound). A grammar without
// recursion (most JSON Schemas: a tree of definitions without a $ref back up) whose deepest
// nesting is within the limit can never meet it, so its fills need no depth headroom at all,
// however long its chains of optional members (each member list a rule calling the next).
std::int64_t DeepestNesting(const CfgProgram& p) {
  const std::int32_t n = p.NumRules();
  if (p.state_rule.size() != static_cast<std::size_t>(p.num_states)) return -1;
  std::vector<std::vector<std::int32_t>> succ(n);
  for (std::int32_t r = 0; r < n; ++r) {
    if (p.rules[r].kind != CfgProgram::RuleKind::kDfa && p.rules[r].child >= 0) {
      succ[r].push_back(p.rules[r].child);
    }
  }
  for (StateId s = 0; s < p.num_states; ++s) {
    for (std::int32_t e = p.nt_begin[s]; e < p.nt_begin[s + 1]; ++e) {
      succ[p.state_rule[s]].push_back(p.nt_edges[e].first);
    }
  }
  for (auto& v : succ) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  if (p.root < 0 || p.root >= n) return -1;
  const std::int64_t longest = LongestPath(succ, p.root);
  return longest < 0 ? -1 : longest - 1;  // (edges, not rules)
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
                       const CompileOptions& options, double compile_ms,
                       const CompileDeadline* deadline)
    : vocab_(std::move(vocab)),
      trie_(std::move(trie)),
      program_(std::move(program)),
      options_(options),
      compile_ms_(compile_ms),
      width_(vocab_->logits_width()),
      max_depth_(options.max_nesting_depth),
      max_step_items_(options.max_earley_items_per_byte),
      is_eos_(vocab_->size(), false),
      dfa_positions_(new std::atomic<const CfgPosition*>[std::max(program_.num_states, 1)]),
      counter_clamp_(trie_->max_depth() + 2),
      final_chunks_() {
  const std::int64_t deepest = DeepestNesting(program_);
  if (deepest < 0 || deepest >= max_depth_) {
    prediction_chain_ = std::max<std::int64_t>(PredictionChain(program_), 1);
    depth_margin_ = prediction_chain_ * (trie_->max_depth() + 1);
  } else {
    depth_margin_ = 0;
  }
  for (TokenId id : vocab_->eos_ids()) {
    if (id >= 0 && id < vocab_->size()) is_eos_[id] = true;
  }
  for (std::int32_t s = 0; s < program_.num_states; ++s) dfa_positions_[s].store(nullptr);
  for (std::int32_t c = 0; c < kNumChunks; ++c) final_chunks_[c].store(nullptr);
  for (std::size_t i = 0; i < program_.special_tokens.size(); ++i) {
    special_of_token_.emplace_back(program_.special_tokens[i], static_cast<std::int32_t>(i));
  }
  ComputeFollow();
  background_ = options_.background_positions && !options_.precompute_masks;
  if (options_.share_positions) fingerprint_ = ProgramFingerprint(program_);
  FoldBigRules(deadline);
  // The counted views this grammar's counters will use, found (or built: once per vocabulary
  // and unit, a few ms) in the compile rather than in the fill that first meets one.
  counted_views_.assign(program_.NumRules(), nullptr);
  for (std::int32_t r = 0; r < program_.NumRules(); ++r) {
    if (program_.IsCounter(r)) counted_views_[r] = MakeCountedView(r);
  }
}

void CfgGrammar::FoldBigRules(const CompileDeadline* deadline) {
  std::vector<std::vector<StateId>> big;
  std::vector<std::int32_t> index(program_.NumRules(), -1);
  for (std::int32_t r = 0; r < program_.NumRules(); ++r) {
    if (program_.rules[r].shared_source != 0 && !program_.IsCounter(r)) {
      index[r] = static_cast<std::int32_t>(big.size());
      big.emplace_back();
    }
  }
  if (big.empty()) return;
  for (StateId s = 0; s < program_.num_states; ++s) {
    if (index[program_.state_rule[s]] >= 0) big[index[program_.state_rule[s]]].push_back(s);
  }
  SharedPositions& shared = trie_->Attached<SharedPositions>();
  for (const std::vector<StateId>& states : big) {
    if (static_cast<std::int32_t>(states.size()) < kMinFoldStates) continue;
    const std::uint64_t source = program_.rules[program_.state_rule[states[0]]].shared_source;
    std::shared_ptr<const std::vector<std::int32_t>> fold;
    {
      std::lock_guard<std::mutex> lock(shared.mu);
      auto f = shared.folds.find(source);
      if (f != shared.folds.end()) fold = f->second;
    }
    if (!fold) {
      std::vector<std::uint8_t> finish(states.size());
      for (std::size_t i = 0; i < states.size(); ++i) finish[i] = null_state_[states[i]];
      fold = std::make_shared<const std::vector<std::int32_t>>(
          FoldStatesForTokens(program_, states, finish, *trie_, deadline));
      if (deadline != nullptr && deadline->PassedNow()) {  // unfinished: neither kept nor used
        fold_stopped_at_ = program_.rules[program_.state_rule[states[0]]].name;
        return;
      }
      std::lock_guard<std::mutex> lock(shared.mu);
      fold = shared.folds.try_emplace(source, fold).first->second;
    }
    if (fold->size() != states.size()) continue;  // (another automaton under that serial)
    if (fold_rep_.empty()) {
      fold_rep_.resize(program_.num_states);
      for (StateId s = 0; s < program_.num_states; ++s) fold_rep_[s] = s;
    }
    for (std::size_t i = 0; i < states.size(); ++i) fold_rep_[states[i]] = states[(*fold)[i]];
  }
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
  if (p.byte_first.size() == static_cast<std::size_t>(ns)) {
    first_state = p.byte_first;  // recorded by the lowering
  } else {
    for (StateId s = 0; s < ns; ++s) {  // a program read from an artifact: from the table
      const StateId* row = &p.next[static_cast<std::size_t>(s) * p.num_classes];
      for (std::int32_t c = 0; c < p.num_classes; ++c) {
        if (row[c] != CfgProgram::kDead) merge(first_state[s], class_bytes[c]);
      }
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
  first_count_.resize(first_bytes_.size());
  for (std::size_t k = 0; k < first_bytes_.size(); ++k) {
    int n = 0;
    for (std::uint64_t w : first_bytes_[k]) {
      // SWAR popcount: no library call on targets without the instruction.
      w = w - ((w >> 1) & 0x5555555555555555ull);
      w = (w & 0x3333333333333333ull) + ((w >> 2) & 0x3333333333333333ull);
      w = (w + (w >> 4)) & 0x0F0F0F0F0F0F0F0Full;
      n += static_cast<int>((w * 0x0101010101010101ull) >> 56);
    }
    first_count_[k] = static_cast<std::uint16_t>(n);
  }
  class_size_.assign(p.num_classes, 0);
  for (int b = 0; b < 256; ++b) ++class_size_[p.byte_class[b]];
  ComputeRepeatEdges(class_bytes);
  follow_bits_.assign(follow.begin(), follow.end());
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
  for (std::int32_t c = 0; c < kNumChunks; ++c) {
    std::atomic<std::uint32_t*>* chunk = final_chunks_[c].load();
    if (chunk == nullptr) continue;
    for (std::int32_t i = 0; i < ChunkSize(c); ++i) {
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

namespace {

// The walk's runtime below rule edges: the parses alive after each byte as explicit stacks
// ("configurations": a DFA state on top of a chain of return frames), the way a recursive
// descent would run them all at once. It computes exactly what the local Earley parser computes
// for a position (which bytes are consumable, and where the position's own rule may finish),
// with no origins or completion scans. Frames are interned, so equal stacks are one
// configuration; closed configuration sets are interned too, and their byte transitions
// memoised, so the many tokens that run through the same sets (whitespace runs, say) cost one
// table lookup per byte. Grammars where this would not stay small (left recursion, wide
// ambiguity) make it give up (`failed`); the position is then walked by the Earley parser.
class StackWalk {
 public:
  static constexpr std::int32_t kBottom = -1;
  struct Config {
    StateId q;
    std::int32_t parent;  // frame index or kBottom (q is in the position's own rule)
    std::int32_t fresh;   // 1: the top rule has consumed nothing since it was entered
    bool operator<(const Config& o) const {
      return std::tie(q, parent, fresh) < std::tie(o.q, o.parent, o.fresh);
    }
    bool operator==(const Config& o) const {
      return q == o.q && parent == o.parent && fresh == o.fresh;
    }
  };

  explicit StackWalk(const CfgProgram* p) : p_(p) {}

  // Forgets every set and frame (lazily: the next Start clears the tables).
  void Reset() {
    fresh_walk_ = true;
    failed = false;
  }
  // The closed set of the single configuration (q, parent).
  std::int32_t Start(StateId q, std::int32_t parent) {
    Prepare();
    ClearCur();
    completed_ = false;
    Add(q, parent, 0);
    Close();
    return InternSet();
  }
  // The closed set of counter `rule` after `count` repetitions as the position's own rule (a
  // counter position): its body entered afresh; the counter finishes once a body has.
  std::int32_t StartCounter(std::int32_t rule, std::int32_t count) {
    Prepare();
    ClearCur();
    completed_ = false;
    Counter(rule, count, kBottom, /*fresh=*/true);
    Close();
    return failed ? -1 : InternSet();
  }
  // The set after byte b from set `sid`; -1 if b leads nowhere.
  std::int32_t Step(std::int32_t sid, std::uint8_t b) {
    const std::int64_t key = static_cast<std::int64_t>(sid) * 256 + b;
    std::size_t m = memo_keys_.size() - 1;
    std::size_t h = static_cast<std::size_t>(static_cast<std::uint64_t>(key) * 0x9E3779B97F4A7C15ull >> 20) & m;
    while (memo_keys_[h] >= 0) {
      if (memo_keys_[h] == key) return memo_vals_[h];
      h = (h + 1) & m;
    }
    ClearCur();
    completed_ = false;
    for (std::uint32_t j = set_begin_[sid]; j < set_begin_[sid + 1]; ++j) {
      const StateId t = p_->Step(pool_[j].q, b);
      if (t != CfgProgram::kDead) Add(t, pool_[j].parent, 0);
    }
    Close();
    // (Empty but completed: a counter position's own counter reached its maximum on b.)
    const std::int32_t next = (cur_.empty() && !completed_) || failed ? -1 : InternSet();
    if (failed) return -1;
    memo_keys_[h] = key;
    memo_vals_[h] = next;
    if (2 * ++memo_size_ > memo_keys_.size()) GrowMemo();
    return next;
  }
  std::span<const Config> set(std::int32_t sid) const {
    return {pool_.data() + set_begin_[sid], pool_.data() + set_begin_[sid + 1]};
  }
  // The position's own rule may finish at this set.
  bool completed(std::int32_t sid) const { return set_completed_[sid] != 0; }

  bool failed = false;

 private:
  // Clears the tables at the first Start after Reset.
  void Prepare() {
    if (fresh_walk_) {
      fresh_walk_ = false;
      frames_.clear();
      frame_table_.assign(256, -1);
      pool_.clear();
      set_begin_.assign(1, 0);
      set_completed_.clear();
      set_table_.assign(256, -1);
      memo_keys_.assign(1024, -1);
      memo_vals_.assign(1024, -1);
      memo_size_ = 0;
    }
  }

  // Configurations per set: an object's optional members predict a few each (a 300-member
  // object: about 900). Past it the walk gives up (the Earley parser walks the position).
  static constexpr std::size_t kMaxConfigs = 1024;
  static constexpr std::size_t kLinearConfigs = 16;
  static constexpr std::size_t kSlots = 4096;  // > 2 * kMaxConfigs
  struct Slot {
    std::uint32_t generation;
    std::int32_t index;
  };
  static constexpr std::int32_t kMaxDepth = 40;
  static constexpr std::size_t kMaxFrames = 1 << 16;
  static constexpr std::size_t kMaxPool = 1 << 20;
  struct Frame {
    std::int32_t rule;    // -1: return to DFA state `value`; else counter `rule` at `value` reps
    std::int32_t value;
    std::int32_t parent;
    std::int32_t depth;
  };

  static std::uint64_t Mix(std::uint64_t h, std::uint32_t x) {
    h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h;
  }

  static std::uint64_t SetHash(const Config* c, std::size_t n, bool completed) {
    std::uint64_t h = completed ? 0x51ED27u : 0x2545F491u;
    for (std::size_t k = 0; k < n; ++k) {
      h = Mix(h, static_cast<std::uint32_t>(c[k].q));
      h = Mix(h, static_cast<std::uint32_t>(c[k].parent) * 2u + static_cast<std::uint32_t>(c[k].fresh));
    }
    return h ^ (h >> 29);
  }
  static std::uint64_t FrameHash(std::int32_t rule, std::int32_t value, std::int32_t parent) {
    std::uint64_t h = static_cast<std::uint32_t>(rule) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<std::uint32_t>(value) * 0xC2B2AE3D27D4EB4Full;
    h ^= static_cast<std::uint32_t>(parent + 1) * 0x165667B19E3779F9ull;
    return h ^ (h >> 29);
  }

  std::int32_t InternSet() {
    std::sort(cur_.begin(), cur_.end());
    const std::uint64_t h = SetHash(cur_.data(), cur_.size(), completed_);
    std::size_t m = set_table_.size() - 1, i = h & m;
    while (set_table_[i] >= 0) {
      const std::int32_t sid = set_table_[i];
      if (set_completed_[sid] == completed_ &&
          std::equal(cur_.begin(), cur_.end(), pool_.begin() + set_begin_[sid],
                     pool_.begin() + set_begin_[sid + 1])) {
        return sid;
      }
      i = (i + 1) & m;
    }
    if (pool_.size() + cur_.size() > kMaxPool) {
      failed = true;
      return -1;
    }
    const std::int32_t sid = static_cast<std::int32_t>(set_completed_.size());
    pool_.insert(pool_.end(), cur_.begin(), cur_.end());
    set_begin_.push_back(static_cast<std::uint32_t>(pool_.size()));
    set_completed_.push_back(completed_ ? 1 : 0);
    set_table_[i] = sid;
    if (2 * set_completed_.size() > set_table_.size()) {
      std::vector<std::int32_t> t(set_table_.size() * 2, -1);
      const std::size_t mm = t.size() - 1;
      for (std::int32_t k = 0; k < static_cast<std::int32_t>(set_completed_.size()); ++k) {
        std::size_t x = SetHash(pool_.data() + set_begin_[k], set_begin_[k + 1] - set_begin_[k],
                                set_completed_[k] != 0) & mm;
        while (t[x] >= 0) x = (x + 1) & mm;
        t[x] = k;
      }
      set_table_ = std::move(t);
    }
    return sid;
  }

  void GrowMemo() {
    std::vector<std::int64_t> keys(memo_keys_.size() * 2, -1);
    std::vector<std::int32_t> vals(keys.size(), -1);
    const std::size_t m = keys.size() - 1;
    for (std::size_t k = 0; k < memo_keys_.size(); ++k) {
      if (memo_keys_[k] < 0) continue;
      std::size_t h = static_cast<std::size_t>(
                          static_cast<std::uint64_t>(memo_keys_[k]) * 0x9E3779B97F4A7C15ull >> 20) & m;
      while (keys[h] >= 0) h = (h + 1) & m;
      keys[h] = memo_keys_[k];
      vals[h] = memo_vals_[k];
    }
    memo_keys_ = std::move(keys);
    memo_vals_ = std::move(vals);
  }

  std::int32_t Intern(std::int32_t rule, std::int32_t value, std::int32_t parent) {
    std::size_t m = frame_table_.size() - 1, i = FrameHash(rule, value, parent) & m;
    while (frame_table_[i] >= 0) {
      const Frame& f = frames_[frame_table_[i]];
      if (f.rule == rule && f.value == value && f.parent == parent) return frame_table_[i];
      i = (i + 1) & m;
    }
    const std::int32_t depth = parent < 0 ? 1 : frames_[parent].depth + 1;
    if (depth > kMaxDepth || frames_.size() >= kMaxFrames) {
      failed = true;
      return kBottom;
    }
    const std::int32_t id = static_cast<std::int32_t>(frames_.size());
    frames_.push_back({rule, value, parent, depth});
    frame_table_[i] = id;
    if (2 * frames_.size() > frame_table_.size()) {
      frame_table_.assign(frame_table_.size() * 2, -1);
      const std::size_t mm = frame_table_.size() - 1;
      for (std::size_t k = 0; k < frames_.size(); ++k) {
        const Frame& f = frames_[k];
        std::size_t j = FrameHash(f.rule, f.value, f.parent) & mm;
        while (frame_table_[j] >= 0) j = (j + 1) & mm;
        frame_table_[j] = static_cast<std::int32_t>(k);
      }
    }
    return id;
  }

  void Add(StateId q, std::int32_t parent, std::int32_t fresh) {
    if (const std::int32_t j = Find(q, parent); j >= 0) {
      Config& c = cur_[j];
      if (c.fresh && !fresh) {
        c.fresh = 0;  // may complete now: process again
        work_.push_back(j);
      }
      return;
    }
    if (cur_.size() >= kMaxConfigs) {
      failed = true;
      return;
    }
    work_.push_back(static_cast<std::int32_t>(cur_.size()));
    cur_.push_back({q, parent, fresh});
    if (indexed_) Insert(static_cast<std::int32_t>(cur_.size()) - 1);
  }
  // The set under construction: empty, its index forgotten.
  void ClearCur() {
    cur_.clear();
    indexed_ = false;
  }
  // cur_'s index of (q, parent), or -1. A scan while the set is small; past kLinearConfigs a
  // hash table (an object with many optional members predicts a few configurations per member:
  // hundreds), whose slots are stamped by generation so that it is never cleared.
  std::int32_t Find(StateId q, std::int32_t parent) {
    if (!indexed_) {
      if (cur_.size() <= kLinearConfigs) {
        for (std::size_t j = 0; j < cur_.size(); ++j) {
          if (cur_[j].q == q && cur_[j].parent == parent) return static_cast<std::int32_t>(j);
        }
        return -1;
      }
      indexed_ = true;
      if (slots_.empty()) slots_.assign(kSlots, {0, 0});
      if (++generation_ == 0) {  // (wrapped: forget every stamp)
        slots_.assign(kSlots, {0, 0});
        generation_ = 1;
      }
      for (std::size_t j = 0; j < cur_.size(); ++j) Insert(static_cast<std::int32_t>(j));
    }
    for (std::size_t h = SlotOf(q, parent);; h = (h + 1) & (kSlots - 1)) {
      const Slot& sl = slots_[h];
      if (sl.generation != generation_) return -1;
      const Config& c = cur_[sl.index];
      if (c.q == q && c.parent == parent) return sl.index;
    }
  }
  void Insert(std::int32_t j) {
    std::size_t h = SlotOf(cur_[j].q, cur_[j].parent);
    while (slots_[h].generation == generation_) h = (h + 1) & (kSlots - 1);
    slots_[h] = {generation_, j};
  }
  static std::size_t SlotOf(StateId q, std::int32_t parent) {
    const std::uint64_t k = static_cast<std::uint64_t>(static_cast<std::uint32_t>(q)) << 32 |
                            static_cast<std::uint32_t>(parent);
    return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> 40) & (kSlots - 1);
  }

  // Mirrors EarleyParser::Closure: a rule completes only once it has consumed something (a
  // rule entered here and finished empty is covered by its `nullable` flag), counters count.
  void Close() {
    while (!work_.empty() && !failed) {
      const Config c = cur_[work_.back()];
      work_.pop_back();
      if (p_->accepting[c.q] && !c.fresh) Return(c.parent);
      for (std::int32_t e = p_->nt_begin[c.q]; e < p_->nt_begin[c.q + 1] && !failed; ++e) {
        const auto [sub, target] = p_->nt_edges[e];
        const std::int32_t ret = Intern(-1, target, c.parent);
        if (failed) break;
        Enter(sub, ret);
        if (p_->rules[sub].nullable) Add(target, c.parent, c.fresh);
      }
    }
    work_.clear();
  }
  void Return(std::int32_t parent) {
    if (parent == kBottom) {
      completed_ = true;
      return;
    }
    const Frame f = frames_[parent];
    if (f.rule < 0) {
      Add(f.value, f.parent, 0);
      return;
    }
    const CfgProgram::RuleInfo& r = p_->rules[f.rule];
    if (r.max != CfgProgram::kUnbounded && f.value >= r.max) return;
    std::int32_t c = f.value + 1;
    if (r.max == CfgProgram::kUnbounded && c > r.min) c = r.min;
    Counter(f.rule, c, f.parent, false);
  }
  void Counter(std::int32_t rule, std::int32_t count, std::int32_t parent, bool fresh) {
    const CfgProgram::RuleInfo& r = p_->rules[rule];
    const bool accepting = count >= r.min || p_->rules[r.child].nullable;
    if (accepting && !fresh) Return(parent);
    if (r.max == CfgProgram::kUnbounded || count < r.max) {
      const std::int32_t frame = Intern(rule, count, parent);
      if (!failed) Enter(r.child, frame);
    }
  }
  void Enter(std::int32_t rule, std::int32_t parent) {
    const CfgProgram::RuleInfo& r = p_->rules[rule];
    if (r.kind == CfgProgram::RuleKind::kDfa) {
      Add(r.start, parent, 1);
    } else {
      Counter(rule, 0, parent, true);
    }
  }

  const CfgProgram* p_;
  bool fresh_walk_ = true;
  std::vector<Frame> frames_;
  std::vector<std::int32_t> frame_table_;
  std::vector<Config> cur_;  // the set under construction
  bool indexed_ = false;     // cur_ is in slots_ (generation_)
  std::vector<Slot> slots_;
  std::uint32_t generation_ = 0;
  bool completed_ = false;
  std::vector<std::int32_t> work_;
  std::vector<Config> pool_;  // interned sets: pool_[set_begin_[k], set_begin_[k + 1])
  std::vector<std::uint32_t> set_begin_;
  std::vector<std::uint8_t> set_completed_;
  std::vector<std::int32_t> set_table_;
  std::vector<std::int64_t> memo_keys_;  // (set * 256 + byte) -> next set (-1: dead)
  std::vector<std::int32_t> memo_vals_;
  std::size_t memo_size_ = 0;
};

}  // namespace

// Scratch of one position's computation: local parsers by level (or the stack walk), accepted
// tokens as bits, uncertain (tail, token) pairs.
// One per thread, reused: a position's computation allocates nothing once it has warmed up.
// Accepted ids a walk also collects as a list (sorting a longer list costs more than a scan).
constexpr std::size_t kMaxListedIds = 256;

struct CfgGrammar::WalkScratch {
  // Ready for a position of `program` with `words` mask words.
  void Begin(const CfgProgram* program, std::size_t words, std::size_t max_ids) {
    if (program != owner) {
      owner = program;
      parsers.clear();
      stack = StackWalk(program);
    }
    use_parser = false;
    stack.failed = false;
    bits.assign(words, 0);
    ids.clear();
    ids_limit = max_ids;
    unc.clear();
    accepted = 0;
  }
  const CfgProgram* owner = nullptr;
  std::vector<std::unique_ptr<EarleyParser>> parsers;
  StackWalk stack{nullptr};
  bool use_parser = false;  // the stack walk gave up on this position: Earley only
  std::vector<std::uint32_t> bits;
  // The accepted ids as well, while they are few (ids.size() == accepted): a short list needs
  // no scan of the bits.
  std::vector<TokenId> ids;
  std::size_t ids_limit = 0;
  std::vector<std::pair<std::string_view, TokenId>> unc;
  std::int32_t accepted = 0;
  // WalkTrie's per-depth state.
  std::vector<StateId> dstate;
  std::vector<std::int32_t> level, base, used, wcount, sid, dpar, splits;
  std::vector<std::uint32_t> jump_parent;
  std::vector<const std::uint64_t*> jump_allowed;
  std::vector<std::uint8_t> path_byte;
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
  const std::size_t maxd = static_cast<std::size_t>(trie_->max_depth()) + 2;
  // Each entry is written at its depth before any deeper node reads it: only depth 0 is set.
  if (out.level.size() < maxd) {
    out.dstate.resize(maxd);
    out.level.resize(maxd);
    out.base.resize(maxd);
    out.used.resize(maxd);
    out.wcount.resize(maxd);
    out.sid.resize(maxd);
    out.dpar.resize(maxd);
    out.path_byte.resize(maxd);
  }
  std::vector<StateId>& dstate = out.dstate;
  std::vector<std::int32_t>&level = out.level, &base = out.base, &used = out.used;
  std::vector<std::uint8_t>& path_byte = out.path_byte;
  level[0] = -1;
  base[0] = 0;
  used[0] = 0;
  std::vector<std::unique_ptr<EarleyParser>>& parsers = out.parsers;
  auto parser = [&](std::int32_t l) -> EarleyParser& {
    while (static_cast<std::int32_t>(parsers.size()) <= l) {
      parsers.push_back(std::make_unique<EarleyParser>(&program_, INT_MAX));
    }
    return *parsers[l];
  };
  // wcount[d] >= 0: at depth d the walk is inside the simple repetition on the rule edge of
  // dstate[d] (RepeatEdge), after wcount[d] repetitions; -1: at dstate[d] itself.
  std::vector<std::int32_t>& wcount = out.wcount;
  wcount[0] = -1;
  // Stack-walk mode (level -2): sid[d] is the configuration set at depth d.
  StackWalk& stack = out.stack;
  const bool use_stack = !out.use_parser;
  std::vector<std::int32_t>& sid = out.sid;
  // In automaton mode, dpar[d] is the stack under dstate[d] (the walk left stack mode inside a
  // rule below the position's own, on a state that can neither finish it nor enter a rule).
  std::vector<std::int32_t>& dpar = out.dpar;
  dpar[0] = StackWalk::kBottom;
  if (use_stack) stack.Reset();
  // Starts stack mode at depth d from configuration (t, parent); false if the walk gave up.
  auto start_stack = [&](std::int32_t d, StateId t, std::int32_t parent) {
    sid[d] = stack.Start(t, parent);
    level[d] = -2;
    return !stack.failed;
  };
  dstate[0] = start;
  if (counter && use_stack) {
    // A counter position (`start` is its count): the stack walk runs the counter natively.
    sid[0] = stack.StartCounter(item.rule, start);
    if (stack.failed) return;
    level[0] = -2;
  } else if (!counter && has_nt(start) && repeat_of_[start] >= 0) {
    wcount[0] = 0;
  } else if (use_stack && has_nt(start)) {
    if (!start_stack(0, start, StackWalk::kBottom)) return;
  } else if (counter || has_nt(start)) {
    parser(0).InitLocal(item.rule, counter ? item.state : start, 0);
    level[0] = 0;
    base[0] = 0;
    used[0] = 1;
  }
  std::vector<std::int32_t>& splits = out.splits;
  splits.clear();
  const std::array<bool, 256>& follow = follow_[item.rule];
  // Sparse jumps (whole-trie walks): below a node whose automaton state allows a few bytes out
  // of many children, the walk jumps from one allowed child to the next instead of stepping
  // every child. Only while no split is on the path: a dead child then has no uncertain tokens.
  // jump_parent[d]: the node at depth d whose children are jumped (or kNoJump).
  constexpr std::uint32_t kNoJump = 0xFFFFFFFEu;
  const bool can_jump = offsets == nullptr && nodes.data() == trie_->nodes().data() &&
                        begin == 0 && !counter;
  if (out.jump_parent.size() < maxd) {
    out.jump_parent.resize(maxd);
    out.jump_allowed.resize(maxd);
  }
  std::vector<std::uint32_t>& jump_parent = out.jump_parent;
  std::vector<const std::uint64_t*>& jump_allowed = out.jump_allowed;
  auto sparse = [&](StateId s, std::uint32_t parent) {
    return first_count_[s] * 8u < trie_->NumChildren(parent);
  };
  std::uint32_t i = begin;
  jump_parent[0] = kNoJump;
  if (can_jump && sparse(start, TokenTrie::kRoot)) {
    jump_parent[0] = TokenTrie::kRoot;
    jump_allowed[0] = first_bytes_[start].data();
    i = trie_->NextChild(TokenTrie::kRoot, jump_allowed[0], -1, end);
  }
  while (i < end) {
    const TokenTrie::Node& node = nodes[i];
    const std::int32_t d = node.depth;
    while (!splits.empty() && splits.back() >= d) splits.pop_back();
    bool ok, completed = false;
    if (d == 1 && !counter && !FirstByte(start, node.byte)) {
      // A token failing on its first byte never completes the rule on the way: rejected.
      ok = false;
    } else if (level[d - 1] == -2) {
      const std::int32_t next = stack.Step(sid[d - 1], node.byte);
      if (stack.failed) return;
      ok = next >= 0;
      if (ok) {
        completed = stack.completed(next);
        sid[d] = next;
        used[d] = used[d - 1];
        wcount[d] = -1;
        level[d] = -2;
        const std::span<const StackWalk::Config> set = stack.set(next);
        if (set.size() == 1 && !has_nt(set[0].q) &&
            (set[0].parent == StackWalk::kBottom || !p.accepting[set[0].q])) {
          level[d] = -1;
          dstate[d] = set[0].q;
          dpar[d] = set[0].parent;
        }
      }
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
      if (ok && dpar[d - 1] != StackWalk::kBottom) {
        // Inside a rule below the position's: on in the automaton until that rule may finish or
        // enter another one.
        used[d] = used[d - 1];
        if (has_nt(t) || p.accepting[t]) {
          if (!start_stack(d, t, dpar[d - 1])) return;
          completed = stack.completed(sid[d]);
        } else {
          dstate[d] = t;
          dpar[d] = dpar[d - 1];
          level[d] = -1;
        }
      } else if (ok && wcount[d] >= 0) {
        const RepeatEdge& r = repeat_edges_[repeat_of_[t]];
        dstate[d] = t;
        dpar[d] = StackWalk::kBottom;
        completed = wcount[d] >= r.min && null_state_[r.after] != 0;
        used[d] = used[d - 1];
        level[d] = -1;
      } else if (ok) {
        dstate[d] = t;
        dpar[d] = StackWalk::kBottom;
        completed = null_state_[t] != 0;
        used[d] = used[d - 1];
        level[d] = -1;
        if (has_nt(t) && repeat_of_[t] >= 0) {
          wcount[d] = 0;
        } else if (use_stack && has_nt(t)) {
          if (!start_stack(d, t, StackWalk::kBottom)) return;
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
          dpar[d] = StackWalk::kBottom;
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
      const std::uint32_t jp = jump_parent[d - 1];
      if (jp != kNoJump && splits.empty()) {
        const std::uint32_t stop = jp == TokenTrie::kRoot ? end : nodes[jp].subtree_end;
        i = trie_->NextChild(jp, jump_allowed[d - 1], node.byte, stop);
      } else {
        i = node.subtree_end;
      }
      continue;
    }
    for (std::uint32_t j = node.token_begin; j < nodes[i + 1].token_begin; ++j) {
      out.bits[static_cast<std::size_t>(toks[j]) >> 5] |= 1u << (toks[j] & 31);
      if (out.ids.size() < out.ids_limit) out.ids.push_back(toks[j]);
      ++out.accepted;
    }
    if (completed) splits.push_back(d);
    jump_parent[d] = kNoJump;
    if (can_jump && level[d] == -1 && wcount[d] < 0 && splits.empty() &&
        !has_nt(dstate[d]) && sparse(dstate[d], i)) {
      jump_parent[d] = i;
      jump_allowed[d] = first_bytes_[dstate[d]].data();
      i = trie_->NextChild(i, jump_allowed[d], -1, node.subtree_end);
      continue;
    }
    ++i;
  }
}

namespace {
// Up to 2^(Bits-1) DFA states numbered in insertion order, found by open addressing.
template <int Bits>
struct StateIndex {
  static constexpr std::size_t kSlots = std::size_t{1} << Bits;
  std::array<StateId, kSlots> key;
  std::array<std::int16_t, kSlots> idx;
  StateIndex() { key.fill(CfgProgram::kDead); }
  static std::size_t Slot(StateId t) {
    return (static_cast<std::uint32_t>(t) * 0x9E3779B9u) >> (32 - Bits);
  }
  std::int32_t Find(StateId t) const {
    for (std::size_t h = Slot(t); key[h] != CfgProgram::kDead; h = (h + 1) & (kSlots - 1)) {
      if (key[h] == t) return idx[h];
    }
    return -1;
  }
  void Insert(StateId t, std::int16_t i) {
    std::size_t h = Slot(t);
    while (key[h] != CfgProgram::kDead) h = (h + 1) & (kSlots - 1);
    key[h] = t;
    idx[h] = i;
  }
};
}  // namespace

// The region of DFA state s that tokens can share across grammars: the states reachable from s
// by bytes through states without rule edges that cannot finish the rule (a string body with
// its escapes and UTF-8 continuations, say), numbered breadth-first from s so that equal
// regions of different grammars have equal tables. Empty when it would not pay: no wide loop
// at s or one byte after it (a literal), or too many states.
bool CfgGrammar::PlainState(StateId t) const {
  return program_.nt_begin[t] == program_.nt_begin[t + 1] && !null_state_[t];
}

bool CfgGrammar::EquivalentPlainStates(StateId x, StateId y, std::int64_t& work) const {
  const CfgProgram& p = program_;
  std::vector<std::pair<StateId, StateId>> pairs = {{x, y}};
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    const auto [a, b] = pairs[k];
    if (!PlainState(a) || !PlainState(b) || p.accepting[a] != p.accepting[b] ||
        p.sp_begin[a] != p.sp_begin[a + 1] || p.sp_begin[b] != p.sp_begin[b + 1]) {
      return false;
    }
    work += p.num_classes;
    if (work > kEquivalenceWork) return false;
    const StateId* ra = &p.next[static_cast<std::size_t>(a) * p.num_classes];
    const StateId* rb = &p.next[static_cast<std::size_t>(b) * p.num_classes];
    for (std::int32_t c = 0; c < p.num_classes; ++c) {
      if (ra[c] == rb[c]) continue;
      if (ra[c] == CfgProgram::kDead || rb[c] == CfgProgram::kDead) return false;
      if (std::find(pairs.begin(), pairs.end(), std::make_pair(ra[c], rb[c])) != pairs.end()) {
        continue;
      }
      if (static_cast<std::int64_t>(pairs.size()) == kMaxEquivalentPairs) return false;
      pairs.push_back({ra[c], rb[c]});
    }
  }
  return true;
}

std::vector<std::pair<std::int32_t, StateId>> CfgGrammar::SuccessorsByBytes(StateId x) const {
  const CfgProgram& p = program_;
  std::vector<std::pair<std::int32_t, StateId>> targets;  // (-bytes, state)
  const StateId* row = &p.next[static_cast<std::size_t>(x) * p.num_classes];
  for (std::int32_t c = 0; c < p.num_classes; ++c) {
    const StateId t = row[c];
    if (t == CfgProgram::kDead || t == x || !PlainState(t)) continue;
    auto f = std::find_if(targets.begin(), targets.end(),
                          [&](const auto& y) { return y.second == t; });
    if (f == targets.end()) {
      targets.push_back({-class_size_[c], t});
    } else {
      f->first -= class_size_[c];
    }
  }
  std::sort(targets.begin(), targets.end());
  return targets;
}

std::vector<std::int16_t> CfgGrammar::RegionTable(StateId s, std::vector<StateId>& states,
                                                  std::array<std::uint64_t, 4>& first_exits,
                                                  std::array<std::uint64_t, 4>& removed) const {
  const CfgProgram& p = program_;
  auto plain = [&](StateId t) { return PlainState(t); };
  states.clear();
  if (!plain(s)) return {};
  // Only string bodies and the states one byte before them (an opening quote) pay: a literal
  // that runs into a body gets a table of its own per grammar, with nothing to share.
  constexpr int kWideLoop = 48;  // bytes on a self-loop that make a loop worth sharing
  auto wide_loop = [&](StateId t) {
    const StateId* row = &p.next[static_cast<std::size_t>(t) * p.num_classes];
    int loop = 0;
    for (std::int32_t c = 0; c < p.num_classes; ++c) loop += row[c] == t ? class_size_[c] : 0;
    return loop >= kWideLoop;
  };
  // Equivalence questions of this table, answered once each (EquivalentPlainStates).
  std::int64_t equivalence_work = 0;
  std::vector<std::tuple<StateId, StateId, bool>> answered;
  auto equivalent = [&](StateId x, StateId y) {
    if (x == y) return true;
    for (const auto& [ax, ay, eq] : answered) {
      if (ax == x && ay == y) return eq;
    }
    const bool eq = EquivalentPlainStates(x, y, equivalence_work);
    answered.emplace_back(x, y, eq);
    return eq;
  };
  StateId anchor = s;  // a state on the wide loop: s, or one byte after s
  if (!wide_loop(s)) {
    // The successors s sends the most bytes to, up to 8 of them, most first.
    anchor = CfgProgram::kDead;
    const auto targets = SuccessorsByBytes(s);
    for (std::size_t k = 0; k < targets.size() && k < 8 && anchor == CfgProgram::kDead; ++k) {
      if (wide_loop(targets[k].second)) anchor = targets[k].second;
    }
    if (anchor == CfgProgram::kDead && !targets.empty()) {
      // Two bytes before the loop: s's main successor is the body's first character, a state
      // equivalent to the loop's (`minLength: 1`). s then uses the loop's view as a state one
      // byte before it does (below).
      const StateId t = targets[0].second;
      const auto next = SuccessorsByBytes(t);
      if (!next.empty() && wide_loop(next[0].second) && equivalent(t, next[0].second)) {
        anchor = next[0].second;
      }
    }
    if (anchor == CfgProgram::kDead) return {};
  }
  // The region is s and the anchor's loop: the plain states reachable from the anchor that lead
  // back to it (a string body with its escapes and UTF-8 continuations). What follows the loop
  // (the closing quote, the next key's literal) is left out, so that every grammar's string body
  // has the same table; tokens that leave are walked on from where they leave.
  constexpr std::size_t kMaxExplored = 256, kMaxRegion = 64;
  StateIndex<9> explored_index;
  std::vector<StateId> explored;
  auto find = [&](StateId t) { return explored_index.Find(t); };
  auto insert = [&](StateId t) {
    explored_index.Insert(t, static_cast<std::int16_t>(explored.size()));
    explored.push_back(t);
  };
  const std::int32_t nc = p.num_classes;
  // Forward from the anchor through plain states (bounded), keeping the edges.
  std::vector<std::pair<std::int16_t, std::int16_t>> edges;  // (to, from), distinct
  std::array<std::int16_t, kMaxExplored> last_from;
  last_from.fill(-1);
  insert(anchor);
  for (std::size_t k = 0; k < explored.size(); ++k) {
    const StateId* row = &p.next[static_cast<std::size_t>(explored[k]) * nc];
    for (std::int32_t c = 0; c < nc; ++c) {
      const StateId t = row[c];
      if (t == CfgProgram::kDead || !plain(t)) continue;
      std::int32_t f = find(t);
      if (f < 0) {
        if (explored.size() == kMaxExplored) continue;
        insert(t);
        f = static_cast<std::int32_t>(explored.size()) - 1;
      }
      if (last_from[f] == static_cast<std::int16_t>(k)) continue;
      last_from[f] = static_cast<std::int16_t>(k);
      edges.push_back({static_cast<std::int16_t>(f), static_cast<std::int16_t>(k)});
    }
  }
  // Those that lead back to the anchor: a backward search over the kept edges.
  std::sort(edges.begin(), edges.end());
  std::vector<std::uint8_t> back(explored.size(), 0);
  std::vector<std::int16_t> todo = {0};
  back[0] = 1;
  while (!todo.empty()) {
    const std::int16_t v = todo.back();
    todo.pop_back();
    auto e = std::lower_bound(edges.begin(), edges.end(), std::make_pair(v, std::int16_t{-1}));
    for (; e != edges.end() && e->first == v; ++e) {
      if (!back[e->second]) {
        back[e->second] = 1;
        todo.push_back(e->second);
      }
    }
  }
  auto in_region = [&](StateId t) {
    const std::int32_t f = find(t);
    return f >= 0 && back[f];
  };
  // Region state 0 is s at the token's first byte, with only its transitions into the loop: a
  // first byte that leaves the region (a digit where a value may also be a number) is walked by
  // the caller in the trie directly (first_exits), so the table does not depend on what else s
  // allows. A state before the loop that goes where the anchor goes on every byte it sends into
  // the loop (a key that is not one of the declared names, some letters into: any other string
  // byte goes on as in the string body) takes the anchor's row: its first bytes that differ
  // (`removed`: the letters that continue a declared name) are taken out of the view's results
  // and walked directly, and the view is the string body's own. The loop's states follow,
  // numbered breadth-first in byte order (each class at its first byte): canonical. (s is
  // among them too when it is on the loop.)
  states.clear();
  first_exits.fill(0);
  removed.fill(0);
  const StateId* srow = &p.next[static_cast<std::size_t>(s) * nc];
  const StateId* arow = &p.next[static_cast<std::size_t>(anchor) * nc];
  // Per class: s goes where the anchor goes, or (s before the loop) to a state equivalent to
  // the anchor's.
  bool as_anchor = s != anchor && !in_region(s);
  std::vector<std::uint8_t> same(nc, 0);
  for (std::int32_t c = 0; c < nc; ++c) {
    same[c] = srow[c] == arow[c] ||
              (as_anchor && srow[c] != CfgProgram::kDead && arow[c] != CfgProgram::kDead &&
               !in_region(srow[c]) && in_region(arow[c]) && equivalent(srow[c], arow[c]));
  }
  for (std::int32_t c = 0; c < nc && as_anchor; ++c) {
    const StateId t = srow[c];
    if (t != CfgProgram::kDead && plain(t) && in_region(t) && !same[c]) as_anchor = false;
  }
  const StateId* entry_row = as_anchor ? arow : srow;
  StateIndex<7> region_index;
  auto rfind = [&](StateId t) { return region_index.Find(t); };
  auto rinsert = [&](StateId t) {
    region_index.Insert(t, static_cast<std::int16_t>(states.size()));
    states.push_back(t);
  };
  states.push_back(s);
  std::array<std::uint8_t, 256> seen;  // per byte class (at most 256)
  for (std::size_t k = 0; k < states.size(); ++k) {
    const StateId* row = k == 0 ? entry_row : &p.next[static_cast<std::size_t>(states[k]) * nc];
    seen.fill(0);
    for (int b = 0; b < 256; ++b) {
      const std::int32_t c = p.byte_class[b];
      if (seen[c]) continue;
      seen[c] = 1;
      const StateId t = row[c];
      if (t == CfgProgram::kDead || !plain(t) || !in_region(t) || rfind(t) >= 0) continue;
      if (states.size() == kMaxRegion) return {};
      rinsert(t);
    }
  }
  auto find_region = rfind;
  std::vector<std::int16_t> table(states.size() * 256);
  std::array<std::int16_t, 256> by_class;
  auto region_target = [&](StateId t) {
    return t != CfgProgram::kDead && plain(t) && find_region(t) >= 0;
  };
  for (std::size_t k = 0; k < states.size(); ++k) {
    const StateId* row = k == 0 ? entry_row : &p.next[static_cast<std::size_t>(states[k]) * nc];
    for (std::int32_t c = 0; c < nc; ++c) {
      const StateId t = row[c];
      const std::int32_t f = t == CfgProgram::kDead ? -1 : find_region(t);
      by_class[c] = t == CfgProgram::kDead ? TokenTrie::kRegionDead
                    : f >= 0               ? static_cast<std::int16_t>(f)
                    : k == 0               ? TokenTrie::kRegionDead  // walked by the caller
                                           : TokenTrie::kRegionExit;
    }
    for (int b = 0; b < 256; ++b) table[k * 256 + b] = by_class[p.byte_class[b]];
  }
  for (int b = 0; b < 256; ++b) {
    const std::int32_t c = p.byte_class[b];
    const std::uint64_t bit = std::uint64_t{1} << (b & 63);
    // The view has a result for b (its entry row goes into the region) that holds for s.
    const bool viewed = as_anchor && same[c] && region_target(arow[c]);
    if (srow[c] != CfgProgram::kDead && !region_target(srow[c]) && !viewed) {
      first_exits[b >> 6] |= bit;
    }
    if (as_anchor && region_target(arow[c]) && !same[c]) removed[b >> 6] |= bit;
  }
  return table;
}

int CfgGrammar::RegionUseOfState(StateId s) const {
  std::vector<StateId> states;
  std::array<std::uint64_t, 4> first_exits, removed;
  const std::vector<std::int16_t> table = RegionTable(s, states, first_exits, removed);
  if (table.empty() || trie_->Region(table, *vocab_) == nullptr) return 0;
  return (removed[0] | removed[1] | removed[2] | removed[3]) != 0 ? 2 : 1;
}

const TokenTrie::CountedView* CfgGrammar::MakeCountedView(std::int32_t rule) const {
  constexpr std::size_t kMaxUnitStates = 64;
  const CfgProgram& p = program_;
  const std::int32_t child = p.rules[rule].child;
  if (p.rules[child].kind != CfgProgram::RuleKind::kDfa || p.rules[child].nullable) return nullptr;
  // The unit's states from its start, numbered in the order met (the same unit in two grammars
  // gives the same table).
  std::vector<StateId> states{p.rules[child].start};
  std::vector<std::int16_t> table;
  std::vector<std::int16_t> finished;
  for (std::size_t i = 0; i < states.size(); ++i) {
    const StateId q = states[i];
    if (p.nt_begin[q] != p.nt_begin[q + 1] || p.sp_begin[q] != p.sp_begin[q + 1]) return nullptr;
    const bool fin = p.accepting[q] != 0;
    if (fin && i == 0) return nullptr;
    finished.push_back(fin ? 1 : 0);
    const std::size_t row = table.size();
    table.resize(row + 256, TokenTrie::kRegionDead);
    for (int b = 0; b < 256; ++b) {
      const StateId t = p.Step(q, static_cast<std::uint8_t>(b));
      if (t == CfgProgram::kDead) continue;
      if (fin) return nullptr;  // the unit could go on after finishing
      auto at = std::find(states.begin(), states.end(), t);
      if (at == states.end()) {
        if (states.size() >= kMaxUnitStates) return nullptr;
        states.push_back(t);
        at = states.end() - 1;
      }
      table[row + b] = static_cast<std::int16_t>(at - states.begin());
    }
  }
  // A byte a unit starts with must not also follow the counter.
  for (int b = 0; b < 256; ++b) {
    if (table[b] != TokenTrie::kRegionDead && follow_[rule][b]) return nullptr;
  }
  table.insert(table.end(), finished.begin(), finished.end());
  return trie_->Counted(table);
}

void CfgGrammar::PositionFromCounted(const TokenTrie::CountedView& view, const EarleyItem& item,
                                     WalkScratch& out) const {
  // What the walk finds, without it: a token ending inside needs room for its units; one
  // leaving between units is a tail where the counter may finish there, its first byte one that
  // can follow the counter.
  const CfgProgram::RuleInfo& r = program_.rules[item.rule];
  const std::int64_t to_min = std::max<std::int64_t>(r.min - item.state, 0);
  const std::int64_t room = r.max == CfgProgram::kUnbounded
                                ? std::numeric_limits<std::int64_t>::max()
                                : static_cast<std::int64_t>(r.max) - item.state;
  OrWords(out.bits.data(), view.inside_bits.data(), std::min(view.inside_bits.size(), out.bits.size()));
  out.accepted = view.inside_count;
  for (std::size_t i = 0; i < view.by_need.size() && view.need[i] > room; ++i) {
    const TokenId t = view.by_need[i];
    out.bits[static_cast<std::size_t>(t) >> 5] &= ~(1u << (t & 31));
    --out.accepted;
  }
  const std::array<bool, 256>& follow = follow_[item.rule];
  auto e = std::lower_bound(view.exits.begin(), view.exits.end(), to_min,
                            [](const TokenTrie::CountedView::Exit& x, std::int64_t k) {
                              return x.units < k;
                            });
  for (; e != view.exits.end() && e->units <= room; ++e) {
    const std::string_view bytes = vocab_->TokenBytes(e->id);
    if (follow[static_cast<std::uint8_t>(bytes[e->offset])]) {
      out.unc.emplace_back(bytes.substr(e->offset), e->id);
    }
  }
}

std::int32_t CfgGrammar::ComposableCall(StateId s) const {
  const CfgProgram& p = program_;
  if (p.has_bytes[s] || p.accepting[s] || null_state_[s] || p.sp_begin[s] != p.sp_begin[s + 1] ||
      p.nt_begin[s + 1] - p.nt_begin[s] != 1 || repeat_of_[s] >= 0) {
    return -1;
  }
  const std::int32_t callee = p.nt_edges[p.nt_begin[s]].first;
  if (callee == p.state_rule[s] || p.rules[callee].nullable) return -1;
  return callee;
}

std::unique_ptr<CfgPosition> CfgGrammar::ComputePosition(const EarleyItem& item, bool regions) const {
  const bool counter = program_.IsCounter(item.rule);
  // A state whose only way on is one call (a member's value: `"id":` then an integer rule, an
  // object rule): its position is the callee's start position (computed once, shared by every
  // call site and grammar) plus the callee's tails walked on from the state after the call.
  // A token either stays inside the callee (accepted there, so here too) or leaves it at a
  // split where the callee may finish on a byte that can follow it, which is exactly a tail of
  // the callee's position: walking the tails' tries from the return state replaces a walk of
  // the whole trie through the call. Nested calls compose the same way, a few levels deep.
  const CfgPosition* callee_pos = nullptr;
  StateId return_state = CfgProgram::kDead;
  thread_local std::int32_t compose_depth = 0;
  if (!counter && regions && compose_depth < kMaxComposeDepth) {
    if (const std::int32_t callee = ComposableCall(item.state); callee >= 0) {
      ++compose_depth;
      callee_pos = PositionFor(
          {callee, program_.IsCounter(callee) ? 0 : program_.rules[callee].start, 0, 0});
      --compose_depth;
      return_state = program_.nt_edges[program_.nt_begin[item.state]].second;
    }
  }
  thread_local WalkScratch scratch;
  const std::size_t words = PaddedBitmaskWords(width_);
  scratch.Begin(&program_, words, kMaxListedIds);
  if (callee_pos != nullptr && ComposeFromCallee(*callee_pos, item, return_state, scratch)) {
    ++CurrentFillTrace().positions_walked;
    return PositionFromScratch(scratch);
  }
  if (callee_pos != nullptr) scratch.Begin(&program_, words, kMaxListedIds);
  std::vector<StateId> region_states;
  std::vector<std::int16_t> table;
  std::array<std::uint64_t, 4> first_exits, removed;
  if (!counter && regions) table = RegionTable(item.state, region_states, first_exits, removed);
  FillTrace& trace = CurrentFillTrace();
  bool built = false;
  const TokenTrie::RegionView* view =
      table.empty() ? nullptr : trie_->Region(table, *vocab_, &built);
  const TokenTrie::CountedView* counted =
      counter && regions ? counted_views_[item.rule] : nullptr;
  ++trace.positions_walked;
  trace.regions_built += built;
  trace.region_walks += view != nullptr || counted != nullptr;
  if (counted != nullptr) PositionFromCounted(*counted, item, scratch);
  for (; counted == nullptr;) {
    if (view != nullptr) {
      // Tokens inside the region: shared; tokens leaving it: walked from where they leave (no
      // split before: region states cannot finish the rule).
      OrWords(scratch.bits.data(), view->inside_bits.data(),
              std::min(view->inside_bits.size(), words));
      scratch.accepted = view->inside_count;
      for (const auto& g : view->groups) {
        WalkTrie(view->nodes, g.begin, g.end, view->tokens.data(), view->offsets.data(), item,
                 region_states[g.q], scratch);
        if (scratch.stack.failed) break;
      }
      const std::span<const TokenTrie::Node> nodes = trie_->nodes();
      const std::uint32_t none = static_cast<std::uint32_t>(trie_->num_nodes());
      // The view's results for first bytes on which the state differs from the anchor whose
      // row the view starts with: out (their tokens are walked below).
      if (!scratch.stack.failed && (removed[0] | removed[1] | removed[2] | removed[3]) != 0) {
        auto gone = [&](TokenId t) {
          const std::uint8_t b = static_cast<std::uint8_t>(vocab_->TokenBytes(t)[0]);
          return (removed[b >> 6] >> (b & 63)) & 1;
        };
        const TokenId* toks = trie_->tokens().data();
        for (std::uint32_t c = trie_->NextChild(TokenTrie::kRoot, removed.data(), -1, none);
             c != none; c = trie_->NextChild(TokenTrie::kRoot, removed.data(), nodes[c].byte, none)) {
          for (std::uint32_t j = nodes[c].token_begin; j < nodes[nodes[c].subtree_end].token_begin; ++j) {
            std::uint32_t& w = scratch.bits[static_cast<std::size_t>(toks[j]) >> 5];
            const std::uint32_t bit = 1u << (toks[j] & 31);
            if (w & bit) {
              w &= ~bit;
              --scratch.accepted;
            }
          }
        }
        std::erase_if(scratch.ids, gone);
        std::erase_if(scratch.unc, [&](const auto& u) { return gone(u.second); });
      }
      // First bytes that leave the region, or were taken out: their subtrees of the trie, from
      // the state itself.
      for (int w = 0; w < 4; ++w) first_exits[w] |= removed[w];
      for (std::uint32_t c = trie_->NextChild(TokenTrie::kRoot, first_exits.data(), -1, none);
           c != none && !scratch.stack.failed;
           c = trie_->NextChild(TokenTrie::kRoot, first_exits.data(), nodes[c].byte, none)) {
        WalkTrie(nodes, c, nodes[c].subtree_end, trie_->tokens().data(), nullptr, item, item.state,
                 scratch);
      }
    } else {
      WalkTrie(trie_->nodes(), 0, static_cast<std::uint32_t>(trie_->num_nodes()),
               trie_->tokens().data(), nullptr, item, item.state, scratch);
    }
    if (!scratch.stack.failed) break;
    // The stack walk gave up (left recursion, ambiguity): again with the Earley parser.
    scratch.Begin(&program_, words, kMaxListedIds);
    scratch.use_parser = true;
    ++trace.parser_walks;
  }
  return PositionFromScratch(scratch);
}

bool CfgGrammar::ComposeFromCallee(const CfgPosition& callee, const EarleyItem& item,
                                   StateId return_state, WalkScratch& scratch) const {
  const std::size_t words = PaddedBitmaskWords(width_);
  // The callee's tails as a trie the walker reads (the same node layout), each token's offset
  // where its tail starts.
  thread_local std::vector<TokenTrie::Node> nodes;
  thread_local std::vector<std::uint16_t> offsets;
  nodes.clear();
  offsets.assign(callee.tail_tokens.size(), 0);
  for (std::size_t i = 0; i < callee.tails.size(); ++i) {
    const CfgPosition::TailNode& t = callee.tails[i];
    nodes.push_back({t.subtree_end, t.token_begin, t.depth, t.byte});
    if (i + 1 == callee.tails.size()) break;  // (the sentinel)
    for (std::uint32_t j = t.token_begin; j < callee.tails[i + 1].token_begin; ++j) {
      offsets[j] = static_cast<std::uint16_t>(vocab_->TokenBytes(callee.tail_tokens[j]).size() -
                                              t.depth);
    }
  }
  if (nodes.size() > 1) {
    WalkTrie(nodes, 0, static_cast<std::uint32_t>(nodes.size() - 1), callee.tail_tokens.data(),
             offsets.data(), item, return_state, scratch);
    if (scratch.stack.failed) return false;
    if (null_state_[return_state]) {
      // This rule may finish right where the callee does: each callee tail is a tail here too
      // (the walk above records only the splits after a byte of its own).
      const std::array<bool, 256>& follow = follow_[item.rule];
      for (std::size_t j = 0; j < callee.tail_tokens.size(); ++j) {
        const TokenId t = callee.tail_tokens[j];
        const std::string_view rest = vocab_->TokenBytes(t).substr(offsets[j]);
        if (follow[static_cast<std::uint8_t>(rest[0])]) scratch.unc.emplace_back(rest, t);
      }
    }
  }
  // The tokens that stay inside the callee; then each token once: a token accepted either way
  // is accepted, with no tails (a walk of the whole trie would give it none).
  std::vector<std::uint32_t>& bits = scratch.bits;
  if (!callee.accepted_bits.empty()) {
    OrWords(bits.data(), callee.accepted_bits.data(), std::min(callee.accepted_bits.size(), words));
  }
  for (const TokenId t : callee.accepted_list) bits[static_cast<std::size_t>(t) >> 5] |= 1u << (t & 31);
  std::int32_t accepted = 0;
  for (std::size_t w = 0; w < words; ++w) accepted += std::popcount(bits[w]);
  scratch.accepted = accepted;
  scratch.ids.clear();  // (the finished position lists its tokens from the bits)
  std::erase_if(scratch.unc, [&](const std::pair<std::string_view, TokenId>& u) {
    return (bits[static_cast<std::size_t>(u.second) >> 5] >> (u.second & 31)) & 1;
  });
  return true;
}

std::unique_ptr<CfgPosition> CfgGrammar::PositionFromScratch(WalkScratch& scratch) const {
  const std::size_t words = PaddedBitmaskWords(width_);
  auto pos = std::make_unique<CfgPosition>();
  std::vector<std::uint32_t>& bits = scratch.bits;
  std::vector<std::pair<std::string_view, TokenId>>& unc = scratch.unc;
  const std::int32_t accepted = scratch.accepted;
  pos->num_accepted = accepted;
  if (static_cast<std::size_t>(accepted) < words) {
    if (scratch.ids.size() == static_cast<std::size_t>(accepted)) {
      pos->accepted_list = scratch.ids;  // walk order; sorted below
      std::sort(pos->accepted_list.begin(), pos->accepted_list.end());
      pos->accepted_list.erase(std::unique(pos->accepted_list.begin(), pos->accepted_list.end()),
                               pos->accepted_list.end());
    } else {
      for (std::size_t w = 0; w < words; ++w) {
        std::uint32_t x = bits[w];
        while (x != 0) {
          int b = __builtin_ctz(x);
          pos->accepted_list.push_back(static_cast<TokenId>(w * 32 + b));
          x &= x - 1;
        }
      }
    }
  } else {
    pos->accepted_bits = bits;
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
  // Four independent multiply lanes over the bits (a 4,008-word mask in well under a
  // microsecond), then the short lists.
  std::uint64_t lane[4] = {0x84222325CBF29CE4ull, 0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full,
                           0x165667B19E3779F9ull};
  const std::size_t n = accepted_bits.size();
  std::size_t w = 0;
  for (; w + 8 <= n; w += 8) {
    for (int k = 0; k < 4; ++k) {
      const std::uint64_t x = std::uint64_t{accepted_bits[w + 2 * k]} |
                              std::uint64_t{accepted_bits[w + 2 * k + 1]} << 32;
      lane[k] = (lane[k] ^ x) * 0xFF51AFD7ED558CCDull;
    }
  }
  std::uint64_t h = lane[0] ^ (lane[1] >> 7) ^ (lane[2] << 11) ^ (lane[3] >> 17);
  auto mix = [&](std::uint64_t x) {
    h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  };
  for (; w < n; ++w) mix(accepted_bits[w]);
  mix(n);
  for (TokenId t : accepted_list) mix(static_cast<std::uint32_t>(t));
  for (TokenId t : tail_tokens) mix(static_cast<std::uint32_t>(t));
  for (const TailNode& t : tails) mix((std::uint64_t{t.subtree_end} << 32) ^ (t.depth << 8) ^ t.byte);
  return h;
}

const CfgPosition* CfgGrammar::Publish(std::unique_ptr<CfgPosition> pos,
                                       std::shared_ptr<const CfgPosition>* owner) const {
  pos->content_hash = pos->ContentHash();
  return Adopt(std::shared_ptr<const CfgPosition>(std::move(pos)), owner);
}

const CfgPosition* CfgGrammar::Adopt(std::shared_ptr<const CfgPosition> pos,
                                     std::shared_ptr<const CfgPosition>* owner) const {
  // Indexed by content: a position computed twice, or found under two keys, is kept once (and a
  // saved artifact holds each content once).
  std::lock_guard<std::mutex> lock(owned_mu_);
  auto& bucket = by_content_[pos->content_hash];
  for (std::size_t i : bucket) {
    if (owned_[i] == pos || owned_[i]->SameContent(*pos)) {
      if (owner != nullptr) *owner = owned_[i];
      return owned_[i].get();
    }
  }
  if (!ReserveBytes(pos->Bytes())) return nullptr;
  num_positions_.fetch_add(1);
  sum_accepted_.fetch_add(pos->num_accepted);
  sum_uncertain_.fetch_add(pos->num_uncertain);
  bucket.push_back(owned_.size());
  owned_.push_back(std::move(pos));
  if (owner != nullptr) *owner = owned_.back();
  return owned_.back().get();
}

std::optional<PositionKey> CfgGrammar::KeyOf(StateId s, bool may_wait) const {
  if (keys_ready_.load(std::memory_order_acquire)) {
    if (!state_has_key_[s]) return std::nullopt;
    return state_keys_[s];
  }
  // A fill does not wait for the background worker's key pass (it holds the lock for the whole
  // program): it walks its position without a key instead.
  std::unique_lock<std::mutex> lock(key_mu_, std::defer_lock);
  if (may_wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return std::nullopt;
  }
  return KeyLocked(s, kForegroundKeyWork);
}

std::optional<PositionKey> CfgGrammar::KeyLocked(StateId s, std::int64_t max_work) const {
  const std::array<std::uint64_t, 4>& follow = follow_bits_[program_.state_rule[s]];
  if (keyer_) return keyer_->Key(s, follow, max_work);
  // The first key hashes most of the grammar's automata (0.1 ms for a tool schema). The same
  // program compiled before left its keyer in the store: read from it while it knows the
  // state, copy it when it does not.
  SharedPositions& shared = trie_->Attached<SharedPositions>();
  if (!snapshot_looked_up_) {
    snapshot_looked_up_ = true;
    std::lock_guard<std::mutex> lock2(shared.mu);
    auto f = shared.keyers.find(fingerprint_);
    if (f != shared.keyers.end()) key_snapshot_ = f->second;
  }
  if (key_snapshot_) {
    keys_from_store_ = true;
    if (key_snapshot_->Known(s, program_)) return key_snapshot_->KnownKey(s, follow);
    keyer_ = std::make_unique<PositionKeyer>(*key_snapshot_, &program_);
    key_snapshot_.reset();
    return keyer_->Key(s, follow, max_work);
  }
  keyer_ = std::make_unique<PositionKeyer>(&program_);
  std::optional<PositionKey> key = keyer_->Key(s, follow, max_work);
  // Copied for the store only when the store takes it (the copy's size is the keyer's).
  const std::int64_t bytes = keyer_->Bytes();
  std::lock_guard<std::mutex> lock2(shared.mu);
  if (!shared.keyers.contains(fingerprint_) &&
      shared.bytes + bytes <= options_.max_shared_position_bytes) {
    shared.keyers.emplace(fingerprint_, std::make_shared<const PositionKeyer>(*keyer_, nullptr));
    shared.bytes += bytes;
  }
  return key;
}
void CfgGrammar::StoreShared(const PositionKey& key,
                             std::shared_ptr<const CfgPosition> owner) const {
  SharedPositions& shared = trie_->Attached<SharedPositions>();
  const CfgPosition* p = owner.get();
  // A position already held under another key costs nothing more (a 25k-state format
  // automaton folds into a few hundred distinct positions).
  std::lock_guard<std::mutex> lock(shared.mu);
  const bool held = shared.HeldFor(p).count(p) != 0;
  const std::int64_t bytes = held ? 0 : p->Bytes();
  auto& map = shared.MapFor(key);
  if (!map.contains(key) && shared.bytes + bytes <= options_.max_shared_position_bytes) {
    map.emplace(key, std::move(owner));
    if (!held) shared.HeldFor(p).insert(p);
    shared.bytes += bytes;
  }
}

void CfgGrammar::ShareComputed(StateId s) const {
  if (!keys_ready_.load(std::memory_order_acquire) || !state_has_key_[s]) return;
  const CfgPosition* p = dfa_positions_[s].load(std::memory_order_acquire);
  if (p == nullptr) return;
  std::shared_ptr<const CfgPosition> owner;
  {
    std::lock_guard<std::mutex> lock(owned_mu_);
    auto f = by_content_.find(p->content_hash);
    if (f == by_content_.end()) return;
    for (std::size_t i : f->second) {
      if (owned_[i].get() == p) owner = owned_[i];
    }
  }
  if (owner) StoreShared(state_keys_[s], std::move(owner));
}

PositionWorker& CfgGrammar::Worker() const {
  SharedPositions& shared = trie_->Attached<SharedPositions>();
  std::lock_guard<std::mutex> lock(shared.mu);
  if (!shared.worker) shared.worker = std::make_unique<PositionWorker>();
  return *shared.worker;
}

void CfgGrammar::NoteFill(const std::shared_ptr<const CompiledGrammar>& self, bool walked) const {
  if (!background_ || bg_done_.load(std::memory_order_relaxed)) return;
  if (bg_queued_.load(std::memory_order_relaxed) && !walked) return;
  bg_queued_.store(true, std::memory_order_relaxed);
  Worker().Submit(self, this);
}

void CfgGrammar::WaitForBackground() const { Worker().WaitIdle(); }

bool CfgGrammar::BackgroundSlice(double budget_us) const {
  std::lock_guard<std::mutex> lock(bg_mu_);
  if (bg_done_.load(std::memory_order_acquire)) return false;
  const auto start = std::chrono::steady_clock::now();
  if (!bg_started_) {
    bg_started_ = true;
    if (options_.share_positions && TakeProgramPositions()) {
      bg_done_.store(true, std::memory_order_release);
      return false;
    }
    bg_order_ = PrecomputeOrder();
    bg_in_order_.assign(program_.num_states, 0);
    for (StateId s : bg_order_) bg_in_order_[s] = 1;
    if (options_.share_positions) {
      // Every state's key in one pass (a slice of its own; bounded by the keyer's budget).
      std::vector<PositionKey> keys(program_.num_states);
      std::vector<std::uint8_t> has(program_.num_states, 0);
      // The lock is taken per state, so that a fill that needs a key meanwhile (it only tries
      // the lock) gets one between two states instead of walking its position without: on a
      // 25,000-state program the pass takes tens of ms, and a fill at that time walked five
      // positions it would have found in the store (21 ms instead of 3).
      for (StateId s : bg_order_) {
        std::lock_guard<std::mutex> klock(key_mu_);
        if (std::optional<PositionKey> k = KeyLocked(s, INT64_MAX)) keys[s] = *k, has[s] = 1;
      }
      state_keys_ = std::move(keys);
      state_has_key_ = std::move(has);
      keys_ready_.store(true, std::memory_order_release);
      return true;
    }
  }
  auto elapsed_us = [&] {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
        .count();
  };
  if (const StateId h = bg_hint_.exchange(-1, std::memory_order_relaxed); h >= 0) {
    // Where the sequence that just walked goes next: breadth-first from there (a called rule's
    // start included), a bounded neighbourhood, before the global order goes on.
    std::vector<StateId> near = {h};
    std::unordered_set<StateId> seen = {h};
    for (std::size_t i = 0; i < near.size() && near.size() < kHintStates; ++i) {
      ForEachSuccessor(near[i], [&](StateId t, std::int32_t called) {
        for (StateId u : {t, called >= 0 && !program_.IsCounter(called)
                                 ? program_.rules[called].start
                                 : CfgProgram::kDead}) {
          if (u >= 0 && u < program_.num_states && seen.insert(u).second) near.push_back(u);
        }
      });
    }
    for (StateId s : near) {
      if (!bg_in_order_[s] || dfa_positions_[s].load(std::memory_order_acquire) != nullptr) {
        continue;
      }
      if (PositionFor({program_.state_rule[s], s, 0, 0}) == nullptr) break;
      if (elapsed_us() >= budget_us) return true;
    }
  }
  while (bg_next_ < bg_order_.size()) {
    const StateId s = bg_order_[bg_next_++];
    if (dfa_positions_[s].load(std::memory_order_acquire) != nullptr) {
      // Computed by a fill before the keys were known: into the store now.
      if (options_.share_positions) ShareComputed(s);
      continue;
    }
    if (PositionFor({program_.state_rule[s], s, 0, 0}) == nullptr) {
      bg_next_ = bg_order_.size();  // over the cache budget: fills compute the rest exactly
      break;
    }
    if (elapsed_us() >= budget_us) return true;
  }
  if (options_.share_positions) LeaveProgramPositions();
  bg_done_.store(true, std::memory_order_release);
  return false;
}

const CfgPosition* CfgGrammar::PositionFor(const EarleyItem& it) const {
  if (!program_.IsCounter(it.rule)) {
    std::atomic<const CfgPosition*>& slot = dfa_positions_[it.state];
    if (const CfgPosition* p = slot.load(std::memory_order_acquire)) return p;
    if (!fold_rep_.empty() && fold_rep_[it.state] != it.state) {
      // A state no token tells apart from an earlier one of its format automaton: its position.
      EarleyItem rep = it;
      rep.state = fold_rep_[it.state];
      const CfgPosition* p = PositionFor(rep);
      if (p != nullptr) slot.store(p, std::memory_order_release);
      return p;
    }
    // From the vocabulary's shared positions when another grammar computed the same one.
    std::optional<PositionKey> key;
    SharedPositions* shared = nullptr;
    // Not the root's start (the first fill): its automaton is the whole grammar, found in the
    // store only when the same grammar was compiled before, and its key would need a pass over
    // every rule before the first mask. Later fills pay that pass.
    if (options_.share_positions && it.state != program_.rules[program_.root].start) {
      key = KeyOf(it.state, /*may_wait=*/false);
      if (key) {
        shared = &trie_->Attached<SharedPositions>();
        std::shared_ptr<const CfgPosition> found;
        {
          std::lock_guard<std::mutex> lock(shared->mu);
          auto& map = shared->MapFor(*key);
          auto f = map.find(*key);
          if (f != map.end()) found = f->second;
        }
        if (found) {
          ++CurrentFillTrace().positions_shared;
          const CfgPosition* p = Adopt(std::move(found));
          if (p != nullptr) {
            shared_positions_.fetch_add(1);
            slot.store(p, std::memory_order_release);
          }
          return p;
        }
      }
    }
    std::shared_ptr<const CfgPosition> owner;
    const CfgPosition* p = Publish(ComputePosition(it), &owner);
    if (p == nullptr) return p;
    slot.store(p, std::memory_order_release);
    if (shared != nullptr) StoreShared(*key, std::move(owner));
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

bool CfgGrammar::TakeProgramPositions() const {
  SharedPositions& shared = trie_->Attached<SharedPositions>();
  std::shared_ptr<const SharedPositions::ProgramPositions> table;
  {
    std::lock_guard<std::mutex> lock(shared.mu);
    auto f = shared.programs.find(fingerprint_);
    if (f != shared.programs.end()) table = f->second;
  }
  if (!table || table->of_state.size() != static_cast<std::size_t>(program_.num_states)) {
    return false;
  }
  std::vector<const CfgPosition*> adopted(table->positions.size());
  for (std::size_t i = 0; i < adopted.size(); ++i) adopted[i] = Adopt(table->positions[i]);
  for (StateId s = 0; s < program_.num_states; ++s) {
    const std::int32_t i = table->of_state[s];
    if (i >= 0 && adopted[i] != nullptr) {
      dfa_positions_[s].store(adopted[i], std::memory_order_release);
    }
  }
  shared_positions_.fetch_add(static_cast<std::int32_t>(adopted.size()));
  positions_from_program_.store(true);
  return true;
}

void CfgGrammar::LeaveProgramPositions() const {
  SharedPositions& shared = trie_->Attached<SharedPositions>();
  {
    std::lock_guard<std::mutex> lock(shared.mu);
    if (shared.programs.contains(fingerprint_)) return;
  }
  auto table = std::make_shared<SharedPositions::ProgramPositions>();
  table->of_state.assign(program_.num_states, -1);
  {
    std::lock_guard<std::mutex> lock(owned_mu_);
    // By address: (index into owned_, index into the table or -1).
    std::unordered_map<const CfgPosition*, std::pair<std::size_t, std::int32_t>> index;
    for (std::size_t i = 0; i < owned_.size(); ++i) index.try_emplace(owned_[i].get(), i, -1);
    for (StateId s = 0; s < program_.num_states; ++s) {
      const CfgPosition* p = dfa_positions_[s].load(std::memory_order_acquire);
      if (p == nullptr) continue;
      auto f = index.find(p);
      if (f == index.end()) continue;  // (not this grammar's: cannot happen)
      if (f->second.second < 0) {
        f->second.second = static_cast<std::int32_t>(table->positions.size());
        table->positions.push_back(owned_[f->second.first]);
      }
      table->of_state[s] = f->second.second;
    }
  }
  std::lock_guard<std::mutex> lock(shared.mu);
  std::int64_t bytes = static_cast<std::int64_t>(table->of_state.size() * sizeof(std::int32_t) +
                                                 table->positions.size() * 16);
  for (const auto& p : table->positions) {
    if (!shared.HeldFor(p.get()).contains(p.get())) bytes += p->Bytes();
  }
  if (shared.programs.contains(fingerprint_) ||
      shared.bytes + bytes > options_.max_shared_position_bytes) {
    return;
  }
  for (const auto& p : table->positions) shared.HeldFor(p.get()).insert(p.get());
  shared.bytes += bytes;
  shared.programs.emplace(fingerprint_, std::move(table));
}

template <typename F>
void CfgGrammar::ForEachSuccessor(StateId s, F&& f) const {
  const std::int32_t nc = program_.num_classes;
  const StateId* row = program_.next.data() + static_cast<std::size_t>(s) * nc;
  for (std::int32_t c = 0; c < nc; ++c) {
    if (row[c] != CfgProgram::kDead) f(row[c], -1);
  }
  for (std::int32_t e = program_.nt_begin[s]; e < program_.nt_begin[s + 1]; ++e) {
    f(program_.nt_edges[e].second, program_.nt_edges[e].first);
  }
  for (std::int32_t e = program_.sp_begin[s]; e < program_.sp_begin[s + 1]; ++e) {
    f(program_.sp_edges[e].second, -1);
  }
}

std::vector<StateId> CfgGrammar::PrecomputeOrder() const {
  // Kernel items sit in states reached by a transition (and the root's start state), of rules
  // reachable from the root (inlined rules keep automata of their own that nothing uses).
  // Breadth-first from the root's start over byte, rule and special edges (a call goes on to the
  // called rule's start, a counter to its child's): the positions a sequence meets first come
  // first.
  std::vector<std::uint8_t> seen(program_.num_states, 0);
  std::vector<std::uint8_t> rule_seen(program_.NumRules(), 0);
  std::vector<StateId> bfs;
  bfs.reserve(program_.num_states);
  auto push = [&](StateId t) {
    if (t >= 0 && t < program_.num_states && !seen[t]) seen[t] = 1, bfs.push_back(t);
  };
  auto enter = [&](std::int32_t r) {
    // A counter calls its child (a counter of a counter its grandchild...), bounded by rules.
    for (std::int32_t hops = 0; r >= 0 && hops <= program_.NumRules() && !rule_seen[r]; ++hops) {
      rule_seen[r] = 1;
      if (!program_.IsCounter(r)) {
        push(program_.rules[r].start);
        return;
      }
      r = program_.rules[r].child;
    }
  };
  enter(program_.root);
  for (std::size_t i = 0; i < bfs.size(); ++i) {
    ForEachSuccessor(bfs[i], [&](StateId t, std::int32_t called) {
      if (called >= 0) enter(called);
      if (t >= 0) push(t);
    });
  }
  std::vector<std::uint8_t> candidate(program_.num_states, 0);
  candidate[program_.rules[program_.root].start] = 1;
  for (std::size_t i = 0; i < program_.next.size(); ++i) {
    if (program_.next[i] != CfgProgram::kDead) candidate[program_.next[i]] = 1;
  }
  for (const auto& e : program_.nt_edges) candidate[e.second] = 1;
  for (const auto& e : program_.sp_edges) candidate[e.second] = 1;
  std::vector<StateId> order;
  EarleyParser probe(&program_, INT_MAX);
  for (StateId s : bfs) {
    EarleyItem it{program_.state_rule[s], s, 0, 0};
    // A folded state takes its fold's first state's position when first asked.
    if (candidate[s] && FoldedState(s) == s && probe.ItemHasFuture(it)) order.push_back(s);
  }
  return order;
}

Status CfgGrammar::PrecomputePositions(int threads, const CompileDeadline* deadline) const {
  if (options_.share_positions && TakeProgramPositions()) return Status::Ok();
  const std::vector<StateId> todo = PrecomputeOrder();
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<std::size_t> next{0};
  // The first position left uncomputed when the deadline passed (a walk takes microseconds to
  // milliseconds: the clock is read before each).
  std::atomic<std::int64_t> stopped_at{-1};
  auto work = [&] {
    const CompileDeadline d = deadline != nullptr ? *deadline : CompileDeadline();
    for (std::size_t i = next.fetch_add(1); i < todo.size(); i = next.fetch_add(1)) {
      if (stopped_at.load(std::memory_order_relaxed) >= 0) return;
      if (d.PassedNow()) {
        std::int64_t none = -1;
        stopped_at.compare_exchange_strong(none, static_cast<std::int64_t>(i));
        return;
      }
      PositionFor({program_.state_rule[todo[i]], todo[i], 0, 0});
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (const std::int64_t i = stopped_at.load(); i >= 0) {
    const std::string& rule = program_.rules[program_.state_rule[todo[i]]].name;
    return deadline->Error("rule '" + rule + "' (precomputing its masks)");
  }
  if (options_.share_positions) LeaveProgramPositions();
  return Status::Ok();
}

// --- signatures and the finished-mask cache ---------------------------------------------------

std::int32_t CfgGrammar::Signature(const EarleyParser& parser, std::vector<std::int32_t>& sigs,
                                   std::int32_t k) const {
  if (static_cast<std::int32_t>(sigs.size()) > parser.num_sets()) sigs.resize(parser.num_sets());
  if (static_cast<std::int32_t>(sigs.size()) <= k) sigs.resize(k + 1, kUnsigned);
  if (sigs[k] != kUnsigned) return sigs[k];
  // A set's signature names its kernel items with their origins' signatures, so only the sets
  // on k's origin chains are signed (after a long string, its opening set and those below it,
  // not every byte's set).
  thread_local std::vector<std::int32_t> key;  // scratch: no allocation per fill
  thread_local std::vector<std::array<std::int32_t, 4>> items;
  thread_local std::vector<std::int32_t> todo;
  todo.clear();
  todo.push_back(k);
  while (!todo.empty()) {
    const std::int32_t j = todo.back();
    if (sigs[j] != kUnsigned) {
      todo.pop_back();
      continue;
    }
    bool pending = false;
    for (const EarleyItem& it : parser.set(j)) {
      if (!parser.IsKernel(j, it) || it.origin == j || sigs[it.origin] != kUnsigned) continue;
      todo.push_back(it.origin);
      pending = true;
    }
    if (pending) continue;
    todo.pop_back();
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
    sigs[j] = id;
  }
  return sigs[k];
}

const std::uint32_t* CfgGrammar::CachedFinal(std::int32_t sig) const {
  const std::int32_t c = ChunkOf(sig);
  std::atomic<std::uint32_t*>* chunk = final_chunks_[c].load(std::memory_order_acquire);
  if (chunk == nullptr) return nullptr;
  return chunk[sig - ChunkBegin(c)].load(std::memory_order_acquire);
}

// A finished mask is kept in the smallest of four forms (JSON masks are mostly a handful of
// tokens, nearly the whole vocabulary, or the union of a few positions' sets and some tails):
// blob[0] = form, blob[1] = n, then
//   kFinalBits: the mask words;   kFinalList: n allowed ids;   kFinalComplement: n blocked ids;
//   kFinalUnion: blob[2] = m, then m position addresses (two words each), then n more ids.
// Restoring a list form is a memset and n bit writes, cheaper than copying 16 KB from memory
// that has left the cache, and the cache holds several times more signatures per byte. The
// union form restores as the fill itself would without its tail checks, and spares a first
// visit the copy into 16 KB of fresh memory (whose page faults cost more than the rest of the
// fill on a virtual machine). Positions live as long as the grammar, so their addresses hold.
enum : std::uint32_t { kFinalBits = 0, kFinalList = 1, kFinalComplement = 2, kFinalUnion = 3 };
constexpr std::size_t kMaxUnionPositions = 8;

void CfgGrammar::StoreFinal(std::int32_t sig, std::span<const std::uint32_t> mask,
                            std::span<const CfgPosition* const> positions,
                            std::span<const TokenId> added) const {
  const std::int32_t c = ChunkOf(sig);
  std::atomic<std::atomic<std::uint32_t*>*>& cslot = final_chunks_[c];
  std::atomic<std::uint32_t*>* chunk = cslot.load(std::memory_order_acquire);
  if (chunk == nullptr) {
    std::lock_guard<std::mutex> lock(chunk_mu_);
    chunk = cslot.load(std::memory_order_acquire);
    if (chunk == nullptr) {
      chunk = new std::atomic<std::uint32_t*>[ChunkSize(c)];
      for (std::int32_t i = 0; i < ChunkSize(c); ++i) chunk[i].store(nullptr);
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
      if ((w & 7) == 0) {
        const std::size_t next = SkipWords(mask.data(), w, words, flip);
        if (next != w) {
          w = next - 1;
          continue;
        }
      }
      std::uint32_t x = mask[w] ^ flip;
      if (x == 0) continue;
      if (complement && w + 1 == words && (width_ & 31) != 0) x &= (1u << (width_ & 31)) - 1;
      while (x != 0) {
        *dst++ = static_cast<std::uint32_t>(w * 32 + __builtin_ctz(x));
        x &= x - 1;
      }
    }
  } else if (!positions.empty() && positions.size() <= kMaxUnionPositions &&
             added.size() <= words / 2) {
    form = kFinalUnion;
  }
  const std::size_t head = form == kFinalUnion ? 3 + 2 * positions.size() : 2;
  const std::size_t n = form == kFinalBits    ? words
                        : form == kFinalUnion ? added.size()
                                              : ids.size();
  const std::int64_t bytes = static_cast<std::int64_t>((n + head) * 4);
  if (!ReserveBytes(bytes)) return;
  std::uint32_t* p = AllocWords(n + head);
  if (p == nullptr) {
    cache_bytes_.fetch_sub(bytes);
    return;
  }
  p[0] = form;
  p[1] = static_cast<std::uint32_t>(n);
  if (form == kFinalBits) {
    std::memcpy(p + head, mask.data(), words * 4);
  } else if (form == kFinalUnion) {
    p[2] = static_cast<std::uint32_t>(positions.size());
    std::memcpy(p + 3, positions.data(), positions.size() * sizeof(const CfgPosition*));
    if (n != 0) std::memcpy(p + head, added.data(), n * 4);
  } else if (n != 0) {
    std::memcpy(p + head, ids.data(), n * 4);
  }
  std::uint32_t* expected = nullptr;
  if (!chunk[sig - ChunkBegin(c)].compare_exchange_strong(expected, p, std::memory_order_acq_rel)) {
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
    case kFinalUnion: {
      const CfgPosition* positions[kMaxUnionPositions];
      const std::uint32_t m = blob[2];
      std::memcpy(positions, blob + 3, m * sizeof(const CfgPosition*));
      UnionOf(positions, static_cast<std::int32_t>(m), out);
      ids = blob + 3 + 2 * m;
      for (std::uint32_t i = 0; i < n; ++i) out[ids[i] >> 5] |= 1u << (ids[i] & 31);
      return;
    }
    default:
      std::memset(out.data(), 0xFF, words * 4);
      if ((width_ & 31) != 0) out[words - 1] = (1u << (width_ & 31)) - 1;
      for (std::uint32_t i = 0; i < n; ++i) out[ids[i] >> 5] &= ~(1u << (ids[i] & 31));
      return;
  }
}

// --- masks -------------------------------------------------------------------------------------

FillTrace& CurrentFillTrace() {
  thread_local FillTrace trace;
  return trace;
}

const char* FillTrace::Kind() const {
  if (full_walks > 0) return "full walk";
  if (parser_walks > 0) return "parser walk";
  if (regions_built > 0) return "region build";
  if (region_walks > 0) return "region walk";
  if (positions_walked > 0) return "walk";
  if (positions_shared > 0) return "shared";
  if (tail_nodes > 0) return "tails";
  if (restored) return "restore";
  return "union";
}

void CfgGrammar::FullWalkMask(EarleyParser& parser, std::span<std::uint32_t> out) const {
  ++CurrentFillTrace().full_walks;
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

void CfgGrammar::AddEndAndSpecials(EarleyParser& parser, std::span<std::uint32_t> out,
                                   std::vector<TokenId>* added) const {
  const std::int32_t base = parser.num_sets();
  if (parser.CanEnd()) {
    for (TokenId id : vocab_->eos_ids()) {
      if (id >= 0 && id < width_) SetBitRecording(out, id, added);
    }
  }
  for (const auto& [tok, idx] : special_of_token_) {
    if (parser.StepSpecial(idx)) {
      if (tok < width_) SetBitRecording(out, tok, added);
      parser.PopTo(base);
    }
  }
  parser.ClearLimitFlags();
}

void CfgGrammar::UnionOf(const CfgPosition* const* positions, std::int32_t n,
                         std::span<std::uint32_t> out) const {
  const std::size_t words = mask_words();
  // The first bitset is copied, not OR-ed into a cleared mask.
  std::int32_t first_bits = -1;
  for (std::int32_t a = 0; a < n; ++a) {
    if (!positions[a]->accepted_bits.empty()) {
      first_bits = a;
      break;
    }
  }
  if (first_bits >= 0) {
    std::memcpy(out.data(), positions[first_bits]->accepted_bits.data(), words * 4);
  } else {
    std::memset(out.data(), 0, words * 4);
  }
  for (std::int32_t a = 0; a < n; ++a) {
    const CfgPosition* pos = positions[a];
    if (a == first_bits) continue;
    if (!pos->accepted_bits.empty()) {
      OrWords(out.data(), pos->accepted_bits.data(), words);
    } else {
      for (TokenId tok : pos->accepted_list) SetBit(out, tok);
    }
  }
}

// Kernel counter items of one counter and origin with several counts (a counted body that can
// restart at every byte, with a large minimum: counts 1..299 of `([a-z]+){300,400}` after 299
// letters) each have a position of their own, walked with a local parser per count. Their tokens
// all start with a piece of the counter's body predicted in this set, k: so they are the tokens of
// the body's start position, with its tails checked against the real parse after the body
// completes from k (PushCompletion advances every count at once). What a count may do without a
// piece (complete the counter) shows as the kernels its completion left in the set. Exact; one
// position instead of one per count.
void CfgGrammar::GroupCounterKernels(std::int32_t k, std::vector<EarleyItem>& live) const {
  thread_local std::vector<EarleyItem> sorted;
  sorted = live;
  std::sort(sorted.begin(), sorted.end(), [](const EarleyItem& a, const EarleyItem& b) {
    return std::tie(a.rule, a.origin, a.state) < std::tie(b.rule, b.origin, b.state);
  });
  live.clear();
  std::vector<std::int32_t> bodies;  // children already standing in for a group
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t e = i + 1;
    while (e < sorted.size() && sorted[e].rule == sorted[i].rule &&
           sorted[e].origin == sorted[i].origin) {
      ++e;
    }
    const CfgProgram::RuleInfo& r = program_.rules[sorted[i].rule];
    if (r.kind != CfgProgram::RuleKind::kCounter || e - i < kCounterGroup) {
      live.insert(live.end(), sorted.begin() + i, sorted.begin() + e);
    } else if (std::find(bodies.begin(), bodies.end(), r.child) == bodies.end()) {
      // Every count here is below max (ItemHasFuture), so the body is predicted in k.
      bodies.push_back(r.child);
      live.push_back({r.child, program_.rules[r.child].start, k, sorted[i].depth + 1});
    }
    i = e;
  }
}

void CfgGrammar::FillMask(EarleyParser& parser, std::vector<std::int32_t>& sigs,
                          std::span<std::uint32_t> out) const {
  const std::int32_t k = parser.num_sets() - 1;
  std::int32_t deepest = 0;
  for (const EarleyItem& it : parser.set(k)) deepest = std::max(deepest, it.depth);
  // Near the nesting limit (a recursive grammar whose chain of predictions is long: an object of
  // forty optional members, each predicting the next, gives 40 levels a byte): the tokens that
  // could pass it are the long ones, checked against the parse at the end; when even short
  // ones could, the trie is walked with the parse.
  std::int64_t check_from = std::numeric_limits<std::int64_t>::max();
  if (const std::int64_t left = static_cast<std::int64_t>(max_depth_) - deepest; left < depth_margin_) {
    const std::int64_t safe = left / prediction_chain_ - 1;
    if (safe < 8) {
      FullWalkMask(parser, out);
      return;
    }
    check_from = safe + 1;
  }
  const std::size_t words = mask_words();
  // Kernel positions (few: usually one to three). A mask known to be finished never needs a
  // position computed here: its kernels' positions were computed when it was stored.
  thread_local std::vector<EarleyItem> live;
  live.clear();
  std::int32_t counters = 0;
  for (const EarleyItem& it : parser.set(k)) {
    if (!parser.IsKernel(k, it) || !parser.ItemHasFuture(it)) continue;
    live.push_back(it);
    counters += program_.IsCounter(it.rule) ? 1 : 0;
  }
  if (counters >= kCounterGroup) GroupCounterKernels(k, live);
  if (live.size() > kMaxKernels) {
    FullWalkMask(parser, out);  // pathological: exact, slower
    return;
  }
  // (Scratch per thread: a set inside a long list of optional members has a kernel per member.)
  thread_local std::vector<EarleyItem> kernel_items;
  thread_local std::vector<const CfgPosition*> kernel_positions;
  kernel_items.resize(live.size());
  kernel_positions.resize(live.size());
  EarleyItem* kernels = kernel_items.data();
  const CfgPosition** positions = kernel_positions.data();
  std::int32_t nk = 0;
  const std::int32_t walked_before = CurrentFillTrace().positions_walked;
  for (const EarleyItem& it : live) {
    const CfgPosition* pos = PositionFor(it);
    if (background_ && CurrentFillTrace().positions_walked != walked_before &&
        !program_.IsCounter(it.rule)) {
      bg_hint_.store(it.state, std::memory_order_relaxed);
    }
    if (pos == nullptr) {
      FullWalkMask(parser, out);  // over the cache budget: exact, slower
      return;
    }
    kernels[nk] = it;
    positions[nk] = pos;
    ++nk;
  }
  // A few positions and no tails to check (most fills): the mask is their accepted sets' union
  // plus the end and special tokens, a copy and an OR or two, about what restoring a cached copy
  // would cost, so it is neither looked up nor stored (storing counts, lists and copies the mask).
  bool simple = nk <= kMaxUncachedKernels;
  for (std::int32_t a = 0; a < nk && simple; ++a) simple = positions[a]->tails.size() <= 1;
  std::int32_t sig = -1;
  if (!simple) {
    sig = Signature(parser, sigs, k);
    if (sig >= 0) {
      if (const std::uint32_t* m = CachedFinal(sig)) {
        CurrentFillTrace().restored = true;
        RestoreFinal(m, out);
        return;
      }
    }
  }
  UnionOf(positions, nk, out);
  // The ids the tails and the end add to the union, for the finished mask's union form.
  thread_local std::vector<TokenId> added;
  added.clear();
  const bool record = !simple && sig >= 0;
  const std::int32_t base = parser.num_sets();
  for (std::int32_t a = 0; a < nk; ++a) {
    const CfgPosition* pos = positions[a];
    if (pos->tails.size() <= 1) continue;
    const EarleyItem it = kernels[a];
    if (!parser.PushCompletion(it.rule, it.origin)) continue;
    const std::uint32_t n = static_cast<std::uint32_t>(pos->tails.size() - 1);
    std::uint32_t i = 0;
    CurrentFillTrace().tail_nodes += static_cast<std::int32_t>(n);
    while (i < n) {
      const CfgPosition::TailNode& node = pos->tails[i];
      parser.PopTo(base + node.depth);
      if (!parser.StepByte(node.byte)) {
        i = node.subtree_end;
        continue;
      }
      for (std::uint32_t t = node.token_begin; t < pos->tails[i + 1].token_begin; ++t) {
        SetBitRecording(out, pos->tail_tokens[t], record ? &added : nullptr);
      }
      ++i;
    }
    parser.PopTo(base);
  }
  AddEndAndSpecials(parser, out, record ? &added : nullptr);
  if (check_from != std::numeric_limits<std::int64_t>::max()) {
    ClearTooDeep(parser, check_from, out);
    if (record) StoreFinal(sig, out.first(words));  // (no longer the positions' union)
    return;
  }
  if (record) StoreFinal(sig, out.first(words), {positions, static_cast<std::size_t>(nk)}, added);
}

void CfgGrammar::ClearTooDeep(EarleyParser& parser, std::int64_t min_len,
                              std::span<std::uint32_t> out) const {
  const TokenTrie::ByLength& by_length = trie_->LongestFirst();
  const std::int32_t base = parser.num_sets();
  for (std::size_t i = 0; i < by_length.ids.size() && by_length.lengths[i] >= min_len; ++i) {
    const TokenId t = by_length.ids[i];
    std::uint32_t& w = out[static_cast<std::size_t>(t) >> 5];
    const std::uint32_t bit = 1u << (t & 31);
    if ((w & bit) == 0) continue;
    bool ok = true;
    for (const char c : vocab_->TokenBytes(t)) {
      if (!parser.StepByte(static_cast<std::uint8_t>(c))) {
        ok = false;
        break;
      }
    }
    parser.PopTo(base);
    if (!ok) w &= ~bit;
  }
}

CfgStats CfgGrammar::Stats() const {
  CfgStats s;
  s.rules = program_.NumRules();
  for (const auto& r : program_.rules) s.counter_rules += r.kind == CfgProgram::RuleKind::kCounter;
  s.states = program_.num_states;
  s.byte_classes = program_.num_classes;
  s.positions = num_positions_.load();
  s.shared_positions = shared_positions_.load();
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
