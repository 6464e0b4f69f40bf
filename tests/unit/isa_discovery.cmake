# SPDX-License-Identifier: MIT
# ftjit_isa_discovery_tests(): site discovery on a cross leg's ISA fixtures
# (tests/fixtures/isa_fixtures.cmake), and its backend's verdict on each
# sled: isa_discovery_test.cpp with the ISA's part, <prefix>_discovery_test.cpp.
#
# Called from tests/unit/<prefix>_discovery.cmake, which the host build
# (tests/CMakeLists.txt: x86-64 code parsing the ISA's files) and the
# ISA's cross build (tests/common/isa_tests.cmake: the same tests as its
# code under qemu-user) include. Labelled <prefix> in both, so
# `ctest -L <prefix>` runs them.
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/../fixtures/isa_fixtures.cmake)

# ftjit_isa_discovery_tests(PREFIX <aarch64> SUITE <Aarch64> TAG <a64> TRIPLE <triple>
#   NEEDS <backend target> LIBS <libraries>... [DEFINITIONS <definitions>...]
#   FIXTURE_LAYOUTS "<name>|<options>|<extras>"...)
function(ftjit_isa_discovery_tests)
  cmake_parse_arguments(D "" "PREFIX;SUITE;TAG;TRIPLE;NEEDS" "LIBS;DEFINITIONS;FIXTURE_LAYOUTS" ${ARGN})
  ftjit_isa_fixtures(${D_TAG} TRIPLE ${D_TRIPLE} LAYOUTS ${D_FIXTURE_LAYOUTS})
  if(NOT FTJIT_ISA_FIXTURES OR NOT TARGET ${D_NEEDS})
    message(STATUS "ftjit: no ${D_TAG} fixtures or no ${D_NEEDS}: ${D_PREFIX} discovery tests skipped")
    return()
  endif()
  if(NOT TARGET GTest::gtest_main)
    find_package(GTest REQUIRED)
  endif()
  include(GoogleTest)

  set(target ftjit_${D_PREFIX}_discovery_tests)
  set(src ${PROJECT_SOURCE_DIR}/tests/unit)
  add_executable(${target} ${src}/isa_discovery_test.cpp ${src}/${D_PREFIX}_discovery_test.cpp)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${target} PRIVATE ${D_LIBS} GTest::gtest_main)
  target_compile_definitions(${target} PRIVATE ${D_DEFINITIONS}
    FTJIT_TEST_SUITE=${D_SUITE}
    FTJIT_FIXTURE_DIR="${FTJIT_FIXTURE_DIR}"
    FTJIT_ISA_FIXTURE_HAVE_CLANG=$<BOOL:${FTJIT_ISA_FIXTURE_HAVE_CLANG}>)
  # How the tests start the fixture executables: under qemu-user from an
  # x86-64 host, directly on a machine of the ISA. A test that is itself
  # emulated cannot start another guest (no binfmt_misc, TOOLCHAIN.md Q7),
  # so the cross build leaves that test out.
  string(REGEX REPLACE "-.*" "" cpu ${D_TRIPLE})
  if(NOT CMAKE_CROSSCOMPILING)
    if(CMAKE_SYSTEM_PROCESSOR STREQUAL cpu)
      target_compile_definitions(${target} PRIVATE FTJIT_ISA_FIXTURE_RUNNER="env")
    else()
      find_program(FTJIT_HOST_QEMU_${cpu} qemu-${cpu})
      if(FTJIT_HOST_QEMU_${cpu})
        target_compile_definitions(${target} PRIVATE
          FTJIT_ISA_FIXTURE_RUNNER="${FTJIT_HOST_QEMU_${cpu}} -L /usr/${D_TRIPLE}")
      endif()
    endif()
  endif()
  add_dependencies(${target} ftjit_${D_TAG}_fixtures)
  if(NOT CMAKE_CROSSCOMPILING)
    ftjit_pure_tests(${target} LABELS ${D_PREFIX})
    return()
  endif()
  # Under qemu each process start costs a few tenths of a second, and the
  # cases are about a hundred (every property on every fixture): one ctest
  # test per TEST/TEST_P of the sources, running it on every fixture at
  # once, keeps the leg short and its log still names what passed. A
  # filter that selects nothing fails rather than passing empty.
  foreach(file IN ITEMS isa_discovery_test.cpp ${D_PREFIX}_discovery_test.cpp)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${src}/${file})
    file(STRINGS ${src}/${file} decls REGEX "^TEST(_P)?\\(")
    foreach(decl IN LISTS decls)
      string(REGEX REPLACE "^TEST(_P)?\\(([A-Za-z0-9_]+), *([A-Za-z0-9_]+)\\).*" "\\2.\\3"
             case "${decl}")
      # ISA_SUITE(DiscoveryTest) is <SUITE>DiscoveryTest.
      string(REGEX REPLACE "^TEST(_P)?\\(ISA_SUITE\\(([A-Za-z0-9_]+)\\), *([A-Za-z0-9_]+)\\).*"
             "${D_SUITE}\\2.\\3" case "${case}")
      if(decl MATCHES "^TEST_P")
        set(filter "*/${case}/*")
      else()
        set(filter "${case}")
      endif()
      add_test(NAME ${case} COMMAND ${target} --gtest_filter=${filter})
      set_tests_properties(${case} PROPERTIES LABELS ${D_PREFIX}
        FAIL_REGULAR_EXPRESSION "\\[==========\\] 0 tests from")
      if(NOT decl MATCHES "^TEST_P")
        # A single case that skips (GTEST_SKIP, with its reason) shows as skipped.
        set_tests_properties(${case} PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
      endif()
    endforeach()
  endforeach()
endfunction()
