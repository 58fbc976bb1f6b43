/* A plain C11 host of the compile budgets of the C ABI: a compile with a 1 ms deadline
 * (lockstep_compile_options.compile_timeout_ms) and one stopped by a lockstep_cancel_token that
 * another thread (POSIX threads) cancels, both on a schema whose compile takes many seconds,
 * end with LOCKSTEP_RESOURCE_LIMIT naming the budget. Exits non-zero with a message on any
 * failure; a compile that did not stop would run past the test's timeout. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi_check.h"
#include "lockstep/lockstep_c.h"

/* A oneOf of twelve object branches that are not provably disjoint: each branch is compiled
 * with the negation of the eleven others (3^11 alternatives each). */
static size_t SlowSchema(char* out, size_t cap) {
  size_t n = 0;
  int i, j;
  n += (size_t)snprintf(out + n, cap - n, "{\"type\": \"object\", \"oneOf\": [");
  for (i = 0; i < 12; ++i) {
    n += (size_t)snprintf(out + n, cap - n, "%s{\"properties\": {", i == 0 ? "" : ", ");
    for (j = 0; j < 3; ++j) {
      n += (size_t)snprintf(out + n, cap - n, "%s\"p%d\": {\"type\": \"integer\", \"minimum\": %d}",
                            j == 0 ? "" : ", ", j, i + j);
    }
    n += (size_t)snprintf(out + n, cap - n, "}}");
  }
  n += (size_t)snprintf(out + n, cap - n, "]}");
  return n;
}

static void* CancelSoon(void* token) {
  struct timespec pause = {0, 50 * 1000 * 1000};
  nanosleep(&pause, NULL);
  lockstep_cancel_token_cancel((lockstep_cancel_token*)token);
  return NULL;
}

int main(void) {
  char schema[8192];
  const size_t len = SlowSchema(schema, sizeof schema);
  lockstep_vocab* vocab = NULL;
  lockstep_grammar* grammar = NULL;
  lockstep_cancel_token* token = NULL;
  lockstep_compile_options options;
  lockstep_status st;
  pthread_t canceller;

  if (lockstep_vocab_load("llama3", &vocab) != LOCKSTEP_OK) {
    fprintf(stderr, "cannot load llama3: %s\n", lockstep_last_error());
    return 1;
  }
  lockstep_compile_options_init(&options);
  CHECK(options.compile_timeout_ms == 10000, "default deadline %lld",
        (long long)options.compile_timeout_ms);
  CHECK(options.cancel == NULL, "no cancellation by default");

  /* A 1 ms deadline. */
  options.compile_timeout_ms = 1;
  st = lockstep_compile_schema(vocab, schema, len, &options, &grammar);
  CHECK(st == LOCKSTEP_RESOURCE_LIMIT, "1 ms deadline: %s", lockstep_status_name(st));
  CHECK(strstr(lockstep_last_error(), "compile deadline of 1 ms passed") != NULL, "%s",
        lockstep_last_error());
  CHECK(grammar == NULL, "no grammar after an error");

  /* A token cancelled from another thread, no deadline. */
  if (lockstep_cancel_token_create(&token) != LOCKSTEP_OK) {
    fprintf(stderr, "cannot create a cancel token: %s\n", lockstep_last_error());
    return 1;
  }
  CHECK(lockstep_cancel_token_is_cancelled(token) == 0, "a new token is not cancelled");
  options.compile_timeout_ms = 0;
  options.cancel = token;
  if (pthread_create(&canceller, NULL, CancelSoon, token) != 0) {
    fprintf(stderr, "cannot start a thread\n");
    return 1;
  }
  st = lockstep_compile_schema(vocab, schema, len, &options, &grammar);
  pthread_join(canceller, NULL);
  CHECK(st == LOCKSTEP_RESOURCE_LIMIT, "cancelled: %s", lockstep_status_name(st));
  CHECK(strstr(lockstep_last_error(), "compile cancelled") != NULL, "%s", lockstep_last_error());
  CHECK(lockstep_cancel_token_is_cancelled(token) == 1, "the token says it was cancelled");

  /* Reset, the same token lets a small compile through. */
  lockstep_cancel_token_reset(token);
  st = lockstep_compile_schema(vocab, "{\"type\": \"integer\"}", strlen("{\"type\": \"integer\"}"),
                               &options, &grammar);
  CHECK(st == LOCKSTEP_OK, "after reset: %s (%s)", lockstep_status_name(st), lockstep_last_error());
  lockstep_grammar_free(grammar);

  lockstep_cancel_token_free(token);
  lockstep_vocab_free(vocab);
  if (capi_check_failures > 0) {
    fprintf(stderr, "%d check(s) failed\n", capi_check_failures);
    return 1;
  }
  printf("compile budgets: deadline and cancellation ok\n");
  return 0;
}
