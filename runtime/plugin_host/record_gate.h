// SPDX-License-Identifier: MIT
// The record gate: the host's callbacks in front of a plugin's when the
// session narrows what it records (record_control.h). The engine calls
// gate_entry/gate_exit with the plugin's context; they keep one frame per
// traced call of the thread and decide, per call, whether the plugin sees
// it:
//
//   entry   recording on (triggers), depth <= max_depth, the function's
//           turn (sample)?  no: the frame is skipped, entry and exit.
//           yes, no duration filter: the plugin's entry, now.
//           yes, a duration filter: the frame is pending: ip, parent,
//           the time and a copy of the registers kept; nothing yet.
//   exit    skipped: nothing. delivered: the plugin's exit.
//           pending: shorter than min_duration, nothing (its nested
//           calls were shorter still: they left nothing either); else
//           every pending frame below it, outermost first, and then it,
//           are delivered late: the plugin's entry runs with now_ns()
//           answering the frame's entry time, then its exit runs.
//
// So a plugin sees well-nested calls in order, each entry with its exit;
// its events, committed late, still come in order per thread (nothing was
// committed inside a pending frame). Built with -mgeneral-regs-only: the
// gate runs where a FTJIT_PLUGIN_F_NO_FP plugin's callbacks would.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ftjit/ftjit.h"
#include "ftjit/plugin.h"

namespace ftjit::plugins::detail {

struct ThreadBlock;

// What a gate does for one plugin instance. The limits may change while
// attached (live control: each is read once per call, relaxed); a change
// applies from the next call on, a pending frame judged at its return by
// the minimum of that moment.
struct Gate {
  ftjit_plugin_entry_fn entry = nullptr;  // the plugin's (may be null)
  ftjit_plugin_exit_fn exit = nullptr;
  std::atomic<uint32_t> max_depth{0};        // 0: any
  std::atomic<uint32_t> sample_period{0};    // 0, 1: every call
  std::atomic<uint64_t> min_duration_ns{0};  // 0: none
  bool every_call = false;        // FTJIT_PLUGIN_F_EVERY_CALL: no sample, no minimum
  uint32_t regs_bytes = 0;        // what a pending frame keeps of the registers
  // Session-wide: nonzero while recording (triggers); null when always.
  const std::atomic<uint32_t>* recording = nullptr;
  ftjit_record_info info{};       // what record_info() tells the plugin
};

// Frames a thread's gate tracks; deeper calls are skipped (and counted).
inline constexpr uint32_t kGateFrames = 256;
// Functions a thread's sampling counts separately; past that, a function
// new to the thread is recorded at every call (and counted).
inline constexpr uint32_t kSampleSlots = 4096;

struct GateFrame {
  uint64_t ip;
  uint64_t parent_ip;
  uint64_t entry_ns;  // pending frames
  uint32_t state;     // GateState
  uint32_t reserved;
  ftjit_plugin_regs regs;  // pending frames: the first regs_bytes
};

struct SampleSlot {
  uint64_t ip;     // 0: free
  uint64_t calls;  // this thread's calls of ip so far
};

// A thread's gate state, in its block's mapping (zeroed pages).
struct GateThread {
  uint32_t depth;  // traced frames open (may exceed kGateFrames)
  uint32_t used_samples;
  uint64_t too_deep;         // frames beyond kGateFrames: skipped
  uint64_t sample_overflow;  // calls recorded because no slot was left
  GateFrame frames[kGateFrames];
  SampleSlot samples[kSampleSlots];
};

// The engine's callbacks (ops == the plugin's context).
void gate_entry(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs* regs);
void gate_exit(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_ret_regs* ret);

// The flight recorders' `dumping` words (host_internal.h, Instance): set
// by the trigger itself, so that from that instant until the dump is
// written no thread writes over the events the dump is for (they drop,
// counted). The trigger thread only gets a CPU later, and a thread that
// runs on meanwhile would otherwise fill its ring with what came after.
using DumpFreeze = std::vector<std::atomic<uint32_t>*>;

// A function trigger (record_control.h): an ops of its own on the
// function's sites, attached before the plugins (at a shared site it runs
// first), whose callback sets the session's recording word from the
// function's `from_call`th call on.
struct TriggerOps {
  ftjit_ops ops;  // first: the engine's callbacks get &ops
  std::atomic<uint64_t> calls{0};
  uint64_t from_call = 1;
  // What the recording word becomes: 1 start, 0 stop; kDumpValue: a dump
  // asked of the session's trigger thread (`dumps` bumped and woken).
  uint32_t value = 0;
  std::atomic<uint32_t>* recording = nullptr;
  std::atomic<uint32_t>* dumps = nullptr;
  const DumpFreeze* freeze = nullptr;
};
inline constexpr uint32_t kDumpValue = 2;
// Freezes the flight recorders and asks the trigger thread for a dump:
// async-signal-safe (atomics and a futex wake), so a signal handler may
// too. `freeze` may be null.
void request_dump(std::atomic<uint32_t>* dumps, const DumpFreeze* freeze);
void trigger_at_entry(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs* regs);
// A return, or an unwind (exception, longjmp): the call is over.
void trigger_at_exit(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_ret_regs* ret);
// The entry a return trigger's ops needs to have its returns hooked.
void trigger_no_entry(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs* regs);

// What now_ns() answers on the calling thread while a late entry runs
// (the frame's entry time); 0 otherwise (the clock). Initial-exec, as the
// host's other thread state (event_services.cpp).
extern thread_local uint64_t t_replay_now_ns __attribute__((tls_model("initial-exec")));

}  // namespace ftjit::plugins::detail
