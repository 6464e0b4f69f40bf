// SPDX-License-Identifier: MIT
#include "cli/list_relocation.h"

#include <elf.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "backends/backend.h"
#include "cli/inject/target_libc.h"
#include "cli/process_modules.h"
#include "core/function_selection.h"
#include "core/ifunc_slots.h"
#include "core/module_relocator.h"
#include "core/site_discovery.h"

namespace ftjit::cli {
namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "ftjit list: %s\n", message.c_str());
  return 1;
}

struct Listed {
  size_t shown = 0;      // functions without a sled the filter took
  size_t with_sled = 0;  // and with one
};

// One module's functions without a sled (read from `read_path`, named
// `report_path`, loaded at `bias`): a line each, a summary on stderr.
// What an IFUNC of a module resolved to in process `pid`: the word its
// IRELATIVE relocation filled there (core/ifunc_slots.h), 0 where it has
// none (the process resolves it only through dlsym, which the agent runs).
uint64_t ifunc_implementation_in(pid_t pid, std::span<const IrelativeSlot> slots, const ElfSymbol& ifunc, uint64_t bias) {
  for (const IrelativeSlot& s : irelative_slots_of(slots, ifunc.value)) {
    auto word = inject::detail::read_target_memory(pid, s.word + bias, sizeof(uint64_t));
    if (!word) continue;
    uint64_t value;
    std::memcpy(&value, word->data(), sizeof value);
    if (value != 0 && value != ifunc.value + bias) return value;
  }
  return 0;
}

bool in_code_of(const ElfImage& image, uint64_t link) {
  for (const ElfImage::Segment& seg : image.load_segments())
    if ((seg.flags & PF_X) != 0 && link >= seg.vaddr && link - seg.vaddr < seg.memsz) return true;
  return false;
}

Result<Listed> list_module(const std::string& read_path, const std::string& report_path, uint64_t bias,
                           const Filter& filter, bool module_column, pid_t pid = 0) {
  auto relocator = ModuleRelocator::open(read_path, decoder_for);
  if (!relocator) return relocator.take_error();
  const ElfImage& image = (*relocator)->image();
  const std::string base(path_basename(report_path));
  // Functions with a sled are traced at their sled, never relocated.
  std::unordered_set<uint64_t> sleds;
  if (image.has_patchable_section()) {
    if (auto module = discover_sites(image, report_path, 0))
      for (const DiscoveredSite& s : module->sites) sleds.insert(s.symbol() != 0 ? s.symbol() : s.entry);
  }
  if (!(*relocator)->has_function_starts())
    std::fprintf(stderr, "ftjit list: %s: no .eh_frame_hdr index: no function start is known, every function is refused\n",
                 report_path.c_str());
  std::array<size_t, kRelocationRefusalCount> counts{};
  Listed listed;
  const std::string column = module_column ? "\t" + base : "";
  // In a process: each IFUNC at the implementation it resolved to there.
  std::vector<IrelativeSlot> slots;
  if (pid != 0) {
    const Backend* backend = backend_for(image.isa());
    if (backend != nullptr && backend->traits().reloc_irelative != 0) {
      if (auto found = irelative_slots((*relocator)->file(), image, backend->traits().reloc_irelative))
        slots = std::move(found.value());
    }
  }
  std::unordered_map<uint64_t, std::string> implementations;  // run-time address -> the first IFUNC's name
  size_t ifuncs_resolved = 0;
  for (const SelectedFunction& selected : select_functions(image, filter, base)) {
    const ElfSymbol& fn = selected.symbol();
    const std::string& demangled = selected.demangled;
    if (sleds.count(fn.value) != 0) {
      ++listed.with_sled;
      continue;
    }
    if (pid != 0 && fn.ifunc) {
      ++listed.shown;
      const uint64_t impl = ifunc_implementation_in(pid, slots, fn, bias);
      if (impl == 0) {
        ++counts[static_cast<size_t>(RelocationRefusal::kIfunc)];
        std::printf("%#" PRIx64 "\trefused:ifunc\t%s\tan IFUNC without an IRELATIVE word: its implementation is "
                    "what dlsym resolves, which an attach asks in the process%s\n",
                    fn.value + bias, demangled.c_str(), column.c_str());
        continue;
      }
      if (!in_code_of(image, impl - bias)) {
        ++counts[static_cast<size_t>(RelocationRefusal::kIfunc)];
        std::printf("%#" PRIx64 "\trefused:ifunc\t%s\tan IFUNC whose implementation lies outside %s%s\n", impl,
                    demangled.c_str(), base.c_str(), column.c_str());
        continue;
      }
      ++ifuncs_resolved;
      const RelocationPlan plan = (*relocator)->plan(impl - bias);
      ++counts[static_cast<size_t>(plan.refusal)];
      std::string what = "IFUNC, implementation " + ifunc_implementation_name(image, impl - bias, selected.named->name) + " (" +
                         base + "+" + format_hex(impl - bias) + ")";
      auto [first, added] = implementations.emplace(impl, demangled);
      if (!added) what += ", the same as " + first->second + "'s (one site, " + first->second + ")";
      if (plan.ok()) {
        std::printf("%#" PRIx64 "\trelocate\t%s\t%s: %u bytes, %zu instructions%s%s\n", impl, demangled.c_str(),
                    what.c_str(), plan.overwritten, plan.moved.size(),
                    plan.patch_at != plan.entry ? ", after the landing pad" : "", column.c_str());
      } else {
        std::printf("%#" PRIx64 "\trefused:%s\t%s\t%s: %s%s\n", impl, relocation_refusal_name(plan.refusal),
                    demangled.c_str(), what.c_str(), plan.why.c_str(), column.c_str());
      }
      continue;
    }
    const RelocationPlan plan = (*relocator)->plan(fn.value);
    ++counts[static_cast<size_t>(plan.refusal)];
    ++listed.shown;
    if (plan.ok()) {
      std::printf("%#" PRIx64 "\trelocate\t%s\t%u bytes, %zu instructions%s%s\n", fn.value + bias, demangled.c_str(),
                  plan.overwritten, plan.moved.size(), plan.patch_at != fn.value ? ", after the landing pad" : "",
                  column.c_str());
    } else {
      std::printf("%#" PRIx64 "\trefused:%s\t%s\t%s%s\n", fn.value + bias, relocation_refusal_name(plan.refusal),
                  demangled.c_str(), plan.why.c_str(), column.c_str());
    }
  }
  if (listed.shown == 0) return listed;
  std::string summary;
  for (int r = 1; r < kRelocationRefusalCount; ++r)
    if (counts[r] != 0)
      summary += std::string(summary.empty() ? "" : ", ") + relocation_refusal_name(static_cast<RelocationRefusal>(r)) +
                 " " + std::to_string(counts[r]);
  std::fprintf(stderr, "%s (%s): %zu functions without a sled: %zu relocatable, %zu refused%s%s%s; %zu with a sled\n",
               base.c_str(), isa_name(image.isa()), listed.shown, counts[0], listed.shown - counts[0],
               summary.empty() ? "" : " (", summary.c_str(), summary.empty() ? "" : ")", listed.with_sled);
  if (ifuncs_resolved != 0)
    std::fprintf(stderr, "%s: %zu IFUNCs listed at the implementation this process uses (%zu distinct)\n", base.c_str(),
                 ifuncs_resolved, implementations.size());
  std::fprintf(stderr, "%s: swept %" PRIu64 " instructions, %zu direct references into its code\n", base.c_str(),
               (*relocator)->references().instructions(), (*relocator)->references().size());
  return listed;
}

}  // namespace

int list_relocation(const std::string& path, const Filter& filter) {
  auto listed = list_module(path, path, 0, filter, false);
  if (!listed) return fail(listed.error().message);
  if (listed->shown == 0 && listed->with_sled == 0) return fail("no function of " + path + " matches " + filter.describe());
  return 0;
}

int list_process_relocation(pid_t pid, const Filter& filter) {
  auto modules = process_modules(pid);
  if (!modules) return fail(modules.error().message);
  const std::string root = "/proc/" + std::to_string(pid) + "/root";
  size_t shown = 0;
  for (const ProcessModule& m : *modules) {
    const std::string base(path_basename(m.path));
    const bool may_match = filter.includes().empty() ||
                           std::any_of(filter.includes().begin(), filter.includes().end(), [&](const NamePattern& p) {
                             return p.module.empty() || glob_match(p.module, base);
                           });
    if (!may_match) continue;
    auto listed =
        list_module(m.path.starts_with("/") ? root + m.path : m.path, m.path, m.load_bias, filter, true, pid);
    if (!listed) {
      std::fprintf(stderr, "ftjit list: %s\n", listed.error().message.c_str());
      continue;
    }
    shown += listed->shown;
  }
  if (shown == 0) return fail("no function without a sled in process " + std::to_string(pid) + " matches " + filter.describe());
  return 0;
}

}  // namespace ftjit::cli
