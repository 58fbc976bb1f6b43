// CfgGrammarPeer: what tests and benchmarks look into a CfgGrammar for, kept out of its public
// interface. Each question compares a fast path with a slow one (a cached or composed position
// against a fresh walk of the whole trie, a counted view against a walk, a stored key against a
// fresh keyer's) or reports where a grammar's tables came from.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "automata/cfg/cfg_grammar.h"

namespace lockstep {

class CfgGrammarPeer {
 public:
  explicit CfgGrammarPeer(const CfgGrammar& g) : g_(g) {}

  // The bounds on a fill's hashing for keys (states).
  static constexpr std::int64_t kFirstFillKeyWork = CfgGrammar::kFirstFillKeyWork;
  static constexpr std::int64_t kForegroundKeyWork = CfgGrammar::kForegroundKeyWork;

  // The position of DFA state s through the caches (shared positions included), and the same
  // computed afresh by a walk of the token trie.
  const CfgPosition* PositionOfState(StateId s) const {
    return g_.PositionFor({g_.program_.state_rule[s], s, 0, 0});
  }
  std::unique_ptr<CfgPosition> FreshPositionOfState(StateId s) const {
    return g_.ComputePosition({g_.program_.state_rule[s], s, 0, 0});
  }
  // The same by a walk of the whole trie, no region view, and how the position of s uses a
  // view: 0 not at all, 1 a view, 2 a view with first bytes taken out or followed beside it.
  std::unique_ptr<CfgPosition> TrieWalkedPositionOfState(StateId s) const {
    return g_.ComputePosition({g_.program_.state_rule[s], s, 0, 0}, /*regions=*/false);
  }
  int RegionUseOfState(StateId s) const { return g_.RegionUseOfState(s); }
  // The anchors whose loop the grammar keeps (CfgGrammar::AnchorRegion).
  std::size_t AnchorRegionsKept() const {
    std::lock_guard<std::mutex> lock(g_.anchor_mu_);
    return g_.anchor_regions_.size();
  }
  // The table of the region view the position of s uses (empty: none).
  std::vector<std::int16_t> RegionTableOfState(StateId s) const {
    std::vector<StateId> states;
    std::array<std::uint64_t, 4> first_exits, removed;
    std::vector<CfgGrammar::ViewLeaf> leaves;
    return TokenTrie::TableOfRuns(g_.RegionPlan(s, states, first_exits, removed, leaves));
  }
  // For a position of s from a view: the first bytes whose subtrees are taken out of the view's
  // results whole, those below which s's path is followed beside the view's
  // (CfgGrammar::FollowBesideView), and the token prefixes of the trie nodes where the two part
  // (taken out there); empty otherwise.
  struct RegionCuts {
    std::vector<std::uint8_t> first_bytes, followed;
    std::vector<std::string> prefixes;
  };
  RegionCuts RegionCutsOfState(StateId s) const {
    std::vector<StateId> states;
    std::array<std::uint64_t, 4> first_exits, removed;
    std::vector<CfgGrammar::ViewLeaf> leaves;
    RegionCuts cuts;
    if (g_.RegionPlan(s, states, first_exits, removed, leaves).empty()) return cuts;
    CfgGrammar::RegionFollow follow;
    std::array<std::uint64_t, 4> unused_exits, unused_removed;
    g_.RegionRuns(s, states, unused_exits, unused_removed, follow);
    for (int b = 0; b < 256; ++b) {
      const bool whole = (removed[b >> 6] >> (b & 63)) & 1;
      if (whole) cuts.first_bytes.push_back(static_cast<std::uint8_t>(b));
      if (!whole && ((follow.bytes[b >> 6] >> (b & 63)) & 1)) {
        cuts.followed.push_back(static_cast<std::uint8_t>(b));
      }
    }
    for (const CfgGrammar::ViewLeaf& l : leaves) {
      const TokenId t = g_.trie_->TokensUnder(l.node)[0];
      cuts.prefixes.emplace_back(g_.vocab_->TokenBytes(t).substr(0, g_.trie_->nodes()[l.node].depth));
    }
    return cuts;
  }
  // Whether the position of s is composed from a callee's start position (ComposableCall).
  bool ComposesThroughCall(StateId s) const { return g_.ComposableCall(s) >= 0; }
  // Counter rule `rule`'s position after `count` repetitions, computed afresh: from its counted
  // view when it has one (`view`), else (or with !view) by a walk of the whole trie; and whether
  // it has one.
  std::unique_ptr<CfgPosition> FreshCounterPosition(std::int32_t rule, std::int32_t count,
                                                    bool view) const {
    return g_.ComputePosition({rule, count, 0, 0}, view);
  }
  bool HasCountedView(std::int32_t rule) const { return g_.counted_views_[rule] != nullptr; }
  // The position key of DFA state s through the keyer (and the store's keyers), and the keys of
  // `order`'s states asked in that order of a fresh keyer of the grammar's program (a key's
  // hash can depend on the keys asked before it: a recursive rule is described from the rule
  // first asked).
  std::optional<PositionKey> KeyOfState(StateId s) const { return g_.KeyOf(s); }
  std::vector<std::optional<PositionKey>> FreshKeysInOrder(std::span<const StateId> order) const {
    PositionKeyer fresh(&g_.program_);
    std::vector<std::optional<PositionKey>> out;
    for (StateId s : order) out.push_back(fresh.Key(s, g_.follow_bits_[g_.program_.state_rule[s]]));
    return out;
  }
  // The state whose position state s takes (its fold's first state; s when it folds with none).
  StateId FoldedState(StateId s) const { return g_.FoldedState(s); }
  // Whether PrecomputePositions took the grammar's positions from a program table the same
  // program left in the store, and whether its keys came from another grammar's keyer.
  bool PositionsTakenFromProgram() const { return g_.positions_from_program_.load(); }
  bool KeysTakenFromStore() const {
    std::lock_guard<std::mutex> lock(g_.key_mu_);
    return g_.keys_from_store_;
  }

 private:
  const CfgGrammar& g_;
};

}  // namespace lockstep
