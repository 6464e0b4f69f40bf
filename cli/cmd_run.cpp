// SPDX-License-Identifier: MIT
// `ftjit run [opts] -- PROG ARGS...`: starts PROG with the agent preloaded;
// the agent holds PROG's main() until the plugins are attached, so nothing
// runs untraced. PROG's exit status is ftjit's.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/agent_client.h"
#include "cli/commands.h"
#include "cli/session_driver.h"

namespace ftjit::cli {
namespace {

struct RunOptions {
  TraceOptions trace;
  std::vector<std::string> argv;
};

// How long the preloaded agent holds main() for the attach.
constexpr int kAgentWaitMs = 30000;

int run_run(const RunOptions& o) {
  PhaseClock phases;
  auto agent = find_agent_library();
  if (!agent) {
    std::fprintf(stderr, "ftjit run: %s\n", agent.error().message.c_str());
    return 1;
  }
  std::string preload = *agent;
  if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && *old != '\0') {
    preload += ":" + std::string(old);
  }
  pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "ftjit run: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    ::setenv("LD_PRELOAD", preload.c_str(), 1);
    ::setenv("FTJIT_AGENT_WAIT_MS", std::to_string(kAgentWaitMs).c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : o.argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "ftjit run: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  phases.end("start the program");
  DriveTarget target;
  target.phases = &phases;
  target.command = "ftjit run";
  target.pid = child;
  target.is_child = true;
  target.connect_wait_ms = 10000;
  return drive_session(target, o.trace);
}

}  // namespace

void add_run_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Start a program with tracer plugins attached");
  add_trace_options(cmd, &o->trace);
  cmd->add_option("PROG", o->argv, "The program and its arguments (after --)")->required();
  cmd->footer(
      "Examples:\n"
      "  ftjit run -- ./server --port 8080\n"
      "  ftjit run --plugin count --format tsv --filter 'parse_*' -- ./tool input\n"
      "  ftjit run --plugin trace --format perfetto -o trace.pb -- ./app");
  cmd->callback([run, o] { *run = [o] { return run_run(*o); }; });
}

}  // namespace ftjit::cli
