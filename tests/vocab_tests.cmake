# tests owned by the vocab work
lockstep_add_test(vocabulary_test automata/vocabulary_test.cc LIBS nlohmann_json::nlohmann_json)
lockstep_add_test(bpe_encoder_test automata/bpe_encoder_test.cc
  LIBS nlohmann_json::nlohmann_json)
