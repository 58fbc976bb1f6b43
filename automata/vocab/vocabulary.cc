// The public Vocabulary handle (include/lockstep/vocabulary.h): token tables, Load() by name
// or path, the encode pipeline (added tokens, normalizers, pre-tokenizers, BPE), Decode and
// Fingerprint. The format loaders live in tokenizer_json.cc, tiktoken.cc and
// sentencepiece_vocab.cc.
#include <dlfcn.h>
#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "automata/vocab/unicode.h"
#include "automata/vocab/vocabulary_impl.h"

namespace lockstep {

// Loader entry points defined in the per-format files.
Result<std::shared_ptr<const Vocabulary>> LoadTokenizerJsonWithConfig(
    std::string json, std::string_view config_json, const VocabularyOptions& options,
    std::string name);

// ---- Impl -----------------------------------------------------------------------------------

Vocabulary::Impl::Impl() = default;
Vocabulary::Impl::~Impl() = default;

void Vocabulary::Impl::Resize(std::int32_t n) {
  size_ = n;
  kinds_.assign(static_cast<std::size_t>(n), TokenKind::kUnused);
  pending_bytes_.assign(static_cast<std::size_t>(n), std::string());
  pending_text_.assign(static_cast<std::size_t>(n), std::string());
}

void Vocabulary::Impl::AddToken(TokenId id, TokenKind kind, std::string_view bytes,
                                std::string_view text) {
  auto i = static_cast<std::size_t>(id);
  kinds_[i] = kind;
  pending_bytes_[i].assign(bytes);
  pending_text_[i].assign(text);
}

void Vocabulary::Impl::Finish() {
  auto pack = [this](std::vector<std::string>* src, std::string* pool,
                     std::vector<std::uint32_t>* off) {
    std::size_t total = 0;
    for (const std::string& s : *src) total += s.size();
    pool->clear();
    pool->reserve(total);
    off->assign(static_cast<std::size_t>(size_) + 1, 0);
    for (std::size_t i = 0; i < src->size(); ++i) {
      (*off)[i] = static_cast<std::uint32_t>(pool->size());
      pool->append((*src)[i]);
    }
    (*off)[src->size()] = static_cast<std::uint32_t>(pool->size());
    std::vector<std::string>().swap(*src);
  };
  pack(&pending_bytes_, &bytes_pool_, &bytes_off_);
  pack(&pending_text_, &text_pool_, &text_off_);
}

Status Vocabulary::Impl::SetLogitsWidth(const VocabularyOptions& options) {
  if (options.logits_width == 0) {
    logits_width_ = size_;
    return Status::Ok();
  }
  if (options.logits_width < size_) {
    return Status(StatusCode::kInvalidArgument,
                  "logits_width " + std::to_string(options.logits_width) +
                      " is smaller than the vocabulary size " + std::to_string(size_),
                  "logits_width");
  }
  logits_width_ = options.logits_width;
  return Status::Ok();
}

void Vocabulary::Impl::ResolveSpecialIds(std::string_view config_eos, std::string_view config_bos) {
  // Special tokens are few and sit at the ends of the id range; a linear scan is cheap enough
  // at load, but collect them once.
  std::vector<std::pair<std::string_view, TokenId>> specials;
  for (TokenId id = 0; id < size_; ++id) {
    if (kinds_[static_cast<std::size_t>(id)] != TokenKind::kSpecial) continue;
    auto i = static_cast<std::size_t>(id);
    specials.emplace_back(
        std::string_view(text_pool_.data() + text_off_[i], text_off_[i + 1] - text_off_[i]), id);
  }
  auto lookup = [&](std::string_view text) -> TokenId {
    if (text.empty()) return kNoToken;
    for (const auto& [t, id] : specials) {
      if (t == text) return id;
    }
    return kNoToken;
  };
  auto add_eos = [this](TokenId id) {
    if (id == kNoToken) return;
    for (TokenId e : eos_ids_) {
      if (e == id) return;
    }
    eos_ids_.push_back(id);
  };
  if (eos_ids_.empty()) {
    add_eos(lookup(config_eos));
    for (std::string_view known :
         {"<|end_of_text|>", "<|eot_id|>", "<|endoftext|>", "<|im_end|>", "</s>"}) {
      add_eos(lookup(known));
    }
  }
  if (bos_ == kNoToken) {
    bos_ = lookup(config_bos);
    if (bos_ == kNoToken) bos_ = lookup("<|begin_of_text|>");
    if (bos_ == kNoToken) bos_ = lookup("<s>");
  }
}

Status Vocabulary::Impl::EncodeSegment(std::string_view text, bool first,
                                       const EncodeOptions& options,
                                       std::vector<TokenId>* out) const {
  // Normalizers. A hostile file can chain expanding replacements; bound the growth.
  const std::size_t max_bytes = 64 * text.size() + 4096;
  auto TooLong = [] {
    return Status(StatusCode::kResourceLimit,
                  "the tokenizer's normalizers expand the text more than 64-fold", "");
  };
  std::string buf(text);
  std::string tmp;
  for (const NormalizerStep& step : normalizers_) {
    switch (step.kind) {
      case NormalizerStep::Kind::kNfc:
        if (!vocab::NormalizeNfc(buf, &tmp)) {
          return Status(StatusCode::kInternal, "ICU NFC normalization failed");
        }
        buf.swap(tmp);
        break;
      case NormalizerStep::Kind::kPrepend:
        if (options.add_dummy_prefix && !buf.empty()) buf.insert(0, step.to);
        if (buf.size() > max_bytes) return TooLong();
        break;
      case NormalizerStep::Kind::kReplace: {
        if (step.from.empty()) break;
        tmp.clear();
        std::size_t last = 0;
        for (std::size_t p = buf.find(step.from); p != std::string::npos;
             p = buf.find(step.from, p + step.from.size())) {
          tmp.append(buf, last, p - last);
          tmp.append(step.to);
          last = p + step.from.size();
        }
        tmp.append(buf, last, std::string::npos);
        buf.swap(tmp);
        if (buf.size() > max_bytes) return TooLong();
        break;
      }
    }
  }
  if (byte_level_ && add_prefix_space_ && !buf.empty() && buf[0] != ' ') buf.insert(0, " ");
  // Pre-tokenizers.
  thread_local std::vector<std::string_view> pieces;
  thread_local std::vector<std::string_view> next;
  pieces.clear();
  if (!buf.empty()) pieces.push_back(buf);
  std::string meta_buf;  // Metaspace rewrites the text; pieces then point into meta_buf
  for (const PreTokenizerStep& step : pre_tokenizers_) {
    if (step.kind == PreTokenizerStep::Kind::kSplit) {
      next.clear();
      for (std::string_view p : pieces) {
        if (!step.splitter->Split(p, &next)) {
          return Status(StatusCode::kResourceLimit,
                        "the pre-tokenizer regex exceeded ICU's time or stack limit", "");
        }
      }
      pieces.swap(next);
      continue;
    }
    // Metaspace: replace ' ' by the replacement, prepend it, optionally split before each.
    std::string joined;
    for (std::string_view p : pieces) joined.append(p);
    meta_buf.clear();
    if (step.prepend && (first || step.prepend_always) && options.add_dummy_prefix &&
        !joined.empty() && joined.compare(0, step.replacement.size(), step.replacement) != 0) {
      meta_buf = step.replacement;
    }
    for (char c : joined) {
      if (c == ' ') {
        meta_buf.append(step.replacement);
      } else {
        meta_buf.push_back(c);
      }
    }
    pieces.clear();
    if (meta_buf.size() > max_bytes) return TooLong();
    if (meta_buf.empty()) continue;
    if (!step.split || step.replacement.empty()) {
      pieces.push_back(meta_buf);
      continue;
    }
    std::string_view all(meta_buf);
    std::size_t start = 0;
    for (std::size_t p = all.find(step.replacement, 1); p != std::string_view::npos;
         p = all.find(step.replacement, p + step.replacement.size())) {
      if (p > start) pieces.push_back(all.substr(start, p - start));
      start = p;
    }
    pieces.push_back(all.substr(start));
  }
  std::size_t bad = 0;
  for (std::string_view p : pieces) {
    if (!bpe_.Encode(p, out, &bad)) {
      return Status(StatusCode::kUnsupported,
                    "the vocabulary has no token (and no fallback) for a byte of the text",
                    "piece offset " + std::to_string(bad));
    }
  }
  return Status::Ok();
}

Result<std::vector<TokenId>> Vocabulary::Impl::Encode(std::string_view text,
                                                      const EncodeOptions& options) const {
  std::size_t bad = vocab::FindInvalidUtf8(text);
  if (bad != std::string_view::npos) {
    return Status(StatusCode::kInvalidArgument, "text is not valid UTF-8",
                  "offset " + std::to_string(bad));
  }
  std::vector<TokenId> out;
  if (encoder_ == Encoder::kSentencePiece) {
    const sentencepiece::SentencePieceProcessor* sp =
        options.add_dummy_prefix ? sp_.get() : sp_no_prefix_.get();
    std::vector<int> ids;
    auto st = sp->Encode(std::string_view(text), &ids);
    if (!st.ok()) return Status(StatusCode::kInternal, "sentencepiece: " + st.ToString());
    out.assign(ids.begin(), ids.end());
    return out;
  }
  out.reserve(text.size() / 3 + 4);
  std::size_t pos = 0;
  bool first = true;
  while (pos < text.size()) {
    // Earliest (then longest) non-special added token in the rest of the text.
    std::size_t best = std::string_view::npos;
    std::size_t best_len = 0;
    TokenId best_id = kNoToken;
    for (const auto& [literal, id] : literal_added_) {
      std::size_t p = text.find(literal, pos);
      if (p == std::string_view::npos) continue;
      if (p < best || (p == best && literal.size() > best_len)) {
        best = p;
        best_len = literal.size();
        best_id = id;
      }
    }
    std::size_t end = best == std::string_view::npos ? text.size() : best;
    if (end > pos) {
      LOCKSTEP_RETURN_IF_ERROR(EncodeSegment(text.substr(pos, end - pos), first, options, &out));
    }
    first = false;
    if (best == std::string_view::npos) break;
    out.push_back(best_id);
    pos = best + best_len;
  }
  return out;
}

// ---- Vocabulary -----------------------------------------------------------------------------

Vocabulary::Vocabulary(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Vocabulary::~Vocabulary() = default;

std::shared_ptr<const Vocabulary> Vocabulary::FromImpl(std::unique_ptr<Impl> impl) {
  return std::shared_ptr<const Vocabulary>(new Vocabulary(std::move(impl)));
}

const std::string& Vocabulary::name() const { return impl_->name_; }
std::int32_t Vocabulary::size() const { return impl_->size_; }
std::int32_t Vocabulary::logits_width() const { return impl_->logits_width_; }

std::string_view Vocabulary::TokenBytes(TokenId id) const {
  if (id < 0 || id >= impl_->size_) return {};
  auto i = static_cast<std::size_t>(id);
  return std::string_view(impl_->bytes_pool_.data() + impl_->bytes_off_[i],
                          impl_->bytes_off_[i + 1] - impl_->bytes_off_[i]);
}

TokenKind Vocabulary::Kind(TokenId id) const {
  if (id < 0 || id >= impl_->size_) return TokenKind::kUnused;
  return impl_->kinds_[static_cast<std::size_t>(id)];
}

std::string_view Vocabulary::TokenText(TokenId id) const {
  if (id < 0 || id >= impl_->size_) return {};
  auto i = static_cast<std::size_t>(id);
  return std::string_view(impl_->text_pool_.data() + impl_->text_off_[i],
                          impl_->text_off_[i + 1] - impl_->text_off_[i]);
}

TokenId Vocabulary::FindToken(std::string_view text) const {
  std::call_once(impl_->by_text_once_, [this] {
    impl_->by_text_.Reserve(static_cast<std::size_t>(impl_->size_));
    // Insert in reverse so the lowest id wins when two tokens share a spelling.
    for (TokenId id = impl_->size_ - 1; id >= 0; --id) {
      if (Kind(id) == TokenKind::kUnused) continue;
      impl_->by_text_.Insert(TokenText(id), id);
    }
  });
  return impl_->by_text_.Find(text);
}

const std::vector<TokenId>& Vocabulary::eos_ids() const { return impl_->eos_ids_; }
TokenId Vocabulary::bos() const { return impl_->bos_; }

Result<std::vector<TokenId>> Vocabulary::Encode(std::string_view text,
                                                const EncodeOptions& options) const {
  return impl_->Encode(text, options);
}

Result<std::string> Vocabulary::Decode(std::span<const TokenId> ids) const {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= impl_->size_) {
      return Status(StatusCode::kInvalidArgument,
                    "token id " + std::to_string(ids[i]) + " out of range [0, " +
                        std::to_string(impl_->size_) + ")",
                    "index " + std::to_string(i));
    }
    out.append(TokenBytes(ids[i]));
  }
  return out;
}

std::uint64_t Vocabulary::Fingerprint() const {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a 64
  auto mix_byte = [&h](unsigned char b) {
    h ^= b;
    h *= 0x100000001B3ull;
  };
  auto mix_u32 = [&](std::uint32_t v) {
    for (int k = 0; k < 4; ++k) mix_byte(static_cast<unsigned char>(v >> (8 * k)));
  };
  mix_u32(static_cast<std::uint32_t>(impl_->size_));
  mix_u32(static_cast<std::uint32_t>(impl_->logits_width_));
  for (TokenId id = 0; id < impl_->size_; ++id) {
    mix_byte(static_cast<unsigned char>(Kind(id)));
    std::string_view b = TokenBytes(id);
    mix_u32(static_cast<std::uint32_t>(b.size()));
    for (char c : b) mix_byte(static_cast<unsigned char>(c));
  }
  mix_u32(static_cast<std::uint32_t>(impl_->eos_ids_.size()));
  for (TokenId e : impl_->eos_ids_) mix_u32(static_cast<std::uint32_t>(e));
  return h;
}

namespace {

// "<0xNN>" (SentencePiece's spelling of a byte-fallback token) -> NN, or -1.
int ParseByteSpelling(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  int v = 0;
  for (char c : s.substr(3, 2)) {
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                   : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace

Result<std::shared_ptr<const Vocabulary>> Vocabulary::FromTokens(
    std::span<const std::string_view> bytes, std::span<const TokenKind> kinds,
    std::span<const TokenId> eos_ids, const VocabularyOptions& options, std::string name) {
  // The limits of the other loaders: ids below 2^24, token bytes within the trie's 16-bit depth,
  // pools addressed by 32-bit offsets.
  constexpr std::size_t kMaxTokens = std::size_t{1} << 24;
  constexpr std::size_t kMaxTokenBytes = 65535;
  constexpr std::size_t kMaxPoolBytes = std::size_t{0xFFFFFFFFu};
  auto at = [](std::size_t i) { return "token " + std::to_string(i); };
  if (bytes.empty()) return Status(StatusCode::kInvalidVocabulary, "no tokens", "tokens");
  if (bytes.size() > kMaxTokens) {
    return Status(StatusCode::kInvalidVocabulary,
                  std::to_string(bytes.size()) + " tokens; at most 2^24 are supported", "tokens");
  }
  if (!kinds.empty() && kinds.size() != bytes.size()) {
    return Status(StatusCode::kInvalidArgument,
                  std::to_string(kinds.size()) + " token kinds for " +
                      std::to_string(bytes.size()) + " tokens",
                  "kinds");
  }
  const auto n = static_cast<std::int32_t>(bytes.size());
  auto kind_of = [&](std::size_t i) { return kinds.empty() ? TokenKind::kNormal : kinds[i]; };
  auto impl = std::make_unique<Impl>();
  impl->name_ = std::move(name);
  impl->Resize(n);
  impl->byte_level_ = true;
  vocab::BpeModel& bpe = impl->bpe_;
  bpe.symbols = vocab::BpeModel::Symbols::kBytes;
  bpe.ignore_merges = true;
  bpe.vocab.Reserve(bytes.size());
  std::size_t pool = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const std::string_view b = bytes[i];
    const TokenKind kind = kind_of(i);
    if (b.size() > kMaxTokenBytes) {
      return Status(StatusCode::kInvalidVocabulary, "a token longer than 65535 bytes", at(i));
    }
    pool += b.size();
    if (pool > kMaxPoolBytes) {
      return Status(StatusCode::kInvalidVocabulary, "the tokens hold more than 4 GiB", at(i));
    }
    const auto id = static_cast<TokenId>(i);
    switch (kind) {
      case TokenKind::kNormal:
        impl->AddToken(id, kind, b, b);
        break;
      case TokenKind::kByte: {
        const int v = b.size() == 1 ? static_cast<unsigned char>(b[0]) : ParseByteSpelling(b);
        if (v < 0) {
          return Status(StatusCode::kInvalidVocabulary,
                        "a byte token must be one byte or spelled <0xNN>", at(i));
        }
        impl->AddToken(id, kind, std::string(1, static_cast<char>(v)), b);
        break;
      }
      case TokenKind::kSpecial:
      case TokenKind::kUnused:
        impl->AddToken(id, kind, {}, b);
        break;
      default:
        return Status(StatusCode::kInvalidArgument,
                      "unknown token kind " + std::to_string(static_cast<int>(kind)), at(i));
    }
  }
  for (std::size_t i = 0; i < eos_ids.size(); ++i) {
    const TokenId e = eos_ids[i];
    if (e < 0 || e >= n || kind_of(static_cast<std::size_t>(e)) != TokenKind::kSpecial) {
      return Status(StatusCode::kInvalidArgument,
                    "eos id " + std::to_string(e) + " is not a special token in [0, " +
                        std::to_string(n) + ")",
                    "eos_ids[" + std::to_string(i) + "]");
    }
    if (std::find(impl->eos_ids_.begin(), impl->eos_ids_.end(), e) == impl->eos_ids_.end()) {
      impl->eos_ids_.push_back(e);
    }
  }
  impl->Finish();
  LOCKSTEP_RETURN_IF_ERROR(impl->SetLogitsWidth(options));
  impl->ResolveSpecialIds({}, {});
  // The encoder's byte map: normal tokens first (lowest id wins a shared spelling), then byte
  // tokens for bytes no normal token spells.
  const Vocabulary::Impl& tables = *impl;
  auto emitted = [&](TokenId id) {
    auto i = static_cast<std::size_t>(id);
    return std::string_view(tables.bytes_pool_.data() + tables.bytes_off_[i],
                            tables.bytes_off_[i + 1] - tables.bytes_off_[i]);
  };
  for (TokenKind pass : {TokenKind::kNormal, TokenKind::kByte}) {
    for (TokenId id = 0; id < n; ++id) {
      if (impl->kinds_[static_cast<std::size_t>(id)] != pass) continue;
      const std::string_view b = emitted(id);
      if (b.empty() || bpe.vocab.Find(b) != kNoToken) continue;
      bpe.vocab.Insert(b, id);
      if (b.size() == 1) bpe.byte_ids_[static_cast<unsigned char>(b[0])] = id;
    }
  }
  bpe.merge_by_concat = true;
  bpe.token_pool = &impl->bytes_pool_;
  bpe.token_off = &impl->bytes_off_;
  return FromImpl(std::move(impl));
}

namespace {

// Its address names the binary (executable or shared object) that holds this code.
const char kDataDirectoryAnchor = 0;

// The share/lockstep folder of the installation the running code belongs to: the nearest of the
// four folders above the binary's own folder that holds share/lockstep/tokenizers, so that
// PREFIX/bin/app and PREFIX/lib/python3/dist-packages/lockstep*.so both find PREFIX/share/lockstep
// wherever PREFIX was installed or moved. "" when there is none.
std::string DataDirectoryBesideBinary() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path binary;
  Dl_info info{};
  if (dladdr(&kDataDirectoryAnchor, &info) != 0 && info.dli_fname != nullptr &&
      info.dli_fname[0] == '/') {
    binary = info.dli_fname;  // a shared object, or the executable run by its absolute path
  } else {
    binary = fs::read_symlink("/proc/self/exe", ec);  // the executable
    if (ec) return {};
  }
  fs::path dir = binary.parent_path();
  for (int up = 0; up < 4 && dir.has_relative_path(); ++up) {
    dir = dir.parent_path();
    fs::path candidate = dir / "share" / "lockstep";
    if (fs::is_directory(candidate / "tokenizers", ec)) return candidate.string();
  }
  return {};
}

}  // namespace

std::string DataDirectory() {
  if (const char* env = std::getenv("LOCKSTEP_DATA_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  if (std::string beside = DataDirectoryBesideBinary(); !beside.empty()) return beside;
#ifdef LOCKSTEP_SOURCE_DATA_DIR
  if (std::filesystem::is_directory(LOCKSTEP_SOURCE_DATA_DIR)) return LOCKSTEP_SOURCE_DATA_DIR;
#endif
#ifdef LOCKSTEP_INSTALL_DATA_DIR
  return LOCKSTEP_INSTALL_DATA_DIR;
#else
  return "/usr/local/share/lockstep";
#endif
}

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

Result<std::shared_ptr<const Vocabulary>> LoadFile(const std::filesystem::path& path,
                                                   const VocabularyOptions& options,
                                                   std::string name) {
  std::string p = path.string();
  if (EndsWith(p, ".tiktoken")) {
    LOCKSTEP_ASSIGN_OR_RETURN(std::string ranks, vocab::ReadFile(p));
    std::filesystem::path meta = path;
    meta.replace_extension(".meta.json");
    LOCKSTEP_ASSIGN_OR_RETURN(std::string meta_json, vocab::ReadFile(meta.string()));
    if (name.empty()) name = path.stem().string();
    return Vocabulary::FromTiktoken(ranks, meta_json, options, std::move(name));
  }
  if (name.empty()) name = path.parent_path().filename().string();
  if (name.empty()) name = path.filename().string();
  LOCKSTEP_ASSIGN_OR_RETURN(std::string raw, vocab::ReadFile(p));
  bool gz = raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1F &&
            static_cast<unsigned char>(raw[1]) == 0x8B;
  if (EndsWith(p, ".model") && !gz) {
    return Vocabulary::FromSentencePiece(raw, options, std::move(name));
  }
  auto inflated = vocab::MaybeGunzip(std::move(raw));
  if (!inflated.ok()) {
    return Status(inflated.status().code(), inflated.status().message(),
                  p + ": " + inflated.status().location());
  }
  std::string config;
  std::filesystem::path config_path = path.parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::is_regular_file(config_path, ec)) {
    auto c = vocab::ReadFile(config_path.string());
    if (c.ok()) config = std::move(c.value());
  }
  return LoadTokenizerJsonWithConfig(std::move(inflated.value()), config, options, std::move(name));
}

}  // namespace

Result<std::shared_ptr<const Vocabulary>> Vocabulary::Load(std::string_view name_or_path,
                                                           const VocabularyOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path path{std::string(name_or_path)};
  if (fs::is_regular_file(path, ec)) return LoadFile(path, options, "");
  // A bundled name (or a directory holding a tokenizer).
  fs::path dir = path;
  std::string name;
  bool is_name = !name_or_path.empty() && name_or_path.find('/') == std::string_view::npos &&
                 !fs::is_directory(path, ec);
  if (is_name) {
    dir = fs::path(DataDirectory()) / "tokenizers" / std::string(name_or_path);
    name = std::string(name_or_path);
  }
  if (fs::is_directory(dir, ec)) {
    for (const char* file : {"tokenizer.json.gz", "tokenizer.json", "tokenizer.model"}) {
      if (fs::is_regular_file(dir / file, ec)) {
        if (name.empty()) name = dir.filename().string();
        return LoadFile(dir / file, options, name);
      }
    }
  }
  return Status(StatusCode::kIoError,
                "no vocabulary file or bundled vocabulary named '" + std::string(name_or_path) +
                    "' (bundled ones live in " + DataDirectory() + "/tokenizers)",
                std::string(name_or_path));
}

}  // namespace lockstep
