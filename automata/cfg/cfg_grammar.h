// CfgGrammar: a context-free constraint lifted to tokens, with the adaptive token-mask cache.
//
// Positions. Every parse path from an Earley set starts in the closure of one of its kernel
// items (rule, state). For each such position the vocabulary splits three ways, computed once
// by a trie walk of the position's rule in isolation (EarleyParser local mode):
//   accepted   - the token is consumed inside the rule: allowed whatever the stack below;
//   rejected   - the token dies inside the rule and the rule never completes on the way;
//   uncertain  - the rule completes after j bytes (0 < j < len) and the token's tail must be
//                checked against the stack below. These are stored grouped by tail, as a small
//                trie of distinct tails, so the run-time check walks each tail once.
// Accepted sets are stored as a bitset or a sorted id list, whichever is smaller.
//
// The walk steps the rule's byte automaton directly wherever the state has no rule edges, and
// runs the local parser only below states that have some (a `ws` reference, a nested value).
// A state inside a wide byte loop (a string body, with its escapes and UTF-8 continuations)
// takes its tokens from the vocabulary's shared view of that loop region (TokenTrie::Region):
// the tokens that stay inside are one precomputed bit set, and only the tokens that leave the
// region (those with a quote, a backslash, a control byte) are walked on from where they leave.
// Equal regions of different grammars have equal canonical tables, so every JSON schema
// compiled for a vocabulary reuses the same string-body views. Whole positions are shared the
// same way: a position computed by one grammar is stored under a structural key of the
// automaton it walks (automata/cfg/position_key.h) and reused by any later grammar of the
// vocabulary with the same key (CompileOptions::share_positions).
//
// Run time. mask = union of the accepted sets of the kernel positions, plus the uncertain tails
// accepted by the parse right after the rule completes (EarleyParser::PushCompletion), plus EOS
// and grammar special tokens. Finished masks are cached by the parser state's signature: an
// interned, structural id of (kernel items, signature of their origin sets) that determines
// every future of the parse, so equal signatures have equal masks. A state with a few kernel
// positions and no tails to check (most fills) is neither looked up nor stored: its mask is a
// copy and an OR or two, about what restoring a cached copy would cost. A finished mask is kept as
// an id list, a list of the blocked ids, or the bitset, whichever is smallest (lists up to an
// eighth of the bitset: JSON masks are mostly a few tokens or nearly all of them). All caches
// are shared, immutable once published (lock-free reads) and bounded by
// CompileOptions::max_mask_cache_bytes; past the budget masks are still exact, computed per call.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "automata/cfg/cfg_program.h"
#include "automata/cfg/earley.h"
#include "automata/cfg/position_key.h"
#include "automata/cfg/position_worker.h"
#include "automata/token/token_automaton.h"
#include "automata/token/token_trie.h"
#include "automata/vocab/token_flags.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"

namespace lockstep {

class ItemView;  // automata/cfg/unique_search.h
struct UniqueListScan;  // automata/cfg/unique_items.h


struct CfgPosition {
  // Accepted tokens: a bitset (PaddedBitmaskWords) or a sorted list, whichever is smaller.
  std::vector<std::uint32_t> accepted_bits;
  std::vector<TokenId> accepted_list;
  // Uncertain tails as a depth-first trie: node i holds byte, depth (1-based), subtree_end and
  // the tokens whose tail ends there: tail_tokens[tail_begin[i] .. tail_begin[i + 1]).
  // (The token trie's node: a walk reads the tails as it reads the trie, ComposeFromCallee.)
  using TailNode = TokenTrie::Node;
  std::vector<TailNode> tails;  // with a sentinel at the end
  std::vector<TokenId> tail_tokens;
  std::uint64_t ContentHash() const;
  bool SameContent(const CfgPosition& o) const {
    return accepted_bits == o.accepted_bits && accepted_list == o.accepted_list &&
           tail_tokens == o.tail_tokens && tails.size() == o.tails.size() &&
           std::equal(tails.begin(), tails.end(), o.tails.begin(), [](const TailNode& a, const TailNode& b) {
             return a.subtree_end == b.subtree_end && a.token_begin == b.token_begin &&
                    a.depth == b.depth && a.byte == b.byte;
           });
  }
  std::int32_t num_accepted = 0;
  std::int32_t num_uncertain = 0;  // (token, split) pairs
  std::uint64_t content_hash = 0;  // ContentHash(), set when a grammar publishes it
  std::int64_t Bytes() const {
    return static_cast<std::int64_t>(accepted_bits.capacity() * 4 + accepted_list.capacity() * 4 +
                                     tails.capacity() * sizeof(TailNode) +
                                     tail_tokens.capacity() * 4 + sizeof(CfgPosition));
  }
};

// The positions of every grammar compiled for one vocabulary, by key (automata/cfg/position_key.h),
// attached to the vocabulary's token trie; bounded by CompileOptions::max_shared_position_bytes.
struct SharedPositions {
  std::mutex mu;
  // Positions by key, and the positions held (many keys can map to one: equal contents are
  // stored once), whose sizes add up to `bytes`. Each is split into kShards tables by hash, so
  // that a table that grows rehashes a 64th of the entries under the lock: the store of a
  // server holds hundreds of thousands of positions, and rehashing them all at once stalled
  // the fill that stored the next one for 1-2 ms.
  static constexpr std::size_t kShards = 64;
  std::array<std::unordered_map<PositionKey, std::shared_ptr<const CfgPosition>, PositionKey::Hash>,
             kShards>
      map;
  std::array<std::unordered_set<const CfgPosition*>, kShards> held;
  auto& MapFor(const PositionKey& k) { return map[k.b % kShards]; }
  auto& HeldFor(const CfgPosition* p) {
    return held[(reinterpret_cast<std::uintptr_t>(p) >> 6) % kShards];
  }
  // Key hashes by program fingerprint (ProgramFingerprint): a grammar whose program was
  // compiled before (the same schema again) reads its keys from the first one's keyer instead
  // of hashing its automata again. Counted in `bytes` too.
  std::unordered_map<PositionKey, std::shared_ptr<const PositionKeyer>, PositionKey::Hash> keyers;
  std::int64_t bytes = 0;
  // Folds of big format automata by cache entry (RuleInfo::shared_source): per state rank, the
  // rank of the first state no token tells apart from it (automata/cfg/state_fold.h). They depend
  // on the vocabulary's tokens, hence kept here; a few hundred KB each, not counted in `bytes`.
  std::unordered_map<std::uint64_t, std::shared_ptr<const std::vector<std::int32_t>>> folds;
  // Every DFA state's position of a precomputed program, by ProgramFingerprint: a grammar of
  // the same program precomputed again (a schema compiled again) takes them all at once, not a
  // key and a lookup per state. Counted in `bytes` (positions not held already, and the index).
  struct ProgramPositions {
    std::vector<std::int32_t> of_state;  // per state: index into `positions`, -1: none
    std::vector<std::shared_ptr<const CfgPosition>> positions;
  };
  std::unordered_map<PositionKey, std::shared_ptr<const ProgramPositions>, PositionKey::Hash>
      programs;
  // The pattern check's tables (CfgGrammar::FilterPatternStrings), which depend on the
  // vocabulary alone, made on first use: per trie node, whether its subtree holds plain pattern
  // bytes only (PlainSubtrees); the tokens that open a string whose text the checker refuses
  // (PatternOpeners). Per grammar they cost each pattern grammar's first such fill 1.5-2 ms.
  std::once_flag pattern_plain_once;
  std::vector<std::uint8_t> pattern_plain_subtrees;
  std::once_flag pattern_openers_once;
  std::vector<TokenId> pattern_openers;
  // The vocabulary's background thread (CompileOptions::background_positions), made on first
  // use. Last, so that it is destroyed first.
  std::unique_ptr<PositionWorker> worker;
};

struct CfgStats {
  std::int32_t rules = 0;
  std::int32_t counter_rules = 0;
  std::int32_t states = 0;
  std::int32_t byte_classes = 0;
  std::int32_t positions = 0;           // positions (kernel rule states) computed so far
  std::int32_t shared_positions = 0;    // of which taken from other grammars of the vocabulary
  std::int64_t accepted_tokens = 0;     // summed over computed positions
  std::int64_t uncertain_tokens = 0;    // (token, split) pairs over computed positions
  std::int32_t cached_masks = 0;        // finished masks cached by state signature
  std::int32_t signatures = 0;
  std::int64_t cache_bytes = 0;
  double compile_ms = 0;
  double source_ms = 0, tables_ms = 0;  // (CompiledGrammarStats)
};

// A grammar already in the IR (what the JSON Schema compiler produces), compiled for the
// compiler's vocabulary.
Result<std::shared_ptr<const CompiledGrammar>> CompileGrammarIr(const GrammarCompiler& compiler,
                                                                const grammar::Grammar& ir,
                                                                const CompileOptions& options = {});
// The same under a deadline the caller started (a compile made of several phases, such as
// CompileSchema or CompileStructured, runs under one).
// `source_ms`: the time the caller took to make `ir` (CompiledGrammarStats::source_ms).
Result<std::shared_ptr<const CompiledGrammar>> CompileGrammarIrUnder(
    const GrammarCompiler& compiler, const grammar::Grammar& ir, const CompileOptions& options,
    const CompileDeadline& deadline, double source_ms = 0);

class CfgGrammar : public TokenAutomaton {
 public:
  // `deadline`: the compile's, for folding the states of big automata (FoldedState); once it
  // has passed they are left unfolded and FoldStoppedAt() names the rule.
  CfgGrammar(std::shared_ptr<const Vocabulary> vocab, std::shared_ptr<const TokenTrie> trie,
             CfgProgram program, const CompileOptions& options, double compile_ms,
             const CompileDeadline* deadline = nullptr);
  ~CfgGrammar() override;

  // TokenAutomaton: a sequence is an Earley parser (automata/cfg/cfg_sequence.cc).
  const Vocabulary& vocabulary() const override { return *vocab_; }
  bool is_grammar() const override { return true; }
  std::unique_ptr<TokenSequence> NewSequence() const override;
  void PrecomputeAllMasks() const override;
  CompiledGrammarStats CompiledStats() const override;

  const CfgProgram& program() const { return program_; }
  const Vocabulary& vocab() const { return *vocab_; }
  std::int32_t width() const { return width_; }
  std::size_t mask_words() const { return BitmaskWords(width_); }
  std::int32_t max_depth() const { return max_depth_; }
  // CompileOptions::max_earley_items_per_byte: the budget of one step of a matcher's parser.
  std::int64_t max_step_items() const { return max_step_items_; }

  // The mask of the parser's current state into `out` (mask_words() words). `sigs` holds the
  // signature of each set of `parser` (extended here as needed; -1 = not interned). `parser` is
  // used as scratch (sets pushed and popped) and left as it was.
  // Fills with at most this many kernel positions and no tails to check are not cached.
  static constexpr std::int32_t kMaxUncachedKernels = 4;
  // More kernel positions than this: the mask is a full walk of the trie over the parser. (A
  // set inside a list of N optional members has a kernel per member after the comma: a few
  // hundred in real schemas; each is a cached position, and their union is cheaper than a walk.)
  static constexpr std::size_t kMaxKernels = 2048;
  // Kernel counter items of one counter and origin with at least this many counts stand for
  // their body's start position (GroupCounterKernels).
  static constexpr std::int32_t kCounterGroup = 4;
  void FillMask(EarleyParser& parser, std::vector<std::int32_t>& sigs,
                std::span<std::uint32_t> out) const;
  // The mask of the grammar without the unique-items check (FillMask's, before
  // FilterUniqueItems): what the caches hold.
  void FillMaskOfGrammar(EarleyParser& parser, std::vector<std::int32_t>& sigs,
                         std::span<std::uint32_t> out) const;
  // Clears from `out` the tokens the parser's unique-items check refuses (mask_cache.cc).
  void FilterUniqueItems(EarleyParser& parser, std::span<std::uint32_t> out) const;
  // FilterUniqueItems' tokens to check with the parser, of one list open at the parser's end
  // (its reader `items`), added to `*check`: those of `out` that close an object item which may
  // equal an earlier one (ObjectListTokens), and those along which a string, number or literal
  // item may repeat an earlier one (ScalarListTokens: a walk of the trie). `any_type`: the
  // list's items may be of any type; `finite`: they can run out of values (or are counted).
  void ObjectListTokens(const UniqueListItems& items, bool any_type,
                        std::span<const std::uint32_t> out, std::vector<TokenId>* check) const;
  void ScalarListTokens(const UniqueListItems& items, bool finite, bool any_type,
                        std::span<const std::uint32_t> out, std::vector<TokenId>* check) const;
  // Lists of closed objects (CfgProgram::RuleInfo::unique_search): clears from `out` the tokens
  // after which the list open since `origin` has no new way to finish its item under way
  // (automata/cfg/unique_search.h), searching within what is left of `*budget`.
  void SearchUniqueItems(EarleyParser& parser, std::int32_t origin, std::span<std::uint32_t> out,
                         std::int64_t* budget) const;
  // SearchUniqueItems' candidates, sorted, from the view at the parser's end (`start`, of the
  // list whose scan is `scan`): the tokens of `out` after which the view is not settled and no
  // item closes (`walked`: a trie walk, and the tokens that open an object item after a string
  // one), and those in which an item closes that the view cannot call new and settled
  // (`closing`).
  void UnsettledTokens(const ItemView& start, const UniqueListScan& scan,
                       std::span<const std::uint32_t> out, std::vector<TokenId>* walked,
                       std::vector<TokenId>* closing) const;
  // Lists of closed objects open at the parser's end: whether each can still finish its item
  // under way with a new value (a byte that leaves one with only repeats is refused by
  // AcceptToken as by the mask). False with `*error` set when the search ran past
  // CompileOptions::max_unique_search_bytes.
  bool SearchedListsLive(EarleyParser& parser, Status* error) const;
  bool has_search_lists() const { return has_search_lists_; }
  // Clears from `out` the tokens that break a counted string's maxLength (mask_cache.cc).
  void FilterCountedStrings(EarleyParser& parser, std::span<std::uint32_t> out) const;
  // Clears from `out` the tokens after which a string checked as an ECMAScript pattern can no
  // longer be a valid one (mask_cache.cc).
  void FilterPatternStrings(EarleyParser& parser, std::span<std::uint32_t> out) const;
  // What the pattern check makes of every token from one state of the checker (its local key:
  // the same for every text that reads alike from here on). `failing`: the tokens a character
  // of which fails the check before the string closes. `closing`: the trie nodes at which the
  // string closes, every character before passing, and the bytes from the state to each (up to
  // its quote, whose verdict is Complete() and depends on the whole text: taken per fill).
  struct PatternVerdicts {
    std::vector<std::uint32_t> failing;
    std::vector<std::uint32_t> closing;
    std::vector<std::uint32_t> path_begin;  // closing.size() + 1 offsets into paths
    std::string paths;
  };
  std::shared_ptr<const PatternVerdicts> PatternVerdictsFor(
      const EarleyParser::PatternRead& read) const;
  // The vocabulary's (SharedPositions), made by the first grammar that asks.
  const std::vector<std::uint8_t>& PlainSubtrees() const;
  const std::vector<TokenId>& PatternOpeners() const;
  // The same mask by one walk of the whole token trie over the full parser: no position cache,
  // no signature cache. The fallback near the depth limit, and a cross-check for tests.
  void FullWalkMask(EarleyParser& parser, std::span<std::uint32_t> out) const;

  bool IsEos(TokenId id) const {
    return id >= 0 && id < static_cast<TokenId>(is_eos_.size()) && is_eos_[id];
  }
  // Whether the grammar has token items (<[ID]>, <TEXT>, !<...>).
  bool HasTokenEdges() const { return !program_.special_tokens.empty(); }
  // Marks in take (one entry per token edge) the edges that take token `id`; false when none.
  bool TokenEdgesTaking(TokenId id, std::vector<std::uint8_t>* take) const;
  bool IsTextToken(TokenId id) const { return lockstep::IsTextToken(*vocab_, id); }

  // The rule whose folding the deadline stopped ("" when none was stopped).
  const std::string& FoldStoppedAt() const { return fold_stopped_at_; }
  // Computes every DFA-state position now, on `threads` threads (0 = hardware concurrency).
  // With a deadline (the compile's, for precompute_masks): its kResourceLimit, naming the rule
  // of a position left uncomputed, once it passes; the positions computed so far are kept.
  Status PrecomputePositions(int threads, const CompileDeadline* deadline = nullptr) const;

  // Background positions (CompileOptions::background_positions). Called by the Matcher after a
  // fill of this grammar (`self` owns it): the first fill queues it with the vocabulary's
  // PositionWorker, a fill that had to walk a position (`walked`) moves it to the front.
  void NoteFill(const std::shared_ptr<const CompiledGrammar>& self, bool walked) const;
  // One slice of the background work, about `budget_us` (the worker's thread): first the
  // program's positions from the store or every state's key, then the positions of the states in
  // breadth-first order from the root. False when nothing is left.
  bool BackgroundSlice(double budget_us) const;
  // Blocks until the vocabulary's worker has nothing left to do (tests, benchmarks).
  void WaitForBackground() const;
  bool BackgroundDone() const { return bg_done_.load(std::memory_order_acquire); }
  CfgStats Stats() const;
  // The compile's other phases (CompiledGrammarStats::source_ms, tables_ms), for Stats.
  void SetPhaseTimes(double source_ms, double tables_ms) {
    source_ms_ = source_ms;
    tables_ms_ = tables_ms;
  }

 private:
  friend class ArtifactCodec;  // automata/artifact/artifact.cc reads and restores the caches
  friend class CfgGrammarPeer;  // automata/cfg/cfg_grammar_peer.h: what tests look into
  // The state whose position state s takes (its fold's first state; s when it folds with none).
  StateId FoldedState(StateId s) const { return fold_rep_.empty() ? s : fold_rep_[s]; }
  // The share of ComputePosition's work a region view took for s (CfgGrammarPeer).
  int RegionUseOfState(StateId s) const;
  // How many tokens of the trie start with a byte of the set `bytes`.
  std::size_t TokensStartingWith(const std::array<std::uint64_t, 4>& bytes) const;
  const CfgPosition* PositionFor(const EarleyItem& it) const;
  void GroupCounterKernels(std::int32_t k, std::vector<EarleyItem>& live) const;
  // EOS where the root may end, the grammar's token items where the parse takes them.
  // Sets the end-of-sequence and token-item ids the parser allows; appends the ids it newly
  // sets to `added` if given. Returns true when a negated item (!<X>) added most of the
  // vocabulary at once: those ids are not in `added`.
  bool AddEndAndSpecials(EarleyParser& parser, std::span<std::uint32_t> out,
                         std::vector<TokenId>* added = nullptr) const;
  // ORs the ids a negated token item takes, but `excluded`, into out.
  void AddAllTokensBut(TokenId excluded, std::span<std::uint32_t> out) const;
  // The union of the positions' accepted sets into out (its first mask_words() words).
  void UnionOf(const CfgPosition* const* positions, std::int32_t n,
               std::span<std::uint32_t> out) const;
  // A position: one walk of the token trie from the item's state (WalkTrie), or, when the state
  // lies in a wide byte loop (RegionRuns), the vocabulary's shared view of that region plus a
  // walk of only the tokens that leave it.
  std::unique_ptr<CfgPosition> ComputePosition(const EarleyItem& it, bool regions = true) const;
  struct WalkScratch;
  enum class WalkMode : std::uint8_t;
  struct WalkFrame;
  class TrieWalker;
  // (start_depth: the walk starts at nodes of depth start_depth + 1, below a path of plain
  // states; 0 from the root's children.)
  void WalkTrie(std::span<const TokenTrie::Node> nodes, std::uint32_t begin, std::uint32_t end,
                const TokenId* toks, const std::uint16_t* offsets, const EarleyItem& item,
                StateId start, WalkScratch& out, std::int32_t start_depth = 0,
                bool offsets_from_depths = false) const;
  // The callee of DFA state s when s's position can be composed from the callee's start
  // position (ComputePosition): s has one rule edge and nothing else (no bytes, no special
  // edges, no simple repetition, not accepting), to a rule other than s's own, and (when the
  // callee may match the empty string, so that the return state's position joins in) returning
  // to another state. -1 otherwise.
  std::int32_t ComposableCall(StateId s) const;
  static constexpr std::int32_t kMaxComposeDepth = 8;
  // Item's position composed from its callee's start position (see ComputePosition) and, for a
  // callee that may match nothing, the return state's position `skip`, into `scratch` (begun);
  // false when the walk of the tails gave up (then walk the whole trie).
  bool ComposeFromCallee(const CfgPosition& callee, const CfgPosition* skip,
                         const EarleyItem& item, StateId return_state, WalkScratch& scratch) const;
  // The position a walk left in `scratch`.
  std::unique_ptr<CfgPosition> PositionFromScratch(WalkScratch& scratch) const;
  // The vocabulary's counted view of counter rule `rule` (TokenTrie::Counted), or null when its
  // body is not a plain byte unit that cannot go on once finished, or when a byte a unit starts
  // with may also follow the counter (then a token could end the counter and go on either way).
  // Found once per rule, at construction (counted_views_).
  const TokenTrie::CountedView* MakeCountedView(std::int32_t rule) const;
  // Counter item `item`'s position from its rule's counted view, into `out`.
  void PositionFromCounted(const TokenTrie::CountedView& view, const EarleyItem& item,
                           WalkScratch& out) const;
  // The canonical table of the region of s (TokenTrie::Region), its states in `states`
  // (states[0] = s at the first byte); empty if neither s nor a state one byte after it is on
  // a wide loop (16+ bytes back to one state; with the wide loops one byte after it, each with
  // its cycle: a search pattern's rest after its match) of at most 192 plain states.
  // first_exits: the first bytes from s that leave the region, which the table treats as dead
  // and the caller walks in the trie; removed: first bytes whose results the view has wrong for
  // s (it starts from the loop's anchor), which the caller takes out and walks; follow: first
  // bytes whose results may be right, below which s's path and the view's are followed
  // (FollowBesideView).
  // RegionRuns' steps. A plain state has no rule edge and cannot finish its rule without a
  // byte. Plain states x and y are equivalent when they have the same acceptance and, class by
  // class, both dead or equivalent again, states that are not plain being the same state (a
  // rule's automaton is not minimised: a string body's first character, `minLength: 1`, has
  // states of its own that behave as the loop's); at most kMaxEquivalentPairs pairs, and `work`
  // (class steps, shared by the questions of one table) at most kEquivalenceWork, else not
  // equivalent. SuccessorsByBytes: x's plain successors other than x, as (-bytes, state), most
  // bytes first.
  bool PlainState(StateId t) const;
  static constexpr std::int64_t kMaxEquivalentPairs = 64, kEquivalenceWork = 64 * 256;
  bool EquivalentPlainStates(StateId x, StateId y, std::int64_t& work) const;
  std::vector<std::pair<std::int32_t, StateId>> SuccessorsByBytes(StateId x) const;
  // A region's table in run form (TokenTrie::TableOfRuns), interned per grammar, with its view
  // once looked up.
  struct RegionKey {
    std::vector<std::int16_t> runs;
    mutable std::atomic<const TokenTrie::RegionView*> view{nullptr};
  };
  // RegionBuilder's work for a wide loop entered by its anchor's own row: the loop's states,
  // their numbering and the table, the same for every state that enters that way (the anchor
  // itself, a state before it that goes where it goes, a state a view of its own would not
  // pay for). A grammar's strings meet the same anchor at several positions (Glaive: half of
  // the plans), each of which explored, numbered and tabled the loop again (about 130,000
  // instructions for a JSON string body's 27 states). Per grammar, bounded by
  // kAnchorRegionBytes (past it, plans are built as before).
  struct AnchorRegion {
    std::vector<StateId> loop;      // the loop's states (RegionBuilder's InLoop)
    std::vector<StateId> numbered;  // region states 1.. (0 is the position's own state)
    std::shared_ptr<const RegionKey> key;
  };
  static constexpr std::int64_t kAnchorRegionBytes = std::int64_t{1} << 20;
  std::shared_ptr<const AnchorRegion> FindAnchorRegion(StateId anchor) const;
  // The key interned (null past the budget).
  std::shared_ptr<const RegionKey> KeepAnchorRegion(StateId anchor, std::vector<StateId> loop,
                                                    std::vector<StateId> numbered,
                                                    const std::vector<std::int16_t>& runs) const;
  mutable std::mutex anchor_mu_;
  mutable std::unordered_map<StateId, std::shared_ptr<const AnchorRegion>> anchor_regions_;
  struct RunsHash {
    std::size_t operator()(const std::vector<std::int16_t>& runs) const {
      std::uint64_t h = 0x9E3779B97F4A7C15ull ^ runs.size();
      for (const std::int16_t v : runs) h = (h ^ static_cast<std::uint16_t>(v)) * 0x100000001B3ull;
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };
  mutable std::unordered_map<std::vector<std::int16_t>, std::shared_ptr<const RegionKey>, RunsHash>
      region_keys_;
  mutable std::int64_t anchor_region_bytes_ = 0;
  class RegionBuilder;
  // First bytes on which s differs from the view's entry row (the anchor's) but goes to a plain
  // state, where the two paths are followed together below (FollowBesideView).
  // `viewed`: the first bytes on which the view has results for s (its entry row goes into the
  // region).
  struct RegionFollow {
    std::array<std::uint64_t, 4> bytes{}, viewed{};
    StateId anchor = CfgProgram::kDead;
  };
  // The table of s's region in run form (TokenTrie::TableOfRuns), empty when there is none.
  std::vector<std::int16_t> RegionRuns(StateId s, std::vector<StateId>& states,
                                        std::array<std::uint64_t, 4>& first_exits,
                                        std::array<std::uint64_t, 4>& removed,
                                        RegionFollow& follow,
                                        std::shared_ptr<const RegionKey>* interned = nullptr) const;
  // A trie node below which a view's results do not hold for the position's state: its tokens
  // are taken out of them and walked from `from`, the (plain) state at the node's parent, at
  // depth `depth` (the parent's).
  struct ViewLeaf {
    std::uint32_t node;
    StateId from;
    std::int32_t depth;
  };
  // s's path and the view's (from follow.anchor's row, through the region `states` of
  // RegionRuns) followed together over the trie below the first bytes follow.bytes, while
  // they differ and both are in plain states: the nodes where they part for good (s dies where
  // the view goes on, or leaves the region elsewhere) are `leaves`. A first byte whose subtree
  // takes more than a bounded walk or has too many leaves moves to `removed` (taken out whole).
  void FollowBesideView(StateId s, const RegionFollow& follow, std::span<const StateId> states,
                        std::array<std::uint64_t, 4>& removed, std::vector<ViewLeaf>& leaves) const;
  // Trie children stepped in all (a first byte still followed past them is taken out whole, and
  // so are those after it), and leaves under one first byte.
  static constexpr std::int32_t kFollowSteps = 4096, kFollowLeaves = 32;
  // How the position of s uses a view: RegionRuns, FollowBesideView, and the choice. The table
  // (in run form) is empty (no view: s's position is a walk of the trie) when there is none, or
  // when the first bytes taken out of its results whole hold more tokens than those it keeps (a key
  // choice's state that sends a few letters into a string body and nothing else; a count of
  // characters whose paths never join the loop's).
  std::vector<std::int16_t> RegionPlan(StateId s, std::vector<StateId>& states,
                                       std::array<std::uint64_t, 4>& first_exits,
                                       std::array<std::uint64_t, 4>& removed,
                                       std::vector<ViewLeaf>& leaves,
                                       std::shared_ptr<const RegionKey>* interned = nullptr) const;
  // The interned signature of set k (-1: none, over the budget). sigs[j] caches set j's
  // (kUnsigned: not computed yet); only the sets on k's origin chains are computed.
  static constexpr std::int32_t kUnsigned = -2;
  std::int32_t Signature(const EarleyParser& parser, std::vector<std::int32_t>& sigs,
                         std::int32_t k) const;
  bool ReserveBytes(std::int64_t n) const;
  const std::uint32_t* CachedFinal(std::int32_t sig) const;
  // Keeps `mask` as signature sig's finished mask. When `positions` are given (the grammar's
  // own), mask is the union of their accepted sets plus the ids in `added`, and may be kept so.
  void StoreFinal(std::int32_t sig, std::span<const std::uint32_t> mask,
                  std::span<const CfgPosition* const> positions = {},
                  std::span<const TokenId> added = {}) const;
  void RestoreFinal(const std::uint32_t* blob, std::span<std::uint32_t> out) const;

  std::shared_ptr<const Vocabulary> vocab_;
  std::shared_ptr<const TokenTrie> trie_;
  CfgProgram program_;
  CompileOptions options_;
  double compile_ms_;
  double source_ms_ = 0, tables_ms_ = 0;  // set by CompileGrammarIrUnder (SetPhaseTimes)
  std::int32_t width_;
  std::int32_t max_depth_;
  std::int64_t max_step_items_;
  // Predictions per byte are bounded by the longest chain of rules predicted without a byte
  // (PredictionChain in cfg_grammar.cc; the rule count under left recursion), so a state with at
  // least this much depth left cannot hit the limit within one token: its masks may come from
  // the caches.
  std::int64_t depth_margin_;
  // PredictionChain when depth_margin_ > 0: a token of L bytes deepens the parse by at most
  // this times L, so with less than depth_margin_ left only the longer tokens can reach the
  // limit, and a fill checks those against the parse (ClearTooDeep) instead of walking the trie.
  std::int64_t prediction_chain_ = 0;
  // Clears from `out` the tokens of at least `min_len` bytes that the parse refuses (past the
  // nesting limit).
  void ClearTooDeep(EarleyParser& parser, std::int64_t min_len, std::span<std::uint32_t> out) const;
  std::vector<bool> is_eos_;
  // follow_[r]: bytes that can come right after rule r completes, in any context. An uncertain
  // tail must start with one of them (prunes most of them at compile time; the root, which
  // nothing references, has none).
  std::vector<std::array<bool, 256>> follow_;
  std::vector<std::array<std::uint64_t, 4>> follow_bits_;
  // Keys of positions shared by the grammars of one vocabulary (automata/cfg/position_key.h).
  mutable std::mutex key_mu_;
  mutable std::unique_ptr<PositionKeyer> keyer_;
  PositionKey fingerprint_;  // ProgramFingerprint(program_), when positions are shared
  // This grammar's number in the process (from 1): a thread's walk tables belong to one.
  const std::uint64_t serial_ = NextSerial();
  static std::uint64_t NextSerial();
  mutable std::shared_ptr<const PositionKeyer> key_snapshot_;  // from the store, read-only
  mutable bool snapshot_looked_up_ = false;
  mutable bool keys_from_store_ = false;
  // The key of s; nullopt also when !may_wait and the background worker is hashing (a fill).
  std::optional<PositionKey> KeyOf(StateId s, bool may_wait = true) const;
  // KeyOf's work, under key_mu_, hashing at most `max_work` states (PositionKeyer::Key).
  std::optional<PositionKey> KeyLocked(StateId s, std::int64_t max_work,
                                       std::int64_t rule_work = -1) const;
  // What a fill may hash to get a key (0.15-0.4 µs a state), and no rule whose hashing would
  // not end within it; past it the fill walks the position without a key, and the background
  // worker hashes without a bound. The first fill (a grammar's first mask, beside the host's
  // prefill) hashes up to 4,096 states: a tool schema's whole program (833 states on average in
  // the dev set), a big program's part around its root. Later fills, each between two decoding
  // steps, up to 256 more (at 1,024, Kubernetes' one-thread per-mask p99 was 117-120 us, at 256
  // 87-92; never the whole of a 27k-state Kubernetes schema at once, 100 ms).
  static constexpr std::int64_t kFirstFillKeyWork = 4096;
  static constexpr std::int64_t kForegroundKeyWork = 256;
  // The bound is the fill's, not each key's: a fill that walks dozens of new positions (an
  // object's optional members after a comma) asks a key for each, and at 256 states each had
  // hashed 11,940 states, 28 M instructions against 2.4 M for its walks (JsonSchemaStore
  // `testenvironments`, 2.3 ms). FillKeyBudget, held by FillMask, keeps what is left of it on
  // the fill's thread; the first fill's root key has its own kFirstFillKeyWork.
  class FillKeyBudget {
   public:
    FillKeyBudget();
    ~FillKeyBudget();
    FillKeyBudget(const FillKeyBudget&) = delete;
    FillKeyBudget& operator=(const FillKeyBudget&) = delete;

   private:
    std::int64_t saved_;
  };
  // Every state's key, computed at once by the background worker; read without a lock once
  // keys_ready_ is set.
  mutable std::atomic<bool> keys_ready_{false};
  mutable std::vector<PositionKey> state_keys_;
  mutable std::vector<std::uint8_t> state_has_key_;
  // The states whose positions a precompute or the background worker computes, breadth-first
  // from the root's start state (the likely next ones first).
  std::vector<StateId> PrecomputeOrder() const;
  // The store's copy of a position this grammar computed before its keys were known.
  void ShareComputed(StateId s) const;
  // Puts a position of this grammar into the vocabulary's store under `key` (within its budget).
  void StoreShared(const PositionKey& key, std::shared_ptr<const CfgPosition> owner) const;
  // The worker's progress (only the worker's thread touches bg_order_ and bg_next_).
  bool background_ = false;  // background_positions on and not precomputed
  mutable std::atomic<bool> bg_queued_{false};
  mutable std::atomic<bool> bg_done_{false};
  mutable std::mutex bg_mu_;
  mutable bool bg_started_ = false;
  mutable std::vector<StateId> bg_order_;
  mutable std::vector<std::uint8_t> bg_in_order_;  // per state: in bg_order_
  mutable std::size_t bg_next_ = 0;
  // The state of the last position a fill had to walk itself: the worker's next slice starts
  // with the states a few bytes and calls from it (where that sequence goes next).
  mutable std::atomic<StateId> bg_hint_{-1};
  static constexpr std::size_t kHintStates = 128;
  // The counter position a fill last had to walk itself, as rule << 32 | count (-1: none): the
  // worker's next slice computes the positions of that rule's next kCounterAhead counts (a
  // string of `maxLength` goes on a few characters a token; each count is a position of its
  // own), also after it has done every state.
  mutable std::atomic<std::int64_t> bg_counter_hint_{-1};
  static constexpr std::int32_t kCounterAhead = 16;
  // The counts of the last hint still to compute (under bg_mu_): rule, next count, last count.
  mutable std::int32_t bg_counter_rule_ = -1;
  mutable std::int64_t bg_counter_next_ = 0, bg_counter_last_ = -1;
  // Takes a new counter hint, if any, and computes the counts left within the slice's budget;
  // true if the budget ran out first (the rest goes on in the next slice unless a newer hint
  // replaces it). At most kCounterAhead positions per hint.
  bool CountersAhead(const std::chrono::steady_clock::time_point& start, double budget_us) const;
  // The successors of s (byte, rule and special edges; a call also to the called rule's start).
  template <typename F>
  void ForEachSuccessor(StateId s, F&& f) const;
  PositionWorker& Worker() const;
  // null_state_[s]: the rule can finish from DFA state s without a byte; first_bytes_[s]: the
  // bytes that can come first from s (through rule edges too).
  std::vector<std::uint8_t> null_state_;
  // plain_state_[s]: no rule edge and null_state_[s] == 0 (PlainState): a walk steps on from s
  // by its bytes alone (TrieWalker::PlainRun).
  std::vector<std::uint8_t> plain_state_;
  std::vector<std::array<std::uint64_t, 4>> first_bytes_;
  std::vector<std::int32_t> class_size_;  // bytes per byte class
  std::vector<std::int32_t> class_order_;  // the byte classes in the order of their first byte
  // The bytes as maximal runs of one class, in byte order: (last byte, class).
  std::vector<std::pair<std::uint8_t, std::int32_t>> class_runs_;
  std::vector<std::uint16_t> first_count_;  // per state: bytes in first_bytes_
  bool FirstByte(StateId s, std::uint8_t b) const {
    return (first_bytes_[s][b >> 6] >> (b & 63)) & 1;
  }
  void ComputeFollow();
  // States whose only edge is a simple repetition of one byte class (the schema compiler's
  // `ws ::= [ \t\n\r]{0,32}`): the position walk counts it on the automaton, no parser.
  struct RepeatEdge {
    std::array<std::uint64_t, 4> bytes;
    StateId after;
    std::int32_t min, max;  // max < 0: unbounded
  };
  std::vector<std::int32_t> repeat_of_;  // per state: index into repeat_edges_, or -1
  std::vector<RepeatEdge> repeat_edges_;
  void ComputeRepeatEdges(const std::vector<std::array<std::uint64_t, 4>>& class_bytes);

  // Per state, the state whose position it takes (empty: none folds): the states of a big format
  // automaton that no token tells apart share one position (automata/cfg/state_fold.h), so a
  // 25k-state `email` automaton is walked once per fold, not per state.
  static constexpr std::int32_t kMinFoldStates = 1024;
  std::vector<StateId> fold_rep_;
  std::string fold_stopped_at_;
  void FoldBigRules(const CompileDeadline* deadline);
  // PrecomputePositions with positions shared: take every state's position from the table the
  // same program left in the store (false if there is none), or leave this grammar's table.
  bool TakeProgramPositions() const;
  void LeaveProgramPositions() const;
  // Atomic: two threads may precompute one grammar at once (lockstep_grammar_precompute).
  mutable std::atomic<bool> positions_from_program_{false};
  // Positions of DFA states: one slot per global state.
  mutable std::unique_ptr<std::atomic<const CfgPosition*>[]> dfa_positions_;
  // Positions of counter items, keyed by (rule, min(min - c, L), min(max - c, L)).
  mutable std::mutex counter_mu_;
  mutable std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, const CfgPosition*>
      counter_positions_;
  std::int32_t counter_clamp_;
  std::vector<const TokenTrie::CountedView*> counted_views_;  // per rule (MakeCountedView)

  // Tail checks done: the tail tokens of position `pos` that the parse accepts once `rule`
  // completes from a set of signature `origin_sig`. That is all they depend on (the completion
  // advances the origin set's items, whose signature fixes their futures), and the current
  // set's own signature is not: inside a string of `maxLength` 255 every byte is a new count,
  // so a new signature, but the same counter position, the same completion and the same tails
  // (an object of 130 optional members checked 424 tail nodes again at every byte, 0.5 ms).
  struct TailCheck {
    const CfgPosition* pos;
    std::int32_t rule, origin_sig;
    bool operator==(const TailCheck&) const = default;
  };
  struct TailCheckHash {
    std::size_t operator()(const TailCheck& t) const {
      const std::uint64_t r = static_cast<std::uint32_t>(t.rule);
      const std::uint64_t o = static_cast<std::uint32_t>(t.origin_sig);
      return std::hash<const void*>()(t.pos) ^ static_cast<std::size_t>(r * 0x9E3779B97F4A7C15ull) ^
             static_cast<std::size_t>(o << 21);
    }
  };
  mutable std::mutex tail_mu_;
  mutable std::unordered_map<TailCheck, std::vector<TokenId>, TailCheckHash> tail_checks_;

  // Signature interning.
  struct KeyHash {
    std::size_t operator()(const std::vector<std::int32_t>& v) const;
  };
  mutable std::mutex sig_mu_;
  mutable std::unordered_map<std::vector<std::int32_t>, std::int32_t, KeyHash> sig_ids_;
  static constexpr std::int32_t kMaxSignatures = 1 << 22;
  // Finished masks by signature, in chunks that double in size: chunk 0 holds signatures
  // [0, kChunk0), chunk k >= 1 holds [kChunk0 << (k - 1), kChunk0 << k). A grammar that
  // needs a few signatures allocates and clears a few hundred bytes, not a fixed big chunk.
  static constexpr std::int32_t kChunk0 = 64;
  static constexpr std::int32_t kNumChunks = 17;
  static_assert((kChunk0 << (kNumChunks - 1)) == kMaxSignatures);
  static std::int32_t ChunkOf(std::int32_t sig) {
    return sig < kChunk0 ? 0 : std::bit_width(static_cast<std::uint32_t>(sig)) - 6;
  }
  static std::int32_t ChunkBegin(std::int32_t c) { return c == 0 ? 0 : kChunk0 << (c - 1); }
  static std::int32_t ChunkSize(std::int32_t c) { return c == 0 ? kChunk0 : kChunk0 << (c - 1); }
  mutable std::atomic<std::atomic<std::uint32_t*>*> final_chunks_[kNumChunks];
  mutable std::mutex chunk_mu_;

  // Owner of every position; slots above point into it. Positions with equal content (common:
  // the states of a bounded repetition like [ \t\n]{0,64}) are stored once.
  // `owner`, if given, receives the owning pointer of the result.
  const CfgPosition* Publish(std::unique_ptr<CfgPosition> pos,
                             std::shared_ptr<const CfgPosition>* owner = nullptr) const;
  // A position from the vocabulary's shared ones (content_hash set), owned by this grammar too.
  const CfgPosition* Adopt(std::shared_ptr<const CfgPosition> pos,
                           std::shared_ptr<const CfgPosition>* owner = nullptr) const;
  mutable std::mutex owned_mu_;
  mutable std::vector<std::shared_ptr<const CfgPosition>> owned_;
  mutable std::unordered_map<std::uint64_t, std::vector<std::size_t>> by_content_;  // into owned_

  mutable std::atomic<std::int64_t> cache_bytes_{0};
  mutable std::atomic<std::int32_t> num_positions_{0};
  mutable std::atomic<std::int32_t> shared_positions_{0};
  mutable std::atomic<std::int64_t> sum_accepted_{0};
  mutable std::atomic<std::int64_t> sum_uncertain_{0};
  mutable std::atomic<std::int32_t> cached_masks_{0};
  std::vector<std::pair<TokenId, std::int32_t>> special_of_token_;  // (token, edge): <X>
  std::vector<std::pair<TokenId, std::int32_t>> all_but_token_;     // (token, edge): !<X>
  // The ids any negated item may take: every token of the vocabulary but EOS and unused ids
  // (built when the grammar has a negated item).
  std::vector<std::uint32_t> negatable_bits_;
  // Per rule: a unique-items list or a rule one reaches (empty when the program has none).
  std::vector<std::uint8_t> in_unique_list_;
  // Counted strings: tokens of at most this many bytes cannot open one past its bound (the
  // least max_chars - max_min_chars + 1 over the counted rules; FilterCountedStrings).
  std::int64_t counted_open_safe_ = std::numeric_limits<std::int64_t>::max();
  // Per rule: a unique-items list whose items can run out (CfgProgram::item_automaton_of).
  std::vector<std::uint8_t> list_runs_out_;
  // Per rule: a unique-items list whose items are strings counted at run time (max_chars).
  std::vector<std::uint8_t> list_counted_;
  // Per rule: a unique-items list of items of any type (CfgProgram::RuleInfo::unique_open_calls).
  std::vector<std::uint8_t> list_open_calls_;
  // Per rule: a unique-items list of closed objects (CfgProgram::RuleInfo::unique_search).
  std::vector<std::uint8_t> list_search_;
  bool has_search_lists_ = false;
  // CompileOptions::max_unique_search_bytes: the bytes a fill's searches for new items
  // (SearchUniqueItems) may try in all, and those after one accepted token; past it the tokens
  // left are left out of the mask (FillTrace::unique_search_over).
  std::int64_t unique_search_budget_ = 65536;
  // PatternVerdictsFor's, by local key (bounded by the cache budget, ReserveBytes).
  mutable std::mutex pattern_mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const PatternVerdicts>> pattern_cache_;
};

// The grammar's CfgGrammar, or null when it is a regex.
const CfgGrammar* CfgOf(const CompiledGrammar& g);

}  // namespace lockstep
