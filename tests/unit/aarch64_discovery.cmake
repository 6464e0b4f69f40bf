# SPDX-License-Identifier: MIT
# arm64's discovery tests (tests/unit/isa_discovery.cmake): its fixtures,
# built by GCC and clang in both sled layouts, with and without BTI, and a
# layout whose literals are not all 8-aligned. -mbranch-protection=none
# unless asked: a toolchain that defaults to BTI would move every sled.
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/isa_discovery.cmake)
ftjit_isa_discovery_tests(PREFIX aarch64 SUITE Aarch64 TAG a64 TRIPLE aarch64-linux-gnu
  NEEDS ftjit_backend_arm64 LIBS ftjit_backends
  FIXTURE_LAYOUTS
    "p4_2|-mbranch-protection=none -fpatchable-function-entry=4,2 -falign-functions=8|exe"
    "p2|-mbranch-protection=none -fpatchable-function-entry=2 -falign-functions=8|exe"
    "p4_2_bti|-mbranch-protection=standard -fpatchable-function-entry=4,2 -falign-functions=8|exe stripped"
    "p2_bti|-mbranch-protection=standard -fpatchable-function-entry=2 -falign-functions=8|exe stripped"
    "p4_2_align4|-mbranch-protection=none -fpatchable-function-entry=4,2 -falign-functions=4|")
