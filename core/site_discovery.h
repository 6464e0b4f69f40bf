// SPDX-License-Identifier: MIT
// discover_sites: turns an ElfImage's patchable records into named sites at run-time addresses.
#pragma once

#include <cstdint>
#include <string>

#include "core/elf_image.h"
#include "core/error.h"
#include "core/site.h"

namespace ftjit {

// How far past its record a function symbol may start and still own the
// record: the largest prefix (M NOPs) any supported layout puts before
// the entry is 8 bytes; 16 leaves room for an aligned 8-byte ops slot.
inline constexpr uint64_t kMaxSitePrefixBytes = 16;

// Builds the module of one ELF image loaded at load_bias (run-time address
// minus link-time address; 0 for a file that is not loaded).
//
// Each record is named after the nearest function symbol f with
// record <= f.value <= record + kMaxSitePrefixBytes, unless another record
// lies in (record, f.value] and so owns f. Then entry = f.value and
// prefix_bytes = f.value - record. A record without such a symbol (a
// static function in a stripped file) keeps entry = record, prefix 0 and an
// empty name. Sites come back sorted by entry. A module without
// __patchable_function_entries gives no sites and is not an error; the
// Result exists for callers that propagate it and currently never fails.
[[nodiscard]] Result<DiscoveredModule> discover_sites(const ElfImage& img, std::string path,
                                                      uint64_t load_bias);

}  // namespace ftjit
