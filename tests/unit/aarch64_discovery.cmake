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
gtest_discover_tests(ftjit_aarch64_discovery_tests DISCOVERY_TIMEOUT 60
                     PROPERTIES LABELS aarch64)
