# SPDX-License-Identifier: MIT
# Programs of the other ISAs `ftjit run` serves under qemu-user, built on
# the host with the ISA's cross compiler by name, as a user builds one, in
# the layout where every strategy applies (arm64 =4,2, riscv64 rv64gc =8,4,
# functions 8-byte aligned).
#
#   ftjit_guest_program(ISA OUTPUT path SOURCES files... [OPTIONS flags...] [DEPENDS files...])
#
# ISA: arm64 or riscv64. Sets FTJIT_GUEST_PROGRAM_BUILT in the caller's
# scope: OFF (and says so) when the cross compiler is missing.
include_guard(GLOBAL)

function(ftjit_guest_program isa)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "OUTPUT" "SOURCES;OPTIONS;DEPENDS")
  if(isa STREQUAL "arm64")
    set(triple aarch64-linux-gnu)
    set(layout -fpatchable-function-entry=4,2 -mbranch-protection=none)
  elseif(isa STREQUAL "riscv64")
    set(triple riscv64-linux-gnu)
    set(layout -march=rv64gc -fpatchable-function-entry=8,4)
  else()
    message(FATAL_ERROR "ftjit_guest_program: no ISA ${isa} (arm64, riscv64)")
  endif()
  find_program(FTJIT_GUEST_CC_${isa} NAMES ${triple}-gcc)
  if(NOT FTJIT_GUEST_CC_${isa})
    message(STATUS "ftjit: ${triple}-gcc not found, no ${arg_OUTPUT} (scripts/setup.sh installs it)")
    set(FTJIT_GUEST_PROGRAM_BUILT OFF PARENT_SCOPE)
    return()
  endif()
  get_filename_component(dir ${arg_OUTPUT} DIRECTORY)
  get_filename_component(name ${arg_OUTPUT} NAME)
  add_custom_command(OUTPUT ${arg_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${FTJIT_GUEST_CC_${isa}} -O2 ${layout} -falign-functions=8 ${arg_OPTIONS} ${arg_SOURCES}
            -pthread -o ${arg_OUTPUT}
    DEPENDS ${arg_SOURCES} ${arg_DEPENDS} ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
    COMMENT "Building the ${isa} ${name}" VERBATIM)
  set(FTJIT_GUEST_PROGRAM_BUILT ON PARENT_SCOPE)
endfunction()
