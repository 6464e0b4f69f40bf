// SPDX-License-Identifier: MIT
// `ftjit detach -p PID`: ends the tracing session in PID (one a killed
// `ftjit attach` left behind, or one still running) and prints its report.
#include <cstdio>
#include <memory>

#include "cli/agent_client.h"
#include "cli/agent_unload.h"
#include "cli/commands.h"
#include "cli/option_values.h"
#include "runtime/control/latency_slice.h"

namespace ftjit::cli {
namespace {

struct DetachOptions {
  int pid = 0;
  bool no_report = false;
  bool keep_agent = false;
};

int run_detach(const DetachOptions& o) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ftjit detach: %s\n", message.c_str());
    return 1;
  };
  bool unloaded = false;
  auto conn = connect_finishing_unload(o.pid, &unloaded);
  if (!conn && unloaded && !o.keep_agent) return 0;  // what a killed `ftjit` left is gone now
  if (!conn) return fail(conn.error().message);
  if (!(*conn)->hello().attached && o.keep_agent) {
    return fail("process " + std::to_string(o.pid) + " is not being traced");
  }
  // Detaching may need code (other plugins' sites re-routed): serve it.
  auto generator = GeneratorService::start(o.pid);
  if (!generator) return fail(generator.error().message);
  control::Detach d;
  d.report = !o.no_report;
  d.unload = !o.keep_agent;
  Result<control::Reply> reply = [&] {
    control::RaisedPriorityFor raised(agent_thread_id(o.pid));  // latency_slice.h: why
    return (*conn)->request(control::MsgType::kDetach, control::encode(d));
  }();
  if (!reply) return fail(reply.error().message);
  std::fwrite(reply->text.data(), 1, reply->text.size(), stdout);
  if (reply->code != 0) return fail(reply->message);
  if (!o.keep_agent) {
    generator->reset();
    if (auto st = unload_agent(o.pid, **conn); !st) return fail(st.error().message);
  }
  return 0;
}

}  // namespace

void add_detach_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<DetachOptions>();
  CLI::App* cmd = app.add_subcommand("detach", "Detach the tracers from a process and print the report");
  accept_process_id(cmd->add_option("-p,--pid", o->pid, "The traced process")->required());
  cmd->add_flag("--no-report", o->no_report, "Detach without the plugins' report");
  cmd->add_flag("--keep-agent", o->keep_agent,
                "Leave the agent loaded (inert). By default it is unloaded: every hook it "
                "installed is undone and the process dlcloses it (also when nothing is attached)");
  cmd->callback([run, o] { *run = [o] { return run_detach(*o); }; });
}

}  // namespace ftjit::cli
