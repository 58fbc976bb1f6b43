// NgramModel: a token n-gram language model (order 2-4, interpolated Witten-Bell smoothing with
// backoff to a Witten-Bell unigram over the whole logits width) used as the default logits source,
// so the demo generates plausible tool-call JSON with no model download. For the CLI, the build
// step that trains the default model (TrainFromCorpus + Save) and tests.
//
// Smoothing (Witten-Bell, interpolated): for a context h with c(h) tokens seen after it and T(h)
// distinct token types seen after it,
//   P(w | h) = (c(h, w) + T(h) * P(w | h')) / (c(h) + T(h)),   h' = h without its oldest token,
//   P(w)     = (c(w) + T0 / width) / (N + T0)                   (unigram: N tokens, T0 types).
// Contexts never seen pass straight to the shorter one. Every id of the width, padding included,
// gets at least the floor T0 / (width * (N + T0)) * prod(T(h) / (c(h) + T(h))).
//
// Training documents are read as EOS d_1 ... d_n EOS: the leading EOS is context only (a
// document start), the trailing one is predicted, so the model learns where documents end. At
// generation time an empty or short context is treated the same way (EOS in front).
//
// File format (little-endian), version 1:
//   char magic[8] = "LSNGRAM\0"; u32 version = 1; u32 order; i32 width; i32 eos;
//   u64 vocabulary fingerprint (given by the caller; 0 = none);
//   u32 num_unigrams; then num_unigrams x (i32 id, u32 count), ids increasing;
//   for each context length k = 1 .. order-1:
//     u32 num_contexts; u64 keys[num_contexts] (increasing; ids packed 21 bits each, oldest
//     first); u32 offsets[num_contexts + 1] (offsets[0] = 0); u32 num_entries = offsets[last];
//     num_entries x (i32 id, u32 count), ids increasing within a context;
//   u64 checksum: FNV-1a 64 of every byte before it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/logits_source.h"
#include "lockstep/status.h"
#include "lockstep/types.h"

namespace lockstep {

class Vocabulary;

class NgramModel final : public LogitsSource {
 public:
  static constexpr int kMinOrder = 2;
  static constexpr int kMaxOrder = 4;
  static constexpr std::uint32_t kFormatVersion = 1;
  static constexpr std::int32_t kMaxWidth = 1 << 21;  // ids are packed 21 bits each

  // `docs`: token ids in [0, width), without EOS (Train appends it). `order` in [2, 4].
  static Result<NgramModel> Train(const std::vector<std::vector<TokenId>>& docs, std::int32_t width,
                                  TokenId eos, int order);
  // Reads JSONL files of {"text": "..."} documents (one per line; blank lines skipped), encodes
  // each with vocab.Encode(text, {.add_dummy_prefix = false}), appends vocab.eos() and trains
  // over vocab.logits_width(). Errors name the file and line.
  static Result<NgramModel> TrainFromCorpus(const Vocabulary& vocab,
                                            const std::vector<std::string>& corpus_files,
                                            int order);

  // Writes the model with `fingerprint` (e.g. Vocabulary::Fingerprint()) to `path`.
  Status Save(const std::string& path, std::uint64_t fingerprint) const;
  std::string Serialize(std::uint64_t fingerprint) const;
  // Reads a model written by Save; rejects a wrong magic, version or fingerprint (unless
  // `expected_fingerprint` is 0), a bad checksum and any inconsistent content.
  static Result<NgramModel> Load(const std::string& path, std::uint64_t expected_fingerprint);
  static Result<NgramModel> Deserialize(std::string_view bytes, std::uint64_t expected_fingerprint);

  NgramModel(const NgramModel&);
  NgramModel& operator=(const NgramModel&);
  NgramModel(NgramModel&&) noexcept;
  NgramModel& operator=(NgramModel&&) noexcept;
  ~NgramModel() override;

  std::int32_t width() const override { return width_; }
  int order() const { return order_; }
  TokenId eos() const { return eos_; }
  // Total training tokens (EOS included) and distinct contexts per length 1 .. order-1.
  std::uint64_t num_tokens() const { return total_; }
  std::size_t num_contexts(int length) const;

  // log P(w | last order-1 tokens of context) for every w in [0, width); the exps sum to 1.
  // Costs one O(width) pass plus O(continuations of the matched contexts). `out.size()` must be
  // width(), otherwise `out` is left untouched.
  void Logits(std::span<const TokenId> context, std::span<float> out) override;

 private:
  NgramModel() = default;
  struct Level {  // contexts of one length, CSR: continuations of keys[i] are [offsets[i], [i+1])
    std::vector<std::uint64_t> keys;
    std::vector<std::uint32_t> offsets;
    std::vector<TokenId> ids;
    std::vector<std::uint32_t> counts;
    std::vector<std::uint32_t> totals;  // c(h), derived
  };
  Status Finish();  // derives totals, floors and the log-floor vector; checks consistency

  int order_ = 0;
  std::int32_t width_ = 0;
  TokenId eos_ = kNoToken;
  std::uint64_t total_ = 0;
  std::vector<TokenId> uni_ids_;
  std::vector<std::uint32_t> uni_counts_;
  std::vector<Level> levels_;     // levels_[k - 1]: contexts of length k
  std::vector<double> uni_prob_;  // P(w), width entries
  std::vector<float> log_uni_;    // log P(w)
  // Scratch for Logits: accumulated extra mass per id and the ids touched.
  std::vector<double> extra_;
  std::vector<TokenId> touched_;
};

// The shipped training corpus: <data_dir>/corpus/{json,values,toolcalls}.jsonl, where data_dir is
// a source tree's schemas/ folder or DataDirectory() (see schemas/corpus/README.md).
std::vector<std::string> DefaultNgramCorpus(std::string_view data_dir);

}  // namespace lockstep
