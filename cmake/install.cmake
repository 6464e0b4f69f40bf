# SPDX-License-Identifier: MIT
# `cmake --install`: ftjit as an SDK under a prefix.
#
#   bin/ftjit                              the command line
#   include/ftjit/{ftjit.h,ftjit.hpp}      the embedding API (C, C++)
#   include/ftjit/plugin.h                 the plugin SDK (needs nothing else)
#   lib/libftjit*.a                        the engine (static)
#   lib/ftjit/plugins/ftjit-plugin-*.so    the built-in plugins
#   lib/libftjit-agent.so                  what ftjit run/attach load into a process
#   lib/ftjit/<isa>/libftjit-agent.so      the same for programs of another ISA
#   lib/ftjit/<isa>/plugins/               (arm64, riscv64: run under qemu-user),
#                                          when the cross builds staged them
#   lib/cmake/ftjit/                       find_package(ftjit CONFIG):
#                                          ftjit::ftjit, ftjit::plugin_sdk
#   lib/pkgconfig/{ftjit,ftjit-plugin}.pc  the same for pkg-config
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(ftjit_plugin_sdk PROPERTIES EXPORT_NAME plugin_sdk)
install(TARGETS ftjit ftjit_runtime ftjit_core ftjit_backends ftjit_backend_x86_64
  ftjit_backend_x86_64_sites ftjit_backend_seam ftjit_plugin_sdk ftjit_logging
  ftjit_remote_emitter ftjit_control ftjit_backend_sites
  EXPORT ftjitTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The engine reads its modules' DWARF producers with libdw (host builds).
set(FTJIT_PC_DWARF_LIBS "")
set(FTJIT_PC_DWARF_SYSLIBS "")
if(TARGET ftjit_dwarf)
  install(TARGETS ftjit_dwarf EXPORT ftjitTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set(FTJIT_PC_DWARF_LIBS " -lftjit_dwarf")
  set(FTJIT_PC_DWARF_SYSLIBS " -ldw -lelf")
endif()
# ftjit.pc lists every backend library ftjit_backends links.
set(FTJIT_PC_BACKEND_LIBS "-lftjit_backend_x86_64 -lftjit_backend_x86_64_sites")
if(TARGET ftjit_backend_x86_64_decoder)
  install(TARGETS ftjit_backend_x86_64_decoder EXPORT ftjitTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  string(APPEND FTJIT_PC_BACKEND_LIBS " -lftjit_backend_x86_64_decoder")
endif()
if(TARGET ftjit_backend_arm64)
  install(TARGETS ftjit_backend_arm64 ftjit_backend_arm64_sites
    EXPORT ftjitTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  string(APPEND FTJIT_PC_BACKEND_LIBS " -lftjit_backend_arm64 -lftjit_backend_arm64_sites")
endif()
if(TARGET ftjit_backend_arm64_decoder)
  install(TARGETS ftjit_backend_arm64_decoder EXPORT ftjitTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  string(APPEND FTJIT_PC_BACKEND_LIBS " -lftjit_backend_arm64_decoder")
endif()
if(TARGET ftjit_backend_riscv64)
  install(TARGETS ftjit_backend_riscv64 ftjit_backend_riscv64_sites
    EXPORT ftjitTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  string(APPEND FTJIT_PC_BACKEND_LIBS " -lftjit_backend_riscv64 -lftjit_backend_riscv64_sites")
endif()
if(TARGET ftjit_backend_riscv64_decoder)
  install(TARGETS ftjit_backend_riscv64_decoder EXPORT ftjitTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  string(APPEND FTJIT_PC_BACKEND_LIBS " -lftjit_backend_riscv64_decoder")
endif()
# The LLVM MC archives the riscv64 emitter and the decoders link, by path,
# and what they need.
get_property(_ftjit_llvm_libs GLOBAL PROPERTY FTJIT_LLVM_LIBS)
if(_ftjit_llvm_libs)
  list(JOIN _ftjit_llvm_libs " " _ftjit_llvm)
  string(REPLACE " z zstd tinfo" " -lz -lzstd -ltinfo" _ftjit_llvm " ${_ftjit_llvm}")
  string(REPLACE " dl rt m" " -ldl -lrt -lm" _ftjit_llvm "${_ftjit_llvm}")
  set(FTJIT_PC_LLVM_LIBS "${_ftjit_llvm}")
endif()
if(TARGET ftjit_llvm_disassembler)
  install(TARGETS ftjit_llvm_disassembler EXPORT ftjitTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  string(APPEND FTJIT_PC_BACKEND_LIBS " -lftjit_llvm_disassembler")
endif()
# Under every ISA's sites: last.
string(APPEND FTJIT_PC_BACKEND_LIBS " -lftjit_backend_seam")
install(FILES include/ftjit/ftjit.h include/ftjit/ftjit.hpp plugins/include/ftjit/plugin.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ftjit)
install(EXPORT ftjitTargets NAMESPACE ftjit::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ftjit)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ftjitConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ftjitConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ftjit)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ftjitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ftjitConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/ftjitConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ftjit)

get_property(_ftjit_plugins GLOBAL PROPERTY FTJIT_BUILTIN_PLUGINS)
install(TARGETS ${_ftjit_plugins} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/ftjit/plugins)
install(TARGETS ftjit-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The agent `ftjit run`/`ftjit attach` load into a process: found by the CLI
# as ../LIBDIR/libftjit-agent.so beside bin/ftjit.
install(TARGETS ftjit_agent LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The other ISAs' agents and plugins: scripts/build_cross.sh links them into
# this build tree (lib/ftjit/<isa>/) after it was configured, so what is
# there is looked at when installing; the files themselves are installed,
# not the links to the cross build trees.
install(CODE "set(_ftjit_guest_stage \"${CMAKE_BINARY_DIR}/lib/ftjit\")
  set(_ftjit_guest_dest \"${CMAKE_INSTALL_LIBDIR}/ftjit\")")
install(CODE [[
  file(GLOB _ftjit_guest_agents "${_ftjit_guest_stage}/*/libftjit-agent.so")
  foreach(_agent IN LISTS _ftjit_guest_agents)
    get_filename_component(_stage "${_agent}" DIRECTORY)
    get_filename_component(_isa "${_stage}" NAME)
    file(REAL_PATH "${_agent}" _real)
    file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${_ftjit_guest_dest}/${_isa}"
      TYPE SHARED_LIBRARY FILES "${_real}")
    file(GLOB _plugins "${_stage}/plugins/ftjit-plugin-*.so")
    foreach(_plugin IN LISTS _plugins)
      file(REAL_PATH "${_plugin}" _real)
      file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${_ftjit_guest_dest}/${_isa}/plugins"
        TYPE SHARED_LIBRARY FILES "${_real}")
    endforeach()
  endforeach()
]])

# Relocatable: the .pc files find the prefix from where they lie.
file(RELATIVE_PATH FTJIT_PC_TO_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
foreach(pc ftjit ftjit-plugin)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
