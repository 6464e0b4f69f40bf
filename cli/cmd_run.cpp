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
#include "cli/guest_program.h"
#include "cli/session_driver.h"

namespace ftjit::cli {
namespace {

struct RunOptions {
  TraceOptions trace;
  std::string sysroot;  // a guest program's root under qemu-user
  std::vector<std::string> argv;
};

// How long the preloaded agent holds main() for the attach.
constexpr int kAgentWaitMs = 30000;

int run_run(const RunOptions& o) {
  PhaseClock phases;
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ftjit run: %s\n", message.c_str());
    return 1;
  };
  // A program of another ISA runs under qemu-user, with that ISA's agent
  // (guest_program.h); everything it needs is checked before it starts.
  auto program = inspect_program(o.argv[0]);
  if (!program) return fail(program.error().message);
  if (program->isa == Isa::kUnknown && program->e_machine != 0) {
    return fail(program->path + " is an ELF program for machine " + std::to_string(program->e_machine) +
                ", which ftjit has no backend for (x86-64, arm64 and riscv64 it has)");
  }
  const bool guest = program->isa != Isa::kUnknown && program->isa != host_isa();
  if (!guest && !o.sysroot.empty()) {
    return fail("--sysroot is for programs of another ISA, run under qemu-user; " + program->path +
                " runs natively");
  }
  std::vector<std::string> argv = o.argv;
  TraceOptions trace = o.trace;
  std::string preload;
  if (guest) {
    if (auto st = check_guest_isa(program->isa, o.argv[0]); !st) return fail(st.error().message);
    auto agent = find_guest_agent_library(program->isa);
    if (!agent) return fail(agent.error().message);
    // The guest's built-in plugins: beside its agent, as the build tree
    // (lib/, plugins/lib/) and an installed prefix (lib/ftjit/<isa>/plugins/) lay them out.
    const std::string agent_dir = agent->substr(0, agent->rfind('/'));
    trace.plugin_dirs = {agent_dir + "/plugins", agent_dir + "/../plugins/lib"};
    trace.plugin_isa = isa_name(program->isa);
    auto cmd = guest_command(program->isa, o.sysroot, *agent,
                             {"FTJIT_AGENT_WAIT_MS=" + std::to_string(kAgentWaitMs)}, o.argv);
    if (!cmd) return fail(cmd.error().message);
    argv = std::move(*cmd);
  } else {
    auto agent = find_agent_library();
    if (!agent) return fail(agent.error().message);
    preload = *agent;
    if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && *old != '\0') {
      preload += ":" + std::string(old);
    }
  }
  pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "ftjit run: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    if (!guest) {
      ::setenv("LD_PRELOAD", preload.c_str(), 1);
      ::setenv("FTJIT_AGENT_WAIT_MS", std::to_string(kAgentWaitMs).c_str(), 1);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
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
  return drive_session(target, trace);
}

std::vector<std::string> g_program_arguments;

}  // namespace

void set_run_program_arguments(std::vector<std::string> args) { g_program_arguments = std::move(args); }

void add_run_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Start a program with tracer plugins attached");
  add_trace_options(cmd, &o->trace);
  cmd->add_option("--sysroot", o->sysroot,
                  "For a program of another ISA (run under qemu-user): the root its loader and "
                  "libc come from (default /usr/<triple>, e.g. /usr/aarch64-linux-gnu)");
  cmd->add_option("PROG", o->argv, "The program and its arguments (after --)")->required();
  cmd->footer(
      "Examples:\n"
      "  ftjit run -- ./server --port 8080\n"
      "  ftjit run --plugin count --format tsv --filter 'parse_*' -- ./tool input\n"
      "  ftjit run --plugin trace --format perfetto -o trace.pb -- ./app\n"
      "  ftjit run --plugin trace:format=chrome,output=t.json --plugin count:format=json,output=c.json -- ./app\n"
      "  ftjit run --plugin flame --format pprof -o flame.pb.gz -- ./app   (go tool pprof flame.pb.gz)\n"
      "  ftjit run --plugin count -- ./arm64_app       (under qemu-aarch64)");
  cmd->callback([run, o] {
    *run = [o] {
      o->argv.insert(o->argv.end(), g_program_arguments.begin(), g_program_arguments.end());
      return run_run(*o);
    };
  });
}

}  // namespace ftjit::cli
