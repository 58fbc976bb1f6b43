# Vocabulary loaders and the canonical BPE encoder (paths relative to automata/).
set(LOCKSTEP_VOCAB_SOURCES
  unicode.cc
  pretokenizer.cc
  bpe.cc
  gzip.cc
  vocabulary.cc
  tokenizer_json.cc
  tiktoken.cc
  sentencepiece_vocab.cc)
# The ICU fallback splitter uses icu::RegexPattern, which lives in icu-i18n (the layer links
# icu-uc only); linked once lockstep_automata exists, at the end of this directory.
pkg_check_modules(ICU_I18N REQUIRED IMPORTED_TARGET icu-i18n)
cmake_language(DEFER CALL target_link_libraries lockstep_automata PRIVATE PkgConfig::ICU_I18N)
