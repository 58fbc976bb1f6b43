# tests/capi: the C ABI (include/lockstep/lockstep.h). A plain C11 program that generates under a
# JSON Schema through the ABI step by step and with lockstep_generate, and a gtest that checks
# the ABI against the C++ API (same tokens for the same seed), the generated text against the
# schema, every argument check, and batch fills. Both share the C logits source and C loop in
# capi/capi_test_support.c.
add_library(lockstep_capi_test_support STATIC capi/capi_test_support.c)
target_link_libraries(lockstep_capi_test_support PUBLIC lockstep::capi)
target_include_directories(lockstep_capi_test_support PUBLIC ${PROJECT_SOURCE_DIR}/tests)
set_target_properties(lockstep_capi_test_support PROPERTIES
  C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(lockstep_capi_test_support PRIVATE -Wpedantic)

add_executable(capi_generation_test capi/capi_generation_test.c)
set_target_properties(capi_generation_test PROPERTIES
  C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(capi_generation_test PRIVATE -Wpedantic)
target_link_libraries(capi_generation_test PRIVATE lockstep_capi_test_support)
target_compile_definitions(capi_generation_test PRIVATE
  LOCKSTEP_SOURCE_DATA_DIR="${LOCKSTEP_SOURCE_DATA_DIR}")
add_test(NAME capi_generation_test COMMAND capi_generation_test)
set_tests_properties(capi_generation_test PROPERTIES
  ENVIRONMENT "LOCKSTEP_DATA_DIR=${LOCKSTEP_SOURCE_DATA_DIR}" TIMEOUT 600)

# The compile budgets from C: a 1 ms deadline, a cancel token set from another (POSIX) thread.
find_package(Threads REQUIRED)
add_executable(capi_cancel_test capi/capi_cancel_test.c)
set_target_properties(capi_cancel_test PROPERTIES
  C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
target_compile_options(capi_cancel_test PRIVATE -Wpedantic)
target_compile_definitions(capi_cancel_test PRIVATE _POSIX_C_SOURCE=200809L)
target_link_libraries(capi_cancel_test PRIVATE lockstep::capi Threads::Threads)
add_test(NAME capi_cancel_test COMMAND capi_cancel_test)
set_tests_properties(capi_cancel_test PROPERTIES
  ENVIRONMENT "LOCKSTEP_DATA_DIR=${LOCKSTEP_SOURCE_DATA_DIR}" TIMEOUT 600)

lockstep_add_test(capi_test capi/capi_test.cc PREFIX "capi_test."
  LIBS lockstep_capi_test_support nlohmann_json::nlohmann_json)
