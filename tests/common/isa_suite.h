// SPDX-License-Identifier: MIT
// Suite names of tests written once and compiled per ISA carry the ISA
// (FTJIT_TEST_SUITE: Aarch64, Riscv64), as when each leg had its own copy:
// ISA_SUITE(Engine) is Aarch64Engine in the arm64 leg.
#pragma once

#define FTJIT_SUITE_CAT2(a, b) a##b
#define FTJIT_SUITE_CAT(a, b) FTJIT_SUITE_CAT2(a, b)
#define ISA_SUITE(name) FTJIT_SUITE_CAT(FTJIT_TEST_SUITE, name)
// INSTANTIATE_TEST_SUITE_P pastes its suite argument: ISA_SUITE is
// expanded one level up.
#define INSTANTIATE_FOR_ISA(prefix, suite, ...) INSTANTIATE_TEST_SUITE_P(prefix, suite, __VA_ARGS__)
