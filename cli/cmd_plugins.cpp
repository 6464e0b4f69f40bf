// SPDX-License-Identifier: MIT
// `ftjit plugins`: the tracer plugins on the search path, with their
// options (type, default, help) and output formats.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/trace_options.h"
#include "runtime/plugin_host/plugin_host.h"

namespace ftjit::cli {

namespace {

int run_plugins() {
  auto found = plugins::list_plugins();
  if (!found) {
    std::fprintf(stderr, "ftjit plugins: %s\n", found.error().message.c_str());
    return 1;
  }
  if (found->empty()) {
    std::fprintf(stderr, "ftjit plugins: no plugin found (searched: %s)\n",
                 [] {
                   std::string dirs;
                   for (const auto& d : plugins::plugin_search_path()) {
                     dirs += (dirs.empty() ? "" : ":") + d;
                   }
                   return dirs;
                 }()
                     .c_str());
    return 1;
  }
  for (const plugins::PluginInfo& p : *found) {
    if (!p.error.empty()) {
      std::printf("%-10s (cannot be loaded: %s)\n", p.name.c_str(), p.error.c_str());
      continue;
    }
    std::printf("%-10s %s\n", p.name.c_str(), p.description.c_str());
    std::string formats;
    for (const auto& f : p.formats) formats += (formats.empty() ? "" : ", ") + f;
#ifdef FTJIT_HAVE_PPROF
    // Not the plugin's own: the CLI converts its json (cli/flame_pprof.h).
    if (p.name == "flame") formats += std::string(", ") + kPprofFormat + " (made by ftjit from json; needs -o)";
#endif
    std::printf("           formats: %s%s%s\n", formats.c_str(),
                p.hooks_exit ? "; hooks function exits" : "",
                p.inline_count     ? "; counts inline (compiled into the trampolines)"
                : p.inline_latency ? "; times calls inline (compiled into the trampolines)"
                                   : "");
    for (const plugins::OptionInfo& o : p.options) {
      std::printf("           %s=<%s> (default %s)  %s\n", o.name.c_str(),
                  plugins::option_type_name(o.type),
                  o.default_value.empty() ? "none" : o.default_value.c_str(), o.help.c_str());
    }
    std::printf("           %s\n", p.path.c_str());
  }
  return 0;
}

}  // namespace

void add_plugins_command(CLI::App& app, std::function<int()>* run) {
  CLI::App* cmd = app.add_subcommand("plugins", "List the tracer plugins and their options");
  cmd->callback([run] { *run = run_plugins; });
}

}  // namespace ftjit::cli
