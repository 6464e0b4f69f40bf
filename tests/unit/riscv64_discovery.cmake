# SPDX-License-Identifier: MIT
# riscv64's discovery tests (tests/unit/isa_discovery.cmake). Its fixtures:
# =8,4 with -march=rv64gc (four c.nop before the symbol, four after) and
# =4,2 with -march=rv64g (two nop before, two after), both
# -falign-functions=8 (what backends/riscv64/riscv64_backend.h asks of a
# site), and =8,4 with -falign-functions=2, which lets both compilers place
# functions off the 8-byte grid. The -march picks the NOP: each layout is
# the one whose 8 bytes after the entry are a whole sled of its NOP (=4,2
# under rv64gc would leave 4 bytes: no site).
#
# The backend as an agent builds it (make_backend with an emitter of its
# own) everywhere; where LLVM MC is, the in-process one too (backend_for),
# so that the engine of either kind is asked. classify_entry needs no
# emitter: the riscv64 cross build, which has none, runs these tests
# without a generator (no FTJIT_GENERATOR in their environment).
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/isa_discovery.cmake)
set(_rv64_libs ftjit_backend_sites)
set(_rv64_definitions "")
if(TARGET ftjit_backend_riscv64)
  list(APPEND _rv64_libs ftjit_backends)
  set(_rv64_definitions FTJIT_RISCV64_HAVE_EMITTER=1)
endif()
ftjit_isa_discovery_tests(PREFIX riscv64 SUITE Riscv64 TAG rv64 TRIPLE riscv64-linux-gnu
  NEEDS ftjit_backend_riscv64_sites LIBS ${_rv64_libs} DEFINITIONS ${_rv64_definitions}
  FIXTURE_LAYOUTS
    "p8_4|-march=rv64gc -fpatchable-function-entry=8,4 -falign-functions=8|exe stripped"
    "p4_2|-march=rv64g -fpatchable-function-entry=4,2 -falign-functions=8|exe stripped"
    "p8_4_align2|-march=rv64gc -fpatchable-function-entry=8,4 -falign-functions=2|")
