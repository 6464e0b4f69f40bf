// SPDX-License-Identifier: MIT
#include "core/ifunc_slots.h"

#include <elf.h>

#include <algorithm>
#include <cstring>

namespace ftjit {
namespace {

// The file bytes behind link-time [vaddr, vaddr + size), all of them inside
// one PT_LOAD segment's file-backed part, or nothing.
std::span<const uint8_t> table_bytes(std::span<const uint8_t> file, const ElfImage& image, uint64_t vaddr,
                                     uint64_t size) {
  for (const ElfImage::Segment& seg : image.load_segments()) {
    if (vaddr < seg.vaddr || vaddr - seg.vaddr >= seg.filesz) continue;
    const uint64_t at = vaddr - seg.vaddr;
    if (size > seg.filesz - at) return {};
    const uint64_t offset = seg.offset + at;
    if (offset > file.size() || size > file.size() - offset) return {};
    return file.subspan(offset, size);
  }
  return {};
}

}  // namespace

Result<std::vector<IrelativeSlot>> irelative_slots(std::span<const uint8_t> file, const ElfImage& image,
                                                   uint32_t type) {
  std::vector<IrelativeSlot> slots;
  Elf64_Ehdr ehdr;
  if (file.size() < sizeof ehdr) return make_error(FTJIT_E_ELF, "shorter than an ELF header");
  std::memcpy(&ehdr, file.data(), sizeof ehdr);
  if (ehdr.e_phentsize != sizeof(Elf64_Phdr) || ehdr.e_phoff > file.size() ||
      uint64_t{ehdr.e_phnum} > (file.size() - ehdr.e_phoff) / sizeof(Elf64_Phdr))
    return make_error(FTJIT_E_ELF, "the program header table lies outside the file");
  // PT_DYNAMIC: where the loader finds the relocation tables.
  std::span<const uint8_t> dynamic;
  for (uint16_t i = 0; i < ehdr.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, file.data() + ehdr.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type != PT_DYNAMIC) continue;
    if (ph.p_offset > file.size() || ph.p_filesz > file.size() - ph.p_offset)
      return make_error(FTJIT_E_ELF, "PT_DYNAMIC lies outside the file");
    dynamic = file.subspan(ph.p_offset, ph.p_filesz);
    break;
  }
  if (dynamic.empty()) return slots;
  uint64_t rela = 0, relasz = 0, relaent = sizeof(Elf64_Rela), jmprel = 0, pltrelsz = 0, pltrel = DT_RELA;
  for (uint64_t at = 0; at + sizeof(Elf64_Dyn) <= dynamic.size(); at += sizeof(Elf64_Dyn)) {
    Elf64_Dyn d;
    std::memcpy(&d, dynamic.data() + at, sizeof d);
    if (d.d_tag == DT_NULL) break;
    switch (d.d_tag) {
      case DT_RELA: rela = d.d_un.d_ptr; break;
      case DT_RELASZ: relasz = d.d_un.d_val; break;
      case DT_RELAENT: relaent = d.d_un.d_val; break;
      case DT_JMPREL: jmprel = d.d_un.d_ptr; break;
      case DT_PLTRELSZ: pltrelsz = d.d_un.d_val; break;
      case DT_PLTREL: pltrel = d.d_un.d_val; break;
      default: break;
    }
  }
  if (relaent != sizeof(Elf64_Rela))
    return make_error(FTJIT_E_ELF, "DT_RELAENT is " + std::to_string(relaent) + ", not " +
                                       std::to_string(sizeof(Elf64_Rela)));
  auto scan = [&](uint64_t vaddr, uint64_t size, const char* what) -> Status {
    if (size == 0) return {};
    if (size % sizeof(Elf64_Rela) != 0)
      return make_error(FTJIT_E_ELF, std::string(what) + ": " + std::to_string(size) + " bytes, not whole entries");
    const std::span<const uint8_t> bytes = table_bytes(file, image, vaddr, size);
    if (bytes.size() != size)
      return make_error(FTJIT_E_ELF, std::string(what) + " at " + format_hex(vaddr) + " lies outside the file");
    for (uint64_t at = 0; at < bytes.size(); at += sizeof(Elf64_Rela)) {
      Elf64_Rela r;
      std::memcpy(&r, bytes.data() + at, sizeof r);
      if (ELF64_R_TYPE(r.r_info) == type) slots.push_back({r.r_offset, static_cast<uint64_t>(r.r_addend)});
    }
    return {};
  };
  FTJIT_TRY(scan(rela, relasz, "DT_RELA"));
  if (pltrel == DT_RELA) FTJIT_TRY(scan(jmprel, pltrelsz, "DT_JMPREL"));
  // DT_RELA's range may include DT_JMPREL's (some linkers): one slot once.
  std::sort(slots.begin(), slots.end(), [](const IrelativeSlot& a, const IrelativeSlot& b) {
    return a.resolver != b.resolver ? a.resolver < b.resolver : a.word < b.word;
  });
  slots.erase(std::unique(slots.begin(), slots.end(),
                          [](const IrelativeSlot& a, const IrelativeSlot& b) {
                            return a.resolver == b.resolver && a.word == b.word;
                          }),
              slots.end());
  return slots;
}

std::span<const IrelativeSlot> irelative_slots_of(std::span<const IrelativeSlot> slots, uint64_t resolver) {
  auto lo = std::lower_bound(slots.begin(), slots.end(), resolver,
                             [](const IrelativeSlot& s, uint64_t v) { return s.resolver < v; });
  auto hi = std::upper_bound(lo, slots.end(), resolver,
                             [](uint64_t v, const IrelativeSlot& s) { return v < s.resolver; });
  return {lo, hi};
}

std::string ifunc_implementation_name(const ElfImage& image, uint64_t impl, std::string_view ifunc_name) {
  if (const ElfSymbol* s = image.function_at(impl); s != nullptr && !s->ifunc) return std::string(s->name);
  return std::string(ifunc_name) + " implementation";
}

}  // namespace ftjit
