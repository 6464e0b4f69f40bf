// SPDX-License-Identifier: MIT
// runtime/arch/arch.h for x86-64 (System V, Linux).
#pragma once

#include <sys/uio.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

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
  auto read_self = [](uint64_t addr, void* out, size_t n) {
    iovec local{out, n};
    iovec remote{reinterpret_cast<void*>(addr), n};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  };
  uint64_t restorer = 0;
  if (read_self(reinterpret_cast<uint64_t>(uc) - 8, &restorer, 8) != 8 || restorer == 0) return false;
  const uint64_t base = context_sp(uc) & ~uint64_t{7};
  constexpr size_t kScanBytes = 64 * 1024;
  uint64_t words[256];
  for (size_t done = 0; done < kScanBytes; done += sizeof words) {
    const ssize_t got = read_self(base + done, words, sizeof words);
    if (got <= 0) return false;
    for (size_t i = 0; i < static_cast<size_t>(got) / 8; ++i) {
      if (words[i] != restorer) continue;
      const uint64_t frame_uc = base + done + i * 8 + 8;
      const uint64_t rip_at = frame_uc + offsetof(ucontext_t, uc_mcontext.gregs) + REG_RIP * sizeof(greg_t);
      uint64_t rip = 0;
      if (read_self(rip_at, &rip, 8) == 8 && pred(rip)) return true;
    }
    if (static_cast<size_t>(got) < sizeof words) return false;
  }
  return false;
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

//   mov eax, value      b8 imm32
//   ret                 c3
inline size_t write_return_constant(uint8_t* rw, uint16_t value) {
  const uint8_t code[6] = {0xb8, static_cast<uint8_t>(value), static_cast<uint8_t>(value >> 8),
                           0, 0, 0xc3};
  std::memcpy(rw, code, sizeof code);
  return sizeof code;
}

}  // namespace ftjit::arch
