// SPDX-License-Identifier: MIT
// The function starts a file's unwind tables know: the binary-search table
// of .eh_frame_hdr (PT_GNU_EH_FRAME), one initial location per FDE. A
// function relocated at its entry must start an FDE there (core/
// relocation_plan.h): the unwinder then describes its first bytes, which
// the stub's copy runs, and a symbol that is really the middle of another
// function's code (a local label, a cold part) is told apart.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/elf_image.h"
#include "core/error.h"

namespace ftjit {

// The link-time addresses where FDEs start, sorted, without duplicates.
// FTJIT_E_ELF when the file has no PT_GNU_EH_FRAME, or its table is
// truncated or in an encoding other than the one linkers write
// (DW_EH_PE_datarel | DW_EH_PE_sdata4). Reads `file` (the bytes `image`
// was parsed from) as hostile.
Result<std::vector<uint64_t>> eh_frame_function_starts(std::span<const uint8_t> file, const ElfImage& image);

// One FDE the index points to: the code it describes, [start, start + size).
// size 0 when that FDE could not be read (outside the file, a CIE whose
// augmentation is unknown, a pc_begin other than the index's): its start
// is still one.
struct FdeRange {
  uint64_t start = 0;
  uint64_t size = 0;
};

// The ranges of every FDE the .eh_frame_hdr table indexes, sorted by start,
// one per start (the largest size where several FDEs start at one address).
// The table's errors are eh_frame_function_starts'; a bad FDE costs only
// its own size. Reads `file` as hostile.
Result<std::vector<FdeRange>> eh_frame_function_ranges(std::span<const uint8_t> file, const ElfImage& image);

// The range that starts exactly at `start` in `ranges` (sorted), or nullptr.
const FdeRange* fde_at(std::span<const FdeRange> ranges, uint64_t start);

}  // namespace ftjit
