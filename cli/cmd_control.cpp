// SPDX-License-Identifier: MIT
// `ftjit control -p PID`: changes what a session records while it runs:
// pause and resume (the sites unpatched and patched again), the filter
// (patched and unpatched in one batch), a flush; and, in a session
// attached with --live or any record option, the depth, the sampling and
// the minimum duration. Prints what is recorded afterwards, as `ftjit
// status` does.
#include <cstdio>
#include <memory>

#include "cli/agent_client.h"
#include "cli/commands.h"
#include "cli/option_values.h"
#include "cli/record_options.h"

namespace ftjit::cli {
namespace {

struct ControlOptions {
  int pid = 0;
  bool pause = false, resume = false, flush = false, every_function = false;
  RecordOptions record;  // depth, sample, min_duration only
  std::vector<std::string> include, exclude;
};

int run_control(const ControlOptions& o) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ftjit control: %s\n", message.c_str());
    return 1;
  };
  if (o.pause && o.resume) return fail("--pause and --resume: one or the other");
  control::Control c;
  c.has_paused = o.pause || o.resume;
  c.paused = o.pause;
  c.flush = o.flush;
  // The limits, parsed as `run` and `attach` parse them: "0" (for depth
  // and the minimum) and "1" (sampling) lift them.
  RecordOptions limits = o.record;
  const bool no_depth = limits.depth == "0", no_minimum = limits.min_duration == "0";
  if (no_depth) limits.depth.clear();
  if (no_minimum) limits.min_duration.clear();
  auto record = parse_record_options(limits);
  if (!record) return fail(record.error().message);
  if (!o.record.depth.empty()) {
    c.has_depth = 1;
    c.depth = record->max_depth;
  }
  if (!o.record.sample.empty()) {
    c.has_sample = 1;
    c.sample = record->sample_period;
  }
  if (!o.record.min_duration.empty()) {
    c.has_min_duration = 1;
    c.min_duration_ns = record->min_duration_ns;
  }
  if (!o.include.empty() || !o.exclude.empty() || o.every_function) {
    if (o.every_function && !o.include.empty()) return fail("--every-function and --filter: one or the other");
    c.has_filter = 1;
    c.include = o.include;
    c.exclude = o.exclude;
  }
  auto conn = AgentConnection::connect(o.pid);
  if (!conn) return fail(conn.error().message);
  if (!(*conn)->hello().attached) return fail("process " + std::to_string(o.pid) + " is not being traced");
  // A new filter may patch sites the session never had: their code comes
  // from here when the agent cannot make it (another ISA under qemu-user).
  auto generator = GeneratorService::start(o.pid);
  if (!generator) return fail(generator.error().message);
  auto reply = (*conn)->request(control::MsgType::kControl, control::encode(c), -1, 30000);
  if (!reply) return fail(reply.error().message);
  if (reply->code != 0) return fail(reply->message);
  std::printf("recording: %s\n", reply->message.c_str());
  return 0;
}

}  // namespace

void add_control_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<ControlOptions>();
  CLI::App* cmd = app.add_subcommand(
      "control", "Pause, resume, refilter a session while it runs; with --live, change its depth, sampling, minimum duration");
  accept_process_id(cmd->add_option("-p,--pid", o->pid, "The traced process")->required());
  cmd->add_flag("--pause", o->pause,
                "Stop recording: the plugins' sites are unpatched (a paused function costs what an "
                "untraced one does); frames open go on to their exits");
  cmd->add_flag("--resume", o->resume, "Patch the sites again and record");
  cmd->add_option("--depth", o->record.depth, "Record calls at most N traced frames deep (0: any)")
      ->type_name("N");
  cmd->add_option("--sample", o->record.sample, "Record 1 call in N of each function (1: every call)")
      ->type_name("N|1/N");
  cmd->add_option("--min-duration", o->record.min_duration, "Record calls of at least TIME (0: every call)")
      ->type_name("TIME");
  cmd->add_option("--filter", o->include,
                  "Trace these functions instead (replaces the session's filter: its sites are patched "
                  "and unpatched in one batch). Repeatable")
      ->type_name("GLOB");
  cmd->add_option("--exclude", o->exclude, "With --filter: leave these out. Repeatable")->type_name("GLOB");
  cmd->add_flag("--every-function", o->every_function, "Trace every patchable function (no filter)");
  cmd->add_flag("--flush", o->flush, "Then write what the buffers hold (a flight recorder's last events)");
  for (CLI::Option* opt : cmd->get_options()) {
    if (opt->nonpositional() && opt->get_items_expected_max() > 1) opt->allow_extra_args(false);
  }
  cmd->callback([run, o] { *run = [o] { return run_control(*o); }; });
}

}  // namespace ftjit::cli
