// SPDX-License-Identifier: MIT
#include "core/elf_section_probe.h"

#include <elf.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "core/elf_image.h"

namespace ftjit {
namespace {

// Bounds beyond which the probe does not judge (the full parser does):
// real files have a few dozen sections and a section-name table of a few
// kilobytes.
constexpr uint64_t kMaxSections = 1u << 16;
constexpr uint64_t kMaxNamesBytes = 1u << 20;

bool read_exactly(int fd, void* to, size_t n, uint64_t offset) {
  auto* p = static_cast<uint8_t*>(to);
  while (n != 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

}  // namespace

SectionProbe probe_elf_section(int fd, std::string_view name) {
  SectionProbe probe;
  Elf64_Ehdr ehdr;
  if (!read_exactly(fd, &ehdr, sizeof ehdr, 0)) return probe;
  if (std::memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0 || ehdr.e_ident[EI_CLASS] != ELFCLASS64 ||
      ehdr.e_ident[EI_DATA] != ELFDATA2LSB || (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN)) {
    return probe;
  }
  probe.isa = isa_from_machine(ehdr.e_machine);
  // Extended numbering (e_shnum 0 or e_shstrndx SHN_XINDEX: the counts
  // live in section 0) and odd entry sizes are the full parser's.
  if (ehdr.e_shoff == 0 || ehdr.e_shnum == 0 || ehdr.e_shnum > kMaxSections ||
      ehdr.e_shentsize != sizeof(Elf64_Shdr) || ehdr.e_shstrndx == SHN_UNDEF ||
      ehdr.e_shstrndx >= ehdr.e_shnum) {
    return probe;
  }
  std::vector<Elf64_Shdr> headers(ehdr.e_shnum);
  if (!read_exactly(fd, headers.data(), headers.size() * sizeof(Elf64_Shdr), ehdr.e_shoff)) return probe;
  const Elf64_Shdr& names = headers[ehdr.e_shstrndx];
  if (names.sh_type != SHT_STRTAB || names.sh_size == 0 || names.sh_size > kMaxNamesBytes) return probe;
  std::vector<char> table(names.sh_size);
  if (!read_exactly(fd, table.data(), table.size(), names.sh_offset)) return probe;
  bool found = false;
  for (size_t i = 1; i < headers.size(); ++i) {
    const uint64_t at = headers[i].sh_name;
    if (at >= table.size()) return probe;  // unknown: the parser names the field
    const size_t room = table.size() - at;
    const size_t len = strnlen(table.data() + at, room);
    if (len == room) return probe;  // unterminated
    found |= std::string_view(table.data() + at, len) == name;
  }
  probe.state = found ? SectionProbe::kPresent : SectionProbe::kAbsent;
  return probe;
}

}  // namespace ftjit
