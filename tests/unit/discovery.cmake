# SPDX-License-Identifier: MIT
# ftjit_discovery_tests: ElfImage, site discovery and module scanning, against the fixture binaries.
#
# include() from tests/CMakeLists.txt after enable_testing(). Needs the
# runtime library target `ftjit` (override with FTJIT_DISCOVERY_TEST_LIBS).
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/../fixtures/fixtures.cmake)

if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

if(NOT DEFINED FTJIT_DISCOVERY_TEST_LIBS)
  set(FTJIT_DISCOVERY_TEST_LIBS ftjit)
endif()

add_executable(ftjit_discovery_tests
  ${CMAKE_CURRENT_LIST_DIR}/elf_image_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/elf_section_probe_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dwarf_producers_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/register_evidence_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/site_discovery_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sled_recovery_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sort_by_address_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/bulk_memory_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/bulk_prefault_test.cpp
)
target_link_libraries(ftjit_discovery_tests PRIVATE
  ${FTJIT_DISCOVERY_TEST_LIBS} GTest::gtest_main ${CMAKE_DL_LIBS})
target_compile_definitions(ftjit_discovery_tests PRIVATE
  FTJIT_FIXTURE_DIR="${FTJIT_FIXTURE_DIR}"
  FTJIT_FIXTURE_HAVE_CLANG=$<BOOL:${FTJIT_FIXTURE_HAVE_CLANG}>)
add_dependencies(ftjit_discovery_tests ftjit_fixtures)
ftjit_pure_tests(ftjit_discovery_tests)
# Its files compiled in batches (cmake/compile_time.cmake).
ftjit_unity_build(ftjit_discovery_tests)
