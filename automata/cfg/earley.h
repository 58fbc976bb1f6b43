// EarleyParser: the byte-level recogniser of a CfgProgram. One Earley set per byte consumed;
// items are (rule, state, origin set). Items point back at their origin sets, so the sets form
// a graph-structured stack shared by every parse alive at once: ambiguity and left recursion
// cost nothing special, and rolling back is truncating the set stack. Nullable rules follow
// Aycock & Horspool (advance over a nullable rule when predicting it). No recursion anywhere:
// nesting depth is bounded by an option, never by the C++ stack.
//
// Local mode (InitLocal) starts from a single item whose origin is the "bottom" (-1): the
// parse of one rule position in isolation, used to precompute token classes per position.
// When that item's rule completes, the set is marked (bottom_completed) instead of continuing.
//
// Bounded sets under repetition. A counted repetition of a body that can restart at every byte
// (`([^x]+){0,99}`) or match empty would keep one body item per origin set and one counter item
// per count, so every set would grow with the input. Three rules keep items whose futures are
// contained in another's out of the sets; each keeps the recognised language, and with it every
// mask, exactly as it was (docs/grammars.md, "Bounded sets"):
//   - saturated counts: of the counter items (C, c, j) with c past the minimum (any c when the
//     body is nullable), only the smallest count is kept: the future C^{0..max-c} shrinks as c
//     grows;
//   - merged origins: an item leaving the set o where its rule was predicted takes as its origin
//     the earliest set whose items waiting on that rule (and on the rules those predicted items
//     complete into) are the same as o's; equal waiting items mean equal futures. Only rules
//     repeated while an earlier instance is open (o holds an item of the rule from an earlier
//     origin) are keyed so; the others, a JSON value predicted once, keep o at no cost;
//   - subsumed origins: of the items a byte carries on with equal (rule, state) and origins o1,
//     o2, the one whose origin's waiting items are a subset of the other's is dropped.
// Unique items. A rule that is a unique-items list (CfgProgram::RuleInfo::unique_item) has its
// items checked: when an item of the list's item rule completes into the list, the parse goes
// on only if the item's key (UniqueKey: a string's decoded value, an integer's text) differs
// from every earlier item's of that list, read from the bytes since the list's origin
// (automata/cfg/unique_items.h keeps them, incrementally). Items that can run out
// (CfgProgram::item_completions) are also dropped when a byte leaves them no new way to finish,
// and a list before its next item when no value is left for it; so are strings counted at run
// time (an item rule with max_chars) that reach max_chars characters with only repeats left. The lists and their items keep
// their own origins (never merged), so those bytes are the list's and the item's. The checks
// need the text: they are made in parses from the root over bytes, not in local mode
// (positions are computed without them, and a pushed completion has no bytes); masks take them
// into account afterwards (CfgGrammar::FilterUniqueItems).
// String lengths. A rule with max_chars (CfgProgram::RuleInfo::max_chars: one JSON string whose
// maxLength would multiply its automaton past a budget) has its items counted: a byte that
// takes such an item past max_chars characters, or to a state from which the string cannot end
// within them (CfgProgram::min_chars), drops it. The count is read from the bytes since the
// item's origin (its rule keeps its origins, like a unique-items list), incrementally; like the
// unique-items checks it is made in parses from the root only, and masks take it into account
// afterwards (CfgGrammar::FilterCountedStrings).
// ECMAScript patterns. A rule with ecma_pattern (CfgProgram::RuleInfo::ecma_pattern: one JSON
// string whose value must be a regular expression, `format: regex`) has its items checked: a
// byte that completes a character after which no text makes the value a valid pattern
// (EcmaPatternChecker::Step), or closes the string on a value that is not one (Complete), drops
// the item. The checker's state is read from the bytes since the item's origin (its rule keeps
// its origins), incrementally; parses from the root only, like the checks above, and masks take
// it into account afterwards (CfgGrammar::FilterPatternStrings).
// A per-step budget (max_step_items) bounds what is left: a byte (or special token, or pushed
// completion) whose step creates or visits more items than that fails (items_exceeded), never a
// hang.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "automata/cfg/cfg_program.h"
#include "automata/cfg/unique_items.h"
#include "grammar/regex/ecma_pattern.h"

namespace lockstep {

struct EarleyItem {
  std::int32_t rule;
  std::int32_t state;   // kDfa: global DFA state; kCounter: repetitions done so far
  std::int32_t origin;  // set where the rule was predicted; -1: the bottom (local mode)
  std::int32_t depth;   // prediction depth (root = 0)
};

class EarleyParser {
 public:
  static constexpr std::int64_t kNoItemLimit = std::numeric_limits<std::int64_t>::max();
  // max_step_items: items one step may create or visit (see items_exceeded).
  EarleyParser(const CfgProgram* program, std::int32_t max_depth,
               std::int64_t max_step_items = kNoItemLimit);

  void InitRoot();
  void InitLocal(std::int32_t rule, std::int32_t state, std::int32_t depth);

  // Each appends one set and returns true, or returns false and leaves the parser unchanged.
  bool StepByte(std::uint8_t b);
  // The bytes some item of the last set can scan (StepByte refuses every other byte; one of
  // these may still be refused, by a check or a dead parse).
  void LiveBytes(std::bitset<256>* out) const;
  bool StepSpecial(std::int32_t special_index);
  // One token over the token edges that take it (take[i] != 0: edge i does): one set.
  bool StepTokenEdges(std::span<const std::uint8_t> take);
  // A text token that the grammar may take both as its bytes and over token edges (`take`, as
  // above): the byte path's sets, the last of which also holds the items the edges advanced
  // from the set before the token (when the byte path dies early: StepTokenEdges alone).
  // Returns false and leaves the parser unchanged when neither path takes it.
  bool StepBytesOrTokenEdges(std::string_view bytes, std::span<const std::uint8_t> take);
  // A set holding the items of set `origin` that wait on `rule`, advanced over it (the parse
  // right after `rule` completes with that origin), closed.
  bool PushCompletion(std::int32_t rule, std::int32_t origin);
  void PopTo(std::int32_t num_sets);

  std::int32_t num_sets() const { return static_cast<std::int32_t>(set_begin_.size()); }
  std::span<const EarleyItem> set(std::int32_t k) const {
    std::size_t e = k + 1 < num_sets() ? set_begin_[k + 1] : items_.size();
    return {items_.data() + set_begin_[k], items_.data() + e};
  }
  // Kernel items of set k: those not created by prediction in k. Every parse path from set k
  // starts in the closure of a kernel item.
  bool IsKernel(std::int32_t k, const EarleyItem& it) const {
    return it.origin < k || (k == 0 && &it == items_.data() + set_begin_[0]);
  }
  bool ItemAccepting(const EarleyItem& it) const;
  // Whether the item can still consume something (bytes, specials or a rule).
  bool ItemHasFuture(const EarleyItem& it) const;
  bool CanEnd() const;
  bool bottom_completed(std::int32_t k) const { return (meta_[k].flags & 1) != 0; }
  // Some prediction in set k was dropped because of max_depth.
  bool truncated(std::int32_t k) const { return (meta_[k].flags & 2) != 0; }
  // A prediction was dropped because of max_depth since the last ClearLimitFlags.
  bool depth_exceeded() const { return depth_exceeded_; }
  // A step failed because it would have created or visited more than max_step_items items,
  // since the last ClearLimitFlags.
  bool items_exceeded() const { return items_exceeded_; }
  void ClearLimitFlags() {
    depth_exceeded_ = false;
    items_exceeded_ = false;
  }
  std::int32_t max_depth() const { return max_depth_; }
  std::int64_t max_step_items() const { return max_step_items_; }
  const CfgProgram& program() const { return *p_; }
  // Unique items (see above). Whether the program has unique-items lists.
  bool has_unique_items() const { return has_unique_; }
  // String lengths (see above). Whether the program has counted strings.
  bool has_counted_strings() const { return has_counted_; }
  // The counted strings under way in the last set (parses from the root only): each item of a
  // counted rule there that can still take bytes, with the characters its string has so far.
  struct CountedString {
    std::int32_t rule, state, origin, chars;
    std::uint8_t mode;  // JsonCharMode after the last set's byte
  };
  void OpenCountedStrings(std::vector<CountedString>* out);
  // The number of items of the last set that take bytes (a kDfa state with byte edges).
  std::int32_t ScanningItems() const;
  // ECMAScript patterns (see above). Whether the program has strings checked as patterns.
  bool has_pattern_strings() const { return has_patterns_; }
  // A pattern string's text read so far: where its JSON text stands, and the checker of its
  // value.
  struct PatternRead {
    JsonTextDecoder text;
    EcmaPatternChecker check;
    bool dead = false;  // some character or the closing quote failed the check
  };
  // The pattern strings under way in the last set (parses from the root only): each item of a
  // checked rule there that can still take bytes, with its text read so far.
  struct PatternString {
    std::int32_t rule, state, origin;
    PatternRead read;
  };
  void OpenPatternStrings(std::vector<PatternString>* out);
  // Advances `read` over byte b: false when b leaves no valid pattern (the item would drop).
  static bool PatternStep(PatternRead* read, std::uint8_t b);
  // The byte that made set k (-1: a special token, a pushed completion, set 0).
  std::int32_t set_byte(std::int32_t k) const { return meta_[k].byte; }
  // The unique-items lists open in the last set: (list rule, origin) of the items of list rules
  // in it and in the origin sets of its items (an item of the list's item rule, or of a rule
  // such an item calls), distinct, at most `max`; `deep`: from any depth below them (else up to
  // four levels). `inside[r]`: rule r is a list or reachable
  // from one (only such items are followed up to their origins).
  void OpenUniqueLists(std::span<const std::uint8_t> inside,
                       std::vector<std::pair<std::int32_t, std::int32_t>>* out,
                       std::size_t max = 8, bool deep = false) const;
  // The items of the list whose rule was predicted in set `origin`, read up to the last set
  // (its scan then shows the item under way); null when that text is not all bytes.
  const UniqueListItems* ReadUniqueList(std::int32_t origin);
  std::size_t MemoryBytes() const {
    return items_.capacity() * sizeof(EarleyItem) + set_begin_.capacity() * sizeof(std::int32_t) +
           meta_.capacity() * sizeof(SetMeta) + origins_.capacity() * sizeof(OriginEntry) +
           origin_buckets_.capacity() * sizeof(std::int32_t);
  }

 private:
  // Scans into the open set: set `prev`'s items over byte b; set `from`'s items over the token
  // edges i with takes(i).
  void ScanByte(std::int32_t prev, std::uint8_t b);
  template <typename Takes>
  void ScanTokenEdges(std::int32_t from, Takes takes);
  // Origin classes (merged origins). One entry per (set, rule) whose items left that set: the
  // set's representative for the rule (itself or an earlier set with the same waiting items).
  // Entries of a set are listed from meta_[set].origin_head; representatives that are their own set
  // are also chained in origin_buckets_ by the hash of their key. Entries of popped sets are
  // freed, and a representative is never later than its set, so none outlives its set.
  struct OriginEntry {
    std::uint64_t hash = 0;
    std::int32_t set = 0, rule = 0, depth = 0, rep = 0;
    std::int32_t next_in_set = -1;
    std::int32_t next_in_bucket = -1;
    // Representatives only (rep == set): the key, and the indices (into items_) of the set's
    // items waiting on `rule`, which a completion of `rule` into the set advances. (Kept when
    // the entry is freed: reused entries do not allocate again.)
    std::vector<std::int32_t> key;
    std::vector<std::int32_t> waiting;
  };
  static constexpr std::int32_t kSelf = -2;  // an origin that is the keyed set itself

  void Reset();
  void BeginSet();
  bool EndSet();  // closes the set under construction; false (and discarded) if empty
  void Add(const EarleyItem& it);
  void Append(const EarleyItem& it);  // no dedupe: appends and indexes
  void RebuildTable();
  // A counter item whose count is past the point where counts saturate.
  void AddSaturated(const EarleyItem& it);
  // budgeted: stops once the step is over budget (the step is then abandoned).
  void Closure(std::int32_t k, bool budgeted);
  void Complete(std::int32_t rule, std::int32_t origin, std::int32_t k);
  void Predict(std::int32_t rule, std::int32_t k, std::int32_t depth);
  // Advances `p`, an item of set `from`, over a completed `rule`; appends to the current set.
  void AdvanceOver(const EarleyItem& p, std::int32_t rule, std::int32_t from);
  // Count from which counter items of `rule` saturate (INT32_MAX: never, a DFA rule).
  std::int32_t SaturatesFrom(std::int32_t rule) const {
    const CfgProgram::RuleInfo& r = p_->rules[rule];
    if (r.kind != CfgProgram::RuleKind::kCounter) return std::numeric_limits<std::int32_t>::max();
    return p_->rules[r.child].nullable ? 0 : r.min;
  }
  bool WaitsOn(const EarleyItem& q, std::int32_t rule) const;
  // Whether set o may hold an item of `rule` from an earlier origin (no: its items of the rule
  // keep o as their origin, see OriginOf).
  bool MayRepeat(std::int32_t o, std::int32_t rule);
  // SetMeta::waiting of set o, built on first need.
  const std::vector<std::pair<std::int32_t, std::int32_t>>& WaitingIndex(std::int32_t o);
  // The origin an item of `rule` (at `depth`) predicted in set o takes when it leaves o; only
  // for a rule o repeats (MayRepeat), whose items the entry keys.
  std::int32_t OriginOf(std::int32_t o, std::int32_t rule, std::int32_t depth);
  // What the future of an item (rule, *, o) depends on: for `rule` and every rule that o's
  // waiting items predicted in o itself complete into, o's items waiting on it (origin o
  // written kSelf), sorted. Equal keys: equal futures; a key within another (each group a
  // subset): a future within the other's.
  // `waiting`, if given, receives the indices of o's items waiting on `rule` itself.
  void OriginKey(std::int32_t o, std::int32_t rule, std::int32_t depth,
                 std::vector<std::int32_t>& key, std::vector<std::int32_t>* waiting = nullptr);
  // The keyed representative entry of set o for `rule` (-1: none).
  std::int32_t HeadEntry(std::int32_t o, std::int32_t rule) const;
  // Set o's newest entry for (rule, depth), -1 if none (OriginOf's lookup).
  std::int32_t FindEntry(std::int32_t o, std::int32_t rule, std::int32_t depth) const;
  // Lists entry e (just made, at the head of set o's list) in the set's index, building the
  // index once the list is longer than kEntryScan.
  void IndexEntry(std::int32_t o, std::int32_t e);
  static constexpr std::int32_t kEntryScan = 16;
  static bool KeyWithin(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b);
  void UnlinkOrigin(std::int32_t e);
  void GrowOriginBuckets();
  // Drops the scanned items of the set under construction whose futures another one holds.
  void SubsumeScanned();
  // Closes the set under construction (k) after its scan; false (and discarded) if it is empty
  // or the step went over budget.
  bool FinishStep(std::int32_t k);
  // The step's items so far (those it created, and those it visited) are past max_step_items:
  // the step is abandoned.
  bool OverBudget() const {
    return step_items_ + static_cast<std::int64_t>(items_.size() - cur_begin_) > max_step_items_;
  }

  // Unique items: whether an item of `rule` completing into list item p (predicted in set
  // `list_origin`), the item predicted in set `item_origin`, differs from the list's earlier
  // items. True when the check does not apply (local mode, bytes unknown).
  bool UniqueItemOk(std::int32_t list_origin, std::int32_t item_origin);
  // Reads the list predicted in `origin` into unique_list_ up to set `upto`; false when a set
  // on the way has no byte.
  bool ReadListTo(std::int32_t origin, std::int32_t upto);
  // Whether set k still has a parse that can go on or end: after the check dropped an item's
  // list, the set may hold only finished items (the item's own), which are no parse at all;
  // list items judged full (dead_lists_) do not count.
  bool SetLive(std::int32_t k) const;
  // Items that can run out (CfgProgram::item_automaton_of): whether the item under way in
  // automaton rule `rule` since set `item_origin`, at automaton state `state` after the bytes
  // up to the set under construction, can still finish with a value none of its list's earlier
  // items has (true when no list waits on it there).
  bool ItemStaysNew(std::int32_t rule, std::int32_t item_origin, StateId state);
  // Whether the list item `q` (a list predicted in q.origin, before an item) can still take a
  // new item: false when every value of its items is among the list's items so far.
  bool ListHasRoom(const EarleyItem& q);
  // Whether some way to finish from `state` of automaton rule `a`, after `prefix`, gives a key
  // the list does not have.
  // With `char_mode` (a JSON string's character mode at `state`, for a string at its
  // maxLength), only the ways that start no new character.
  bool SomeNewCompletion(StateId state, const std::string& prefix, std::int32_t char_mode = -1);
  // Strings counted at run time as items (a unique list's item rule with max_chars): whether
  // the item under way since `item_origin`, at state `t` after byte `b` (read from set `prev`),
  // can still finish with a value none of its list's earlier items has. Short of max_chars
  // characters it can (every character of Unicode is a way on, more than a list holds); at
  // max_chars only the rest of the character under way and the closing quote are left, and
  // those ways are tried (SomeNewCompletion with the character mode).
  bool CountedItemStaysNew(std::int32_t rule, std::int32_t item_origin, std::int32_t prev,
                           std::uint8_t b, StateId t);
  // String lengths: the characters and mode after set `upto` of the string whose rule was
  // predicted in set `origin` (count_ keeps them, from set count_origin_ on); false when a set
  // on the way has no byte.
  struct CharCount {
    std::int32_t chars;
    std::uint8_t mode;
  };
  bool CountTo(std::int32_t origin, std::int32_t upto, CharCount* out);
  // Whether an item of counted rule `rule` predicted in set `origin`, in set `prev`, may take
  // byte b to state t.
  bool LengthOk(std::int32_t rule, std::int32_t origin, std::int32_t prev, std::uint8_t b,
                StateId t);
  // ECMAScript patterns: the text read after set `upto` of the pattern string whose rule was
  // predicted in set `origin` (pattern_ keeps them, from set pattern_origin_ on); null when a
  // set on the way has no byte.
  const PatternRead* PatternTo(std::int32_t origin, std::int32_t upto);
  bool has_patterns_ = false;
  std::int32_t pattern_origin_ = -1;
  std::vector<PatternRead> pattern_;
  bool has_counted_ = false;
  std::int32_t count_origin_ = -1;
  std::vector<CharCount> count_;
  bool has_finite_ = false;  // some list's items can run out
  bool has_counted_items_ = false;  // some list's items are strings counted at run time
  std::vector<std::uint8_t> counted_item_;  // per rule: such an item rule
  std::vector<std::int32_t> automaton_of_list_;  // per rule: its items' automaton rule, or -1
  std::vector<std::int32_t> dead_lists_;  // indices (into items_) of the step's full list items
  std::string unique_key_;
  bool has_unique_ = false;
  bool unique_checks_ = false;  // InitRoot: on; InitLocal: off
  bool unique_dropped_ = false;  // the step under way dropped a completion (UniqueItemOk)
  std::vector<std::uint8_t> unique_rule_;  // per rule: a list or a list's item rule (never merged)
  UniqueListItems unique_list_;
  std::string unique_scratch_, unique_value_, unique_prefix_;
  std::string unique_raw_;  // ItemStaysNew: the item's bytes so far (kept for its capacity)
  std::vector<std::vector<std::uint8_t>> class_bytes_;  // per byte class, its bytes (lazily)

  const CfgProgram* p_;
  std::int32_t max_depth_;
  std::int64_t max_step_items_;
  // Items visited by the step under way (completions' waiting items, keys' sets, repeated
  // predictions); with the items it created, its cost.
  std::int64_t step_items_ = 0;
  bool depth_exceeded_ = false;
  bool items_exceeded_ = false;
  std::vector<EarleyItem> items_;
  std::vector<std::int32_t> set_begin_;
  struct SetMeta {
    // Bit r % 63: the set may hold an item of rule r from an earlier origin that can still go
    // on (a rule repeated while an earlier instance is open; see OriginOf); bit 63: computed
    // (on first need).
    std::uint64_t older = 0;
    // The exact rules, sorted, behind the bits (a set inside a long list of optional members,
    // each its own rule, saturates the 63 bits): MayRepeat answers exactly, so that an item
    // leaving the set never scans it (a scan per item was quadratic per byte).
    std::vector<std::int32_t> older_rules;
    // A set of more than kIndexWaiting items whose scans wasted kWasteBeforeIndex times its
    // size: (rule, item) for every item that waits on the rule, sorted. A chain of nested rules
    // completing in one step (a long list of optional members, each its own rule) scanned the
    // whole origin set per completion.
    std::vector<std::pair<std::int32_t, std::int32_t>> waiting;
    std::int32_t origin_head = -1;  // its origin entries, the newest first
    // Past kEntryScan entries, two open-addressing tables of entry indices (-1 empty): the
    // newest entry per (rule, depth) and per rule. With n alternatives each predicting its own
    // rule again, every item leaving the set looked its entry up along the list: n^2 / 2 steps
    // per byte, uncounted by the item budget (1.3 ms per byte for 1,000 alternatives).
    std::int32_t num_entries = 0;
    std::vector<std::int32_t> entry_by_key, entry_by_rule;
    std::uint8_t flags = 0;         // 1 = bottom completed, 2 = truncated, 4 = waiting built
    std::int16_t byte = -1;         // the byte that made the set (set_byte)
    std::size_t wasted = 0;  // items its scans passed over without adding one (until indexed)
  };
  std::vector<SetMeta> meta_;  // per set
  // Dedupe of the set under construction: linear scan while small, then a hash table.
  std::vector<std::int32_t> table_;
  bool table_active_ = false;
  std::size_t cur_begin_ = 0;
  std::size_t closure_end_ = 0;  // Closure has processed (or is processing) the items below it
  // Saturated counter items of the set under construction (indices into items_).
  std::vector<std::int32_t> saturated_;
  // Per rule: the step (set_stamp_) in which it was last predicted. A set's predictions of a
  // rule are one item, and a few hundred counter items predicting one body each cost a compare.
  std::vector<std::uint32_t> predicted_;
  std::uint32_t set_stamp_ = 0;

  // Origin classes.
  std::vector<OriginEntry> origins_;
  std::vector<std::int32_t> origin_free_;
  std::vector<std::int32_t> origin_buckets_;  // power of two
  std::int32_t origin_heads_ = 0;
  // Scratch.
  std::vector<std::int32_t> key_a_, waiting_a_, rel_;
  std::vector<std::array<std::int32_t, 5>> tuples_;  // (rule, state, origin, depth, index)
  std::vector<std::array<std::int32_t, 3>> groups_;
  std::vector<std::int32_t> members_, member_entry_;
  std::vector<std::size_t> order_;
  std::vector<std::uint8_t> drop_;
  std::array<std::uint64_t, 64> seen_{};
  // LiveBytes' answer per DFA state met (a search for a new unique item asks at every byte it
  // tries); dropped past kMaxLiveStates entries.
  static constexpr std::size_t kMaxLiveStates = 4096;
  mutable std::unordered_map<StateId, std::bitset<256>> live_bytes_;
};

}  // namespace lockstep
