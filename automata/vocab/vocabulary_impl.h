// Vocabulary::Impl: the flat token tables and the encoder pipeline behind the public
// Vocabulary handle, shared by the loaders (tokenizer_json.cc, tiktoken.cc,
// sentencepiece_vocab.cc) and vocabulary.cc. Internal to automata/.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "automata/vocab/bpe.h"
#include "automata/vocab/pretokenizer.h"
#include "lockstep/vocabulary.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace lockstep {

class Vocabulary::Impl {
 public:
  Impl();
  ~Impl();

  // One normalizer step of an HF tokenizer.json, applied in order.
  struct NormalizerStep {
    enum class Kind { kNfc, kPrepend, kReplace } kind;
    std::string from;  // kReplace: literal to replace
    std::string to;    // kPrepend: prefix; kReplace: replacement
  };
  // One pre-tokenizer step of an HF tokenizer.json, applied to every piece in order.
  struct PreTokenizerStep {
    enum class Kind { kSplit, kMetaspace } kind = Kind::kSplit;
    std::unique_ptr<vocab::Splitter> splitter;  // kSplit
    std::string replacement;                    // kMetaspace: "▁"
    bool prepend = false;                       // kMetaspace: prepend_scheme first/always
    bool prepend_always = false;                // kMetaspace: also after added tokens
    bool split = false;                         // kMetaspace: split before each replacement

    static PreTokenizerStep Split(std::unique_ptr<vocab::Splitter> splitter) {
      PreTokenizerStep step;
      step.splitter = std::move(splitter);
      return step;
    }
  };
  enum class Encoder { kBpe, kSentencePiece };

  // Appends a token; `bytes` is what it emits, `text` is how the file spells it.
  void AddToken(TokenId id, TokenKind kind, std::string_view bytes, std::string_view text);
  // Sizes the tables for ids [0, n): ids never set stay kUnused.
  void Resize(std::int32_t n);
  // Packs the per-id strings into the flat pools; call once after all AddToken calls.
  void Finish();
  // Checks options.logits_width and sets logits_width_.
  Status SetLogitsWidth(const VocabularyOptions& options);
  // Resolves eos/bos: names from tokenizer_config (may be empty), then the known names.
  void ResolveSpecialIds(std::string_view config_eos, std::string_view config_bos);

  Result<std::vector<TokenId>> Encode(std::string_view text, const EncodeOptions& options) const;

  // ---- tables ----
  std::string name_;
  std::int32_t size_ = 0;
  std::int32_t logits_width_ = 0;
  std::vector<TokenKind> kinds_;
  std::string bytes_pool_;
  std::vector<std::uint32_t> bytes_off_;  // size_ + 1
  std::string text_pool_;
  std::vector<std::uint32_t> text_off_;  // size_ + 1
  std::vector<TokenId> eos_ids_;
  TokenId bos_ = kNoToken;
  mutable std::once_flag by_text_once_;
  mutable vocab::StringIdMap by_text_;

  // ---- encoder ----
  Encoder encoder_ = Encoder::kBpe;
  std::vector<NormalizerStep> normalizers_;
  std::vector<PreTokenizerStep> pre_tokenizers_;
  bool byte_level_ = false;        // pieces are bytes (GPT-2 table); else SentencePiece-style
  bool add_prefix_space_ = false;  // ByteLevel add_prefix_space
  // Added tokens that are not special: HF matches their text in the input before splitting.
  std::vector<std::pair<std::string, TokenId>> literal_added_;
  vocab::BpeModel bpe_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_no_prefix_;

 private:
  Status EncodeSegment(std::string_view text, bool first, const EncodeOptions& options,
                       std::vector<TokenId>* out) const;
  std::vector<std::string> pending_bytes_;
  std::vector<std::string> pending_text_;
};

namespace vocab {
// Reads a whole file (bounded); kIoError with the path as location.
Result<std::string> ReadFile(const std::string& path);
// Gunzips `data` when it starts with the gzip magic, else returns it as is. Output is bounded;
// kInvalidVocabulary with a byte offset for corrupt or truncated streams.
Result<std::string> MaybeGunzip(std::string data);
}  // namespace vocab

// The tables behind a Vocabulary, for the loaders (which wrap the tables they finish) and the
// engine's own tests.
struct VocabularyAccess {
  static const Vocabulary::Impl& Tables(const Vocabulary& v) { return *v.impl_; }
  static std::shared_ptr<const Vocabulary> Wrap(std::unique_ptr<Vocabulary::Impl> impl) {
    return Vocabulary::FromImpl(std::move(impl));
  }
};

}  // namespace lockstep
