// SPDX-License-Identifier: MIT
// discover_sites: pairs each patchable record with the function symbol that owns it.
#include "core/site_discovery.h"

#include <algorithm>
#include <utility>

#include "core/demangle.h"

namespace ftjit {

Result<DiscoveredModule> discover_sites(const ElfImage& img, std::string path,
                                        uint64_t load_bias) {
  DiscoveredModule module;
  module.path = std::move(path);
  module.load_bias = load_bias;
  module.isa = img.isa();
  module.has_patchable_section = img.has_patchable_section();

  const auto& records = img.patchable_records();
  const auto& functions = img.functions();
  module.sites.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const uint64_t record = records[i];
    // functions() puts the preferred name first among equal values, so
    // lower_bound lands on the best symbol at the nearest address.
    auto f = std::lower_bound(functions.begin(), functions.end(), record,
                              [](const ElfSymbol& s, uint64_t v) { return s.value < v; });
    const bool near = f != functions.end() && f->value - record <= kMaxSitePrefixBytes;
    // With =N,0 layouts records can be as close as 16 bytes apart; a symbol
    // at or past the next record is that record's entry, not a prefixed
    // entry of this one (this happens for unnamed static functions).
    const bool owned_by_next = near && i + 1 < records.size() && records[i + 1] <= f->value;

    DiscoveredSite site;
    site.record = record + load_bias;  // unsigned wrap-around is the intended arithmetic
    if (near && !owned_by_next) {
      site.entry = f->value + load_bias;
      site.prefix_bytes = static_cast<uint32_t>(f->value - record);
      site.name = f->name;
      site.demangled = demangle(f->name);
    } else {
      site.entry = site.record;
    }
    module.sites.push_back(std::move(site));
  }
  // Records are sorted and each entry lies in [record, next record), so
  // this only matters if a load bias wraps addresses around.
  auto by_entry = [](const DiscoveredSite& a, const DiscoveredSite& b) { return a.entry < b.entry; };
  if (!std::is_sorted(module.sites.begin(), module.sites.end(), by_entry)) {
    std::stable_sort(module.sites.begin(), module.sites.end(), by_entry);
  }
  return module;
}

}  // namespace ftjit
