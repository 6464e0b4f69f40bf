// SPDX-License-Identifier: MIT
// runtime/arch/arch.h for arm64 (AAPCS64, Linux).
#pragma once

#include <sys/auxv.h>

#include <cstddef>
#include <cstring>

#include "runtime/arch/stack_scan.h"

namespace ftjit::arch {

// The kernel's arm64 signal frame is {siginfo, ucontext, records, frame
// record}; its ucontext's mcontext starts its __reserved area with the
// FP/SIMD record, whose header word (magic 0x46508001, size 528) tells an
// outer frame on the interrupted stack (the first 64 KiB above its sp),
// read with process_vm_readv so that the end of a stack never faults. A
// stale copy in live stack memory matches too: callers may err towards
// true. Init needs it (a handler that interrupted a site between its two
// words must return first: patcher.cpp), and so do grace periods (one
// that interrupted a trampoline returns into it).
template <typename Pred>
inline bool outer_signal_frame_pc_matches(const ucontext_t* uc, Pred&& pred) {
  constexpr uint64_t kFpsimdHeader = (uint64_t{528} << 32) | 0x46508001u;
  constexpr size_t kReservedAt = offsetof(ucontext_t, uc_mcontext) + offsetof(mcontext_t, __reserved);
  constexpr size_t kPcAt = offsetof(ucontext_t, uc_mcontext) + offsetof(mcontext_t, pc);
  return detail::any_marked_stack_word(uc->uc_mcontext.sp & ~uint64_t{15}, kFpsimdHeader, [&](uint64_t at) {
    const uint64_t frame_uc = at - kReservedAt;
    uint64_t pc = 0;
    return frame_uc != reinterpret_cast<uint64_t>(uc) &&
           detail::read_own_memory(frame_uc + kPcAt, &pc, 8) == 8 && pred(pc);
  });
}

inline uint64_t context_pc(const ucontext_t* uc) { return uc->uc_mcontext.pc; }
inline void set_context_pc(ucontext_t* uc, uint64_t pc) { uc->uc_mcontext.pc = pc; }
inline uint64_t context_sp(const ucontext_t* uc) { return uc->uc_mcontext.sp; }
inline void set_context_sp(ucontext_t* uc, uint64_t sp) { uc->uc_mcontext.sp = sp; }

// tpidr_el0.
inline uint64_t thread_pointer() { return reinterpret_cast<uint64_t>(__builtin_thread_pointer()); }

//     caller                 traced function (=4,2)
//     bl f      ---------->  f-8: [ ops literal     ]
//     x30 = return           f:   mov x9, x30          x9 = return
//                            f+4: bl trampoline        x30 = f+8
// The trampoline stores x9 in the frame record it builds for the function
// (backends/arm64/arm64_emitter.cpp, (c)), at S-8 with S the entry sp =
// the frame's CFA, and returns with x30 loaded from there: S-8 is the slot
// an exit hook writes while the trampoline runs. After it, the return
// address lives in x30 and wherever the function saves it.
constexpr ReturnAddressHome return_address_home() { return ReturnAddressHome::kLinkRegister; }
inline uint64_t return_slot_at_entry(uint64_t entry_sp) { return entry_sp - 8; }
inline uint64_t return_slot_below_cfa(uint64_t cfa) { return cfa - 8; }
constexpr int return_address_dwarf_column() { return 30; }

// pac-ret (arch.h): PACIA/PACIB x16, x17 by their encodings (the
// toolchain's default -march has no ARMv8.3 mnemonics), only where the
// CPU has PAC (HWCAP_PACA; elsewhere they would be undefined).
inline bool cpu_has_pac() {
  static const bool pac = (getauxval(AT_HWCAP) & (1ul << 30)) != 0;  // HWCAP_PACA
  return pac;
}
inline uint64_t pac_sign(uint64_t value, uint64_t modifier, bool key_b) {
  register uint64_t x16 asm("x16") = value;
  register uint64_t x17 asm("x17") = modifier;
  if (key_b) {
    asm volatile(".inst 0xdac10630" : "+r"(x16) : "r"(x17));  // pacib x16, x17
  } else {
    asm volatile(".inst 0xdac10230" : "+r"(x16) : "r"(x17));  // pacia x16, x17
  }
  return x16;
}
inline void return_address_forms(uint64_t plain, uint64_t cfa, uint64_t forms[3]) {
  forms[0] = plain;
  forms[1] = cpu_has_pac() ? pac_sign(plain, cfa, false) : 0;
  forms[2] = cpu_has_pac() ? pac_sign(plain, cfa, true) : 0;
}
inline uint64_t return_address_in_form(uint64_t value, int form, uint64_t cfa) {
  return form == 0 || !cpu_has_pac() ? value : pac_sign(value, cfa, form == 2);
}
inline uint64_t context_link_register(const ucontext_t* uc) { return uc->uc_mcontext.regs[30]; }
inline void set_context_link_register(ucontext_t* uc, uint64_t value) { uc->uc_mcontext.regs[30] = value; }

// The virtual counter; the isb keeps the read from being taken before the
// instructions it is meant to time.
inline uint64_t cycle_counter() {
  uint64_t v;
  asm volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
  return v;
}
constexpr const char* cycle_counter_clocksource() { return "arch_sys_counter"; }
// The generic timer is architecturally constant-rate and common to every
// CPU (also under qemu-user, which derives it from the host's clock).
constexpr bool cycle_counter_is_global() { return true; }

// Clean the data cache and invalidate the instruction cache to the point
// of unification over the range, then isb (libgcc's __clear_cache).
inline void flush_icache(uint64_t begin, size_t n) {
  char* p = reinterpret_cast<char*>(begin);
  __builtin___clear_cache(p, p + n);
}

// 00000000: udf #0, permanently undefined.
inline void fill_with_traps(uint8_t* rw, size_t n) { std::memset(rw, 0, n); }
inline constexpr bool kZeroIsTrap = true;

//   movz w0, #value      0x52800000 | value << 5
//   ret                  0xd65f03c0
inline size_t write_return_constant(uint8_t* rw, uint16_t value) {
  const uint32_t code[2] = {0x52800000u | (uint32_t{value} << 5), 0xd65f03c0u};
  std::memcpy(rw, code, sizeof code);
  return sizeof code;
}

}  // namespace ftjit::arch
