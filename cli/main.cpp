// SPDX-License-Identifier: MIT
// ftjit: trace functions of a program built with -fpatchable-function-entry.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/option_values.h"
#include "runtime/control/latency_slice.h"

namespace {

// The commands that wait on a target and its agent from their first step
// ask for short scheduler turns and a higher priority where they may
// (runtime/control/latency_slice.h) before anything else of theirs runs:
// the constructors of the libraries linked in and the command line's
// parsing are some 2.5 ms of CPU, and on a busy machine every turn of the
// CLI's waited behind every busy thread (`ftjit attach` on the demo
// service, five busy threads on two cores: each ms of the CLI's CPU took
// about 3 ms). glibc passes an executable's constructors its argc and
// argv. Not `ftjit run`: the program it starts would inherit both.
__attribute__((constructor(101))) void prompt_turns_for_control_commands(int argc, char** argv, char**) {
  if (argc < 2 || argv == nullptr || argv[1] == nullptr) return;
  for (std::string_view command : {"attach", "detach", "status", "control"}) {
    if (command == argv[1]) {
      (void)ftjit::control::request_short_slice();
      (void)ftjit::control::raise_own_priority();
      return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Logs go to stderr: stdout is the result, which scripts read.
  spdlog::set_default_logger(spdlog::stderr_color_mt("ftjit"));
  spdlog::set_pattern("ftjit: %v");

  CLI::App app{"ftjit: ftrace for processes. Traces functions compiled with "
               "-fpatchable-function-entry by patching their entry NOPs live."};
  app.footer(
      "Examples:\n"
      "  ftjit run -- ./server --port 8080     start a program with `count` attached\n"
      "  ftjit attach -p 1234 --duration 5     count calls in a running process for 5 s\n"
      "  ftjit attach -p 1234 --plugin latency --filter 'db_*'   until Ctrl-C\n"
      "  ftjit status -p 1234                  what is attached, per function\n"
      "  ftjit plugins                         the tracer plugins and their options\n"
      "  ftjit list ./server --filter 'http_*' patchable functions of a file\n"
      "  ftjit bench --section hooks           what tracing costs on this machine");
  app.require_subcommand(1);
  // The command a user named is the only one built (CLI11 makes every
  // option of every command up front: ~1 ms of the CLI's start, most of
  // it allocations of fresh pages); all of them for `--help`, a mistyped
  // command, or none.
  using AddCommand = void (*)(CLI::App&, std::function<int()>*);
  static constexpr std::pair<std::string_view, AddCommand> kCommands[] = {
      {"run", ftjit::cli::add_run_command},
      {"attach", ftjit::cli::add_attach_command},
      {"detach", ftjit::cli::add_detach_command},
      {"status", ftjit::cli::add_status_command},
      {"control", ftjit::cli::add_control_command},
#if FTJIT_HAVE_DIFF
      {"diff", ftjit::cli::add_diff_command},
      {"report", ftjit::cli::add_report_command},
#endif
      {"plugins", ftjit::cli::add_plugins_command},
      {"list", ftjit::cli::add_list_command},
      {"bench", ftjit::cli::add_bench_command},
      {"generator", ftjit::cli::add_generator_command},
  };
  const std::string_view named = argc > 1 ? argv[1] : "";
  const bool known = std::any_of(std::begin(kCommands), std::end(kCommands),
                                 [&](const auto& c) { return c.first == named; });
  std::function<int()> run;
  for (const auto& [name, add] : kCommands) {
    if (!known || name == named) add(app, &run);
  }
  // `run [opts] -- PROG ARGS...`: ARGS are PROG's, whatever they look
  // like. CLI11 sees PROG alone and run gets ARGS after: an option with an
  // optional value before the `--` (`--args`) takes the `--` as the end of
  // its values, and would leave PROG's `-x` to be read as ftjit's.
  std::vector<char*> words(argv, argv + argc);
  if (argc > 2 && std::string_view(argv[1]) == "run") {
    for (int i = 2; i + 1 < argc; ++i) {
      if (std::string_view(argv[i]) != "--") continue;
      ftjit::cli::set_run_program_arguments({argv + i + 2, argv + argc});
      words.resize(static_cast<size_t>(i) + 2);
      break;
    }
  }
  try {
    app.parse(static_cast<int>(words.size()), words.data());
  } catch (const CLI::ParseError& e) {
    return ftjit::cli::exit_on_parse_error(app, e, "ftjit");
  }
  return run ? run() : 2;
}
