# SPDX-License-Identifier: MIT
# What keeps the test command's five builds of ftjit (host, arm64,
# riscv64, ASan, TSan) inside its time: most of a translation unit's time
# here is headers (GoogleTest alone, 2.5 s a file; the standard library's
# common headers 1.2 s; spdlog with fmt's compile-time format checks, 4-7
# s), parsed again by every file. Two remedies, each where it is safe:
#
# - unity builds of ftjit's own libraries and the tests' programs with
#   several files: their files compiled in batches, each header parsed
#   and each template instantiated once a batch. Only ftjit's own code:
#   the traced fixtures (C, compiled with -fpatchable-function-entry) are
#   never batched, since batching would let the compiler inline one
#   traced function into another file's and change what is traced. Files
#   with options of their own (-mgeneral-regs-only, a sled) CMake leaves
#   out of the batches by itself.
# - one precompiled header for every GoogleTest program of the build
#   (REUSE_FROM ftjit_test_pch): gtest, gmock and the standard headers
#   tests use, parsed once. A file whose options make GCC refuse the
#   precompiled header reads the headers as text instead, as before.
#
# -DFTJIT_UNITY_BUILD=OFF compiles every file on its own (what an editor's
# compile_commands.json is better with, and what finds a file that does
# not include what it uses).
option(FTJIT_UNITY_BUILD "Compile ftjit's libraries and test programs in batches (unity builds)" ON)
option(FTJIT_TEST_PCH "Precompile GoogleTest and the standard headers for the test programs" ON)

# ftjit_unity_build(target...): batches of 8 files, two or more batches
# for a target of more than 8, which the two cores compile side by side.
function(ftjit_unity_build)
  if(NOT FTJIT_UNITY_BUILD)
    return()
  endif()
  foreach(target IN LISTS ARGN)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endforeach()
endfunction()

# ftjit_precompile_test_headers(dir): every C++ target under dir (its
# subdirectories included) that links GoogleTest uses ftjit_test_pch's
# precompiled header. Called once, after the tests are defined.
function(_ftjit_gtest_targets dir out)
  set(found "")
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type STREQUAL "EXECUTABLE")
      continue()
    endif()
    get_target_property(libs ${t} LINK_LIBRARIES)
    if(libs MATCHES "GTest::(gtest|gmock)")
      list(APPEND found ${t})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _ftjit_gtest_targets(${sub} sub_found)
    list(APPEND found ${sub_found})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

function(ftjit_precompile_test_headers dir)
  if(NOT FTJIT_TEST_PCH)
    return()
  endif()
  _ftjit_gtest_targets(${dir} targets)
  if(NOT targets)
    return()
  endif()
  # The header's owner: a program that does nothing, compiled with the
  # options every test file has (the directory's and the build's; an
  # executable's -fPIE, which GCC checks, where a library has -fPIC).
  set(src ${CMAKE_BINARY_DIR}/ftjit_test_pch.cpp ${CMAKE_BINARY_DIR}/ftjit_test_pch.c)
  set(text "/* The owner of the tests' precompiled header (cmake/compile_time.cmake). */\n")
  if(NOT EXISTS ${CMAKE_BINARY_DIR}/ftjit_test_pch.cpp)
    file(WRITE ${CMAKE_BINARY_DIR}/ftjit_test_pch.cpp "${text}int main() { return 0; }\n")
  endif()
  if(NOT EXISTS ${CMAKE_BINARY_DIR}/ftjit_test_pch.c)
    file(WRITE ${CMAKE_BINARY_DIR}/ftjit_test_pch.c "${text}")
  endif()
  if(NOT TARGET GTest::gtest)
    find_package(GTest REQUIRED)  # imported in the tests' directories only
  endif()
  add_executable(ftjit_test_pch ${src})
  target_link_libraries(ftjit_test_pch PRIVATE GTest::gtest GTest::gmock)
  set(headers gmock/gmock.h gtest/gtest.h
    algorithm array atomic chrono condition_variable cstdint cstdio cstdlib cstring filesystem fstream
    functional map memory mutex optional set sstream string string_view thread unordered_map utility vector)
  foreach(h IN LISTS headers)
    target_precompile_headers(ftjit_test_pch PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:<${h}$<ANGLE-R>>")
  endforeach()
  # CMake asks the owner of a reused header for one per language of the
  # target: the tests' C files have this one, which none of them uses
  # (they skip precompiled headers, below).
  target_precompile_headers(ftjit_test_pch PRIVATE "$<$<COMPILE_LANGUAGE:C>:<stddef.h$<ANGLE-R>>")
  # Under ASan or TSan, the tests' own C++ (gtest's macros, the checks
  # around ftjit's calls) at -O0 and ftjit's code at the build's -O1: ASan
  # and UBSan at -O1 took GCC 1.6 times as long on a test file, and what a
  # test checks is ftjit's code (the ASan build: 921 -> 687 CPU-s with the
  # CLI's unity groups; its tests 345 -> 315 s, TSan's 171 -> 153 s). Not
  # a target that chooses its own optimisation or traces its own functions
  # (-O2, a sled): its code's shape is part of the test.
  set(tests_o0 OFF)
  if(FTJIT_SANITIZE MATCHES "address|thread")
    set(tests_o0 ON)
    target_compile_options(ftjit_test_pch PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O0>)
  endif()
  foreach(t IN LISTS targets)
    target_precompile_headers(${t} REUSE_FROM ftjit_test_pch)
    get_target_property(options ${t} COMPILE_OPTIONS)
    if(tests_o0 AND NOT options MATCHES "-O[0-9sg]|patchable")
      target_compile_options(${t} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O0>)
    endif()
    # Its C and assembly files (traced functions, call helpers) get
    # nothing: the header is C++'s.
    # (A relative name is the target's directory's, not this one's.)
    get_target_property(sources ${t} SOURCES)
    get_target_property(source_dir ${t} SOURCE_DIR)
    foreach(source IN LISTS sources)
      if(NOT source MATCHES "^\\$<" AND NOT source MATCHES "\\.(cpp|cc|cxx)$")
        if(NOT IS_ABSOLUTE ${source})
          set(source ${source_dir}/${source})
        endif()
        set_source_files_properties(${source} TARGET_DIRECTORY ${t} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endforeach()
  endforeach()
endfunction()
