# tests/python: the `lockstep` Python module under Debian's python3 and python3-numpy (unittest),
# checked against a small C++ generator (same tokens for the same seeds) and the C++ validator.
# Registered only when the module is built (never in sanitizer builds; python/CMakeLists.txt).
if(LOCKSTEP_PYTHON_MODULE)
  add_executable(py_reference_gen python/py_reference_gen.cc)
  target_link_libraries(py_reference_gen PRIVATE lockstep::lockstep lockstep_capi_test_support)
  target_include_directories(py_reference_gen PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  # -B: no __pycache__ written into the source tree.
  add_test(NAME python_test
    COMMAND ${Python3_EXECUTABLE} -B -m unittest -v test_lockstep
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/python)
  set(_lockstep_python_test_env
    "PYTHONPATH=$<TARGET_FILE_DIR:lockstep_py>"
    "LOCKSTEP_DATA_DIR=${LOCKSTEP_SOURCE_DATA_DIR}"
    "LOCKSTEP_PY_REFERENCE_GEN=$<TARGET_FILE:py_reference_gen>"
    "LOCKSTEP_SCHEMA_DIR=${PROJECT_SOURCE_DIR}/schemas")
  set_tests_properties(python_test PROPERTIES TIMEOUT 900
    ENVIRONMENT "${_lockstep_python_test_env}")
  # The module is loaded by the test, not linked by anything: make `ctest` users build it.
  add_dependencies(py_reference_gen lockstep_py)
endif()
