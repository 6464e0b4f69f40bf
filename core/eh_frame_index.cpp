// SPDX-License-Identifier: MIT
#include "core/eh_frame_index.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

namespace ftjit {
namespace {

// DWARF pointer encodings (LSB 5.0, "DWARF Exception Header Encoding").
constexpr uint8_t kOmit = 0xff;
constexpr uint8_t kDatarelSdata4 = 0x3b;
constexpr uint8_t kAbsptr = 0x00;

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

// The bytes of `file` behind link-time `vaddr` to the end of the
// file-backed part of its PT_LOAD segment (empty: none holds it).
std::span<const uint8_t> bytes_at(std::span<const uint8_t> file, const ElfImage& image, uint64_t vaddr) {
  for (const ElfImage::Segment& seg : image.load_segments()) {
    if (vaddr < seg.vaddr || vaddr - seg.vaddr >= seg.filesz) continue;
    const uint64_t offset = seg.offset + (vaddr - seg.vaddr);
    if (offset >= file.size()) return {};
    return file.subspan(offset, std::min(seg.filesz - (vaddr - seg.vaddr), file.size() - offset));
  }
  return {};
}

// A bounds-checked reader over one CIE or FDE; every read fails (false)
// rather than run past the end.
class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, uint64_t vaddr) : bytes_(bytes), vaddr_(vaddr) {}
  uint64_t vaddr() const { return vaddr_ + at_; }
  void limit(uint64_t size) { bytes_ = bytes_.first(std::min<uint64_t>(bytes_.size(), at_ + size)); }
  bool skip(uint64_t n) {
    if (n > bytes_.size() - at_) return false;
    at_ += n;
    return true;
  }
  bool u8(uint8_t* v) {
    if (at_ >= bytes_.size()) return false;
    *v = bytes_[at_++];
    return true;
  }
  bool fixed(uint32_t n, uint64_t* v) {  // little-endian, n <= 8
    if (n > bytes_.size() - at_) return false;
    *v = 0;
    std::memcpy(v, bytes_.data() + at_, n);
    at_ += n;
    return true;
  }
  bool uleb(uint64_t* v) {
    *v = 0;
    for (uint32_t shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!u8(&b)) return false;
      *v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  bool cstring(std::string* s) {
    const auto* begin = bytes_.data() + at_;
    const auto* nul = static_cast<const uint8_t*>(std::memchr(begin, 0, bytes_.size() - at_));
    if (nul == nullptr) return false;
    s->assign(reinterpret_cast<const char*>(begin), static_cast<size_t>(nul - begin));
    at_ += static_cast<uint64_t>(nul - begin) + 1;
    return true;
  }
  // A CIE's or FDE's length field; limits the reader to that entry.
  bool entry_length() {
    uint64_t len = 0;
    if (!fixed(4, &len) || len == 0) return false;
    if (len == 0xffffffff && !fixed(8, &len)) return false;
    if (len > bytes_.size() - at_) return false;
    limit(len);
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t vaddr_;
  uint64_t at_ = 0;
};

// The FDE pointer encoding the CIE at `vaddr` declares (its 'R'
// augmentation; absptr without one), or kOmit when it cannot be read.
uint8_t cie_fde_encoding(std::span<const uint8_t> file, const ElfImage& image, uint64_t vaddr) {
  Reader r(bytes_at(file, image, vaddr), vaddr);
  uint64_t id = 0, ignored = 0;
  uint8_t version = 0;
  std::string aug;
  if (!r.entry_length() || !r.fixed(4, &id) || id != 0 || !r.u8(&version) || (version != 1 && version != 3) ||
      !r.cstring(&aug) || !r.uleb(&ignored) || !r.uleb(&ignored))  // code and data alignment (sleb: same bytes)
    return kOmit;
  uint8_t ra8 = 0;
  if (version == 1 ? !r.u8(&ra8) : !r.uleb(&ignored)) return kOmit;
  if (aug.empty()) return kAbsptr;
  if (aug[0] != 'z') return kOmit;  // data of an unknown size follows
  if (!r.uleb(&ignored)) return kOmit;
  for (size_t i = 1; i < aug.size(); ++i) {
    uint8_t enc = 0;
    switch (aug[i]) {
      case 'R':
        return r.u8(&enc) ? enc : kOmit;
      case 'L':
        if (!r.u8(&enc)) return kOmit;
        break;
      case 'P': {
        if (!r.u8(&enc)) return kOmit;
        const uint32_t n = encoded_size(enc);
        if (n == 0 ? !r.uleb(&ignored) : !r.skip(n)) return kOmit;
        break;
      }
      case 'S': case 'B': case 'G':
        break;
      default:
        return kOmit;  // what follows is unknown, and 'R' may be there
    }
  }
  return kAbsptr;
}

// The size of the FDE at `vaddr`, which the index says starts at `loc`; 0
// when it cannot be read or says another start.
uint64_t fde_size(std::span<const uint8_t> file, const ElfImage& image, uint64_t vaddr, uint64_t loc,
                  std::map<uint64_t, uint8_t>* cie_encodings) {
  Reader r(bytes_at(file, image, vaddr), vaddr);
  uint64_t cie_ptr = 0;
  if (!r.entry_length()) return 0;
  const uint64_t cie_field = r.vaddr();
  if (!r.fixed(4, &cie_ptr) || cie_ptr == 0 || cie_ptr > cie_field) return 0;  // 0: a CIE, not an FDE
  const uint64_t cie = cie_field - cie_ptr;
  auto known = cie_encodings->find(cie);
  if (known == cie_encodings->end()) known = cie_encodings->emplace(cie, cie_fde_encoding(file, image, cie)).first;
  const uint8_t enc = known->second;
  const uint32_t n = encoded_size(enc);
  // Linkers write pcrel or absolute starts, never indirect ones.
  if (enc == kOmit || n == 0 || (enc & 0x70) > 0x10 || (enc & 0x80) != 0) return 0;
  const uint64_t field = r.vaddr();
  uint64_t begin = 0, range = 0;
  if (!r.fixed(n, &begin) || !r.fixed(n, &range)) return 0;
  if ((enc & 0x08) != 0 && n < 8) {  // signed: extend
    const uint64_t sign = uint64_t{1} << (n * 8 - 1);
    begin = (begin ^ sign) - sign;
    if ((range & sign) != 0) return 0;  // a negative length
  }
  if ((enc & 0x70) == 0x10) begin += field;
  if (begin != loc || range == 0 || loc + range < loc) return 0;
  return range;
}

// The index: {initial location, FDE address} pairs, as the table lists them.
Result<std::vector<std::pair<uint64_t, uint64_t>>> read_table(std::span<const uint8_t> file, const ElfImage& image) {
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
  std::vector<std::pair<uint64_t, uint64_t>> table;
  if (count_enc == kOmit || table_enc == kOmit) return table;
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
  table.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    int32_t loc, fde;
    std::memcpy(&loc, hdr.data() + at + i * 8, 4);
    std::memcpy(&fde, hdr.data() + at + i * 8 + 4, 4);
    table.emplace_back(seg.vaddr + static_cast<uint64_t>(static_cast<int64_t>(loc)),
                       seg.vaddr + static_cast<uint64_t>(static_cast<int64_t>(fde)));
  }
  return table;
}

}  // namespace

Result<std::vector<uint64_t>> eh_frame_function_starts(std::span<const uint8_t> file, const ElfImage& image) {
  auto table = read_table(file, image);
  if (!table) return table.take_error();
  std::vector<uint64_t> starts;
  starts.reserve(table->size());
  for (const auto& [loc, fde] : *table) starts.push_back(loc);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  return starts;
}

Result<std::vector<FdeRange>> eh_frame_function_ranges(std::span<const uint8_t> file, const ElfImage& image) {
  auto table = read_table(file, image);
  if (!table) return table.take_error();
  std::map<uint64_t, uint8_t> cie_encodings;  // a few CIEs serve every FDE
  std::vector<FdeRange> ranges;
  ranges.reserve(table->size());
  for (const auto& [loc, fde] : *table) ranges.push_back({loc, fde_size(file, image, fde, loc, &cie_encodings)});
  std::sort(ranges.begin(), ranges.end(), [](const FdeRange& a, const FdeRange& b) {
    return a.start != b.start ? a.start < b.start : a.size > b.size;
  });
  ranges.erase(std::unique(ranges.begin(), ranges.end(),
                           [](const FdeRange& a, const FdeRange& b) { return a.start == b.start; }),
               ranges.end());
  return ranges;
}

const FdeRange* fde_at(std::span<const FdeRange> ranges, uint64_t start) {
  auto it = std::lower_bound(ranges.begin(), ranges.end(), start,
                             [](const FdeRange& r, uint64_t v) { return r.start < v; });
  return it != ranges.end() && it->start == start ? &*it : nullptr;
}

}  // namespace ftjit
