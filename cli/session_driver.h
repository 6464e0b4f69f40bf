// SPDX-License-Identifier: MIT
// One tracing run against a process whose agent is loaded, for `ftjit run`
// and `ftjit attach` alike: serve as its code generator, attach, wait (for
// --duration, Ctrl-C/SIGTERM/SIGHUP, or the process's exit), detach, print
// the report.
#pragma once

#include <sys/types.h>

#include <future>
#include <vector>

#include "cli/inject/ptrace_inject.h"
#include "cli/phase_clock.h"
#include "cli/trace_options.h"
#include "runtime/control/protocol.h"

namespace ftjit::cli {

struct DriveTarget {
  const char* command = "ftjit";  // for messages: "ftjit attach"
  pid_t pid = 0;
  bool is_child = false;     // ours to wait for (run): its status is our exit code
  int connect_wait_ms = 0;   // the agent may not listen yet (run)
  bool unload = false;       // after the detach, unload the agent (attach)
  PhaseClock* phases = nullptr;  // the phases so far (attach: injection); -v prints them
  // attach: the plugins are staged where this process can open them (its
  // root may be a container's), and removed once its agent has them.
  const inject::TargetInfo* stage_plugins_into = nullptr;
  // attach: the modules' producers, read while the agent was injected
  // (process_modules.h, module_producers_ahead); sent with the request.
  std::shared_future<std::vector<control::ModuleProducers>> producers;
};

// Returns the exit status: on success 0 (attach) or the child's (run);
// 1 with one line on stderr otherwise.
int drive_session(const DriveTarget& target, const TraceOptions& options);

// Ctrl-C, SIGTERM and SIGHUP end the wait instead of the CLI (installed by
// drive_session; exposed for the injection window, which must not be cut).
void install_stop_signals();
bool stop_requested();

}  // namespace ftjit::cli
