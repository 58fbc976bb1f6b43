/* The shared C side of the C ABI tests: the seeded logits source and the step-by-step loop
 * (capi_test_support.h). */
#include "capi/capi_test_support.h"

#include <stdlib.h>
#include <string.h>

static uint64_t Mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static float TokenBias(const char* bytes, size_t len) {
  float bias = 0.0f;
  size_t i;
  for (i = 0; i < len; ++i) {
    char c = bytes[i];
    if (c == '\n' || c == '\t' || c == '\r' || (c == ' ' && len > 1)) return -6.0f;
    if (c == '"' || c == ',' || c == '}') bias = 8.0f;
  }
  return bias;
}

lockstep_status capi_test_model_init(capi_test_model* model, const lockstep_vocab* vocab,
                                     uint64_t seed) {
  int32_t i;
  int32_t size = lockstep_vocab_size(vocab);
  model->width = lockstep_vocab_logits_width(vocab);
  model->seed = seed;
  model->bias = (float*)calloc(model->width > 0 ? (size_t)model->width : 1, sizeof(float));
  if (model->bias == NULL) return LOCKSTEP_RESOURCE_LIMIT;
  for (i = 0; i < size; ++i) {
    const char* bytes = NULL;
    size_t len = 0;
    lockstep_status st = lockstep_vocab_token_bytes(vocab, i, &bytes, &len);
    if (st != LOCKSTEP_OK) {
      capi_test_model_free(model);
      return st;
    }
    model->bias[i] = TokenBias(bytes, len);
  }
  return LOCKSTEP_OK;
}

void capi_test_model_free(capi_test_model* model) {
  free(model->bias);
  model->bias = NULL;
}

void capi_test_logits(void* user, const int32_t* context, size_t n, float* out, int32_t width) {
  const capi_test_model* model = (const capi_test_model*)user;
  uint64_t last = n > 0 ? (uint64_t)(uint32_t)context[n - 1] : 0xFFFFFFFFull;
  uint64_t key = Mix64(model->seed ^ Mix64(((uint64_t)n << 32) ^ last));
  int32_t i;
  for (i = 0; i < width; ++i) {
    uint64_t h = Mix64(key + (uint64_t)i);
    float u = (float)(h >> 40) * (1.0f / 16777216.0f);
    out[i] = 4.0f * u + (i < model->width ? model->bias[i] : 0.0f);
  }
}

void capi_test_sampler_config(lockstep_sampler_config* config) {
  lockstep_sampler_config_init(config);
  config->temperature = CAPI_TEST_TEMPERATURE;
  config->top_p = CAPI_TEST_TOP_P;
  config->seed = CAPI_TEST_SAMPLER_SEED;
}

lockstep_status capi_test_generate_steps(const lockstep_grammar* grammar, lockstep_sampler* sampler,
                                         capi_test_model* model, int32_t max_tokens,
                                         int32_t* out_ids, size_t* out_count, int* out_eos) {
  size_t words = lockstep_grammar_bitmask_words(grammar);
  int32_t width = lockstep_grammar_logits_width(grammar);
  uint32_t* mask = (uint32_t*)malloc(words * sizeof(uint32_t));
  float* logits = (float*)malloc((size_t)width * sizeof(float));
  lockstep_matcher* matcher = NULL;
  lockstep_status st = LOCKSTEP_OK;
  size_t n = 0;
  uint64_t step = 0;
  *out_count = 0;
  *out_eos = 0;
  if (mask == NULL || logits == NULL) {
    st = LOCKSTEP_RESOURCE_LIMIT;
    goto done;
  }
  st = lockstep_matcher_create(grammar, &matcher);
  if (st != LOCKSTEP_OK) goto done;
  while (!lockstep_matcher_is_terminated(matcher)) {
    int32_t token = -1;
    if (n >= (size_t)max_tokens) break;
    st = lockstep_matcher_fill_bitmask(matcher, mask, words);
    if (st != LOCKSTEP_OK) goto done;
    capi_test_logits(model, out_ids, n, logits, width);
    st = lockstep_sampler_sample(sampler, logits, (size_t)width, mask, words, out_ids, n, 0, step,
                                 &token);
    if (st != LOCKSTEP_OK) goto done;
    st = lockstep_matcher_accept_token(matcher, token);
    if (st != LOCKSTEP_OK) goto done;
    ++step;
    if (lockstep_matcher_is_terminated(matcher)) {
      *out_eos = 1;
      break;
    }
    out_ids[n++] = token;
  }
  *out_count = n;
done:
  lockstep_matcher_free(matcher);
  free(logits);
  free(mask);
  return st;
}
