// SPDX-License-Identifier: MIT
// register_keeping_call.S: a caller that keeps values in call-clobbered
// registers across a call, as GCC's -fipa-ra lets one, and what it finds
// there afterwards when nothing was lost.
#pragma once

#include <cstdint>

// Calls fn(2, 3); out[] gets rcx rdx rsi rdi r8 r9 r10 r11 and the low
// halves of xmm2..xmm6, xmm8, xmm12, xmm15 after the call.
extern "C" int test_call_keeping_registers(int (*fn)(int, int), uint64_t out[16]);

// out[] of a call that lost nothing (rdi and rsi keep the arguments).
inline constexpr uint64_t kKeptRegisters[16] = {
    0x1101, 0x1102, 3,      2,      0x1108, 0x1109, 0x110a, 0x110b,
    0x2202, 0x2203, 0x2204, 0x2205, 0x2206, 0x2208, 0x220c, 0x220f};
