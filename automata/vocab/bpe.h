// The canonical BPE merge engine shared by the HF tokenizer.json and tiktoken loaders: a flat
// string -> id map, a flat (left id, right id) -> (rank, merged id) pair table, and the merge
// loop (rank-ordered, leftmost first, as HF tokenizers and tiktoken do) with a bounded,
// thread-safe per-piece cache. Used by vocabulary.cc; not part of the public API.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lockstep/types.h"

namespace lockstep::vocab {

// Open-addressing map from byte strings (copied into an internal pool) to ids.
class StringIdMap {
 public:
  void Reserve(std::size_t n);
  // Inserts or overwrites (last one wins, as a JSON object read into a map does).
  void Insert(std::string_view key, TokenId id) { Insert(key, id, Hash(key)); }
  void Insert(std::string_view key, TokenId id, std::uint32_t hash);
  TokenId Find(std::string_view key) const;  // kNoToken if absent
  // Batch helpers for table builds: hash once, prefetch the slot, then look up.
  static std::uint32_t Hash(std::string_view key);
  void Prefetch(std::uint32_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]);
  }
  TokenId Find(std::string_view key, std::uint32_t hash) const;
  std::size_t size() const { return count_; }

 private:
  struct Slot {
    std::uint32_t hash = 0;
    TokenId id = kNoToken;  // kNoToken: empty slot
    std::uint32_t off = 0;
    std::uint32_t len = 0;
  };
  void Grow();
  std::vector<Slot> slots_;
  std::string pool_;
  std::size_t count_ = 0;
};

// Open-addressing map from an ordered id pair to its merge.
class PairMap {
 public:
  struct Merge {
    std::int32_t rank;
    TokenId id;
  };
  void Reserve(std::size_t n);
  void Insert(TokenId a, TokenId b, Merge merge);  // last one wins
  const Merge* Find(TokenId a, TokenId b) const;
  void Prefetch(TokenId a, TokenId b) const;
  std::size_t size() const { return count_; }

 private:
  struct Slot {
    std::uint64_t key = kEmpty;
    Merge merge{};
  };
  static constexpr std::uint64_t kEmpty = ~0ull;
  static std::uint64_t Key(TokenId a, TokenId b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }
  void Grow();
  std::vector<Slot> slots_;
  std::size_t count_ = 0;
};

class BpeModel {
 public:
  // How a piece becomes its initial symbols.
  enum class Symbols {
    kBytes,  // one symbol per byte (byte-level BPE, tiktoken): byte_ids_[b]
    kChars,  // one symbol per UTF-8 character looked up in vocab (SentencePiece-style BPE)
  };
  BpeModel() { byte_ids_.fill(kNoToken); }

  Symbols symbols = Symbols::kBytes;
  bool ignore_merges = false;  // a piece that is itself a token is that token
  bool byte_fallback = false;  // kChars: unknown characters become their <0xNN> byte tokens
  bool fuse_unk = false;
  TokenId unk = kNoToken;
  StringIdMap vocab;  // model-space string (bytes for kBytes, text for kChars) -> id
  PairMap merges;
  // tiktoken: two adjacent tokens merge iff their concatenated bytes are a token (rank = its
  // id); token bytes come from `token_pool` / `token_off` (the vocabulary's byte tables).
  bool merge_by_concat = false;
  const std::string* token_pool = nullptr;
  const std::vector<std::uint32_t>* token_off = nullptr;
  std::array<TokenId, 256> byte_ids_;  // kBytes: single-byte tokens; kChars: <0xNN> tokens

  // Appends the ids of `piece` to *out. False (with *bad set to the offending byte offset) when
  // a byte or character has no token and no fallback.
  bool Encode(std::string_view piece, std::vector<TokenId>* out, std::size_t* bad) const;

 private:
  bool EncodeUncached(std::string_view piece, std::vector<TokenId>* out, std::size_t* bad) const;
  bool InitialSymbols(std::string_view piece, std::vector<TokenId>* ids, std::size_t* bad) const;
  const PairMap::Merge* FindMerge(TokenId a, TokenId b, PairMap::Merge* scratch) const;
  void MergeSmall(std::vector<TokenId>* ids) const;
  void MergeLarge(std::vector<TokenId>* ids) const;

  static constexpr int kShards = 32;
  static constexpr std::size_t kMaxCachedPieceBytes = 96;
  static constexpr std::size_t kMaxEntriesPerShard = 4096;
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<TokenId>> map;
  };
  mutable std::unique_ptr<Shard[]> cache_ = std::make_unique<Shard[]>(kShards);
};

}  // namespace lockstep::vocab
