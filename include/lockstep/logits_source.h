// LogitsSource: anything that gives one float per vocabulary entry for a token context, for
// generation loops (lockstep/decoding.h), `classify`, the CLI and tests. Built-ins here: a seeded
// uniform source, a C callback, a replay of recorded logits (format in docs/logits-format.md), a
// scripted source read from a small JSON file, and two combinators that edit the logits before
// the sampler runs (classifier-free guidance, contrastive decoding). The token n-gram model is in
// lockstep/ngram_model.h. Hosts wrap their model in a subclass or a callback.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockstep/lockstep_c.h"  // lockstep_logits_fn, the C shape of a model
#include "lockstep/status.h"
#include "lockstep/types.h"

namespace lockstep {

class LogitsSource {
 public:
  virtual ~LogitsSource();
  // Floats per call: the model's logits width.
  virtual std::int32_t width() const = 0;
  // `context`: prompt and generated ids so far. Writes width() floats to `out` (which must hold
  // exactly width() floats; a source leaves `out` untouched if it does not).
  virtual void Logits(std::span<const TokenId> context, std::span<float> out) = 0;
  // As Logits, knowing the grammar mask of this step (BitmaskWords(width()) words, null = all
  // allowed). Entries of disallowed ids may be anything (the sampler masks them); a source may
  // skip them, and a combinator may need the mask (ContrastiveSource measures plausibility
  // against the best allowed token). The default ignores the mask.
  virtual void MaskedLogits(std::span<const TokenId> context, const std::uint32_t* mask,
                            std::span<float> out) {
    (void)mask;
    Logits(context, out);
  }
};

// Seeded pseudo-random logits in [0, 8): a counter-based hash of (seed, context length, last
// token, id), so the same context always gives the same logits, with no state.
class UniformSource final : public LogitsSource {
 public:
  UniformSource(std::int32_t width, std::uint64_t seed);
  std::int32_t width() const override { return width_; }
  void Logits(std::span<const TokenId> context, std::span<float> out) override;

 private:
  std::int32_t width_;
  std::uint64_t seed_;
};

// A C function as a source (the C ABI's model hook). `user` is passed through untouched.
class CallbackSource final : public LogitsSource {
 public:
  CallbackSource(lockstep_logits_fn fn, void* user, std::int32_t width)
      : fn_(fn), user_(user), width_(width < 0 ? 0 : width) {}
  std::int32_t width() const override { return width_; }
  void Logits(std::span<const TokenId> context, std::span<float> out) override;

 private:
  lockstep_logits_fn fn_;
  void* user_;
  std::int32_t width_;
};

// ---- recorded logits (docs/logits-format.md) ---------------------------------------------------

inline constexpr char kLogitsMagic[8] = {'L', 'S', 'L', 'O', 'G', 'I', 'T', '\0'};
inline constexpr std::uint32_t kLogitsFormatVersion = 1;
inline constexpr std::size_t kLogitsHeaderBytes = 24;  // magic, version, width, steps

// Writes a logits file row by row: Open, Append per step, Close (which fills in the step count).
class LogitsWriter {
 public:
  static Result<std::unique_ptr<LogitsWriter>> Open(const std::string& path, std::int32_t width);
  ~LogitsWriter();
  // `row` must hold width() floats.
  Status Append(std::span<const float> row);
  Status Close();
  std::int32_t width() const { return width_; }
  std::uint64_t steps() const { return steps_; }

 private:
  LogitsWriter(std::FILE* f, std::string path, std::int32_t width)
      : file_(f), path_(std::move(path)), width_(width) {}
  std::FILE* file_;
  std::string path_;
  std::int32_t width_;
  std::uint64_t steps_ = 0;
};

// The bytes of a whole logits file (rows of `width` floats, concatenated in `data`).
std::string SerializeLogits(std::int32_t width, std::span<const float> data);

// Replays a logits file: the k-th Logits call (counting from 0, or from the last Rewind) gets row
// k, whatever the context. Past the last row every call writes zeros (uniform) and exhausted()
// turns true. Load rejects a wrong magic or version, a bad width, a truncated or oversized body
// (the location names the byte offset).
class ReplaySource final : public LogitsSource {
 public:
  static Result<std::unique_ptr<ReplaySource>> Load(const std::string& path);
  static Result<std::unique_ptr<ReplaySource>> Parse(std::string_view bytes,
                                                     const std::string& name = "logits");
  std::int32_t width() const override { return width_; }
  std::uint64_t steps() const { return steps_; }
  void Logits(std::span<const TokenId> context, std::span<float> out) override;
  void Rewind() {
    cursor_ = 0;
    exhausted_ = false;
  }
  bool exhausted() const { return exhausted_; }
  std::span<const float> Row(std::uint64_t k) const {
    return {data_.data() + k * static_cast<std::size_t>(width_), static_cast<std::size_t>(width_)};
  }

 private:
  ReplaySource() = default;
  std::int32_t width_ = 0;
  std::uint64_t steps_ = 0;
  std::uint64_t cursor_ = 0;
  bool exhausted_ = false;
  std::vector<float> data_;
};

// Forwards to `inner` and appends every row it returns to `writer` (a recording for ReplaySource).
// Write errors are kept and returned by status().
class RecordingSource final : public LogitsSource {
 public:
  RecordingSource(LogitsSource& inner, LogitsWriter& writer) : inner_(inner), writer_(writer) {}
  std::int32_t width() const override { return inner_.width(); }
  void Logits(std::span<const TokenId> context, std::span<float> out) override;
  const Status& status() const { return status_; }

 private:
  LogitsSource& inner_;
  LogitsWriter& writer_;
  Status status_;
};

// ---- scripted logits (docs/decoding.md) --------------------------------------------------------

// Logits given in a small JSON file, for textbook examples and tests:
//   {"width": 4, "labels": ["A", "B", "C", "</s>"],       // labels optional (default: ids)
//    "probabilities": false,                              // true: rows are probabilities
//    "steps": [[...], [...]],                             // row i for a context of i ids
//    "contexts": {"": [...], "A": [...], "A B": [...]},   // row for a context suffix
//    "default": [...]}
// A row is `width` numbers (null = -inf; probabilities are turned into logs, 0 -> -inf). For a
// context, the row is: the "contexts" entry for the longest suffix of the context (ids or labels
// joined by single spaces; "" matches any context), else steps[min(context size, last)], else
// "default", else zeros. Errors name the JSON Pointer of the bad value.
class ScriptedSource final : public LogitsSource {
 public:
  static Result<std::unique_ptr<ScriptedSource>> Parse(std::string_view json);
  static Result<std::unique_ptr<ScriptedSource>> Load(const std::string& path);
  std::int32_t width() const override { return width_; }
  const std::vector<std::string>& labels() const { return labels_; }
  void Logits(std::span<const TokenId> context, std::span<float> out) override;

 private:
  ScriptedSource() = default;
  struct Keyed {
    std::vector<TokenId> suffix;
    std::vector<float> row;
  };
  std::int32_t width_ = 0;
  std::vector<std::string> labels_;
  std::vector<std::vector<float>> steps_;
  std::vector<Keyed> contexts_;  // longest suffix first
  std::vector<float> default_;
};

// ---- combinators -------------------------------------------------------------------------------

// Classifier-free guidance: z = z_u + gamma * (z_c - z_u), computed as z_c + (gamma - 1) *
// (z_c - z_u) so that gamma = 1 returns z_c bit for bit. z_c is the source on the given
// context (prompt, then generated ids); z_u is the same source on the unconditional context:
// `negative_prompt` followed by the generated ids (the context after its first `prompt_length`
// ids). Where either is -inf the result is -inf (gamma = 1: z_c).
class GuidanceSource final : public LogitsSource {
 public:
  GuidanceSource(LogitsSource& model, std::size_t prompt_length,
                 std::vector<TokenId> negative_prompt, float gamma);
  std::int32_t width() const override { return model_.width(); }
  void Logits(std::span<const TokenId> context, std::span<float> out) override {
    MaskedLogits(context, nullptr, out);
  }
  void MaskedLogits(std::span<const TokenId> context, const std::uint32_t* mask,
                    std::span<float> out) override;

 private:
  LogitsSource& model_;
  std::size_t prompt_length_;
  std::vector<TokenId> negative_;
  float gamma_;
  std::vector<TokenId> uncond_;
  std::vector<float> zu_;
};

// Contrastive decoding: z = z_strong - alpha * z_weak on the plausible tokens, -inf elsewhere. A
// token is plausible iff p_strong(i) >= beta * max_j p_strong(j), the max taken over the allowed
// tokens when a mask is given (so the grammar never leaves zero candidates), i.e. z_strong(i) >=
// max z_strong + log(beta). beta in [0, 1]: 0 keeps every token; alpha = 0, beta = 0 give
// z_strong bit for bit. Both models see the same context and must have the same width (else
// `out` is left untouched). A weak logit of -inf (no finite penalty) leaves that token at
// z_strong.
class ContrastiveSource final : public LogitsSource {
 public:
  ContrastiveSource(LogitsSource& strong, LogitsSource& weak, float alpha, float beta);
  std::int32_t width() const override { return strong_.width(); }
  void Logits(std::span<const TokenId> context, std::span<float> out) override {
    MaskedLogits(context, nullptr, out);
  }
  void MaskedLogits(std::span<const TokenId> context, const std::uint32_t* mask,
                    std::span<float> out) override;

 private:
  LogitsSource& strong_;
  LogitsSource& weak_;
  float alpha_;
  float beta_;
  std::vector<float> zw_;
};

}  // namespace lockstep
