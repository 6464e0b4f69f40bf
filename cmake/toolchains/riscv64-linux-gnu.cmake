# SPDX-License-Identifier: MIT
# Cross build for riscv64 with Debian's riscv64-linux-gnu toolchain; test
# binaries run under qemu-user (ctest prefixes them with the emulator).
#
#   apt: g++-riscv64-linux-gnu binutils-riscv64-linux-gnu qemu-user
#   (scripts/setup.sh installs them).
#
# riscv64 is not a Debian 12 architecture (TOOLCHAIN.md Q8): there are no
# riscv64 library packages. GoogleTest is built from the sources
# libgtest-dev ships (/usr/src/googletest), spdlog and fmt are used
# header-only from the host's /usr/include, and no code generator is built:
# there is no riscv64 LLVM, so riscv64 code gets its trampolines from the
# host's ftjit (`ftjit generator`, or the agent's generator connection).
# The guest's loader and libc are in /usr/riscv64-linux-gnu
# (libc6-dev-riscv64-cross), which qemu is pointed at with -L, and looked up
# there first (LD_LIBRARY_PATH), as on arm64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)
set(CMAKE_LIBRARY_ARCHITECTURE riscv64-linux-gnu)

set(CMAKE_C_COMPILER riscv64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER riscv64-linux-gnu-g++)
set(CMAKE_ASM_COMPILER riscv64-linux-gnu-gcc)

set(FTJIT_RISCV64_SYSROOT /usr/riscv64-linux-gnu CACHE PATH
    "Guest root qemu-riscv64 loads the dynamic loader and libc from")
find_program(FTJIT_QEMU_RISCV64 qemu-riscv64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${FTJIT_QEMU_RISCV64} -L ${FTJIT_RISCV64_SYSROOT}
    -E LD_LIBRARY_PATH=${FTJIT_RISCV64_SYSROOT}/lib)

# Nothing of the host's libraries: only headers are shared.
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/cmake)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
