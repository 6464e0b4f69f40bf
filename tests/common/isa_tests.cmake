# SPDX-License-Identifier: MIT
# The tests every cross leg runs, registered once for any ISA: a folder
# tests/<isa>/ lists its sled layouts with ftjit_isa_layout() and calls
# ftjit_isa_tests(), then adds what is its own (assembly helpers, tests of
# its backend, ...). Registered, each under the ISA's test prefix and label:
#   engine      tests/common/engine_test.cpp, every strategy on every layout
#   inline      tests/common/inline_*_test.cpp on each layout's leaf
#   stress      tests/e2e/stress_test.cpp, its two files in the first two layouts
#   exit hooks  tests/exit_hooks/ in the first two layouts
#   discovery   tests/unit/<prefix>_discovery.cmake, on the ISA's fixtures
#   ftjit run   tests/guest/guest_run_test.py: programs in each layout run by
#               the host's CLI (FTJIT_HOST_CLI) under qemu-user
# The first layout must have the ops literal (call-ops' slot), the second
# is the other one the stress and exit-hook programs are built in.
include_guard(GLOBAL)

# ftjit_isa_layout(<name> PREFIX <symbol prefix> ENTRY <n[,m]> [ALIGN <bytes>]
#                  [PAD <bytes>] [LITERAL] [NOT_RUN] [OPTIONS <compile options>...])
#   name     test-name part (AllStrategies/...Strategy.X/<strategy>_<name>)
#   PREFIX   the traced functions' names: <PREFIX>_sum8, <PREFIX>_leaf, ...
#   ENTRY    -fpatchable-function-entry=ENTRY
#   ALIGN    -falign-functions the layout needs for its sites
#   PAD      bytes between the symbol and the site start (a landing pad)
#   LITERAL  the 8 bytes before the site are an ops literal (call-ops works)
#   NOT_RUN  no `ftjit run` program in this layout (one with its ENTRY is)
#   OPTIONS  what else the layout is compiled with (-march=..., -mbranch-protection=...)
macro(ftjit_isa_layout name)
  cmake_parse_arguments(_ftjit_layout "LITERAL;NOT_RUN" "PREFIX;ENTRY;ALIGN;PAD" "OPTIONS" ${ARGN})
  if(NOT _ftjit_layout_PREFIX OR NOT _ftjit_layout_ENTRY)
    message(FATAL_ERROR "ftjit_isa_layout(${name}): PREFIX and ENTRY are required")
  endif()
  list(APPEND FTJIT_ISA_LAYOUTS ${name})
  set(FTJIT_ISA_LAYOUT_${name}_PREFIX ${_ftjit_layout_PREFIX})
  set(FTJIT_ISA_LAYOUT_${name}_ENTRY ${_ftjit_layout_ENTRY})
  set(FTJIT_ISA_LAYOUT_${name}_PAD 0)
  if(_ftjit_layout_PAD)
    set(FTJIT_ISA_LAYOUT_${name}_PAD ${_ftjit_layout_PAD})
  endif()
  set(FTJIT_ISA_LAYOUT_${name}_LITERAL ${_ftjit_layout_LITERAL})
  set(FTJIT_ISA_LAYOUT_${name}_RUN TRUE)
  if(_ftjit_layout_NOT_RUN)
    set(FTJIT_ISA_LAYOUT_${name}_RUN FALSE)
  endif()
  # What a program in this layout is compiled with.
  set(FTJIT_ISA_LAYOUT_${name}_FLAGS -fpatchable-function-entry=${_ftjit_layout_ENTRY})
  if(_ftjit_layout_ALIGN)
    list(APPEND FTJIT_ISA_LAYOUT_${name}_FLAGS -falign-functions=${_ftjit_layout_ALIGN})
  endif()
  list(APPEND FTJIT_ISA_LAYOUT_${name}_FLAGS ${_ftjit_layout_OPTIONS})
endmacro()

# ftjit_isa_tests(ISA <runtime/arch name> PREFIX <test prefix> SUITE <gtest suite prefix>
#                 [ENGINE_SOURCES <files>...] [ENVIRONMENT <VAR=value>...])
#   ISA             arm64, riscv64: guest_run_test.py's name for it
#   PREFIX          aarch64, riscv64: test names start with PREFIX. and carry label PREFIX
#   SUITE           Aarch64, Riscv64: the engine tests' suites are <SUITE>Engine, <SUITE>Strategy, ...
#   ENGINE_SOURCES  the ISA's part of the engine tests: its direct trampoline
#                   (test_direct_trampoline, test_direct_calls) and tests of its own
#   ENVIRONMENT     what every test running the engine needs (riscv64: its code generator)
# Sets FTJIT_ISA_GUEST_RUN (guest_run_test.py's command up to its case) in
# the caller, for the ISA's own `ftjit run` tests.
macro(ftjit_isa_tests)
  cmake_parse_arguments(_ftjit_isa "" "ISA;PREFIX;SUITE" "ENGINE_SOURCES;ENVIRONMENT" ${ARGN})
  _ftjit_isa_tests(${_ftjit_isa_ISA} ${_ftjit_isa_PREFIX} ${_ftjit_isa_SUITE}
                   "${_ftjit_isa_ENGINE_SOURCES}" "${_ftjit_isa_ENVIRONMENT}")
endmacro()

function(_ftjit_isa_tests isa prefix suite engine_sources environment)
  list(LENGTH FTJIT_ISA_LAYOUTS n)
  if(n LESS 2)
    message(FATAL_ERROR "ftjit_isa_tests(${isa}): list two layouts or more (ftjit_isa_layout)")
  endif()
  list(GET FTJIT_ISA_LAYOUTS 0 first)
  list(GET FTJIT_ISA_LAYOUTS 1 second)
  if(NOT FTJIT_ISA_LAYOUT_${first}_LITERAL)
    message(FATAL_ERROR "ftjit_isa_tests(${isa}): the first layout (${first}) must have the ops literal")
  endif()
  set(labels ${prefix})
  set(src ${PROJECT_SOURCE_DIR}/tests)

  # The traced functions, once per layout, in a shared library of their
  # own (a harness may make its page writable while no code on it runs);
  # traced_layouts.h tells the tests which there are.
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/traced_include)
  set(xmacro "")
  set(objects "")
  foreach(layout IN LISTS FTJIT_ISA_LAYOUTS)
    set(p ${FTJIT_ISA_LAYOUT_${layout}_PREFIX})
    set(literal 0)
    if(FTJIT_ISA_LAYOUT_${layout}_LITERAL)
      set(literal 1)
    endif()
    string(APPEND xmacro " \\\n  X(${layout}, ${p}, ${FTJIT_ISA_LAYOUT_${layout}_PAD}, ${literal})")
    add_library(ftjit_${prefix}_traced_${layout} OBJECT ${src}/common/traced.c)
    target_include_directories(ftjit_${prefix}_traced_${layout} PRIVATE ${gen})
    target_compile_definitions(ftjit_${prefix}_traced_${layout} PRIVATE TRACED_PREFIX=${p})
    target_compile_options(ftjit_${prefix}_traced_${layout} PRIVATE
      -O2 -fno-inline -fno-ipa-icf -falign-functions=8 ${FTJIT_ISA_LAYOUT_${layout}_FLAGS})
    list(APPEND objects $<TARGET_OBJECTS:ftjit_${prefix}_traced_${layout}>)
  endforeach()
  file(CONFIGURE OUTPUT ${gen}/traced_layouts.h CONTENT
"/* Generated by tests/common/isa_tests.cmake from tests/${isa}/CMakeLists.txt. */
#pragma once
/* X(name, symbol prefix, pad bytes, has an ops literal) */
#define FTJIT_TRACED_LAYOUTS(X)${xmacro}
/* What makes the ops literal (the refusal of call-ops elsewhere names it). */
#define FTJIT_TRACED_LITERAL_FLAGS \"-fpatchable-function-entry=${FTJIT_ISA_LAYOUT_${first}_ENTRY}\"
" @ONLY)
  add_library(ftjit_${prefix}_traced SHARED ${objects})
  target_include_directories(ftjit_${prefix}_traced PUBLIC ${PROJECT_SOURCE_DIR} ${gen})

  # The engine, run as this ISA's code: ftjit's library patching this process.
  add_executable(ftjit_${prefix}_engine_tests ${src}/common/engine_test.cpp ${engine_sources})
  target_compile_definitions(ftjit_${prefix}_engine_tests PRIVATE FTJIT_TEST_SUITE=${suite})
  target_link_libraries(ftjit_${prefix}_engine_tests PRIVATE ftjit ftjit_${prefix}_traced GTest::gtest_main)
  # Names are looked up with dlsym for diagnostics.
  target_link_options(ftjit_${prefix}_engine_tests PRIVATE -rdynamic)
  gtest_discover_tests(ftjit_${prefix}_engine_tests DISCOVERY_TIMEOUT 60 DISCOVERY_MODE PRE_TEST
    TEST_PREFIX ${prefix}. PROPERTIES LABELS ${labels} TIMEOUT 300 ENVIRONMENT "${environment}")

  # Inline work: the test every ISA's leg runs, on the leaf of each layout.
  add_executable(ftjit_${prefix}_inline_tests ${src}/common/inline_count_test.cpp
    ${src}/common/inline_latency_test.cpp ${src}/common/traced_inline_targets.cpp)
  target_link_libraries(ftjit_${prefix}_inline_tests PRIVATE ftjit ftjit_${prefix}_traced GTest::gtest_main)
  gtest_discover_tests(ftjit_${prefix}_inline_tests DISCOVERY_TIMEOUT 60 DISCOVERY_MODE PRE_TEST
    TEST_PREFIX ${prefix}. PROPERTIES LABELS ${labels} TIMEOUT 300 ENVIRONMENT "${environment}")

  # The x86-64 stress test's thousand functions and test, built in this
  # ISA's first two layouts: four threads calling them while four ops
  # (generated, call-ops, list, auto; two with exit hooks) are attached,
  # detached and re-filtered.
  add_library(ftjit_${prefix}_e2e_traced OBJECT ${src}/e2e/traced_slot.c ${src}/e2e/traced_noslot.c)
  list(JOIN FTJIT_ISA_LAYOUT_${first}_FLAGS ";" slot_flags)
  list(JOIN FTJIT_ISA_LAYOUT_${second}_FLAGS ";" noslot_flags)
  set_source_files_properties(${src}/e2e/traced_slot.c PROPERTIES COMPILE_OPTIONS "${slot_flags};-O2")
  set_source_files_properties(${src}/e2e/traced_noslot.c PROPERTIES COMPILE_OPTIONS "${noslot_flags};-O2")
  add_executable(ftjit_${prefix}_stress_tests ${src}/e2e/stress_test.cpp
    $<TARGET_OBJECTS:ftjit_${prefix}_e2e_traced>)
  target_include_directories(ftjit_${prefix}_stress_tests PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(ftjit_${prefix}_stress_tests PRIVATE ftjit GTest::gtest_main)
  # Emulated: fewer changes than the native 3000, same checks.
  add_test(NAME ${prefix}.Stress.AttachDetachRefilterWhileFourThreadsCall
    COMMAND ${CMAKE_CROSSCOMPILING_EMULATOR} $<TARGET_FILE:ftjit_${prefix}_stress_tests>)
  set_tests_properties(${prefix}.Stress.AttachDetachRefilterWhileFourThreadsCall PROPERTIES
    LABELS ${labels} TIMEOUT 600 ENVIRONMENT "FTJIT_STRESS_ITERATIONS=600;${environment}")

  # The exit-hook programs (exceptions, longjmp, recursion, threads,
  # signals, fork), built in the second layout (the call-ops variants in
  # the first) and run under the emulator.
  set(FTJIT_EH_LAYOUT_FLAGS ${FTJIT_ISA_LAYOUT_${second}_FLAGS})
  set(FTJIT_EH_SLOT_LAYOUT_FLAGS ${FTJIT_ISA_LAYOUT_${first}_FLAGS})
  set(FTJIT_EH_TEST_PREFIX ${prefix}.exit_hooks)
  set(FTJIT_EH_LABELS ${labels})
  set(FTJIT_EH_RUNNER ${CMAKE_CROSSCOMPILING_EMULATOR})
  set(FTJIT_EH_ENVIRONMENT "${environment}")
  # Emulated, 100000 hooked frames took 72 s per strategy: 20000 is deep
  # enough (far beyond any shadow stack a shallow design would have).
  set(FTJIT_EH_RECURSION_DEPTH 20000u)
  # And the sanitized builds' loop counts (workload.h, EH_SCALE): the
  # same hazards, fewer rounds of them.
  set(FTJIT_EH_EMULATED ON)
  add_subdirectory(${src}/exit_hooks ${CMAKE_CURRENT_BINARY_DIR}/exit_hooks)

  # Discovery on the ISA's fixture files, as its code (the same tests run
  # on the host build): core/ parses, the backend classifies.
  include(${src}/unit/${prefix}_discovery.cmake)

  # `ftjit run` of this ISA's programs by the host's CLI (FTJIT_HOST_CLI:
  # the x86-64 build's ftjit): the agent and plugins of this build
  # preloaded under qemu-user, trampolines generated by the host. The
  # target is the agent tests' program, once per layout.
  set(FTJIT_HOST_CLI "" CACHE FILEPATH "The host build's ftjit, to run this ISA's programs under qemu (tests)")
  if(NOT FTJIT_HOST_CLI)
    message(STATUS "tests/${isa}: FTJIT_HOST_CLI not set: the `ftjit run` tests of ${isa} programs are not registered")
    return()
  endif()
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  set(guest_run ${Python3_EXECUTABLE} ${src}/guest/guest_run_test.py ${FTJIT_HOST_CLI}
      $<TARGET_FILE:ftjit_agent> ${FTJIT_GUEST_SYSROOT} ${isa})
  set(FTJIT_ISA_GUEST_RUN ${guest_run} PARENT_SCOPE)
  set(programs "")
  foreach(layout IN LISTS FTJIT_ISA_LAYOUTS)
    if(NOT FTJIT_ISA_LAYOUT_${layout}_RUN)
      continue()
    endif()
    string(REPLACE "," "_" entry ${FTJIT_ISA_LAYOUT_${layout}_ENTRY})
    ftjit_isa_guest_program(ftjit_${prefix}_guest_${entry} ${FTJIT_ISA_LAYOUT_${layout}_FLAGS})
    list(APPEND programs ftjit_${prefix}_guest_${entry})
    foreach(strategy IN ITEMS auto list call-ops generated)
      set(case counts)
      if(strategy STREQUAL "call-ops" AND NOT FTJIT_ISA_LAYOUT_${layout}_LITERAL)
        set(case refused)
      endif()
      add_test(NAME ${prefix}.run.${case}.${entry}.${strategy}
        COMMAND ${guest_run} ${case} $<TARGET_FILE:ftjit_${prefix}_guest_${entry}> ${strategy})
      set_tests_properties(${prefix}.run.${case}.${entry}.${strategy} PROPERTIES LABELS ${labels} TIMEOUT 180)
    endforeach()
  endforeach()
  list(GET programs 0 first_program)
  list(GET programs 1 second_program)
  add_test(NAME ${prefix}.run.plugins COMMAND ${guest_run} plugins $<TARGET_FILE:${first_program}>)
  add_test(NAME ${prefix}.run.bad_input COMMAND ${guest_run} bad-input $<TARGET_FILE:${first_program}>)
  add_test(NAME ${prefix}.run.put_back COMMAND ${guest_run} put-back $<TARGET_FILE:${second_program}>)
  set_tests_properties(${prefix}.run.plugins ${prefix}.run.bad_input ${prefix}.run.put_back PROPERTIES
    LABELS ${labels} TIMEOUT 300)
  # Record control (--depth, --sample, --min-duration, triggers) on this
  # ISA's build of its fixture, the first layout's sites; live control
  # with 300 changes (1000 natively: 51 s under qemu-riscv64 beside the
  # other tests).
  include(${src}/record_control/record_control.cmake)
  list(GET FTJIT_ISA_LAYOUTS 0 first_layout)
  string(TOUPPER ${isa} isa_upper)
  ftjit_record_control_test(${prefix} ${labels} ${FTJIT_HOST_CLI} "${FTJIT_ISA_LAYOUT_${first_layout}_FLAGS}"
    FTJIT_AGENT_${isa_upper}=$<TARGET_FILE:ftjit_agent> FTJIT_LIVE_CHANGES=300)
  add_dependencies(ftjit_${prefix}_record_fixture ftjit_agent)
  add_dependencies(ftjit_${prefix}_live_target ftjit_agent)
  # The agent and plugins must be built before these tests run.
  add_dependencies(${first_program} ftjit_agent)
  get_property(plugins GLOBAL PROPERTY FTJIT_BUILTIN_PLUGINS)
  add_dependencies(${first_program} ${plugins})
endfunction()

# ftjit_isa_guest_program(<target> <compile options>...): the agent tests'
# program built with these options, for `ftjit run` tests.
function(ftjit_isa_guest_program target)
  add_executable(${target} ${PROJECT_SOURCE_DIR}/tests/agent/agent_target.c)
  target_link_libraries(${target} PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
  target_compile_options(${target} PRIVATE -O2 ${ARGN})
endfunction()
