// Loader for HF tokenizer.json files (Vocabulary::FromTokenizerJson): BPE models, byte-level
// (GPT-2, Llama-3, Qwen2.5) or SentencePiece-style with byte fallback (Mistral), their
// normalizers and pre-tokenizers. Parsed with simdjson; every malformed or unsupported part is
// reported with a JSON Pointer, never a crash.
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "automata/vocab/unicode.h"
#include "automata/vocab/vocabulary_impl.h"
#include "grammar/base/json_pointer.h"

namespace lockstep {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

constexpr std::int64_t kMaxTokenId = 1 << 24;

Status Invalid(std::string message, std::string pointer) {
  return Status(StatusCode::kInvalidVocabulary, std::move(message), std::move(pointer));
}
Status Unsupported(std::string message, std::string pointer) {
  return Status(StatusCode::kUnsupported, std::move(message), std::move(pointer));
}

// Byte offset of a JSON syntax error (simdjson's DOM does not report one).
struct OffsetFinder : nlohmann::json_sax<nlohmann::json> {
  std::size_t offset = 0;
  std::string what;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    offset = position;
    what = ex.what();
    return false;
  }
};

Status JsonSyntaxError(std::string_view json, simdjson::error_code err, std::string_view what) {
  OffsetFinder finder;
  std::string location = "offset unknown";
  try {
    nlohmann::json::sax_parse(json.begin(), json.end(), &finder);
    if (!finder.what.empty()) location = "offset " + std::to_string(finder.offset);
  } catch (...) {  // third-party exceptions stop here
  }
  return Invalid(std::string(what) + " is not valid JSON: " + simdjson::error_message(err),
                 location);
}

// Typed field access with JSON Pointer errors.
Result<std::string_view> GetString(element e, const std::string& ptr) {
  std::string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS) return Invalid("expected a string", ptr);
  return s;
}

Result<bool> GetBoolOr(object o, std::string_view key, bool def, const std::string& ptr) {
  element e;
  if (o[key].get(e) != simdjson::SUCCESS || e.is_null()) return def;
  bool b;
  if (e.get_bool().get(b) != simdjson::SUCCESS) {
    return Invalid("expected a boolean", ptr + "/" + std::string(key));
  }
  return b;
}

std::string_view TypeOf(object o) {
  std::string_view t;
  if (o["type"].get_string().get(t) != simdjson::SUCCESS) return {};
  return t;
}

struct Loader {
  std::unique_ptr<Vocabulary::Impl> impl = std::make_unique<Vocabulary::Impl>();
  bool saw_byte_level = false;
  bool saw_metaspace_decoder = false;
  std::string prepend_ptr;

  // Parses one step object (not a Sequence) of type `type` at `ptr`.
  using StepParser = Status (Loader::*)(object o, std::string_view type, const std::string& ptr);

  // A normalizer or pre-tokenizer entry: null is no step, {"type": "Sequence", <list_key>: [...]}
  // is its entries in order (nested sequences included), any other object is one step.
  Status Steps(element e, const std::string& ptr, std::string_view list_key, StepParser parse) {
    if (e.is_null()) return Status::Ok();
    object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) return Invalid("expected an object", ptr);
    std::string_view type = TypeOf(o);
    if (type != "Sequence") return (this->*parse)(o, type, ptr);
    const std::string list_ptr = ptr + "/" + std::string(list_key);
    array list;
    if (o[list_key].get_array().get(list) != simdjson::SUCCESS) {
      return Invalid("expected an array", list_ptr);
    }
    std::size_t i = 0;
    for (element child : list) {
      LOCKSTEP_RETURN_IF_ERROR(Steps(child, list_ptr + "/" + std::to_string(i++), list_key, parse));
    }
    return Status::Ok();
  }

  Status Normalizer(object o, std::string_view type, const std::string& ptr) {
    using Step = Vocabulary::Impl::NormalizerStep;
    if (type == "NFC") {
      impl->normalizers_.push_back(Step{Step::Kind::kNfc, {}, {}});
      return Status::Ok();
    }
    if (type == "Prepend") {
      element p;
      if (o["prepend"].get(p) != simdjson::SUCCESS) {
        return Invalid("missing 'prepend'", ptr + "/prepend");
      }
      LOCKSTEP_ASSIGN_OR_RETURN(std::string_view s, GetString(p, ptr + "/prepend"));
      impl->normalizers_.push_back(Step{Step::Kind::kPrepend, {}, std::string(s)});
      return Status::Ok();
    }
    if (type == "Replace") {
      std::string_view from, to;
      if (o["pattern"]["String"].get_string().get(from) != simdjson::SUCCESS) {
        return Unsupported("only Replace with a {\"String\": ...} pattern is supported",
                           ptr + "/pattern");
      }
      if (o["content"].get_string().get(to) != simdjson::SUCCESS) {
        return Invalid("expected a string", ptr + "/content");
      }
      impl->normalizers_.push_back(Step{Step::Kind::kReplace, std::string(from), std::string(to)});
      return Status::Ok();
    }
    return Unsupported("normalizer type '" + std::string(type) + "' is not supported",
                       ptr + "/type");
  }

  Status PreTokenizer(object o, std::string_view type, const std::string& ptr) {
    using Step = Vocabulary::Impl::PreTokenizerStep;
    if (type == "ByteLevel") {
      saw_byte_level = true;
      LOCKSTEP_ASSIGN_OR_RETURN(bool prefix, GetBoolOr(o, "add_prefix_space", false, ptr));
      LOCKSTEP_ASSIGN_OR_RETURN(bool use_regex, GetBoolOr(o, "use_regex", true, ptr));
      if (prefix) {
        if (!impl->pre_tokenizers_.empty()) {
          return Unsupported("ByteLevel add_prefix_space after another pre-tokenizer",
                             ptr + "/add_prefix_space");
        }
        impl->add_prefix_space_ = true;
      }
      if (use_regex) {
        LOCKSTEP_ASSIGN_OR_RETURN(auto splitter, vocab::MakeRegexSplitter(vocab::kGpt2Pattern));
        impl->pre_tokenizers_.push_back(Step::Split(std::move(splitter)));
      }
      return Status::Ok();
    }
    if (type == "Split") {
      std::string_view behavior;
      if (o["behavior"].get_string().get(behavior) != simdjson::SUCCESS) {
        return Invalid("expected a string", ptr + "/behavior");
      }
      if (behavior != "Isolated") {
        return Unsupported("Split behavior '" + std::string(behavior) + "' is not supported",
                           ptr + "/behavior");
      }
      LOCKSTEP_ASSIGN_OR_RETURN(bool invert, GetBoolOr(o, "invert", false, ptr));
      if (invert) return Unsupported("Split with invert=true is not supported", ptr + "/invert");
      std::string_view pattern;
      if (o["pattern"]["Regex"].get_string().get(pattern) == simdjson::SUCCESS) {
        auto splitter = vocab::MakeRegexSplitter(pattern);
        if (!splitter.ok()) {
          return Status(splitter.status().code(), splitter.status().message(),
                        ptr + "/pattern/Regex (" + splitter.status().location() + ")");
        }
        impl->pre_tokenizers_.push_back(Step::Split(std::move(splitter.value())));
        return Status::Ok();
      }
      if (o["pattern"]["String"].get_string().get(pattern) == simdjson::SUCCESS) {
        impl->pre_tokenizers_.push_back(
            Step::Split(vocab::MakeLiteralSplitter(std::string(pattern))));
        return Status::Ok();
      }
      return Invalid("expected {\"Regex\": string} or {\"String\": string}", ptr + "/pattern");
    }
    if (type == "Metaspace") {
      std::string_view replacement = "\xE2\x96\x81";
      element r;
      if (o["replacement"].get(r) == simdjson::SUCCESS && !r.is_null()) {
        LOCKSTEP_ASSIGN_OR_RETURN(replacement, GetString(r, ptr + "/replacement"));
      }
      bool prepend = true;
      std::string_view scheme;
      if (o["prepend_scheme"].get_string().get(scheme) == simdjson::SUCCESS) {
        if (scheme == "never") {
          prepend = false;
        } else if (scheme != "first" && scheme != "always") {
          return Unsupported("Metaspace prepend_scheme '" + std::string(scheme) + "'",
                             ptr + "/prepend_scheme");
        }
      } else {
        LOCKSTEP_ASSIGN_OR_RETURN(prepend, GetBoolOr(o, "add_prefix_space", true, ptr));
      }
      LOCKSTEP_ASSIGN_OR_RETURN(bool split, GetBoolOr(o, "split", true, ptr));
      Step step;
      step.kind = Step::Kind::kMetaspace;
      step.replacement = std::string(replacement);
      step.prepend = prepend;
      step.prepend_always = scheme == "always";
      step.split = split;
      impl->pre_tokenizers_.push_back(std::move(step));
      saw_metaspace_decoder = true;
      return Status::Ok();
    }
    return Unsupported("pre-tokenizer type '" + std::string(type) + "' is not supported",
                       ptr + "/type");
  }

  void ScanDecoder(element e) {
    object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) return;
    std::string_view type = TypeOf(o);
    if (type == "ByteLevel") saw_byte_level = true;
    if (type == "Metaspace" || type == "ByteFallback") saw_metaspace_decoder = true;
    if (type == "Replace") {
      std::string_view from;
      if (o["pattern"]["String"].get_string().get(from) == simdjson::SUCCESS &&
          from == "\xE2\x96\x81") {
        saw_metaspace_decoder = true;
      }
    }
    array list;
    if (o["decoders"].get_array().get(list) == simdjson::SUCCESS) {
      for (element child : list) ScanDecoder(child);
    }
  }
};

// "<0xNN>" -> NN, or -1.
int ByteFallbackValue(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int v = 0;
  for (char c : text.substr(3, 2)) {
    v <<= 4;
    if (c >= '0' && c <= '9') {
      v |= c - '0';
    } else if (c >= 'A' && c <= 'F') {
      v |= c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      v |= c - 'a' + 10;
    } else {
      return -1;
    }
  }
  return v;
}

// The content of "eos_token"/"bos_token" in a tokenizer_config.json (a string or {content}).
std::string ConfigToken(std::string_view config_json, std::string_view key) {
  if (config_json.empty()) return {};
  simdjson::dom::parser parser;
  simdjson::padded_string padded(config_json);
  element doc;
  if (parser.parse(padded).get(doc) != simdjson::SUCCESS) return {};
  element v;
  if (doc[key].get(v) != simdjson::SUCCESS) return {};
  std::string_view s;
  if (v.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  if (v["content"].get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  return {};
}

// ---- the steps of LoadTokenizerJsonWithConfig, in the order it runs them ----

// "model", checked to be a plain BPE model: no dropout, no subword prefix or suffix.
Result<object> BpeModelObject(object root) {
  object model;
  if (root["model"].get_object().get(model) != simdjson::SUCCESS) {
    return Invalid("missing or non-object 'model'", "/model");
  }
  std::string_view model_type = TypeOf(model);
  if (!model_type.empty() && model_type != "BPE") {
    return Unsupported("model type '" + std::string(model_type) + "' is not supported (BPE only)",
                       "/model/type");
  }
  element d;
  if (model["dropout"].get(d) == simdjson::SUCCESS && !d.is_null()) {
    double dropout = 0;
    if (d.get_double().get(dropout) != simdjson::SUCCESS) {
      return Invalid("expected a number", "/model/dropout");
    }
    if (dropout != 0.0) return Unsupported("BPE dropout is not supported", "/model/dropout");
  }
  for (std::string_view key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    element v;
    if (model[key].get(v) != simdjson::SUCCESS || v.is_null()) continue;
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) {
      return Invalid("expected a string", "/model/" + std::string(key));
    }
    if (!s.empty()) {
      return Unsupported("BPE " + std::string(key) + " is not supported",
                         "/model/" + std::string(key));
    }
  }
  return model;
}

// The normalizer, pre-tokenizer and decoder, which decide byte-level vs SentencePiece-style.
Status ReadPipeline(object root, Loader* loader) {
  element e;
  if (root["normalizer"].get(e) == simdjson::SUCCESS) {
    LOCKSTEP_RETURN_IF_ERROR(loader->Steps(e, "/normalizer", "normalizers", &Loader::Normalizer));
  }
  if (root["pre_tokenizer"].get(e) == simdjson::SUCCESS) {
    LOCKSTEP_RETURN_IF_ERROR(
        loader->Steps(e, "/pre_tokenizer", "pretokenizers", &Loader::PreTokenizer));
  }
  if (root["decoder"].get(e) == simdjson::SUCCESS) loader->ScanDecoder(e);
  return Status::Ok();
}

// The largest id and the number of tokens (model vocab plus added tokens), to size the tables.
struct IdRange {
  std::int64_t max_id = -1;
  std::size_t count = 0;
};

// First pass over the model vocab: every id an integer in [0, 2^24).
Status ScanVocabIds(object vocab_obj, IdRange* range) {
  for (auto field : vocab_obj) {
    std::int64_t id;
    if (field.value.get_int64().get(id) != simdjson::SUCCESS || id < 0 || id >= kMaxTokenId) {
      return Invalid("token id must be an integer in [0, 2^24)",
                     "/model/vocab" + JsonPointerSegment(field.key));
    }
    range->max_id = std::max(range->max_id, id);
    ++range->count;
  }
  return Status::Ok();
}

struct AddedToken {
  std::int64_t id;
  std::string_view content;
  bool special;
};

// "added_tokens" (absent or null: none). A non-special one is matched in the input text, where
// only plain literal matching is supported.
Status ReadAddedTokens(object root, std::vector<AddedToken>* added, IdRange* range) {
  element e;
  if (root["added_tokens"].get(e) != simdjson::SUCCESS || e.is_null()) return Status::Ok();
  array list;
  if (e.get_array().get(list) != simdjson::SUCCESS) {
    return Invalid("expected an array", "/added_tokens");
  }
  std::size_t i = 0;
  for (element t : list) {
    std::string ptr = "/added_tokens/" + std::to_string(i++);
    AddedToken a{};
    if (t["id"].get_int64().get(a.id) != simdjson::SUCCESS || a.id < 0 || a.id >= kMaxTokenId) {
      return Invalid("token id must be an integer in [0, 2^24)", ptr + "/id");
    }
    if (t["content"].get_string().get(a.content) != simdjson::SUCCESS) {
      return Invalid("expected a string", ptr + "/content");
    }
    object to;
    if (t.get_object().get(to) != simdjson::SUCCESS) return Invalid("expected an object", ptr);
    LOCKSTEP_ASSIGN_OR_RETURN(a.special, GetBoolOr(to, "special", false, ptr));
    if (!a.special) {
      for (std::string_view flag : {"lstrip", "rstrip", "single_word"}) {
        LOCKSTEP_ASSIGN_OR_RETURN(bool on, GetBoolOr(to, flag, false, ptr));
        if (on) {
          return Unsupported("added token with " + std::string(flag) + "=true",
                             ptr + "/" + std::string(flag));
        }
      }
    }
    added->push_back(a);
    range->max_id = std::max(range->max_id, a.id);
    ++range->count;
  }
  return Status::Ok();
}

// The tables hold ids [0, max_id]: refused when empty or far sparser than the tokens in them.
Status CheckIdRange(const IdRange& range) {
  if (range.max_id < 0) return Invalid("the vocabulary is empty", "/model/vocab");
  if (static_cast<std::size_t>(range.max_id) >= 4 * range.count + 65536) {
    return Invalid("token ids are too sparse (max id " + std::to_string(range.max_id) + " for " +
                       std::to_string(range.count) + " tokens)",
                   "/model/vocab");
  }
  return Status::Ok();
}

// What BuildBpeTables needs: model vocab ids, the unk token and the merges.
struct BpeInputs {
  std::vector<TokenId> model_ids;
  std::string unk;
  bool has_unk = false;
  std::string merge_pool;                 // left0 right0 left1 right1 ...
  std::vector<std::uint32_t> merge_offs;  // 2 * merges + 1 boundaries
};

// Second pass over the model vocab: each token with its bytes (byte-level decoded; or a
// <0xNN> byte-fallback token; or the text, Metaspace-decoded when the decoder says so), and the
// single-byte tokens the BPE model starts from.
void AddModelTokens(object vocab_obj, const Loader& loader, bool byte_fallback,
                    Vocabulary::Impl* impl, BpeInputs* inputs) {
  vocab::BpeModel& bpe = impl->bpe_;
  std::string bytes;
  for (auto field : vocab_obj) {
    std::int64_t id = 0;
    if (field.value.get_int64().get(id) != simdjson::SUCCESS) continue;  // checked by ScanVocabIds
    std::string_view text = field.key;
    TokenKind kind = TokenKind::kNormal;
    if (loader.saw_byte_level) {
      if (!vocab::DecodeByteLevel(text, &bytes)) bytes.assign(text);  // as HF's decoder does
      if (bytes.size() == 1) {
        bpe.byte_ids_[static_cast<unsigned char>(bytes[0])] = static_cast<TokenId>(id);
      }
    } else {
      int b = byte_fallback ? ByteFallbackValue(text) : -1;
      if (b >= 0) {
        kind = TokenKind::kByte;
        bytes.assign(1, static_cast<char>(b));
        bpe.byte_ids_[static_cast<std::size_t>(b)] = static_cast<TokenId>(id);
      } else if (loader.saw_metaspace_decoder) {
        vocab::MetaspaceToBytes(text, &bytes);
      } else {
        bytes.assign(text);
      }
    }
    impl->AddToken(static_cast<TokenId>(id), kind, bytes, text);
    inputs->model_ids.push_back(static_cast<TokenId>(id));
  }
}

// Special added tokens emit no bytes; the others emit their content and are matched literally.
void AddAddedTokens(const std::vector<AddedToken>& added, Vocabulary::Impl* impl) {
  for (const AddedToken& a : added) {
    if (a.special) {
      impl->AddToken(static_cast<TokenId>(a.id), TokenKind::kSpecial, {}, a.content);
    } else {
      impl->AddToken(static_cast<TokenId>(a.id), TokenKind::kNormal, a.content, a.content);
      if (!a.content.empty()) {
        impl->literal_added_.emplace_back(std::string(a.content), static_cast<TokenId>(a.id));
      }
    }
  }
}

Status ReadUnkToken(object model, BpeInputs* inputs) {
  element u;
  if (model["unk_token"].get(u) == simdjson::SUCCESS && !u.is_null()) {
    LOCKSTEP_ASSIGN_OR_RETURN(std::string_view unk, GetString(u, "/model/unk_token"));
    inputs->unk.assign(unk);
    inputs->has_unk = true;
  }
  return Status::Ok();
}

// "merges" ("a b" strings or ["a", "b"] pairs): checked for shape here, resolved to ids by
// InsertMerges.
Status ReadMerges(object model, BpeInputs* inputs) {
  array merges;
  if (model["merges"].get_array().get(merges) != simdjson::SUCCESS) {
    return Invalid("missing or non-array 'merges'", "/model/merges");
  }
  inputs->merge_offs.reserve(2 * merges.size() + 1);
  inputs->merge_offs.push_back(0);
  std::size_t index = 0;
  for (element m : merges) {
    std::string_view left, right, s;
    if (m.get_string().get(s) == simdjson::SUCCESS) {
      std::size_t sp = s.find(' ', 1);
      if (sp == std::string_view::npos || s.find(' ', sp + 1) != std::string_view::npos) {
        return Invalid("a merge must be two tokens separated by one space",
                       "/model/merges/" + std::to_string(index));
      }
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else {
      array pair;
      if (m.get_array().get(pair) != simdjson::SUCCESS || pair.size() != 2 ||
          pair.at(0).get_string().get(left) != simdjson::SUCCESS ||
          pair.at(1).get_string().get(right) != simdjson::SUCCESS) {
        return Invalid("a merge must be \"a b\" or [\"a\", \"b\"]",
                       "/model/merges/" + std::to_string(index));
      }
    }
    inputs->merge_pool.append(left);
    inputs->merge_offs.push_back(static_cast<std::uint32_t>(inputs->merge_pool.size()));
    inputs->merge_pool.append(right);
    inputs->merge_offs.push_back(static_cast<std::uint32_t>(inputs->merge_pool.size()));
    ++index;
  }
  return Status::Ok();
}

// The model-space string of each vocab entry (its bytes when byte-level, else its text) into
// model->vocab, inserted in prefetched batches; then the unk token's id.
void InsertVocabKeys(const Vocabulary::Impl& impl, const BpeInputs& inputs, bool byte_level,
                     vocab::BpeModel* model) {
  model->vocab.Reserve(inputs.model_ids.size());
  constexpr std::size_t kBatch = 32;
  std::array<std::string, kBatch> keys;
  std::array<std::uint32_t, kBatch> key_hashes;
  const std::vector<TokenId>& ids = inputs.model_ids;
  for (std::size_t base = 0; base < ids.size(); base += kBatch) {
    const std::size_t m = std::min(kBatch, ids.size() - base);
    for (std::size_t k = 0; k < m; ++k) {
      auto i = static_cast<std::size_t>(ids[base + k]);
      std::string_view text(impl.text_pool_.data() + impl.text_off_[i],
                            impl.text_off_[i + 1] - impl.text_off_[i]);
      if (!byte_level) {
        keys[k].assign(text);
      } else if (impl.kinds_[i] == TokenKind::kNormal) {
        keys[k].assign(impl.bytes_pool_.data() + impl.bytes_off_[i],
                       impl.bytes_off_[i + 1] - impl.bytes_off_[i]);
      } else if (!vocab::DecodeByteLevel(text, &keys[k])) {
        keys[k].assign(text);
      }
      key_hashes[k] = vocab::StringIdMap::Hash(keys[k]);
      model->vocab.Prefetch(key_hashes[k]);
    }
    for (std::size_t k = 0; k < m; ++k) {
      model->vocab.Insert(keys[k], ids[base + k], key_hashes[k]);
    }
  }
  if (inputs.has_unk) {
    std::string key;
    if (!byte_level || !vocab::DecodeByteLevel(inputs.unk, &key)) key = inputs.unk;
    model->unk = model->vocab.Find(key);
  }
}

// Each merge (left, right) -> (rank, id of left + right) into model->merges. Merges are done in
// batches: every lookup of a batch is hashed and prefetched before any is done, so the cache
// misses of the 3 string lookups and the pair insert overlap.
Status InsertMerges(const BpeInputs& inputs, bool byte_level, vocab::BpeModel* model) {
  const std::size_t n = (inputs.merge_offs.size() - 1) / 2;
  model->merges.Reserve(n);
  constexpr std::size_t kBatch = 32;
  std::array<std::string, kBatch> left_buf, right_buf, joined;
  std::array<std::uint32_t, 3 * kBatch> hashes;
  std::array<TokenId, 3 * kBatch> found;
  std::string_view pool = inputs.merge_pool;
  const std::vector<std::uint32_t>& offs = inputs.merge_offs;
  for (std::size_t base = 0; base < n; base += kBatch) {
    const std::size_t m = std::min(kBatch, n - base);
    for (std::size_t k = 0; k < m; ++k) {
      std::size_t r = base + k;
      std::string_view left = pool.substr(offs[2 * r], offs[2 * r + 1] - offs[2 * r]);
      std::string_view right = pool.substr(offs[2 * r + 1], offs[2 * r + 2] - offs[2 * r + 1]);
      if (byte_level) {
        if (!vocab::DecodeByteLevel(left, &left_buf[k]) ||
            !vocab::DecodeByteLevel(right, &right_buf[k])) {
          return Invalid("merge token is not byte-level text",
                         "/model/merges/" + std::to_string(r));
        }
      } else {
        left_buf[k].assign(left);
        right_buf[k].assign(right);
      }
      joined[k].assign(left_buf[k]).append(right_buf[k]);
      hashes[3 * k] = vocab::StringIdMap::Hash(left_buf[k]);
      hashes[3 * k + 1] = vocab::StringIdMap::Hash(right_buf[k]);
      hashes[3 * k + 2] = vocab::StringIdMap::Hash(joined[k]);
      for (int j = 0; j < 3; ++j) model->vocab.Prefetch(hashes[3 * k + j]);
    }
    for (std::size_t k = 0; k < m; ++k) {
      found[3 * k] = model->vocab.Find(left_buf[k], hashes[3 * k]);
      found[3 * k + 1] = model->vocab.Find(right_buf[k], hashes[3 * k + 1]);
      found[3 * k + 2] = model->vocab.Find(joined[k], hashes[3 * k + 2]);
      if (found[3 * k] == kNoToken || found[3 * k + 1] == kNoToken ||
          found[3 * k + 2] == kNoToken) {
        return Invalid("merge refers to a token that is not in the vocabulary",
                       "/model/merges/" + std::to_string(base + k));
      }
      model->merges.Prefetch(found[3 * k], found[3 * k + 1]);
    }
    for (std::size_t k = 0; k < m; ++k) {
      model->merges.Insert(
          found[3 * k], found[3 * k + 1],
          vocab::PairMap::Merge{static_cast<std::int32_t>(base + k), found[3 * k + 2]});
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<const Vocabulary>> LoadTokenizerJsonWithConfig(
    std::string json, std::string_view config_json, const VocabularyOptions& options,
    std::string name) {
  LOCKSTEP_ASSIGN_OR_RETURN(json, vocab::MaybeGunzip(std::move(json)));
  // simdjson parses a std::string in place when its capacity has SIMDJSON_PADDING to spare;
  // ReadFile and MaybeGunzip leave that room, so a 9 MB file is not copied again here.
  if (json.capacity() - json.size() < simdjson::SIMDJSON_PADDING) {
    json.reserve(json.size() + simdjson::SIMDJSON_PADDING);
  }
  simdjson::dom::parser parser;
  element doc;
  if (auto err = parser.parse(json).get(doc); err != simdjson::SUCCESS) {
    return JsonSyntaxError(json, err, "tokenizer.json");
  }
  object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) return Invalid("expected an object", "");

  Loader loader;
  Vocabulary::Impl& impl = *loader.impl;
  impl.name_ = std::move(name);
  LOCKSTEP_ASSIGN_OR_RETURN(object model, BpeModelObject(root));
  LOCKSTEP_ASSIGN_OR_RETURN(bool byte_fallback, GetBoolOr(model, "byte_fallback", false, "/model"));
  LOCKSTEP_ASSIGN_OR_RETURN(bool ignore_merges, GetBoolOr(model, "ignore_merges", false, "/model"));
  LOCKSTEP_ASSIGN_OR_RETURN(bool fuse_unk, GetBoolOr(model, "fuse_unk", false, "/model"));
  LOCKSTEP_RETURN_IF_ERROR(ReadPipeline(root, &loader));
  const bool byte_level = loader.saw_byte_level;
  impl.byte_level_ = byte_level;

  object vocab_obj;
  if (model["vocab"].get_object().get(vocab_obj) != simdjson::SUCCESS) {
    return Invalid("missing or non-object 'vocab'", "/model/vocab");
  }
  IdRange range;
  LOCKSTEP_RETURN_IF_ERROR(ScanVocabIds(vocab_obj, &range));
  std::vector<AddedToken> added;
  LOCKSTEP_RETURN_IF_ERROR(ReadAddedTokens(root, &added, &range));
  LOCKSTEP_RETURN_IF_ERROR(CheckIdRange(range));
  impl.Resize(static_cast<std::int32_t>(range.max_id + 1));
  vocab::BpeModel& bpe = impl.bpe_;
  bpe.symbols = byte_level ? vocab::BpeModel::Symbols::kBytes : vocab::BpeModel::Symbols::kChars;
  bpe.ignore_merges = ignore_merges;
  bpe.byte_fallback = byte_fallback;
  bpe.fuse_unk = fuse_unk;

  BpeInputs inputs;
  inputs.model_ids.reserve(range.count);
  AddModelTokens(vocab_obj, loader, byte_fallback, &impl, &inputs);
  AddAddedTokens(added, &impl);
  LOCKSTEP_RETURN_IF_ERROR(ReadUnkToken(model, &inputs));
  LOCKSTEP_RETURN_IF_ERROR(ReadMerges(model, &inputs));
  impl.Finish();
  // The BPE tables are built here, eagerly: with prefetched batches the merges cost about 35 ms
  // for Llama-3's 280k, and a bad merge is then a load error, not an encode error.
  InsertVocabKeys(impl, inputs, byte_level, &bpe);
  LOCKSTEP_RETURN_IF_ERROR(InsertMerges(inputs, byte_level, &bpe));
  LOCKSTEP_RETURN_IF_ERROR(impl.SetLogitsWidth(options));
  impl.ResolveSpecialIds(ConfigToken(config_json, "eos_token"),
                         ConfigToken(config_json, "bos_token"));
  return VocabularyAccess::Wrap(std::move(loader.impl));
}

Result<std::shared_ptr<const Vocabulary>> Vocabulary::FromTokenizerJson(
    std::string_view json, const VocabularyOptions& options, std::string name,
    std::string_view tokenizer_config_json) {
  return LoadTokenizerJsonWithConfig(std::string(json), tokenizer_config_json, options,
                                     std::move(name));
}

}  // namespace lockstep
