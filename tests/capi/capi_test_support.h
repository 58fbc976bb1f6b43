/* A deterministic logits source written in C and the step-by-step generation loop over the C
 * ABI, shared by the C program (capi_generation_test.c) and the C++ test (capi_test.cc), so both
 * drive lockstep_c.h with the same code and the same numbers. */
#ifndef LOCKSTEP_TESTS_CAPI_CAPI_TEST_SUPPORT_H_
#define LOCKSTEP_TESTS_CAPI_CAPI_TEST_SUPPORT_H_

#include <stddef.h>
#include <stdint.h>

#include "lockstep/lockstep_c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The model: logits[i] = 4 * u(seed, context length, last id, i) + bias[i], u uniform in [0, 1)
 * from a splitmix64 hash, so the same context always gives the same row. bias favours tokens
 * that close a JSON value ('"', ',', '}') and disfavours whitespace runs, so that generations
 * under the tool-call schema end with EOS in a few dozen tokens. */
typedef struct capi_test_model {
  int32_t width;
  uint64_t seed;
  float* bias; /* width entries */
} capi_test_model;

/* The sampler settings and seeds every test uses. */
#define CAPI_TEST_MODEL_SEED 11u
#define CAPI_TEST_SAMPLER_SEED 42u
#define CAPI_TEST_TEMPERATURE 0.8f
#define CAPI_TEST_TOP_P 0.95f
#define CAPI_TEST_MAX_TOKENS 400

/* Reads every token's bytes through the ABI. Returns LOCKSTEP_OK or the failing status. */
lockstep_status capi_test_model_init(capi_test_model* model, const lockstep_vocab* vocab,
                                     uint64_t seed);
void capi_test_model_free(capi_test_model* model);
/* A lockstep_logits_fn; `user` is a capi_test_model*. */
void capi_test_logits(void* user, const int32_t* context, size_t n, float* out, int32_t width);

/* The test's sampler config: CAPI_TEST_TEMPERATURE, CAPI_TEST_TOP_P, CAPI_TEST_SAMPLER_SEED. */
void capi_test_sampler_config(lockstep_sampler_config* config);

/* Constrained generation step by step through the ABI, the loop of lockstep_generate with
 * jump_forward 0 and no prompt: fill the mask, call the model on the ids so far, sample with
 * (sequence 0, step), accept; stop at EOS (not written) or after max_tokens ids. out_ids holds
 * max_tokens ids; *out_count receives the number written, *out_eos 1 if EOS ended it. */
lockstep_status capi_test_generate_steps(const lockstep_grammar* grammar, lockstep_sampler* sampler,
                                         capi_test_model* model, int32_t max_tokens,
                                         int32_t* out_ids, size_t* out_count, int* out_eos);

#ifdef __cplusplus
}
#endif

#endif /* LOCKSTEP_TESTS_CAPI_CAPI_TEST_SUPPORT_H_ */
