// SPDX-License-Identifier: MIT
#include "core/eh_frame_index.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ftjit {
namespace {

// DWARF pointer encodings (LSB 5.0, "DWARF Exception Header Encoding").
constexpr uint8_t kOmit = 0xff;
constexpr uint8_t kDatarelSdata4 = 0x3b;

// The size of a value in `enc`'s format, 0 for one we do not read.
uint32_t encoded_size(uint8_t enc) {
  switch (enc & 0x0f) {
    case 0x00: return 8;  // absptr
    case 0x02: case 0x0a: return 2;
    case 0x03: case 0x0b: return 4;
    case 0x04: case 0x0c: return 8;
    default: return 0;
  }
}


}  // namespace

Result<std::vector<uint64_t>> eh_frame_function_starts(std::span<const uint8_t> file, const ElfImage& image) {
  const ElfImage::Segment& seg = image.eh_frame_hdr();
  if (seg.filesz == 0) return make_error(FTJIT_E_ELF, "no .eh_frame_hdr (PT_GNU_EH_FRAME)");
  if (seg.offset > file.size() || seg.filesz > file.size() - seg.offset)
    return make_error(FTJIT_E_ELF, ".eh_frame_hdr at " + format_hex(seg.offset) + " extends past the end of the file");
  const std::span<const uint8_t> hdr = file.subspan(seg.offset, seg.filesz);
  // u8 version, u8 eh_frame_ptr_enc, u8 fde_count_enc, u8 table_enc,
  // eh_frame_ptr, fde_count, then fde_count pairs {initial_location, fde}.
  if (hdr.size() < 4 || hdr[0] != 1)
    return make_error(FTJIT_E_ELF, ".eh_frame_hdr is not version 1");
  const uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
  if (count_enc == kOmit || table_enc == kOmit) return std::vector<uint64_t>{};
  const uint32_t ptr_size = encoded_size(ptr_enc), count_size = encoded_size(count_enc);
  if (ptr_size == 0 || count_size == 0 || table_enc != kDatarelSdata4)
    return make_error(FTJIT_E_ELF, ".eh_frame_hdr uses pointer encodings " + format_hex(ptr_enc) + "/" + format_hex(count_enc) +
                                       "/" + format_hex(table_enc) + ", not the linkers' (datarel sdata4 table)");
  uint64_t at = 4 + ptr_size;
  if (at + count_size > hdr.size()) return make_error(FTJIT_E_ELF, ".eh_frame_hdr is truncated");
  uint64_t count = 0;
  std::memcpy(&count, hdr.data() + at, count_size);  // little-endian, unsigned or non-negative
  at += count_size;
  if (count > (hdr.size() - at) / 8)
    return make_error(FTJIT_E_ELF, ".eh_frame_hdr says " + std::to_string(count) + " FDEs but holds " +
                                       std::to_string((hdr.size() - at) / 8));
  std::vector<uint64_t> starts;
  starts.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    int32_t loc;
    std::memcpy(&loc, hdr.data() + at + i * 8, 4);
    starts.push_back(seg.vaddr + static_cast<uint64_t>(static_cast<int64_t>(loc)));
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  return starts;
}

}  // namespace ftjit
