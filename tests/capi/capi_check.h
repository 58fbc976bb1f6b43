/* CHECK(cond, format, ...) for the plain C programs that test the C ABI: a failed check prints
 * its place, its condition and the formatted detail to stderr, counts itself in
 * capi_check_failures (one counter per program) and lets the program go on, so that one run
 * reports every failed check; main exits non-zero when the counter is not 0. */
#ifndef LOCKSTEP_TESTS_CAPI_CAPI_CHECK_H_
#define LOCKSTEP_TESTS_CAPI_CAPI_CHECK_H_

#include <stdio.h>

static int capi_check_failures = 0;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      ++capi_check_failures;                                                   \
    }                                                                          \
  } while (0)

#endif /* LOCKSTEP_TESTS_CAPI_CAPI_CHECK_H_ */
