/* lockstep_c.h: the C ABI of lockstep, for C hosts and foreign-function interfaces (inference
 * engines written in C, Rust, Go, Python ctypes): vocabularies, compiled constraints, matchers,
 * the sampler, batch mask filling, a whole-generation helper and the JSON Schema validator,
 * behind opaque handles. Valid C11 and C++. The contract (status codes, thread safety,
 * ownership) is docs/c-api.md.
 *
 * Every function returns a lockstep_status unless it is a trivial getter, whose value on a NULL
 * handle is documented with it. No C++ exception and no abort crosses this interface: a failing
 * call returns a status other than LOCKSTEP_OK, writes nothing through its out pointers, and
 * leaves a message in lockstep_last_error(). Every lockstep_*_free accepts NULL. */
#ifndef LOCKSTEP_LOCKSTEP_C_H_
#define LOCKSTEP_LOCKSTEP_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ------------------------------------------------------------------------------- */

/* Codes 1..10 and 12 are the C++ lockstep::StatusCode values, one for one. */
typedef enum lockstep_status {
  LOCKSTEP_OK = 0,
  LOCKSTEP_INVALID_ARGUMENT = 1,   /* NULL pointer, short buffer, bad id, wrong struct_size */
  LOCKSTEP_INVALID_REGEX = 2,      /* regex syntax error (location: byte offset) */
  LOCKSTEP_INVALID_GRAMMAR = 3,    /* GBNF / Lark syntax or semantic error (line:column) */
  LOCKSTEP_INVALID_SCHEMA = 4,     /* malformed JSON Schema (JSON Pointer) */
  LOCKSTEP_UNSUPPORTED = 5,        /* valid input that cannot be enforced exactly */
  LOCKSTEP_UNSATISFIABLE = 6,      /* the constraint admits no string */
  LOCKSTEP_RESOURCE_LIMIT = 7,     /* a compile budget, the nesting limit, or out of memory */
  LOCKSTEP_INVALID_VOCABULARY = 8, /* tokenizer file or in-memory tokens malformed */
  LOCKSTEP_IO_ERROR = 9,           /* file missing or unreadable, unknown bundled name */
  LOCKSTEP_INTERNAL = 10,          /* a bug: please report it with lockstep_last_error() */
  LOCKSTEP_REJECTED = 11,          /* the constraint does not allow this token or these bytes
                                      here (or the matcher has terminated); state unchanged */
  LOCKSTEP_INVALID_ARTIFACT = 12   /* compiled artifact malformed, corrupted, truncated, written
                                      for another vocabulary or format version (byte offset) */
} lockstep_status;

/* "ok", "invalid argument", ... ; "unknown" for a value outside the enum. Never NULL. */
const char* lockstep_status_name(lockstep_status status);

/* The message of the last failing call on this thread (the C++ Status text with its location:
 * byte offset, line:column, JSON Pointer); "" if no call has failed on this thread. Successful
 * calls do not clear it. Valid until the next failing call on this thread. Never NULL. */
const char* lockstep_last_error(void);

/* ---- opaque handles ----------------------------------------------------------------------- */

typedef struct lockstep_vocab lockstep_vocab;     /* immutable; shareable across threads */
typedef struct lockstep_grammar lockstep_grammar; /* immutable; shareable across threads */
typedef struct lockstep_matcher lockstep_matcher; /* one sequence; one thread at a time */
typedef struct lockstep_sampler lockstep_sampler; /* scratch buffers; one thread at a time */

/* ---- vocabulary --------------------------------------------------------------------------- */

/* Token types of lockstep_vocab_from_tokens (the values of the C++ lockstep::TokenKind). */
typedef enum lockstep_token_type {
  LOCKSTEP_TOKEN_NORMAL = 0,  /* emits its bytes */
  LOCKSTEP_TOKEN_BYTE = 1,    /* byte-fallback token (<0xNN>): emits its one byte */
  LOCKSTEP_TOKEN_SPECIAL = 2, /* control / special (BOS, EOS, chat markers): emits nothing */
  LOCKSTEP_TOKEN_UNUSED = 3   /* an id the tokenizer does not define: never allowed */
} lockstep_token_type;

/* A bundled name ("llama3", "gpt2", "qwen2.5", "mistral") or a path to a tokenizer.json (plain
 * or .gz), a NAME.tiktoken file (with NAME.meta.json beside it), a SentencePiece
 * tokenizer.model, or a directory holding one. Unknown name or missing file: LOCKSTEP_IO_ERROR. */
lockstep_status lockstep_vocab_load(const char* name_or_path, lockstep_vocab** out);
/* As lockstep_vocab_load, for a model whose logits are wider than the vocabulary (padding ids
 * are never allowed). logits_width 0 means the vocabulary's size; smaller than the size is
 * LOCKSTEP_INVALID_ARGUMENT. */
lockstep_status lockstep_vocab_load_with_width(const char* name_or_path, int32_t logits_width,
                                               lockstep_vocab** out);
/* A vocabulary from the host's own token table: token i emits token_bytes[i][0 ..
 * token_lengths[i]) (a pointer may be NULL when its length is 0). token_types: num_tokens
 * lockstep_token_type values, or NULL for all NORMAL; SPECIAL and UNUSED tokens emit nothing
 * and their bytes are kept only as their display text. A NORMAL token with no bytes is never
 * allowed. eos_ids: the end-of-sequence ids (each a SPECIAL token), or num_eos 0 to look for
 * the usual names (<|eot_id|>, <|end_of_text|>, <|endoftext|>, <|im_end|>, </s>) among the
 * SPECIAL tokens' texts. logits_width: 0 = num_tokens, or the model's wider width. Everything
 * is copied; the arrays may be freed on return. The token ids are also the BPE merge ranks
 * (the tiktoken convention: a pair merges iff its concatenation is a token, lowest id first),
 * with no pre-tokenizer; that encoder is only used to re-tokenise forced bytes
 * (lockstep_matcher_forced_tokens, jump-forward in lockstep_generate), so for a tokenizer with
 * other rules those tokens are valid but may not be the model's canonical ones.
 * Errors: LOCKSTEP_INVALID_ARGUMENT (NULL arrays, an eos id out of range or not SPECIAL, a bad
 * type, a logits width below num_tokens), LOCKSTEP_INVALID_VOCABULARY (no tokens, more than
 * 2^24, a token longer than 65535 bytes). */
lockstep_status lockstep_vocab_from_tokens(const char* const* token_bytes,
                                           const size_t* token_lengths, const int32_t* token_types,
                                           size_t num_tokens, const int32_t* eos_ids,
                                           size_t num_eos, int32_t logits_width,
                                           lockstep_vocab** out);
void lockstep_vocab_free(lockstep_vocab* vocab);

/* Number of token ids (max id + 1); 0 for NULL. */
int32_t lockstep_vocab_size(const lockstep_vocab* vocab);
/* Logits width (>= size); 0 for NULL. */
int32_t lockstep_vocab_logits_width(const lockstep_vocab* vocab);
/* uint32_t words of a token bitmask: ceil(logits_width / 32); 0 for NULL. */
size_t lockstep_vocab_bitmask_words(const lockstep_vocab* vocab);
/* Number of end-of-sequence ids; 0 for NULL. */
size_t lockstep_vocab_num_eos(const lockstep_vocab* vocab);
/* The i-th end-of-sequence id (the first is the main one); -1 for NULL or i out of range. */
int32_t lockstep_vocab_eos_id(const lockstep_vocab* vocab, size_t i);
/* The type of token `id`; LOCKSTEP_TOKEN_UNUSED for NULL or an id outside [0, size). */
lockstep_token_type lockstep_vocab_token_type(const lockstep_vocab* vocab, int32_t id);
/* The exact bytes token `id` emits (not NUL-terminated; empty for special and unused tokens),
 * valid as long as the vocabulary (or any grammar compiled from it) lives. An id outside
 * [0, size) is LOCKSTEP_INVALID_ARGUMENT. */
lockstep_status lockstep_vocab_token_bytes(const lockstep_vocab* vocab, int32_t id,
                                           const char** out_bytes, size_t* out_len);

/* ---- compiling constraints ---------------------------------------------------------------- */

/* A cancellation flag for compiles (CompileOptions::cancel): pass it in
 * lockstep_compile_options.cancel, and lockstep_cancel_token_cancel from any thread stops every
 * compile running with it soon after, with LOCKSTEP_RESOURCE_LIMIT and "compile cancelled" in
 * lockstep_last_error. Thread-safe. A compile keeps its own reference to the flag, so the token
 * may be freed while one runs (cancelling it then is impossible, not unsafe). */
typedef struct lockstep_cancel_token lockstep_cancel_token;
lockstep_status lockstep_cancel_token_create(lockstep_cancel_token** out);
/* Sets the flag (compiles that start later with it stop at once) / clears it. NULL: no-op. */
void lockstep_cancel_token_cancel(lockstep_cancel_token* token);
void lockstep_cancel_token_reset(lockstep_cancel_token* token);
/* 1 once cancelled (until reset), else 0; 0 for NULL. */
int32_t lockstep_cancel_token_is_cancelled(const lockstep_cancel_token* token);
void lockstep_cancel_token_free(lockstep_cancel_token* token);

/* The C++ lockstep::CompileOptions. Initialise with lockstep_compile_options_init (defaults),
 * then change fields. struct_size must be sizeof(lockstep_compile_options) of the header the
 * caller was built with: fields past it take their defaults, a size below this version's first
 * layout or above the library's is LOCKSTEP_INVALID_ARGUMENT. Booleans are 0 / 1. */
typedef struct lockstep_compile_options {
  size_t struct_size;
  int32_t max_dfa_states; /* budgets: past one, LOCKSTEP_RESOURCE_LIMIT */
  int32_t max_nfa_states;
  int32_t max_repeat;
  int32_t precompute_masks; /* 1: compute every state's mask at compile time */
  int64_t max_mask_cache_bytes;
  int32_t max_nesting_depth;         /* grammars: deepest nesting before RESOURCE_LIMIT */
  int32_t max_unrolled_states;       /* grammars: 0 = automatic */
  int32_t precompute_threads;        /* grammars with precompute_masks: 0 = all cores */
  int32_t schema_lenient;            /* schemas: relax what cannot be enforced (warnings) */
  int32_t schema_whitespace_compact; /* schemas: no whitespace between JSON tokens */
  int32_t schema_max_whitespace_run; /* schemas: bytes of whitespace per gap */
  int32_t schema_format_assertion;   /* schemas: enforce `format` (1) or ignore it (0) */
  int64_t schema_max_exprs;
  /* Added after the first layout (a struct_size that ends before a field gives it its default): */
  int32_t max_earley_items_per_byte; /* grammars: parse work of one byte before RESOURCE_LIMIT */
  /* 1 (default): positions of a grammar in use are computed by one background thread per
   * vocabulary between fills (see docs/grammars.md); 0: only on the filling thread. */
  int32_t background_positions;
  /* Wall-clock budget of one compile in ms (default 10000; 0 = none): past it the compile
   * returns LOCKSTEP_RESOURCE_LIMIT, "compile deadline of N ms passed", with the schema's JSON
   * Pointer or the grammar rule it was compiling. */
  int64_t compile_timeout_ms;
  const lockstep_cancel_token* cancel; /* NULL: none */
  /* schemas: 1 also enforces the OpenAPI formats int32, int64 (integer ranges) and byte
   * (base64); 0 (default): they are unknown formats, annotations with a warning. */
  int32_t schema_openapi_formats;
  /* schemas: the lockstep_schema_draft of a schema whose $schema names none of the drafts
   * (default LOCKSTEP_SCHEMA_DRAFT_2020_12); a known $schema always wins. */
  int32_t schema_default_draft;
  /* grammars and schemas: states of all rule automata together (default 500000); max_dfa_states
   * bounds each automaton on its own. Past it, LOCKSTEP_RESOURCE_LIMIT naming this field. */
  int64_t max_program_states;
  /* schemas: LOCKSTEP_MEMBER_ORDER_DECLARED (0, default: declared properties in declared order,
   * then the others) or LOCKSTEP_MEMBER_ORDER_ANY (1: any order, each property at most once;
   * an object of more than schema_any_order_max_properties declared properties is
   * LOCKSTEP_RESOURCE_LIMIT then, naming that field). */
  int32_t schema_member_order;
  int32_t schema_any_order_max_properties; /* default 10; 0..63 */
  /* schemas: the most oneOf branches one branch may overlap (not provably disjoint from it;
   * each is negated into it), default 11; past it, LOCKSTEP_RESOURCE_LIMIT naming this field. */
  int32_t schema_max_oneof_overlaps;
  /* schemas: the most negated additionalProperties / patternProperties / propertyNames ("some
   * member breaks it") on one object, default 3, at most 16 (2^n member chains); past it,
   * LOCKSTEP_RESOURCE_LIMIT naming this field. */
  int32_t schema_max_some_member_requirements;
  /* schemas: bytes that the searches for a new item of a uniqueItems list of closed objects
   * may try per mask fill, and after each accepted token (default 65536; 0..). Past it a fill
   * leaves the undecided tokens out of the mask, and accepting refuses with
   * LOCKSTEP_RESOURCE_LIMIT naming this field (docs/json-schema-compiler.md). */
  int64_t max_unique_search_bytes;
} lockstep_compile_options;

/* The object member orders (the values of the C++ lockstep::SchemaMemberOrder). */
typedef enum lockstep_member_order {
  LOCKSTEP_MEMBER_ORDER_DECLARED = 0,
  LOCKSTEP_MEMBER_ORDER_ANY = 1
} lockstep_member_order;

/* Fills *options with the defaults and sets struct_size. NULL: no-op. */
void lockstep_compile_options_init(lockstep_compile_options* options);

/* Each compiles `len` bytes of text (no NUL terminator needed) against `vocab`; options NULL
 * means the defaults. The grammar keeps what it needs of the vocabulary alive: `vocab` may be
 * freed before it. Errors name their location in lockstep_last_error(). */
/* Full-match semantics: the generated text as a whole matches the pattern. */
lockstep_status lockstep_compile_regex(const lockstep_vocab* vocab, const char* pattern, size_t len,
                                       const lockstep_compile_options* options,
                                       lockstep_grammar** out);
/* A JSON Schema (draft 2020-12, 2019-09, 07, 06 or 04; schema_default_draft). With
 * schema_lenient, relaxed keywords are listed by lockstep_grammar_num_warnings /
 * lockstep_grammar_warning. */
lockstep_status lockstep_compile_schema(const lockstep_vocab* vocab, const char* schema_json,
                                        size_t len, const lockstep_compile_options* options,
                                        lockstep_grammar** out);
/* A grammar in GBNF or Lark-style EBNF; syntax "auto" (or NULL), "gbnf" or "lark". A rule the
 * start rule never reaches is a warning ("line:column: rule 'x' is never used (unreachable from
 * 'root')"), listed by lockstep_grammar_num_warnings / lockstep_grammar_warning. */
lockstep_status lockstep_compile_grammar(const lockstep_vocab* vocab, const char* text, size_t len,
                                         const char* syntax,
                                         const lockstep_compile_options* options,
                                         lockstep_grammar** out);
/* An OpenAI-style chat-completions body (`len` bytes of JSON): one constraint from its
 * response_format, tools, tool_choice and parallel_tool_calls, other keys ignored (the mapping:
 * docs/requests.md). `format` names the tools' chat format (a bundled name such as "qwen", or a
 * format file); NULL or "" takes the body's "lockstep_format", else the vocabulary's family
 * (Llama-3, Qwen2.5, Mistral). A malformed body is LOCKSTEP_INVALID_ARGUMENT with the JSON
 * Pointer of the bad part in lockstep_last_error() ("invalid argument at /tool_choice: ...").
 * A lenient json_schema's relaxed keywords are the grammar's warnings ("POINTER: message"). */
lockstep_status lockstep_compile_request(const lockstep_vocab* vocab, const char* request_json,
                                         size_t len, const char* format,
                                         const lockstep_compile_options* options,
                                         lockstep_grammar** out);
void lockstep_grammar_free(lockstep_grammar* grammar);

/* Logits width of the grammar's vocabulary; 0 for NULL. */
int32_t lockstep_grammar_logits_width(const lockstep_grammar* grammar);
/* ceil(logits_width / 32); 0 for NULL. */
size_t lockstep_grammar_bitmask_words(const lockstep_grammar* grammar);
/* Warnings of the compile: a lenient schema's relaxed keywords ("pointer: message"), a grammar's
 * unused rules ("line:column: message"); 0 for NULL. */
size_t lockstep_grammar_num_warnings(const lockstep_grammar* grammar);
/* The i-th warning, NUL-terminated, valid while the grammar lives; NULL for NULL or i out of
 * range. */
const char* lockstep_grammar_warning(const lockstep_grammar* grammar, size_t i);

/* What a grammar compiled by lockstep_compile_request produces: free text, one JSON value, or
 * free text and tool calls (with tool_choice "none" it is TEXT). */
typedef enum lockstep_request_kind {
  LOCKSTEP_REQUEST_TEXT = 0,
  LOCKSTEP_REQUEST_JSON = 1,
  LOCKSTEP_REQUEST_TOOLS = 2
} lockstep_request_kind;
/* The grammar's kind; LOCKSTEP_REQUEST_TEXT for NULL or a grammar not compiled from a request. */
lockstep_request_kind lockstep_grammar_request_kind(const lockstep_grammar* grammar);
/* The tool calls in generated `tokens` (n ids, without the final EOS) of a grammar compiled from
 * a request with tools, read back without the automaton: the JSON array [{"name": ...,
 * "arguments": ...}, ...] (empty when there are none). On input *inout_len is the capacity of
 * `out` (NULL allowed when 0); on return the text's size with its NUL terminator, and the text
 * is written only when that fits (else call again with that capacity).
 * LOCKSTEP_INVALID_ARGUMENT for a grammar without tools or tokens that are not well-formed
 * calls under its format ("byte N"). */
lockstep_status lockstep_grammar_parse_calls(const lockstep_grammar* grammar,
                                             const int32_t* tokens, size_t n, char* out,
                                             size_t* inout_len);

/* ---- compiled artifacts (docs/artifacts.md) ------------------------------------------------ */

/* Computes every state's / position's token mask now (what an artifact should carry). */
lockstep_status lockstep_grammar_precompute(const lockstep_grammar* grammar);
/* Writes the grammar with the masks cached so far to `path` (a .lsg file: versioned header,
 * vocabulary fingerprint, checksums); written beside and renamed, never half a file. */
lockstep_status lockstep_grammar_save(const lockstep_grammar* grammar, const char* path);
/* Loads an artifact for `vocab` without compiling, from a file or from `len` bytes in memory.
 * LOCKSTEP_INVALID_ARTIFACT (with "byte N" in lockstep_last_error) for a foreign, truncated or
 * corrupted file, or one written for another vocabulary or format version; LOCKSTEP_IO_ERROR
 * for an unreadable file. */
lockstep_status lockstep_grammar_load(const lockstep_vocab* vocab, const char* path,
                                      lockstep_grammar** out);
lockstep_status lockstep_grammar_load_bytes(const lockstep_vocab* vocab, const void* bytes,
                                            size_t len, lockstep_grammar** out);

/* ---- matcher ------------------------------------------------------------------------------ */

/* A matcher at the start of the constraint. It holds a reference to the grammar: the grammar
 * handle may be freed first. */
lockstep_status lockstep_matcher_create(const lockstep_grammar* grammar, lockstep_matcher** out);
/* A copy of the matcher's whole state (for beams, drafts); independent of `matcher`. */
lockstep_status lockstep_matcher_fork(const lockstep_matcher* matcher, lockstep_matcher** out);
void lockstep_matcher_free(lockstep_matcher* matcher);

/* Writes the next-token bitmask to words[0 .. bitmask_words): token i is allowed iff bit i % 32
 * of words[i / 32] is set (the layout of vLLM / SGLang / XGrammar kernels). EOS ids are allowed
 * exactly where the constraint may end; after termination every bit is 0. n_words below
 * lockstep_grammar_bitmask_words is LOCKSTEP_INVALID_ARGUMENT (nothing written); words past it
 * are left untouched. */
lockstep_status lockstep_matcher_fill_bitmask(lockstep_matcher* matcher, uint32_t* words,
                                              size_t n_words);
/* Advances by one token. An id outside [0, logits_width) is LOCKSTEP_INVALID_ARGUMENT; a token
 * the mask does not allow is LOCKSTEP_REJECTED (or LOCKSTEP_RESOURCE_LIMIT when it would nest
 * deeper than max_nesting_depth or take more than max_earley_items_per_byte of parse work for one
 * byte), with the state unchanged. Accepting an EOS id where the
 * constraint may end terminates the matcher. */
lockstep_status lockstep_matcher_accept_token(lockstep_matcher* matcher, int32_t token);
/* Advances by raw bytes, as one step (one Rollback undoes it); LOCKSTEP_REJECTED if they lead
 * nowhere. bytes may be NULL when len is 0. */
lockstep_status lockstep_matcher_accept_string(lockstep_matcher* matcher, const char* bytes,
                                               size_t len);
/* Undoes the last n accepted steps; n < 0 or more than lockstep_matcher_num_steps is
 * LOCKSTEP_INVALID_ARGUMENT (state unchanged). */
lockstep_status lockstep_matcher_rollback(lockstep_matcher* matcher, int32_t n);
/* Back to the start of the constraint. */
lockstep_status lockstep_matcher_reset(lockstep_matcher* matcher);
/* Accepted steps that rollback can undo; 0 for NULL. */
int32_t lockstep_matcher_num_steps(const lockstep_matcher* matcher);
/* 1 once an EOS id was accepted, else 0; 0 for NULL. */
int lockstep_matcher_is_terminated(const lockstep_matcher* matcher);
/* 1 if the text so far is a complete match (an EOS id would be accepted now), else 0; 0 for
 * NULL. */
int lockstep_matcher_can_end(const lockstep_matcher* matcher);
/* Jump-forward: the bytes every continuation must start with. On input *inout_len is the
 * capacity of `out` (which may be NULL when it is 0); on return the number of bytes written,
 * at most the capacity (a shorter prefix of forced bytes is still forced). 0 when nothing is
 * forced. */
lockstep_status lockstep_matcher_forced_bytes(lockstep_matcher* matcher, char* out,
                                              size_t* inout_len);
/* The forced bytes as canonical tokens, the last one kept back (see the C++
 * Matcher::ForcedTokens); every one is accepted in order by lockstep_matcher_accept_token. On
 * input *inout_count is the capacity of `out` (NULL allowed when 0); on return the number
 * written (a prefix when the capacity is smaller). */
lockstep_status lockstep_matcher_forced_tokens(lockstep_matcher* matcher, int32_t* out,
                                               size_t* inout_count);
/* Speculative decoding: how many of draft[0 .. n) would be accepted in order from the current
 * state, written to *out_accepted; the matcher is unchanged. */
lockstep_status lockstep_matcher_validate_draft(lockstep_matcher* matcher, const int32_t* draft,
                                                size_t n, size_t* out_accepted);

/* Fills the masks of n matchers into one buffer: row i is out[i * stride_words ..
 * (i + 1) * stride_words), which receives matcher i's mask in its first bitmask_words words
 * (words past them are left untouched; the row of a NULL entry is zeroed). `out` must hold
 * n * stride_words words; stride_words below the largest bitmask_words of the matchers is
 * LOCKSTEP_INVALID_ARGUMENT (nothing written), and so is a matcher listed twice.
 * num_threads: threads working on it, the caller's included; 0 = all cores; 1 = the calling
 * thread alone. The library keeps one thread pool per distinct num_threads > 1 for the life of
 * the process (created on first use); concurrent calls with the same num_threads take turns on
 * it. Different rows may use different grammars. */
lockstep_status lockstep_batch_fill(lockstep_matcher* const* matchers, size_t n, uint32_t* out,
                                    size_t stride_words, int num_threads);

/* ---- sampler ------------------------------------------------------------------------------ */

/* The C++ lockstep::SamplerConfig. Initialise with lockstep_sampler_config_init; struct_size as
 * for lockstep_compile_options. Stages, in order: logit bias -> repetition penalty ->
 * frequency / presence penalties -> grammar mask -> temperature -> top-k -> top-p -> min-p ->
 * draw. */
typedef struct lockstep_sampler_config {
  size_t struct_size;
  float temperature;              /* <= 0 (or top_k == 1): greedy, the masked argmax */
  int32_t top_k;                  /* 0 = off */
  float top_p;                    /* >= 1 = off */
  float min_p;                    /* <= 0 = off */
  uint64_t seed;                  /* the draw depends only on (seed, sequence_id, step) */
  const int32_t* logit_bias_ids;  /* num_logit_bias ids (copied at create) */
  const float* logit_bias_values; /* their biases, added to the logits first */
  size_t num_logit_bias;
  float repetition_penalty;  /* CTRL theta over the history window; 1 = off */
  int32_t repetition_window; /* last tokens of the history the penalties see; 0 = all */
  float frequency_penalty;
  float presence_penalty;
} lockstep_sampler_config;

/* Fills *config with the defaults (temperature 1, everything else off) and sets struct_size.
 * NULL: no-op. */
void lockstep_sampler_config_init(lockstep_sampler_config* config);
/* config NULL means the defaults. width_hint pre-sizes scratch buffers (0 = on first use).
 * NaN parameters, a negative top_k or window, or bias arrays NULL with num_logit_bias > 0 are
 * LOCKSTEP_INVALID_ARGUMENT. */
lockstep_status lockstep_sampler_create(const lockstep_sampler_config* config, int32_t width_hint,
                                        lockstep_sampler** out);
void lockstep_sampler_free(lockstep_sampler* sampler);

/* Draws one token from n_logits logits. THE LOGITS ARE MODIFIED IN PLACE (used as scratch, as
 * the C++ Sampler::Sample does): copy them first if you need them. They must not be NaN or +inf
 * (-inf is fine): LOCKSTEP_INVALID_ARGUMENT otherwise. mask: NULL for "all allowed", or
 * n_mask_words >= ceil(n_logits / 32) words in the bitmask layout (fewer is
 * LOCKSTEP_INVALID_ARGUMENT). history: the tokens so far, oldest first, for the penalties (NULL
 * when n_history is 0). (sequence_id, step) key the random draw, so a run reproduces whatever
 * the batch or thread order. A mask that allows nothing is LOCKSTEP_INVALID_ARGUMENT. */
lockstep_status lockstep_sampler_sample(lockstep_sampler* sampler, float* logits, size_t n_logits,
                                        const uint32_t* mask, size_t n_mask_words,
                                        const int32_t* history, size_t n_history,
                                        uint64_t sequence_id, uint64_t step, int32_t* out_token);

/* ---- whole generation --------------------------------------------------------------------- */

/* The C shape of a model: write `width` floats to `out` for the `n` ids of `context` (prompt
 * and generated ids so far). Must not keep `context` or `out` after returning, and must not
 * unwind (longjmp or throw) through lockstep. */
typedef void (*lockstep_logits_fn)(void* user, const int32_t* context, size_t n, float* out,
                                   int32_t width);

typedef enum lockstep_finish_reason {
  LOCKSTEP_FINISH_EOS = 0,   /* the matcher accepted an EOS id (not written to the output) */
  LOCKSTEP_FINISH_LENGTH = 1 /* max_tokens generated */
} lockstep_finish_reason;

/* Options of lockstep_generate; struct_size as for lockstep_compile_options. */
typedef struct lockstep_generate_options {
  size_t struct_size;
  const int32_t* prompt; /* given to the model (and to the penalties) before the generated ids */
  size_t prompt_len;
  int32_t jump_forward; /* 1 (default): append forced bytes' tokens with no model call */
  uint64_t sequence_id; /* the sampler's sequence counter (default 0) */
} lockstep_generate_options;

/* Fills *options with the defaults and sets struct_size. NULL: no-op. */
void lockstep_generate_options_init(lockstep_generate_options* options);

/* Runs a whole constrained generation from the start of `grammar`, the loop of the C++
 * lockstep::Generate: per step, fill the mask, call fn(user, context, n, logits, width) with
 * width = lockstep_grammar_logits_width, draw with the sampler's config (step counter from 0,
 * counting drawn tokens), accept; until an EOS id is accepted or max_tokens ids are generated.
 * On input *inout_count is the capacity of out_ids and must be >= max_tokens; on return the
 * number of generated ids (without the final EOS). out_finish may be NULL. options NULL means
 * the defaults. The sampler handle is only read (its config). */
lockstep_status lockstep_generate(const lockstep_grammar* grammar, const lockstep_sampler* sampler,
                                  lockstep_logits_fn fn, void* user, int32_t max_tokens,
                                  int32_t* out_ids, size_t* inout_count,
                                  const lockstep_generate_options* options,
                                  lockstep_finish_reason* out_finish);

/* ---- JSON Schema validation --------------------------------------------------------------- */

/* The C++ lockstep::SchemaValidator (lockstep/validator.h): a JSON Schema (draft 2020-12, 2019-09,
 * 07, 06 or 04) loaded once, every $ref resolved (never over the network), then any number of JSON
 * instances validated against it, each verdict with its errors located by JSON Pointers. */
typedef struct lockstep_validator lockstep_validator;   /* immutable; shareable across threads */
typedef struct lockstep_validation lockstep_validation; /* one verdict and its errors; read-only */

/* The drafts (the values of the C++ lockstep::SchemaDraft, lockstep/schema_draft.h). */
typedef enum lockstep_schema_draft {
  LOCKSTEP_SCHEMA_DRAFT_2020_12 = 0,
  LOCKSTEP_SCHEMA_DRAFT_7 = 1,
  LOCKSTEP_SCHEMA_DRAFT_4 = 2,
  LOCKSTEP_SCHEMA_DRAFT_6 = 3,
  LOCKSTEP_SCHEMA_DRAFT_2019_09 = 4
} lockstep_schema_draft;

/* The C++ lockstep::SchemaValidatorOptions; struct_size as for lockstep_compile_options. */
typedef struct lockstep_validator_options {
  size_t struct_size;
  int32_t default_draft;    /* lockstep_schema_draft of a schema whose $schema names none */
  int32_t format_assertion; /* 1: check `format` (date, email, ipv4, ...); 0 (default): ignore */
  int32_t max_errors;       /* errors kept per instance (default 100; 0: the verdict only) */
  int32_t max_depth;        /* nested evaluations before LOCKSTEP_RESOURCE_LIMIT (default 400) */
  /* Documents a $ref may name: document i is remote_texts[i][0 .. remote_lengths[i]) at the
   * absolute URI remote_uris[i] (NUL-terminated, no fragment). Copied by
   * lockstep_validator_create. Any other remote $ref is LOCKSTEP_INVALID_SCHEMA. */
  const char* const* remote_uris;
  const char* const* remote_texts;
  const size_t* remote_lengths;
  size_t num_remotes;
  /* Directories read by lockstep_validator_create (`lockstep validate --remote URI=DIR`): every
   * file under remote_dirs[i] is the document at remote_dir_uris[i] + its relative path. A
   * directory that cannot be read is LOCKSTEP_IO_ERROR. */
  const char* const* remote_dir_uris;
  const char* const* remote_dirs;
  size_t num_remote_dirs;
  /* 1: check the OpenAPI formats int32, int64 (integer ranges) and byte (base64), as the
   * compiler's schema_openapi_formats enforces them; 0 (default): unknown formats. */
  int32_t openapi_formats;
} lockstep_validator_options;

/* Fills *options with the defaults and sets struct_size. NULL: no-op. */
void lockstep_validator_options_init(lockstep_validator_options* options);

/* Loads the JSON Schema in schema_json[0 .. len); options NULL means the defaults. Errors:
 * LOCKSTEP_INVALID_SCHEMA (text that is not JSON, a malformed keyword, an unresolvable $ref;
 * location: JSON Pointer), LOCKSTEP_UNSUPPORTED (a pattern with lookaround or backreferences),
 * LOCKSTEP_IO_ERROR (a remote directory), LOCKSTEP_INVALID_ARGUMENT (NULL arrays, a bad draft,
 * a negative max_errors, a max_depth below 1). */
lockstep_status lockstep_validator_create(const char* schema_json, size_t len,
                                          const lockstep_validator_options* options,
                                          lockstep_validator** out);
void lockstep_validator_free(lockstep_validator* validator);
/* The draft in force (the schema's $schema, else default_draft); LOCKSTEP_SCHEMA_DRAFT_2020_12
 * for NULL. */
lockstep_schema_draft lockstep_validator_draft(const lockstep_validator* validator);

/* Validates the JSON instance in instance_json[0 .. len) (instance_json may be NULL when len is
 * 0), writing its verdict and errors to a new *out, freed with lockstep_validation_free. May run
 * on several threads at once with one validator. An instance that is not JSON is
 * LOCKSTEP_INVALID_ARGUMENT ("byte N" in lockstep_last_error); nesting past 1024 levels, or an
 * evaluation past max_depth, is LOCKSTEP_RESOURCE_LIMIT. */
lockstep_status lockstep_validate(const lockstep_validator* validator, const char* instance_json,
                                  size_t len, lockstep_validation** out);
void lockstep_validation_free(lockstep_validation* validation);
/* 1 if the instance is valid, else 0; 0 for NULL. */
int lockstep_validation_is_valid(const lockstep_validation* validation);
/* Errors of an invalid instance (0 when valid, at most max_errors); 0 for NULL. */
size_t lockstep_validation_num_errors(const lockstep_validation* validation);
/* The i-th error: the JSON Pointer of the failing value in the instance ("" for the root), the
 * JSON Pointer of the failing keyword in the schema ("URI#/pointer" inside a remote document)
 * and the message, NUL-terminated, valid until the validation is freed. i out of range is
 * LOCKSTEP_INVALID_ARGUMENT. */
lockstep_status lockstep_validation_error(const lockstep_validation* validation, size_t i,
                                          const char** out_instance_pointer,
                                          const char** out_schema_pointer,
                                          const char** out_message);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOCKSTEP_LOCKSTEP_C_H_ */
