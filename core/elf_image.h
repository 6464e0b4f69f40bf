// SPDX-License-Identifier: MIT
// ElfImage: a bounds-checked reader for the parts of an ELF64 LE file that discovery needs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/bulk_memory.h"
#include "core/error.h"
#include "core/site.h"

namespace ftjit {

// The ISA of an ELF header's e_machine (kUnknown for any other).
Isa isa_from_machine(uint16_t machine);

// A function symbol (STT_FUNC or STT_GNU_IFUNC, defined in this file).
struct ElfSymbol {
  uint64_t value = 0;  // link-time virtual address
  uint64_t size = 0;
  // As in the string table (mangled for C++): a view of its ElfImage's
  // copy of the names, valid as long as that image (or a copy of it) is.
  std::string_view name;
  bool ifunc = false;  // STT_GNU_IFUNC: value is the resolver, not the function
  // Defined in a section with SHF_EXECINSTR (false for SHN_ABS and the
  // like): only such a symbol may be a function whose sled lost its
  // record (core/sled_recovery.h).
  bool in_code_section = false;
  uint8_t binding = 0;   // STB_GLOBAL, STB_WEAK, STB_LOCAL...
  bool mangled = false;  // the name starts with "_Z": a C++ (Itanium) name
};

// What discovery reads from one linked ELF64 little-endian file
// (ET_EXEC or ET_DYN). An image views the bytes it was parsed from (the
// symbol names, the code around each record) instead of copying them: a
// module of a million sites has a 15 MB string table and 32 MB of such
// code, and fresh memory costs a page fault (in a VM, a trip to the
// hypervisor) per page. So it shares the ownership of those bytes: the
// caller's `owner` (a mapping of the file) or, when none is given, a copy
// of them made once.
//
// The parser treats its input as hostile: every offset, size, count and
// string index is checked against the file before it is used, counts are
// bounded by the file size, and every violation becomes an FTJIT_E_ELF
// error naming the field, never a crash or an allocation larger than a
// small multiple of the input.
class ElfImage {
 public:
  // One PT_LOAD program header.
  struct Segment {
    uint64_t vaddr = 0;
    uint64_t memsz = 0;
    uint64_t offset = 0;
    uint64_t filesz = 0;
    uint32_t flags = 0;  // PF_R | PF_W | PF_X
  };

  // Parses a whole file. Fails with FTJIT_E_ELF if the bytes are not an
  // ELF64 little-endian executable or shared object, or if any header,
  // table or string the parser needs is truncated or inconsistent.
  // `owner` keeps `file` readable for as long as it lives (the image and
  // whoever shares function_names() keep it); without one the image
  // copies `file`.
  [[nodiscard]] static Result<ElfImage> parse(std::span<const uint8_t> file);
  [[nodiscard]] static Result<ElfImage> parse(std::span<const uint8_t> file,
                                              std::shared_ptr<const void> owner);

  // What site discovery needs, at a cost that follows the file's sites:
  // like parse(), but a file without a __patchable_function_entries
  // section stops after the headers (no symbols, no relocations read or
  // checked). A process's libc, libstdc++... have none, and their symbol
  // tables were most of the time of scanning it.
  [[nodiscard]] static Result<ElfImage> parse_for_sites(std::span<const uint8_t> file);
  [[nodiscard]] static Result<ElfImage> parse_for_sites(std::span<const uint8_t> file,
                                                        std::shared_ptr<const void> owner);

  // ISA from e_machine; Isa::kUnknown for machines ftjit has no backend for.
  Isa isa() const { return isa_; }

  // True for ET_DYN (PIE executables and shared objects), whose link-time
  // addresses must be shifted by the load bias.
  bool is_dynamic() const { return dynamic_; }

  // True if at least one section is named __patchable_function_entries,
  // even if it holds no usable record.
  bool has_patchable_section() const { return has_patchable_section_; }

  // Link-time address of the first NOP of every sled, sorted and without
  // duplicates. A record's value is its 8-byte word, or the addend of a
  // dynamic RELA relocation of that word when there is one (PIE/.so files
  // leave the word 0). Records that point outside every executable PT_LOAD
  // segment (e.g. 0, left by a function the linker discarded) are dropped,
  // so that no caller ever patches an address that is not code.
  const BulkVector<uint64_t>& patchable_records() const { return records_; }

  // The file's code around each record, as much as discovery must see of
  // it: [record - kCodeBeforeRecord, record + kCodeAfterRecord) reaches a
  // landing pad just before an =N,0 record and the symbol (and its pad)
  // of an =N,M one (core/site_discovery.h). A view of the file; bytes
  // outside the file-backed part of the record's executable segment read
  // as 0 (no NOP or landing pad is all zeros), from a copy made at parse
  // time for the few windows that reach past it.
  static constexpr uint64_t kCodeBeforeRecord = 8;
  static constexpr uint64_t kCodeAfterRecord = 24;
  static constexpr uint64_t kCodeWindowBytes = kCodeBeforeRecord + kCodeAfterRecord;

  // The window of patchable_records()[index]: kCodeWindowBytes, starting at
  // record - kCodeBeforeRecord.
  std::span<const uint8_t> code_near_record(size_t index) const;

  // Defined function symbols from .symtab, or from .dynsym when the file is
  // stripped. Sorted by value; symbols at the same value are ordered
  // GLOBAL, WEAK, LOCAL, then by name, so the first one is the best name.
  const BulkVector<ElfSymbol>& functions() const { return functions_; }
  // What keeps the bytes functions()' names view, to share with whoever
  // keeps those views past this image.
  const std::shared_ptr<const void>& function_names() const { return owner_; }

  // The preferred symbol whose value is exactly vaddr, or nullptr.
  const ElfSymbol* function_at(uint64_t vaddr) const;

  // Every PT_LOAD segment, in program header order.
  const std::vector<Segment>& load_segments() const { return segments_; }

  // The bytes of `file` (the bytes this image was parsed from) that hold
  // the code at link-time vaddr: `length` bytes, fewer where the
  // file-backed part of its executable PT_LOAD segment ends, none when
  // vaddr lies in no such part. Unlike code_near_record, reads the file,
  // not a copy: for code that has no record.
  std::span<const uint8_t> code_in_file(std::span<const uint8_t> file, uint64_t vaddr,
                                        uint64_t length) const;

  // PT_GNU_EH_FRAME (.eh_frame_hdr: the sorted index of the unwind
  // tables' function starts, core/eh_frame_index.h); filesz 0 if the file
  // has none.
  const Segment& eh_frame_hdr() const { return eh_frame_hdr_; }

  // e_flags: what the file's code may use (riscv64: EF_RISCV_RVC, the C
  // extension, whose NOP is the 2-byte c.nop).
  uint32_t flags() const { return flags_; }

  // The file's DWARF sections (named .debug_*), where they are in the file
  // (inside it: checked) and whether they are SHF_COMPRESSED. Only their
  // places are kept: core/dwarf_producers.h reads them from the same bytes.
  struct DebugSection {
    std::string name;
    uint64_t offset = 0;
    uint64_t size = 0;
    bool compressed = false;
  };
  const std::vector<DebugSection>& debug_sections() const { return debug_sections_; }

 private:
  static Result<ElfImage> build(std::span<const uint8_t> file, std::shared_ptr<const void> owner,
                                bool only_if_patchable);

  // A record's window that the file does not hold whole (next to a
  // segment's end, or below address 0), padded with zeros.
  struct PaddedWindow {
    size_t index;  // in records_
    uint8_t bytes[kCodeWindowBytes];
  };

  Isa isa_ = Isa::kUnknown;
  uint32_t flags_ = 0;
  bool dynamic_ = false;
  bool has_patchable_section_ = false;
  // The bytes parsed, and what keeps them readable.
  std::span<const uint8_t> file_;
  std::shared_ptr<const void> owner_;
  BulkVector<uint64_t> records_;
  std::vector<PaddedWindow> padded_windows_;  // sorted by index
  BulkVector<ElfSymbol> functions_;  // names view file_
  std::vector<Segment> segments_;
  std::vector<Segment> code_segments_;  // the executable ones (one, nearly always)
  Segment eh_frame_hdr_;
  std::vector<DebugSection> debug_sections_;
};

}  // namespace ftjit
