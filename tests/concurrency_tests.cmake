# tests/decoder/concurrency_test.cc: what hosts do on many threads at once (batch fills of many
# grammars, compiling while filling, precomputing while filling, forks and rollbacks), checked
# against single-threaded fills. Its tests are named "concurrency.*" so that the ThreadSanitizer
# step of scripts/run-tests.sh builds this target alone and runs them with `ctest -R`.
lockstep_add_test(concurrency_test decoder/concurrency_test.cc PREFIX "concurrency."
  LIBS nlohmann_json::nlohmann_json)
