# SPDX-License-Identifier: MIT
# ftjit_relocation_live_tests: relocated entries in a running process,
# through the embedding API (relocated_live_test.cpp), on the host and, as
# arm64 code under qemu-aarch64, in the arm64 leg, whose engine asks the
# host's ftjit (FTJIT_GENERATOR) for each entry's proof and copy.
#
# The target library is built by the C compiler alone, as a distribution
# builds one (frame pointers, landing pads: -fcf-protection on x86-64,
# -mbranch-protection=standard on arm64, no sleds): no sanitizer or
# project flag reaches it.
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/ifunc.cmake)
#   ftjit_relocation_live_tests(LABELS [CYCLES n] [VAR=value...])
# CYCLES: the attach/detach cycles of CountsExactAcrossAttachDetachCycles
# (1000 by default; FTJIT_RELOC_CYCLES at run time still overrides), a
# compile definition: gtest_discover_tests keeps only the first item of a
# list given as ENVIRONMENT, so the environment holds one variable.
function(ftjit_relocation_live_tests labels)
  cmake_parse_arguments(R "" "CYCLES" "" ${ARGN})
  set(_env ${R_UNPARSED_ARGUMENTS})
  list(LENGTH _env _n_env)
  if(_n_env GREATER 1)
    message(FATAL_ERROR "ftjit_relocation_live_tests: one environment variable at most (gtest_discover_tests)")
  endif()
  if(NOT R_CYCLES)
    set(R_CYCLES 1000)
  endif()
  set(_dir ${CMAKE_BINARY_DIR}/tests/relocation)
  set(_lib ${_dir}/libreloclive.so)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    set(_pads -mbranch-protection=standard)
  elseif(CMAKE_SYSTEM_PROCESSOR STREQUAL "riscv64")
    set(_pads -march=rv64gc)  # riscv64 has no landing pads (Zicfilp is not in Debian 12's toolchain)
  else()
    set(_pads -fcf-protection=full)
  endif()
  add_custom_command(OUTPUT ${_lib}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_dir}
    COMMAND ${CMAKE_C_COMPILER} -O1 -fno-omit-frame-pointer -fexceptions ${_pads} -shared -fPIC
            -o ${_lib} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/reloc_live_target.c
    DEPENDS ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/reloc_live_target.c
    COMMENT "relocation live target")
  add_custom_target(ftjit_relocation_live_target DEPENDS ${_lib})
  add_executable(ftjit_relocation_live_tests ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/relocated_live_test.cpp)
  target_link_libraries(ftjit_relocation_live_tests PRIVATE ftjit GTest::gtest_main ${CMAKE_DL_LIBS})
  target_compile_definitions(ftjit_relocation_live_tests PRIVATE FTJIT_RELOC_LIVE_TARGET="${_lib}"
                             FTJIT_RELOC_DEFAULT_CYCLES=${R_CYCLES})
  add_dependencies(ftjit_relocation_live_tests ftjit_relocation_live_target)
  gtest_discover_tests(ftjit_relocation_live_tests DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${labels}" TIMEOUT 600 ENVIRONMENT "${_env}")
  # arm64: the same on BTI-guarded pages (bti_live_test.cpp), a library
  # marked BTI whatever the toolchain's own objects are (-z force-bti).
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    set(_bti ${_dir}/libreloc_bti.so)
    add_custom_command(OUTPUT ${_bti}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${_dir}
      COMMAND ${CMAKE_C_COMPILER} -O1 -mbranch-protection=standard -shared -fPIC -nostartfiles -Wl,-z,force-bti
              -o ${_bti} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/bti_live_target.c
      DEPENDS ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/bti_live_target.c
      COMMENT "relocation BTI target")
    add_custom_target(ftjit_relocation_bti_target DEPENDS ${_bti})
    add_executable(ftjit_relocation_bti_tests ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/bti_live_test.cpp)
    target_link_libraries(ftjit_relocation_bti_tests PRIVATE ftjit GTest::gtest_main ${CMAKE_DL_LIBS})
    target_compile_definitions(ftjit_relocation_bti_tests PRIVATE FTJIT_RELOC_BTI_TARGET="${_bti}")
    add_dependencies(ftjit_relocation_bti_tests ftjit_relocation_bti_target)
    gtest_discover_tests(ftjit_relocation_bti_tests DISCOVERY_TIMEOUT 60
      PROPERTIES LABELS "${labels}" TIMEOUT 300 ENVIRONMENT "${_env}")
  endif()
  # IFUNCs, at their implementations (ifunc.cmake): in the same legs.
  ftjit_ifunc_tests("${labels}" ${_env})
endfunction()

# Debian's libc relocated under a multi-threaded workload, through the
# command line (`ftjit run --relocate`), its counts against the kernel's
# uprobes where they work, else against the program's known calls
# (libc_workload.py). Built like a user's program (a sanitized build's
# workload carries its sanitizer, which the agent needs first; the oracle
# runs the same binary). A cross leg names its test with its prefix and
# runs the host's `ftjit` on its ISA's program:
#   ftjit_relocation_workload_test([PREFIX aarch64.] [LABELS aarch64] [CLI path])
function(ftjit_relocation_workload_test)
  cmake_parse_arguments(W "" "PREFIX;LABELS;CLI" "" ${ARGN})
  if(NOT W_LABELS)
    set(W_LABELS e2e)
  endif()
  if(NOT W_CLI)
    set(W_CLI $<TARGET_FILE:ftjit-cli>)
  endif()
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  find_package(Threads REQUIRED)
  add_executable(ftjit_libc_workload ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/libc_workload.c)
  target_compile_options(ftjit_libc_workload PRIVATE -O2)
  target_link_libraries(ftjit_libc_workload PRIVATE Threads::Threads)
  add_test(NAME ${W_PREFIX}relocation.libc_workload
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/libc_workload.py
            ${W_CLI} $<TARGET_FILE:ftjit_libc_workload>)
  set_tests_properties(${W_PREFIX}relocation.libc_workload PROPERTIES LABELS ${W_LABELS} TIMEOUT 300
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:halt_on_error=1;UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
endfunction()
