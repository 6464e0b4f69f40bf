# SPDX-License-Identifier: MIT
# Cross build for arm64 with Debian's aarch64-linux-gnu toolchain.
#
#   apt: g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user, and the
#   multiarch libraries libasmjit-dev:arm64 libspdlog-dev:arm64
#   libfmt-dev:arm64 libgtest-dev:arm64 (scripts/setup.sh installs them).
set(FTJIT_CROSS_TRIPLE aarch64-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/linux-gnu-cross.cmake)
