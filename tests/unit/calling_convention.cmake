# SPDX-License-Identifier: MIT
# ftjit_calling_convention_tests: place_arguments (backends/calling_convention.h)
# against hand-written cases, and against what each ISA's compiler does with
# the functions of calling_convention/signatures.c, compiled to assembly
# here by GCC and Clang for each ISA (-O2 -S, never run: each function's
# code shows where it reads its parameters and writes its return value).
#
# include() from tests/CMakeLists.txt.
include_guard(GLOBAL)

if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

set(_ftjit_cc_src ${CMAKE_CURRENT_LIST_DIR}/calling_convention)
set(_ftjit_cc_out ${CMAKE_CURRENT_BINARY_DIR}/calling_convention)
set(_ftjit_cc_asm)
set(_ftjit_cc_have)

# signatures.c to assembly (-O2 -S) for `isa` by `compiler`, as <name>.s.
# Only flags that keep the code readable: no unwind tables, and what the
# caller adds (no CET or BTI landing pads, no section anchors: arm64 GCC
# would address every global from one anchor); none changes the calling
# convention.
function(_ftjit_cc_assembly name compiler)
  add_custom_command(OUTPUT ${_ftjit_cc_out}/${name}.s
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_ftjit_cc_out}
    COMMAND ${compiler} -O2 -S -fno-asynchronous-unwind-tables ${ARGN} -I${_ftjit_cc_src}
            ${_ftjit_cc_src}/signatures.c -o ${_ftjit_cc_out}/${name}.s
    DEPENDS ${_ftjit_cc_src}/signatures.c ${_ftjit_cc_src}/types.h
    COMMENT "signatures.c to ${name} assembly" VERBATIM)
  string(TOUPPER ${name} _have)
  string(REPLACE "-" "_" _have ${_have})
  set(_ftjit_cc_asm ${_ftjit_cc_asm} ${_ftjit_cc_out}/${name}.s PARENT_SCOPE)
  set(_ftjit_cc_have ${_ftjit_cc_have} FTJIT_CC_HAVE_${_have}=1 PARENT_SCOPE)
endfunction()

# GCC: the host's compiler for the host's ISA, the Debian cross compilers
# for the others. Clang, where there is one, for all three (no headers:
# no sysroot needed).
find_program(FTJIT_CC_CLANG NAMES clang-16 clang)
foreach(_ftjit_cc_isa x86_64 arm64 riscv64)
  if(_ftjit_cc_isa STREQUAL "x86_64")
    set(_ftjit_cc_triple x86_64-linux-gnu)
    set(_ftjit_cc_flags -fcf-protection=none)
  elseif(_ftjit_cc_isa STREQUAL "arm64")
    set(_ftjit_cc_triple aarch64-linux-gnu)
    set(_ftjit_cc_flags -mbranch-protection=none)
  else()
    set(_ftjit_cc_triple riscv64-linux-gnu)
    set(_ftjit_cc_flags)
  endif()
  if(FTJIT_ARCH STREQUAL _ftjit_cc_isa AND CMAKE_C_COMPILER_ID STREQUAL "GNU")
    set(_ftjit_cc_gcc ${CMAKE_C_COMPILER})
  else()
    find_program(FTJIT_CC_GCC_${_ftjit_cc_isa} NAMES ${_ftjit_cc_triple}-gcc)
    set(_ftjit_cc_gcc ${FTJIT_CC_GCC_${_ftjit_cc_isa}})
  endif()
  if(_ftjit_cc_gcc)
    _ftjit_cc_assembly(${_ftjit_cc_isa}-gcc ${_ftjit_cc_gcc} -fno-section-anchors ${_ftjit_cc_flags})
  else()
    message(STATUS "ftjit: no ${_ftjit_cc_triple}-gcc: place_arguments is not checked against GCC for ${_ftjit_cc_isa}")
  endif()
  if(FTJIT_CC_CLANG)
    _ftjit_cc_assembly(${_ftjit_cc_isa}-clang ${FTJIT_CC_CLANG} --target=${_ftjit_cc_triple} ${_ftjit_cc_flags})
  endif()
endforeach()
add_custom_target(ftjit_calling_convention_asm DEPENDS ${_ftjit_cc_asm})

add_executable(ftjit_calling_convention_tests ${CMAKE_CURRENT_LIST_DIR}/calling_convention_test.cpp)
target_include_directories(ftjit_calling_convention_tests PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(ftjit_calling_convention_tests PRIVATE ftjit_calling_conventions GTest::gtest_main)
target_compile_definitions(ftjit_calling_convention_tests PRIVATE
  FTJIT_CC_FIXTURE_DIR="${_ftjit_cc_src}" FTJIT_CC_ASM_DIR="${_ftjit_cc_out}" ${_ftjit_cc_have})
add_dependencies(ftjit_calling_convention_tests ftjit_calling_convention_asm)
ftjit_pure_tests(ftjit_calling_convention_tests LABELS unit)
