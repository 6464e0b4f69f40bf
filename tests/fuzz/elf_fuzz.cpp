// SPDX-License-Identifier: MIT
// libFuzzer target: arbitrary bytes through ElfImage::parse, discover_sites,
// the .eh_frame_hdr index and FDE ranges (core/eh_frame_index.h), IRELATIVE
// words (core/ifunc_slots.h),
// the compile units' producers (DWARF) and sled recovery.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/dwarf_producers.h"
#include "core/eh_frame_index.h"
#include "core/elf_image.h"
#include "core/ifunc_slots.h"
#include "core/site_discovery.h"
#include "core/sled_recovery.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto img = ftjit::ElfImage::parse(std::span<const uint8_t>(data, size));
  if (!img.ok()) {
    // An error must be the ELF code: anything else means a path that
    // reports the wrong thing to callers.
    if (img.error().code != FTJIT_E_ELF) __builtin_trap();
    return 0;
  }
  // Touch everything parse() returned, so ASan sees any dangling view into
  // the input (parse must copy what it keeps).
  for (uint64_t r : img->patchable_records()) (void)img->function_at(r);
  uint8_t code_sum = 0;
  for (size_t i = 0; i < img->patchable_records().size(); ++i) {
    for (uint8_t b : img->code_near_record(i)) code_sum ^= b;
  }
  (void)code_sum;
  for (const auto& f : img->functions()) {
    if (img->function_at(f.value) == nullptr) __builtin_trap();
  }
  for (const auto& s : img->load_segments()) (void)(s.vaddr + s.memsz);
  // The unwind tables' function starts: sorted and unique, or the ELF code.
  auto starts = ftjit::eh_frame_function_starts(std::span<const uint8_t>(data, size), img.value());
  if (!starts.ok() && starts.error().code != FTJIT_E_ELF) __builtin_trap();
  if (starts.ok())
    for (size_t i = 1; i < starts->size(); ++i)
      if ((*starts)[i - 1] >= (*starts)[i]) __builtin_trap();
  // FDE ranges: the same starts, sorted, unique; sizes that do not wrap.
  auto ranges = ftjit::eh_frame_function_ranges(std::span<const uint8_t>(data, size), img.value());
  if (ranges.ok() != starts.ok() || (!ranges.ok() && ranges.error().code != FTJIT_E_ELF)) __builtin_trap();
  if (ranges.ok()) {
    if (ranges->size() != starts->size()) __builtin_trap();
    for (size_t i = 0; i < ranges->size(); ++i)
      if ((*ranges)[i].start != (*starts)[i] || (*ranges)[i].start + (*ranges)[i].size < (*ranges)[i].start)
        __builtin_trap();
  }
  // IRELATIVE words (x86-64's type; any number reads the same tables).
  auto slots = ftjit::irelative_slots(std::span<const uint8_t>(data, size), img.value(), 37);
  if (!slots.ok() && slots.error().code != FTJIT_E_ELF) __builtin_trap();
  // Producers: a list or the ELF code, nothing else.
  auto units = ftjit::compile_unit_producers(std::span<const uint8_t>(data, size));
  if (!units.ok() && units.error().code != FTJIT_E_ELF) __builtin_trap();

  // A high bias makes the run-time address arithmetic wrap, which must be
  // harmless unsigned arithmetic.
  const std::vector<ftjit::CompileUnitProducer> no_units;
  for (uint64_t bias : {uint64_t{0}, uint64_t{0xffffffffffff0000}}) {
    auto module = ftjit::discover_sites(img.value(), "fuzz", bias);
    if (!module.ok()) __builtin_trap();
    if (module->sites.size() != img->patchable_records().size()) __builtin_trap();
    // Recovery reads the file's code at every function symbol: hostile
    // values and sizes must stay inside the input.
    ftjit::recover_unrecorded_sites(std::span<const uint8_t>(data, size), img.value(),
                                    units.ok() ? units.value() : no_units, module.value());
    if (module->sites.size() != img->patchable_records().size() + module->recovered_sites) {
      __builtin_trap();
    }
    for (const auto& site : module->sites) {
      if (site.recovered && (site.symbol() == 0 && site.name.empty())) __builtin_trap();
    }
    for (const auto& site : module->sites) {
      if (site.prefix_bytes > ftjit::kMaxSitePrefixBytes) __builtin_trap();
      // A recorded site's record is one of the image's.
      const auto& records = img->patchable_records();
      if (!site.recovered && !std::binary_search(records.begin(), records.end(), site.record() - bias)) {
        __builtin_trap();
      }
      // The slot, when there is one, is the 8 bytes before the symbol.
      const bool has_slot = site.slot_state != ftjit::OpsSlot::kNone;
      if (has_slot ? site.symbol() - site.slot != 8 : site.slot != 0) __builtin_trap();
      // A site that has a symbol (whose name may be empty in a hostile
      // file) starts past its landing pad, which is one a64 word at most.
      if (site.pad_bytes > 4) __builtin_trap();
      // A named site's symbol is a function of the image.
      if (site.named && img->function_at(site.symbol() - bias) == nullptr) __builtin_trap();
    }
  }
  return 0;
}
