# cmake -DBUILD_DIR=... -P check_layering.cmake: builds the layering probes (tests/layering).
# An upward include must fail with the compiler's "not found" for that header; an include from
# the layer itself or below must compile.
function(build_probe probe out_rc out_text)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target layering_probe_${probe}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${out_rc} ${rc} PARENT_SCOPE)
  set(${out_text} "${out}${err}" PARENT_SCOPE)
endfunction()

foreach(up grammar_includes_automata:automata/cfg/cfg_grammar.h
           automata_includes_decoder:decoder/sampling/mask_kernels.h)
  string(REPLACE ":" ";" up "${up}")
  list(GET up 0 probe)
  list(GET up 1 header)
  build_probe(${probe} rc text)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${probe}: the upward include of ${header} compiled")
  endif()
  string(REPLACE "." "[.]" pattern "${header}")
  if(NOT text MATCHES "${pattern}.*(No such file|not found)")
    message(FATAL_ERROR "${probe}: failed, but not for want of ${header}:\n${text}")
  endif()
  message(STATUS "${probe}: refused (${header} not found), as it must be")
endforeach()
foreach(probe grammar_includes_grammar automata_includes_grammar)
  build_probe(${probe} rc text)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${probe}: an include within the layering did not compile:\n${text}")
  endif()
  message(STATUS "${probe}: compiles")
endforeach()
