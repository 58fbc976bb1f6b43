# `cmake --install`: headers, the static libraries, the `lockstep` command, the bundled data
# (share/lockstep: tokenizers, corpus, grammars, presets, tool schemas, and the n-gram model
# trained at build time), the Python module when it is built, a CMake package (find_package(lockstep)
# gives lockstep::lockstep, the C++ API, and lockstep::capi, the C ABI) and a pkg-config file
# (lockstep.pc). Everything is relocatable: the package, the .pc file and the data lookup
# (DataDirectory() in include/lockstep/vocabulary.h) are relative to where it was installed.
include(CMakePackageConfigHelpers)

set(LOCKSTEP_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/lockstep" CACHE STRING
  "Where the CMake package (lockstepConfig.cmake) is installed, relative to the prefix")
set(LOCKSTEP_PYTHON_INSTALL_DIR "lib/python3/dist-packages" CACHE STRING
  "Where the Python module is installed, relative to the prefix (on Debian's sys.path for /usr)")

set_target_properties(lockstep_grammar PROPERTIES EXPORT_NAME grammar)
set_target_properties(lockstep_automata PROPERTIES EXPORT_NAME automata)
set_target_properties(lockstep_decoder PROPERTIES EXPORT_NAME decoder)
set_target_properties(lockstep_capi PROPERTIES EXPORT_NAME capi)
install(TARGETS lockstep_grammar lockstep_automata lockstep_decoder lockstep_capi lockstep
  EXPORT lockstepTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/lockstep DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

install(EXPORT lockstepTargets NAMESPACE lockstep:: DESTINATION ${LOCKSTEP_CMAKE_INSTALL_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/lockstepConfig.cmake.in
  ${PROJECT_BINARY_DIR}/lockstepConfig.cmake
  INSTALL_DESTINATION ${LOCKSTEP_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_DATADIR)
# 0.x: a minor version may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/lockstepConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/lockstepConfig.cmake
  ${PROJECT_BINARY_DIR}/lockstepConfigVersion.cmake DESTINATION ${LOCKSTEP_CMAKE_INSTALL_DIR})

# lockstep.pc: paths relative to the .pc file itself (${pcfiledir}), so a moved prefix works.
set(_lockstep_pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${_lockstep_pc_dir}")
  set(LOCKSTEP_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _lockstep_pc_up "/prefix/${_lockstep_pc_dir}" "/prefix")
  set(LOCKSTEP_PC_PREFIX "\${pcfiledir}/${_lockstep_pc_up}")
endif()
foreach(_dir INCLUDEDIR LIBDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_dir}}")
    set(LOCKSTEP_PC_${_dir} "${CMAKE_INSTALL_${_dir}}")
  else()
    set(LOCKSTEP_PC_${_dir} "\${prefix}/${CMAKE_INSTALL_${_dir}}")
  endif()
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/lockstep.pc.in ${PROJECT_BINARY_DIR}/lockstep.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/lockstep.pc DESTINATION ${_lockstep_pc_dir})

# Run-time data, found by DataDirectory() beside the installed binaries (PREFIX/share/lockstep).
install(DIRECTORY ${LOCKSTEP_SOURCE_DATA_DIR}/ DESTINATION ${CMAKE_INSTALL_DATADIR}/lockstep)

if(TARGET lockstep_cli)
  install(TARGETS lockstep_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  # 400 KB; `lockstep generate` looks in DataDirectory()/models first.
  install(FILES ${LOCKSTEP_MODELS} DESTINATION ${CMAKE_INSTALL_DATADIR}/lockstep/models)
endif()
if(TARGET lockstep_py)
  install(TARGETS lockstep_py LIBRARY DESTINATION ${LOCKSTEP_PYTHON_INSTALL_DIR})
endif()
