// SPDX-License-Identifier: MIT
// The runtime's seam to the ISA it runs on: the few facts about the machine
// that the traced process needs beyond the backend's encodings. Registers
// of an interrupted thread, the thread pointer, where a traced function's
// return address lives, the cycle counter, instruction-cache maintenance
// after a code write, what freed code memory is filled with, and the call
// that makes dlopen see its caller's object.
//
// Declared here, once, with why each is needed; defined (inline where a
// hot path calls it) in runtime/arch/<isa>/arch_isa.h, which CMake puts on
// the include path for the ISA being built (FTJIT_ARCH, from
// CMAKE_SYSTEM_PROCESSOR): one more ISA is one more folder, no #if here or
// in the code that calls these. The backend (backends/backend.h) is the
// other half: it encodes sites and trampolines, this half runs them.
#pragma once

#include <ucontext.h>

#include <cstddef>
#include <cstdint>

namespace ftjit::arch {

// ---------------------------------------------------------------------------
// An interrupted thread (signal handlers)
// ---------------------------------------------------------------------------
//
// The control signal reads and moves a parked thread's pc (stop-the-world
// moves a pc out of a sled being rewritten; grace periods compare it with
// trampoline memory); x86-64's SIGTRAP window also moves sp, to emulate the
// push of a call.

inline uint64_t context_pc(const ucontext_t* uc);
inline void set_context_pc(ucontext_t* uc, uint64_t pc);
inline uint64_t context_sp(const ucontext_t* uc);
inline void set_context_sp(ucontext_t* uc, uint64_t sp);

// ---------------------------------------------------------------------------
// The thread pointer
// ---------------------------------------------------------------------------
//
// Generated code reaches the runtime's initial-exec TLS (trampoline
// counters, shadow stacks) at fixed offsets from it: the offsets are
// computed once, in C++, as (address of the variable) - thread_pointer().
// x86-64: the fs base; arm64: tpidr_el0; riscv64: tp.
inline uint64_t thread_pointer();

// ---------------------------------------------------------------------------
// Where a traced function's return address lives
// ---------------------------------------------------------------------------
//
// Exit hooks replace it with the exit trampoline's address and keep the
// real one on a shadow stack (runtime/shadow_stack.h); exceptions and
// detach put it back. The shadow stack keys a hooked frame by its "slot":
// the stack word 8 bytes below the frame's CFA (the caller's sp at the
// call), which the entry trampoline's own pop/push of the return address
// goes through on every ISA. Where the return address lives after the
// trampoline returned differs:
enum class ReturnAddressHome : uint8_t {
  // x86-64: the site's call pushed it into the slot, which holds it for
  // the whole life of the frame: an exception or a detach writes the slot.
  kStackWordAtEntrySp,
  // arm64 (riscv64 alike, in ra): the trampoline keeps it in the slot (its
  // own frame record) only while it runs, then returns with it in the link
  // register; the function spills it where its prologue chooses. An
  // exception finds the spill through the unwinder (the frame's CFI says
  // where the return-address column was saved); the slot is the key only.
  kLinkRegister,
};
constexpr ReturnAddressHome return_address_home();

// The slot of a frame entered with stack pointer `entry_sp`
// (ftjit_regs::sp), and the slot of the frame whose CFA (as the unwinder
// reports it) is `cfa`.
inline uint64_t return_slot_at_entry(uint64_t entry_sp);
inline uint64_t return_slot_below_cfa(uint64_t cfa);

// kLinkRegister: the DWARF register number of the return-address column
// (arm64: 30, x30; riscv64: 1, ra), whose saved location the unwinder
// knows for each frame.
constexpr int return_address_dwarf_column();

// kLinkRegister: the link register of an interrupted context (a parked
// thread's, for a detach's put-back); kStackWordAtEntrySp ISAs have none
// (0, and setting it does nothing).
inline uint64_t context_link_register(const ucontext_t* uc);
inline void set_context_link_register(ucontext_t* uc, uint64_t value);

// kLinkRegister: the words a frame's spill (or link register) may hold for
// the return address `plain`, by form: [0] `plain` itself, [1] and [2] as
// arm64's pac-ret signs it (paciasp with key A, pacibsp with key B; the
// modifier is the sp at the entry, the frame's CFA `cfa`); 0 for a form
// the CPU does not have (riscv64, an arm64 without PAC). And `value` in
// form `form` of that frame: what an exception's or a detach's put-back
// writes there, which the function's autiasp then checks.
inline void return_address_forms(uint64_t plain, uint64_t cfa, uint64_t forms[3]);
inline uint64_t return_address_in_form(uint64_t value, int form, uint64_t cfa);

// ---------------------------------------------------------------------------
// The cycle counter
// ---------------------------------------------------------------------------
//
// Tracers take two clock reads per call: the plugin host reads this
// counter rather than the vDSO when the kernel's own clocksource is this
// counter (then it is invariant and synchronised across CPUs), calibrated
// against CLOCK_MONOTONIC. Event path: no vector register, no system call.
// x86-64: rdtsc (clocksource "tsc"); arm64: cntvct_el0 ("arch_sys_counter");
// riscv64: rdtime ("riscv_clocksource").
inline uint64_t cycle_counter();
// The kernel's name for that counter as a clocksource
// (/sys/devices/system/clocksource/clocksource0/current_clocksource).
constexpr const char* cycle_counter_clocksource();
// Whether the ISA defines the counter as constant-rate and common to every
// CPU, so that its deltas are durations whatever the kernel's clocksource.
constexpr bool cycle_counter_is_global();

// ---------------------------------------------------------------------------
// Code writes
// ---------------------------------------------------------------------------

// Called by a thread on itself in a signal handler whose interrupted
// context is `uc`: whether a signal frame that context may be running on
// top of (a handler interrupted, then this signal) saved a pc for which
// `pred` holds. Read only, and may err towards true (a stale copy of a
// frame in live stack memory). The fixed parts of x86-64 sites change
// instruction boundaries (five 1-byte NOPs become one 5-byte NOP), and an
// arm64 thread between a site's two words has not run the `mov x9, x30`
// that init writes: a handler that interrupted them must have returned
// before they are rewritten. Grace periods ask it too: a handler that
// interrupted a trampoline returns into it. riscv64: not read yet, always
// false (its init has arm64's window).
template <typename Pred>
inline bool outer_signal_frame_pc_matches(const ucontext_t* uc, Pred&& pred);

// After runtime/ wrote [begin, begin+n) of code (a trampoline, a stub, a
// site), through whichever alias: makes this thread's instruction fetch see
// it. Other threads see it after the sync that follows every batch (a
// core-serialising event on each CPU). x86-64: nothing (coherent
// instruction caches; the sync does the rest); arm64, riscv64:
// __builtin___clear_cache over the executable addresses.
inline void flush_icache(uint64_t begin, size_t n);

// Fills freed or unused code memory (given by its writable alias) with
// instructions that trap: a stray jump there stops at once.
// x86-64: int3 (cc); arm64: udf #0 (00000000); riscv64: zeros (illegal).
inline void fill_with_traps(uint8_t* rw, size_t n);
// True where fresh (zeroed) memory already traps: new code memory then
// needs no filling (arm64, riscv64).
// inline constexpr bool kZeroIsTrap;

// A function `uint32_t f(void)` that returns `value`, written at `rw`;
// returns its size in bytes. The code-write probe (runtime/code_memory.cpp)
// runs it twice to learn whether a write through a writable alias reaches
// instruction fetch (it does not under qemu-user).
inline size_t write_return_constant(uint8_t* rw, uint16_t value);

// ---------------------------------------------------------------------------
// Calling dlopen as if from another object
// ---------------------------------------------------------------------------
//
// dlopen and dlmopen look at their return address to find the calling
// object (its namespace, its DT_RUNPATH for a bare name). The runtime's
// wrappers (runtime/dlopen_watch.cpp) enter the real function with a
// return address inside the caller's object instead of their own: a return
// gadget of that object's crti _init/_fini, which returns on into the
// wrapper.

// The gadget among the first instructions of `code` (an object's _init or
// _fini, from its dynamic section), or nullptr if they hold none.
const void* find_return_gadget(const uint8_t* code);

}  // namespace ftjit::arch

// Calls fn(a0, a1, a2) with its return address set to `gadget`
// (find_return_gadget), and returns fn's result once the gadget returned
// here. Assembly, per ISA (runtime/arch/<isa>/call_returning_via.cpp).
extern "C" uint64_t ftjit_call_returning_via(const void* fn, uint64_t a0, uint64_t a1,
                                             uint64_t a2, const void* gadget);

// The definitions for the ISA being built (CMake's include path picks the
// folder).
#include "arch_isa.h"
