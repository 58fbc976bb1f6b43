// Loader for tiktoken rank files plus their meta json (Vocabulary::FromTiktoken): each line is
// "<base64 bytes> <rank>", rank = token id = merge priority; meta gives pat_str,
// special_tokens and n_vocab. Errors carry a byte offset or a JSON Pointer.
#include <simdjson.h>

#include <charconv>

#include "automata/vocab/vocabulary_impl.h"

namespace lockstep {
namespace {

constexpr std::int64_t kMaxTokenId = 1 << 24;

Status Invalid(std::string message, std::string location) {
  return Status(StatusCode::kInvalidVocabulary, std::move(message), std::move(location));
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict base64 (padding optional). Returns the offset of the first bad character, or npos.
std::size_t DecodeBase64(std::string_view in, std::string* out) {
  out->clear();
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t i = 0;
  for (; i < in.size() && in[i] != '='; ++i) {
    int v = Base64Value(in[i]);
    if (v < 0) return i;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  std::size_t data_len = i;
  for (; i < in.size(); ++i) {
    if (in[i] != '=') return i;
  }
  if (data_len % 4 == 1 || (in.size() > data_len && in.size() % 4 != 0)) return data_len;
  return std::string_view::npos;
}

}  // namespace

Result<std::shared_ptr<const Vocabulary>> Vocabulary::FromTiktoken(std::string_view ranks,
                                                                   std::string_view meta_json,
                                                                   const VocabularyOptions& options,
                                                                   std::string name) {
  // ---- meta ----
  simdjson::dom::parser parser;
  simdjson::padded_string padded(meta_json);
  simdjson::dom::element meta;
  if (auto err = parser.parse(padded).get(meta); err != simdjson::SUCCESS) {
    return Invalid(std::string("meta json is not valid JSON: ") + simdjson::error_message(err),
                   "meta");
  }
  std::string_view pat_str;
  if (meta["pat_str"].get_string().get(pat_str) != simdjson::SUCCESS) {
    return Invalid("meta json needs a string 'pat_str'", "meta:/pat_str");
  }
  std::vector<std::pair<std::string, std::int64_t>> specials;
  std::int64_t max_id = -1;
  {
    simdjson::dom::element e;
    if (meta["special_tokens"].get(e) == simdjson::SUCCESS && !e.is_null()) {
      simdjson::dom::object o;
      if (e.get_object().get(o) != simdjson::SUCCESS) {
        return Invalid("expected an object", "meta:/special_tokens");
      }
      for (auto field : o) {
        std::int64_t id;
        if (field.value.get_int64().get(id) != simdjson::SUCCESS || id < 0 || id >= kMaxTokenId) {
          return Invalid("special token id must be an integer in [0, 2^24)",
                         "meta:/special_tokens/" + std::string(field.key));
        }
        specials.emplace_back(std::string(field.key), id);
        max_id = std::max(max_id, id);
      }
    }
  }
  std::int64_t n_vocab = -1;
  {
    simdjson::dom::element e;
    if (meta["n_vocab"].get(e) == simdjson::SUCCESS && !e.is_null()) {
      if (e.get_int64().get(n_vocab) != simdjson::SUCCESS || n_vocab <= 0 ||
          n_vocab > kMaxTokenId) {
        return Invalid("n_vocab must be an integer in [1, 2^24]", "meta:/n_vocab");
      }
    }
  }

  // ---- ranks ----
  struct Entry {
    std::string bytes;
    std::int64_t rank;
  };
  std::vector<Entry> entries;
  entries.reserve(ranks.size() / 12);
  std::size_t pos = 0;
  std::string decoded;
  while (pos < ranks.size()) {
    std::size_t eol = ranks.find('\n', pos);
    if (eol == std::string_view::npos) eol = ranks.size();
    std::string_view line = ranks.substr(pos, eol - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) {
      std::size_t sp = line.find(' ');
      if (sp == std::string_view::npos || sp == 0) {
        return Invalid("expected \"<base64> <rank>\"", "offset " + std::to_string(pos));
      }
      std::size_t bad = DecodeBase64(line.substr(0, sp), &decoded);
      if (bad != std::string_view::npos) {
        return Invalid("bad base64", "offset " + std::to_string(pos + bad));
      }
      if (decoded.empty()) return Invalid("empty token", "offset " + std::to_string(pos));
      std::string_view num = line.substr(sp + 1);
      std::int64_t rank = -1;
      auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), rank);
      if (ec != std::errc() || ptr != num.data() + num.size() || rank < 0 || rank >= kMaxTokenId) {
        return Invalid("rank must be an integer in [0, 2^24)",
                       "offset " + std::to_string(pos + sp + 1));
      }
      entries.push_back(Entry{decoded, rank});
      max_id = std::max(max_id, rank);
    }
    pos = eol + 1;
  }
  if (entries.empty()) return Invalid("the rank file has no tokens", "offset 0");
  std::size_t count = entries.size() + specials.size();
  if (n_vocab < 0) n_vocab = max_id + 1;
  if (n_vocab < max_id + 1) {
    return Invalid("n_vocab " + std::to_string(n_vocab) + " is not above the largest id " +
                       std::to_string(max_id),
                   "meta:/n_vocab");
  }
  if (static_cast<std::size_t>(n_vocab) >= 4 * count + 65536) {
    return Invalid("token ids are too sparse", "meta:/n_vocab");
  }

  auto impl = std::make_unique<Impl>();
  impl->name_ = std::move(name);
  impl->Resize(static_cast<std::int32_t>(n_vocab));
  impl->byte_level_ = true;
  vocab::BpeModel& bpe = impl->bpe_;
  bpe.symbols = vocab::BpeModel::Symbols::kBytes;
  bpe.ignore_merges = true;  // tiktoken looks a whole piece up before merging
  bpe.vocab.Reserve(entries.size());
  std::vector<char> seen(static_cast<std::size_t>(n_vocab), 0);
  std::size_t line_no = 0;
  for (const Entry& e : entries) {
    if (seen[static_cast<std::size_t>(e.rank)]) {
      return Invalid("rank " + std::to_string(e.rank) + " appears twice",
                     "line " + std::to_string(line_no + 1));
    }
    seen[static_cast<std::size_t>(e.rank)] = 1;
    if (bpe.vocab.Find(e.bytes) != kNoToken) {
      return Invalid("token bytes appear twice", "line " + std::to_string(line_no + 1));
    }
    auto id = static_cast<TokenId>(e.rank);
    impl->AddToken(id, TokenKind::kNormal, e.bytes, e.bytes);
    bpe.vocab.Insert(e.bytes, id);
    if (e.bytes.size() == 1) bpe.byte_ids_[static_cast<unsigned char>(e.bytes[0])] = id;
    ++line_no;
  }
  for (const auto& [text, id] : specials) {
    if (seen[static_cast<std::size_t>(id)]) {
      return Invalid("special token id " + std::to_string(id) + " is also a rank",
                     "meta:/special_tokens/" + text);
    }
    impl->AddToken(static_cast<TokenId>(id), TokenKind::kSpecial, {}, text);
  }
  auto splitter = vocab::MakeRegexSplitter(pat_str);
  if (!splitter.ok()) {
    return Status(splitter.status().code(), splitter.status().message(),
                  "meta:/pat_str (" + splitter.status().location() + ")");
  }
  impl->pre_tokenizers_.push_back(Impl::PreTokenizerStep::Split(std::move(splitter.value())));
  impl->Finish();
  LOCKSTEP_RETURN_IF_ERROR(impl->SetLogitsWidth(options));
  impl->ResolveSpecialIds({}, {});
  // tiktoken merges the adjacent pair whose concatenation has the lowest rank: look the
  // concatenation up in the byte map instead of building a pair table.
  bpe.merge_by_concat = true;
  bpe.token_pool = &impl->bytes_pool_;
  bpe.token_off = &impl->bytes_off_;
  return FromImpl(std::move(impl));
}

}  // namespace lockstep
