# SPDX-License-Identifier: MIT
# ftjit_aarch64_discovery_tests: site discovery on the arm64 fixtures, and the arm64 backend's verdict on each sled.
#
# include() from tests/CMakeLists.txt (host build: x86-64 code parsing
# arm64 files) and from tests/arm64/CMakeLists.txt (cross build: the same
# tests as arm64 code under qemu-aarch64). Labelled aarch64 in both, so
# `ctest -L aarch64` runs them. Needs ftjit_backends with the arm64
# backend, and aarch64-linux-gnu-g++ for the fixtures.
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/../fixtures/aarch64_fixtures.cmake)

if(NOT FTJIT_AARCH64_FIXTURES OR NOT TARGET ftjit_backend_arm64)
  message(STATUS "ftjit: no arm64 fixtures or no arm64 backend: arm64 discovery tests skipped")
  return()
endif()
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(ftjit_aarch64_discovery_tests
  ${CMAKE_CURRENT_LIST_DIR}/aarch64_discovery_test.cpp)
target_include_directories(ftjit_aarch64_discovery_tests PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(ftjit_aarch64_discovery_tests PRIVATE ftjit_backends GTest::gtest_main)
target_compile_definitions(ftjit_aarch64_discovery_tests PRIVATE
  FTJIT_FIXTURE_DIR="${FTJIT_FIXTURE_DIR}"
  FTJIT_AARCH64_FIXTURE_HAVE_CLANG=$<BOOL:${FTJIT_AARCH64_FIXTURE_HAVE_CLANG}>)
# How the tests start the arm64 fixture executables: under qemu-aarch64
# from an x86-64 host, directly on an arm64 one. A test that is itself
# emulated cannot start another guest (no binfmt_misc, TOOLCHAIN.md Q7),
# so the cross build leaves that test out.
if(NOT CMAKE_CROSSCOMPILING)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    target_compile_definitions(ftjit_aarch64_discovery_tests PRIVATE FTJIT_AARCH64_RUNNER="env")
  else()
    find_program(FTJIT_HOST_QEMU_AARCH64 qemu-aarch64)
    if(FTJIT_HOST_QEMU_AARCH64)
      target_compile_definitions(ftjit_aarch64_discovery_tests PRIVATE
        FTJIT_AARCH64_RUNNER="${FTJIT_HOST_QEMU_AARCH64} -L /usr/aarch64-linux-gnu")
    endif()
  endif()
endif()
add_dependencies(ftjit_aarch64_discovery_tests ftjit_aarch64_fixtures)
if(NOT CMAKE_CROSSCOMPILING)
  gtest_discover_tests(ftjit_aarch64_discovery_tests DISCOVERY_TIMEOUT 60
                       PROPERTIES LABELS aarch64)
  return()
endif()
# Under qemu each process start costs a few tenths of a second, and the
# cases are about a hundred (every property on every fixture): one ctest
# test per TEST/TEST_P of the source, running it on every fixture at once,
# keeps the arm64 leg short and its log still names what passed. A filter
# that selects nothing fails rather than passing empty.
set(_a64_disc_src ${CMAKE_CURRENT_LIST_DIR}/aarch64_discovery_test.cpp)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_a64_disc_src})
file(STRINGS ${_a64_disc_src} _a64_disc_decls REGEX "^TEST(_P)?\\(")
foreach(decl IN LISTS _a64_disc_decls)
  string(REGEX REPLACE "^TEST(_P)?\\(([A-Za-z0-9_]+), *([A-Za-z0-9_]+)\\).*" "\\2.\\3"
         case "${decl}")
  if(decl MATCHES "^TEST_P")
    set(filter "*/${case}/*")
  else()
    set(filter "${case}")
  endif()
  add_test(NAME ${case} COMMAND ftjit_aarch64_discovery_tests --gtest_filter=${filter})
  set_tests_properties(${case} PROPERTIES LABELS aarch64
    FAIL_REGULAR_EXPRESSION "\\[==========\\] 0 tests from")
  if(NOT decl MATCHES "^TEST_P")
    # A single case that skips (GTEST_SKIP, with its reason) shows as skipped.
    set_tests_properties(${case} PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  endif()
endforeach()
