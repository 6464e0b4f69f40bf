# SPDX-License-Identifier: MIT
# ftjit_dwarf_signatures_tests: core/dwarf_signatures.h on fixtures built
# -O2 -g by each compiler whose DWARF it reads: GCC and clang for this
# machine (C and C++, DWARF 5, and GCC's DWARF 4 with type units), GCC for
# aarch64 and riscv64. The stripped copies and their separate debug files
# are made by the test at run time, with objcopy and strip.
#
# include() from tests/CMakeLists.txt; needs the target ftjit_dwarf.
include_guard(GLOBAL)

if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

set(FTJIT_SIG_DIR ${CMAKE_BINARY_DIR}/tests/dwarf_signatures)
set(_sig_src ${CMAKE_CURRENT_LIST_DIR}/dwarf_signatures)
file(MAKE_DIRECTORY ${FTJIT_SIG_DIR})
set(_sig_outputs "")

# Each fixture comes from one named compiler, not the project's.
if(CMAKE_C_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(FTJIT_SIG_GCC ${CMAKE_C_COMPILER})
  set(FTJIT_SIG_GXX ${CMAKE_CXX_COMPILER})
else()
  find_program(FTJIT_SIG_GCC NAMES gcc REQUIRED)
  find_program(FTJIT_SIG_GXX NAMES g++ REQUIRED)
endif()
find_program(FTJIT_SIG_CLANG NAMES clang-16)
find_program(FTJIT_SIG_CLANGXX NAMES clang++-16)
find_program(FTJIT_SIG_AARCH64_GCC NAMES aarch64-linux-gnu-gcc)
find_program(FTJIT_SIG_RISCV64_GCC NAMES riscv64-linux-gnu-gcc)
find_program(FTJIT_SIG_OBJCOPY NAMES objcopy REQUIRED)
find_program(FTJIT_SIG_STRIP NAMES strip REQUIRED)

# ftjit_sig_fixture(<output> <driver> <flags and sources...>)
function(ftjit_sig_fixture output driver)
  add_custom_command(
    OUTPUT ${FTJIT_SIG_DIR}/${output}
    COMMAND ${driver} ${ARGN} -o ${FTJIT_SIG_DIR}/${output}
    DEPENDS ${_sig_src}/sig_c.c ${_sig_src}/sig_cpp.cpp ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
    COMMENT "Building DWARF fixture ${output}"
    VERBATIM)
  set(_sig_outputs ${_sig_outputs} ${FTJIT_SIG_DIR}/${output} PARENT_SCOPE)
endfunction()

# -Wno-psabi: GCC notes how struct-passing ABIs changed years ago.
set(_sig_lib -O2 -g -fPIC -shared -Wno-psabi)
ftjit_sig_fixture(libsig_gcc.so ${FTJIT_SIG_GCC} ${_sig_lib} ${_sig_src}/sig_c.c)
# No build-id: a .gnu_debuglink file is then matched by its CRC.
ftjit_sig_fixture(libsig_gcc_noid.so ${FTJIT_SIG_GCC} ${_sig_lib} -Wl,--build-id=none ${_sig_src}/sig_c.c)
ftjit_sig_fixture(sig_gcc_exe ${FTJIT_SIG_GCC} -O2 -g -no-pie -Wno-psabi -DSIG_WITH_MAIN ${_sig_src}/sig_c.c)
ftjit_sig_fixture(libsigpp_gcc.so ${FTJIT_SIG_GXX} ${_sig_lib} ${_sig_src}/sig_cpp.cpp)
ftjit_sig_fixture(libsigpp_gcc_types.so ${FTJIT_SIG_GXX} -O2 -gdwarf-4 -fdebug-types-section -fPIC -shared
                  ${_sig_src}/sig_cpp.cpp)
set(_sig_have_clang OFF)
if(FTJIT_SIG_CLANG AND FTJIT_SIG_CLANGXX)
  set(_sig_have_clang ON)
  ftjit_sig_fixture(libsig_clang.so ${FTJIT_SIG_CLANG} ${_sig_lib} ${_sig_src}/sig_c.c)
  ftjit_sig_fixture(libsigpp_clang.so ${FTJIT_SIG_CLANGXX} ${_sig_lib} ${_sig_src}/sig_cpp.cpp)
endif()
if(FTJIT_SIG_AARCH64_GCC)
  ftjit_sig_fixture(libsig_aarch64.so ${FTJIT_SIG_AARCH64_GCC} ${_sig_lib} ${_sig_src}/sig_c.c)
endif()
if(FTJIT_SIG_RISCV64_GCC)
  ftjit_sig_fixture(libsig_riscv64.so ${FTJIT_SIG_RISCV64_GCC} ${_sig_lib} ${_sig_src}/sig_c.c)
endif()
add_custom_target(ftjit_dwarf_signature_fixtures DEPENDS ${_sig_outputs})

add_executable(ftjit_dwarf_signatures_tests ${CMAKE_CURRENT_LIST_DIR}/dwarf_signatures_test.cpp)
target_link_libraries(ftjit_dwarf_signatures_tests PRIVATE ftjit_dwarf GTest::gtest_main)
target_compile_definitions(ftjit_dwarf_signatures_tests PRIVATE
  FTJIT_SIG_DIR="${FTJIT_SIG_DIR}"
  FTJIT_SIG_OBJCOPY="${FTJIT_SIG_OBJCOPY}"
  FTJIT_SIG_STRIP="${FTJIT_SIG_STRIP}"
  FTJIT_SIG_HAVE_CLANG=$<BOOL:${_sig_have_clang}>
  FTJIT_SIG_HAVE_AARCH64=$<BOOL:${FTJIT_SIG_AARCH64_GCC}>
  FTJIT_SIG_HAVE_RISCV64=$<BOOL:${FTJIT_SIG_RISCV64_GCC}>)
add_dependencies(ftjit_dwarf_signatures_tests ftjit_dwarf_signature_fixtures)
ftjit_pure_tests(ftjit_dwarf_signatures_tests LABELS unit)
