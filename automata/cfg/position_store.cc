// CfgGrammar's positions kept (cfg_grammar.h): owned once per content, looked up in and stored
// to the vocabulary's shared store under their keys, taken whole from a program table,
// precomputed on threads, and computed ahead by the background worker.
#include "automata/cfg/cfg_grammar.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>
#include <thread>
#include <unordered_map>

#include "automata/cfg/word_kernels.h"

namespace lockstep {
using namespace cfg_words;  // NOLINT: the word kernels of this folder

namespace {
// What the fill running on this thread may still hash for keys (CfgGrammar::FillKeyBudget);
// -1 outside fills.
thread_local std::int64_t t_fill_key_work_left = -1;
}  // namespace

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
  const bool had_keyer = keyer_ != nullptr;
  const std::int64_t before = had_keyer ? keyer_->work() : 0;
  const bool root_start = s == program_.rules[program_.root].start;
  const std::int64_t rule_work = root_start ? kFirstFillKeyWork : kForegroundKeyWork;
  // Inside a fill, what is left of the fill's bound (FillKeyBudget); elsewhere (the background
  // worker, a precompute) each key's.
  const bool counted = !root_start && t_fill_key_work_left >= 0;
  const std::int64_t max_work = counted ? std::min(rule_work, t_fill_key_work_left) : rule_work;
  std::optional<PositionKey> key = KeyLocked(s, max_work, rule_work);
  // (A keyer copied from the store's snapshot starts with the snapshot's work: not this call's.)
  const std::int64_t done =
      keyer_ && (had_keyer || !keys_from_store_) ? keyer_->work() - before : 0;
  if (counted) t_fill_key_work_left = std::max<std::int64_t>(0, t_fill_key_work_left - done);
  CurrentFillTrace().key_states += static_cast<std::int32_t>(done);
  return key;
}

CfgGrammar::FillKeyBudget::FillKeyBudget() : saved_(t_fill_key_work_left) {
  t_fill_key_work_left = kForegroundKeyWork;
}

CfgGrammar::FillKeyBudget::~FillKeyBudget() { t_fill_key_work_left = saved_; }

std::optional<PositionKey> CfgGrammar::KeyLocked(StateId s, std::int64_t max_work,
                                                 std::int64_t rule_work) const {
  const std::array<std::uint64_t, 4>& follow = follow_bits_[program_.state_rule[s]];
  if (keyer_) return keyer_->Key(s, follow, max_work, rule_work);
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
    return keyer_->Key(s, follow, max_work, rule_work);
  }
  keyer_ = std::make_unique<PositionKeyer>(&program_);
  std::optional<PositionKey> key = keyer_->Key(s, follow, max_work, rule_work);
  // Copied for the store only when the store takes it (the copy's size is the keyer's), and
  // outside the store's lock: a big program's keyer is megabytes, and every fill's store
  // lookup waits on that lock (keyer_ itself is under key_mu_, which the caller holds).
  const std::int64_t bytes = keyer_->Bytes();
  auto fits = [&] {
    return !shared.keyers.contains(fingerprint_) &&
           shared.bytes + bytes <= options_.max_shared_position_bytes;
  };
  {
    std::lock_guard<std::mutex> lock2(shared.mu);
    if (!fits()) return key;
  }
  auto copy = std::make_shared<const PositionKeyer>(*keyer_, nullptr);
  std::lock_guard<std::mutex> lock2(shared.mu);
  if (fits()) {
    shared.keyers.emplace(fingerprint_, std::move(copy));
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
  if (!background_) return;
  if (bg_done_.load(std::memory_order_relaxed) &&
      !(walked && bg_counter_hint_.load(std::memory_order_relaxed) >= 0)) {
    return;
  }
  if (bg_queued_.load(std::memory_order_relaxed) && !walked) return;
  bg_queued_.store(true, std::memory_order_relaxed);
  Worker().Submit(self, this);
}

void CfgGrammar::WaitForBackground() const { Worker().WaitIdle(); }

bool CfgGrammar::BackgroundSlice(double budget_us) const {
  std::lock_guard<std::mutex> lock(bg_mu_);
  const auto start = std::chrono::steady_clock::now();
  if (CountersAhead(start, budget_us)) return true;
  if (bg_done_.load(std::memory_order_acquire)) return false;
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
        PositionWorker::YieldToFills();
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
      PositionWorker::YieldToFills();
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
    PositionWorker::YieldToFills();
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

bool CfgGrammar::CountersAhead(const std::chrono::steady_clock::time_point& start,
                               double budget_us) const {
  if (const std::int64_t h = bg_counter_hint_.exchange(-1, std::memory_order_relaxed); h >= 0) {
    bg_counter_rule_ = static_cast<std::int32_t>(h >> 32);
    const std::int64_t count = static_cast<std::uint32_t>(h & 0xffffffff);
    const CfgProgram::RuleInfo& r = program_.rules[bg_counter_rule_];
    bg_counter_next_ = count + 1;
    bg_counter_last_ = std::min<std::int64_t>(
        {count + kCounterAhead, INT32_MAX,
         r.max == CfgProgram::kUnbounded ? INT32_MAX : std::int64_t{r.max}});
  }
  while (bg_counter_next_ <= bg_counter_last_) {
    const std::int32_t c = static_cast<std::int32_t>(bg_counter_next_++);
    PositionWorker::YieldToFills();
    if (PositionFor({bg_counter_rule_, c, 0, 0}) == nullptr) {
      bg_counter_last_ = -1;  // over the cache budget: fills compute the rest exactly
      break;
    }
    if (bg_counter_next_ <= bg_counter_last_ &&
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count() >= budget_us) {
      return true;
    }
  }
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
    // The root's start too (the first fill): its key hashes the root rule and the rules it
    // calls (up to kFirstFillKeyWork states), which every later fill's key needs. Paid in the
    // first mask (0.05-0.1 ms for a tool schema), where a host has its prefill's time, rather
    // than in the second, which has to fit between two decoding steps (the Glaive dev set, one
    // thread: per-mask p99 about 100 -> 65 us; the pass adds about 70 us to the first mask's
    // p50). The position itself is found in the store only when the same grammar was compiled
    // before.
    if (options_.share_positions) {
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
    // The owned positions copied under the lock, indexed outside it: a fill publishing or
    // adopting a position takes owned_mu_, and the index of a big grammar's thousands of
    // positions takes milliseconds.
    std::vector<std::shared_ptr<const CfgPosition>> owned;
    {
      std::lock_guard<std::mutex> lock(owned_mu_);
      owned = owned_;
    }
    // By address: (index into owned, index into the table or -1).
    std::unordered_map<const CfgPosition*, std::pair<std::size_t, std::int32_t>> index;
    for (std::size_t i = 0; i < owned.size(); ++i) index.try_emplace(owned[i].get(), i, -1);
    for (StateId s = 0; s < program_.num_states; ++s) {
      const CfgPosition* p = dfa_positions_[s].load(std::memory_order_acquire);
      if (p == nullptr) continue;
      auto f = index.find(p);
      if (f == index.end()) continue;  // (published after the copy: left out of the table)
      if (f->second.second < 0) {
        f->second.second = static_cast<std::int32_t>(table->positions.size());
        table->positions.push_back(owned[f->second.first]);
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
  const TransitionRow row = program_.Row(s);
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

}  // namespace lockstep
