// SPDX-License-Identifier: MIT
// ftjit-bench: measures ftjit's dispatch strategies on this machine (calls),
// attach/detach over 20k..1M sites (attach) and trampoline sizes (sizes).
//
// Output goes to stdout (a table, or one JSON object with --json); progress
// and log lines go to stderr so the JSON stays parseable. Exit status is 1
// when any correctness check failed (counters, site counts, attach/detach
// errors), CLI11's own non-zero code on bad options.
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "cli/option_values.h"

#ifndef FTJIT_BENCH_SITES_DIR
#define FTJIT_BENCH_SITES_DIR "."
#endif

namespace {

using ftjit_bench::BenchOptions;
using ftjit_bench::Report;

bool wants(const BenchOptions &opts, const char *section) {
  return std::find(opts.sections.begin(), opts.sections.end(), "all") != opts.sections.end() ||
         std::find(opts.sections.begin(), opts.sections.end(), section) != opts.sections.end();
}

}  // namespace

int main(int argc, char **argv) {
  BenchOptions opts;
  opts.sections = {"all"};
  opts.sites_dir = FTJIT_BENCH_SITES_DIR;
  bool json = false;
  bool verbose = false;

  CLI::App app{"ftjit-bench: dispatch cost, attach time and trampoline size of ftjit"};
  app.add_option("--section", opts.sections, "Sections to run (repeatable or comma list)")
      ->delimiter(',')
      ->check(CLI::IsMember({"all", "calls", "hooks", "plugins", "peers", "attach", "sizes", "programs", "relocated", "cli",
                             "writer"}))
      ->capture_default_str();
  app.add_flag("--json", json, "Print one JSON object instead of tables");
  ftjit::cli::accept_whole_number(
      app.add_option("--reps", opts.reps,
                     "Repetitions per measurement; rows show the median, min and max"),
      1, 1000, "a whole number from 1 to 1000")
      ->capture_default_str();
  ftjit::cli::accept_whole_number(
      app.add_option("--calls", opts.calls, "Calls per timed repetition (calls section)"),
      100'000, 1'000'000'000, "a whole number from 100000 to 1000000000")
      ->capture_default_str();
  std::string clock = "cpu";
  app.add_option("--clock", clock,
                 "calls: 'cpu' = thread CPU time (robust to other load), 'wall' = elapsed")
      ->check(CLI::IsMember({"cpu", "wall"}))
      ->capture_default_str();
  app.add_flag("--full", opts.full, "calls: full 6x6 relevant x irrelevant cross product");
  app.add_option("--strategy", opts.strategies, "calls: strategies to run (default all four)")
      ->delimiter(',')
      ->check(CLI::IsMember({"list", "call-ops", "generated", "direct"}));
  app.add_option("--sites", opts.site_sets,
                 "attach: site libraries to use (default every one built)")
      ->delimiter(',')
      ->check(CLI::IsMember({"20k", "100k", "1m", "1m-clang", "20k-clang14"}));
  app.add_option("--sites-dir", opts.sites_dir, "attach: directory of bench_sites_*.so")
      ->capture_default_str();
  app.add_flag("-v,--verbose", verbose, "Log progress to stderr");
  // One line on a refused option, named as the user called us: `ftjit
  // bench` passes "ftjit bench" as argv[0].
  std::string program = argv[0];
  program = program.substr(program.rfind('/') + 1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return ftjit::cli::exit_on_parse_error(app, e, program);
  }
  opts.cpu_clock = clock == "cpu";

  // Logs to stderr only: stdout is reserved for the result.
  auto logger = spdlog::stderr_color_mt("ftjit-bench");
  logger->set_pattern("[%H:%M:%S.%e] %v");
  logger->set_level(verbose ? spdlog::level::info : spdlog::level::warn);
  spdlog::set_default_logger(logger);

  Report report;
  report.meta() = ftjit_bench::machine_info();
  report.meta()
      .set("api_version", FTJIT_API_VERSION)
      .set("calls", opts.calls)
      .set("reps", opts.reps)
      .set("full", opts.full)
      .set("clock", opts.cpu_clock ? "thread-cpu" : "wall")
      .set("load_at_start", ftjit_bench::load_average());

  // sizes and calls first: attach dlopens libraries of up to 1M functions,
  // and although it closes them, leaving the small sections unaffected by
  // whatever the loader keeps around is cheaper than arguing it is.
  if (wants(opts, "sizes")) ftjit_bench::run_sizes_section(opts, report);
  if (wants(opts, "calls")) ftjit_bench::run_calls_section(opts, report);
  if (wants(opts, "hooks")) ftjit_bench::run_hooks_section(opts, report);
  if (wants(opts, "relocated")) ftjit_bench::run_relocated_section(opts, report);
  if (wants(opts, "plugins")) ftjit_bench::run_plugins_section(opts, report);
  if (wants(opts, "writer")) ftjit_bench::run_writer_section(opts, report);
  if (wants(opts, "peers")) ftjit_bench::run_peers_section(opts, report);
  if (wants(opts, "attach")) ftjit_bench::run_attach_section(opts, report);
#ifdef FTJIT_BENCH_CLI
  if (wants(opts, "programs")) ftjit_bench::run_programs_section(opts, report);
  if (wants(opts, "cli")) ftjit_bench::run_cli_section(opts, report);
#endif

  report.meta().set("load_at_end", ftjit_bench::load_average());
  if (json) {
    report.write_json(stdout);
  } else {
    report.write_text(stdout);
  }
  std::fflush(stdout);
  return report.failed() ? 1 : 0;
}
