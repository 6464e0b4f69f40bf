// SPDX-License-Identifier: MIT
// recover_unrecorded_sites: the functions that carry their module's sled but lost its record.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/dwarf_producers.h"
#include "core/elf_image.h"
#include "core/site.h"

namespace ftjit {

// Why records go missing: GCC 12 puts every __patchable_function_entries
// record of a translation unit in sections linked (SHF_LINK_ORDER) to the
// section of one COMDAT function of that unit (an inline function or a
// template instance). When the linker keeps another unit's copy of that
// COMDAT, it discards the records of the whole unit with it, while the
// unit's functions keep their sleds. Such functions are found by their
// bytes instead, under rules that never take a function whose bytes are
// not exactly the module's own sled:
//
//  - the layout: the module's named records agree on one (the same M
//    bytes of NOPs before the symbol, the same N-M bytes of NOPs at the
//    entry, as most of them show: a record whose entry shows fewer NOPs
//    than most, or other bytes, is a disagreement). Without named
//    records, the layout that the GCC compile units' DW_AT_producer name
//    (-fpatchable-function-entry=N[,M], one value in all of them), in
//    GCC's NOP for the ISA (riscv64: c.nop when e_flags has EF_RISCV_RVC).
//    Records and producers that disagree, or no layout: nothing is taken;
//  - the evidence that the module was built with the flag: records of
//    other functions, or a producer that names it;
//  - the function: an STT_FUNC symbol with a size, in an executable
//    section, owning no record, with no record within kMaxSitePrefixBytes
//    of it, and no other function's bytes among the M before it;
//  - its bytes: at its entry (the symbol + its landing pad,
//    core/sled_layout.h) exactly the N-M bytes, then an instruction that
//    is no NOP of any encoding (nop_length); for M > 0 the M bytes before
//    the symbol exactly the layout's.
//
// Each such function is added to `module` (discover_sites' result for
// `image`, parsed from `file`) as the site a record would have given
// (named_site), with recovered = true, and sites stay sorted by entry;
// module.recovered_sites and recovery_why say how many and why. `units`
// are the producers of `file` (empty when it has no readable DWARF).
void recover_unrecorded_sites(std::span<const uint8_t> file, const ElfImage& image,
                              const std::vector<CompileUnitProducer>& units,
                              DiscoveredModule& module);

}  // namespace ftjit
