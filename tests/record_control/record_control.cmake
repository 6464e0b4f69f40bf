# SPDX-License-Identifier: MIT
# Record control (`ftjit run --depth --sample --min-duration --start-at
# --stop-at --start-after --stop-after`): what trace, count, flame and
# latency record of a fixture that logs every call it makes, against the
# oracle record_test.py keeps from that log. The cross legs run the same
# test on their ISA's build of the fixture (tests/common/isa_tests.cmake).
#
# ftjit_record_control_test(<tag> <labels> <cli> <tree flags> [ENV=VALUE...]):
# the test record_control.exact (tag "host") or <tag>.record_control.exact.
include_guard(GLOBAL)
function(ftjit_record_control_test tag labels cli tree_flags)
  set(target ftjit_${tag}_record_fixture)
  set(name record_control.exact)
  if(NOT tag STREQUAL "host")
    set(name ${tag}.${name})
  endif()
  add_library(${target}_tree OBJECT ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/record_tree.c)
  # Their own flags, no sanitizer: the agent is preloaded into it.
  set_target_properties(${target}_tree PROPERTIES COMPILE_OPTIONS "-O1;${tree_flags}")
  add_executable(${target} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/record_fixture.c $<TARGET_OBJECTS:${target}_tree>)
  set_target_properties(${target} PROPERTIES COMPILE_OPTIONS "-O1" LINK_OPTIONS "" LINK_LIBRARIES "")
  target_link_libraries(${target} PRIVATE Threads::Threads)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  add_test(NAME ${name}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/record_test.py
      ${cli} $<TARGET_FILE:${target}> ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 300
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:halt_on_error=1;UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")

  # Live control under load (live_test.py): attached with `ftjit attach`
  # on the host, started by `ftjit run` under qemu-user.
  set(live ftjit_${tag}_live_target)
  add_library(${live}_traced OBJECT ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/live_traced.c)
  set_target_properties(${live}_traced PROPERTIES COMPILE_OPTIONS "-O1;${tree_flags}")
  add_executable(${live} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/live_target.c $<TARGET_OBJECTS:${live}_traced>)
  set_target_properties(${live} PROPERTIES COMPILE_OPTIONS "-O1" LINK_OPTIONS "" LINK_LIBRARIES "")
  target_link_libraries(${live} PRIVATE Threads::Threads)
  string(REPLACE "record_control.exact" "record_control.live" live_name ${name})
  set(mode attach)
  if(CMAKE_CROSSCOMPILING)
    set(mode run)
  endif()
  add_test(NAME ${live_name}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/live_test.py
      ${cli} $<TARGET_FILE:${live}> ${mode} ${ARGN})
  set_tests_properties(${live_name} PROPERTIES LABELS "${labels}" TIMEOUT 600
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:halt_on_error=1;UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
endfunction()
