# SPDX-License-Identifier: MIT
# ftjit_hazard_build(<suffix> <patchable layout> [ALIGN <bytes>]): the
# hazard target ftjit_hazard_target<suffix> and the library it dlopens,
# libftjit_hazard_lib<suffix>.so (found by the absolute path compiled in),
# every function of both built with -fpatchable-function-entry=<layout>.
# Included by tests/hazards (x86-64 layouts) and tests/kernel (arm64's).
set(FTJIT_HAZARD_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR})
function(ftjit_hazard_build suffix layout)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "ALIGN" "")
  set(flags -O2 -fpatchable-function-entry=${layout})
  if(arg_ALIGN)
    list(APPEND flags -falign-functions=${arg_ALIGN})
  endif()
  add_library(ftjit_hazard_lib${suffix} SHARED ${FTJIT_HAZARD_SOURCE_DIR}/hazard_lib.c)
  target_compile_options(ftjit_hazard_lib${suffix} PRIVATE ${flags})
  add_executable(ftjit_hazard_target${suffix} ${FTJIT_HAZARD_SOURCE_DIR}/hazard_target.cpp)
  target_compile_options(ftjit_hazard_target${suffix} PRIVATE ${flags})
  target_link_libraries(ftjit_hazard_target${suffix} PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
  target_compile_definitions(ftjit_hazard_target${suffix} PRIVATE
    FTJIT_HAZARD_LIB="$<TARGET_FILE:ftjit_hazard_lib${suffix}>")
  add_dependencies(ftjit_hazard_target${suffix} ftjit_hazard_lib${suffix})
endfunction()
