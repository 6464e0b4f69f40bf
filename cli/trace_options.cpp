// SPDX-License-Identifier: MIT
#include "cli/trace_options.h"

#include <CLI/CLI.hpp>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "cli/option_values.h"
#include "runtime/plugin_host/plugin_host.h"

namespace ftjit::cli {

ArgOptions TraceOptions::arg_options() const {
  ArgOptions a = args;
  a.globs.clear();
  for (const std::string& g : args.globs) {
    if (!g.empty()) a.globs.push_back(g);
  }
  a.args = args_option != nullptr && args_option->count() > 0;
  return a;
}

void add_trace_options(CLI::App* cmd, TraceOptions* o) {
  cmd->add_option("--plugin", o->plugins,
                  "Tracer plugin: a built-in name (see `ftjit plugins`) or a path, with options: "
                  "count:top=10; format=F and output=FILE (ftjit's keys) give it a report format and "
                  "file of its own: trace:format=chrome,output=t.json. Repeatable. Default: count")
      ->type_name("NAME|PATH[:K=V,...]");
  cmd->add_option("--opt", o->plugin_options,
                  "A plugin option, KEY=VALUE (one plugin) or PLUGIN.KEY=VALUE. Repeatable")
      ->type_name("[PLUGIN.]KEY=VALUE");
  cmd->add_option("--filter", o->include,
                  "Trace functions matching GLOB (mangled or demangled; MODULE!GLOB for one "
                  "module). Repeatable. Default: every patchable function")
      ->type_name("GLOB");
  cmd->add_option("--exclude", o->exclude, "Leave out functions matching GLOB. Repeatable")
      ->type_name("GLOB");
  accept_process_id(cmd->add_option("--tid", o->tids, "Trace only these threads. Repeatable"),
                    "a thread id")
      ->type_name("TID");
  cmd->add_option("--thread", o->thread_glob, "Trace only threads whose name matches GLOB")
      ->type_name("GLOB");
  cmd->add_flag("--main-thread", o->main_thread, "Trace only the main thread");
  cmd->add_flag("--relocate", o->relocate,
                "Also trace matched functions that have no patchable entry (libc, distribution "
                "libraries) by relocating their first instructions into a stub (x86-64, arm64); "
                "functions with one are always traced there. Each function that cannot be relocated "
                "safely is named with its reason (see `ftjit list --relocate`)");
  cmd->add_option("--strategy", o->strategy, "How sites reach the tracer")
      ->check(CLI::IsMember({"auto", "generated", "call-ops", "list"}))
      ->default_str("auto");
  cmd->add_option("--saves", o->saves,
                  "Registers trampolines keep around callbacks: 'abi' the psABI's argument "
                  "registers, 'all' every call-clobbered one, 'auto' per module from its debug "
                  "info (abi where GCC shows -fpatchable-function-entry, else all)")
      ->check(CLI::IsMember({"auto", "abi", "all"}))
      ->default_str("auto");
  cmd->add_option("--format", o->format, "Report format: text, json, tsv, chrome, perfetto, "
                                         "folded, svg, speedscope (what the plugins support; default: "
                                         "theirs), or pprof (flame, made by ftjit from its json; needs -o)");
  cmd->add_option("-o,--output", o->output, "Write the report to FILE instead of stdout")
      ->type_name("FILE");
  accept_positive_seconds(cmd->add_option("--duration", o->duration, "Detach after SECONDS"))
      ->type_name("SECONDS");
  cmd->add_option("--buffer-policy", o->buffer_policy,
                  "When a thread's event buffer is full: 'drop' the new event, 'overwrite' the "
                  "oldest (a flight recorder: the last --buffer-size of each thread, written at "
                  "detach or on SIGUSR1), 'block' until the writer has room (at most "
                  "--buffer-wait, then drop). Default: block with -o FILE, else drop")
      ->check(CLI::IsMember({"drop", "overwrite", "block"}))
      ->type_name("POLICY");
  accept_byte_size(cmd->add_option("--buffer-size", o->buffer_size,
                                   "Event buffer per thread and plugin, in bytes (K, M, G: "
                                   "binary units). Default: the plugin's (trace: 2M)"),
                   1, plugins::kMaxBufferBytes, "a size from 1 byte to 1G (e.g. 512K, 64M)")
      ->type_name("SIZE");
  accept_positive_seconds(cmd->add_option("--buffer-wait", o->buffer_wait,
                                          "With --buffer-policy block: how long a thread waits "
                                          "for a writer that frees nothing, then drops (and "
                                          "counts) its event. Default: 1"),
                          plugins::kMaxBufferWaitMs / 1000.0, "an hour")
      ->type_name("SECONDS");
  o->args_option = cmd->add_option("--args", o->args.globs,
                  "Record each traced function's arguments and return value, typed from its "
                  "module's DWARF (in the file, by build-id or .gnu_debuglink); with GLOB, only "
                  "for functions matching it (repeatable). Plugins that show them: trace")
      ->expected(0, 1)
      ->type_name("[GLOB]");
  cmd->add_flag("--retval", o->args.retval, "Record return values (alone: without the arguments)");
  cmd->add_option("--args-string-max", o->args.string_max,
                  "Bytes of a char * argument copied at entry (default 32)")
      ->check(CLI::Range(1u, kMaxStringCapture))
      ->type_name("BYTES");
  cmd->add_option("--when", o->args.when,
                  "Record only calls whose arguments meet a condition: 'FUNC: PARAM OP VALUE "
                  "[&& ...]', OP one of == != < <= > >= ^= (string prefix), VALUE an integer, "
                  "an enumerator, true/false, 'c' or \"text\". Repeatable")
      ->type_name("COND");
  cmd->add_option("--by-arg", o->args.by_arg,
                  "count and latency: group each traced function's calls by the value of its "
                  "parameter NAME at entry (from DWARF: integers, bools, chars, enums by name, "
                  "pointers, char * by its first 64 bytes); functions without one are one row")
      ->type_name("NAME");
  add_record_options(cmd, &o->record);
  cmd->add_flag("--live", o->live,
                "Keep a record gate in front of the plugins so that `ftjit control` can pause, "
                "resume and narrow recording while attached (each call pays for the gate; no "
                "inline work)");
  cmd->add_flag("-v,--verbose", o->verbose, "Say what is done, on stderr");
  // One value per occurrence of a repeatable option: otherwise CLI11 lets
  // it take the words that follow, and takes a `--` after it as the end of
  // its values, so that `run --filter F -- PROG -x` read PROG's -x as an
  // option of ftjit's.
  for (CLI::Option* opt : cmd->get_options()) {
    if (opt->nonpositional() && opt->get_items_expected_max() > 1) opt->allow_extra_args(false);
  }
}

namespace {

Error invalid(const std::string& message) { return make_error(FTJIT_E_INVALID_ARGUMENT, message); }

// Each plugin's format and file, from its spec's host keys, --format and
// -o: what the agent is asked for (pprof is made here from json) and the
// files to open, each written by one report only.
Status plan_outputs(const TraceOptions& o, const std::vector<plugins::PluginSpec>& specs, control::Attach* a,
                    std::vector<PlannedOutput>* outputs) {
  bool session_output_used = false;
  std::vector<PlannedOutput> own;
  for (size_t i = 0; i < specs.size(); ++i) {
    const plugins::PluginSpec& spec = specs[i];
    control::PluginRequest& request = a->plugins[i];
    const std::string& format = spec.format.empty() ? o.format : spec.format;
    const std::string where = spec.format.empty() ? "--format pprof" : "--plugin " + spec.name + ":format=pprof";
    request.format = spec.format;
    std::string path = spec.output;
    if (format == kPprofFormat) {
      if (spec.name != "flame") {
        return invalid(where + ": only the flame plugin's report converts to pprof, not " + spec.name + "'s");
      }
      // A binary file of its own: -o, when it does not name one itself.
      if (path.empty()) path = o.output;
      if (path.empty()) {
        return invalid(where + " writes a binary (gzipped) file: give -o FILE or " + spec.name + ":output=FILE");
      }
      request.format = "json";
    }
    if (path.empty()) {
      session_output_used = true;
      continue;
    }
    for (const PlannedOutput& other : own) {
      if (other.path == path) {
        return invalid("output '" + path + "' given to two plugins (" + specs[other.plugin].name + " and " +
                       spec.name + "): each report needs a file of its own");
      }
    }
    own.push_back({path, format == kPprofFormat, static_cast<int>(i)});
    request.output_fd = 1;
  }
  const bool output_taken = std::any_of(own.begin(), own.end(), [&](const PlannedOutput& p) {
    return p.path == o.output && specs[p.plugin].output.empty();
  });
  if (!o.output.empty() && !session_output_used && !output_taken) {
    return invalid("-o " + o.output + ": every plugin has a file of its own (output=), nothing would go there");
  }
  if (!o.output.empty() && session_output_used) {
    for (const PlannedOutput& p : own) {
      if (p.path == o.output) {
        return invalid("-o " + o.output + " is " + specs[p.plugin].name + "'s " + (p.pprof ? "pprof profile" : "file") +
                       " alone: give the other plugins output=FILE");
      }
    }
    if (outputs != nullptr) outputs->push_back({o.output, false, -1});
    a->output_fd = 1;
  }
  if (outputs != nullptr) outputs->insert(outputs->end(), own.begin(), own.end());
  // The session's format: pprof is no plugin's (each flame asks for json).
  if (a->format == kPprofFormat) a->format = "json";
  return {};
}

}  // namespace

Result<control::Attach> make_attach_request(const TraceOptions& o, std::vector<PlannedOutput>* outputs) {
  control::Attach a;
  std::vector<std::string> specs = o.plugins;
  if (specs.empty()) specs.push_back("count");
  std::vector<plugins::PluginSpec> parsed;
  for (const std::string& text : specs) {
    auto spec = plugins::parse_plugin_spec(text);
    if (!spec) return spec.take_error();
    parsed.push_back(std::move(spec.value()));
  }
  for (const std::string& item : o.plugin_options) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, "--opt '" + item + "': expected [PLUGIN.]KEY=VALUE");
    }
    std::string key = item.substr(0, eq);
    std::string value = item.substr(eq + 1);
    plugins::PluginSpec* target = nullptr;
    std::string name;
    if (size_t dot = key.find('.'); dot != std::string::npos) {
      name = key.substr(0, dot);
      key = key.substr(dot + 1);
    }
    for (const char* host : plugins::kHostKeys) {
      if (key == host) {
        return invalid("--opt '" + item + "': " + key + " is ftjit's, not a plugin option: write --plugin " +
                       (name.empty() ? std::string("NAME") : name) + ":" + key + "=" + value);
      }
    }
    if (!name.empty()) {
      for (auto& p : parsed) {
        if (p.name == name) target = &p;
      }
      if (target == nullptr) {
        return make_error(FTJIT_E_INVALID_ARGUMENT, "--opt '" + item + "': no --plugin " + name);
      }
    } else if (parsed.size() == 1) {
      target = &parsed[0];
    } else {
      return make_error(FTJIT_E_INVALID_ARGUMENT,
                        "--opt '" + item + "': several plugins; write PLUGIN." + key + "=VALUE");
    }
    target->options.emplace_back(key, value);
  }
  if (!o.args.by_arg.empty()) {
    bool groups = false;
    std::string names;
    for (const auto& spec : parsed) {
      groups = groups || spec.is_path() || spec.name == "count" || spec.name == "latency";
      names += (names.empty() ? "" : ", ") + spec.name;
    }
    if (!groups) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, "--by-arg " + o.args.by_arg +
                                                      ": only the count and latency plugins group by an argument "
                                                      "(--plugin " + names + ")");
    }
  }
  for (const auto& spec : parsed) {
    Result<std::string> path = std::string();
    if (!o.plugin_dirs.empty() && !spec.is_path()) {
      const std::string file = "ftjit-plugin-" + spec.name + ".so";
      std::string tried;
      for (const std::string& dir : o.plugin_dirs) {
        if (::access((dir + "/" + file).c_str(), F_OK) == 0) {
          path = dir + "/" + file;
          break;
        }
        tried += (tried.empty() ? "" : ", ") + dir;
      }
      if (path->empty()) {
        return make_error(FTJIT_E_INVALID_ARGUMENT, "plugin '" + spec.name + "': no " + o.plugin_isa +
                                                        " build of it (" + file + " in " + tried + ")");
      }
    } else {
      path = plugins::find_plugin_file(spec);
    }
    if (!path) return path.take_error();
    char real[PATH_MAX];
    if (::realpath(path->c_str(), real) == nullptr) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, "plugin '" + spec.name + "': " + *path + " not found");
    }
    control::PluginRequest p;
    p.path = real;
    p.options = spec.options;
    a.plugins.push_back(std::move(p));
  }
  a.include = o.include;
  a.exclude = o.exclude;
  a.strategy = o.strategy == "generated" ? FTJIT_STRATEGY_GENERATED
               : o.strategy == "call-ops" ? FTJIT_STRATEGY_CALL_OPS
               : o.strategy == "list"     ? FTJIT_STRATEGY_LIST
                                          : FTJIT_STRATEGY_AUTO;
  a.format = o.format;
  if (auto st = plan_outputs(o, parsed, &a, outputs); !st) return st.take_error();
  a.tids = o.tids;
  a.thread_glob = o.thread_glob;
  a.main_thread = o.main_thread;
  a.owner_pid = ::getpid();
  a.saves = o.saves == "abi" ? FTJIT_SAVES_ABI : o.saves == "all" ? FTJIT_SAVES_ALL : FTJIT_SAVES_AUTO;
  // A file is meant to hold every event. A report for stdout comes back
  // through the agent's memory at the end, where dropping keeps it bounded.
  bool to_files = !o.output.empty();
  for (const auto& p : a.plugins) to_files = to_files || p.output_fd != 0;
  auto policy = plugins::parse_buffer_policy(
      !o.buffer_policy.empty() ? o.buffer_policy : to_files ? "block" : "drop");
  if (!policy) return policy.take_error();
  a.buffer_policy = static_cast<uint8_t>(policy.value());
  if (!o.buffer_size.empty()) {
    unsigned long long bytes = 0;
    if (!detail::parse_byte_size(o.buffer_size, &bytes) || bytes == 0 || bytes > plugins::kMaxBufferBytes) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, "--buffer-size " + o.buffer_size +
                                                      ": must be a size from 1 byte to 1G");
    }
    a.buffer_bytes = bytes;
  }
  a.buffer_wait_ms = static_cast<uint32_t>(std::ceil(o.buffer_wait * 1000.0));
  a.relocate = o.relocate ? 1 : 0;
  auto record = parse_record_options(o.record);
  if (!record) return record.take_error();
  a.record = std::move(record.value());
  a.live = o.live ? 1 : 0;
  return a;
}

}  // namespace ftjit::cli
