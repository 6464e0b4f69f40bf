// SPDX-License-Identifier: MIT
// The options of `ftjit run` and `ftjit attach` that narrow what is
// recorded (core/record_control.h): --depth, --min-duration, --sample,
// --start-at, --stop-at, --dump-at, --start-after, --stop-after,
// --on-signal; as given, and parsed into the Attach request's
// RecordControl.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/record_control.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ftjit::cli {

struct RecordOptions {
  std::string depth;
  std::string min_duration;
  std::string sample;
  std::vector<std::string> start_at, stop_at, dump_at;
  std::string start_after, stop_after;
  std::string on_signal;
};

void add_record_options(CLI::App* cmd, RecordOptions* o);

// "USR2", "SIGUSR2", "12", "RTMIN+3": the signal's number; 0 for what is
// no signal or one a program cannot catch or must keep (KILL, STOP, SEGV,
// BUS, ILL, FPE, TRAP).
int parse_signal(const std::string& text);

// "10us", "1.5ms", "2s", "250ns" as ns; false for anything else (a bare
// number included: its unit would be a guess) or more than a year.
bool parse_time_ns(const std::string& text, uint64_t* ns);

// FUNC[@entry|@return][#K]: the trigger (its action set by the caller);
// the error says what is wrong with the text, naming `option`.
Result<RecordTrigger> parse_trigger(const std::string& option, const std::string& text);

// Everything above, checked: each error one line naming its option.
Result<RecordControl> parse_record_options(const RecordOptions& o);

}  // namespace ftjit::cli
