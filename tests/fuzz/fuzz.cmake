# SPDX-License-Identifier: MIT
# ftjit_elf_fuzz: libFuzzer target for the ELF parser and site discovery (clang only).
#
# include() when FTJIT_FUZZ is ON. With a non-clang compiler (the usual g++
# build) it only says how to fuzz: scripts/run_fuzz.sh builds the same
# target with clang++ directly.
include_guard(GLOBAL)

if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(STATUS "ftjit fuzz: ${CMAKE_CXX_COMPILER_ID} has no libFuzzer; "
                 "use scripts/run_fuzz.sh (clang++) instead")
  return()
endif()

set(_fz_root ${CMAKE_CURRENT_LIST_DIR}/../..)
add_executable(ftjit_elf_fuzz
  ${CMAKE_CURRENT_LIST_DIR}/elf_fuzz.cpp
  ${_fz_root}/core/elf_image.cpp
  ${_fz_root}/core/dwarf_producers.cpp
  ${_fz_root}/core/demangle.cpp
  ${_fz_root}/core/site_discovery.cpp
  ${_fz_root}/core/sled_layout.cpp
  ${_fz_root}/core/sled_recovery.cpp
  ${_fz_root}/core/error.cpp
  ${_fz_root}/core/site.cpp
  ${_fz_root}/core/eh_frame_index.cpp
  ${_fz_root}/core/ifunc_slots.cpp
  ${_fz_root}/core/bulk_memory.cpp
)
# Its own copies of the core sources: the fuzzer instruments them, and
# ftjit_core is not built with -fsanitize=fuzzer.
target_include_directories(ftjit_elf_fuzz PRIVATE ${_fz_root} ${_fz_root}/include)
target_compile_options(ftjit_elf_fuzz PRIVATE
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
target_link_options(ftjit_elf_fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
