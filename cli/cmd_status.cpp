// SPDX-License-Identifier: MIT
// `ftjit status -p PID`: what the agent in PID has attached, per site
// (like ftrace's enabled_functions), its sleds, trampolines and drops.
#include <cstdio>
#include <memory>

#include "cli/agent_client.h"
#include "cli/commands.h"
#include "cli/option_values.h"

namespace ftjit::cli {
namespace {

struct StatusOptions {
  int pid = 0;
  bool summary = false;
};

int run_status(const StatusOptions& o) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ftjit status: %s\n", message.c_str());
    return 1;
  };
  auto conn = AgentConnection::connect(o.pid);
  if (!conn) return fail(conn.error().message);
  control::StatusQuery q;
  q.sites = !o.summary;
  auto reply = (*conn)->request(control::MsgType::kStatus, control::encode(q), -1, 30000);
  if (!reply) return fail(reply.error().message);
  if (reply->code != 0) return fail(reply->message);
  std::printf("pid: %d\n", o.pid);
  std::fwrite(reply->text.data(), 1, reply->text.size(), stdout);
  return 0;
}

}  // namespace

void add_status_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<StatusOptions>();
  CLI::App* cmd = app.add_subcommand("status", "Show what is attached in a traced process");
  accept_process_id(cmd->add_option("-p,--pid", o->pid, "The traced process")->required());
  cmd->add_flag("--summary", o->summary, "Counts only, not every enabled site");
  cmd->callback([run, o] { *run = [o] { return run_status(*o); }; });
}

}  // namespace ftjit::cli
