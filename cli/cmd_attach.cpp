// SPDX-License-Identifier: MIT
// `ftjit attach -p PID`: loads the agent into a running process (ptrace:
// every thread stopped, dlopen called on one, every register restored),
// then traces it until --duration ends, Ctrl-C, or the process exits.
// Everything that can be checked before touching the process is checked
// first: the process, its ISA and linking, ptrace permission, and whether
// it has patchable entries at all.
#include <cstdio>
#include <future>
#include <memory>
#include <string>

#include "cli/agent_client.h"
#include "cli/agent_unload.h"
#include "cli/commands.h"
#include "cli/option_values.h"
#include "cli/inject/ptrace_inject.h"
#include "cli/process_modules.h"
#include "cli/session_driver.h"

namespace ftjit::cli {
namespace {

struct AttachOptions {
  TraceOptions trace;
  int pid = 0;
  bool keep_agent = false;
};

constexpr std::chrono::milliseconds kInjectTimeout{15000};

int run_attach(const AttachOptions& o) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ftjit attach: %s\n", message.c_str());
    return 1;
  };
  PhaseClock phases;
  // The plugins and options, before anything else.
  if (auto request = make_attach_request(o.trace); !request) return fail(request.error().message);
  phases.end("check the plugins and options");
  auto target = inject::inspect_target(o.pid);
  if (!target) return fail(target.error().message);
  phases.end("inspect the process");

  // An agent loaded by an earlier attach (or `ftjit run`) is reused.
  // (One a killed `ftjit` left half unloaded is unloaded first.)
  bool unloaded = false;
  std::shared_future<std::vector<control::ModuleProducers>> producers;
  auto earlier = connect_finishing_unload(o.pid, &unloaded);
  const bool loaded = earlier.ok();
  phases.end("look for a loaded agent");
  // Mapped yet unreachable: an agent whose unload a thread inside its code
  // held up (it stays, inert, its socket closed), or one that does not
  // answer. The loader would hand a new injection that same copy, which
  // starts no server: say so instead.
  if (!loaded && agent_mapped(o.pid)) {
    return fail("the ftjit agent of an earlier attach is still loaded in process " +
                std::to_string(o.pid) + " and cannot be reached or unloaded yet (" +
                earlier.error().message + "); try again in a moment, or `ftjit detach -p " +
                std::to_string(o.pid) + "`");
  }
  if (!loaded) {
    // Only whether there is a site at all: the agent finds them itself.
    auto has_sites = process_has_patchable_entries(o.pid);
    if (!has_sites) return fail(has_sites.error().message);
    if (!*has_sites && !o.trace.relocate) {
      return fail("process " + std::to_string(o.pid) + " (" + target->exe +
                  ") has no patchable function entries: build it with "
                  "-fpatchable-function-entry=5 (or =13,8), or trace its functions with --relocate");
    }
    phases.end("module scan");
    if (auto st = inject::check_ptrace_permitted(*target); !st) return fail(st.error().message);
    phases.end("ptrace permission");
    auto agent = find_agent_library();
    if (!agent) return fail(agent.error().message);
    auto staged = inject::stage_library(*target, *agent);
    if (!staged) return fail(staged.error().message);
    phases.end("stage the agent");
    if (o.trace.verbose) {
      std::fprintf(stderr, "ftjit attach: loading %s into process %d\n", staged->c_str(), o.pid);
    }
    install_stop_signals();
    // The producers the agent's scan would ask for, read meanwhile.
    producers = std::async(std::launch::async, module_producers_ahead, o.pid).share();
    auto handle = inject::inject_library(*target, *staged, kInjectTimeout);
    // A copy staged into the process's root (a container) goes once the
    // agent is mapped: nothing is left in the container, even if we are
    // killed later. Its symbols are read from the mapping at unload; where
    // that cannot be (no CAP_SYS_ADMIN), or this removal fails, the unload
    // removes it.
    if (*staged != *agent && (!handle || inject::mapping_outlives_its_file(o.pid, *staged))) {
      (void)inject::remove_staged_copy(*target, *staged);
    }
    if (!handle) return fail("cannot load the agent: " + handle.error().message);
    if (stop_requested()) return fail("interrupted; the agent is loaded, nothing attached");
    phases.end("inject the agent (ptrace, dlopen)");
  }
  DriveTarget t;
  t.phases = &phases;
  t.command = "ftjit attach";
  t.pid = o.pid;
  t.connect_wait_ms = 5000;
  t.unload = !o.keep_agent;
  t.stage_plugins_into = &*target;
  t.producers = producers;
  return drive_session(t, o.trace);
}

}  // namespace

void add_attach_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<AttachOptions>();
  CLI::App* cmd = app.add_subcommand("attach", "Attach tracer plugins to a running process");
  accept_process_id(cmd->add_option("-p,--pid", o->pid, "The process")->required());
  add_trace_options(cmd, &o->trace);
  cmd->add_flag("--keep-agent", o->keep_agent,
                "After detaching, leave the agent loaded (inert) for a quicker next attach; by "
                "default it is unloaded, every hook undone");
  cmd->footer(
      "Examples:\n"
      "  ftjit attach -p 1234 --duration 5                       calls per function for 5 s\n"
      "  ftjit attach -p 1234 --plugin count --format tsv        until Ctrl-C, one NAME<TAB>CALLS per line\n"
      "  ftjit attach -p 1234 --plugin latency --filter 'db_*'   latency histograms\n"
      "  ftjit attach -p 1234 --plugin trace --format perfetto -o trace.pb --duration 2");
  cmd->callback([run, o] { *run = [o] { return run_attach(*o); }; });
}

}  // namespace ftjit::cli
