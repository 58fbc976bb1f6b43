/* A plain C11 host of the C ABI: loads the bundled Llama-3 vocabulary, compiles the bundled
 * tool-call schema, generates step by step (mask, C logits, sampler, accept) and with
 * lockstep_generate, checks both give the same ids, and prints them with the text. Exits
 * non-zero with a message on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi/capi_test_support.h"
#include "capi_check.h"
#include "lockstep/lockstep_c.h"

/* Ends the program at a failed call whose results the rest needs. */
#define MUST(call)                                                              \
  do {                                                                          \
    lockstep_status st_ = (call);                                               \
    if (st_ != LOCKSTEP_OK) {                                                   \
      fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, \
              lockstep_status_name(st_), lockstep_last_error());                \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

static char* ReadWholeFile(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  char* data = NULL;
  long size;
  if (f == NULL) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    data = (char*)malloc((size_t)size + 1);
    if (data != NULL && fread(data, 1, (size_t)size, f) != (size_t)size) {
      free(data);
      data = NULL;
    }
    if (data != NULL) {
      data[size] = '\0';
      *len = (size_t)size;
    }
  }
  fclose(f);
  return data;
}

static void PrintIds(const char* label, const int32_t* ids, size_t n) {
  size_t i;
  printf("%s:", label);
  for (i = 0; i < n; ++i) printf(" %d", (int)ids[i]);
  printf("\n");
}

/* The text of `ids`, NUL-terminated (malloc'd). */
static char* Detokenize(const lockstep_vocab* vocab, const int32_t* ids, size_t n) {
  size_t total = 0, i;
  char* text;
  for (i = 0; i < n; ++i) {
    const char* b;
    size_t len;
    MUST(lockstep_vocab_token_bytes(vocab, ids[i], &b, &len));
    total += len;
  }
  text = (char*)malloc(total + 1);
  if (text == NULL) exit(1);
  total = 0;
  for (i = 0; i < n; ++i) {
    const char* b;
    size_t len;
    MUST(lockstep_vocab_token_bytes(vocab, ids[i], &b, &len));
    memcpy(text + total, b, len);
    total += len;
  }
  text[total] = '\0';
  return text;
}

int main(void) {
  const char* schema_path = LOCKSTEP_SOURCE_DATA_DIR "/tools/book_flight.json";
  lockstep_vocab* vocab = NULL;
  lockstep_grammar* grammar = NULL;
  lockstep_sampler* sampler = NULL;
  lockstep_matcher* check = NULL;
  lockstep_sampler_config config;
  lockstep_generate_options options;
  lockstep_finish_reason finish = LOCKSTEP_FINISH_LENGTH;
  capi_test_model model;
  int32_t steps[CAPI_TEST_MAX_TOKENS], whole[CAPI_TEST_MAX_TOKENS], jumped[CAPI_TEST_MAX_TOKENS];
  size_t n_steps = 0, n_whole = CAPI_TEST_MAX_TOKENS, n_jumped = CAPI_TEST_MAX_TOKENS, i;
  int eos = 0;
  size_t schema_len = 0;
  char* schema = ReadWholeFile(schema_path, &schema_len);
  char* text;

  if (schema == NULL) {
    fprintf(stderr, "cannot read %s\n", schema_path);
    return 1;
  }
  CHECK(strcmp(lockstep_status_name((lockstep_status)99), "unknown") == 0, "status name of 99");
  CHECK(strcmp(lockstep_status_name(LOCKSTEP_REJECTED), "rejected") == 0, "status name");
  CHECK(strcmp(lockstep_last_error(), "") == 0, "an error before any call");
  MUST(lockstep_vocab_load("llama3", &vocab));
  CHECK(lockstep_vocab_size(vocab) == 128256, "size %d", (int)lockstep_vocab_size(vocab));
  CHECK(lockstep_vocab_logits_width(vocab) == 128256, "width");
  CHECK(lockstep_vocab_bitmask_words(vocab) == 4008, "words %zu",
        lockstep_vocab_bitmask_words(vocab));
  CHECK(lockstep_vocab_num_eos(vocab) >= 1, "no eos");
  CHECK(lockstep_vocab_token_type(vocab, lockstep_vocab_eos_id(vocab, 0)) == LOCKSTEP_TOKEN_SPECIAL,
        "eos is not special");

  MUST(lockstep_compile_schema(vocab, schema, schema_len, NULL, &grammar));
  /* The grammar keeps the vocabulary alive; the test still needs the handle for token bytes. */
  CHECK(lockstep_grammar_logits_width(grammar) == 128256, "grammar width");
  CHECK(lockstep_grammar_num_warnings(grammar) == 0, "warnings in strict mode");

  capi_test_sampler_config(&config);
  MUST(lockstep_sampler_create(&config, lockstep_grammar_logits_width(grammar), &sampler));
  MUST(capi_test_model_init(&model, vocab, CAPI_TEST_MODEL_SEED));

  /* Step by step. */
  MUST(capi_test_generate_steps(grammar, sampler, &model, CAPI_TEST_MAX_TOKENS, steps, &n_steps,
                                &eos));
  CHECK(eos == 1, "the step-by-step generation did not end with EOS (%zu ids)", n_steps);
  CHECK(n_steps > 10, "only %zu ids", n_steps);

  /* The whole generation in one call, same settings, no jump-forward: the same ids. */
  lockstep_generate_options_init(&options);
  options.jump_forward = 0;
  MUST(lockstep_generate(grammar, sampler, capi_test_logits, &model, CAPI_TEST_MAX_TOKENS, whole,
                         &n_whole, &options, &finish));
  CHECK(finish == LOCKSTEP_FINISH_EOS, "lockstep_generate finished by length");
  CHECK(n_whole == n_steps, "lockstep_generate gave %zu ids, the steps %zu", n_whole, n_steps);
  for (i = 0; i < n_whole && i < n_steps; ++i) {
    if (whole[i] != steps[i]) {
      CHECK(whole[i] == steps[i], "id %zu differs: %d vs %d", i, (int)whole[i], (int)steps[i]);
      break;
    }
  }

  /* With jump-forward (the default options): a different path, still a complete match. */
  MUST(lockstep_generate(grammar, sampler, capi_test_logits, &model, CAPI_TEST_MAX_TOKENS, jumped,
                         &n_jumped, NULL, &finish));
  CHECK(finish == LOCKSTEP_FINISH_EOS, "jump-forward generation finished by length");
  MUST(lockstep_matcher_create(grammar, &check));
  for (i = 0; i < n_jumped; ++i) MUST(lockstep_matcher_accept_token(check, jumped[i]));
  CHECK(lockstep_matcher_can_end(check) == 1, "the jump-forward ids are not a complete match");
  MUST(lockstep_matcher_accept_token(check, lockstep_vocab_eos_id(vocab, 0)));
  CHECK(lockstep_matcher_is_terminated(check) == 1, "EOS did not terminate");

  PrintIds("steps", steps, n_steps);
  PrintIds("generate", whole, n_whole);
  PrintIds("jump_forward", jumped, n_jumped);
  text = Detokenize(vocab, steps, n_steps);
  printf("text: %s\n", text);
  free(text);
  text = Detokenize(vocab, jumped, n_jumped);
  printf("jump_forward text: %s\n", text);
  free(text);

  lockstep_matcher_free(check);
  capi_test_model_free(&model);
  lockstep_sampler_free(sampler);
  lockstep_grammar_free(grammar);
  lockstep_vocab_free(vocab);
  free(schema);
  if (capi_check_failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", capi_check_failures);
    return 1;
  }
  printf("capi_generation_test: ok\n");
  return 0;
}
