// SPDX-License-Identifier: MIT
// runtime/arch/arch.h for riscv64 (the RISC-V psABI, Linux).
#pragma once

#include <cstddef>
#include <cstring>

#include "runtime/arch/stack_scan.h"

namespace ftjit::arch {

// Init and de-init keep every instruction boundary (arch.h); a relocated
// entry does not: a pc saved inside its overwritten bytes is in the way.
// riscv64's signal frame has no marker word (arm64's FPSIMD magic): it is
//
//   frame   [ siginfo 128 ][ ucontext: ... mcontext: pc ra sp ... fp state ]
//   frame = (interrupted sp - sizeof frame) & ~15
//
// so a frame is where a word that would be its saved sp points just above
// its own ucontext (within the frame sizes the kernel's and qemu-user's
// layouts give), with a signal number in its siginfo. A frame wrongly
// taken for one makes the caller wait or refuse; it never moves anything.
template <typename Pred>
inline bool outer_signal_frame_pc_matches(const ucontext_t* uc, Pred&& pred) {
  constexpr uint64_t kGregsAt = offsetof(ucontext_t, uc_mcontext) + offsetof(mcontext_t, __gregs);
  constexpr uint64_t kSpAt = kGregsAt + 2 * 8;
  constexpr uint64_t kMin = sizeof(ucontext_t) - 256, kMax = sizeof(ucontext_t) + 1024;
  const uint64_t own = reinterpret_cast<uint64_t>(uc);
  return detail::any_stack_word(uc->uc_mcontext.__gregs[2] & ~uint64_t{15}, [&](uint64_t at, uint64_t value) {
    if (at < kSpAt) return false;
    const uint64_t frame_uc = at - kSpAt;
    if (frame_uc == own || (frame_uc & 15) != 0 || value < frame_uc + kMin || value > frame_uc + kMax) return false;
    int signo = 0;
    uint64_t pc = 0;
    return detail::read_own_memory(frame_uc - 128, &signo, sizeof signo) == sizeof signo && signo > 0 &&
           signo <= 64 && detail::read_own_memory(frame_uc + kGregsAt, &pc, 8) == 8 && pc != 0 && pred(pc);
  });
}

// __gregs: pc, then x1 (ra), x2 (sp), ... x31.
inline uint64_t context_pc(const ucontext_t* uc) { return uc->uc_mcontext.__gregs[0]; }
inline void set_context_pc(ucontext_t* uc, uint64_t pc) { uc->uc_mcontext.__gregs[0] = pc; }
inline uint64_t context_sp(const ucontext_t* uc) { return uc->uc_mcontext.__gregs[2]; }
inline void set_context_sp(ucontext_t* uc, uint64_t sp) { uc->uc_mcontext.__gregs[2] = sp; }

// tp (x4).
inline uint64_t thread_pointer() {
  uint64_t tp;
  asm("mv %0, tp" : "=r"(tp));
  return tp;
}

//     caller                 traced function (=8,4 or =4,2)
//     jal ra, f  -------->   f-8: [ ops literal            ]
//     ra = return            f:   auipc t0, hi(D)
//                            f+4: jalr t0, lo(D)(t0)    t0 = f+8, ra untouched
//                            (the stub: jr to the trampoline)
// The trampoline stores ra in the frame record it builds for the function
// (backends/riscv64/riscv64_emitter.cpp, (c)), at S-8 with S the entry sp
// = the frame's CFA, and returns with ra loaded from there: S-8 is the
// slot an exit hook writes while the trampoline runs. After it, the return
// address lives in ra and wherever the function saves it.
constexpr ReturnAddressHome return_address_home() { return ReturnAddressHome::kLinkRegister; }
inline uint64_t return_slot_at_entry(uint64_t entry_sp) { return entry_sp - 8; }
inline uint64_t return_slot_below_cfa(uint64_t cfa) { return cfa - 8; }
constexpr int return_address_dwarf_column() { return 1; }
// No signed return addresses (arch.h): the plain form only.
inline void return_address_forms(uint64_t plain, uint64_t, uint64_t forms[3]) {
  forms[0] = plain;
  forms[1] = forms[2] = 0;
}
inline uint64_t return_address_in_form(uint64_t value, int, uint64_t) { return value; }
inline uint64_t context_link_register(const ucontext_t* uc) { return uc->uc_mcontext.__gregs[1]; }
inline void set_context_link_register(ucontext_t* uc, uint64_t value) { uc->uc_mcontext.__gregs[1] = value; }

// The time CSR (rdtime): constant-rate, what the kernel's
// riscv_clocksource reads.
inline uint64_t cycle_counter() {
  uint64_t v;
  asm volatile("rdtime %0" : "=r"(v) : : "memory");
  return v;
}
constexpr const char* cycle_counter_clocksource() { return "riscv_clocksource"; }
// The time CSR is architecturally constant-rate and common to every hart
// (also under qemu-user, which derives it from the host's clock).
constexpr bool cycle_counter_is_global() { return true; }

// fence.i here, and the riscv_flush_icache system call (libgcc's
// __clear_cache) for the other harts.
inline void flush_icache(uint64_t begin, size_t n) {
  char* p = reinterpret_cast<char*>(begin);
  __builtin___clear_cache(p, p + n);
}

// An all-zero halfword is defined illegal (c.unimp): zeros trap at once.
inline void fill_with_traps(uint8_t* rw, size_t n) { std::memset(rw, 0, n); }
inline constexpr bool kZeroIsTrap = true;

}  // namespace ftjit::arch

// `li a0, 1; ret` and `li a0, 2; ret`, assembled by the compiler's
// assembler (call_returning_via.cpp): the probe's two functions.
extern "C" const uint8_t ftjit_riscv64_return_1[], ftjit_riscv64_return_2[];

namespace ftjit::arch {

// The code-write probe asks for 1 and 2 only.
inline size_t write_return_constant(uint8_t* rw, uint16_t value) {
  const uint8_t* code = value == 1 ? ftjit_riscv64_return_1 : ftjit_riscv64_return_2;
  const size_t n = static_cast<size_t>(ftjit_riscv64_return_2 - ftjit_riscv64_return_1);
  std::memcpy(rw, code, n);
  return n;
}

}  // namespace ftjit::arch
