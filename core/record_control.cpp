// SPDX-License-Identifier: MIT
#include "core/record_control.h"

namespace ftjit {

std::string describe_trigger(const RecordTrigger& t) {
  std::string s = t.action == TriggerAction::kStart  ? "--start-at "
                  : t.action == TriggerAction::kStop ? "--stop-at "
                                                     : "--dump-at ";
  s += t.function;
  if (t.at_return) s += "@return";
  if (t.from_call > 1) s += "#" + std::to_string(t.from_call);
  return s;
}

std::string check_record_control(const RecordControl& r) {
  for (const RecordTrigger& t : r.triggers) {
    if (t.function.empty()) return describe_trigger(t) + ": no function named";
    if (t.from_call == 0) return describe_trigger(t) + ": calls count from 1";
    for (const RecordTrigger& u : r.triggers) {
      if (&u != &t && u.action != t.action && u.action != TriggerAction::kDump &&
          t.action != TriggerAction::kDump && u.function == t.function && u.at_return == t.at_return &&
          u.from_call == t.from_call) {
        return describe_trigger(t) + " and " + describe_trigger(u) +
               ": the same call would start and stop recording";
      }
    }
  }
  if (r.signal < 0 || r.signal >= 65) return "--on-signal: no such signal number " + std::to_string(r.signal);
  if (r.start_after_ns != 0 && r.stop_after_ns != 0 && r.stop_after_ns <= r.start_after_ns) {
    return "--stop-after must be later than --start-after: recording would stop before it starts";
  }
  return {};
}

}  // namespace ftjit
