// CfgGrammar (cfg_grammar.h): construction (follow sets, repetition edges, folds of big format
// automata, counted views, the nesting bounds) and statistics. The rest of the class is in three
// units: position_walk.cc (a position computed by a walk of the token trie), position_store.cc
// (positions kept, shared across grammars, precomputed, in the background) and mask_cache.cc
// (signatures, finished masks, the fill).
#include "automata/cfg/cfg_grammar.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "automata/cfg/rule_edges.h"
#include "automata/cfg/state_fold.h"
#include "automata/cfg/word_kernels.h"

namespace lockstep {
using namespace cfg_words;  // NOLINT: the word kernels of this folder

namespace {

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

// Byte sets as 4 words: merging is 4 ORs (ComputeFollow runs at every compile, on every state).
using ByteBits = std::array<std::uint64_t, 4>;

bool MergeBits(ByteBits& into, const ByteBits& from) {
  bool changed = false;
  for (int w = 0; w < 4; ++w) {
    const std::uint64_t v = into[w] | from[w];
    changed |= v != into[w];
    into[w] = v;
  }
  return changed;
}

// First bytes, per state (returned) and per rule (*first_rule): first_state[s] holds s's own
// bytes, first_rule[r] of each edge s -r-> t, and first_state[t] when r is nullable;
// first_rule[r] is first_state[start] (a DFA rule) or first_rule[child] (a counter). A worklist
// whose nodes are the states 0..ns-1, then the rules ns..ns+nr-1.
std::vector<ByteBits> FirstBytes(const CfgProgram& p, const RuleEdgeIndex& edges,
                                 const RuleStarts& starts,
                                 const std::vector<ByteBits>& class_bytes,
                                 std::vector<ByteBits>* first_rule_out) {
  const std::int32_t ns = p.num_states, nr = p.NumRules();
  const bool recorded = p.byte_first.size() == static_cast<std::size_t>(ns);
  std::vector<ByteBits> first_state = recorded ? p.byte_first : std::vector<ByteBits>(ns);
  if (!recorded) {
    for (StateId s = 0; s < ns; ++s) {  // a program read from an artifact: from the table
      const TransitionRow row = p.Row(s);
      for (std::int32_t c = 0; c < p.num_classes; ++c) {
        if (row[c] != CfgProgram::kDead) MergeBits(first_state[s], class_bytes[c]);
      }
    }
  }
  std::vector<ByteBits>& first_rule = *first_rule_out;
  first_rule.assign(nr, ByteBits{});
  std::vector<std::uint8_t> queued(static_cast<std::size_t>(ns) + nr, 1);
  std::vector<std::int32_t> work;
  for (std::int32_t r = nr - 1; r >= 0; --r) work.push_back(ns + r);
  for (StateId s = ns - 1; s >= 0; --s) work.push_back(s);
  auto push = [&](std::int32_t node) {
    if (!queued[node]) queued[node] = 1, work.push_back(node);
  };
  while (!work.empty()) {
    const std::int32_t node = work.back();
    work.pop_back();
    queued[node] = 0;
    if (node < ns) {
      const StateId t = node;
      for (std::uint32_t i = edges.by_target_begin[t]; i < edges.by_target_begin[t + 1]; ++i) {
        const auto [s, r] = edges.by_target[i];
        if (p.rules[r].nullable && MergeBits(first_state[s], first_state[t])) push(s);
      }
      for (std::int32_t r = starts.first_at_state[t]; r >= 0; r = starts.next[r]) {
        if (MergeBits(first_rule[r], first_state[t])) push(ns + r);
      }
    } else {
      const std::int32_t r = node - ns;
      for (std::uint32_t i = edges.by_rule_begin[r]; i < edges.by_rule_begin[r + 1]; ++i) {
        const StateId s = edges.by_rule[i].first;
        if (MergeBits(first_state[s], first_rule[r])) push(s);
      }
      for (std::int32_t c = starts.first_counter_of[r]; c >= 0; c = starts.next[c]) {
        if (MergeBits(first_rule[c], first_rule[r])) push(ns + c);
      }
    }
  }
  return first_state;
}

// Follow bytes of each rule: first_state[t] of each edge s -r-> t, and the follow bytes of s's
// rule when t is nullable; a repeated child (a counter with max > 0) is followed by its own
// first bytes and by what follows the counter. A worklist over the rules.
std::vector<ByteBits> FollowBytes(const CfgProgram& p, const RuleEdgeIndex& edges,
                                  const std::vector<std::uint8_t>& null_state,
                                  const std::vector<ByteBits>& first_state,
                                  const std::vector<ByteBits>& first_rule) {
  const std::int32_t nr = p.NumRules();
  std::vector<ByteBits> follow(nr, ByteBits{});
  for (std::int32_t r = 0; r < nr; ++r) {
    for (std::uint32_t i = edges.by_rule_begin[r]; i < edges.by_rule_begin[r + 1]; ++i) {
      MergeBits(follow[r], first_state[edges.by_rule[i].second]);
    }
    const auto& ri = p.rules[r];
    if (ri.kind == CfgProgram::RuleKind::kCounter && ri.max != 0) {
      MergeBits(follow[ri.child], first_rule[ri.child]);
    }
  }
  // Dependents of follow[q]: the rules r of edges s -r-> t with t nullable and q the rule of s
  // (and, below, the child of a counter q with max > 0).
  std::vector<std::uint32_t> dep_begin(static_cast<std::size_t>(nr) + 1, 0);
  for (std::size_t i = 0; i < edges.by_rule.size(); ++i) {
    const auto [s, t] = edges.by_rule[i];
    if (null_state[t]) ++dep_begin[p.state_rule[s] + 1];
  }
  for (std::int32_t r = 0; r < nr; ++r) dep_begin[r + 1] += dep_begin[r];
  std::vector<std::int32_t> deps(dep_begin[nr]);
  std::vector<std::uint32_t> at(dep_begin.begin(), dep_begin.end() - 1);
  for (std::int32_t r = 0; r < nr; ++r) {
    for (std::uint32_t i = edges.by_rule_begin[r]; i < edges.by_rule_begin[r + 1]; ++i) {
      const auto [s, t] = edges.by_rule[i];
      if (null_state[t]) deps[at[p.state_rule[s]]++] = r;
    }
  }
  std::vector<std::uint8_t> queued(nr, 1);
  std::vector<std::int32_t> work;
  for (std::int32_t r = nr - 1; r >= 0; --r) work.push_back(r);
  auto push = [&](std::int32_t r) {
    if (!queued[r]) queued[r] = 1, work.push_back(r);
  };
  while (!work.empty()) {
    const std::int32_t q = work.back();
    work.pop_back();
    queued[q] = 0;
    const ByteBits from = follow[q];
    for (std::uint32_t i = dep_begin[q]; i < dep_begin[q + 1]; ++i) {
      if (MergeBits(follow[deps[i]], from)) push(deps[i]);
    }
    const auto& ri = p.rules[q];
    if (ri.kind == CfgProgram::RuleKind::kCounter && ri.max != 0 &&
        MergeBits(follow[ri.child], from)) {
      push(ri.child);
    }
  }
  return follow;
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

std::uint64_t CfgGrammar::NextSerial() {
  static std::atomic<std::uint64_t> next{0};
  return ++next;
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
      is_eos_(EosFlags(*vocab_)),
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
  unique_search_budget_ = std::max<std::int64_t>(options.max_unique_search_bytes, 0);
  for (std::int32_t s = 0; s < program_.num_states; ++s) dfa_positions_[s].store(nullptr);
  for (std::int32_t c = 0; c < kNumChunks; ++c) final_chunks_[c].store(nullptr);
  for (std::int32_t r = 0; r < program_.NumRules() && !program_.max_min_chars.empty(); ++r) {
    if (program_.rules[r].max_chars < 0) continue;
    counted_open_safe_ =
        std::min<std::int64_t>(counted_open_safe_, std::int64_t{program_.rules[r].max_chars} -
                                                       program_.max_min_chars[r] + 1);
  }
  if (program_.HasUniqueItems()) {
    // The rules a unique-items list may have under way below it (FilterUniqueItems' search for
    // the open lists goes up through these only): the lists and what they reach.
    const std::int32_t nr = program_.NumRules();
    std::vector<std::vector<std::int32_t>> refs(static_cast<std::size_t>(nr));
    for (StateId st = 0; st < program_.num_states; ++st) {
      for (std::int32_t e = program_.nt_begin[st]; e < program_.nt_begin[st + 1]; ++e)
        refs[program_.state_rule[st]].push_back(program_.nt_edges[e].first);
    }
    list_runs_out_.assign(static_cast<std::size_t>(nr), 0);
    std::vector<std::uint8_t> item_runs_out(static_cast<std::size_t>(nr), 0);
    for (std::int32_t a = 0; a < static_cast<std::int32_t>(program_.item_automaton_of.size()); ++a)
      if (program_.item_automaton_of[a] >= 0) item_runs_out[program_.item_automaton_of[a]] = 1;
    list_counted_.assign(static_cast<std::size_t>(nr), 0);
    list_open_calls_.assign(static_cast<std::size_t>(nr), 0);
    list_search_.assign(static_cast<std::size_t>(nr), 0);
    for (std::int32_t r = 0; r < nr; ++r) {
      const std::int32_t item = program_.rules[r].unique_item;
      // (Items of any type run out only along a literal: FilterUniqueItems sees to those.)
      if (item >= 0 && item_runs_out[item] && !program_.rules[r].unique_open_calls)
        list_runs_out_[r] = 1;
      if (item >= 0 && program_.rules[item].max_chars >= 0) list_counted_[r] = 1;
      if (item >= 0 && program_.rules[r].unique_open_calls) list_open_calls_[r] = 1;
      if (item >= 0 && program_.rules[r].unique_search) list_search_[r] = 1, has_search_lists_ = true;
    }
    in_unique_list_.assign(static_cast<std::size_t>(nr), 0);
    std::vector<std::int32_t> work;
    for (std::int32_t r = 0; r < nr; ++r) {
      if (program_.rules[r].unique_item >= 0) in_unique_list_[r] = 1, work.push_back(r);
    }
    while (!work.empty()) {
      const std::int32_t r = work.back();
      work.pop_back();
      std::vector<std::int32_t> next = refs[r];
      if (program_.IsCounter(r)) next.push_back(program_.rules[r].child);
      for (std::int32_t t : next)
        if (!in_unique_list_[t]) in_unique_list_[t] = 1, work.push_back(t);
    }
  }
  for (std::size_t i = 0; i < program_.special_tokens.size(); ++i) {
    const auto edge = static_cast<std::int32_t>(i);
    if (program_.SpecialNegated(edge)) {
      all_but_token_.emplace_back(program_.special_tokens[i], edge);
    } else {
      special_of_token_.emplace_back(program_.special_tokens[i], edge);
    }
  }
  if (!all_but_token_.empty()) {
    negatable_bits_.assign(mask_words(), 0);
    for (TokenId t = 0; t < vocab_->size() && t < width_; ++t) {
      if (vocab_->Kind(t) != TokenKind::kUnused && !IsEos(t)) {
        negatable_bits_[t >> 5] |= 1u << (t & 31);
      }
    }
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
  // Three least fixpoints over the rule edges, each by a worklist over the edges read backwards
  // (linear in states and edges, up to the 256 bits a set can gain): a round-robin rescan until
  // nothing changed took about 3, 5 and 11 passes over every state per compile on real-world
  // schemas (one per level of rule nesting the information had to climb).
  const RuleEdgeIndex edges = ProgramRuleEdges(p);
  const RuleStarts starts(p, static_cast<std::size_t>(p.num_states));
  // null_state[s]: from s the rule can finish without consuming a byte (accepting, or a rule
  // edge over a nullable rule to such a state). The rules' nullability is already a fixpoint.
  null_state_.assign(p.num_states, 0);
  for (StateId s = 0; s < p.num_states; ++s) null_state_[s] = p.accepting[s] != 0;
  std::vector<std::uint8_t> null_rule(static_cast<std::size_t>(p.NumRules()));
  for (std::int32_t r = 0; r < p.NumRules(); ++r) null_rule[r] = p.rules[r].nullable;
  CloseOverEdges(edges, starts, {}, {}, null_state_, null_rule, [] { return false; });
  plain_state_.assign(p.num_states, 0);
  for (StateId s = 0; s < p.num_states; ++s) {
    plain_state_[s] = p.nt_begin[s] == p.nt_begin[s + 1] && null_state_[s] == 0;
  }
  // The bytes of each byte class.
  std::vector<ByteBits> class_bytes(p.num_classes, ByteBits{});
  for (int b = 0; b < 256; ++b) class_bytes[p.byte_class[b]][b >> 6] |= std::uint64_t{1} << (b & 63);
  std::vector<ByteBits> first_rule;
  std::vector<ByteBits> first_state = FirstBytes(p, edges, starts, class_bytes, &first_rule);
  const std::vector<ByteBits> follow = FollowBytes(p, edges, null_state_, first_state, first_rule);
  first_bytes_ = std::move(first_state);
  first_count_.resize(first_bytes_.size());
  for (std::size_t k = 0; k < first_bytes_.size(); ++k) {
    int n = 0;
    for (const std::uint64_t w : first_bytes_[k]) n += cfg_words::CountOnes64(w);
    first_count_[k] = static_cast<std::uint16_t>(n);
  }
  class_size_.assign(p.num_classes, 0);
  for (int b = 0; b < 256; ++b) ++class_size_[p.byte_class[b]];
  for (int b = 0; b < 256; ++b) {
    const std::int32_t c = p.byte_class[b];
    if (std::find(class_order_.begin(), class_order_.end(), c) == class_order_.end()) {
      class_order_.push_back(c);
    }
  }
  for (int b = 0; b < 256; ++b) {
    const std::int32_t c = p.byte_class[b];
    if (!class_runs_.empty() && class_runs_.back().second == c) {
      class_runs_.back().first = static_cast<std::uint8_t>(b);
    } else {
      class_runs_.emplace_back(static_cast<std::uint8_t>(b), c);
    }
  }
  ComputeRepeatEdges(class_bytes);
  follow_bits_.assign(follow.begin(), follow.end());
  follow_.assign(p.NumRules(), std::array<bool, 256>{});
  for (std::int32_t r = 0; r < p.NumRules(); ++r) {
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
    const TransitionRow row = p.Row(s0);
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
    const TransitionRow row = p.Row(after);
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

bool CfgGrammar::TokenEdgesTaking(TokenId id, std::vector<std::uint8_t>* take) const {
  take->assign(program_.special_tokens.size(), 0);
  bool any = false;
  for (const auto& [tok, edge] : special_of_token_) {
    if (tok == id) (*take)[edge] = 1, any = true;
  }
  if (all_but_token_.empty() || id < 0 || id >= width_ ||
      ((negatable_bits_[id >> 5] >> (id & 31)) & 1) == 0) {
    return any;
  }
  for (const auto& [tok, edge] : all_but_token_) {
    if (tok != id) (*take)[edge] = 1, any = true;
  }
  return any;
}

bool CfgGrammar::ReserveBytes(std::int64_t n) const {
  if (cache_bytes_.fetch_add(n) + n > options_.max_mask_cache_bytes) {
    cache_bytes_.fetch_sub(n);
    return false;
  }
  return true;
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
  s.source_ms = source_ms_;
  s.tables_ms = tables_ms_;
  return s;
}

const CfgGrammar* CfgOf(const CompiledGrammar& g) {
  return dynamic_cast<const CfgGrammar*>(&GrammarAccess::Automaton(g));
}

void CfgGrammar::PrecomputeAllMasks() const {
  static_cast<void>(PrecomputePositions(0));  // without a deadline it cannot fail
}

CompiledGrammarStats CfgGrammar::CompiledStats() const {
  const CfgStats c = Stats();
  CompiledGrammarStats s;
  s.is_grammar = true;
  s.dfa_states = c.states;
  s.byte_classes = c.byte_classes;
  s.compile_ms = c.compile_ms;
  s.source_ms = c.source_ms;
  s.tables_ms = c.tables_ms;
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

}  // namespace lockstep
