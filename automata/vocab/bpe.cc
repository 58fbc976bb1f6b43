// The BPE merge engine (see bpe.h). Short pieces merge over a flat array with cached pair ranks
// (two table lookups per merge); long pieces use a linked list and a min-heap so a 600-byte
// word stays O(n log n).
#include "automata/vocab/bpe.h"

#include <climits>
#include <cstring>
#include <queue>

#include "automata/vocab/unicode.h"

namespace lockstep::vocab {

namespace {

// Grows an open-addressing table (linear probing, a power-of-two size) to room for `n` entries
// at load factor 1/2, at least 16 slots, re-inserting every used slot from its home position.
// Never shrinks. Both maps below share it; they differ in how a slot is free and where it lives.
template <typename Slot, typename IsFree, typename Home>
void ReserveSlots(std::vector<Slot>* slots, std::size_t n, IsFree is_free, Home home) {
  std::size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap <= slots->size()) return;
  std::vector<Slot> old = std::move(*slots);
  slots->assign(cap, Slot{});
  const std::size_t mask = cap - 1;
  for (const Slot& s : old) {
    if (is_free(s)) continue;
    std::size_t i = home(s) & mask;
    while (!is_free((*slots)[i])) i = (i + 1) & mask;
    (*slots)[i] = s;
  }
}

}  // namespace

// ---- StringIdMap ----------------------------------------------------------------------------

void StringIdMap::Reserve(std::size_t n) {
  ReserveSlots(
      &slots_, n, [](const Slot& s) { return s.id == kNoToken; },
      [](const Slot& s) { return static_cast<std::size_t>(s.hash); });
}

void StringIdMap::Grow() { Reserve(slots_.empty() ? 8 : slots_.size()); }

void StringIdMap::Insert(std::string_view key, TokenId id, std::uint32_t h) {
  if ((count_ + 1) * 2 > slots_.size()) Grow();
  std::size_t mask = slots_.size() - 1;
  std::size_t i = h & mask;
  while (slots_[i].id != kNoToken) {
    const Slot& s = slots_[i];
    if (s.hash == h && std::string_view(pool_).substr(s.off, s.len) == key) {
      slots_[i].id = id;
      return;
    }
    i = (i + 1) & mask;
  }
  slots_[i] =
      Slot{h, id, static_cast<std::uint32_t>(pool_.size()), static_cast<std::uint32_t>(key.size())};
  pool_.append(key);
  ++count_;
}

std::uint32_t StringIdMap::Hash(std::string_view key) {
  return static_cast<std::uint32_t>(HashBytes(key.data(), key.size()));
}

TokenId StringIdMap::Find(std::string_view key) const { return Find(key, Hash(key)); }

TokenId StringIdMap::Find(std::string_view key, std::uint32_t h) const {
  if (slots_.empty()) return kNoToken;
  std::size_t mask = slots_.size() - 1;
  std::size_t i = h & mask;
  while (slots_[i].id != kNoToken) {
    const Slot& s = slots_[i];
    if (s.hash == h && s.len == key.size() && std::string_view(pool_).substr(s.off, s.len) == key) {
      return s.id;
    }
    i = (i + 1) & mask;
  }
  return kNoToken;
}

// ---- PairMap --------------------------------------------------------------------------------

namespace {
inline std::size_t MixKey(std::uint64_t k) {
  k ^= k >> 31;
  k *= 0x9E3779B97F4A7C15ull;
  k ^= k >> 29;
  return static_cast<std::size_t>(k);
}
}  // namespace

void PairMap::Reserve(std::size_t n) {
  ReserveSlots(
      &slots_, n, [](const Slot& s) { return s.key == kEmpty; },
      [](const Slot& s) { return MixKey(s.key); });
}

void PairMap::Grow() { Reserve(slots_.empty() ? 8 : slots_.size()); }

void PairMap::Insert(TokenId a, TokenId b, Merge merge) {
  if ((count_ + 1) * 2 > slots_.size()) Grow();
  std::uint64_t key = Key(a, b);
  std::size_t mask = slots_.size() - 1;
  std::size_t i = MixKey(key) & mask;
  while (slots_[i].key != kEmpty) {
    if (slots_[i].key == key) {
      slots_[i].merge = merge;
      return;
    }
    i = (i + 1) & mask;
  }
  slots_[i] = Slot{key, merge};
  ++count_;
}

void PairMap::Prefetch(TokenId a, TokenId b) const {
  if (!slots_.empty()) __builtin_prefetch(&slots_[MixKey(Key(a, b)) & (slots_.size() - 1)]);
}

const PairMap::Merge* PairMap::Find(TokenId a, TokenId b) const {
  if (slots_.empty()) return nullptr;
  std::uint64_t key = Key(a, b);
  std::size_t mask = slots_.size() - 1;
  std::size_t i = MixKey(key) & mask;
  while (slots_[i].key != kEmpty) {
    if (slots_[i].key == key) return &slots_[i].merge;
    i = (i + 1) & mask;
  }
  return nullptr;
}

// ---- BpeModel -------------------------------------------------------------------------------

bool BpeModel::Encode(std::string_view piece, std::vector<TokenId>* out, std::size_t* bad) const {
  if (piece.empty()) return true;
  if (symbols == Symbols::kBytes && piece.size() == 1) {
    TokenId id = byte_ids_[static_cast<unsigned char>(piece[0])];
    if (id == kNoToken) {
      *bad = 0;
      return false;
    }
    out->push_back(id);
    return true;
  }
  if (ignore_merges) {
    TokenId id = vocab.Find(piece);
    if (id != kNoToken) {
      out->push_back(id);
      return true;
    }
  }
  if (piece.size() > kMaxCachedPieceBytes) return EncodeUncached(piece, out, bad);
  std::size_t h = static_cast<std::size_t>(HashBytes(piece.data(), piece.size()));
  Shard& shard = cache_[h % kShards];
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    auto it = shard.map.find(std::string(piece));
    if (it != shard.map.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return true;
    }
  }
  std::size_t before = out->size();
  if (!EncodeUncached(piece, out, bad)) return false;
  std::vector<TokenId> ids(out->begin() + static_cast<std::ptrdiff_t>(before), out->end());
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.map.size() >= kMaxEntriesPerShard) shard.map.clear();
  shard.map.emplace(std::string(piece), std::move(ids));
  return true;
}

bool BpeModel::InitialSymbols(std::string_view piece, std::vector<TokenId>* ids,
                              std::size_t* bad) const {
  if (symbols == Symbols::kBytes) {
    for (std::size_t i = 0; i < piece.size(); ++i) {
      TokenId id = byte_ids_[static_cast<unsigned char>(piece[i])];
      if (id == kNoToken) {
        *bad = i;
        return false;
      }
      ids->push_back(id);
    }
    return true;
  }
  bool last_unk = false;
  std::size_t i = 0;
  while (i < piece.size()) {
    char32_t c;
    int len = DecodeUtf8(piece, i, &c);
    if (len == 0) len = 1;
    std::string_view ch = piece.substr(i, static_cast<std::size_t>(len));
    TokenId id = vocab.Find(ch);
    if (id != kNoToken) {
      ids->push_back(id);
      last_unk = false;
    } else if (byte_fallback && [&] {
                 for (char b : ch) {
                   if (byte_ids_[static_cast<unsigned char>(b)] == kNoToken) return false;
                 }
                 return true;
               }()) {
      for (char b : ch) ids->push_back(byte_ids_[static_cast<unsigned char>(b)]);
      last_unk = false;
    } else if (unk != kNoToken) {
      if (!(fuse_unk && last_unk)) ids->push_back(unk);
      last_unk = true;
    } else {
      *bad = i;
      return false;
    }
    i += static_cast<std::size_t>(len);
  }
  return true;
}

bool BpeModel::EncodeUncached(std::string_view piece, std::vector<TokenId>* out,
                              std::size_t* bad) const {
  thread_local std::vector<TokenId> ids;
  ids.clear();
  if (!InitialSymbols(piece, &ids, bad)) return false;
  if (ids.size() <= 64) {
    MergeSmall(&ids);
  } else {
    MergeLarge(&ids);
  }
  out->insert(out->end(), ids.begin(), ids.end());
  return true;
}

const PairMap::Merge* BpeModel::FindMerge(TokenId a, TokenId b, PairMap::Merge* scratch) const {
  if (!merge_by_concat) return merges.Find(a, b);
  const std::vector<std::uint32_t>& off = *token_off;
  auto ia = static_cast<std::size_t>(a);
  auto ib = static_cast<std::size_t>(b);
  std::size_t la = off[ia + 1] - off[ia];
  std::size_t lb = off[ib + 1] - off[ib];
  char stack[256];
  thread_local std::string heap;
  char* buf = stack;
  if (la + lb > sizeof(stack)) {
    heap.resize(la + lb);
    buf = heap.data();
  }
  std::memcpy(buf, token_pool->data() + off[ia], la);
  std::memcpy(buf + la, token_pool->data() + off[ib], lb);
  TokenId id = vocab.Find(std::string_view(buf, la + lb));
  if (id == kNoToken) return nullptr;
  *scratch = PairMap::Merge{id, id};
  return scratch;
}

void BpeModel::MergeSmall(std::vector<TokenId>* ids_ptr) const {
  std::vector<TokenId>& ids = *ids_ptr;
  constexpr std::int32_t kNone = INT32_MAX;
  thread_local std::vector<std::int32_t> ranks;
  thread_local std::vector<TokenId> merged;
  std::size_t n = ids.size();
  if (n < 2) return;
  ranks.assign(n - 1, kNone);
  merged.assign(n - 1, kNoToken);
  PairMap::Merge scratch;
  auto fill = [&](std::size_t i) {
    const PairMap::Merge* m = FindMerge(ids[i], ids[i + 1], &scratch);
    ranks[i] = m ? m->rank : kNone;
    merged[i] = m ? m->id : kNoToken;
  };
  for (std::size_t i = 0; i + 1 < n; ++i) fill(i);
  while (n > 1) {
    std::size_t best = 0;
    std::int32_t best_rank = kNone;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      if (ranks[i] < best_rank) {
        best_rank = ranks[i];
        best = i;
      }
    }
    if (best_rank == kNone) break;
    ids[best] = merged[best];
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best));
    merged.erase(merged.begin() + static_cast<std::ptrdiff_t>(best));
    --n;
    if (best + 1 < n) fill(best);
    if (best > 0) fill(best - 1);
  }
}

void BpeModel::MergeLarge(std::vector<TokenId>* ids_ptr) const {
  std::vector<TokenId>& ids = *ids_ptr;
  const std::size_t n = ids.size();
  std::vector<std::int32_t> prev(n), next(n);
  for (std::size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<std::int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<std::int32_t>(i + 1) : -1;
  }
  struct Item {
    std::int32_t rank;
    std::int32_t pos;
    TokenId id;
    bool operator>(const Item& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  PairMap::Merge scratch;
  auto push = [&](std::int32_t i) {
    if (i < 0 || next[i] < 0) return;
    const PairMap::Merge* m = FindMerge(ids[i], ids[next[i]], &scratch);
    if (m) heap.push(Item{m->rank, i, m->id});
  };
  for (std::size_t i = 0; i + 1 < n; ++i) push(static_cast<std::int32_t>(i));
  while (!heap.empty()) {
    Item top = heap.top();
    heap.pop();
    std::int32_t i = top.pos;
    if (ids[i] == kNoToken || next[i] < 0) continue;
    const PairMap::Merge* m = FindMerge(ids[i], ids[next[i]], &scratch);
    if (m == nullptr || m->id != top.id || m->rank != top.rank) continue;
    std::int32_t j = next[i];
    ids[i] = top.id;
    ids[j] = kNoToken;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  std::size_t w = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (ids[i] != kNoToken) ids[w++] = ids[i];
  }
  ids.resize(w);
}

}  // namespace lockstep::vocab
