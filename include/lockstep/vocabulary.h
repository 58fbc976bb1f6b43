// Vocabulary: a real tokenizer's tokens as exact byte strings, its special tokens, and its
// canonical BPE encoder. Loaded once, immutable, shared by every compiled grammar and matcher.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/status.h"
#include "lockstep/types.h"

namespace lockstep {

enum class TokenKind : std::uint8_t {
  kNormal = 0,   // emits its bytes
  kByte = 1,     // SentencePiece byte-fallback <0xNN>: emits one byte
  kSpecial = 2,  // control / added special token (BOS, EOS, chat markers): emits no text
  kUnused = 3,   // id inside [0, size) that the tokenizer does not define (gap): never allowed
};

struct VocabularyOptions {
  // Logits width of the model; 0 means "same as the vocabulary". Must be >= size() when set.
  std::int32_t logits_width = 0;
};

struct EncodeOptions {
  // SentencePiece-style tokenizers (Mistral, Llama-2) prepend a dummy "▁" to a text by default,
  // as their reference libraries do. Constrained generation continues text mid-stream, so the
  // matcher encodes with add_dummy_prefix = false.
  bool add_dummy_prefix = true;
};

class Vocabulary {
 public:
  // `name_or_path`: a bundled name ("llama3", "gpt2", "qwen2.5", "mistral", resolved to
  // DataDirectory()/tokenizers/<name>/tokenizer.json.gz or .json), or a path to a
  // tokenizer.json (plain or .gz; a tokenizer_config.json beside it supplies eos/bos), a
  // .tiktoken rank file (meta read from <stem>.meta.json beside it), a SentencePiece
  // tokenizer.model, or a directory holding one of those. Errors: kIoError (missing file),
  // kInvalidVocabulary (malformed; location = byte offset or JSON Pointer), kUnsupported (a
  // normalizer, pre-tokenizer or model feature the encoder cannot reproduce), kInvalidArgument
  // (logits_width < size).
  static Result<std::shared_ptr<const Vocabulary>> Load(std::string_view name_or_path,
                                                        const VocabularyOptions& options = {});
  // From the text of an HF tokenizer.json (gzipped bytes are inflated first), and optionally
  // the text of the tokenizer_config.json beside it (its eos_token / bos_token come first).
  static Result<std::shared_ptr<const Vocabulary>> FromTokenizerJson(
      std::string_view json, const VocabularyOptions& options = {}, std::string name = "json",
      std::string_view tokenizer_config_json = {});
  // From a tiktoken rank file's text and its meta json ({pat_str, special_tokens, n_vocab}).
  static Result<std::shared_ptr<const Vocabulary>> FromTiktoken(
      std::string_view ranks, std::string_view meta_json, const VocabularyOptions& options = {},
      std::string name = "tiktoken");
  // From a serialized SentencePiece ModelProto (tokenizer.model contents).
  static Result<std::shared_ptr<const Vocabulary>> FromSentencePiece(
      std::string_view model_proto, const VocabularyOptions& options = {},
      std::string name = "sentencepiece");
  // From a host's own token table (what the C ABI's lockstep_vocab_from_tokens passes): token i
  // emits `bytes[i]` and has kind `kinds[i]` (`kinds` empty: all kNormal). kSpecial and kUnused
  // tokens emit nothing; their `bytes` are kept as TokenText. A kByte token is its one byte or
  // the spelling "<0xNN>". `eos_ids` must be kSpecial tokens; empty looks for the usual EOS
  // names among the special tokens' texts. Encode treats ids as BPE merge ranks (tiktoken's
  // rule: a pair merges iff its concatenation is a token, lowest id first) with no
  // pre-tokenizer or normalizer, which is exact for tiktoken-style vocabularies and an
  // approximation for others. Errors: kInvalidArgument (kinds size, a bad kind, a bad EOS id,
  // logits_width < size), kInvalidVocabulary (no tokens, more than 2^24, a token longer than
  // 65535 bytes, a malformed byte token); location "token N" or "eos_ids[N]".
  static Result<std::shared_ptr<const Vocabulary>> FromTokens(
      std::span<const std::string_view> bytes, std::span<const TokenKind> kinds,
      std::span<const TokenId> eos_ids, const VocabularyOptions& options = {},
      std::string name = "tokens");

  virtual ~Vocabulary();

  const std::string& name() const;
  // Number of token ids: max id + 1 (gaps are kUnused).
  std::int32_t size() const;
  // Logits width (>= size()). Ids in [size(), logits_width()) are padding, never allowed.
  std::int32_t logits_width() const;

  // Exact bytes the token emits ("▁" already turned to ' ', <0x0A> to "\n", byte-level BPE
  // already mapped back through the bytes-to-unicode table). Empty for special/unused tokens.
  std::string_view TokenBytes(TokenId id) const;
  TokenKind Kind(TokenId id) const;
  bool IsSpecial(TokenId id) const { return Kind(id) == TokenKind::kSpecial; }
  // The token's string as written in the tokenizer file (for display and lookup by name).
  std::string_view TokenText(TokenId id) const;
  // Looks up a token by its text in the file (e.g. "<|eot_id|>"); kNoToken if absent.
  TokenId FindToken(std::string_view text) const;

  // End-of-sequence ids (for Llama-3: <|end_of_text|>, <|eot_id|>; from the tokenizer_config
  // conventions / known names). Never empty for the bundled vocabularies.
  const std::vector<TokenId>& eos_ids() const;
  TokenId eos() const { return eos_ids().empty() ? kNoToken : eos_ids().front(); }
  TokenId bos() const;

  // Canonical encoding (exactly the ids the reference library produces; special-token text in
  // `text` is treated as ordinary text, while the text of an added token that is not special,
  // such as Qwen's "<tool_call>", becomes that token, as HF tokenizers does). Thread-safe.
  // Errors: kInvalidArgument for text that is not valid UTF-8; kUnsupported when a byte has no
  // token and the vocabulary has no fallback; kResourceLimit when an ICU-fallback pre-tokenizer
  // regex exceeds its time limit.
  Result<std::vector<TokenId>> Encode(std::string_view text,
                                      const EncodeOptions& options = {}) const;
  // Concatenated TokenBytes of `ids` (special tokens emit nothing). Ids out of range are an error.
  Result<std::string> Decode(std::span<const TokenId> ids) const;

  // Stable 64-bit fingerprint of (token bytes, kinds, eos ids, logits width).
  std::uint64_t Fingerprint() const;

  class Impl;  // the token tables and the encoder (not installed)

 protected:
  explicit Vocabulary(std::unique_ptr<Impl> impl);

 private:
  friend struct VocabularyAccess;  // the loaders and the engine's own layers
  // Wraps finished tables into a shareable handle.
  static std::shared_ptr<const Vocabulary> FromImpl(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Directory searched for bundled vocabularies by name (<dir>/tokenizers/<name>/), the first of:
// the environment variable LOCKSTEP_DATA_DIR if set; PREFIX/share/lockstep of the installation
// that holds the running program or Python module (the nearest of the four folders above the
// binary's folder that has share/lockstep/tokenizers: PREFIX/bin/app, a module in
// PREFIX/lib/python3/dist-packages); the source tree's schemas/ folder (compiled in, when it
// still exists); the configured install location (CMAKE_INSTALL_PREFIX/share/lockstep).
std::string DataDirectory();

}  // namespace lockstep
