// SPDX-License-Identifier: MIT
// The options `ftjit run` and `ftjit attach` share (which plugins, which
// functions, which threads, how, where the report goes), and the Attach
// request they become.
#pragma once

#include <string>
#include <vector>

#include "cli/arg_capture_request.h"
#include "cli/record_options.h"
#include "core/error.h"
#include "runtime/control/protocol.h"

// CLI11 is header-only and large: declared here, included only where the
// options are declared (trace_options.cpp, the commands' files).
namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace ftjit::cli {

// A format the CLI makes from a plugin's JSON report (report_output.h):
// pprof's gzipped profile.proto, from flame's stacks.
inline constexpr const char* kPprofFormat = "pprof";

struct TraceOptions {
  std::vector<std::string> plugins;   // NAME[:k=v,...] or PATH.so[:k=v,...]
  std::vector<std::string> plugin_options;  // --opt [PLUGIN.]KEY=VALUE
  std::vector<std::string> include, exclude;
  std::vector<int32_t> tids;
  std::string thread_glob;
  bool main_thread = false;
  std::string strategy = "auto";
  std::string saves = "auto";
  bool relocate = false;
  std::string format;
  std::string output;   // -o FILE; empty: stdout
  double duration = 0;  // seconds; 0: until Ctrl-C (attach) or exit (run)
  bool verbose = false;
  // The plugins' event buffers: "" (block with -o FILE, else drop), drop,
  // overwrite or block; bytes per thread ("" the plugin's default: the
  // text as given, parsed by option_values.h); block's bound in seconds.
  std::string buffer_policy;
  std::string buffer_size;
  double buffer_wait = 1.0;
  // Where built-in plugins are looked for first, and only: set for a
  // program of another ISA (`ftjit run` under qemu-user), whose agent
  // loads plugins built for its ISA, not this machine's.
  std::vector<std::string> plugin_dirs;
  std::string plugin_isa;  // their ISA, for messages ("arm64")
  // --args, --retval, --when: built per process by drive_session
  // (arg_capture_request.h). --args may come without a GLOB: its option
  // says whether it was given (arg_options()).
  ArgOptions args;
  const CLI::Option* args_option = nullptr;
  // --depth, --min-duration, --sample, the triggers (record_options.h).
  RecordOptions record;
  bool live = false;  // --live: `ftjit control` may change what is recorded

  ArgOptions arg_options() const;
};

// Adds the options to `cmd`.
void add_trace_options(CLI::App* cmd, TraceOptions* o);

// A report file the CLI opens for the agent (report_output.h): -o FILE for
// the plugins without one of their own (plugin < 0), or a plugin's own
// output=FILE. In the order their fds go with the request: -o first.
struct PlannedOutput {
  std::string path;
  bool pprof = false;  // made here from the plugin's JSON
  int plugin = -1;     // index into Attach::plugins, or -1 for -o
};

// The request: plugins resolved to absolute paths here (the agent runs in
// the target, whose directories are not ours), options checked as far as
// can be done without loading the plugin into the target, each plugin's
// format and file (its spec's host keys format= and output=, else --format
// and -o) settled: `outputs` (if given) gets the files to open. Fails with
// one line naming the option or plugin and what is wrong.
Result<control::Attach> make_attach_request(const TraceOptions& o, std::vector<PlannedOutput>* outputs = nullptr);

}  // namespace ftjit::cli
