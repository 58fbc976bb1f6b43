/* A plain C11 host of the C ABI's JSON Schema validator (lockstep_validator_*, lockstep_validate,
 * lockstep_validation_*): verdicts and errors with their JSON Pointers, the options (draft,
 * formats, max_errors, remote documents in memory and from a directory, a bad struct_size), the
 * failures of the calls (status, message, nothing written through the out pointers), NULL frees,
 * and one validator shared by POSIX threads validating at once. Exits non-zero with a message on
 * any failure. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capi_check.h"
#include "lockstep/lockstep_c.h"

static const char* const kSchema =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"minLength\": 1},"
    " \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}},"
    " \"required\": [\"name\"]}";

/* A validator for `schema` with `options` (NULL: defaults); NULL, with a message, on failure. */
static lockstep_validator* Make(const char* schema, const lockstep_validator_options* options) {
  lockstep_validator* v = NULL;
  lockstep_status st = lockstep_validator_create(schema, strlen(schema), options, &v);
  CHECK(st == LOCKSTEP_OK, "%s: %s", schema, lockstep_last_error());
  return v;
}

/* 1 valid, 0 invalid, -1 the call failed. */
static int Verdict(const lockstep_validator* v, const char* instance) {
  lockstep_validation* r = NULL;
  int valid;
  if (lockstep_validate(v, instance, strlen(instance), &r) != LOCKSTEP_OK) return -1;
  valid = lockstep_validation_is_valid(r);
  lockstep_validation_free(r);
  return valid;
}

static void TestVerdictsAndErrors(void) {
  lockstep_validator* v = Make(kSchema, NULL);
  lockstep_validation* r = NULL;
  const char* instance = "{\"name\": \"\", \"tags\": [\"x\", 3]}";
  const char *ip = NULL, *sp = NULL, *msg = NULL;
  lockstep_status st;
  if (v == NULL) return;
  CHECK(lockstep_validator_draft(v) == LOCKSTEP_SCHEMA_DRAFT_2020_12, "default draft");
  CHECK(Verdict(v, "{\"name\": \"a\", \"tags\": [\"x\"]}") == 1, "valid instance");
  st = lockstep_validate(v, instance, strlen(instance), &r);
  CHECK(st == LOCKSTEP_OK, "%s", lockstep_last_error());
  if (r != NULL) {
    CHECK(lockstep_validation_is_valid(r) == 0, "invalid instance");
    CHECK(lockstep_validation_num_errors(r) == 2, "%zu errors", lockstep_validation_num_errors(r));
    CHECK(lockstep_validation_error(r, 0, &ip, &sp, &msg) == LOCKSTEP_OK, "%s",
          lockstep_last_error());
    CHECK(ip != NULL && strcmp(ip, "/name") == 0, "instance pointer %s", ip ? ip : "NULL");
    CHECK(sp != NULL && strcmp(sp, "/properties/name/minLength") == 0, "schema pointer %s",
          sp ? sp : "NULL");
    CHECK(msg != NULL && msg[0] != '\0', "a message");
    CHECK(lockstep_validation_error(r, 1, &ip, &sp, &msg) == LOCKSTEP_OK, "%s",
          lockstep_last_error());
    CHECK(strcmp(ip, "/tags/1") == 0 && strcmp(sp, "/properties/tags/items/type") == 0, "%s %s", ip,
          sp);
    ip = NULL;
    CHECK(lockstep_validation_error(r, 2, &ip, &sp, &msg) == LOCKSTEP_INVALID_ARGUMENT,
          "index past the errors");
    CHECK(ip == NULL, "nothing written on an error");
    CHECK(strstr(lockstep_last_error(), "outside [0, 2)") != NULL, "%s", lockstep_last_error());
    CHECK(lockstep_validation_error(r, 0, NULL, &sp, &msg) == LOCKSTEP_INVALID_ARGUMENT,
          "NULL out pointer");
  }
  lockstep_validation_free(r);
  lockstep_validator_free(v);
}

static void TestFailuresOfTheCalls(void) {
  lockstep_validator* v = NULL;
  lockstep_validation* r = NULL;
  lockstep_validator_options o;
  const char* bad_json = "{\"name\": [1, 2,]}";
  const char* lookahead = "{\"pattern\": \"a(?=b)\"}";  /* not right after a leading ^ */
  const char* remote = "{\"$ref\": \"http://example.test/int.json\"}";
  lockstep_status st;

  st = lockstep_validator_create("{", 1, NULL, &v);
  CHECK(st == LOCKSTEP_INVALID_SCHEMA && v == NULL, "schema not JSON: %s",
        lockstep_status_name(st));
  st = lockstep_validator_create(lookahead, strlen(lookahead), NULL, &v);
  CHECK(st == LOCKSTEP_UNSUPPORTED && v == NULL, "lookahead: %s", lockstep_status_name(st));
  CHECK(strstr(lockstep_last_error(), "/pattern") != NULL, "%s", lockstep_last_error());
  st = lockstep_validator_create(remote, strlen(remote), NULL, &v);
  CHECK(st == LOCKSTEP_INVALID_SCHEMA, "unknown remote: %s", lockstep_status_name(st));
  CHECK(strstr(lockstep_last_error(), "/$ref") != NULL, "%s", lockstep_last_error());
  CHECK(
      lockstep_validator_create(kSchema, strlen(kSchema), NULL, NULL) == LOCKSTEP_INVALID_ARGUMENT,
      "out NULL");
  CHECK(lockstep_validator_create(NULL, 3, NULL, &v) == LOCKSTEP_INVALID_ARGUMENT, "text NULL");

  lockstep_validator_options_init(&o);
  o.max_depth = 0;
  CHECK(lockstep_validator_create(kSchema, strlen(kSchema), &o, &v) == LOCKSTEP_INVALID_ARGUMENT,
        "max_depth 0");
  lockstep_validator_options_init(&o);
  o.default_draft = 5;
  CHECK(lockstep_validator_create(kSchema, strlen(kSchema), &o, &v) == LOCKSTEP_INVALID_ARGUMENT,
        "draft 5 is not a lockstep_schema_draft value");
  lockstep_validator_options_init(&o);
  o.num_remotes = 1;
  CHECK(lockstep_validator_create(kSchema, strlen(kSchema), &o, &v) == LOCKSTEP_INVALID_ARGUMENT,
        "remotes NULL");
  lockstep_validator_options_init(&o);
  o.struct_size = 3;
  CHECK(lockstep_validator_create(kSchema, strlen(kSchema), &o, &v) == LOCKSTEP_INVALID_ARGUMENT,
        "struct_size 3");
  CHECK(v == NULL, "no validator after the errors");

  v = Make(kSchema, NULL);
  if (v == NULL) return;
  st = lockstep_validate(v, bad_json, strlen(bad_json), &r);
  CHECK(st == LOCKSTEP_INVALID_ARGUMENT && r == NULL, "not JSON: %s", lockstep_status_name(st));
  CHECK(strstr(lockstep_last_error(), "byte 15") != NULL, "%s", lockstep_last_error());
  CHECK(lockstep_validate(v, NULL, 4, &r) == LOCKSTEP_INVALID_ARGUMENT, "instance NULL");
  CHECK(lockstep_validate(NULL, "{}", 2, &r) == LOCKSTEP_INVALID_ARGUMENT, "validator NULL");
  CHECK(lockstep_validate(v, "{}", 2, NULL) == LOCKSTEP_INVALID_ARGUMENT, "out NULL");
  lockstep_validator_free(v);

  v = Make("{\"$ref\": \"#\"}", NULL);
  if (v != NULL) {
    CHECK(lockstep_validate(v, "1", 1, &r) == LOCKSTEP_RESOURCE_LIMIT, "runaway recursion");
    lockstep_validator_free(v);
  }
  /* NULL handles: frees are no-ops, getters give their documented values. */
  lockstep_validator_free(NULL);
  lockstep_validation_free(NULL);
  CHECK(lockstep_validation_is_valid(NULL) == 0, "NULL verdict");
  CHECK(lockstep_validation_num_errors(NULL) == 0, "NULL errors");
  CHECK(lockstep_validator_draft(NULL) == LOCKSTEP_SCHEMA_DRAFT_2020_12, "NULL draft");
}

static void TestOptions(void) {
  const char* tuple =
      "{\"items\": [{\"type\": \"integer\"}], \"additionalItems\": false,"
      " \"properties\": {\"when\": {\"format\": \"date\"}}}";
  const char* remote = "{\"properties\": {\"n\": {\"$ref\": \"http://example.test/int.json\"}}}";
  const char* uris[1] = {"http://example.test/int.json"};
  const char* texts[1] = {"{\"type\": \"integer\"}"};
  size_t lengths[1];
  lockstep_validator_options o;
  lockstep_validator* v;
  lockstep_validation* r = NULL;
  const char *ip, *sp, *msg;

  lockstep_validator_options_init(&o);
  CHECK(o.struct_size == sizeof o && o.default_draft == LOCKSTEP_SCHEMA_DRAFT_2020_12 &&
            o.format_assertion == 0 && o.max_errors == 100 && o.max_depth == 400 &&
            o.num_remotes == 0 && o.num_remote_dirs == 0,
        "defaults");
  o.default_draft = LOCKSTEP_SCHEMA_DRAFT_7;
  o.format_assertion = 1;
  v = Make(tuple, &o);
  if (v != NULL) {
    CHECK(lockstep_validator_draft(v) == LOCKSTEP_SCHEMA_DRAFT_7, "draft-07");
    CHECK(Verdict(v, "[1]") == 1 && Verdict(v, "[1, 2]") == 0, "draft-07 tuple");
    CHECK(Verdict(v, "{\"when\": \"2024-02-30\"}") == 0, "format asserted");
    lockstep_validator_free(v);
  }
  /* Draft-04: 1.0 is not an integer; boolean exclusiveMaximum. */
  lockstep_validator_options_init(&o);
  o.default_draft = LOCKSTEP_SCHEMA_DRAFT_4;
  v = Make("{\"type\": \"integer\", \"maximum\": 5, \"exclusiveMaximum\": true}", &o);
  if (v != NULL) {
    CHECK(lockstep_validator_draft(v) == LOCKSTEP_SCHEMA_DRAFT_4, "draft-04");
    CHECK(Verdict(v, "4") == 1 && Verdict(v, "5") == 0 && Verdict(v, "4.0") == 0, "draft-04");
    lockstep_validator_free(v);
  }
  v = Make("{\"format\": \"date\"}", NULL);
  if (v != NULL) {
    CHECK(Verdict(v, "\"2024-02-30\"") == 1, "format ignored by default");
    lockstep_validator_free(v);
  }

  lockstep_validator_options_init(&o);
  o.max_errors = 0;
  v = Make("{\"items\": {\"type\": \"string\"}}", &o);
  if (v != NULL && lockstep_validate(v, "[1, 2]", 6, &r) == LOCKSTEP_OK) {
    CHECK(lockstep_validation_is_valid(r) == 0 && lockstep_validation_num_errors(r) == 0,
          "max_errors 0: the verdict only");
    lockstep_validation_free(r);
  }
  lockstep_validator_free(v);

  lengths[0] = strlen(texts[0]);
  lockstep_validator_options_init(&o);
  o.remote_uris = uris;
  o.remote_texts = texts;
  o.remote_lengths = lengths;
  o.num_remotes = 1;
  v = Make(remote, &o);
  r = NULL;
  if (v != NULL && lockstep_validate(v, "{\"n\": 1.5}", 10, &r) == LOCKSTEP_OK) {
    CHECK(lockstep_validation_num_errors(r) == 1, "one error");
    CHECK(lockstep_validation_error(r, 0, &ip, &sp, &msg) == LOCKSTEP_OK &&
              strcmp(sp, "http://example.test/int.json#/type") == 0,
          "remote schema pointer %s", sp);
    lockstep_validation_free(r);
  }
  CHECK(v == NULL || Verdict(v, "{\"n\": 1}") == 1, "remote document in memory");
  lockstep_validator_free(v);
}

/* A directory of remote documents, as `lockstep validate --remote URI=DIR` reads one. */
static void TestRemoteDirectory(void) {
  char dir[64], sub[80], file[96];
  const char* base[1] = {"http://example.test/"};
  const char* dirs[1];
  const char* schema = "{\"$ref\": \"http://example.test/sub/int.json\"}";
  lockstep_validator_options o;
  lockstep_validator* v = NULL;
  FILE* f;
  snprintf(dir, sizeof dir, "/tmp/lockstep_capi_validator_%ld", (long)getpid());
  snprintf(sub, sizeof sub, "%s/sub", dir);
  snprintf(file, sizeof file, "%s/int.json", sub);
  CHECK(mkdir(dir, 0700) == 0 && mkdir(sub, 0700) == 0, "mkdir %s", sub);
  f = fopen(file, "w");
  CHECK(f != NULL, "fopen %s", file);
  if (f == NULL) return;
  fputs("{\"type\": \"integer\"}", f);
  fclose(f);
  dirs[0] = dir;
  lockstep_validator_options_init(&o);
  o.remote_dir_uris = base;
  o.remote_dirs = dirs;
  o.num_remote_dirs = 1;
  v = Make(schema, &o);
  remove(file);
  rmdir(sub);
  rmdir(dir);
  if (v != NULL) {
    CHECK(Verdict(v, "3") == 1 && Verdict(v, "\"3\"") == 0, "remote directory");
    lockstep_validator_free(v);
  }
  v = NULL;
  CHECK(lockstep_validator_create(schema, strlen(schema), &o, &v) == LOCKSTEP_IO_ERROR,
        "a missing directory: %s", lockstep_last_error());
  CHECK(v == NULL, "no validator");
}

/* One validator, four threads validating at once: the same verdicts and error counts as alone. */
typedef struct {
  const lockstep_validator* validator;
  int mismatches;
} Worker;

static const char* const kInstances[] = {"{\"name\": \"a\"}", "{\"name\": \"\"}", "{\"tags\": []}",
                                         "{\"name\": \"b\", \"tags\": [1, 2]}",
                                         "{\"name\": \"c\", \"tags\": [\"x\", \"y\"]}"};
static const int kValid[] = {1, 0, 0, 0, 1};
static const size_t kErrors[] = {0, 1, 1, 2, 0};

static void* Work(void* arg) {
  Worker* w = (Worker*)arg;
  int round;
  size_t i;
  for (round = 0; round < 200; ++round) {
    for (i = 0; i < sizeof kValid / sizeof kValid[0]; ++i) {
      lockstep_validation* r = NULL;
      if (lockstep_validate(w->validator, kInstances[i], strlen(kInstances[i]), &r) !=
              LOCKSTEP_OK ||
          lockstep_validation_is_valid(r) != kValid[i] ||
          lockstep_validation_num_errors(r) != kErrors[i]) {
        ++w->mismatches;
      }
      lockstep_validation_free(r);
    }
  }
  return NULL;
}

static void TestThreads(void) {
  lockstep_validator* v = Make(kSchema, NULL);
  pthread_t threads[4];
  Worker workers[4];
  int t;
  if (v == NULL) return;
  for (t = 0; t < 4; ++t) {
    workers[t].validator = v;
    workers[t].mismatches = 0;
    CHECK(pthread_create(&threads[t], NULL, Work, &workers[t]) == 0, "pthread_create");
  }
  for (t = 0; t < 4; ++t) {
    pthread_join(threads[t], NULL);
    CHECK(workers[t].mismatches == 0, "thread %d: %d mismatches", t, workers[t].mismatches);
  }
  lockstep_validator_free(v);
}

int main(void) {
  TestVerdictsAndErrors();
  TestFailuresOfTheCalls();
  TestOptions();
  TestRemoteDirectory();
  TestThreads();
  if (capi_check_failures != 0) {
    fprintf(stderr, "capi_validator_test: %d checks failed\n", capi_check_failures);
    return 1;
  }
  printf("capi_validator_test: all checks passed\n");
  return 0;
}
