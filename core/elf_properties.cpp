// SPDX-License-Identifier: MIT
#include "core/elf_properties.h"

#include <elf.h>

#include <cstring>

namespace ftjit {
namespace {

constexpr uint32_t kPtGnuProperty = 0x6474e553;            // PT_GNU_PROPERTY
constexpr uint32_t kNtGnuPropertyType0 = 5;                // NT_GNU_PROPERTY_TYPE_0
constexpr uint32_t kAarch64Feature1And = 0xc0000000;       // GNU_PROPERTY_AARCH64_FEATURE_1_AND
constexpr uint32_t kAarch64Feature1Bti = 1u << 0;          // ..._FEATURE_1_BTI

template <typename T>
bool read_at(std::span<const uint8_t> b, uint64_t off, T* out) {
  if (off > b.size() || b.size() - off < sizeof(T)) return false;
  std::memcpy(out, b.data() + off, sizeof(T));
  return true;
}

// The notes in [off, off+size):
//   namesz(4) descsz(4) type(4) name("GNU\0", padded to 4) desc(padded to 8)
// and in an NT_GNU_PROPERTY_TYPE_0 desc, properties:
//   pr_type(4) pr_datasz(4) data(padded to 8)
bool notes_mark_bti(std::span<const uint8_t> b, uint64_t off, uint64_t size) {
  if (off > b.size() || size > b.size() - off) return false;
  uint64_t at = off;
  const uint64_t end = off + size;
  while (end - at >= 12) {
    uint32_t namesz = 0, descsz = 0, type = 0;
    read_at(b, at, &namesz);
    read_at(b, at + 4, &descsz);
    read_at(b, at + 8, &type);
    const uint64_t name_at = at + 12;
    const uint64_t desc_at = name_at + ((uint64_t{namesz} + 3) & ~uint64_t{3});
    const uint64_t next = desc_at + ((uint64_t{descsz} + 7) & ~uint64_t{7});
    if (desc_at > end || next > end || uint64_t{descsz} > end - desc_at) return false;
    if (type == kNtGnuPropertyType0 && namesz == 4 && std::memcmp(b.data() + name_at, "GNU", 4) == 0) {
      uint64_t p = desc_at;
      while (desc_at + descsz - p >= 8) {
        uint32_t pr_type = 0, pr_datasz = 0;
        read_at(b, p, &pr_type);
        read_at(b, p + 4, &pr_datasz);
        if (uint64_t{pr_datasz} > desc_at + descsz - (p + 8)) return false;
        if (pr_type == kAarch64Feature1And && pr_datasz >= 4) {
          uint32_t bits = 0;
          read_at(b, p + 8, &bits);
          return (bits & kAarch64Feature1Bti) != 0;
        }
        p += 8 + ((uint64_t{pr_datasz} + 7) & ~uint64_t{7});
      }
    }
    at = next;
  }
  return false;
}

}  // namespace

bool elf_marks_bti(std::span<const uint8_t> head) {
  Elf64_Ehdr eh{};
  if (!read_at(head, 0, &eh)) return false;
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_AARCH64 || eh.e_phentsize != sizeof(Elf64_Phdr)) {
    return false;
  }
  // PT_GNU_PROPERTY names the property note alone; older links have only
  // the PT_NOTE that holds it.
  for (uint32_t pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph{};
      if (!read_at(head, eh.e_phoff + uint64_t{i} * sizeof ph, &ph)) return false;
      if (ph.p_type != (pass == 0 ? kPtGnuProperty : static_cast<uint32_t>(PT_NOTE))) continue;
      if (notes_mark_bti(head, ph.p_offset, ph.p_filesz)) return true;
      if (pass == 0) return false;  // the property note says no
    }
  }
  return false;
}

}  // namespace ftjit
