// SPDX-License-Identifier: MIT
// ftjit: trace functions of a program built with -fpatchable-function-entry.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <functional>

#include "cli/commands.h"
#include "cli/option_values.h"

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
  std::function<int()> run;
  ftjit::cli::add_run_command(app, &run);
  ftjit::cli::add_attach_command(app, &run);
  ftjit::cli::add_detach_command(app, &run);
  ftjit::cli::add_status_command(app, &run);
#if FTJIT_HAVE_DIFF
  ftjit::cli::add_diff_command(app, &run);
  ftjit::cli::add_report_command(app, &run);
#endif
  ftjit::cli::add_plugins_command(app, &run);
  ftjit::cli::add_list_command(app, &run);
  ftjit::cli::add_bench_command(app, &run);
  ftjit::cli::add_generator_command(app, &run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ftjit::cli::exit_on_parse_error(app, e, "ftjit");
  }
  return run ? run() : 2;
}
