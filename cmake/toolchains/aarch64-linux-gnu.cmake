# SPDX-License-Identifier: MIT
# Cross build for arm64 with Debian's aarch64-linux-gnu toolchain; test
# binaries run under qemu-user (ctest prefixes them with the emulator).
#
#   apt: g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user, and the
#   multiarch libraries libasmjit-dev:arm64 libspdlog-dev:arm64
#   libfmt-dev:arm64 libgtest-dev:arm64 (scripts/setup.sh installs them).
#
# Libraries come from Debian's multiarch directory /usr/lib/aarch64-linux-gnu
# (CMAKE_LIBRARY_ARCHITECTURE): headers are shared with the host under
# /usr/include, so no separate sysroot is needed for the build. The guest's
# loader and libc are in /usr/aarch64-linux-gnu (libc6-dev-arm64-cross),
# which qemu is pointed at with -L. The guest's libraries are looked up
# there first too (LD_LIBRARY_PATH): the loader searches the multiarch
# directories before its own, and /usr/lib/aarch64-linux-gnu holds the libc
# of libc6:arm64 (a dependency of the :arm64 packages), a different build
# of glibc than the sysroot's loader (2.36-9+deb12uN against 2.36-8cross1):
# a loader and a libc of two builds share _rtld_global with two layouts,
# and the first pthread_create loops forever on a list it misreads.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_ASM_COMPILER aarch64-linux-gnu-gcc)

set(FTJIT_AARCH64_SYSROOT /usr/aarch64-linux-gnu CACHE PATH
    "Guest root qemu-aarch64 loads the dynamic loader and libc from")
find_program(FTJIT_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${FTJIT_QEMU_AARCH64} -L ${FTJIT_AARCH64_SYSROOT}
    -E LD_LIBRARY_PATH=${FTJIT_AARCH64_SYSROOT}/lib)

# Find arm64 packages only: the amd64 config files under
# /usr/lib/x86_64-linux-gnu must not be picked up.
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/cmake)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
