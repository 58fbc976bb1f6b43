// Tests of Vocabulary loading: bundled names, token bytes and kinds, special and EOS ids,
// logits width, Decode, Fingerprint, dummy-prefix handling, and malformed inputs (errors with
// a location, never a crash).
#include "lockstep/vocabulary.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "automata/vocab/vocab_test_util.h"

namespace lockstep {
namespace {

using testing::SharedVocab;
using testing::TokenizerDir;

std::shared_ptr<const Vocabulary> Bundled(const std::string& name,
                                          const VocabularyOptions& options = {}) {
  auto r = Vocabulary::Load(name, options);
  EXPECT_TRUE(r.ok()) << name << ": " << r.status().ToString();
  return r.ok() ? r.value() : nullptr;
}

std::vector<TokenId> MustEncode(const Vocabulary& v, std::string_view text,
                                EncodeOptions options = {}) {
  auto r = v.Encode(text, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : std::vector<TokenId>{};
}

// A tiny SentencePiece-style BPE tokenizer.json: a, b, ab, abc, c? no: unk for c.
constexpr std::string_view kTinyJson = R"({
  "added_tokens": [{"id": 4, "content": "</s>", "special": true},
                   {"id": 5, "content": "<tool>", "special": false}],
  "normalizer": null, "pre_tokenizer": null,
  "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": false,
            "vocab": {"a": 0, "b": 1, "ab": 2, "<unk>": 3},
            "merges": ["a b"]}
})";

// ---- bundled vocabularies ---------------------------------------------------------------------

TEST(VocabularyTest, BundledNamesLoadWithTheirSizesAndEosIds) {
  struct Case {
    std::string name;
    std::int32_t size;
    std::vector<TokenId> eos;
    TokenId bos;
  };
  for (const Case& c :
       {Case{"llama3", 128256, {128001, 128009}, 128000}, Case{"gpt2", 50257, {50256}, 50256},
        Case{"qwen2.5", 151665, {151645, 151643}, kNoToken}, Case{"mistral", 32000, {2}, 1}}) {
    auto v = Bundled(c.name);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->name(), c.name);
    EXPECT_EQ(v->size(), c.size) << c.name;
    EXPECT_EQ(v->logits_width(), c.size) << c.name;
    EXPECT_EQ(v->eos_ids(), c.eos) << c.name;
    EXPECT_EQ(v->eos(), c.eos.front()) << c.name;
    EXPECT_EQ(v->bos(), c.bos) << c.name;
    for (TokenId e : c.eos) {
      EXPECT_TRUE(v->IsSpecial(e)) << c.name << " " << e;
      EXPECT_EQ(v->TokenBytes(e), "") << c.name;
    }
  }
}

TEST(VocabularyTest, SpecialAndAddedTokensHaveTheRightKinds) {
  auto llama3 = Bundled("llama3");
  ASSERT_NE(llama3, nullptr);
  int specials = 0;
  for (TokenId id = 0; id < llama3->size(); ++id) specials += llama3->IsSpecial(id);
  EXPECT_EQ(specials, 256);
  EXPECT_EQ(llama3->FindToken("<|eot_id|>"), 128009);
  EXPECT_EQ(llama3->TokenText(128000), "<|begin_of_text|>");
  EXPECT_EQ(llama3->Kind(0), TokenKind::kNormal);
  EXPECT_EQ(llama3->FindToken("no such token text"), kNoToken);

  auto mistral = Bundled("mistral");
  ASSERT_NE(mistral, nullptr);
  for (TokenId id : {0, 1, 2}) EXPECT_TRUE(mistral->IsSpecial(id)) << id;
  for (TokenId id = 3; id <= 258; ++id) {
    ASSERT_EQ(mistral->Kind(id), TokenKind::kByte) << id;
    ASSERT_EQ(mistral->TokenBytes(id), std::string(1, static_cast<char>(id - 3))) << id;
  }
  EXPECT_EQ(mistral->Kind(259), TokenKind::kNormal);

  // Qwen's non-special added tokens are ordinary text tokens, matched in the input like HF.
  auto qwen = Bundled("qwen2.5");
  ASSERT_NE(qwen, nullptr);
  EXPECT_EQ(qwen->Kind(151657), TokenKind::kNormal);
  EXPECT_EQ(qwen->TokenBytes(151657), "<tool_call>");
  EXPECT_EQ(MustEncode(*qwen, "<tool_call>"), std::vector<TokenId>{151657});
  EXPECT_TRUE(qwen->IsSpecial(151644));  // <|im_start|>
  // Special-token text is ordinary text.
  auto im = MustEncode(*qwen, "<|im_start|>");
  EXPECT_GT(im.size(), 1u);
  EXPECT_EQ(qwen->Decode(im).value(), "<|im_start|>");
}

TEST(VocabularyTest, KnownTokensHaveTheirExactBytes) {
  auto llama3 = Bundled("llama3");
  auto gpt2 = Bundled("gpt2");
  auto mistral = Bundled("mistral");
  ASSERT_TRUE(llama3 && gpt2 && mistral);
  EXPECT_EQ(llama3->TokenBytes(5018), "{\"");
  EXPECT_EQ(gpt2->TokenBytes(220), " ");
  EXPECT_EQ(gpt2->TokenBytes(198), "\n");
  EXPECT_EQ(gpt2->TokenText(220), "\xC4\xA0");  // "Ġ" as written in the file
  EXPECT_EQ(mistral->TokenBytes(13), "\n");
  EXPECT_EQ(mistral->Kind(13), TokenKind::kByte);
  EXPECT_EQ(mistral->TokenText(13), "<0x0A>");
  EXPECT_EQ(mistral->TokenBytes(28705), " ");  // "▁"
  EXPECT_EQ(mistral->TokenBytes(22557), " Hello");
}

TEST(VocabularyTest, SharedDataFormatsLoad) {
  LOCKSTEP_REQUIRE_SHARED_DATA();
  auto llama2 = SharedVocab("llama2");
  ASSERT_NE(llama2, nullptr);
  EXPECT_EQ(llama2->size(), 32000);
  EXPECT_EQ(llama2->eos_ids(), std::vector<TokenId>{2});
  EXPECT_EQ(llama2->bos(), 1);
  EXPECT_TRUE(llama2->IsSpecial(0) && llama2->IsSpecial(1) && llama2->IsSpecial(2));
  EXPECT_EQ(llama2->Kind(16), TokenKind::kByte);
  EXPECT_EQ(llama2->TokenBytes(13), "\n");
  EXPECT_EQ(llama2->TokenBytes(29871), " ");

  auto cl100k = SharedVocab("cl100k_base");
  ASSERT_NE(cl100k, nullptr);
  EXPECT_EQ(cl100k->size(), 100277);
  EXPECT_EQ(cl100k->eos_ids(), std::vector<TokenId>{100257});
  EXPECT_EQ(cl100k->Kind(100256), TokenKind::kUnused);  // gap between ranks and specials
  EXPECT_EQ(cl100k->Kind(100261), TokenKind::kUnused);
  EXPECT_TRUE(cl100k->IsSpecial(100276));
  EXPECT_EQ(cl100k->FindToken("<|endofprompt|>"), 100276);
  auto o200k = SharedVocab("o200k_base");
  ASSERT_NE(o200k, nullptr);
  EXPECT_EQ(o200k->size(), 200019);
  EXPECT_EQ(o200k->eos_ids(), std::vector<TokenId>{199999});
}

// ---- options, decode, fingerprint -------------------------------------------------------------

TEST(VocabularyTest, LogitsWidthMayExceedTheSizeButNotFallShort) {
  auto wide = Bundled("qwen2.5", VocabularyOptions{151936});
  ASSERT_NE(wide, nullptr);
  EXPECT_EQ(wide->size(), 151665);
  EXPECT_EQ(wide->logits_width(), 151936);
  EXPECT_EQ(wide->Kind(151700), TokenKind::kUnused);
  EXPECT_EQ(wide->TokenBytes(151700), "");
  auto narrow = Vocabulary::Load("qwen2.5", VocabularyOptions{1000});
  ASSERT_FALSE(narrow.ok());
  EXPECT_EQ(narrow.status().code(), StatusCode::kInvalidArgument);
}

TEST(VocabularyTest, DecodeConcatenatesBytesAndRejectsOutOfRangeIds) {
  auto llama3 = Bundled("llama3");
  ASSERT_NE(llama3, nullptr);
  std::vector<TokenId> ids = {5018, 128009, 5018};
  EXPECT_EQ(llama3->Decode(ids).value(), "{\"{\"");
  for (TokenId bad : {-1, 128256, 1 << 30}) {
    std::vector<TokenId> b = {5018, bad};
    auto r = llama3->Decode(b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().location(), "index 1");
  }
}

TEST(VocabularyTest, FingerprintIsStableAndSeesWidthAndContent) {
  auto a = Bundled("gpt2");
  auto b = Bundled("gpt2");
  auto wide = Bundled("gpt2", VocabularyOptions{50304});
  auto other = Bundled("mistral");
  ASSERT_TRUE(a && b && wide && other);
  EXPECT_EQ(a->Fingerprint(), b->Fingerprint());
  EXPECT_NE(a->Fingerprint(), wide->Fingerprint());
  EXPECT_NE(a->Fingerprint(), other->Fingerprint());
}

TEST(VocabularyTest, DummyPrefixOnlyAffectsSentencePieceStyleVocabularies) {
  auto mistral = Bundled("mistral");
  ASSERT_NE(mistral, nullptr);
  EXPECT_EQ(MustEncode(*mistral, "Hello"), std::vector<TokenId>{22557});
  EXPECT_EQ(MustEncode(*mistral, " Hello"), (std::vector<TokenId>{28705, 22557}));
  EXPECT_EQ(MustEncode(*mistral, "\n"), (std::vector<TokenId>{28705, 13}));
  EXPECT_EQ(MustEncode(*mistral, ""), std::vector<TokenId>{});
  EXPECT_EQ(MustEncode(*mistral, " Hello", EncodeOptions{false}), std::vector<TokenId>{22557});
  auto bare = MustEncode(*mistral, "Hello", EncodeOptions{false});
  EXPECT_EQ(mistral->Decode(bare).value(), "Hello");
  EXPECT_EQ(MustEncode(*mistral, "\n", EncodeOptions{false}), std::vector<TokenId>{13});

  auto gpt2 = Bundled("gpt2");
  ASSERT_NE(gpt2, nullptr);
  EXPECT_EQ(MustEncode(*gpt2, "Hello world"),
            MustEncode(*gpt2, "Hello world", EncodeOptions{false}));
  EXPECT_EQ(MustEncode(*gpt2, "Hello"), std::vector<TokenId>{15496});
}

TEST(VocabularyTest, Llama2DummyPrefixCanBeTurnedOff) {
  LOCKSTEP_REQUIRE_SHARED_DATA();
  auto llama2 = SharedVocab("llama2");
  ASSERT_NE(llama2, nullptr);
  EXPECT_EQ(MustEncode(*llama2, "Hello"), std::vector<TokenId>{15043});
  EXPECT_EQ(MustEncode(*llama2, " Hello"), (std::vector<TokenId>{29871, 15043}));
  EXPECT_EQ(MustEncode(*llama2, "  x"), (std::vector<TokenId>{259, 921}));
  EXPECT_EQ(MustEncode(*llama2, " Hello", EncodeOptions{false}), std::vector<TokenId>{15043});
  auto bare = MustEncode(*llama2, "Hello", EncodeOptions{false});
  EXPECT_EQ(llama2->Decode(bare).value(), "Hello");
}

TEST(VocabularyTest, DataDirectoryFollowsTheEnvironment) {
  const char* old = std::getenv("LOCKSTEP_DATA_DIR");
  std::string saved = old ? old : "";
  ::setenv("LOCKSTEP_DATA_DIR", "/nonexistent/lockstep-data", 1);
  EXPECT_EQ(DataDirectory(), "/nonexistent/lockstep-data");
  auto r = Vocabulary::Load("llama3");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  if (old) {
    ::setenv("LOCKSTEP_DATA_DIR", saved.c_str(), 1);
  } else {
    ::unsetenv("LOCKSTEP_DATA_DIR");
  }
  EXPECT_TRUE(std::filesystem::is_directory(DataDirectory() + "/tokenizers/llama3"));
}

// ---- synthetic and malformed inputs -----------------------------------------------------------

TEST(VocabularyTest, TinyTokenizerJsonEncodesWithMergesUnkAndAddedTokens) {
  auto r = Vocabulary::FromTokenizerJson(kTinyJson, {}, "tiny");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Vocabulary& v = *r.value();
  EXPECT_EQ(v.size(), 6);
  EXPECT_EQ(MustEncode(v, "abab"), (std::vector<TokenId>{2, 2}));
  EXPECT_EQ(MustEncode(v, "aab"), (std::vector<TokenId>{0, 2}));
  EXPECT_EQ(MustEncode(v, "ac"), (std::vector<TokenId>{0, 3}));
  EXPECT_EQ(MustEncode(v, "ab<tool>b"), (std::vector<TokenId>{2, 5, 1}));
  EXPECT_EQ(v.eos_ids(), std::vector<TokenId>{4});
  EXPECT_TRUE(v.IsSpecial(4));
}

TEST(VocabularyTest, MetaspacePreTokenizerPrependsAndSplits) {
  auto r = Vocabulary::FromTokenizerJson(R"({
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                      "split": true},
    "decoder": {"type": "Metaspace", "replacement": "\u2581"},
    "model": {"type": "BPE", "vocab": {"\u2581a": 0, "\u2581": 1, "a": 2, "b": 3},
              "merges": ["\u2581 a"]}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Vocabulary& v = *r.value();
  EXPECT_EQ(v.TokenBytes(0), " a");
  EXPECT_EQ(MustEncode(v, "a a"), (std::vector<TokenId>{0, 0}));
  EXPECT_EQ(MustEncode(v, "a a", EncodeOptions{false}), (std::vector<TokenId>{2, 0}));
  EXPECT_EQ(MustEncode(v, "ab  a"), (std::vector<TokenId>{0, 3, 1, 0}));
}

std::string Gzip(std::string_view data) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, data.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

void ExpectError(const Result<std::shared_ptr<const Vocabulary>>& r, StatusCode code,
                 std::string_view location_part, const char* what) {
  ASSERT_FALSE(r.ok()) << what;
  EXPECT_EQ(r.status().code(), code) << what << ": " << r.status().ToString();
  EXPECT_NE(r.status().location().find(location_part), std::string::npos)
      << what << ": location '" << r.status().location() << "'";
}

TEST(VocabularyTest, MalformedTokenizerJsonIsAnErrorWithALocation) {
  auto load = [](std::string_view json) { return Vocabulary::FromTokenizerJson(json); };
  ExpectError(load("{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": [}"),
              StatusCode::kInvalidVocabulary, "offset 42", "invalid JSON");
  ExpectError(load("[1, 2]"), StatusCode::kInvalidVocabulary, "", "not an object");
  ExpectError(load("{}"), StatusCode::kInvalidVocabulary, "/model", "missing model");
  ExpectError(load(R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})"),
              StatusCode::kInvalidVocabulary, "/model/vocab/a", "id of wrong type");
  ExpectError(load(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": 3}})"),
              StatusCode::kInvalidVocabulary, "/model/merges", "merges of wrong type");
  ExpectError(load(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}})"),
              StatusCode::kInvalidVocabulary, "/model/merges/0", "merge without space");
  ExpectError(load(R"({"model": {"type": "BPE", "vocab": {"a": 2000000000}, "merges": []}})"),
              StatusCode::kInvalidVocabulary, "/model/vocab/a", "huge id");
  ExpectError(load(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 9000000}, "merges": []}})"),
              StatusCode::kInvalidVocabulary, "/model/vocab", "sparse ids");
  ExpectError(load(R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})"),
              StatusCode::kUnsupported, "/model/type", "WordPiece");
  ExpectError(load(R"({"pre_tokenizer": {"type": "Whitespace"},
                      "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})"),
              StatusCode::kUnsupported, "/pre_tokenizer/type", "unsupported pre-tokenizer");
  ExpectError(load(R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}]},
                      "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})"),
              StatusCode::kUnsupported, "/normalizer/normalizers/0/type", "NFKC");
  ExpectError(load(R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"},
                      "behavior": "Isolated", "invert": false},
                      "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})"),
              StatusCode::kInvalidRegex, "/pre_tokenizer/pattern/Regex", "bad regex");
  ExpectError(load(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [],
                      "continuing_subword_prefix": "##"}})"),
              StatusCode::kUnsupported, "/model/continuing_subword_prefix", "prefix");
  ExpectError(load(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a q"]}})"),
              StatusCode::kInvalidVocabulary, "/model/merges/0", "merge of an unknown token");
  ExpectError(load(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", 1]]}})"),
              StatusCode::kInvalidVocabulary, "/model/merges/0", "merge pair of wrong type");
}

TEST(VocabularyTest, GzipAndFileErrors) {
  std::string gz = Gzip(kTinyJson);
  auto ok = Vocabulary::FromTokenizerJson(gz);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok.value()->size(), 6);
  ExpectError(Vocabulary::FromTokenizerJson(gz.substr(0, gz.size() / 2)),
              StatusCode::kInvalidVocabulary, "offset", "truncated gzip");
  std::string corrupt = gz;
  for (std::size_t i = 12; i < corrupt.size() - 8; i += 7) corrupt[i] ^= 0x5A;
  ExpectError(Vocabulary::FromTokenizerJson(corrupt), StatusCode::kInvalidVocabulary, "offset",
              "corrupt gzip");
  ExpectError(Vocabulary::Load("/nonexistent/tokenizer.json"), StatusCode::kIoError, "/nonexistent",
              "missing file");
  ExpectError(Vocabulary::Load("no-such-bundled-name"), StatusCode::kIoError,
              "no-such-bundled-name", "unknown name");
  ExpectError(Vocabulary::FromSentencePiece("definitely not a protobuf"),
              StatusCode::kInvalidVocabulary, "tokenizer.model", "bad sentencepiece model");
}

TEST(VocabularyTest, MalformedTiktokenIsAnErrorWithALocation) {
  const std::string meta = R"({"pat_str": "\\S+|\\s+", "special_tokens": {"<|endoftext|>": 3}})";
  auto ok = Vocabulary::FromTiktoken("YQ== 0\nYg== 1\nYWI= 2\n", meta);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok.value()->size(), 4);
  EXPECT_EQ(ok.value()->TokenBytes(2), "ab");
  EXPECT_EQ(MustEncode(*ok.value(), "abab"), (std::vector<TokenId>{2, 2}));
  EXPECT_EQ(MustEncode(*ok.value(), "abba"), (std::vector<TokenId>{2, 1, 0}));
  auto no_space_token = ok.value()->Encode("ab a");  // no token for ' ' and no fallback
  ASSERT_FALSE(no_space_token.ok());
  EXPECT_EQ(no_space_token.status().code(), StatusCode::kUnsupported);
  ExpectError(Vocabulary::FromTiktoken("YQ== 0\nY!== 1\n", meta), StatusCode::kInvalidVocabulary,
              "offset 8", "bad base64");
  ExpectError(Vocabulary::FromTiktoken("YQ== 0\nYg== x\n", meta), StatusCode::kInvalidVocabulary,
              "offset 12", "bad rank");
  ExpectError(Vocabulary::FromTiktoken("YQ== 0\nYg== 0\n", meta), StatusCode::kInvalidVocabulary,
              "line 2", "duplicate rank");
  ExpectError(Vocabulary::FromTiktoken("YQ==0\n", meta), StatusCode::kInvalidVocabulary, "offset 0",
              "no space");
  ExpectError(Vocabulary::FromTiktoken("YQ== 0\n", "{"), StatusCode::kInvalidVocabulary, "meta",
              "bad meta json");
  ExpectError(Vocabulary::FromTiktoken("YQ== 0\n", "{}"), StatusCode::kInvalidVocabulary,
              "meta:/pat_str", "missing pat_str");
  ExpectError(Vocabulary::FromTiktoken("YQ== 0\n", R"({"pat_str": "x", "n_vocab": 1e300})"),
              StatusCode::kInvalidVocabulary, "meta:/n_vocab", "bad n_vocab");
  ExpectError(Vocabulary::FromTiktoken("YQ== 0\n", R"({"pat_str": "(", "n_vocab": 1})"),
              StatusCode::kInvalidRegex, "meta:/pat_str", "bad pat_str");
  ExpectError(Vocabulary::FromTiktoken("YQ== 0\n",
                                       R"({"pat_str": "x", "special_tokens": {"a": 99999999}})"),
              StatusCode::kInvalidVocabulary, "meta:/special_tokens/a", "huge special id");
}

TEST(VocabularyTest, ExpandingNormalizersEndInAResourceLimit) {
  std::string big(1000, 'a');
  auto r = Vocabulary::FromTokenizerJson(R"({"normalizer": {"type": "Sequence", "normalizers": [)"
                                         R"({"type": "Replace", "pattern": {"String": "a"},)"
                                         R"( "content": ")" +
                                         big +
                                         R"("},)"
                                         R"({"type": "Replace", "pattern": {"String": "a"},)"
                                         R"( "content": ")" +
                                         big +
                                         R"("}]},)"
                                         R"("model": {"type": "BPE", "vocab": {"a": 0},)"
                                         R"( "merges": []}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto e = r.value()->Encode("aaaa");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kResourceLimit);
}

TEST(VocabularyTest, PathologicalSplitRegexEndsInAResourceLimitNotAHang) {
  auto r = Vocabulary::FromTokenizerJson(R"({
    "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a+)+b"}, "behavior": "Isolated",
                      "invert": false},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(MustEncode(*r.value(), "aab"), (std::vector<TokenId>{0, 0, 1}));
  auto e = r.value()->Encode(std::string(40, 'a'));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kResourceLimit);
}

// A tiny byte-level tokenizer.json exercising Sequence, Split, ByteLevel, NFC and array merges.
constexpr std::string_view kTinyByteLevelJson = R"({
  "added_tokens": [{"id": 5, "content": "<|end|>", "special": true}],
  "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": " ?\\p{L}+|\\s+(?!\\S)|\\s+|."},
       "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "ignore_merges": true,
            "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120a": 4},
            "merges": [["a", "b"], ["\u0120", "a"]]}
})";

TEST(VocabularyTest, TinyByteLevelTokenizerJsonEncodes) {
  auto r = Vocabulary::FromTokenizerJson(kTinyByteLevelJson, {}, "tiny");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Vocabulary& v = *r.value();
  EXPECT_EQ(v.TokenBytes(3), " ");
  EXPECT_EQ(MustEncode(v, "ab a"), (std::vector<TokenId>{2, 4}));
  EXPECT_TRUE(v.IsSpecial(5));
  EXPECT_TRUE(v.eos_ids().empty());  // "<|end|>" is not a known EOS name and there is no config
}

// Random mutations of small valid inputs: every outcome is a value or an error, never a crash.
// LOCKSTEP_TEST_SCALE multiplies the number of rounds (the sanitizer build runs more).
TEST(VocabularyTest, MutatedInputsNeverCrash) {
  std::mt19937 rng(42);
  const std::string meta =
      R"({"pat_str": "\\p{L}+|\\s+(?!\\S)|.", "special_tokens": {"<|endoftext|>": 3},)"
      R"( "n_vocab": 4})";
  const std::vector<std::string> seeds = {std::string(kTinyJson), std::string(kTinyByteLevelJson),
                                          Gzip(kTinyJson), "YQ== 0\nYg== 1\nYWI= 2\n"};
  const int rounds = static_cast<int>(1500 * testing::TestScale());
  int loaded = 0;
  for (int iter = 0; iter < rounds; ++iter) {
    std::vector<std::string> inputs = seeds;
    std::string mt = meta;
    inputs.push_back(mt);
    for (std::string& s : inputs) {
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < edits && !s.empty(); ++k) {
        std::size_t pos = rng() % s.size();
        switch (rng() % 3) {
          case 0:
            s[pos] = static_cast<char>(rng() % 256);
            break;
          case 1:
            s.erase(pos, 1 + rng() % 4);
            break;
          default:
            s.insert(pos, 1, "{}[]\":,0 \\a"[rng() % 11]);
            break;
        }
      }
    }
    for (auto r :
         {Vocabulary::FromTokenizerJson(inputs[0]), Vocabulary::FromTokenizerJson(inputs[1]),
          Vocabulary::FromTokenizerJson(inputs[2]), Vocabulary::FromTiktoken(inputs[3], inputs[4]),
          Vocabulary::FromTiktoken(seeds[3], inputs[4])}) {
      if (!r.ok()) {
        EXPECT_FALSE(r.status().message().empty());
        continue;
      }
      ++loaded;
      const Vocabulary& v = *r.value();
      for (EncodeOptions options : {EncodeOptions{true}, EncodeOptions{false}}) {
        auto e = v.Encode("abba ab\xC3\xA9 a  \n", options);
        if (e.ok()) {
          EXPECT_TRUE(v.Decode(e.value()).ok());
        }
      }
      (void)v.Fingerprint();
      (void)v.FindToken("ab");
    }
  }
  EXPECT_GT(loaded, 0);
}

}  // namespace
}  // namespace lockstep
