# SPDX-License-Identifier: MIT
# What every cross build with one of Debian's <triple>-linux-gnu toolchains
# shares; a toolchain file sets FTJIT_CROSS_TRIPLE (aarch64-linux-gnu,
# riscv64-linux-gnu) and includes this. Test binaries run under qemu-user
# (ctest prefixes them with the emulator, qemu-<cpu>).
#
# Headers are shared with the host under /usr/include, so the build needs
# no sysroot of its own; libraries come from Debian's multiarch directory
# /usr/lib/<triple> (CMAKE_LIBRARY_ARCHITECTURE) where the ISA has
# packages. The guest's loader and libc are in /usr/<triple>
# (libc6-dev-<arch>-cross), which qemu is pointed at with -L. The guest's
# libraries are looked up there first too (LD_LIBRARY_PATH): the loader
# searches the multiarch directories before its own, and on arm64
# /usr/lib/aarch64-linux-gnu holds the libc of libc6:arm64 (a dependency of
# the :arm64 packages), a different build of glibc than the sysroot's loader
# (2.36-9+deb12uN against 2.36-8cross1): a loader and a libc of two builds
# share _rtld_global with two layouts, and the first pthread_create loops
# forever on a list it misreads.
if(NOT FTJIT_CROSS_TRIPLE)
  message(FATAL_ERROR "linux-gnu-cross.cmake: include it from a toolchain file that sets FTJIT_CROSS_TRIPLE")
endif()
string(REGEX REPLACE "-.*" "" _ftjit_cross_cpu ${FTJIT_CROSS_TRIPLE})

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${_ftjit_cross_cpu})
set(CMAKE_LIBRARY_ARCHITECTURE ${FTJIT_CROSS_TRIPLE})

set(CMAKE_C_COMPILER ${FTJIT_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${FTJIT_CROSS_TRIPLE}-g++)
set(CMAKE_ASM_COMPILER ${FTJIT_CROSS_TRIPLE}-gcc)

set(FTJIT_GUEST_SYSROOT /usr/${FTJIT_CROSS_TRIPLE} CACHE PATH
    "Guest root qemu-user loads the dynamic loader and libc from")
find_program(FTJIT_QEMU_USER qemu-${_ftjit_cross_cpu} REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${FTJIT_QEMU_USER} -L ${FTJIT_GUEST_SYSROOT}
    -E LD_LIBRARY_PATH=${FTJIT_GUEST_SYSROOT}/lib)

# Nothing of the host's libraries (the amd64 config files under
# /usr/lib/x86_64-linux-gnu must not be picked up): only headers are shared.
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/cmake)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
