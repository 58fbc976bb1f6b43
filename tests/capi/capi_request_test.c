/* A plain C11 host of lockstep_compile_request: a chat-completions body with tools and
 * tool_choice "required" on the Qwen2.5 vocabulary (format from its family) rejects free text
 * and accepts a call, whose name and arguments lockstep_grammar_parse_calls reads back; a
 * json_object body is JSON; a malformed body fails with its JSON Pointer in
 * lockstep_last_error(). Exits non-zero with a message on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_check.h"
#include "lockstep/lockstep_c.h"

static const char* const kTools =
    "{\"model\": \"m\", \"messages\": [], \"tool_choice\": \"required\", \"tools\": [{\"type\": "
    "\"function\", \"function\": {\"name\": \"add\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"]}}}]}";
static const char* const kCall =
    "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 7}}</tool_call>";

static lockstep_grammar* Compile(const lockstep_vocab* vocab, const char* body) {
  lockstep_grammar* g = NULL;
  lockstep_status st = lockstep_compile_request(vocab, body, strlen(body), NULL, NULL, &g);
  CHECK(st == LOCKSTEP_OK, "%s: %s", body, lockstep_last_error());
  return g;
}

/* 1 when `text` is accepted whole and the output may end there, else 0. */
static int Complete(const lockstep_grammar* g, const char* text) {
  lockstep_matcher* m = NULL;
  int ok;
  if (lockstep_matcher_create(g, &m) != LOCKSTEP_OK) return 0;
  ok = lockstep_matcher_accept_string(m, text, strlen(text)) == LOCKSTEP_OK &&
       lockstep_matcher_can_end(m);
  lockstep_matcher_free(m);
  return ok;
}

static void TestToolsRequired(const lockstep_vocab* vocab) {
  lockstep_grammar* g = Compile(vocab, kTools);
  int32_t ids[256];
  size_t n = 0, len = 0;
  char json[256];
  const char* p = kCall;
  if (g == NULL) return;
  CHECK(lockstep_grammar_request_kind(g) == LOCKSTEP_REQUEST_TOOLS, "kind");
  CHECK(!Complete(g, "Sure."), "free text before the call");
  CHECK(Complete(g, kCall), "one call");
  /* The call as tokens: the longest token that spells the text's next bytes, each time. */
  while (*p != '\0' && n < 256) {
    int32_t best = -1;
    size_t best_len = 0, i;
    for (i = 0; i < (size_t)lockstep_vocab_size(vocab); ++i) {
      const char* bytes = NULL;
      size_t blen = 0;
      if (lockstep_vocab_token_bytes(vocab, (int32_t)i, &bytes, &blen) != LOCKSTEP_OK) continue;
      if (blen > best_len && blen <= strlen(p) && memcmp(bytes, p, blen) == 0) {
        best = (int32_t)i;
        best_len = blen;
      }
    }
    if (best < 0) break;
    ids[n++] = best;
    p += best_len;
  }
  CHECK(*p == '\0', "the call spelt by tokens");
  CHECK(lockstep_grammar_parse_calls(g, ids, n, NULL, &len) == LOCKSTEP_OK, "%s",
        lockstep_last_error());
  CHECK(len == strlen("[{\"name\":\"add\",\"arguments\":{\"a\":7}}]") + 1, "size %zu", len);
  len = sizeof json;
  CHECK(lockstep_grammar_parse_calls(g, ids, n, json, &len) == LOCKSTEP_OK, "%s",
        lockstep_last_error());
  CHECK(strcmp(json, "[{\"name\":\"add\",\"arguments\":{\"a\":7}}]") == 0, "calls %s", json);
  lockstep_grammar_free(g);
}

static void TestJsonObjectAndErrors(const lockstep_vocab* vocab) {
  const char* body = "{\"response_format\": {\"type\": \"json_object\"}}";
  const char* bad = "{\"tools\": [], \"tool_choice\": 3}";
  lockstep_grammar* g = Compile(vocab, body);
  size_t len = 0;
  int32_t id = 0;
  if (g != NULL) {
    CHECK(lockstep_grammar_request_kind(g) == LOCKSTEP_REQUEST_JSON, "kind");
    CHECK(Complete(g, "{\"x\": [1]}"), "an object");
    CHECK(!Complete(g, "[1]"), "an array");
    CHECK(lockstep_grammar_parse_calls(g, &id, 1, NULL, &len) == LOCKSTEP_INVALID_ARGUMENT,
          "no tools to read");
    lockstep_grammar_free(g);
  }
  g = NULL;
  CHECK(lockstep_compile_request(vocab, bad, strlen(bad), NULL, NULL, &g) ==
            LOCKSTEP_INVALID_ARGUMENT,
        "malformed");
  CHECK(g == NULL, "nothing written");
  CHECK(strstr(lockstep_last_error(), "/tool_choice") != NULL, "%s", lockstep_last_error());
}

int main(void) {
  lockstep_vocab* vocab = NULL;
  if (lockstep_vocab_load("qwen2.5", &vocab) != LOCKSTEP_OK) {
    fprintf(stderr, "cannot load qwen2.5: %s\n", lockstep_last_error());
    return 1;
  }
  TestToolsRequired(vocab);
  TestJsonObjectAndErrors(vocab);
  lockstep_vocab_free(vocab);
  if (capi_check_failures != 0) {
    fprintf(stderr, "%d checks failed\n", capi_check_failures);
    return 1;
  }
  printf("capi_request_test: ok\n");
  return 0;
}
