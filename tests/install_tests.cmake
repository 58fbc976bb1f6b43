# install_test: `cmake --install` into build/install-test/prefix, then tests/install/ (a project
# outside the tree: find_package(lockstep), and plain cc with pkg-config) builds the README's C++
# and C programs against it; they, the README's Python program and the installed `lockstep` run
# with LOCKSTEP_DATA_DIR unset and must use the installed data. Not in sanitizer or fuzzer builds.
if(NOT LOCKSTEP_SANITIZE AND NOT LOCKSTEP_FUZZ AND NOT LOCKSTEP_TSAN)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  set(_lockstep_install_test_args
    --source-dir ${PROJECT_SOURCE_DIR} --build-dir ${PROJECT_BINARY_DIR} --config $<CONFIG>
    --cmake ${CMAKE_COMMAND} --c-compiler ${CMAKE_C_COMPILER} --cxx-compiler ${CMAKE_CXX_COMPILER}
    --pkg-config ${PKG_CONFIG_EXECUTABLE}
    --bindir ${CMAKE_INSTALL_BINDIR} --libdir ${CMAKE_INSTALL_LIBDIR}
    --includedir ${CMAKE_INSTALL_INCLUDEDIR} --datadir ${CMAKE_INSTALL_DATADIR}
    --cmake-package-dir ${LOCKSTEP_CMAKE_INSTALL_DIR})
  if(TARGET lockstep_cli)
    list(APPEND _lockstep_install_test_args --cli)
  endif()
  if(TARGET lockstep_py)
    list(APPEND _lockstep_install_test_args
      --python ${Python3_EXECUTABLE} --python-dir ${LOCKSTEP_PYTHON_INSTALL_DIR})
  endif()
  add_test(NAME install_test
    COMMAND ${Python3_EXECUTABLE} -B ${CMAKE_CURRENT_SOURCE_DIR}/install/run_install_test.py
            ${_lockstep_install_test_args})
  set_tests_properties(install_test PROPERTIES TIMEOUT 600)
endif()
