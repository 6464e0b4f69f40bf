// SPDX-License-Identifier: MIT
// runtime/arch/arch.h for arm64 (AAPCS64, Linux).
#pragma once

#include <cstring>

namespace ftjit::arch {

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
// No stack word holds the return address at the entry: return_slot_*
// are left to the arm64 exit hooks (they decide where the real return
// address is kept while the function runs).
constexpr ReturnAddressHome return_address_home() { return ReturnAddressHome::kLinkRegister; }

// The virtual counter; the isb keeps the read from being taken before the
// instructions it is meant to time.
inline uint64_t cycle_counter() {
  uint64_t v;
  asm volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
  return v;
}
constexpr const char* cycle_counter_clocksource() { return "arch_sys_counter"; }

// Clean the data cache and invalidate the instruction cache to the point
// of unification over the range, then isb (libgcc's __clear_cache).
inline void flush_icache(uint64_t begin, size_t n) {
  char* p = reinterpret_cast<char*>(begin);
  __builtin___clear_cache(p, p + n);
}

// 00000000: udf #0, permanently undefined.
inline void fill_with_traps(uint8_t* rw, size_t n) { std::memset(rw, 0, n); }

}  // namespace ftjit::arch
