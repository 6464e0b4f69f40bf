# SPDX-License-Identifier: MIT
# Cross build for riscv64 with Debian's riscv64-linux-gnu toolchain.
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
set(FTJIT_CROSS_TRIPLE riscv64-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/linux-gnu-cross.cmake)
