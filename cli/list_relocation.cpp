// SPDX-License-Identifier: MIT
#include "cli/list_relocation.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <unordered_set>

#include "backends/backend.h"
#include "cli/mapped_file.h"
#include "core/demangle.h"
#include "core/eh_frame_index.h"
#include "core/elf_image.h"
#include "core/relocation_plan.h"
#include "core/site_discovery.h"

namespace ftjit::cli {

int list_relocation(const std::string& path, const Filter& filter) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ftjit list: %s\n", message.c_str());
    return 1;
  };
  MappedFile file;
  std::string error;
  if (!file.open(path, &error)) return fail(error);
  auto image = ElfImage::parse(file.bytes());
  if (!image) return fail(path + ": " + image.error().message);
  const InstructionDecoder* decoder = decoder_for(image->isa());
  if (decoder == nullptr)
    return fail(path + ": this ftjit cannot decode " + isa_name(image->isa()) + " code, so it relocates no entry");
  // Functions with a sled are traced at their sled, never relocated.
  std::unordered_set<uint64_t> sleds;
  if (image->has_patchable_section()) {
    auto module = discover_sites(*image, path, 0);
    if (module)
      for (const DiscoveredSite& s : module->sites) sleds.insert(s.entry);
  }
  auto fde_starts = eh_frame_function_starts(file.bytes(), *image);
  if (!fde_starts)
    std::fprintf(stderr, "ftjit list: %s: %s: no function start is known, every function is refused\n",
                 path.c_str(), fde_starts.error().message.c_str());
  const std::vector<uint64_t> no_starts;
  const CodeReferences refs = CodeReferences::sweep(file.bytes(), *image, *decoder);

  const std::string base(path_basename(path));
  std::array<size_t, kRelocationRefusalCount> counts{};
  size_t shown = 0, with_sled = 0;
  const auto& fns = image->functions();
  for (size_t i = 0; i < fns.size();) {
    // One function, under each of its names (malloc is also
    // __libc_malloc): listed once, under the first name the filter takes.
    size_t next = i;
    const ElfSymbol* named = nullptr;
    std::string demangled;
    for (; next < fns.size() && fns[next].value == fns[i].value; ++next) {
      std::string d = demangle(fns[next].name);
      if (named == nullptr && filter.matches(base, fns[next].name, d)) {
        named = &fns[next];
        demangled = std::move(d);
      }
    }
    const ElfSymbol& fn = fns[i];
    i = next;
    if (named == nullptr || !fn.in_code_section) continue;
    if (sleds.count(fn.value) != 0) {
      ++with_sled;
      continue;
    }
    const RelocationPlan plan = plan_relocation(fn, file.bytes(), *image, *decoder, refs,
                                                fde_starts ? std::span<const uint64_t>(*fde_starts) : no_starts);
    ++counts[static_cast<size_t>(plan.refusal)];
    ++shown;
    if (plan.ok()) {
      std::printf("%#" PRIx64 "\trelocate\t%s\t%u bytes, %zu instructions%s\n", fn.value, demangled.c_str(),
                  plan.overwritten, plan.moved.size(), plan.patch_at != fn.value ? ", after the landing pad" : "");
    } else {
      std::printf("%#" PRIx64 "\trefused:%s\t%s\t%s\n", fn.value, relocation_refusal_name(plan.refusal),
                  demangled.c_str(), plan.why.c_str());
    }
  }
  if (shown == 0 && with_sled == 0) return fail("no function of " + path + " matches " + filter.describe());
  std::string summary;
  for (int r = 1; r < kRelocationRefusalCount; ++r)
    if (counts[r] != 0)
      summary += std::string(summary.empty() ? "" : ", ") + relocation_refusal_name(static_cast<RelocationRefusal>(r)) +
                 " " + std::to_string(counts[r]);
  std::fprintf(stderr, "%s (%s): %zu functions without a sled: %zu relocatable, %zu refused%s%s%s; %zu with a sled\n",
               base.c_str(), isa_name(image->isa()), shown, counts[0], shown - counts[0],
               summary.empty() ? "" : " (", summary.c_str(), summary.empty() ? "" : ")", with_sled);
  std::fprintf(stderr, "%s: swept %" PRIu64 " instructions, %zu direct references into its code\n", base.c_str(),
               refs.instructions(), refs.size());
  return 0;
}

}  // namespace ftjit::cli
