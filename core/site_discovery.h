// SPDX-License-Identifier: MIT
// discover_sites: turns an ElfImage's patchable records into named sites at run-time addresses.
#pragma once

#include <cstdint>
#include <string>

#include "core/elf_image.h"
#include "core/error.h"
#include "core/site.h"

namespace ftjit {

// How far past its record a site may start and still own the record: the
// largest prefix (M NOPs) any supported layout puts before the symbol is
// 8 bytes, and an arm64 landing pad at the symbol adds 4 (=4,2 with bti:
// 12); 16 leaves room for an aligned 8-byte ops slot.
inline constexpr uint64_t kMaxSitePrefixBytes = 16;

// Builds the module of one ELF image loaded at load_bias (run-time address
// minus link-time address; 0 for a file that is not loaded).
//
// Each record is named after the function symbol f that owns it:
//  - f.value + pad == record, where pad is the landing pad the code at f
//    starts with (core/sled_layout.h; arm64 -mbranch-protection with an
//    =N,0 layout: the record points past the pad); otherwise
//  - the nearest f with record <= f.value and f.value + pad - record <=
//    kMaxSitePrefixBytes, unless the next record lies at or before
//    f.value + pad and so owns f.
// Then entry (the site start) = f.value + pad, symbol = f.value,
// pad_bytes = pad, prefix_bytes = entry - record, and when at least 8
// bytes lie between record and f.value the ops slot is the 8 bytes before
// f.value (OpsSlot::kAligned or kMisaligned by its address; the load
// bias, a multiple of the page size, does not change it). A record
// without such a symbol (a static function in a stripped file) keeps
// entry = record, symbol 0, prefix 0, no slot and an empty name. Sites
// come back sorted by entry. A module without __patchable_function_entries
// gives no sites and is not an error; the Result exists for callers that
// propagate it and currently never fails.
[[nodiscard]] Result<DiscoveredModule> discover_sites(const ElfImage& img, std::string path,
                                                      uint64_t load_bias);

// The site of `function`, whose sled's first NOP is at link-time `record`
// and whose entry lies `pad` bytes (its landing pad) past its symbol, as
// discover_sites makes it of a named record, for `module` (its load bias;
// its names keep a demangled name, and must share the string table
// `function`'s name views). Sites recovered without a record
// (core/sled_recovery.h) are made by the same code, so that nothing
// downstream can tell them apart by their fields.
DiscoveredSite named_site(uint64_t record, const ElfSymbol& function, uint32_t pad,
                          DiscoveredModule& module);

}  // namespace ftjit
