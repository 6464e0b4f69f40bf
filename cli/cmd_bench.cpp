// SPDX-License-Identifier: MIT
// `ftjit bench [ARGS...]`: runs ftjit-bench (the measurements of the
// README: dispatch strategies, exit hooks, plugins, attach time, sizes)
// with the given arguments.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace ftjit::cli {

namespace {

// Next to this executable first (an install puts both in bin/), then where
// the build put it.
std::string bench_binary() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    std::string dir(self);
    dir.resize(dir.rfind('/') + 1);
    std::string beside = dir + "ftjit-bench";
    if (access(beside.c_str(), X_OK) == 0) return beside;
  }
#ifdef FTJIT_BENCH_BINARY
  if (access(FTJIT_BENCH_BINARY, X_OK) == 0) return FTJIT_BENCH_BINARY;
#endif
  return "";
}

int run_bench(const std::vector<std::string>& args) {
  const std::string bin = bench_binary();
  if (bin.empty()) {
    std::fprintf(stderr, "ftjit bench: ftjit-bench not found (built with -DFTJIT_BENCH=OFF?)\n");
    return 1;
  }
  std::vector<char*> argv;
  // Its name in usage lines and refusals is the command the user typed.
  static char program_name[] = "ftjit bench";
  argv.push_back(program_name);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(bin.c_str(), argv.data());
  std::fprintf(stderr, "ftjit bench: cannot run %s: %s\n", bin.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace

void add_bench_command(CLI::App& app, std::function<int()>* run) {
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure what tracing costs here (ftjit-bench; 'ftjit bench --help' for its options)");
  cmd->prefix_command();  // everything after `bench` is ftjit-bench's
  cmd->set_help_flag();
  cmd->callback([run, cmd] {
    std::vector<std::string> args = cmd->remaining();
    *run = [args] { return run_bench(args); };
  });
}

}  // namespace ftjit::cli
