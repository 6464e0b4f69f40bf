# SPDX-License-Identifier: MIT
# ftjit_relocation_tests: the relocation planner and the host's decoders,
# against hand-written entry shapes (fixtures/<isa>_shapes.S, built by the
# C compiler alone: no sanitizer, no project flag may change their bytes)
# and the system's libc. Only where the decoders are (LLVM MC: the host).
include_guard(GLOBAL)
if(NOT TARGET ftjit_backend_x86_64_decoder)
  return()
endif()

set(_reloc_dir ${CMAKE_BINARY_DIR}/tests/relocation)
set(_reloc_shapes_x86_64 ${_reloc_dir}/libshapes_x86_64.so)
# -Bsymbolic: the shapes' branches between functions bind inside the file
# (no PLT), as a static function's would.
add_custom_command(OUTPUT ${_reloc_shapes_x86_64}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_reloc_dir}
  COMMAND ${CMAKE_C_COMPILER} -shared -nostdlib -Wl,-Bsymbolic -o ${_reloc_shapes_x86_64}
          ${CMAKE_CURRENT_LIST_DIR}/fixtures/x86_64_shapes.S
  DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fixtures/x86_64_shapes.S
  COMMENT "relocation shapes (x86-64)")
# arm64: the cross compiler's (scripts/setup.sh installs it); planned
# and relocated here, on the host, where LLVM's AArch64 decoder is.
find_program(FTJIT_RELOCATION_A64_CC NAMES aarch64-linux-gnu-gcc REQUIRED)
set(_reloc_shapes_arm64 ${_reloc_dir}/libshapes_arm64.so)
add_custom_command(OUTPUT ${_reloc_shapes_arm64}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_reloc_dir}
  COMMAND ${FTJIT_RELOCATION_A64_CC} -shared -nostdlib -Wl,-Bsymbolic -o ${_reloc_shapes_arm64}
          ${CMAKE_CURRENT_LIST_DIR}/fixtures/arm64_shapes.S
  DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fixtures/arm64_shapes.S
  COMMENT "relocation shapes (arm64)")
add_custom_target(ftjit_relocation_fixtures DEPENDS ${_reloc_shapes_x86_64} ${_reloc_shapes_arm64})

add_executable(ftjit_relocation_tests ${CMAKE_CURRENT_LIST_DIR}/relocation_plan_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/relocated_copy_test.cpp ${CMAKE_CURRENT_LIST_DIR}/arm64_relocation_test.cpp)
target_link_libraries(ftjit_relocation_tests PRIVATE ftjit_backends ftjit_core GTest::gtest_main ${CMAKE_DL_LIBS})
target_compile_definitions(ftjit_relocation_tests PRIVATE
  FTJIT_RELOCATION_SHAPES_X86_64="${_reloc_shapes_x86_64}"
  FTJIT_RELOCATION_SHAPES_ARM64="${_reloc_shapes_arm64}")
add_dependencies(ftjit_relocation_tests ftjit_relocation_fixtures)
gtest_discover_tests(ftjit_relocation_tests DISCOVERY_TIMEOUT 30 PROPERTIES LABELS unit)
