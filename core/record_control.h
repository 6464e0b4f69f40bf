// SPDX-License-Identifier: MIT
// Which calls a session records: how deep, how long, one in how many, and
// between which triggers (`ftjit run|attach --depth --min-duration
// --sample --start-at --stop-at --start-after --stop-after`). The plugin
// host applies it in front of the plugins' callbacks
// (runtime/plugin_host/record_gate.h); a session without any of it calls
// the plugins directly, as before.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ftjit {

// What a trigger does: start or stop recording, or dump the flight
// recorder (--buffer-policy overwrite: the plugins get what each thread's
// buffer holds, as at a flush), or, for a signal, toggle recording.
enum class TriggerAction : uint8_t { kStart = 1, kStop = 2, kDump = 3, kToggle = 4 };

// A function whose calls fire a trigger: at its entry (the call itself
// recorded when it starts, not when it stops) or at its return (the call
// recorded when it stops, not when it starts), from its `from_call`th call
// on (per process; every later call fires again).
struct RecordTrigger {
  using Action = TriggerAction;  // kStart, kStop or kDump
  Action action = Action::kStart;
  std::string function;  // a glob, as --filter takes (MODULE!GLOB too)
  bool at_return = false;
  uint64_t from_call = 1;
};

struct RecordControl {
  // 0: any depth; N: calls at most N traced frames deep, per thread.
  uint32_t max_depth = 0;
  // 0: every call; else only calls that took at least this long, with the
  // calls they made that did too.
  uint64_t min_duration_ns = 0;
  // 0 or 1: every call; N: per thread and function, calls 1, N+1, 2N+1...
  uint32_t sample_period = 0;
  std::vector<RecordTrigger> triggers;
  // Times from the session's start: 0, none.
  uint64_t start_after_ns = 0;
  uint64_t stop_after_ns = 0;
  // A signal sent to the traced process (its handler replaced while the
  // session runs): 0, none.
  int signal = 0;
  TriggerAction signal_action = TriggerAction::kToggle;

  bool has_triggers() const {
    return !triggers.empty() || start_after_ns != 0 || stop_after_ns != 0 || signal != 0;
  }
  // Recording waits for a start trigger (a function's, a time or a signal).
  bool starts_off() const {
    if (start_after_ns != 0) return true;
    if (signal != 0 && signal_action == TriggerAction::kStart) return true;
    for (const RecordTrigger& t : triggers) {
      if (t.action == RecordTrigger::Action::kStart) return true;
    }
    return false;
  }
  bool empty() const {
    return max_depth == 0 && min_duration_ns == 0 && sample_period <= 1 && !has_triggers();
  }
};

// "--start-at handle@return#3": how the trigger was given, for messages.
std::string describe_trigger(const RecordTrigger& t);

// Checks what no session could honour: a zero-length function, a trigger
// from its 0th call, times that stop before they start. The message is
// one line naming the option.
std::string check_record_control(const RecordControl& r);

}  // namespace ftjit
