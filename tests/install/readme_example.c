#include <stdio.h>
#include <string.h>

#include "lockstep/lockstep_c.h"

/* The model: `width` logits for the `n` ids of `context`. */
static void my_model(void* user, const int32_t* context, size_t n, float* out, int32_t width) {
  (void)user, (void)context, (void)n;
  for (int32_t i = 0; i < width; ++i) out[i] = 0.0f;  /* your model's logits here */
}

int main(void) {
  const char* schema = "{\"type\": \"object\", \"properties\": {\"ok\": {\"type\": \"boolean\"}},"
                       " \"required\": [\"ok\"], \"additionalProperties\": false}";
  lockstep_vocab* vocab; lockstep_grammar* grammar; lockstep_sampler* sampler;
  lockstep_compile_options options; lockstep_compile_options_init(&options);
  options.schema_whitespace_compact = 1;
  lockstep_sampler_config config; lockstep_sampler_config_init(&config);
  config.temperature = 0.7f; config.seed = 42;
  int32_t ids[256]; size_t n = 256;
  if (lockstep_vocab_load("llama3", &vocab) != LOCKSTEP_OK ||
      lockstep_compile_schema(vocab, schema, strlen(schema), &options, &grammar) != LOCKSTEP_OK ||
      lockstep_sampler_create(&config, 0, &sampler) != LOCKSTEP_OK ||
      lockstep_generate(grammar, sampler, my_model, NULL, 256, ids, &n, NULL, NULL) != LOCKSTEP_OK)
    return fprintf(stderr, "%s\n", lockstep_last_error()), 1;
  for (size_t i = 0; i < n; ++i) {
    const char* bytes; size_t len;
    lockstep_vocab_token_bytes(vocab, ids[i], &bytes, &len);
    fwrite(bytes, 1, len, stdout);
  }
  putchar('\n');
  lockstep_sampler_free(sampler); lockstep_grammar_free(grammar); lockstep_vocab_free(vocab);
  return 0;
}
