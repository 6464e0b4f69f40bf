// SPDX-License-Identifier: MIT
// `ftjit list FILE`: the patchable functions of an executable or shared
// object, one per line: link-time entry address, layout, demangled name.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "cli/commands.h"
#include "cli/list_relocation.h"
#include "cli/mapped_file.h"
#include "cli/option_values.h"
#include "cli/process_modules.h"
#include "cli/module_producers.h"
#include "core/elf_image.h"
#include "core/filter.h"
#include "core/register_evidence.h"
#include "core/site_discovery.h"
#include "core/sled_recovery.h"

namespace ftjit::cli {

namespace {

// Appended to LAYOUT for a site found by its sled's bytes, without a record.
constexpr const char* kRecoveredMark = ",recovered";

struct ListOptions {
  std::string file;
  int pid = 0;
  std::vector<std::string> include, exclude;
  bool relocate = false;
};

// `ftjit list -p PID`: every module the process has mapped, at run-time
// addresses, with the module as a fourth column.
int run_list_process(const ListOptions& o, const Filter& filter) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ftjit list: %s\n", message.c_str());
    return 1;
  };
  auto modules = process_modules(o.pid);
  if (!modules) return fail(modules.error().message);
  size_t total = 0, shown = 0, with_sites = 0;
  for (const ProcessModule& m : *modules) {
    if (!m.found.has_patchable_section || m.found.sites.empty()) continue;
    ++with_sites;
    const std::string base(path_basename(m.path));
    for (const DiscoveredSite& s : m.found.sites) {
      ++total;
      if (!filter.matches(base, s.name, s.shown_name())) continue;
      const std::string_view name = s.shown_name().empty() ? "?" : s.shown_name();
      std::printf("%#" PRIx64 "\t%s%s\t%.*s\t%s\n", s.entry, s.prefix_bytes >= 8 ? "slot" : "entry",
                  s.recovered ? kRecoveredMark : "", static_cast<int>(name.size()), name.data(), base.c_str());
      ++shown;
    }
  }
  if (total == 0) {
    return fail("process " + std::to_string(o.pid) +
                " has no patchable function entries in any of its " +
                std::to_string(modules->size()) +
                " modules (build with -fpatchable-function-entry=5, or =13,8 for call-ops)");
  }
  if (shown == 0) {
    return fail("no patchable function of process " + std::to_string(o.pid) + " matches " +
                filter.describe());
  }
  std::fprintf(stderr, "%zu of %zu patchable functions in %zu modules of process %d\n", shown,
               total, with_sites, o.pid);
  for (const ProcessModule& m : *modules) {
    if (m.found.recovered_sites == 0) continue;
    std::fprintf(stderr, "%s: %s\n", std::string(path_basename(m.path)).c_str(),
                 m.found.recovery_why.c_str());
  }
  return 0;
}

int run_list(const ListOptions& o) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ftjit list: %s\n", message.c_str());
    return 1;
  };
  auto filter = Filter::compile(o.include, o.exclude);
  if (!filter) return fail(filter.error().message);
  if (o.relocate && o.pid != 0) return list_process_relocation(o.pid, *filter);
  if (o.pid != 0) return run_list_process(o, *filter);
  if (o.file.empty()) return fail("give a FILE or -p PID");
  if (o.relocate) return list_relocation(o.file, *filter);
  const auto file = std::make_shared<MappedFile>();
  std::string error;
  if (!file->open(o.file, &error)) return fail(error);
  auto image = ElfImage::parse(file->bytes(), file);
  if (!image) return fail(o.file + ": " + image.error().message);
  auto module = discover_sites(*image, o.file, 0);
  if (!module) return fail(o.file + ": " + module.error().message);
  auto units = read_producers(o.file);
  recover_unrecorded_sites(file->bytes(), *image,
                           units ? units.value() : std::vector<CompileUnitProducer>{}, *module);
  if (!module->has_patchable_section || module->sites.empty()) {
    return fail(o.file + " has no patchable function entries (build it with "
                         "-fpatchable-function-entry=5, or =13,8 for call-ops)");
  }
  const std::string base(path_basename(o.file));
  // What the ISA's backend makes of each sled as the file has it: a
  // record whose bytes are no sled of the ISA's layouts (riscv64's =4,2
  // built with the C extension), or whose entry is not aligned as the ISA
  // needs, is listed, but as what it is: no site.
  const Backend* backend = backend_for(module->isa);
  size_t shown = 0, unusable = 0;
  for (const DiscoveredSite& s : module->sites) {
    if (!filter->matches(base, s.name, s.shown_name())) continue;
    const std::string_view name = s.shown_name().empty() ? "?" : s.shown_name();
    const char* layout = s.prefix_bytes >= 8 ? "slot" : "entry";
    if (backend != nullptr) {
      const IsaTraits& t = backend->traits();
      // A FILE is not loaded: its sites are at link-time addresses.
      const auto code = image->code_in_file(file->bytes(), s.entry, t.site_bytes);
      if (code.size() == t.site_bytes) {
        const SledKind kind = backend->classify_entry(s.entry, code).kind;
        if (kind != SledKind::kNopSled && kind != SledKind::kNop) {
          layout = "no-sled";
        } else if (s.entry % t.entry_align != 0) {
          layout = "misaligned";
        }
      }
    }
    unusable += layout[0] == 'n' || layout[0] == 'm';
    std::printf("%#" PRIx64 "\t%s%s\t%.*s\n", s.entry, layout, s.recovered ? kRecoveredMark : "",
                static_cast<int>(name.size()), name.data());
    ++shown;
  }
  if (shown == 0) {
    return fail("no patchable function of " + o.file + " matches " + filter->describe());
  }
  std::fprintf(stderr, "%zu of %zu patchable functions (%s, %s)\n", shown,
               module->sites.size(), base.c_str(), isa_name(module->isa));
  if (module->recovered_sites != 0) std::fprintf(stderr, "%s\n", module->recovery_why.c_str());
  if (unusable != 0 && backend != nullptr) {
    std::fprintf(stderr, "%zu of them cannot be traced: no-sled (the bytes at the entry are no %s sled) or "
                 "misaligned; build with %s\n",
                 unusable, isa_name(module->isa), backend->traits().site_flags);
  }
  // What its trampolines keep under --saves auto, and why.
  const SavesEvidence saves = saves_evidence(units);
  std::fprintf(stderr, "saves %s: %s\n", saves.abi_is_enough ? "abi" : "all", saves.why.c_str());
  return 0;
}

}  // namespace

void add_list_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<ListOptions>();
  CLI::App* cmd = app.add_subcommand(
      "list", "List the patchable functions of an ELF file (ADDRESS<TAB>LAYOUT<TAB>NAME) or of "
              "a running process (with <TAB>MODULE)");
  auto* file = cmd->add_option("FILE", o->file, "Executable or shared object");
  auto* pid = accept_process_id(
      cmd->add_option("-p,--pid", o->pid, "A running process instead of a file"));
  file->excludes(pid);
  pid->excludes(file);
  cmd->add_option("--filter", o->include, "Only functions matching GLOB (MODULE!GLOB), repeatable")
      ->type_name("GLOB");
  cmd->add_option("--exclude", o->exclude, "Leave out functions matching GLOB, repeatable")
      ->type_name("GLOB");
  cmd->add_flag("--relocate", o->relocate,
                "List the functions without a sled instead: whether each entry can be relocated "
                "(ADDRESS<TAB>relocate|refused:REASON<TAB>NAME<TAB>DETAIL), a count per reason on stderr");
  cmd->footer("LAYOUT is 'slot' for -fpatchable-function-entry=13,8 (the 8-byte ops slot "
              "call-ops needs; =4,2 on arm64, =8,4 or =4,2 on riscv64), 'entry' for =5 (=2 on "
              "arm64); for a FILE, 'no-sled' or 'misaligned' where the record's entry cannot be "
              "traced (not the ISA's NOPs, or not aligned as the ISA needs). ',recovered' follows "
              "the layout of a function found by its sled's bytes because the toolchain dropped "
              "its record (GCC 12 drops those of a whole C++ file with a discarded inline copy).");
  cmd->callback([run, o] { *run = [o] { return run_list(*o); }; });
}

}  // namespace ftjit::cli
