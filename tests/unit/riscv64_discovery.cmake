# SPDX-License-Identifier: MIT
# ftjit_riscv64_discovery_tests: site discovery on the riscv64 fixtures, and the riscv64 backend's verdict on each sled.
#
# include() from tests/CMakeLists.txt (host build: x86-64 code parsing
# riscv64 files) and from tests/riscv64/CMakeLists.txt (cross build: the
# same tests as riscv64 code under qemu-riscv64). Labelled riscv64 in both,
# so `ctest -L riscv64` runs them. Needs the riscv64 sites
# (ftjit_backend_riscv64_sites), and riscv64-linux-gnu-g++ for the fixtures.
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/../fixtures/riscv64_fixtures.cmake)

if(NOT FTJIT_RISCV64_FIXTURES OR NOT TARGET ftjit_backend_riscv64_sites)
  message(STATUS "ftjit: no riscv64 fixtures or no riscv64 backend: riscv64 discovery tests skipped")
  return()
endif()
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(ftjit_riscv64_discovery_tests
  ${CMAKE_CURRENT_LIST_DIR}/riscv64_discovery_test.cpp)
target_include_directories(ftjit_riscv64_discovery_tests PRIVATE ${PROJECT_SOURCE_DIR})
# The backend as an agent builds it (make_backend with an emitter of its
# own) everywhere; where LLVM MC is, the in-process one too (backend_for),
# so that the engine of either kind is asked. classify_entry needs no
# emitter: the riscv64 cross build, which has none, runs these tests
# without a generator (no FTJIT_GENERATOR in their environment).
target_link_libraries(ftjit_riscv64_discovery_tests PRIVATE ftjit_backend_sites GTest::gtest_main)
if(TARGET ftjit_backend_riscv64)
  target_link_libraries(ftjit_riscv64_discovery_tests PRIVATE ftjit_backends)
  target_compile_definitions(ftjit_riscv64_discovery_tests PRIVATE FTJIT_RISCV64_HAVE_EMITTER=1)
endif()
target_compile_definitions(ftjit_riscv64_discovery_tests PRIVATE
  FTJIT_FIXTURE_DIR="${FTJIT_FIXTURE_DIR}"
  FTJIT_RISCV64_FIXTURE_HAVE_CLANG=$<BOOL:${FTJIT_RISCV64_FIXTURE_HAVE_CLANG}>)
# How the tests start the riscv64 fixture executables: under qemu-riscv64
# from an x86-64 host, directly on a riscv64 one. A test that is itself
# emulated cannot start another guest (no binfmt_misc, TOOLCHAIN.md Q7),
# so the cross build leaves that test out.
if(NOT CMAKE_CROSSCOMPILING)
  if(CMAKE_SYSTEM_PROCESSOR STREQUAL "riscv64")
    target_compile_definitions(ftjit_riscv64_discovery_tests PRIVATE FTJIT_RISCV64_RUNNER="env")
  else()
    find_program(FTJIT_HOST_QEMU_RISCV64 qemu-riscv64)
    if(FTJIT_HOST_QEMU_RISCV64)
      target_compile_definitions(ftjit_riscv64_discovery_tests PRIVATE
        FTJIT_RISCV64_RUNNER="${FTJIT_HOST_QEMU_RISCV64} -L /usr/riscv64-linux-gnu")
    endif()
  endif()
endif()
add_dependencies(ftjit_riscv64_discovery_tests ftjit_riscv64_fixtures)
if(NOT CMAKE_CROSSCOMPILING)
  gtest_discover_tests(ftjit_riscv64_discovery_tests DISCOVERY_TIMEOUT 60
                       PROPERTIES LABELS riscv64)
  return()
endif()
# Under qemu each process start costs a few tenths of a second, and the
# cases are about sixty (every property on every fixture): one ctest test
# per TEST/TEST_P of the source, running it on every fixture at once,
# keeps the riscv64 leg short and its log still names what passed. A
# filter that selects nothing fails rather than passing empty.
set(_rv64_disc_src ${CMAKE_CURRENT_LIST_DIR}/riscv64_discovery_test.cpp)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_rv64_disc_src})
file(STRINGS ${_rv64_disc_src} _rv64_disc_decls REGEX "^TEST(_P)?\\(")
foreach(decl IN LISTS _rv64_disc_decls)
  string(REGEX REPLACE "^TEST(_P)?\\(([A-Za-z0-9_]+), *([A-Za-z0-9_]+)\\).*" "\\2.\\3"
         case "${decl}")
  if(decl MATCHES "^TEST_P")
    set(filter "*/${case}/*")
  else()
    set(filter "${case}")
  endif()
  add_test(NAME ${case} COMMAND ftjit_riscv64_discovery_tests --gtest_filter=${filter})
  set_tests_properties(${case} PROPERTIES LABELS riscv64
    FAIL_REGULAR_EXPRESSION "\\[==========\\] 0 tests from")
  if(NOT decl MATCHES "^TEST_P")
    # A single case that skips (GTEST_SKIP, with its reason) shows as skipped.
    set_tests_properties(${case} PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  endif()
endforeach()
