// SPDX-License-Identifier: MIT
// Exit hooks by return-address replacement, as ftrace's function_graph does
// it: at a hooked entry the traced function's return address is saved on a
// per-thread shadow stack and replaced by the exit trampoline's address;
// when the function returns, the trampoline asks the shadow stack for the
// real address and goes there after the exit callback ran. (The common
// push and pop are done by the trampolines themselves, on the layout of
// backends/shadow_layout.h; what is here is every other case.)
//
// Frames can also leave without returning. Each shadow entry remembers the
// stack slot it replaced, so the stack tells which entries are stale:
//   - longjmp/siglongjmp: the next exit or hooked entry below or at a stale
//     entry's slot finds it and reports it unwound;
//   - C++ exceptions: the unwinder must see the real return addresses, so
//     unwind_hooks puts every replaced address back when an exception starts
//     (_Unwind_RaiseException & co.), reports frames unwound as the cleanup
//     phase passes them (the personality routine is wrapped), and, when a
//     handler catches it (__cxa_begin_catch), replaces the live frames'
//     addresses again.
// Every entry gets exactly one exit callback: ret != NULL when it returned,
// NULL when it was unwound.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "ftjit/ftjit.h"
#include "runtime/thread_control.h"

namespace ftjit {

// Who to call when a hooked frame leaves. Never freed: a frame hooked by an
// ops may return long after the ops was detached (then `live` is false and
// nothing is called).
// Or, for an inline latency site (kind kInlineLatency, backends/
// shadow_layout.h), what to add the duration to: no callback at all.
struct ExitRecord {
  ftjit_exit_func_t func = nullptr;
  ftjit_ops* ops = nullptr;
  std::atomic<bool> live{true};
  // Whether the landing must keep xmm2-15 around `func` (no
  // FTJIT_OPS_F_NO_FP); xmm0-1 it keeps anyway, in ftjit_ret_regs.
  bool save_fp = true;
  uint8_t kind = 0;           // shadow_layout::kKind*
  uint64_t site = 0;          // kInlineLatency: the site's entry
  uint64_t block_offset = 0;  // kInlineLatency: its histogram in the block
  uint32_t sample_period = 0;  // kInlineLatency: 1 call in N timed (0, 1: every call)
};

// A new record (kept for the life of the process).
ExitRecord* make_exit_record(ftjit_exit_func_t func, ftjit_ops* ops);
// One inline latency site's record (kept for the life of the process).
ExitRecord* make_inline_latency_record(uint64_t site, uint64_t block_offset, uint32_t sample_period);

// The exit trampoline, emitted once per process into memory that is never
// unmapped (hooked frames can outlive any engine). 0 until prepared. Its
// address is the landing, where hooked frames return (what their slots
// hold); call-and-land, where trampolines entered by a stub call the body
// of a hooked function from, lies just before it (backends/backend.h).
Status prepare_exit_trampoline(int64_t counts_tls_offset);
uint64_t exit_trampoline_address();
// Why exit_trampoline_address() is 0 after prepare_exit_trampoline (an
// ISA whose exit-hook model is not written yet): attach's refusal.
const char* exit_hooks_unavailable_reason();
uint64_t exit_call_and_land_address();
// Where inline latency trampolines hook returns to: the exit trampoline's
// own landing for them where the ISA's emitter has one (x86-64), else the
// landing.
uint64_t exit_latency_landing_address();

// The entry of an ops that hooks returns, inside the reentrancy guard:
// reports the hooked frames that a function entered with its return
// address at regs->sp proves gone (longjmp'd over, unwound), so that exits
// and entries stay in order; calls the entry callback `func`; then hooks
// the function's return for `rec`.
void shadow_hooked_entry(ftjit_func_t func, ftjit_ops* ops, ExitRecord* rec, uint64_t ip,
                         uint64_t parent_ip, ftjit_regs* regs);
// The same two halves for a generated trampoline that keeps the shadow
// stack itself (backends/backend.h: TrampolineRequest::exit_record): the
// slow paths it calls, and where it finds the thread's stack.
extern "C" void ftjit_shadow_prune(uint64_t slot);
extern "C" void ftjit_shadow_push(uint64_t slot, uint64_t ip, uint64_t record);
int64_t shadow_stack_tls_offset();

// The real return address of the frame whose return address slot is
// `slot` (it holds the exit trampoline's address): its oldest entry's. The
// slot itself if none (cannot happen while the slot holds the trampoline).
extern "C" uint64_t ftjit_shadow_real_return(uint64_t slot);

// The exit trampoline's callee: runs the exit callbacks of the frame whose
// replaced slot is `slot` (and reports stale entries above it unwound);
// returns the real return address.
extern "C" uint64_t ftjit_shadow_pop(uint64_t slot, ftjit_ret_regs* regs);

// Exception support (see unwind_hooks): put back every replaced return
// address of this thread; and, once a handler in the frame whose CFA is
// `cfa` caught, report the frames below it unwound and hook the others
// again.
void shadow_unhook_all();
void shadow_rehook_after_catch(uint64_t cfa);
// During an exception's cleanup phase, before the landing pads of the frame
// whose CFA is `cfa` run: the hooked frames below it are gone.
void shadow_unwinding_to(uint64_t cfa);

// Detach for good: puts back every return address still replaced, on every
// thread, and empties every shadow stack, so that no frame returns through
// the exit trampoline any more (a thread blocked inside a hooked function
// then returns straight to its caller). Only once no ops hooks exits: the
// frames' exit callbacks are not called (they were silenced). Every other
// thread is parked meanwhile; one inside a trampoline or the exit path is
// let go on until it leaves, for up to `timeout_ms`.
Status shadow_put_back_all(int timeout_ms);

// After shadow_put_back_all, before the code of this file goes away (an
// agent being unloaded): threads exiting later must not call into it.
void shadow_forget_threads();

// Unmaps the exit trampoline page and every shadow stack. Only for an agent being dlclosed, once
// the CLI has seen no thread can return through it (it runs in the agent's
// destructor); in a process that goes on using ftjit, never.
void release_exit_trampoline();

// Frames whose return address is replaced right now, all threads.
uint64_t shadow_hooked_frames();

// Process-wide counters, for ftjit_stats.
struct ShadowCounters {
  uint64_t hooks;          // return addresses replaced
  uint64_t hook_drops;     // entries not hooked: shadow stack full
  uint64_t unwound;        // frames reported unwound
};
ShadowCounters shadow_counters();

// Traced calls skipped by the reentrancy guard (trampolines increment it).
extern std::atomic<uint64_t> g_recursion_drops;

// The reentrancy guard of the calling thread, for C++ paths. The
// trampolines' counters are the guard (runtime/thread_control.h): a thread
// runs ftjit code while entries > exits. `own` is how many of those the
// caller itself accounts for (1 for the exit trampoline's pop, which
// counted its own entry); guard_enter(0) counts an entry for its region.
// false: already inside (a drop was counted).
inline bool guard_enter(uint64_t own = 0) {
  if (open_trampoline_entries() != own) {
    g_recursion_drops.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (own == 0) ++ftjit_trampoline_counts.entries;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return true;
}
inline void guard_leave(uint64_t own = 0) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (own == 0) ++ftjit_trampoline_counts.exits;
}

}  // namespace ftjit
