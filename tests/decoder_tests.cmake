# tests owned by the decoder work: mask kernels and bitmask, sampler, logits sources and n-gram.
lockstep_add_test(mask_kernels_test decoder/mask_kernels_test.cc)
lockstep_add_test(sampler_test decoder/sampler_test.cc)
lockstep_add_test(sampler_golden_test decoder/sampler_golden_test.cc)
lockstep_add_test(ngram_model_test decoder/ngram_model_test.cc)
# Needs the real vocabulary code (Vocabulary::Load("llama3")) and the shipped corpus.
lockstep_add_test(ngram_corpus_test decoder/ngram_corpus_test.cc LIBS nlohmann_json::nlohmann_json)
# Logits sources, combinators and decoding algorithms (generate loop, beam, speculative, classify).
lockstep_add_test(logits_source_test decoder/logits_source_test.cc)
lockstep_add_test(beam_search_test decoder/beam_search_test.cc)
lockstep_add_test(speculative_test decoder/speculative_test.cc)
lockstep_add_test(classify_test decoder/classify_test.cc)
lockstep_add_test(sampler_pruning_test decoder/sampler_pruning_test.cc)
