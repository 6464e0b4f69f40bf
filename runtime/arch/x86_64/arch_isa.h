// SPDX-License-Identifier: MIT
// runtime/arch/arch.h for x86-64 (System V, Linux).
#pragma once

#include <cstddef>
#include <cstring>

#include "runtime/arch/stack_scan.h"

namespace ftjit::arch {

inline uint64_t context_pc(const ucontext_t* uc) {
  return static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RIP]);
}
inline void set_context_pc(ucontext_t* uc, uint64_t pc) {
  uc->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(pc);
}
inline uint64_t context_sp(const ucontext_t* uc) {
  return static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RSP]);
}
inline void set_context_sp(ucontext_t* uc, uint64_t sp) {
  uc->uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(sp);
}

// The kernel's x86-64 signal frame is {pretcode, ucontext, siginfo}, the
// handler's third argument pointing at its ucontext, so the word before
// our own ucontext is the restorer glibc's sigaction gives every handler.
// Outer frames are looked for by that word on the interrupted stack (the
// first 64 KiB above its sp), read with process_vm_readv so that the end
// of a stack never faults.
template <typename Pred>
inline bool outer_signal_frame_pc_matches(const ucontext_t* uc, Pred&& pred) {
  uint64_t restorer = 0;
  if (detail::read_own_memory(reinterpret_cast<uint64_t>(uc) - 8, &restorer, 8) != 8 || restorer == 0) {
    return false;
  }
  constexpr size_t kRipAt = offsetof(ucontext_t, uc_mcontext.gregs) + REG_RIP * sizeof(greg_t);
  return detail::any_marked_stack_word(context_sp(uc) & ~uint64_t{7}, restorer, [&](uint64_t at) {
    uint64_t rip = 0;
    return detail::read_own_memory(at + 8 + kRipAt, &rip, 8) == 8 && pred(rip);
  });
}

// The TCB's first word is its own address (the TLS ABI's tcbhead_t.tcb):
// one load, no system call.
inline uint64_t thread_pointer() {
  uint64_t tp;
  asm("mov %%fs:0, %0" : "=r"(tp));
  return tp;
}

//     caller                 traced function
//     call f    ---------->  f: [site] ...
//                            ^ rsp -> [ return address ]   <- the slot
//                                     [ caller's frame ]   <- CFA = rsp + 8
constexpr ReturnAddressHome return_address_home() {
  return ReturnAddressHome::kStackWordAtEntrySp;
}
inline uint64_t return_slot_at_entry(uint64_t entry_sp) { return entry_sp; }
inline uint64_t return_slot_below_cfa(uint64_t cfa) { return cfa - 8; }
// The return-address column (rip); unused with kStackWordAtEntrySp.
constexpr int return_address_dwarf_column() { return 16; }
// No signed return addresses (arch.h): the plain form only.
inline void return_address_forms(uint64_t plain, uint64_t, uint64_t forms[3]) {
  forms[0] = plain;
  forms[1] = forms[2] = 0;
}
inline uint64_t return_address_in_form(uint64_t value, int, uint64_t) { return value; }
inline uint64_t context_link_register(const ucontext_t*) { return 0; }
inline void set_context_link_register(ucontext_t*, uint64_t) {}

// rdtsc without <x86intrin.h>: this header is included by code compiled
// with -mgeneral-regs-only.
inline uint64_t cycle_counter() { return __builtin_ia32_rdtsc(); }
constexpr const char* cycle_counter_clocksource() { return "tsc"; }
// The TSC is per CPU: trusted for durations only where the kernel trusts it
// as its clocksource (invariant and synchronised).
constexpr bool cycle_counter_is_global() { return false; }

// Coherent instruction caches: a store is seen by instruction fetch on
// this CPU; other CPUs are serialised by the sync after each batch.
inline void flush_icache(uint64_t, size_t) {}

constexpr uint8_t kInt3 = 0xcc;  // int3
inline void fill_with_traps(uint8_t* rw, size_t n) { std::memset(rw, kInt3, n); }
// 00 00 is `add [rax], al`: zeros must be filled.
inline constexpr bool kZeroIsTrap = false;

//   mov eax, value      b8 imm32
//   ret                 c3
inline size_t write_return_constant(uint8_t* rw, uint16_t value) {
  const uint8_t code[6] = {0xb8, static_cast<uint8_t>(value), static_cast<uint8_t>(value >> 8),
                           0, 0, 0xc3};
  std::memcpy(rw, code, sizeof code);
  return sizeof code;
}

}  // namespace ftjit::arch
