// SPDX-License-Identifier: MIT
// compile_unit_producers: each unit's header, its first DIE (the unit's
// own: DW_TAG_compile_unit or partial_unit) read through its abbreviation,
// every attribute skipped by its form until DW_AT_producer (and, for
// DWARF 5's strx forms, DW_AT_str_offsets_base) is found. Nothing below
// the first DIE is read.
#include "core/dwarf_producers.h"

#include <cstring>
#include <optional>
#include <string_view>

namespace ftjit {
namespace {

// DWARF constants (DWARF 5, section 7), those this reader meets.
constexpr uint64_t kAtProducer = 0x25;
constexpr uint64_t kAtLowPc = 0x11;
constexpr uint64_t kAtRanges = 0x55;
constexpr uint64_t kAtStrOffsetsBase = 0x72;
constexpr uint64_t kTagCompileUnit = 0x11;
constexpr uint64_t kTagPartialUnit = 0x3c;
constexpr uint64_t kTagSkeletonUnit = 0x4a;
constexpr uint8_t kUtCompile = 0x01;
constexpr uint8_t kUtPartial = 0x03;
constexpr uint8_t kUtSkeleton = 0x04;
constexpr uint8_t kUtSplitCompile = 0x05;

enum Form : uint64_t {
  kAddr = 0x01, kBlock2 = 0x03, kBlock4 = 0x04, kData2 = 0x05, kData4 = 0x06, kData8 = 0x07,
  kString = 0x08, kBlock = 0x09, kBlock1 = 0x0a, kData1 = 0x0b, kFlag = 0x0c, kSdata = 0x0d,
  kStrp = 0x0e, kUdata = 0x0f, kRefAddr = 0x10, kRef1 = 0x11, kRef2 = 0x12, kRef4 = 0x13,
  kRef8 = 0x14, kRefUdata = 0x15, kIndirect = 0x16, kSecOffset = 0x17, kExprloc = 0x18,
  kFlagPresent = 0x19, kStrx = 0x1a, kAddrx = 0x1b, kRefSup4 = 0x1c, kStrpSup = 0x1d,
  kData16 = 0x1e, kLineStrp = 0x1f, kRefSig8 = 0x20, kImplicitConst = 0x21, kLoclistx = 0x22,
  kRnglistx = 0x23, kRefSup8 = 0x24, kStrx1 = 0x25, kStrx2 = 0x26, kStrx3 = 0x27, kStrx4 = 0x28,
  kAddrx1 = 0x29, kAddrx2 = 0x2a, kAddrx3 = 0x2b, kAddrx4 = 0x2c,
  kGnuAddrIndex = 0x1f01, kGnuStrIndex = 0x1f02, kGnuRefAlt = 0x1f20, kGnuStrpAlt = 0x1f21,
};

Error dwarf_error(const std::string& what) { return make_error(FTJIT_E_ELF, "DWARF: " + what); }

// A bounds-checked little-endian reader over one section.
class Cursor {
 public:
  Cursor(std::string_view bytes, uint64_t at = 0) : b_(bytes), at_(at) {}
  bool ok() const { return ok_; }
  uint64_t at() const { return at_; }
  bool done() const { return at_ >= b_.size(); }
  uint64_t left() const { return at_ <= b_.size() ? b_.size() - at_ : 0; }

  uint64_t fixed(unsigned n) {
    if (!ok_ || left() < n) return fail();
    uint64_t v = 0;
    for (unsigned i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(b_[at_ + i])} << (8 * i);
    at_ += n;
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (unsigned shift = 0; ok_; shift += 7) {
      if (left() == 0 || shift > 63) return fail();
      const uint8_t byte = static_cast<uint8_t>(b_[at_++]);
      v |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return v;
    }
    return 0;
  }
  void sleb() { (void)uleb(); }  // skipped only: the same bytes
  void skip(uint64_t n) {
    if (!ok_ || left() < n) {
      fail();
      return;
    }
    at_ += n;
  }
  std::string_view cstring() {
    if (!ok_) return {};
    const size_t end = b_.find('\0', at_);
    if (end == std::string_view::npos) {
      fail();
      return {};
    }
    std::string_view s = b_.substr(at_, end - at_);
    at_ = end + 1;
    return s;
  }

 private:
  uint64_t fail() {
    ok_ = false;
    return 0;
  }
  std::string_view b_;
  uint64_t at_ = 0;
  bool ok_ = true;
};

// A NUL-terminated string at `offset` of `section`.
std::optional<std::string_view> string_at(std::string_view section, uint64_t offset) {
  if (offset >= section.size()) return std::nullopt;
  const size_t end = section.find('\0', offset);
  if (end == std::string_view::npos) return std::nullopt;
  return section.substr(offset, end - offset);
}

struct Sections {
  std::string_view info, abbrev, str, line_str, str_offsets;
  bool compressed = false;
};

// How a producer attribute refers to its string.
struct ProducerRef {
  uint64_t form = 0;
  uint64_t value = 0;          // offset or index
  std::string_view inline_string;
};

// Skips one attribute value of `form` (DWARF 5, 7.5.6). false: a form this
// reader does not know, or a value that does not fit.
bool skip_form(Cursor& c, uint64_t form, unsigned offset_size, unsigned address_size, int depth = 0) {
  switch (form) {
    case kAddr: c.skip(address_size); break;
    case kBlock2: c.skip(c.fixed(2)); break;
    case kBlock4: c.skip(c.fixed(4)); break;
    case kData2: case kRef2: case kStrx2: case kAddrx2: c.skip(2); break;
    case kData4: case kRef4: case kRefSup4: case kStrx4: case kAddrx4: c.skip(4); break;
    case kData8: case kRef8: case kRefSig8: case kRefSup8: c.skip(8); break;
    case kData16: c.skip(16); break;
    case kString: c.cstring(); break;
    case kBlock: case kExprloc: c.skip(c.uleb()); break;
    case kBlock1: c.skip(c.fixed(1)); break;
    case kData1: case kRef1: case kFlag: case kStrx1: case kAddrx1: c.skip(1); break;
    case kStrx3: case kAddrx3: c.skip(3); break;
    case kSdata: c.sleb(); break;
    case kUdata: case kRefUdata: case kStrx: case kAddrx: case kLoclistx: case kRnglistx:
    case kGnuAddrIndex: case kGnuStrIndex:
      c.uleb();
      break;
    case kStrp: case kRefAddr: case kSecOffset: case kStrpSup: case kLineStrp: case kGnuRefAlt:
    case kGnuStrpAlt:
      c.skip(offset_size);
      break;
    case kFlagPresent: case kImplicitConst: break;
    case kIndirect: {
      if (depth > 4) return false;
      const uint64_t real = c.uleb();
      return c.ok() && skip_form(c, real, offset_size, address_size, depth + 1);
    }
    default: return false;
  }
  return c.ok();
}

// The producer string `ref` points to; nullopt if it points outside.
std::optional<std::string> resolve(const Sections& s, const ProducerRef& ref, unsigned offset_size,
                                   std::optional<uint64_t> str_offsets_base) {
  switch (ref.form) {
    case kString: return std::string(ref.inline_string);
    case kStrp: {
      auto v = string_at(s.str, ref.value);
      return v ? std::optional<std::string>(std::string(*v)) : std::nullopt;
    }
    case kLineStrp: {
      auto v = string_at(s.line_str, ref.value);
      return v ? std::optional<std::string>(std::string(*v)) : std::nullopt;
    }
    case kStrx: case kStrx1: case kStrx2: case kStrx3: case kStrx4: case kGnuStrIndex: {
      // DWARF 5: the unit's base, past the 8-byte (32-bit) or 16-byte
      // (64-bit) header of .debug_str_offsets when the unit names none.
      const uint64_t base = str_offsets_base.value_or(offset_size == 8 ? 16 : 8);
      if (ref.value > (UINT64_MAX - base) / offset_size) return std::nullopt;
      Cursor c(s.str_offsets, base + ref.value * offset_size);
      const uint64_t offset = c.fixed(offset_size);
      if (!c.ok()) return std::nullopt;
      auto v = string_at(s.str, offset);
      return v ? std::optional<std::string>(std::string(*v)) : std::nullopt;
    }
    default: return std::nullopt;
  }
}

}  // namespace

Result<std::vector<CompileUnitProducer>> compile_unit_producers(std::span<const uint8_t> file,
                                                                const ElfImage& image) {
  std::vector<CompileUnitProducer> out;
  Sections s;
  const std::string_view all(reinterpret_cast<const char*>(file.data()), file.size());
  for (const ElfImage::DebugSection& d : image.debug_sections()) {
    if (d.offset > all.size() || all.size() - d.offset < d.size) {
      return dwarf_error(d.name + " is not inside the file");
    }
    const std::string_view bytes = all.substr(d.offset, d.size);
    std::string_view* slot = d.name == ".debug_info"          ? &s.info
                             : d.name == ".debug_abbrev"      ? &s.abbrev
                             : d.name == ".debug_str"         ? &s.str
                             : d.name == ".debug_line_str"    ? &s.line_str
                             : d.name == ".debug_str_offsets" ? &s.str_offsets
                                                              : nullptr;
    if (slot == nullptr) continue;
    *slot = bytes;
    s.compressed |= d.compressed;
  }
  if (s.info.empty() || s.compressed) return out;

  Cursor units(s.info);
  while (!units.done()) {
    const uint64_t unit_start = units.at();
    uint64_t length = units.fixed(4);
    unsigned offset_size = 4;
    if (length == 0xffffffffu) {
      length = units.fixed(8);
      offset_size = 8;
    } else if (length >= 0xfffffff0u) {
      return dwarf_error("unit at " + std::to_string(unit_start) + " has a reserved length");
    }
    if (!units.ok() || length > units.left()) {
      return dwarf_error("unit at " + std::to_string(unit_start) + " extends past .debug_info");
    }
    const uint64_t unit_end = units.at() + length;
    Cursor c(s.info.substr(0, unit_end), units.at());
    units.skip(length);
    const uint16_t version = static_cast<uint16_t>(c.fixed(2));
    if (!c.ok() || version < 2 || version > 5) {
      return dwarf_error("unit at " + std::to_string(unit_start) + " has version " + std::to_string(version));
    }
    uint64_t abbrev_offset = 0;
    unsigned address_size = 0;
    uint8_t unit_type = kUtCompile;
    if (version >= 5) {
      unit_type = static_cast<uint8_t>(c.fixed(1));
      address_size = static_cast<unsigned>(c.fixed(1));
      abbrev_offset = c.fixed(offset_size);
      if (unit_type == kUtSkeleton || unit_type == kUtSplitCompile) c.skip(8);  // dwo_id
      if (unit_type != kUtCompile && unit_type != kUtPartial && unit_type != kUtSkeleton &&
          unit_type != kUtSplitCompile) {
        continue;  // type units: no producer of their own worth reading
      }
    } else {
      abbrev_offset = c.fixed(offset_size);
      address_size = static_cast<unsigned>(c.fixed(1));
    }
    if (!c.ok()) return dwarf_error("unit at " + std::to_string(unit_start) + " has a truncated header");
    if (address_size != 4 && address_size != 8) {
      return dwarf_error("unit at " + std::to_string(unit_start) + " has address size " +
                         std::to_string(address_size));
    }
    const uint64_t code = c.uleb();
    if (!c.ok()) return dwarf_error("unit at " + std::to_string(unit_start) + " has no DIE");
    if (code == 0) continue;  // an empty unit
    // Its abbreviation: (code, tag, children, then (attribute, form
    // [, implicit const]) pairs to (0, 0)), in the unit's table.
    if (abbrev_offset >= s.abbrev.size()) {
      return dwarf_error("unit at " + std::to_string(unit_start) + ": abbreviations at " +
                         std::to_string(abbrev_offset) + " are past .debug_abbrev");
    }
    Cursor a(s.abbrev, abbrev_offset);
    bool found = false;
    uint64_t tag = 0;
    while (a.ok() && !a.done()) {
      const uint64_t this_code = a.uleb();
      if (this_code == 0) break;  // end of the unit's table
      tag = a.uleb();
      a.skip(1);                  // children
      if (this_code == code) {
        found = true;
        break;
      }
      for (;;) {  // the attributes of an abbreviation that is not ours
        const uint64_t attr = a.uleb(), form = a.uleb();
        if (!a.ok() || (attr == 0 && form == 0)) break;
        if (form == kImplicitConst) a.sleb();
      }
    }
    if (!a.ok() || !found) {
      return dwarf_error("unit at " + std::to_string(unit_start) + ": abbreviation " + std::to_string(code) +
                         " not found");
    }
    if (tag != kTagCompileUnit && tag != kTagPartialUnit && tag != kTagSkeletonUnit) {
      return dwarf_error("unit at " + std::to_string(unit_start) + " does not start with a unit DIE");
    }
    std::optional<ProducerRef> producer;
    std::optional<uint64_t> str_offsets_base;
    bool has_code = false;
    for (int n = 0;; ++n) {
      const uint64_t attr = a.uleb();
      uint64_t form = a.uleb();
      if (!a.ok()) return dwarf_error("unit at " + std::to_string(unit_start) + ": truncated abbreviation");
      if (attr == 0 && form == 0) break;
      if (n > 4096) return dwarf_error("unit at " + std::to_string(unit_start) + ": endless abbreviation");
      if (form == kImplicitConst) a.sleb();
      for (int depth = 0; form == kIndirect && depth < 4; ++depth) form = c.uleb();
      has_code |= attr == kAtLowPc || attr == kAtRanges;
      if (attr == kAtProducer) {
        ProducerRef ref;
        ref.form = form;
        switch (form) {
          case kString: ref.inline_string = c.cstring(); break;
          case kStrp: case kLineStrp: ref.value = c.fixed(offset_size); break;
          case kStrx: case kGnuStrIndex: ref.value = c.uleb(); break;
          case kStrx1: ref.value = c.fixed(1); break;
          case kStrx2: ref.value = c.fixed(2); break;
          case kStrx3: ref.value = c.fixed(3); break;
          case kStrx4: ref.value = c.fixed(4); break;
          default: {
            if (!skip_form(c, form, offset_size, address_size)) {
              return dwarf_error("unit at " + std::to_string(unit_start) + ": producer in form " +
                                 std::to_string(form));
            }
            continue;  // a producer that is no string: none
          }
        }
        producer = ref;
      } else if (attr == kAtStrOffsetsBase && form == kSecOffset) {
        str_offsets_base = c.fixed(offset_size);
      } else if (!skip_form(c, form, offset_size, address_size)) {
        return dwarf_error("unit at " + std::to_string(unit_start) + ": attribute " + std::to_string(attr) +
                           " in unknown form " + std::to_string(form));
      }
      if (!c.ok()) return dwarf_error("unit at " + std::to_string(unit_start) + ": its DIE runs past the unit");
    }
    CompileUnitProducer unit;
    unit.version = version;
    unit.has_code = has_code;
    if (producer) {
      auto text = resolve(s, *producer, offset_size, str_offsets_base);
      if (!text) return dwarf_error("unit at " + std::to_string(unit_start) + ": producer string out of range");
      unit.producer = std::move(*text);
    }
    out.push_back(std::move(unit));
    if (out.size() > (1u << 20)) return dwarf_error("more than a million units");
  }
  return out;
}

}  // namespace ftjit
