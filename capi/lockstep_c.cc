// The C ABI (include/lockstep/lockstep_c.h) over the C++ API, for C hosts and FFIs. This file's
// external interface is just the lockstep_* functions. It is the boundary: every entry point
// checks its pointers and sizes, converts a C++ Status once into a lockstep_status plus the
// thread-local message, and catches every exception, so that nothing throws or aborts across it.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockstep/artifact.h"
#include "lockstep/batch.h"
#include "lockstep/compiler.h"
#include "lockstep/decoding.h"
#include "lockstep/lockstep_c.h"
#include "lockstep/logits_source.h"
#include "lockstep/matcher.h"
#include "lockstep/request.h"
#include "lockstep/sampler.h"
#include "lockstep/status.h"
#include "lockstep/structured.h"
#include "lockstep/types.h"
#include "lockstep/validator.h"
#include "lockstep/vocabulary.h"

// The handles: thin owners of the C++ objects.
struct lockstep_vocab {
  std::shared_ptr<const lockstep::Vocabulary> vocab;
  // Built on the first compile (the token trie takes tens of ms on a 128k vocabulary) and
  // reused by every later one; GrammarCompiler is thread-safe.
  mutable std::once_flag compiler_once;
  mutable std::unique_ptr<lockstep::GrammarCompiler> compiler;
};

struct lockstep_grammar {
  std::shared_ptr<const lockstep::CompiledGrammar> grammar;
  std::vector<std::string> warnings;
  // lockstep_compile_request: what the request chose (its format and tools read calls back).
  std::shared_ptr<const lockstep::CompiledRequest> request;
};

struct lockstep_matcher {
  lockstep::Matcher matcher;
};

struct lockstep_cancel_token {
  // Shared with the compiles that run with it (CompileOptions::cancel).
  std::shared_ptr<std::atomic<bool>> flag = std::make_shared<std::atomic<bool>>(false);
};

struct lockstep_sampler {
  lockstep::Sampler sampler;
};

struct lockstep_validator {
  lockstep::SchemaValidator validator;  // immutable; Validate is thread-safe
};

struct lockstep_validation {
  lockstep::ValidationResult result;  // owns the strings lockstep_validation_error hands out
};

namespace {

using lockstep::Status;
using lockstep::StatusCode;

// The C codes 1..10 are the C++ codes: one conversion, checked here.
static_assert(static_cast<int>(StatusCode::kInvalidArgument) == LOCKSTEP_INVALID_ARGUMENT);
static_assert(static_cast<int>(StatusCode::kInvalidRegex) == LOCKSTEP_INVALID_REGEX);
static_assert(static_cast<int>(StatusCode::kInvalidGrammar) == LOCKSTEP_INVALID_GRAMMAR);
static_assert(static_cast<int>(StatusCode::kInvalidSchema) == LOCKSTEP_INVALID_SCHEMA);
static_assert(static_cast<int>(StatusCode::kUnsupported) == LOCKSTEP_UNSUPPORTED);
static_assert(static_cast<int>(StatusCode::kUnsatisfiable) == LOCKSTEP_UNSATISFIABLE);
static_assert(static_cast<int>(StatusCode::kResourceLimit) == LOCKSTEP_RESOURCE_LIMIT);
static_assert(static_cast<int>(StatusCode::kInvalidVocabulary) == LOCKSTEP_INVALID_VOCABULARY);
static_assert(static_cast<int>(StatusCode::kIoError) == LOCKSTEP_IO_ERROR);
static_assert(static_cast<int>(StatusCode::kInternal) == LOCKSTEP_INTERNAL);
static_assert(static_cast<int>(StatusCode::kInvalidArtifact) == LOCKSTEP_INVALID_ARTIFACT);
static_assert(static_cast<int>(lockstep::TokenKind::kNormal) == LOCKSTEP_TOKEN_NORMAL);
static_assert(static_cast<int>(lockstep::TokenKind::kByte) == LOCKSTEP_TOKEN_BYTE);
static_assert(static_cast<int>(lockstep::TokenKind::kSpecial) == LOCKSTEP_TOKEN_SPECIAL);
static_assert(static_cast<int>(lockstep::TokenKind::kUnused) == LOCKSTEP_TOKEN_UNUSED);
static_assert(static_cast<int>(lockstep::SchemaDraft::k2020_12) == LOCKSTEP_SCHEMA_DRAFT_2020_12);
static_assert(static_cast<int>(lockstep::SchemaDraft::k7) == LOCKSTEP_SCHEMA_DRAFT_7);
static_assert(static_cast<int>(lockstep::SchemaDraft::k4) == LOCKSTEP_SCHEMA_DRAFT_4);
static_assert(static_cast<int>(lockstep::SchemaDraft::k6) == LOCKSTEP_SCHEMA_DRAFT_6);
static_assert(static_cast<int>(lockstep::SchemaDraft::k2019_09) == LOCKSTEP_SCHEMA_DRAFT_2019_09);
// Fields are only ever appended: max_unique_search_bytes is the last.
static_assert(offsetof(lockstep_compile_options, schema_default_draft) ==
              offsetof(lockstep_compile_options, schema_openapi_formats) + sizeof(int32_t));
static_assert(offsetof(lockstep_compile_options, max_program_states) >
              offsetof(lockstep_compile_options, schema_default_draft));
static_assert(offsetof(lockstep_compile_options, schema_member_order) >
              offsetof(lockstep_compile_options, max_program_states));
static_assert(offsetof(lockstep_compile_options, schema_any_order_max_properties) >
              offsetof(lockstep_compile_options, schema_member_order));
static_assert(offsetof(lockstep_compile_options, schema_max_oneof_overlaps) >
              offsetof(lockstep_compile_options, schema_any_order_max_properties));
static_assert(offsetof(lockstep_compile_options, schema_max_some_member_requirements) >
              offsetof(lockstep_compile_options, schema_max_oneof_overlaps));
static_assert(offsetof(lockstep_compile_options, max_unique_search_bytes) >
              offsetof(lockstep_compile_options, schema_max_some_member_requirements));
static_assert(static_cast<int>(lockstep::SchemaMemberOrder::kDeclared) ==
              LOCKSTEP_MEMBER_ORDER_DECLARED);
static_assert(static_cast<int>(lockstep::SchemaMemberOrder::kAny) == LOCKSTEP_MEMBER_ORDER_ANY);
static_assert(static_cast<int>(lockstep::RequestKind::kText) == LOCKSTEP_REQUEST_TEXT);
static_assert(static_cast<int>(lockstep::RequestKind::kJson) == LOCKSTEP_REQUEST_JSON);
static_assert(static_cast<int>(lockstep::RequestKind::kTools) == LOCKSTEP_REQUEST_TOOLS);

// ---- the thread-local error message ---------------------------------------------------------

thread_local std::string t_last_error;
// Set when the message itself could not be stored (out of memory): lockstep_last_error then
// returns this fixed text.
thread_local const char* t_fixed_error = nullptr;

lockstep_status SetError(lockstep_status code, std::string_view message) noexcept {
  try {
    t_last_error.assign(message);
    t_fixed_error = nullptr;
  } catch (...) {
    t_fixed_error = "out of memory while reporting an error";
  }
  return code;
}

lockstep_status FromStatus(const Status& st) noexcept {
  if (st.ok()) return LOCKSTEP_OK;
  auto code = static_cast<lockstep_status>(st.code());
  try {
    return SetError(code, st.ToString());
  } catch (...) {
    return SetError(code, lockstep::StatusCodeName(st.code()));
  }
}

lockstep_status InvalidArgument(const char* function, std::string_view what) noexcept {
  try {
    return SetError(LOCKSTEP_INVALID_ARGUMENT,
                    std::string("invalid argument at ") + function + ": " + std::string(what));
  } catch (...) {
    return SetError(LOCKSTEP_INVALID_ARGUMENT, what);
  }
}

// Runs `body` (which returns a lockstep_status) with every exception turned into a status.
template <typename F>
lockstep_status Guard(const char* function, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return SetError(LOCKSTEP_RESOURCE_LIMIT, std::string_view("out of memory"));
  } catch (const std::exception& e) {
    try {
      return SetError(LOCKSTEP_INTERNAL, std::string("internal error in ") + function +
                                             ": unexpected exception: " + e.what());
    } catch (...) {
      return SetError(LOCKSTEP_INTERNAL, std::string_view("internal error: unexpected exception"));
    }
  } catch (...) {
    return SetError(LOCKSTEP_INTERNAL, std::string_view("internal error: unknown exception"));
  }
}

#define LOCKSTEP_C_REQUIRE(cond, what)                   \
  do {                                                   \
    if (!(cond)) return InvalidArgument(function, what); \
  } while (0)

// Copies a caller's options struct over the defaults: fields past `struct_size` keep their
// defaults (an older header), a size past ours is refused (a newer header than this library).
// `min_size` is the size of the struct's first published layout.
template <typename T>
lockstep_status ReadVersioned(const char* function, const T* in, T* out, std::size_t min_size) {
  if (in == nullptr) return LOCKSTEP_OK;  // *out already holds the defaults
  if (in->struct_size < min_size || in->struct_size > sizeof(T)) {
    return InvalidArgument(function, "struct_size is " + std::to_string(in->struct_size) +
                                         ", expected " + std::to_string(sizeof(T)) +
                                         " (initialise the struct with its _init function)");
  }
  const std::size_t keep = out->struct_size;
  std::memcpy(static_cast<void*>(out), static_cast<const void*>(in), in->struct_size);
  out->struct_size = keep;
  return LOCKSTEP_OK;
}

bool IsSchemaDraft(std::int32_t d) {
  return d >= LOCKSTEP_SCHEMA_DRAFT_2020_12 && d <= LOCKSTEP_SCHEMA_DRAFT_2019_09;
}

lockstep::CompileOptions ToCompileOptions(const lockstep_compile_options& o) {
  lockstep::CompileOptions c;
  c.max_dfa_states = o.max_dfa_states;
  c.max_program_states = o.max_program_states;
  c.schema_member_order = static_cast<lockstep::SchemaMemberOrder>(o.schema_member_order);
  c.schema_any_order_max_properties = o.schema_any_order_max_properties;
  c.schema_max_oneof_overlaps = o.schema_max_oneof_overlaps;
  c.schema_max_some_member_requirements = o.schema_max_some_member_requirements;
  c.max_unique_search_bytes = o.max_unique_search_bytes;
  c.max_nfa_states = o.max_nfa_states;
  c.max_repeat = o.max_repeat;
  c.precompute_masks = o.precompute_masks != 0;
  c.max_mask_cache_bytes = o.max_mask_cache_bytes;
  c.max_nesting_depth = o.max_nesting_depth;
  c.max_unrolled_states = o.max_unrolled_states;
  c.precompute_threads = o.precompute_threads;
  c.schema_lenient = o.schema_lenient != 0;
  c.schema_whitespace_compact = o.schema_whitespace_compact != 0;
  c.schema_max_whitespace_run = o.schema_max_whitespace_run;
  c.schema_format_assertion = o.schema_format_assertion != 0;
  c.schema_openapi_formats = o.schema_openapi_formats != 0;
  c.schema_max_exprs = o.schema_max_exprs;
  c.schema_default_draft = static_cast<lockstep::SchemaDraft>(o.schema_default_draft);
  c.max_earley_items_per_byte = o.max_earley_items_per_byte;
  c.background_positions = o.background_positions != 0;
  c.compile_timeout_ms = o.compile_timeout_ms;
  if (o.cancel != nullptr) c.cancel = o.cancel->flag;
  return c;
}

lockstep_status CheckCompileOptions(const char* function, const lockstep_compile_options& o) {
  if (o.max_dfa_states <= 0 || o.max_nfa_states <= 0 || o.max_repeat < 0 ||
      o.max_mask_cache_bytes < 0 || o.max_nesting_depth <= 0 || o.max_unrolled_states < 0 ||
      o.precompute_threads < 0 || o.schema_max_whitespace_run < 0 || o.schema_max_exprs <= 0 ||
      o.max_earley_items_per_byte <= 0 || o.compile_timeout_ms < 0 ||
      o.max_program_states <= 0 || o.schema_any_order_max_properties < 0 ||
      o.schema_any_order_max_properties > 63 || o.schema_max_oneof_overlaps < 0 ||
      o.schema_max_some_member_requirements < 0 || o.schema_max_some_member_requirements > 16 ||
      o.max_unique_search_bytes < 0) {
    return InvalidArgument(function, "a budget in lockstep_compile_options is out of range");
  }
  if (!IsSchemaDraft(o.schema_default_draft)) {
    return InvalidArgument(function, "schema_default_draft is not a lockstep_schema_draft");
  }
  if (o.schema_member_order != LOCKSTEP_MEMBER_ORDER_DECLARED &&
      o.schema_member_order != LOCKSTEP_MEMBER_ORDER_ANY) {
    return InvalidArgument(function,
                           "schema_member_order is not LOCKSTEP_MEMBER_ORDER_DECLARED or _ANY");
  }
  return LOCKSTEP_OK;
}

const lockstep::GrammarCompiler& CompilerOf(const lockstep_vocab& v) {
  std::call_once(v.compiler_once,
                 [&v] { v.compiler = std::make_unique<lockstep::GrammarCompiler>(v.vocab); });
  return *v.compiler;
}

// The shared body of the three compile functions.
template <typename F>
lockstep_status Compile(const char* function, const lockstep_vocab* vocab, const char* text,
                        std::size_t len, const lockstep_compile_options* options,
                        lockstep_grammar** out, F&& compile) {
  if (out == nullptr) return InvalidArgument(function, "out is NULL");
  if (vocab == nullptr) return InvalidArgument(function, "vocab is NULL");
  if (text == nullptr && len > 0) return InvalidArgument(function, "text is NULL");
  lockstep_compile_options o;
  lockstep_compile_options_init(&o);
  // The first published layout ended before max_earley_items_per_byte.
  if (lockstep_status s = ReadVersioned(
          function, options, &o, offsetof(lockstep_compile_options, max_earley_items_per_byte));
      s != LOCKSTEP_OK) {
    return s;
  }
  if (lockstep_status s = CheckCompileOptions(function, o); s != LOCKSTEP_OK) return s;
  auto handle = std::make_unique<lockstep_grammar>();
  auto result = compile(CompilerOf(*vocab), std::string_view(text == nullptr ? "" : text, len),
                        ToCompileOptions(o), &handle->warnings);
  if (!result.ok()) return FromStatus(result.status());
  handle->grammar = std::move(result).value();
  *out = handle.release();
  return LOCKSTEP_OK;
}

// 1 + the index of the first logit that is NaN or +inf, else 0. One branch-free pass first: the
// common case (all fine) costs a vectorised scan.
std::size_t FirstBadLogit(const float* logits, std::size_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  bool bad = false;
  for (std::size_t i = 0; i < n; ++i) bad |= !(logits[i] < kInf);
  if (!bad) return 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!(logits[i] < kInf)) return i + 1;
  }
  return 0;
}

// Whether `mask` allows any id below `n` (bits past n are ignored, as the sampler ignores them).
bool AnyAllowed(const std::uint32_t* mask, std::size_t n) {
  const std::size_t full = n / 32;
  std::uint32_t any = 0;
  for (std::size_t w = 0; w < full; ++w) any |= mask[w];
  if (n % 32 != 0) any |= mask[full] & ((1u << (n % 32)) - 1);
  return any != 0;
}

// The C callback as a LogitsSource for Generate, refusing NaN and +inf rows: the loop is left
// by an exception that lockstep_generate catches (Generate only holds RAII state).
struct BadLogits {
  std::size_t index;
  std::size_t context;
};

class CheckedCallbackSource final : public lockstep::LogitsSource {
 public:
  CheckedCallbackSource(lockstep_logits_fn fn, void* user, std::int32_t width)
      : fn_(fn), user_(user), width_(width) {}
  std::int32_t width() const override { return width_; }
  void Logits(std::span<const lockstep::TokenId> context, std::span<float> out) override {
    fn_(user_, context.data(), context.size(), out.data(), width_);
    if (std::size_t bad = FirstBadLogit(out.data(), out.size()); bad != 0) {
      throw BadLogits{bad - 1, context.size()};
    }
  }

 private:
  lockstep_logits_fn fn_;
  void* user_;
  std::int32_t width_;
};

// One BatchMaskFiller per thread count, for the life of the process (never destroyed, so no
// exit-time join races a host thread still filling), each used by one call at a time.
struct FillerSlot {
  std::mutex mu;
  std::unique_ptr<lockstep::BatchMaskFiller> filler;
};

FillerSlot& FillerFor(int num_threads) {
  static std::mutex* mu = new std::mutex;
  static auto* slots = new std::map<int, std::unique_ptr<FillerSlot>>;
  std::lock_guard<std::mutex> lock(*mu);
  std::unique_ptr<FillerSlot>& slot = (*slots)[num_threads];
  if (slot == nullptr) {
    auto s = std::make_unique<FillerSlot>();
    s->filler = std::make_unique<lockstep::BatchMaskFiller>(num_threads);
    slot = std::move(s);
  }
  return *slot;
}

constexpr int kMaxBatchThreads = 1024;

// The C validator options as the C++ ones, the remote directories read.
lockstep_status ToValidatorOptions(const char* function, const lockstep_validator_options& o,
                                   lockstep::SchemaValidatorOptions* out) {
  LOCKSTEP_C_REQUIRE(IsSchemaDraft(o.default_draft),
                     "default_draft is not a lockstep_schema_draft");
  LOCKSTEP_C_REQUIRE(o.max_errors >= 0, "max_errors is negative");
  LOCKSTEP_C_REQUIRE(o.max_depth > 0, "max_depth must be positive");
  LOCKSTEP_C_REQUIRE(o.num_remotes == 0 || (o.remote_uris != nullptr && o.remote_texts != nullptr &&
                                            o.remote_lengths != nullptr),
                     "remote_uris, remote_texts or remote_lengths is NULL");
  LOCKSTEP_C_REQUIRE(
      o.num_remote_dirs == 0 || (o.remote_dir_uris != nullptr && o.remote_dirs != nullptr),
      "remote_dir_uris or remote_dirs is NULL");
  out->default_draft = static_cast<lockstep::SchemaDraft>(o.default_draft);
  out->format_assertion = o.format_assertion != 0;
  out->openapi_formats = o.openapi_formats != 0;
  out->max_errors = static_cast<std::size_t>(o.max_errors);
  out->max_depth = o.max_depth;
  for (std::size_t i = 0; i < o.num_remotes; ++i) {
    if (o.remote_uris[i] == nullptr) {
      return InvalidArgument(function, "remote_uris[" + std::to_string(i) + "] is NULL");
    }
    if (o.remote_texts[i] == nullptr && o.remote_lengths[i] != 0) {
      return InvalidArgument(
          function, "remote_texts[" + std::to_string(i) + "] is NULL with a non-zero length");
    }
    out->remotes[o.remote_uris[i]] = o.remote_texts[i] == nullptr
                                         ? std::string()
                                         : std::string(o.remote_texts[i], o.remote_lengths[i]);
  }
  for (std::size_t i = 0; i < o.num_remote_dirs; ++i) {
    if (o.remote_dir_uris[i] == nullptr || o.remote_dirs[i] == nullptr) {
      return InvalidArgument(function, "remote_dir_uris[" + std::to_string(i) +
                                           "] or remote_dirs[" + std::to_string(i) + "] is NULL");
    }
    if (Status st = out->AddRemoteDirectory(o.remote_dir_uris[i], o.remote_dirs[i]); !st.ok()) {
      return FromStatus(st);
    }
  }
  return LOCKSTEP_OK;
}

}  // namespace

extern "C" {

// ---- status ---------------------------------------------------------------------------------

const char* lockstep_status_name(lockstep_status status) {
  // A C caller may pass any int; read the bits as one, since a C++ load of an enum value
  // outside its range is undefined.
  static_assert(sizeof(lockstep_status) == sizeof(int));
  int code;
  std::memcpy(&code, &status, sizeof(code));
  if (code == LOCKSTEP_OK) return "ok";
  if (code == LOCKSTEP_REJECTED) return "rejected";
  if ((code >= LOCKSTEP_INVALID_ARGUMENT && code <= LOCKSTEP_INTERNAL) ||
      code == LOCKSTEP_INVALID_ARTIFACT) {
    return lockstep::StatusCodeName(static_cast<StatusCode>(code));
  }
  return "unknown";
}

const char* lockstep_last_error(void) {
  return t_fixed_error != nullptr ? t_fixed_error : t_last_error.c_str();
}

// ---- vocabulary -----------------------------------------------------------------------------

lockstep_status lockstep_vocab_load_with_width(const char* name_or_path, int32_t logits_width,
                                               lockstep_vocab** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(out != nullptr, "out is NULL");
    LOCKSTEP_C_REQUIRE(name_or_path != nullptr, "name_or_path is NULL");
    LOCKSTEP_C_REQUIRE(logits_width >= 0, "logits_width is negative");
    lockstep::VocabularyOptions options;
    options.logits_width = logits_width;
    auto v = lockstep::Vocabulary::Load(name_or_path, options);
    if (!v.ok()) return FromStatus(v.status());
    auto handle = std::make_unique<lockstep_vocab>();
    handle->vocab = std::move(v).value();
    *out = handle.release();
    return LOCKSTEP_OK;
  });
}

lockstep_status lockstep_vocab_load(const char* name_or_path, lockstep_vocab** out) {
  return lockstep_vocab_load_with_width(name_or_path, 0, out);
}

lockstep_status lockstep_vocab_from_tokens(const char* const* token_bytes,
                                           const size_t* token_lengths, const int32_t* token_types,
                                           size_t num_tokens, const int32_t* eos_ids,
                                           size_t num_eos, int32_t logits_width,
                                           lockstep_vocab** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(out != nullptr, "out is NULL");
    LOCKSTEP_C_REQUIRE(num_tokens > 0, "num_tokens is 0");
    LOCKSTEP_C_REQUIRE(token_bytes != nullptr, "token_bytes is NULL");
    LOCKSTEP_C_REQUIRE(token_lengths != nullptr, "token_lengths is NULL");
    LOCKSTEP_C_REQUIRE(eos_ids != nullptr || num_eos == 0, "eos_ids is NULL");
    LOCKSTEP_C_REQUIRE(logits_width >= 0, "logits_width is negative");
    LOCKSTEP_C_REQUIRE(num_tokens <= (std::size_t{1} << 24),
                       "num_tokens is above 2^24, the largest vocabulary supported");
    std::vector<std::string_view> bytes(num_tokens);
    for (std::size_t i = 0; i < num_tokens; ++i) {
      if (token_bytes[i] == nullptr && token_lengths[i] != 0) {
        return InvalidArgument(
            function, "token_bytes[" + std::to_string(i) + "] is NULL with a non-zero length");
      }
      bytes[i] = token_bytes[i] == nullptr ? std::string_view()
                                           : std::string_view(token_bytes[i], token_lengths[i]);
    }
    std::vector<lockstep::TokenKind> kinds;
    if (token_types != nullptr) {
      kinds.resize(num_tokens);
      for (std::size_t i = 0; i < num_tokens; ++i) {
        if (token_types[i] < LOCKSTEP_TOKEN_NORMAL || token_types[i] > LOCKSTEP_TOKEN_UNUSED) {
          return InvalidArgument(function, "token_types[" + std::to_string(i) + "] is " +
                                               std::to_string(token_types[i]) +
                                               ", not a lockstep_token_type");
        }
        kinds[i] = static_cast<lockstep::TokenKind>(token_types[i]);
      }
    }
    lockstep::VocabularyOptions options;
    options.logits_width = logits_width;
    auto v = lockstep::Vocabulary::FromTokens(
        bytes, kinds, std::span<const lockstep::TokenId>(eos_ids, eos_ids ? num_eos : 0), options,
        "tokens");
    if (!v.ok()) return FromStatus(v.status());
    auto handle = std::make_unique<lockstep_vocab>();
    handle->vocab = std::move(v).value();
    *out = handle.release();
    return LOCKSTEP_OK;
  });
}

void lockstep_vocab_free(lockstep_vocab* vocab) { delete vocab; }

int32_t lockstep_vocab_size(const lockstep_vocab* vocab) {
  return vocab == nullptr ? 0 : vocab->vocab->size();
}

int32_t lockstep_vocab_logits_width(const lockstep_vocab* vocab) {
  return vocab == nullptr ? 0 : vocab->vocab->logits_width();
}

size_t lockstep_vocab_bitmask_words(const lockstep_vocab* vocab) {
  return vocab == nullptr ? 0 : lockstep::BitmaskWords(vocab->vocab->logits_width());
}

size_t lockstep_vocab_num_eos(const lockstep_vocab* vocab) {
  return vocab == nullptr ? 0 : vocab->vocab->eos_ids().size();
}

int32_t lockstep_vocab_eos_id(const lockstep_vocab* vocab, size_t i) {
  if (vocab == nullptr || i >= vocab->vocab->eos_ids().size()) return -1;
  return vocab->vocab->eos_ids()[i];
}

lockstep_token_type lockstep_vocab_token_type(const lockstep_vocab* vocab, int32_t id) {
  if (vocab == nullptr) return LOCKSTEP_TOKEN_UNUSED;
  return static_cast<lockstep_token_type>(vocab->vocab->Kind(id));
}

lockstep_status lockstep_vocab_token_bytes(const lockstep_vocab* vocab, int32_t id,
                                           const char** out_bytes, size_t* out_len) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(vocab != nullptr, "vocab is NULL");
    LOCKSTEP_C_REQUIRE(out_bytes != nullptr && out_len != nullptr, "an out pointer is NULL");
    if (id < 0 || id >= vocab->vocab->size()) {
      return InvalidArgument(function, "token id " + std::to_string(id) + " is outside [0, " +
                                           std::to_string(vocab->vocab->size()) + ")");
    }
    std::string_view b = vocab->vocab->TokenBytes(id);
    *out_bytes = b.data();
    *out_len = b.size();
    return LOCKSTEP_OK;
  });
}

// ---- compiling ------------------------------------------------------------------------------

void lockstep_compile_options_init(lockstep_compile_options* options) {
  if (options == nullptr) return;
  const lockstep::CompileOptions d;
  *options = lockstep_compile_options{};
  options->struct_size = sizeof(lockstep_compile_options);
  options->max_dfa_states = d.max_dfa_states;
  options->max_nfa_states = d.max_nfa_states;
  options->max_repeat = d.max_repeat;
  options->precompute_masks = d.precompute_masks ? 1 : 0;
  options->max_mask_cache_bytes = d.max_mask_cache_bytes;
  options->max_nesting_depth = d.max_nesting_depth;
  options->max_unrolled_states = d.max_unrolled_states;
  options->precompute_threads = d.precompute_threads;
  options->schema_lenient = d.schema_lenient ? 1 : 0;
  options->schema_whitespace_compact = d.schema_whitespace_compact ? 1 : 0;
  options->schema_max_whitespace_run = d.schema_max_whitespace_run;
  options->schema_format_assertion = d.schema_format_assertion ? 1 : 0;
  options->schema_max_exprs = d.schema_max_exprs;
  options->max_earley_items_per_byte = d.max_earley_items_per_byte;
  options->background_positions = d.background_positions ? 1 : 0;
  options->compile_timeout_ms = d.compile_timeout_ms;
  options->cancel = nullptr;
  options->schema_openapi_formats = d.schema_openapi_formats ? 1 : 0;
  options->schema_default_draft = static_cast<int32_t>(d.schema_default_draft);
  options->max_program_states = d.max_program_states;
  options->schema_member_order = static_cast<int32_t>(d.schema_member_order);
  options->schema_any_order_max_properties = d.schema_any_order_max_properties;
  options->schema_max_oneof_overlaps = d.schema_max_oneof_overlaps;
  options->schema_max_some_member_requirements = d.schema_max_some_member_requirements;
  options->max_unique_search_bytes = d.max_unique_search_bytes;
}

lockstep_status lockstep_cancel_token_create(lockstep_cancel_token** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(out != nullptr, "out is NULL");
    *out = new lockstep_cancel_token();
    return LOCKSTEP_OK;
  });
}

void lockstep_cancel_token_cancel(lockstep_cancel_token* token) {
  if (token != nullptr) token->flag->store(true);
}

void lockstep_cancel_token_reset(lockstep_cancel_token* token) {
  if (token != nullptr) token->flag->store(false);
}

int32_t lockstep_cancel_token_is_cancelled(const lockstep_cancel_token* token) {
  return token != nullptr && token->flag->load() ? 1 : 0;
}

void lockstep_cancel_token_free(lockstep_cancel_token* token) { delete token; }

lockstep_status lockstep_compile_regex(const lockstep_vocab* vocab, const char* pattern, size_t len,
                                       const lockstep_compile_options* options,
                                       lockstep_grammar** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    return Compile(function, vocab, pattern, len, options, out,
                   [](const lockstep::GrammarCompiler& c, std::string_view text,
                      const lockstep::CompileOptions& o,
                      std::vector<std::string>*) { return c.CompileRegex(text, o); });
  });
}

lockstep_status lockstep_compile_schema(const lockstep_vocab* vocab, const char* schema_json,
                                        size_t len, const lockstep_compile_options* options,
                                        lockstep_grammar** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    return Compile(function, vocab, schema_json, len, options, out,
                   [](const lockstep::GrammarCompiler& c, std::string_view text,
                      const lockstep::CompileOptions& o, std::vector<std::string>* warnings) {
                     return c.CompileSchema(text, o, warnings);
                   });
  });
}

lockstep_status lockstep_compile_grammar(const lockstep_vocab* vocab, const char* text, size_t len,
                                         const char* syntax,
                                         const lockstep_compile_options* options,
                                         lockstep_grammar** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    const std::string_view s = syntax == nullptr ? std::string_view("auto") : syntax;
    LOCKSTEP_C_REQUIRE(s == "auto" || s == "gbnf" || s == "lark",
                       "syntax must be \"auto\", \"gbnf\" or \"lark\"");
    return Compile(function, vocab, text, len, options, out,
                   [s](const lockstep::GrammarCompiler& c, std::string_view t,
                       const lockstep::CompileOptions& o,
                       std::vector<std::string>* warnings) {
                     return c.CompileGrammar(t, o, s, warnings);
                   });
  });
}

lockstep_status lockstep_compile_request(const lockstep_vocab* vocab, const char* request_json,
                                         size_t len, const char* format,
                                         const lockstep_compile_options* options,
                                         lockstep_grammar** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    std::shared_ptr<lockstep::CompiledRequest> request;
    const lockstep_status st = Compile(
        function, vocab, request_json, len, options, out,
        [&](const lockstep::GrammarCompiler& c, std::string_view text,
            const lockstep::CompileOptions& o, std::vector<std::string>* warnings)
            -> lockstep::Result<std::shared_ptr<const lockstep::CompiledGrammar>> {
          lockstep::RequestOptions ro;
          ro.format = format == nullptr ? "" : format;
          ro.compile = o;
          auto r = lockstep::CompileRequest(c, text, ro);
          if (!r.ok()) return r.status();
          *warnings = r->warnings;
          request = std::make_shared<lockstep::CompiledRequest>(std::move(*r));
          return request->grammar;
        });
    if (st == LOCKSTEP_OK) (*out)->request = std::move(request);
    return st;
  });
}

void lockstep_grammar_free(lockstep_grammar* grammar) { delete grammar; }

lockstep_request_kind lockstep_grammar_request_kind(const lockstep_grammar* grammar) {
  if (grammar == nullptr || grammar->request == nullptr) return LOCKSTEP_REQUEST_TEXT;
  return static_cast<lockstep_request_kind>(grammar->request->kind);
}

lockstep_status lockstep_grammar_parse_calls(const lockstep_grammar* grammar,
                                             const int32_t* tokens, size_t n, char* out,
                                             size_t* inout_len) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(grammar != nullptr, "grammar is NULL");
    LOCKSTEP_C_REQUIRE(tokens != nullptr || n == 0, "tokens is NULL");
    LOCKSTEP_C_REQUIRE(inout_len != nullptr, "inout_len is NULL");
    LOCKSTEP_C_REQUIRE(out != nullptr || *inout_len == 0, "out is NULL with a non-zero capacity");
    const lockstep::CompiledRequest* r = grammar->request.get();
    LOCKSTEP_C_REQUIRE(r != nullptr && !r->tool_choice.empty(),
                       "the grammar was not compiled from a request with tools");
    const std::span<const lockstep::TokenId> ids(tokens, n);
    const lockstep::Vocabulary& vocab = grammar->grammar->vocabulary();
    for (lockstep::TokenId id : ids) {
      LOCKSTEP_C_REQUIRE(id >= 0 && id < vocab.size(), "a token id is outside the vocabulary");
    }
    auto calls = lockstep::ParseToolCalls(r->format, vocab, ids, r->tools);
    if (!calls.ok()) return FromStatus(calls.status());
    const std::string json = lockstep::ToolCallsJson(*calls);
    const std::size_t capacity = *inout_len;
    *inout_len = json.size() + 1;
    if (json.size() + 1 <= capacity) std::memcpy(out, json.c_str(), json.size() + 1);
    return LOCKSTEP_OK;
  });
}

lockstep_status lockstep_grammar_precompute(const lockstep_grammar* grammar) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(grammar != nullptr, "grammar is NULL");
    grammar->grammar->PrecomputeAllMasks();
    return LOCKSTEP_OK;
  });
}

lockstep_status lockstep_grammar_save(const lockstep_grammar* grammar, const char* path) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(grammar != nullptr, "grammar is NULL");
    LOCKSTEP_C_REQUIRE(path != nullptr, "path is NULL");
    return FromStatus(lockstep::WriteArtifactFile(*grammar->grammar, path));
  });
}

lockstep_status lockstep_grammar_load(const lockstep_vocab* vocab, const char* path,
                                      lockstep_grammar** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(out != nullptr, "out is NULL");
    LOCKSTEP_C_REQUIRE(vocab != nullptr, "vocab is NULL");
    LOCKSTEP_C_REQUIRE(path != nullptr, "path is NULL");
    auto r = lockstep::ReadArtifactFile(CompilerOf(*vocab), path);
    if (!r.ok()) return FromStatus(r.status());
    auto handle = std::make_unique<lockstep_grammar>();
    handle->grammar = std::move(r).value();
    *out = handle.release();
    return LOCKSTEP_OK;
  });
}

lockstep_status lockstep_grammar_load_bytes(const lockstep_vocab* vocab, const void* bytes,
                                            size_t len, lockstep_grammar** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(out != nullptr, "out is NULL");
    LOCKSTEP_C_REQUIRE(vocab != nullptr, "vocab is NULL");
    LOCKSTEP_C_REQUIRE(bytes != nullptr || len == 0, "bytes is NULL");
    auto r = lockstep::LoadArtifact(
        CompilerOf(*vocab), std::string_view(len == 0 ? "" : static_cast<const char*>(bytes), len));
    if (!r.ok()) return FromStatus(r.status());
    auto handle = std::make_unique<lockstep_grammar>();
    handle->grammar = std::move(r).value();
    *out = handle.release();
    return LOCKSTEP_OK;
  });
}

int32_t lockstep_grammar_logits_width(const lockstep_grammar* grammar) {
  return grammar == nullptr ? 0 : grammar->grammar->logits_width();
}

size_t lockstep_grammar_bitmask_words(const lockstep_grammar* grammar) {
  return grammar == nullptr ? 0 : lockstep::BitmaskWords(grammar->grammar->logits_width());
}

size_t lockstep_grammar_num_warnings(const lockstep_grammar* grammar) {
  return grammar == nullptr ? 0 : grammar->warnings.size();
}

const char* lockstep_grammar_warning(const lockstep_grammar* grammar, size_t i) {
  if (grammar == nullptr || i >= grammar->warnings.size()) return nullptr;
  return grammar->warnings[i].c_str();
}

// ---- matcher --------------------------------------------------------------------------------

lockstep_status lockstep_matcher_create(const lockstep_grammar* grammar, lockstep_matcher** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(out != nullptr, "out is NULL");
    LOCKSTEP_C_REQUIRE(grammar != nullptr, "grammar is NULL");
    *out = new lockstep_matcher{lockstep::Matcher(grammar->grammar)};
    return LOCKSTEP_OK;
  });
}

lockstep_status lockstep_matcher_fork(const lockstep_matcher* matcher, lockstep_matcher** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(out != nullptr, "out is NULL");
    LOCKSTEP_C_REQUIRE(matcher != nullptr, "matcher is NULL");
    *out = new lockstep_matcher{matcher->matcher.Fork()};
    return LOCKSTEP_OK;
  });
}

void lockstep_matcher_free(lockstep_matcher* matcher) { delete matcher; }

lockstep_status lockstep_matcher_fill_bitmask(lockstep_matcher* matcher, uint32_t* words,
                                              size_t n_words) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(matcher != nullptr, "matcher is NULL");
    LOCKSTEP_C_REQUIRE(words != nullptr, "words is NULL");
    const std::size_t need = lockstep::BitmaskWords(matcher->matcher.grammar().logits_width());
    if (n_words < need) {
      return InvalidArgument(function, "n_words is " + std::to_string(n_words) +
                                           ", the mask needs " + std::to_string(need) + " words");
    }
    matcher->matcher.FillNextTokenBitmask({words, need});
    return LOCKSTEP_OK;
  });
}

lockstep_status lockstep_matcher_accept_token(lockstep_matcher* matcher, int32_t token) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(matcher != nullptr, "matcher is NULL");
    lockstep::Matcher& m = matcher->matcher;
    const std::int32_t width = m.grammar().logits_width();
    if (token < 0 || token >= width) {
      return InvalidArgument(function, "token id " + std::to_string(token) + " is outside [0, " +
                                           std::to_string(width) + ")");
    }
    if (m.AcceptToken(token)) return LOCKSTEP_OK;
    if (!m.last_error().ok()) return FromStatus(m.last_error());
    return SetError(LOCKSTEP_REJECTED, m.IsTerminated()
                                           ? "rejected: the matcher has terminated"
                                           : "rejected: token " + std::to_string(token) +
                                                 " is not allowed at step " +
                                                 std::to_string(m.NumSteps()));
  });
}

lockstep_status lockstep_matcher_accept_string(lockstep_matcher* matcher, const char* bytes,
                                               size_t len) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(matcher != nullptr, "matcher is NULL");
    LOCKSTEP_C_REQUIRE(bytes != nullptr || len == 0, "bytes is NULL");
    lockstep::Matcher& m = matcher->matcher;
    if (m.AcceptString(std::string_view(bytes == nullptr ? "" : bytes, len))) return LOCKSTEP_OK;
    if (!m.last_error().ok()) return FromStatus(m.last_error());
    return SetError(LOCKSTEP_REJECTED, m.IsTerminated() ? "rejected: the matcher has terminated"
                                                        : "rejected: the " + std::to_string(len) +
                                                              " bytes lead nowhere at step " +
                                                              std::to_string(m.NumSteps()));
  });
}

lockstep_status lockstep_matcher_rollback(lockstep_matcher* matcher, int32_t n) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(matcher != nullptr, "matcher is NULL");
    const std::int32_t steps = matcher->matcher.NumSteps();
    if (n < 0 || n > steps) {
      return InvalidArgument(function, "cannot roll back " + std::to_string(n) + " steps; " +
                                           std::to_string(steps) + " were accepted");
    }
    if (!matcher->matcher.Rollback(n)) {
      return SetError(LOCKSTEP_INTERNAL, "internal error: Rollback refused a valid count");
    }
    return LOCKSTEP_OK;
  });
}

lockstep_status lockstep_matcher_reset(lockstep_matcher* matcher) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(matcher != nullptr, "matcher is NULL");
    matcher->matcher.Reset();
    return LOCKSTEP_OK;
  });
}

int32_t lockstep_matcher_num_steps(const lockstep_matcher* matcher) {
  return matcher == nullptr ? 0 : matcher->matcher.NumSteps();
}

int lockstep_matcher_is_terminated(const lockstep_matcher* matcher) {
  return matcher != nullptr && matcher->matcher.IsTerminated() ? 1 : 0;
}

int lockstep_matcher_can_end(const lockstep_matcher* matcher) {
  if (matcher == nullptr) return 0;
  try {
    return matcher->matcher.CanEnd() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

lockstep_status lockstep_matcher_forced_bytes(lockstep_matcher* matcher, char* out,
                                              size_t* inout_len) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(matcher != nullptr, "matcher is NULL");
    LOCKSTEP_C_REQUIRE(inout_len != nullptr, "inout_len is NULL");
    LOCKSTEP_C_REQUIRE(out != nullptr || *inout_len == 0, "out is NULL with a non-zero capacity");
    const std::string forced = matcher->matcher.ForcedBytes(*inout_len);
    const std::size_t n = std::min(forced.size(), *inout_len);
    if (n > 0) std::memcpy(out, forced.data(), n);
    *inout_len = n;
    return LOCKSTEP_OK;
  });
}

lockstep_status lockstep_matcher_forced_tokens(lockstep_matcher* matcher, int32_t* out,
                                               size_t* inout_count) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(matcher != nullptr, "matcher is NULL");
    LOCKSTEP_C_REQUIRE(inout_count != nullptr, "inout_count is NULL");
    LOCKSTEP_C_REQUIRE(out != nullptr || *inout_count == 0, "out is NULL with a non-zero capacity");
    const std::vector<lockstep::TokenId> forced = matcher->matcher.ForcedTokens();
    const std::size_t n = std::min(forced.size(), *inout_count);
    if (n > 0) std::memcpy(out, forced.data(), n * sizeof(int32_t));
    *inout_count = n;
    return LOCKSTEP_OK;
  });
}

lockstep_status lockstep_matcher_validate_draft(lockstep_matcher* matcher, const int32_t* draft,
                                                size_t n, size_t* out_accepted) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(matcher != nullptr, "matcher is NULL");
    LOCKSTEP_C_REQUIRE(out_accepted != nullptr, "out_accepted is NULL");
    LOCKSTEP_C_REQUIRE(draft != nullptr || n == 0, "draft is NULL");
    const std::int32_t k =
        matcher->matcher.ValidateDraft(std::span<const lockstep::TokenId>(draft, n));
    *out_accepted = static_cast<std::size_t>(k);
    return LOCKSTEP_OK;
  });
}

lockstep_status lockstep_batch_fill(lockstep_matcher* const* matchers, size_t n, uint32_t* out,
                                    size_t stride_words, int num_threads) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(matchers != nullptr || n == 0, "matchers is NULL");
    LOCKSTEP_C_REQUIRE(out != nullptr || n == 0, "out is NULL");
    LOCKSTEP_C_REQUIRE(num_threads >= 0 && num_threads <= kMaxBatchThreads,
                       "num_threads must be in [0, 1024]");
    if (n == 0) return LOCKSTEP_OK;
    LOCKSTEP_C_REQUIRE(stride_words > 0, "stride_words is 0");
    LOCKSTEP_C_REQUIRE(n <= std::numeric_limits<std::size_t>::max() / stride_words,
                       "n * stride_words overflows");
    std::vector<lockstep::Matcher*> ms(n, nullptr);
    for (std::size_t i = 0; i < n; ++i) {
      if (matchers[i] == nullptr) continue;
      ms[i] = &matchers[i]->matcher;
      const std::size_t need = lockstep::BitmaskWords(ms[i]->grammar().logits_width());
      if (need > stride_words) {
        return InvalidArgument(function, "stride_words is " + std::to_string(stride_words) +
                                             ", matcher " + std::to_string(i) + " needs " +
                                             std::to_string(need) + " words");
      }
    }
    // A matcher filled by two threads at once would race on its parser's scratch sets.
    std::vector<lockstep::Matcher*> sorted(ms);
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i] != nullptr && sorted[i] == sorted[i - 1]) {
        return InvalidArgument(function, "a matcher is listed twice");
      }
    }
    const std::span<std::uint32_t> buffer(out, n * stride_words);
    const std::span<lockstep::Matcher* const> rows(ms);
    bool ok = false;
    if (num_threads == 1) {
      for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t* row = out + i * stride_words;
        if (ms[i] == nullptr) {
          std::memset(row, 0, stride_words * sizeof(std::uint32_t));
        } else {
          ms[i]->FillNextTokenBitmask({row, stride_words});
        }
      }
      ok = true;
    } else {
      FillerSlot& slot = FillerFor(num_threads);
      std::lock_guard<std::mutex> lock(slot.mu);
      ok = slot.filler->Fill(rows, buffer, stride_words);
    }
    if (!ok) return SetError(LOCKSTEP_INTERNAL, "internal error: BatchMaskFiller refused sizes");
    return LOCKSTEP_OK;
  });
}

// ---- sampler --------------------------------------------------------------------------------

void lockstep_sampler_config_init(lockstep_sampler_config* config) {
  if (config == nullptr) return;
  const lockstep::SamplerConfig d;
  *config = lockstep_sampler_config{};
  config->struct_size = sizeof(lockstep_sampler_config);
  config->temperature = d.temperature;
  config->top_k = d.top_k;
  config->top_p = d.top_p;
  config->min_p = d.min_p;
  config->seed = d.seed;
  config->logit_bias_ids = nullptr;
  config->logit_bias_values = nullptr;
  config->num_logit_bias = 0;
  config->repetition_penalty = d.repetition_penalty;
  config->repetition_window = d.repetition_window;
  config->frequency_penalty = d.frequency_penalty;
  config->presence_penalty = d.presence_penalty;
}

lockstep_status lockstep_sampler_create(const lockstep_sampler_config* config, int32_t width_hint,
                                        lockstep_sampler** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(out != nullptr, "out is NULL");
    LOCKSTEP_C_REQUIRE(width_hint >= 0, "width_hint is negative");
    lockstep_sampler_config c;
    lockstep_sampler_config_init(&c);
    if (lockstep_status s = ReadVersioned(function, config, &c, sizeof(lockstep_sampler_config));
        s != LOCKSTEP_OK) {
      return s;
    }
    LOCKSTEP_C_REQUIRE(!std::isnan(c.temperature) && !std::isnan(c.top_p) && !std::isnan(c.min_p) &&
                           !std::isnan(c.repetition_penalty) &&
                           std::isfinite(c.frequency_penalty) && std::isfinite(c.presence_penalty),
                       "a sampler parameter is NaN (or a penalty is infinite)");
    LOCKSTEP_C_REQUIRE(c.top_k >= 0, "top_k is negative");
    LOCKSTEP_C_REQUIRE(c.repetition_window >= 0, "repetition_window is negative");
    LOCKSTEP_C_REQUIRE(
        c.num_logit_bias == 0 || (c.logit_bias_ids != nullptr && c.logit_bias_values != nullptr),
        "logit_bias_ids or logit_bias_values is NULL");
    lockstep::SamplerConfig sc;
    sc.temperature = c.temperature;
    sc.top_k = c.top_k;
    sc.top_p = c.top_p;
    sc.min_p = c.min_p;
    sc.seed = c.seed;
    for (std::size_t i = 0; i < c.num_logit_bias; ++i) {
      if (!std::isfinite(c.logit_bias_values[i])) {
        return InvalidArgument(function,
                               "logit_bias_values[" + std::to_string(i) + "] is not finite");
      }
      sc.logit_bias.emplace_back(c.logit_bias_ids[i], c.logit_bias_values[i]);
    }
    sc.repetition_penalty = c.repetition_penalty;
    sc.repetition_window = c.repetition_window;
    sc.frequency_penalty = c.frequency_penalty;
    sc.presence_penalty = c.presence_penalty;
    *out = new lockstep_sampler{lockstep::Sampler(sc, width_hint)};
    return LOCKSTEP_OK;
  });
}

void lockstep_sampler_free(lockstep_sampler* sampler) { delete sampler; }

lockstep_status lockstep_sampler_sample(lockstep_sampler* sampler, float* logits, size_t n_logits,
                                        const uint32_t* mask, size_t n_mask_words,
                                        const int32_t* history, size_t n_history,
                                        uint64_t sequence_id, uint64_t step, int32_t* out_token) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(sampler != nullptr, "sampler is NULL");
    LOCKSTEP_C_REQUIRE(out_token != nullptr, "out_token is NULL");
    LOCKSTEP_C_REQUIRE(logits != nullptr, "logits is NULL");
    LOCKSTEP_C_REQUIRE(n_logits > 0 && n_logits <= static_cast<std::size_t>(
                                                       std::numeric_limits<std::int32_t>::max()),
                       "n_logits must be in [1, 2^31)");
    LOCKSTEP_C_REQUIRE(history != nullptr || n_history == 0, "history is NULL");
    if (mask != nullptr &&
        n_mask_words < lockstep::BitmaskWords(static_cast<std::int64_t>(n_logits))) {
      return InvalidArgument(
          function,
          "n_mask_words is " + std::to_string(n_mask_words) + ", " + std::to_string(n_logits) +
              " logits need " +
              std::to_string(lockstep::BitmaskWords(static_cast<std::int64_t>(n_logits))));
    }
    if (std::size_t bad = FirstBadLogit(logits, n_logits); bad != 0) {
      return InvalidArgument(function, "logits[" + std::to_string(bad - 1) + "] is NaN or +inf");
    }
    if (mask != nullptr && !AnyAllowed(mask, n_logits)) {
      return InvalidArgument(function, "the mask allows no token");
    }
    const lockstep::TokenId t = sampler->sampler.Sample(
        std::span<float>(logits, n_logits), mask,
        std::span<const lockstep::TokenId>(history, n_history), sequence_id, step);
    if (t == lockstep::kNoToken) {
      return InvalidArgument(function, "no allowed token has a finite logit");
    }
    *out_token = t;
    return LOCKSTEP_OK;
  });
}

// ---- whole generation -----------------------------------------------------------------------

void lockstep_generate_options_init(lockstep_generate_options* options) {
  if (options == nullptr) return;
  const lockstep::GenerateOptions d;
  *options = lockstep_generate_options{};
  options->struct_size = sizeof(lockstep_generate_options);
  options->prompt = nullptr;
  options->prompt_len = 0;
  options->jump_forward = d.jump_forward ? 1 : 0;
  options->sequence_id = d.sequence_id;
}

lockstep_status lockstep_generate(const lockstep_grammar* grammar, const lockstep_sampler* sampler,
                                  lockstep_logits_fn fn, void* user, int32_t max_tokens,
                                  int32_t* out_ids, size_t* inout_count,
                                  const lockstep_generate_options* options,
                                  lockstep_finish_reason* out_finish) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(grammar != nullptr, "grammar is NULL");
    LOCKSTEP_C_REQUIRE(sampler != nullptr, "sampler is NULL");
    LOCKSTEP_C_REQUIRE(fn != nullptr, "fn is NULL");
    LOCKSTEP_C_REQUIRE(max_tokens >= 0, "max_tokens is negative");
    LOCKSTEP_C_REQUIRE(inout_count != nullptr, "inout_count is NULL");
    LOCKSTEP_C_REQUIRE(out_ids != nullptr || max_tokens == 0, "out_ids is NULL");
    if (*inout_count < static_cast<std::size_t>(max_tokens)) {
      return InvalidArgument(function, "*inout_count (the capacity of out_ids) is " +
                                           std::to_string(*inout_count) + ", below max_tokens " +
                                           std::to_string(max_tokens));
    }
    lockstep_generate_options o;
    lockstep_generate_options_init(&o);
    if (lockstep_status s = ReadVersioned(function, options, &o, sizeof(lockstep_generate_options));
        s != LOCKSTEP_OK) {
      return s;
    }
    LOCKSTEP_C_REQUIRE(o.prompt != nullptr || o.prompt_len == 0, "options->prompt is NULL");
    lockstep::GenerateOptions go;
    go.sampler = sampler->sampler.config();
    go.max_tokens = max_tokens;
    go.jump_forward = o.jump_forward != 0;
    go.sequence_id = o.sequence_id;
    const std::int32_t width = grammar->grammar->logits_width();
    CheckedCallbackSource source(fn, user, width);
    lockstep::Matcher matcher(grammar->grammar);
    std::optional<lockstep::Result<lockstep::GenerateResult>> run;
    try {
      run.emplace(lockstep::Generate(
          source, matcher, std::span<const lockstep::TokenId>(o.prompt, o.prompt_len), go));
    } catch (const BadLogits& bad) {
      return InvalidArgument(function, "the logits callback wrote NaN or +inf at index " +
                                           std::to_string(bad.index) + " for a context of " +
                                           std::to_string(bad.context) + " ids");
    }
    const lockstep::Result<lockstep::GenerateResult>& r = *run;
    if (!r.ok()) return FromStatus(r.status());
    const std::vector<lockstep::TokenId>& tokens = r->tokens;
    if (tokens.size() > *inout_count) {
      return SetError(LOCKSTEP_INTERNAL, "internal error: more tokens than max_tokens");
    }
    if (!tokens.empty()) std::memcpy(out_ids, tokens.data(), tokens.size() * sizeof(int32_t));
    *inout_count = tokens.size();
    if (out_finish != nullptr) {
      *out_finish =
          r->finish == lockstep::FinishReason::kEos ? LOCKSTEP_FINISH_EOS : LOCKSTEP_FINISH_LENGTH;
    }
    return LOCKSTEP_OK;
  });
}

// ---- JSON Schema validation -----------------------------------------------------------------

void lockstep_validator_options_init(lockstep_validator_options* options) {
  if (options == nullptr) return;
  const lockstep::SchemaValidatorOptions d;
  *options = lockstep_validator_options{};
  options->struct_size = sizeof(lockstep_validator_options);
  options->default_draft = static_cast<int32_t>(d.default_draft);
  options->format_assertion = d.format_assertion ? 1 : 0;
  options->max_errors = static_cast<int32_t>(d.max_errors);
  options->max_depth = d.max_depth;
  options->remote_uris = nullptr;
  options->remote_texts = nullptr;
  options->remote_lengths = nullptr;
  options->num_remotes = 0;
  options->remote_dir_uris = nullptr;
  options->remote_dirs = nullptr;
  options->num_remote_dirs = 0;
  options->openapi_formats = d.openapi_formats ? 1 : 0;
}

lockstep_status lockstep_validator_create(const char* schema_json, size_t len,
                                          const lockstep_validator_options* options,
                                          lockstep_validator** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(out != nullptr, "out is NULL");
    LOCKSTEP_C_REQUIRE(schema_json != nullptr || len == 0, "schema_json is NULL");
    lockstep_validator_options o;
    lockstep_validator_options_init(&o);
    if (lockstep_status s =
            ReadVersioned(function, options, &o, sizeof(lockstep_validator_options));
        s != LOCKSTEP_OK) {
      return s;
    }
    lockstep::SchemaValidatorOptions so;
    if (lockstep_status s = ToValidatorOptions(function, o, &so); s != LOCKSTEP_OK) return s;
    auto v = lockstep::SchemaValidator::Create(
        std::string_view(schema_json == nullptr ? "" : schema_json, len), so);
    if (!v.ok()) return FromStatus(v.status());
    *out = new lockstep_validator{std::move(v).value()};
    return LOCKSTEP_OK;
  });
}

void lockstep_validator_free(lockstep_validator* validator) { delete validator; }

lockstep_schema_draft lockstep_validator_draft(const lockstep_validator* validator) {
  if (validator == nullptr) return LOCKSTEP_SCHEMA_DRAFT_2020_12;
  return static_cast<lockstep_schema_draft>(validator->validator.draft());
}

lockstep_status lockstep_validate(const lockstep_validator* validator, const char* instance_json,
                                  size_t len, lockstep_validation** out) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(out != nullptr, "out is NULL");
    LOCKSTEP_C_REQUIRE(validator != nullptr, "validator is NULL");
    LOCKSTEP_C_REQUIRE(instance_json != nullptr || len == 0, "instance_json is NULL");
    auto r = validator->validator.Validate(
        std::string_view(instance_json == nullptr ? "" : instance_json, len));
    if (!r.ok()) return FromStatus(r.status());
    *out = new lockstep_validation{std::move(r).value()};
    return LOCKSTEP_OK;
  });
}

void lockstep_validation_free(lockstep_validation* validation) { delete validation; }

int lockstep_validation_is_valid(const lockstep_validation* validation) {
  return validation != nullptr && validation->result.valid ? 1 : 0;
}

size_t lockstep_validation_num_errors(const lockstep_validation* validation) {
  return validation == nullptr ? 0 : validation->result.errors.size();
}

lockstep_status lockstep_validation_error(const lockstep_validation* validation, size_t i,
                                          const char** out_instance_pointer,
                                          const char** out_schema_pointer,
                                          const char** out_message) {
  const char* const function = __func__;
  return Guard(function, [&]() -> lockstep_status {
    LOCKSTEP_C_REQUIRE(validation != nullptr, "validation is NULL");
    LOCKSTEP_C_REQUIRE(
        out_instance_pointer != nullptr && out_schema_pointer != nullptr && out_message != nullptr,
        "an out pointer is NULL");
    const std::vector<lockstep::ValidationError>& errors = validation->result.errors;
    if (i >= errors.size()) {
      return InvalidArgument(function, "error index " + std::to_string(i) + " is outside [0, " +
                                           std::to_string(errors.size()) + ")");
    }
    *out_instance_pointer = errors[i].instance_pointer.c_str();
    *out_schema_pointer = errors[i].schema_pointer.c_str();
    *out_message = errors[i].message.c_str();
    return LOCKSTEP_OK;
  });
}

}  // extern "C"
