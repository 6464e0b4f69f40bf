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
# libshapes_<isa>.so from fixtures/<isa>_shapes.S, by `compiler`, into
# ${out}. -Bsymbolic: the shapes' branches between functions bind inside
# the file (no PLT), as a static function's would.
function(ftjit_relocation_shapes isa compiler out)
  set(_so ${_reloc_dir}/libshapes_${isa}.so)
  add_custom_command(OUTPUT ${_so}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_reloc_dir}
    COMMAND ${compiler} -shared -nostdlib -Wl,-Bsymbolic -o ${_so} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/fixtures/${isa}_shapes.S
    DEPENDS ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/fixtures/${isa}_shapes.S
    COMMENT "relocation shapes (${isa})")
  set(${out} ${_so} PARENT_SCOPE)
endfunction()
ftjit_relocation_shapes(x86_64 ${CMAKE_C_COMPILER} _reloc_shapes_x86_64)
# arm64: the cross compiler's (scripts/setup.sh installs it); planned and
# relocated here, on the host, where LLVM's AArch64 decoder is.
find_program(FTJIT_RELOCATION_A64_CC NAMES aarch64-linux-gnu-gcc REQUIRED)
ftjit_relocation_shapes(arm64 ${FTJIT_RELOCATION_A64_CC} _reloc_shapes_arm64)
# riscv64: the same, from the riscv64 cross compiler (rv64gc: compressed
# forms where the fixture spells them).
find_program(FTJIT_RELOCATION_RV64_CC NAMES riscv64-linux-gnu-gcc REQUIRED)
ftjit_relocation_shapes(riscv64 "${FTJIT_RELOCATION_RV64_CC};-march=rv64gc" _reloc_shapes_riscv64)
add_custom_target(ftjit_relocation_fixtures DEPENDS ${_reloc_shapes_x86_64} ${_reloc_shapes_arm64}
  ${_reloc_shapes_riscv64})

add_executable(ftjit_relocation_tests ${CMAKE_CURRENT_LIST_DIR}/relocation_plan_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/relocated_copy_test.cpp ${CMAKE_CURRENT_LIST_DIR}/arm64_relocation_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/riscv64_relocation_test.cpp)
target_link_libraries(ftjit_relocation_tests PRIVATE ftjit_backends ftjit_core GTest::gtest_main ${CMAKE_DL_LIBS})
target_compile_definitions(ftjit_relocation_tests PRIVATE
  FTJIT_RELOCATION_SHAPES_X86_64="${_reloc_shapes_x86_64}"
  FTJIT_RELOCATION_SHAPES_ARM64="${_reloc_shapes_arm64}"
  FTJIT_RELOCATION_SHAPES_RISCV64="${_reloc_shapes_riscv64}")
add_dependencies(ftjit_relocation_tests ftjit_relocation_fixtures)
ftjit_pure_tests(ftjit_relocation_tests LABELS unit)

# Its files compiled in batches (cmake/compile_time.cmake).
ftjit_unity_build(ftjit_relocation_tests)
