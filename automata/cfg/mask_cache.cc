// CfgGrammar's masks (cfg_grammar.h): the interned signature of a parser state, the finished-mask
// cache by signature, and the fill: the union of the kernel positions' accepted sets, their tails
// checked against the parse, end and special tokens; the whole-trie walk near the depth limit.
#include "automata/cfg/cfg_grammar.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

#include "automata/cfg/unique_search.h"
#include "automata/cfg/word_kernels.h"
#include "grammar/base/utf8.h"

namespace lockstep {
using namespace cfg_words;  // NOLINT: the word kernels of this folder

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
  if (unique_checks > 0) return "unique";
  if (length_checks > 0) return "length";
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

bool CfgGrammar::AddEndAndSpecials(EarleyParser& parser, std::span<std::uint32_t> out,
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
  bool dense = false;
  for (const auto& [tok, idx] : all_but_token_) {
    if (parser.StepSpecial(idx)) {
      AddAllTokensBut(tok, out);
      dense = true;
      parser.PopTo(base);
    }
  }
  parser.ClearLimitFlags();
  return dense;
}

void CfgGrammar::AddAllTokensBut(TokenId excluded, std::span<std::uint32_t> out) const {
  const std::size_t words = std::min(out.size(), negatable_bits_.size());
  const std::size_t skip = static_cast<std::size_t>(excluded) >> 5;
  for (std::size_t w = 0; w < words; ++w) {
    std::uint32_t add = negatable_bits_[w];
    if (w == skip) add &= ~(1u << (excluded & 31));
    out[w] |= add;
  }
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
  const FillKeyBudget key_budget;
  FillMaskOfGrammar(parser, sigs, out);
  if (parser.has_unique_items()) FilterUniqueItems(parser, out);
  if (parser.has_counted_strings()) FilterCountedStrings(parser, out);
  if (parser.has_pattern_strings()) FilterPatternStrings(parser, out);
}

void CfgGrammar::FillMaskOfGrammar(EarleyParser& parser, std::vector<std::int32_t>& sigs,
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
    if (background_ && CurrentFillTrace().positions_walked != walked_before) {
      if (!program_.IsCounter(it.rule)) {
        bg_hint_.store(it.state, std::memory_order_relaxed);
      } else {
        bg_counter_hint_.store(std::int64_t{it.rule} << 32 | static_cast<std::uint32_t>(it.state),
                               std::memory_order_relaxed);
      }
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
  thread_local std::vector<TokenId> passed;
  for (std::int32_t a = 0; a < nk; ++a) {
    const CfgPosition* pos = positions[a];
    if (pos->tails.size() <= 1) continue;
    const EarleyItem it = kernels[a];
    // The verdict on these tails, when the origin set is signed: checked before, or kept (see
    // tail_checks_).
    const std::int32_t osig = !simple && it.origin < k && it.origin < std::ssize(sigs)
                                  ? sigs[it.origin]
                                  : -1;
    if (osig >= 0) {
      std::lock_guard<std::mutex> lock(tail_mu_);
      auto f = tail_checks_.find({pos, it.rule, osig});
      if (f != tail_checks_.end()) {
        for (const TokenId t : f->second) SetBitRecording(out, t, record ? &added : nullptr);
        ++CurrentFillTrace().tails_reused;
        continue;
      }
    }
    passed.clear();
    // (A check a limit cut short is not kept: max_depth, max_step_items.)
    const bool cut_before = parser.items_exceeded() || parser.depth_exceeded();
    if (parser.PushCompletion(it.rule, it.origin)) {
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
          if (osig >= 0) passed.push_back(pos->tail_tokens[t]);
        }
        ++i;
      }
      parser.PopTo(base);
    }
    if (osig >= 0 && !cut_before && !parser.items_exceeded() && !parser.depth_exceeded() &&
        ReserveBytes(static_cast<std::int64_t>(passed.size() * sizeof(TokenId) + 64))) {
      std::lock_guard<std::mutex> lock(tail_mu_);
      tail_checks_.try_emplace({pos, it.rule, osig}, passed);
    }
  }
  const bool dense = AddEndAndSpecials(parser, out, record ? &added : nullptr);
  const bool too_deep = check_from != std::numeric_limits<std::int64_t>::max();
  if (too_deep) ClearTooDeep(parser, check_from, out);
  if (too_deep || dense) {
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

// --- unique items ----------------------------------------------------------------------------------
//
// The mask of the grammar holds every token the unique-items check could refuse: positions are
// computed in local mode and tails over pushed completions, where the check does not apply. A
// token the check refuses completes an item (a string, an integer, an enum value) equal to an
// earlier one of its list, or, where the values can run out, leaves one with only repeats to
// finish with. Either
// that item is the first the token completes, in the list open at the parse's end (the walk
// below finds those tokens: the item's text so far, then the token's bytes, must spell an
// earlier item's value), or the token holds a comma followed by a whole string
// (TokenTrie::CommaQuotes).
// Each such token still in the mask is run through the parser, which makes the check; the ones
// it refuses are cleared. Both sets are small: the walk follows only the earlier items' values.

namespace {

// The walk's state after each byte.
struct UniqueWalkState {
  // 0: between items, 1: in a string, 2: after a backslash, 3: in \uXXXX, 4: in a bare item (a
  // number or literal)
  std::uint8_t mode = 0;
  std::uint8_t hex = 0;   // mode 3: digits read
  std::uint32_t cp = 0;   // mode 3: value so far
  std::string key;        // modes 1-4: the item's key so far (UniqueKey: "s" + value, "x" + text)
};

// Some key of `sorted` starts with `prefix`.
bool SomeKeyStartsWith(const UniqueListItems::Keys& sorted, const std::string& prefix) {
  auto it = sorted.lower_bound(prefix);
  return it != sorted.end() && it->first.compare(0, prefix.size(), prefix) == 0;
}

bool Blank(std::uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }

// A bare item's text so far ("x" + text) is an earlier item's value (UniqueKey: "-0" is keyed
// as "0", 1.0 as 1).
bool BareKeyIn(const UniqueListItems::Keys& sorted, const std::string& key) {
  if (PlainInteger(std::string_view(key).substr(1))) {
    return sorted.count(key == "x-0" ? std::string("x0") : key) != 0;
  }
  // (A number ends with a digit; a literal is its text.)
  const char last = key.back();
  if (last < '0' || last > '9') return sorted.count(key) != 0;
  std::string canonical;
  return UniqueKey(std::string_view(key).substr(1), &canonical) && sorted.count(canonical) != 0;
}

bool NumberByte(std::uint8_t b) {
  return (b >= '0' && b <= '9') || b == '.' || b == 'e' || b == 'E' || b == '+' || b == '-';
}

// How a walk of bare items reads the keys: `any_numbers`, items of any type (whose numbers are
// spelt in every JSON way: a number's key is not its text); `hex_keys`, some key is a number's
// exact binary form (an integer past 2^64 or a fraction), which no text starts with.
struct BareKeys {
  bool any_numbers = false;
  bool hex_keys = false;
  bool number_keys = false;  // some key is a number's
};

BareKeys ReadBareKeys(const UniqueListItems::Keys& sorted, bool any_numbers) {
  BareKeys k;
  k.any_numbers = any_numbers;
  for (auto it = sorted.lower_bound(std::string_view("x")); it != sorted.end() && it->first[0] == 'x';
       ++it) {
    if (it->first.find('p') != std::string::npos) k.hex_keys = true;
    if (it->first.size() > 1 && (it->first[1] == '-' || (it->first[1] >= '0' && it->first[1] <= '9')))
      k.number_keys = true;
  }
  return k;
}

// A bare item whose text so far is key's ("x" + text) may still equal an earlier item: a
// literal's prefix that some key starts with; a number, unless its keys are its texts (an
// integer of up to 18 digits in a list of integers with no number's binary form among the
// keys) and no key starts with its text.
bool BareMayRepeat(const UniqueListItems::Keys& sorted, const std::string& key, const BareKeys& k) {
  const char c = key.size() > 1 ? key[1] : '0';
  if (c == 't' || c == 'f' || c == 'n') return SomeKeyStartsWith(sorted, key);
  if (c != '-' && (c < '0' || c > '9')) return false;  // (no JSON value: the grammar has it off)
  if (!k.number_keys) return false;  // (a number repeats only a number)
  if (k.any_numbers || k.hex_keys) return true;
  if (key == "x-" || key == "x-0") return true;  // (-0 is 0)
  if (!PlainInteger(std::string_view(key).substr(1))) return true;
  return SomeKeyStartsWith(sorted, key);
}

// Some literal ("xtrue", "xfalse", "xnull") that `key` is a proper prefix of is an earlier item:
// the item under way can only finish as it.
bool LiteralLeftIsKey(const UniqueListItems::Keys& sorted, const std::string& key) {
  for (const char* lit : {"xtrue", "xfalse", "xnull"}) {
    const std::string_view l(lit);
    if (key.size() < l.size() && l.substr(0, key.size()) == key && sorted.count(l) != 0)
      return true;
  }
  return false;
}

enum class WalkStep : std::uint8_t { kOn, kDead, kDuplicate, kUnsure };

struct ObjectKeyMemo {
  bool known = false;  // the text read as one JSON value
  std::string key;
};

// Lists of objects: whether the token `bytes`, read from `scan` (the list's text so far),
// completes an object item whose key (UniqueKey) is an earlier item's, or another item's
// completed earlier in the token. Only a closing brace completes such an item, so the callers
// try tokens with one. `memo` keeps the answers for the item under way, by the token's bytes up
// to where it closes it (most tokens that close it close it the same way: `}`, `},`, `}]`).
bool ObjectTokenRepeats(const UniqueListScan& scan, const UniqueListItems::Keys& keys,
                        std::string_view bytes,
                        std::unordered_map<std::string, ObjectKeyMemo>& memo) {
  UniqueListScan s;
  s.depth = scan.depth;
  s.struct_string = scan.struct_string;
  s.struct_escape = scan.struct_escape;
  std::ptrdiff_t begin = s.depth > 0 ? -1 : 0;  // where the item under way starts in the token
  std::string text, key;
  std::vector<std::string> in_token;  // keys of the items the token completes
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<std::uint8_t>(bytes[i]);
    if (s.depth == 0) {
      if (b == ']') return false;  // (the list ends: what follows is not its items)
      if (b == '{' || b == '[') {
        s.depth = 1;
        s.struct_string = s.struct_escape = false;
        begin = static_cast<std::ptrdiff_t>(i);
      }
      continue;  // (whitespace and commas between items)
    }
    if (!StepStructByte(s, b)) continue;
    if (begin < 0) {
      auto [m, fresh] = memo.try_emplace(std::string(bytes.substr(0, i + 1)));
      if (fresh) {
        text = scan.raw;
        text.append(m->first);
        m->second.known = UniqueKey(text, &m->second.key);
      }
      if (!m->second.known) continue;
      if (keys.count(m->second.key) != 0) return true;
      in_token.push_back(m->second.key);
    } else {
      if (!UniqueKey(bytes.substr(static_cast<std::size_t>(begin), i + 1 - begin), &key)) continue;
      if (keys.count(key) != 0 ||
          std::find(in_token.begin(), in_token.end(), key) != in_token.end()) {
        return true;
      }
      in_token.push_back(key);
    }
  }
  return false;
}

// One byte of the walk from `st`. kDuplicate: the byte completes an item equal to an earlier
// one; kUnsure: the walk cannot follow on cheaply (a surrogate escape), so every token on from
// here is checked; kDead: the item under way can no longer equal an earlier one.
WalkStep StepWalk(UniqueWalkState& st, std::uint8_t b, const UniqueListItems::Keys& keys,
                  const BareKeys& bare) {
  switch (st.mode) {
    case 0:
      if (Blank(b) || b == ',') return WalkStep::kOn;
      if (b == ']' || b == '[' || b == '{' || b == '}' || b == ':') return WalkStep::kDead;
      if (b == '"') {
        st.mode = 1;
        st.key.assign(1, 's');
      } else {
        st.mode = 4;
        st.key.assign(1, 'x');
        st.key.push_back(static_cast<char>(b));
      }
      break;
    case 1:
      if (b == '"') {
        return keys.count(st.key) != 0 ? WalkStep::kDuplicate : WalkStep::kDead;
      }
      if (b == '\\') {
        st.mode = 2;
        return WalkStep::kOn;
      }
      if (b < 0x20) return WalkStep::kDead;
      st.key.push_back(static_cast<char>(b));
      break;
    case 2: {
      if (b == 'u') {
        st.mode = 3;
        st.hex = 0;
        st.cp = 0;
        return WalkStep::kOn;
      }
      const int c = JsonEscapeChar(b);
      if (c < 0) return WalkStep::kDead;
      st.mode = 1;
      st.key.push_back(static_cast<char>(c));
      break;
    }
    case 3: {
      const int h = JsonHexDigit(b);
      if (h < 0) return WalkStep::kDead;
      st.cp = st.cp * 16 + static_cast<std::uint32_t>(h);
      if (++st.hex < 4) return WalkStep::kOn;
      if (st.cp >= 0xD800 && st.cp <= 0xDFFF) return WalkStep::kUnsure;
      st.mode = 1;
      AppendUtf8(static_cast<char32_t>(st.cp), &st.key);
      break;
    }
    default:
      if (Blank(b) || b == ',' || b == ']') {
        return BareKeyIn(keys, st.key) ? WalkStep::kDuplicate : WalkStep::kDead;
      }
      st.key.push_back(static_cast<char>(b));
      if (st.key.size() > 2 && (st.key[1] == '-' || (st.key[1] >= '0' && st.key[1] <= '9')) &&
          !NumberByte(b)) {
        return WalkStep::kDead;  // (not a number: the grammar has it off)
      }
      return BareMayRepeat(keys, st.key, bare) ? WalkStep::kOn : WalkStep::kDead;
  }
  if (st.mode == 4) return BareMayRepeat(keys, st.key, bare) ? WalkStep::kOn : WalkStep::kDead;
  return SomeKeyStartsWith(keys, st.key) ? WalkStep::kOn : WalkStep::kDead;
}

}  // namespace

namespace {

bool InMask(std::span<const std::uint32_t> out, std::int32_t width, TokenId id) {
  return id >= 0 && id < width && ((out[id >> 5] >> (id & 31)) & 1) != 0;
}

}  // namespace

void CfgGrammar::FilterUniqueItems(EarleyParser& parser, std::span<std::uint32_t> out) const {
  thread_local std::vector<std::pair<std::int32_t, std::int32_t>> lists;
  thread_local std::vector<TokenId> check;
  // (Lists of closed objects: every list open, from any depth inside their items.)
  parser.OpenUniqueLists(in_unique_list_, &lists, has_search_lists_ ? 64 : 8, has_search_lists_);
  check.clear();
  thread_local std::vector<std::int32_t> searched;  // origins of open lists of closed objects
  searched.clear();
  const TokenTrie::CommaQuoteTokens& commas = trie_->CommaQuotes(*vocab_);
  bool runs_out = false;  // a list open whose items can run out
  bool other_lists = false;  // a list open that is not one of objects
  for (const auto& [rule, origin] : lists) {
    // Lists whose items can run out: a token may also leave the item under way (or the next
    // one, after a comma) with only repeats to finish with. Such a token follows an earlier
    // item's key all along (those of the item under way), or has a comma.
    // (Strings counted at run time: a token that ends following an earlier item at maxLength
    // may leave only that item's value, so such tokens are checked too; their lists do not run
    // out.)
    const bool finite = list_runs_out_[rule] != 0 || list_counted_[rule] != 0;
    runs_out = runs_out || list_runs_out_[rule] != 0;
    const bool any_type = list_open_calls_[rule] != 0;
    const UniqueListItems* items = parser.ReadUniqueList(origin);
    if (has_search_lists_ && list_search_[rule] != 0) {
      // Closed objects: searched below, once the other lists are done (it steps the parser);
      // a string item beside them goes on as in the other lists.
      searched.push_back(origin);
      if (items != nullptr && items->scan().depth > 0) continue;
    } else if (items != nullptr &&
               (items->scan().depth > 0 || SomeKeyStartsWith(items->keys(), std::string(1, 'o')))) {
      ObjectListTokens(*items, any_type, out, &check);
      // Inside an object item no string or bare item is under way; between items, the list
      // may also hold strings (open ones beside objects): the walk below.
      if (items->scan().depth > 0) continue;
    }
    other_lists = true;
    // Items of any type: a token that starts an item after a comma may leave it with only a
    // literal to finish with, which an earlier item (or one the token completes) may be.
    if (any_type) {
      for (TokenId id : commas.literal_after)
        if (InMask(out, width_, id)) check.push_back(id);
    }
    if (items == nullptr || items->size() == 0) continue;
    ScalarListTokens(*items, finite, any_type, out, &check);
  }
  // Tokens that complete a second item: in a list open at the end of the text (any of them), or
  // in one the token opens itself (those with a bracket first; the only ones when no list is
  // open). With items that can run out, every token with a comma.
  for (TokenId id : commas.opening)
    if (InMask(out, width_, id)) check.push_back(id);
  for (TokenId id : commas.brace_pairs)  // (two object items completed in one token)
    if (InMask(out, width_, id)) check.push_back(id);
  if (other_lists) {
    for (TokenId id : runs_out ? commas.comma : commas.other)
      if (InMask(out, width_, id)) check.push_back(id);
  }
  if (!searched.empty()) {
    std::int64_t budget = unique_search_budget_;
    for (std::int32_t origin : searched) SearchUniqueItems(parser, origin, out, &budget);
  }
  if (check.empty()) return;
  std::sort(check.begin(), check.end());
  check.erase(std::unique(check.begin(), check.end()), check.end());
  const std::int32_t base = parser.num_sets();
  for (TokenId id : check) {
    bool ok = true;
    for (unsigned char c : vocab_->TokenBytes(id)) {
      if (!parser.StepByte(c)) {
        ok = false;
        break;
      }
    }
    parser.PopTo(base);
    if (!ok) out[id >> 5] &= ~(1u << (id & 31));
  }
  parser.ClearLimitFlags();
  CurrentFillTrace().unique_checks += static_cast<std::int32_t>(check.size());
}

void CfgGrammar::ObjectListTokens(const UniqueListItems& items, bool any_type,
                                  std::span<const std::uint32_t> out,
                                  std::vector<TokenId>* check) const {
  // A list with objects (whose items are open: any of them can take one more member, so the
  // check as items complete is all it takes): the tokens in the mask that close an item equal
  // to an earlier one, read as text from where the list stands.
  thread_local std::unordered_map<std::string, ObjectKeyMemo> object_memo;
  object_memo.clear();
  const UniqueListScan& scan = items.scan();
  const TokenTrie::CommaQuoteTokens& commas = trie_->CommaQuotes(*vocab_);
  // (A string or bare item under way, beside objects: the text read from here is not an
  // object's, so each such token goes to the parser.)
  const bool scalar = scan.in_string || scan.in_bare;
  const auto add = [&](std::span<const TokenId> ids) {
    for (TokenId id : ids) {
      if (InMask(out, width_, id) &&
          (scalar || ObjectTokenRepeats(scan, items.keys(), vocab_->TokenBytes(id), object_memo))) {
        check->push_back(id);
      }
    }
  };
  add(commas.brace);
  if (any_type) add(commas.bracket);  // (items of any type: arrays too, which end with `]`)
}

void CfgGrammar::ScalarListTokens(const UniqueListItems& items, bool finite, bool any_type,
                                  std::span<const std::uint32_t> out,
                                  std::vector<TokenId>* check) const {
  thread_local std::vector<UniqueWalkState> stack;
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  const std::uint32_t n = static_cast<std::uint32_t>(trie_->num_nodes());
  // (A reference into the parser's list reader: nothing reads another list or steps the parser
  // during this list's walk.)
  const UniqueListItems::Keys& keys = items.keys();
  const BareKeys bare = ReadBareKeys(keys, any_type);
  // The walk's state at the parse's end: between items, or inside the item under way.
  UniqueWalkState start;
  const UniqueListScan& scan = items.scan();
  if (scan.in_bare) {
    start.mode = 4;
    start.key = "x" + scan.raw;
    if (!BareMayRepeat(keys, start.key, bare)) return;  // (comma tokens cover the rest)
  } else if (scan.in_string) {
    std::string raw = scan.raw;
    if (scan.escape) raw.pop_back();  // (the backslash: the walk takes it from mode 2)
    // The decoded value so far: the raw text closed, unless it ends inside a \u escape.
    const std::size_t u = raw.rfind("\\u");
    std::size_t keep = raw.size();
    if (u != std::string::npos && raw.size() - u < 6) keep = u;
    std::string value;
    if (!DecodeJsonString(raw.substr(0, keep) + '"', &value)) {
      // (Not expected: the text of a string under way decodes. Check every token with a quote.)
      for (std::uint32_t i = 0; i < n; i = nodes[i].subtree_end) {
        for (TokenId id : trie_->TokensUnder(i)) {
          if (InMask(out, width_, id) && vocab_->TokenBytes(id).find('"') != std::string_view::npos)
            check->push_back(id);
        }
      }
      return;
    }
    start.key = "s" + value;
    start.mode = scan.escape ? 2 : 1;
    if (keep < raw.size()) {  // inside \uXXXX: its digits so far
      start.mode = 3;
      for (std::size_t i = keep + 2; i < raw.size(); ++i) {
        start.cp = start.cp * 16 +
                   static_cast<std::uint32_t>(JsonHexDigit(static_cast<std::uint8_t>(raw[i])));
        ++start.hex;
      }
    }
    if (!SomeKeyStartsWith(keys, start.key)) return;  // (comma tokens cover the rest)
  }
  // Depth-first over the trie, the walk state of each depth on `stack`.
  stack.resize(static_cast<std::size_t>(trie_->max_depth()) + 1);
  stack[0] = start;
  for (std::uint32_t i = 0; i < n;) {
    const TokenTrie::Node& node = nodes[i];
    UniqueWalkState& st = stack[node.depth];
    st = stack[node.depth - 1];
    switch (StepWalk(st, node.byte, keys, bare)) {
      case WalkStep::kOn:
        // (A bare item completes at its last byte, and may have no way on: `0`. A literal's
        // prefix has one way on.)
        if (finite || (st.mode == 4 && (BareKeyIn(keys, st.key) ||
                                        (any_type && LiteralLeftIsKey(keys, st.key))))) {
          for (TokenId id : trie_->TokensAt(i))
            if (InMask(out, width_, id)) check->push_back(id);
        }
        ++i;
        break;
      case WalkStep::kDead:
        i = node.subtree_end;
        break;
      case WalkStep::kDuplicate:
      case WalkStep::kUnsure:
        for (TokenId id : trie_->TokensUnder(i))
          if (InMask(out, width_, id)) check->push_back(id);
        i = node.subtree_end;
        break;
    }
  }
}

namespace {

// The view (unique_search.h) of the list open since `origin`, at the parser's end: its earlier
// object items copied into `earlier` (the view reads them through `earlier_sv`); the list's
// reader, or null when the list's text is not all bytes. (The reader is the parser's: valid
// until the parser reads another list or steps.) Buffers are reused from call to call.
const UniqueListItems* ReadListView(EarleyParser& parser, std::int32_t origin,
                                    std::vector<std::string>& earlier,
                                    std::vector<std::string_view>& earlier_sv,
                                    std::optional<ItemView>& view) {
  const UniqueListItems* items = parser.ReadUniqueList(origin);
  if (items == nullptr) return nullptr;
  std::size_t n = 0;
  for (const auto& entry : items->keys()) {
    const std::string& key = entry.first;
    if (key.size() < 2 || key[0] != 'o' || key[1] != '{') continue;
    if (n == earlier.size()) earlier.emplace_back();
    earlier[n++].assign(key, 1);
  }
  earlier_sv.assign(earlier.begin(), earlier.begin() + static_cast<std::ptrdiff_t>(n));
  const UniqueListScan& scan = items->scan();
  // (String items seen: the list takes them, and they are open.)
  const bool strings = scan.in_string || SomeKeyStartsWith(items->keys(), "s");
  bool need = true;  // between items: after the list's start or a comma
  if (scan.depth == 0 && !scan.in_string && !scan.in_bare) {
    for (std::int32_t k = parser.num_sets() - 1; k > origin; --k) {
      const std::int32_t b = parser.set_byte(k);
      if (b == ' ' || b == '\t' || b == '\n' || b == '\r') continue;
      need = b == ',';
      break;
    }
  }
  if (view.has_value()) {
    view->Reset(&earlier_sv, need, strings);
  } else {
    view.emplace(&earlier_sv, need, strings);
  }
  if (scan.depth > 0 || scan.in_string || scan.in_bare) {
    for (char c : scan.raw) view->Step(static_cast<std::uint8_t>(c));  // (the item under way)
  }
  return items;
}

// 1 when an object item opens in `bytes` (read from where the list stands) and stays open,
// 2 when the item under way (or one opened in them) closes in them, else 0: by the list's
// brackets and strings alone.
int OpensOrCloses(const UniqueListScan& scan, std::string_view bytes) {
  std::int32_t depth = scan.depth;
  bool in_string = scan.depth > 0 ? scan.struct_string : scan.in_string;
  bool escape = scan.depth > 0 ? scan.struct_escape : scan.escape;
  bool opened = false;
  for (unsigned char c : bytes) {
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      opened = opened || depth == 0;
      ++depth;
    } else if ((c == '}' || c == ']') && depth > 0 && --depth == 0) {
      return 2;
    }
  }
  return opened ? 1 : 0;
}

// Whether the item that closes in `bytes` (OpensOrCloses 2), read from `start`, needs no search:
// the view says it closed new (no earlier item consistent with it, no key repeated), and after
// it the view is settled with no other object item opened in the token.
bool ClosesNewAndSettles(const ItemView& start, std::string_view bytes) {
  thread_local std::optional<ItemView> v;  // (assigned into: its buffers are reused)
  v = start;
  bool sure = true, closed = false;
  for (unsigned char c : bytes) {
    const bool inside = v->phase() == ItemView::Phase::kObject;
    v->Step(c);
    if (inside && v->phase() != ItemView::Phase::kObject) {
      sure = sure && !closed && v->consistent() == 0 && !v->repeated_key();
      closed = true;
    } else if (closed && v->phase() == ItemView::Phase::kObject) {
      sure = false;
    }
  }
  return sure && v->Settled();
}

// Whether the view read from `start` is settled after `bytes`.
bool SettledAfter(const ItemView& start, std::string_view bytes) {
  thread_local std::optional<ItemView> v;
  v = start;
  for (unsigned char c : bytes) v->Step(c);
  return v->Settled();
}

// Where the view settles for good below a trie node (its subtree is left): a string item, whose
// way out into an object item is a token with a brace; an object no earlier item is consistent
// with (only a `}` could change that, and tokens with one are read apart); the list's end.
bool SettledForGood(const ItemView& v) {
  return v.phase() == ItemView::Phase::kOther || v.phase() == ItemView::Phase::kString ||
         (v.phase() == ItemView::Phase::kObject && v.Settled());
}

}  // namespace

void CfgGrammar::UnsettledTokens(const ItemView& start, const UniqueListScan& scan,
                                 std::span<const std::uint32_t> out,
                                 std::vector<TokenId>* walked,
                                 std::vector<TokenId>* closing) const {
  const auto in_mask = [&](TokenId id) { return InMask(out, width_, id); };
  walked->clear();
  closing->clear();
  // Tokens in which an object item closes (the parser checks it new; what follows it in the
  // token is searched from the token's end), and tokens in which one opens and stays open (after
  // a string item, `"a",{"`), found by the list's brackets and strings alone.
  const TokenTrie::CommaQuoteTokens& marks = trie_->CommaQuotes(*vocab_);
  for (TokenId id : marks.brace) {
    const std::string_view bytes = vocab_->TokenBytes(id);
    if (!in_mask(id) || OpensOrCloses(scan, bytes) != 2) continue;
    if (!ClosesNewAndSettles(start, bytes)) closing->push_back(id);
  }
  if (scan.depth == 0) {
    // (Inside an object item no other one opens before it closes.)
    for (TokenId id : marks.open_brace) {
      const std::string_view bytes = vocab_->TokenBytes(id);
      if (in_mask(id) && OpensOrCloses(scan, bytes) == 1 && !SettledAfter(start, bytes))
        walked->push_back(id);
    }
  }
  // The other tokens after which the view is not settled: depth-first over the trie, a subtree
  // left where the view settles for good or where its item closes (those tokens are above).
  if (!SettledForGood(start)) {
    thread_local std::vector<std::optional<ItemView>> stack;
    const std::span<const TokenTrie::Node> nodes = trie_->nodes();
    const std::uint32_t n = static_cast<std::uint32_t>(trie_->num_nodes());
    stack.resize(static_cast<std::size_t>(trie_->max_depth()) + 1);
    stack[0] = start;
    for (std::uint32_t i = 0; i < n;) {
      const TokenTrie::Node& node = nodes[i];
      std::optional<ItemView>& v = stack[node.depth];
      v = stack[node.depth - 1];
      const bool inside = v->phase() == ItemView::Phase::kObject;
      v->Step(node.byte);
      if (SettledForGood(*v) || (inside && v->phase() != ItemView::Phase::kObject)) {
        i = node.subtree_end;
        continue;
      }
      if (!v->Settled()) {
        for (TokenId id : trie_->TokensAt(i))
          if (in_mask(id)) walked->push_back(id);
      }
      ++i;
    }
  }
  std::sort(walked->begin(), walked->end());
  walked->erase(std::unique(walked->begin(), walked->end()), walked->end());
  std::sort(closing->begin(), closing->end());
}

void CfgGrammar::SearchUniqueItems(EarleyParser& parser, std::int32_t origin,
                                   std::span<std::uint32_t> out, std::int64_t* budget) const {
  thread_local std::vector<std::string> earlier, earlier_after;
  thread_local std::vector<std::string_view> earlier_sv, earlier_after_sv;
  thread_local std::vector<TokenId> candidates, closing;  // closing: an item closes in them
  thread_local std::optional<ItemView> start_view, after;
  const UniqueListItems* items = ReadListView(parser, origin, earlier, earlier_sv, start_view);
  if (items == nullptr) return;
  const ItemView& start = *start_view;
  if (start.phase() == ItemView::Phase::kOther) return;
  UnsettledTokens(start, items->scan(), out, &candidates, &closing);
  if (candidates.empty() && closing.empty()) return;
  // (The walk leaves the tokens in which an item closes: a token is in one list or the other.)
  const std::size_t walked = candidates.size();
  candidates.insert(candidates.end(), closing.begin(), closing.end());
  FillTrace& trace = CurrentFillTrace();
  const std::int32_t base = parser.num_sets();
  // Ways found so far, from the start (a candidate's bytes without blanks, then the way found
  // after it): a candidate whose bytes begin one tries its rest first. Tokens that differ in
  // blanks, or that take a few more bytes of the same way, then cost a replay, not a search.
  thread_local std::vector<std::string> ways;
  thread_local std::string way, read;
  std::size_t num_ways = 0;
  const auto keep_way = [&](std::string_view prefix) {
    if (num_ways == 16) return;
    if (num_ways == ways.size()) ways.emplace_back();
    ways[num_ways].assign(prefix);
    ways[num_ways++] += way;
  };
  // Tokens of blanks between two tokens of the text (whitespace: the ways on are the same after
  // them) share the answer of the start itself, searched once.
  int start_found = -1;
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    const TokenId id = candidates[c];
    const std::string_view bytes = vocab_->TokenBytes(id);
    WithoutBlanks(start, bytes, &read);
    if (start.AtBoundary() && read.empty()) {
      if (start_found < 0) {
        const SearchResult r = SearchNewItem(parser, start, budget, &way);
        start_found = r == SearchResult::kFound ? 1 : 0;
        if (r == SearchResult::kOver) ++trace.unique_search_over;
        if (start_found == 1) keep_way({});
      }
      if (start_found == 0) out[id >> 5] &= ~(1u << (id & 31));
      continue;
    }
    bool ok = true;
    for (unsigned char b : bytes) {
      if (!parser.StepByte(b)) {
        ok = false;
        break;
      }
    }
    bool viewed = false;
    if (ok && c < walked) {
      // (No item closes in the token: the earlier items are the start's.)
      after = start;
      for (unsigned char b : bytes) after->Step(b);
      viewed = true;
    } else if (ok) {
      viewed = ReadListView(parser, origin, earlier_after, earlier_after_sv, after) != nullptr;
    }
    if (viewed) {
      bool replayed = false;
      for (std::size_t w = num_ways; w-- > 0 && !replayed;) {
        if (ways[w].size() < read.size() || ways[w].compare(0, read.size(), read) != 0) continue;
        replayed = ReplayWay(parser, *after, std::string_view(ways[w]).substr(read.size()), budget);
      }
      if (!replayed) {
        const SearchResult r = SearchNewItem(parser, *after, budget, &way);
        ok = r == SearchResult::kFound;
        if (r == SearchResult::kOver) ++trace.unique_search_over;
        if (ok) keep_way(read);
      }
    }
    parser.PopTo(base);
    if (!ok) out[id >> 5] &= ~(1u << (id & 31));
  }
  parser.ClearLimitFlags();
  trace.unique_checks += static_cast<std::int32_t>(candidates.size());
  trace.unique_searches += static_cast<std::int32_t>(candidates.size());
}

bool CfgGrammar::SearchedListsLive(EarleyParser& parser, Status* error) const {
  thread_local std::vector<std::pair<std::int32_t, std::int32_t>> lists;
  thread_local std::vector<std::string> earlier;
  thread_local std::vector<std::string_view> earlier_sv;
  parser.OpenUniqueLists(in_unique_list_, &lists, 64, true);
  std::int64_t budget = unique_search_budget_;
  for (const auto& [rule, origin] : lists) {
    if (list_search_[rule] == 0) continue;
    thread_local std::optional<ItemView> view;
    if (ReadListView(parser, origin, earlier, earlier_sv, view) == nullptr) continue;
    const SearchResult r = SearchNewItem(parser, *view, &budget);
    parser.ClearLimitFlags();
    if (r == SearchResult::kFound) continue;
    if (r == SearchResult::kOver && error != nullptr) {
      *error = Status(StatusCode::kResourceLimit,
                      "the search for a new item of a uniqueItems list of closed objects tried "
                      "more than max_unique_search_bytes (" +
                          std::to_string(unique_search_budget_) +
                          ") bytes; raise it in CompileOptions",
                      "byte " + std::to_string(parser.num_sets() - 1));
    }
    return false;
  }
  return true;
}

// A counted string's bound (CfgProgram::RuleInfo::max_chars) at the end of a mask: positions
// and their caches are the grammar's without it (a superset); the tokens that could break it are
// then checked. A token of L bytes adds at most L characters, so it cannot take a string under
// way with c characters past max_chars, or to a state that needs more than what is left, when
// L <= max_chars - c - max_min_chars; nor open a new one past its bound when
// L <= counted_open_safe_. Only longer tokens are checked, the longest first: by the string's
// automaton itself when its item is the only one of the set that takes bytes (then every parse
// goes through it), by the parser otherwise.
void CfgGrammar::FilterCountedStrings(EarleyParser& parser, std::span<std::uint32_t> out) const {
  thread_local std::vector<EarleyParser::CountedString> open;
  parser.OpenCountedStrings(&open);
  const std::int64_t open_safe = counted_open_safe_;
  std::int64_t under_way_safe = std::numeric_limits<std::int64_t>::max();
  for (const EarleyParser::CountedString& c : open) {
    under_way_safe = std::min<std::int64_t>(
        under_way_safe, std::int64_t{program_.rules[c.rule].max_chars} - c.chars -
                            program_.max_min_chars[c.rule]);
  }
  const std::int64_t lowest = std::min(open_safe, under_way_safe);
  const TokenTrie::ByLength& by = trie_->LongestFirst();
  if (by.ids.empty() || by.lengths[0] <= lowest) return;
  const auto in_mask = [&](TokenId id) {
    return id >= 0 && id < width_ && ((out[id >> 5] >> (id & 31)) & 1) != 0;
  };
  const bool sole = open.size() == 1 && parser.ScanningItems() == 1;
  // By the automaton: 1 the token keeps the string within its bound, 0 it does not, -1 unsure.
  const auto by_automaton = [&](std::string_view bytes) -> int {
    const EarleyParser::CountedString& c = open[0];
    const std::int32_t max = program_.rules[c.rule].max_chars;
    StateId s = c.state;
    std::uint8_t mode = c.mode;
    std::int32_t chars = c.chars;
    for (std::size_t j = 0; j < bytes.size(); ++j) {
      const auto b = static_cast<std::uint8_t>(bytes[j]);
      const StateId t = program_.Step(s, b);
      if (t == CfgProgram::kDead) return -1;
      if (JsonCharStep(&mode, b)) ++chars;
      if (chars > max) return 0;
      s = t;
      if (mode == kCharClosed) {
        // The string ends here; what follows is the grammar's (the mask), unless it opens
        // another counted string long enough to break a bound.
        const std::string_view rest = bytes.substr(j + 1);
        return rest.find('"') != std::string_view::npos &&
                       static_cast<std::int64_t>(rest.size()) > open_safe
                   ? -1
                   : 1;
      }
    }
    const std::int32_t rest = program_.min_chars[s];
    if (rest < 0) return -1;
    return chars + rest <= max ? 1 : 0;
  };
  const std::int32_t base = parser.num_sets();
  std::int32_t checked = 0;
  for (std::size_t i = 0; i < by.ids.size() && by.lengths[i] > lowest; ++i) {
    const TokenId id = by.ids[i];
    if (!in_mask(id)) continue;
    const std::string_view bytes = vocab_->TokenBytes(id);
    if (by.lengths[i] <= under_way_safe &&
        (by.lengths[i] <= open_safe || bytes.find('"') == std::string_view::npos)) {
      continue;
    }
    ++checked;
    int verdict = sole ? by_automaton(bytes) : -1;
    if (verdict < 0) {
      verdict = 1;
      for (unsigned char b : bytes) {
        if (!parser.StepByte(b)) {
          verdict = 0;
          break;
        }
      }
      parser.PopTo(base);
    }
    if (verdict == 0) out[id >> 5] &= ~(1u << (id & 31));
  }
  parser.ClearLimitFlags();
  CurrentFillTrace().length_checks += checked;
}

}  // namespace lockstep

namespace lockstep {

// One walk of the token trie from the checker's state, each node's text read once: a node whose
// byte fails the check takes its whole subtree with it, a node where the string closes is kept
// with its path for the per-fill Complete(). Shared by every position, fill and grammar state
// whose checker reads alike (the local key), so a string pays one walk per kind of place in a
// pattern (after an atom, inside a class, after `{3,`...), not one per character.
std::shared_ptr<const CfgGrammar::PatternVerdicts> CfgGrammar::PatternVerdictsFor(
    const EarleyParser::PatternRead& read) const {
  // (The decoder's partial character only where one is under way.)
  const JsonTextDecoder& d = read.text;
  const bool partial = d.mode >= kCharHex1 && d.mode <= kCharCont3;
  std::string key = {static_cast<char>(d.mode),
                     static_cast<char>(d.mode >= kCharCont1 && partial ? d.utf8_len : 0)};
  for (const std::uint32_t x : {partial ? d.acc : 0u, d.lead}) {
    key.append(reinterpret_cast<const char*>(&x), sizeof(x));
  }
  read.check.AppendLocalKey(&key);
  {
    std::lock_guard<std::mutex> lock(pattern_mu_);
    if (auto f = pattern_cache_.find(key); f != pattern_cache_.end()) return f->second;
  }
  auto v = std::make_shared<PatternVerdicts>();
  v->failing.assign(mask_words(), 0);
  v->path_begin.push_back(0);
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  const TokenId* toks = trie_->tokens().data();
  const auto n = static_cast<std::uint32_t>(nodes.size());
  auto mark_under = [&](std::uint32_t node) {
    for (std::uint32_t j = nodes[node].token_begin; j < nodes[nodes[node].subtree_end].token_begin;
         ++j) {
      if (toks[j] < width_) SetBit(v->failing, toks[j]);
    }
  };
  const std::vector<std::uint8_t>& plain = PlainSubtrees();
  // Where any run of plain characters goes on (between terms, in a class but after `a-`; at a
  // character boundary or inside a UTF-8 sequence, which plain bytes finish), a subtree of plain
  // bytes passes whole, unread: most of the vocabulary, in most places of a pattern.
  auto free = [](const EarleyParser::PatternRead& r) {
    return !r.dead && r.text.lead == 0 &&
           (r.text.mode == kCharText ||
            (r.text.mode >= kCharCont1 && r.text.mode <= kCharCont3)) &&
           r.check.PlainRunsFree();
  };
  std::vector<EarleyParser::PatternRead> at_depth(1, read);  // [d]: the read after depth d
  std::vector<std::uint8_t> free_at(1, free(read));
  std::string path;
  for (std::uint32_t i = 0; i < n;) {
    const TokenTrie::Node& node = nodes[i];
    if (node.depth == 0) {  // (the root, when the trie stores it)
      ++i;
      continue;
    }
    const std::size_t d = node.depth;
    if (free_at[d - 1] && plain[i]) {
      i = node.subtree_end;
      continue;
    }
    if (at_depth.size() <= d) {
      at_depth.resize(d + 1);
      free_at.resize(d + 1);
    }
    EarleyParser::PatternRead& next = at_depth[d];
    next = at_depth[d - 1];
    path.resize(d - 1);
    path.push_back(static_cast<char>(node.byte));
    const bool closes = next.text.mode == kCharText && next.text.lead == 0 && node.byte == '"';
    if (closes) {
      // (Complete() depends on the whole text: the path is kept for the fill to finish.)
      v->closing.push_back(i);
      v->paths += path;
      v->path_begin.push_back(static_cast<std::uint32_t>(v->paths.size()));
      i = node.subtree_end;
      continue;
    }
    if (!EarleyParser::PatternStep(&next, node.byte)) {
      mark_under(i);
      i = node.subtree_end;
      continue;
    }
    free_at[d] = free(next);
    ++i;
  }
  const auto bytes = static_cast<std::int64_t>(v->failing.size() * 4 + v->closing.size() * 8 +
                                               v->paths.size() + key.size() + 128);
  std::lock_guard<std::mutex> lock(pattern_mu_);
  if (ReserveBytes(bytes)) pattern_cache_.try_emplace(key, v);
  return v;
}

// Per trie node: its byte and every byte below it are plain, a character of a pattern that is
// no syntax character, no `-`, and no quote, backslash or control byte of the JSON text (bytes
// of non-ASCII characters are plain). Built once per vocabulary, by the first grammar that
// has pattern strings (SharedPositions).
const std::vector<std::uint8_t>& CfgGrammar::PlainSubtrees() const {
  SharedPositions& shared = trie_->Attached<SharedPositions>();
  std::call_once(shared.pattern_plain_once, [&] {
    const std::span<const TokenTrie::Node> nodes = trie_->nodes();
    const auto n = static_cast<std::uint32_t>(nodes.size());
    std::array<std::uint8_t, 256> plain_byte{};
    for (int b = 0x20; b < 256; ++b) plain_byte[b] = 1;
    for (const char c : std::string_view("\"\\^$.*+?()[]{}|-")) {
      plain_byte[static_cast<std::uint8_t>(c)] = 0;
    }
    std::vector<std::uint8_t>& plain = shared.pattern_plain_subtrees;
    plain.assign(n, 0);
    for (std::uint32_t i = n; i-- > 0;) {
      bool p = nodes[i].depth > 0 && plain_byte[nodes[i].byte] != 0;
      for (std::uint32_t c = i + 1; p && c < nodes[i].subtree_end; c = nodes[c].subtree_end) {
        p = plain[c] != 0;
      }
      plain[i] = p;
    }
  });
  return shared.pattern_plain_subtrees;
}

// The pattern check (EarleyParser, "ECMAScript patterns") at the end of a mask: positions and
// their caches are the grammar's without it (a superset); the tokens whose text fails it are
// then taken out. Where the pattern string's item is the only one that takes a token's first
// byte, every parse of the token reads its text through the check, and the check's verdict is
// the token's; where another item takes that byte too (a string of another kind beside it), a
// failing token is tried by the parser itself.
void CfgGrammar::FilterPatternStrings(EarleyParser& parser, std::span<std::uint32_t> out) const {
  thread_local std::vector<EarleyParser::PatternString> open;
  parser.OpenPatternStrings(&open);
  const std::int32_t k = parser.num_sets() - 1;
  // First bytes another scanning item takes (then the parser decides).
  std::array<std::uint64_t, 4> shared{};
  for (const EarleyItem& it : parser.set(k)) {
    const CfgProgram::RuleInfo& r = program_.rules[it.rule];
    if (r.kind != CfgProgram::RuleKind::kDfa || !program_.has_bytes[it.state]) continue;
    if (open.size() == 1 && r.ecma_pattern && it.origin == open[0].origin &&
        it.state == open[0].state) {
      continue;
    }
    for (int b = 0; b < 256; ++b) {
      if (program_.Step(it.state, static_cast<std::uint8_t>(b)) != CfgProgram::kDead) {
        shared[b >> 6] |= std::uint64_t{1} << (b & 63);
      }
    }
  }
  const std::int32_t base = parser.num_sets();
  auto parser_takes = [&](TokenId t) {
    bool ok = true;
    for (const unsigned char b : vocab_->TokenBytes(t)) {
      if (!parser.StepByte(b)) {
        ok = false;
        break;
      }
    }
    parser.PopTo(base);
    return ok;
  };
  auto drop = [&](TokenId t) {
    if (t >= width_ || !TestBit(out.data(), t)) return;
    const std::string_view bytes = vocab_->TokenBytes(t);
    if (bytes.empty()) return;
    const auto b0 = static_cast<std::uint8_t>(bytes[0]);
    if (((shared[b0 >> 6] >> (b0 & 63)) & 1) != 0 && parser_takes(t)) return;
    out[static_cast<std::size_t>(t) >> 5] &= ~(1u << (t & 31));
  };
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  const TokenId* toks = trie_->tokens().data();
  std::int32_t checked = 0;
  for (const EarleyParser::PatternString& ps : open) {
    const std::shared_ptr<const PatternVerdicts> v = PatternVerdictsFor(ps.read);
    const std::size_t words = std::min(v->failing.size(), out.size());
    for (std::size_t w = 0; w < words; ++w) {
      std::uint32_t hit = out[w] & v->failing[w];
      while (hit != 0) {
        const int bit = std::countr_zero(hit);
        hit &= hit - 1;
        ++checked;
        drop(static_cast<TokenId>(w * 32 + static_cast<std::size_t>(bit)));
      }
    }
    for (std::size_t c = 0; c < v->closing.size(); ++c) {
      EarleyParser::PatternRead r = ps.read;
      bool ok = true;
      for (std::uint32_t j = v->path_begin[c]; j < v->path_begin[c + 1] && ok; ++j) {
        ok = EarleyParser::PatternStep(&r, static_cast<std::uint8_t>(v->paths[j]));
      }
      if (ok) continue;
      const std::uint32_t node = v->closing[c];
      for (std::uint32_t j = nodes[node].token_begin;
           j < nodes[nodes[node].subtree_end].token_begin; ++j) {
        ++checked;
        drop(toks[j]);
      }
    }
  }
  // Tokens that may open a pattern string and go on in it: their text after a quote is read
  // from the checker's start, which some refuse (`"*`, `["+`, `":"(`): the parser decides those
  // (the positions before a pattern string's quote hold them as the grammar allows them).
  for (const TokenId t : PatternOpeners()) {
    if (t >= width_ || !TestBit(out.data(), t)) continue;
    ++checked;
    if (!parser_takes(t)) out[static_cast<std::size_t>(t) >> 5] &= ~(1u << (t & 31));
  }
  parser.ClearLimitFlags();
  CurrentFillTrace().length_checks += checked;
}

// The tokens whose text after one of their quotes, read as the start of a pattern string, fails
// the check (up to the next quote, where the string would close). Built once per vocabulary,
// by the first grammar that has pattern strings (a pass over the tokens with a quote).
const std::vector<TokenId>& CfgGrammar::PatternOpeners() const {
  SharedPositions& shared = trie_->Attached<SharedPositions>();
  std::call_once(shared.pattern_openers_once, [&] {
    std::vector<TokenId>& openers = shared.pattern_openers;
    for (TokenId t = 0; t < vocab_->size(); ++t) {
      const std::string_view bytes = vocab_->TokenBytes(t);
      bool fails = false;
      for (std::size_t j = bytes.find('"'); j != std::string_view::npos && !fails;
           j = bytes.find('"', j + 1)) {
        EarleyParser::PatternRead r;
        for (std::size_t i = j; i < bytes.size(); ++i) {
          if (!EarleyParser::PatternStep(&r, static_cast<std::uint8_t>(bytes[i]))) {
            fails = true;
            break;
          }
          if (r.text.mode == kCharClosed) break;
        }
      }
      if (fails) openers.push_back(t);
    }
  });
  return shared.pattern_openers;
}

}  // namespace lockstep
