# SPDX-License-Identifier: MIT
# ftjit_ifunc_tests: IFUNC symbols traced at the implementation the process
# uses. Live (ifunc_live_test.cpp, through the embedding API; called from
# ftjit_relocation_live_tests, so in the arm64 leg too) and, on the host
# where the decoders are, the file side (ifunc_file_test.cpp): IRELATIVE
# words, .eh_frame ranges, a function planned from its FDE alone.
#
# The target library is built by the C compiler alone, without sleds, like
# live.cmake's; a stripped copy has no .symtab, so its IFUNCs'
# implementations (static functions) are known by their FDEs only.
include_guard(GLOBAL)
function(ftjit_ifunc_tests labels)
  set(_dir ${CMAKE_BINARY_DIR}/tests/relocation)
  set(_lib ${_dir}/libifunclive.so)
  set(_stripped ${_dir}/libifunclive.stripped.so)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    set(_pads -mbranch-protection=standard)
  elseif(CMAKE_SYSTEM_PROCESSOR STREQUAL "riscv64")
    # No landing pads; unwind tables, which riscv64's GCC leaves out by
    # default: the stripped copy's implementations are known by FDEs only.
    set(_pads -march=rv64gc -fasynchronous-unwind-tables)
  else()
    set(_pads -fcf-protection=full)
  endif()
  set(_strip ${CMAKE_STRIP})
  if(NOT _strip)
    set(_strip strip)
  endif()
  # -fno-builtin, no sibling calls: the library's calls of strlen and
  # memcpy stay calls, their return address in the library.
  add_custom_command(OUTPUT ${_lib} ${_stripped}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_dir}
    COMMAND ${CMAKE_C_COMPILER} -O1 -fno-omit-frame-pointer ${_pads} -fno-builtin -fno-optimize-sibling-calls
            -shared -fPIC -o ${_lib} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ifunc_live_target.c
    COMMAND ${_strip} --strip-all -o ${_stripped} ${_lib}
    DEPENDS ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ifunc_live_target.c
    COMMENT "IFUNC live target")
  add_custom_target(ftjit_ifunc_live_target DEPENDS ${_lib} ${_stripped})

  add_executable(ftjit_ifunc_live_tests ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ifunc_live_test.cpp)
  target_link_libraries(ftjit_ifunc_live_tests PRIVATE ftjit GTest::gtest_main ${CMAKE_DL_LIBS})
  target_compile_definitions(ftjit_ifunc_live_tests PRIVATE FTJIT_IFUNC_LIVE_TARGET="${_stripped}")
  add_dependencies(ftjit_ifunc_live_tests ftjit_ifunc_live_target)
  gtest_discover_tests(ftjit_ifunc_live_tests DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${labels}" TIMEOUT 300 ENVIRONMENT "${ARGN}")

  if(CMAKE_CROSSCOMPILING OR NOT TARGET ftjit_backend_x86_64_decoder)
    return()
  endif()
  add_executable(ftjit_ifunc_file_tests ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ifunc_file_test.cpp)
  target_link_libraries(ftjit_ifunc_file_tests PRIVATE ftjit_backends ftjit_core GTest::gtest_main)
  target_compile_definitions(ftjit_ifunc_file_tests PRIVATE FTJIT_IFUNC_TARGET="${_lib}"
    FTJIT_IFUNC_TARGET_STRIPPED="${_stripped}")
  add_dependencies(ftjit_ifunc_file_tests ftjit_ifunc_live_target)
  # `ftjit list -p PID --relocate` of a forked copy of the test.
  if(TARGET ftjit-cli)
    target_compile_definitions(ftjit_ifunc_file_tests PRIVATE FTJIT_CLI="$<TARGET_FILE:ftjit-cli>")
    add_dependencies(ftjit_ifunc_file_tests ftjit-cli)
  endif()
  gtest_discover_tests(ftjit_ifunc_file_tests DISCOVERY_TIMEOUT 30 PROPERTIES LABELS unit)
endfunction()
