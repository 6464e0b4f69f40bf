// SPDX-License-Identifier: MIT
// The `ftjit` subcommands: each file adds one to the CLI11 app and runs it.
// A command returns the process exit status; errors are one line on
// stderr ("ftjit list: ..."), stdout carries only the result.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace ftjit::cli {

// Adds the subcommand to `app`; `run` is set to what executes it once
// parsed.
void add_plugins_command(CLI::App& app, std::function<int()>* run);
void add_list_command(CLI::App& app, std::function<int()>* run);
void add_bench_command(CLI::App& app, std::function<int()>* run);
void add_run_command(CLI::App& app, std::function<int()>* run);
// The words after `run ... -- PROG`: PROG's arguments, kept from CLI11
// (main.cpp) and appended to PROG's when run runs.
void set_run_program_arguments(std::vector<std::string> args);
void add_attach_command(CLI::App& app, std::function<int()>* run);
void add_detach_command(CLI::App& app, std::function<int()>* run);
void add_status_command(CLI::App& app, std::function<int()>* run);
void add_control_command(CLI::App& app, std::function<int()>* run);
void add_generator_command(CLI::App& app, std::function<int()>* run);
// Host builds (nlohmann/json found): see cmd_diff.cpp, cmd_report.cpp.
void add_diff_command(CLI::App& app, std::function<int()>* run);
void add_report_command(CLI::App& app, std::function<int()>* run);

}  // namespace ftjit::cli
