// SPDX-License-Identifier: MIT
// ElfImage::parse: reads headers, __patchable_function_entries and function symbols, trusting no field.
#include "core/elf_image.h"
#include "core/elf_section_probe.h"

#include <elf.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include "core/sort_by_address.h"

namespace ftjit {
namespace {

// Loads go through memcpy of host-order structs; every ISA ftjit supports is
// little-endian, and big-endian files are rejected before any load.
static_assert(std::endian::native == std::endian::little,
              "ElfImage reads little-endian structs in host order");

constexpr uint64_t kRecordSize = 8;

// A hostile file can point thousands of symbols at one long string; finding
// each one's end (and copying it, for whoever keeps names) would cost time
// and memory quadratic in the file size. Real string tables
// are shared by few symbols, so a few times the file size is ample.
constexpr uint64_t kNameBudgetFactor = 4;
constexpr uint64_t kNameBudgetSlack = uint64_t{1} << 20;

// ============================================================================
// Messages
// ============================================================================

std::string hex(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  char buf[19];
  char* p = buf + sizeof buf;
  do {
    *--p = kDigits[v & 0xf];
    v >>= 4;
  } while (v != 0);
  *--p = 'x';
  *--p = '0';
  return std::string(p, buf + sizeof buf);
}

Error elf_error(std::string what) { return make_error(FTJIT_E_ELF, std::move(what)); }

std::string section_label(uint64_t index, std::string_view name) {
  // Names come from the file and may be as long as it: keep messages short.
  constexpr size_t kMaxShown = 64;
  std::string s = "section [" + std::to_string(index) + "]";
  if (!name.empty()) {
    s += " '" + std::string(name.substr(0, kMaxShown)) +
         (name.size() > kMaxShown ? "...'" : "'");
  }
  return s;
}

// ============================================================================
// Bounds-checked access
// ============================================================================

class FileView {
 public:
  explicit FileView(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t size() const { return bytes_.size(); }

  // Written so that no addition can wrap: offset and length both come from
  // the file and may be anything.
  bool contains(uint64_t offset, uint64_t length) const {
    return offset <= bytes_.size() && length <= bytes_.size() - offset;
  }

  // Caller has checked contains(offset, sizeof(T)). memcpy because offsets
  // from the file need not be aligned for T.
  template <typename T>
  T load(uint64_t offset) const {
    T value;
    std::memcpy(&value, bytes_.data() + offset, sizeof value);
    return value;
  }

  std::span<const uint8_t> slice(uint64_t offset, uint64_t length) const {
    return bytes_.subspan(offset, length);
  }

 private:
  std::span<const uint8_t> bytes_;
};

// Checks that count entries of entsize bytes at offset lie inside the file.
// Dividing instead of multiplying keeps a huge count from wrapping around,
// and it is what bounds every later allocation by the file size.
Status check_table(const FileView& file, uint64_t offset, uint64_t count,
                   uint64_t entsize, const char* what) {
  if (count == 0) return {};
  if (offset > file.size() || count > (file.size() - offset) / entsize) {
    return elf_error(std::string(what) + " at offset " + hex(offset) + " with " +
                     std::to_string(count) + " entries of " + std::to_string(entsize) +
                     " bytes extends past the end of the file (" +
                     std::to_string(file.size()) + " bytes)");
  }
  return {};
}

// Two byte ranges [a, a+alen) and [b, b+blen), both already inside the file.
bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
  return alen != 0 && blen != 0 && a < b + blen && b < a + alen;
}

// `what()` names the string in an error: built only for one, not for
// each of a million symbols' names.
template <typename Describe>
Result<std::string_view> string_at(std::span<const uint8_t> table, uint64_t index,
                                   const Describe& describe) {
  if (index >= table.size()) {
    return elf_error(describe() + ": string index " + hex(index) +
                     " is outside its string table (" + std::to_string(table.size()) +
                     " bytes)");
  }
  const auto* start = table.data() + index;
  const auto* end = static_cast<const uint8_t*>(std::memchr(start, 0, table.size() - index));
  if (end == nullptr) {
    return elf_error(describe() + ": string at index " + hex(index) +
                     " is not terminated inside its string table");
  }
  return std::string_view(reinterpret_cast<const char*>(start),
                          static_cast<size_t>(end - start));
}

// ============================================================================
// Headers
// ============================================================================

Result<Elf64_Ehdr> read_elf_header(const FileView& file) {
  if (file.size() < EI_NIDENT) {
    return elf_error("file too short for an ELF identification (" +
                     std::to_string(file.size()) + " bytes)");
  }
  auto ident = file.slice(0, EI_NIDENT);
  if (std::memcmp(ident.data(), ELFMAG, SELFMAG) != 0) {
    return elf_error("not an ELF file (bad magic)");
  }
  if (ident[EI_CLASS] != ELFCLASS64) {
    return elf_error(ident[EI_CLASS] == ELFCLASS32
                         ? std::string("ELF32 files are not supported")
                         : "unknown ELF class " + std::to_string(ident[EI_CLASS]));
  }
  if (ident[EI_DATA] != ELFDATA2LSB) {
    return elf_error(ident[EI_DATA] == ELFDATA2MSB
                         ? std::string("big-endian ELF files are not supported")
                         : "unknown ELF data encoding " + std::to_string(ident[EI_DATA]));
  }
  if (ident[EI_VERSION] != EV_CURRENT) {
    return elf_error("unknown ELF version " + std::to_string(ident[EI_VERSION]));
  }
  if (!file.contains(0, sizeof(Elf64_Ehdr))) {
    return elf_error("file truncated inside the ELF header (" +
                     std::to_string(file.size()) + " of " +
                     std::to_string(sizeof(Elf64_Ehdr)) + " bytes)");
  }
  auto ehdr = file.load<Elf64_Ehdr>(0);
  if (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN) {
    // Relocatable objects keep section-relative records that only a link
    // resolves; cores and others have no patchable code of their own.
    return elf_error("ELF type " + std::to_string(ehdr.e_type) +
                     " is not an executable or shared object");
  }
  return ehdr;
}

// The section header table, with its count and string table index resolved
// through section 0 when they do not fit the ELF header (extended numbering).
struct SectionTable {
  std::vector<Elf64_Shdr> headers;
  uint64_t shstrndx = SHN_UNDEF;
  uint64_t phnum = 0;  // resolved program header count, PN_XNUM handled
};

Result<SectionTable> read_section_table(const FileView& file, const Elf64_Ehdr& ehdr) {
  SectionTable table;
  table.phnum = ehdr.e_phnum;
  uint64_t shnum = ehdr.e_shnum;
  table.shstrndx = ehdr.e_shstrndx;

  if (ehdr.e_shoff == 0) {
    if (shnum != 0) {
      return elf_error("e_shnum is " + std::to_string(shnum) + " but e_shoff is 0");
    }
    if (table.phnum == PN_XNUM) {
      return elf_error("e_phnum is PN_XNUM but there is no section 0 to hold the count");
    }
    // No section headers (sstripped): legal, just nothing to find. A stale
    // e_shstrndx names nothing then.
    table.shstrndx = SHN_UNDEF;
    return table;
  }
  if (ehdr.e_shentsize != sizeof(Elf64_Shdr)) {
    return elf_error("e_shentsize is " + std::to_string(ehdr.e_shentsize) + ", expected " +
                     std::to_string(sizeof(Elf64_Shdr)));
  }
  if (ehdr.e_shoff < sizeof(Elf64_Ehdr)) {
    return elf_error("section header table at " + hex(ehdr.e_shoff) +
                     " overlaps the ELF header");
  }
  FTJIT_TRY(check_table(file, ehdr.e_shoff, 1, sizeof(Elf64_Shdr), "section header table"));
  auto section0 = file.load<Elf64_Shdr>(ehdr.e_shoff);
  if (shnum == 0) shnum = section0.sh_size;
  if (table.shstrndx == SHN_XINDEX) table.shstrndx = section0.sh_link;
  if (table.phnum == PN_XNUM) table.phnum = section0.sh_info;

  FTJIT_TRY(check_table(file, ehdr.e_shoff, shnum, sizeof(Elf64_Shdr), "section header table"));
  if (table.shstrndx != SHN_UNDEF && table.shstrndx >= shnum) {
    return elf_error("section name table index " + std::to_string(table.shstrndx) +
                     " is out of range (" + std::to_string(shnum) + " sections)");
  }
  table.headers.reserve(shnum);
  for (uint64_t i = 0; i < shnum; ++i) {
    table.headers.push_back(file.load<Elf64_Shdr>(ehdr.e_shoff + i * sizeof(Elf64_Shdr)));
  }
  return table;
}

// Also where PT_GNU_EH_FRAME is (*eh_frame_hdr, filesz 0 if absent or
// not inside the file).
Result<std::vector<ElfImage::Segment>> read_load_segments(const FileView& file,
                                                          const Elf64_Ehdr& ehdr,
                                                          const SectionTable& sections,
                                                          ElfImage::Segment* eh_frame_hdr) {
  const uint64_t phnum = sections.phnum;
  std::vector<ElfImage::Segment> segments;
  if (phnum == 0) return segments;
  if (ehdr.e_phoff == 0) {
    return elf_error("e_phnum is " + std::to_string(phnum) + " but e_phoff is 0");
  }
  if (ehdr.e_phentsize != sizeof(Elf64_Phdr)) {
    return elf_error("e_phentsize is " + std::to_string(ehdr.e_phentsize) + ", expected " +
                     std::to_string(sizeof(Elf64_Phdr)));
  }
  if (ehdr.e_phoff < sizeof(Elf64_Ehdr)) {
    return elf_error("program header table at " + hex(ehdr.e_phoff) +
                     " overlaps the ELF header");
  }
  FTJIT_TRY(check_table(file, ehdr.e_phoff, phnum, sizeof(Elf64_Phdr), "program header table"));
  if (overlaps(ehdr.e_phoff, phnum * sizeof(Elf64_Phdr), ehdr.e_shoff,
               sections.headers.size() * sizeof(Elf64_Shdr))) {
    return elf_error("program header table overlaps the section header table");
  }
  for (uint64_t i = 0; i < phnum; ++i) {
    auto ph = file.load<Elf64_Phdr>(ehdr.e_phoff + i * sizeof(Elf64_Phdr));
    if (ph.p_type == PT_GNU_EH_FRAME && file.contains(ph.p_offset, ph.p_filesz)) {
      *eh_frame_hdr = {ph.p_vaddr, ph.p_memsz, ph.p_offset, ph.p_filesz, ph.p_flags};
    }
    if (ph.p_type != PT_LOAD) continue;
    std::string what = "PT_LOAD program header " + std::to_string(i);
    if (!file.contains(ph.p_offset, ph.p_filesz)) {
      return elf_error(what + ": file range " + hex(ph.p_offset) + " + " + hex(ph.p_filesz) +
                       " extends past the end of the file");
    }
    if (ph.p_filesz > ph.p_memsz) {
      return elf_error(what + ": p_filesz " + hex(ph.p_filesz) + " exceeds p_memsz " +
                       hex(ph.p_memsz));
    }
    if (ph.p_vaddr + ph.p_memsz < ph.p_vaddr) {
      return elf_error(what + ": address range " + hex(ph.p_vaddr) + " + " +
                       hex(ph.p_memsz) + " wraps around");
    }
    segments.push_back({ph.p_vaddr, ph.p_memsz, ph.p_offset, ph.p_filesz, ph.p_flags});
  }
  return segments;
}

// ============================================================================
// Sections
// ============================================================================

// The section table after every header was checked against the file.
class Sections {
 public:
  static Result<Sections> check(const FileView& file, SectionTable table, uint64_t shoff) {
    Sections s(file, std::move(table.headers));
    const uint64_t count = s.headers_.size();
    const uint64_t table_bytes = count * sizeof(Elf64_Shdr);
    if (table.shstrndx != SHN_UNDEF) {
      const auto& sh = s.headers_[table.shstrndx];
      if (sh.sh_type == SHT_NOBITS || !file.contains(sh.sh_offset, sh.sh_size)) {
        return elf_error("section name table [" + std::to_string(table.shstrndx) +
                         "] at " + hex(sh.sh_offset) + " + " + hex(sh.sh_size) +
                         " is not inside the file");
      }
      s.names_ = file.slice(sh.sh_offset, sh.sh_size);
    }
    s.name_views_.resize(count);
    for (uint64_t i = 1; i < count; ++i) {
      const auto& sh = s.headers_[i];
      if (table.shstrndx != SHN_UNDEF) {
        auto name = string_at(s.names_, sh.sh_name, [&] { return section_label(i, {}) + " name"; });
        FTJIT_TRY(name);
        s.name_views_[i] = name.value();
      } else if (sh.sh_name != 0) {
        return elf_error(section_label(i, {}) + " has a name but the file has no "
                                                "section name table");
      }
      if (sh.sh_type == SHT_NULL) continue;  // inactive: its other fields mean nothing
      const std::string label = section_label(i, s.name_views_[i]);
      if (sh.sh_link >= count) {
        return elf_error(label + ": sh_link " + std::to_string(sh.sh_link) +
                         " is out of range (" + std::to_string(count) + " sections)");
      }
      if (sh.sh_type == SHT_NOBITS) continue;
      if (!file.contains(sh.sh_offset, sh.sh_size)) {
        return elf_error(label + " at " + hex(sh.sh_offset) + " + " + hex(sh.sh_size) +
                         " extends past the end of the file (" + std::to_string(file.size()) +
                         " bytes)");
      }
      if (overlaps(sh.sh_offset, sh.sh_size, 0, sizeof(Elf64_Ehdr))) {
        return elf_error(label + " overlaps the ELF header");
      }
      if (overlaps(sh.sh_offset, sh.sh_size, shoff, table_bytes)) {
        return elf_error(label + " overlaps the section header table");
      }
    }
    return s;
  }

  uint64_t count() const { return headers_.size(); }
  const Elf64_Shdr& operator[](uint64_t i) const { return headers_[i]; }
  std::string_view name(uint64_t i) const { return name_views_[i]; }
  std::string label(uint64_t i) const { return section_label(i, name_views_[i]); }

  // SHT_NULL and SHT_NOBITS headers were not bounds-checked (their offsets
  // mean nothing), so they have no contents to read.
  bool has_contents(uint64_t i) const {
    return headers_[i].sh_type != SHT_NULL && headers_[i].sh_type != SHT_NOBITS;
  }

  // Empty for sections without contents; bounds-checked otherwise.
  std::span<const uint8_t> contents(uint64_t i) const {
    if (!has_contents(i)) return {};
    return file_.slice(headers_[i].sh_offset, headers_[i].sh_size);
  }

 private:
  Sections(const FileView& file, std::vector<Elf64_Shdr> headers)
      : file_(file), headers_(std::move(headers)) {}

  FileView file_;
  std::vector<Elf64_Shdr> headers_;
  std::span<const uint8_t> names_;
  std::vector<std::string_view> name_views_;  // view into the file's bytes
};

// A symbol table section with its string table, both bounds-checked.
struct SymbolTable {
  std::span<const uint8_t> entries;
  std::span<const uint8_t> strings;
  uint64_t count() const { return entries.size() / sizeof(Elf64_Sym); }
  Elf64_Sym at(uint64_t i) const {
    Elf64_Sym sym;
    std::memcpy(&sym, entries.data() + i * sizeof(Elf64_Sym), sizeof sym);
    return sym;
  }
};

Result<SymbolTable> symbol_table(const Sections& sections, uint64_t index) {
  const auto& sh = sections[index];
  const std::string label = sections.label(index);
  if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) {
    return elf_error(label + " is not a symbol table (type " + std::to_string(sh.sh_type) + ")");
  }
  if (sh.sh_entsize != sizeof(Elf64_Sym)) {
    return elf_error(label + ": sh_entsize is " + std::to_string(sh.sh_entsize) +
                     ", expected " + std::to_string(sizeof(Elf64_Sym)));
  }
  if (sh.sh_size % sizeof(Elf64_Sym) != 0) {
    return elf_error(label + ": size " + hex(sh.sh_size) + " is not a multiple of " +
                     std::to_string(sizeof(Elf64_Sym)));
  }
  const auto& strtab = sections[sh.sh_link];  // sh_link range checked by Sections
  if (strtab.sh_type != SHT_STRTAB) {
    return elf_error(label + ": sh_link " + std::to_string(sh.sh_link) +
                     " is not a string table");
  }
  return SymbolTable{sections.contents(index), sections.contents(sh.sh_link)};
}

// ============================================================================
// Records
// ============================================================================

// The words of the __patchable_function_entries sections, as read (then
// as their relocations make them): one array for all of them, and where
// each section's run of words lives. A million records are 8 MB once,
// not a 16 MB array of (address, word) pairs beside the records.
class RecordWords {
 public:
  struct Run {
    uint64_t vaddr;  // of its first word
    size_t first;    // in values
    size_t count;
  };

  void add_section(uint64_t vaddr, std::span<const uint8_t> bytes) {
    const size_t count = bytes.size() / kRecordSize;
    runs_.push_back({vaddr, values_.size(), count});
    // Sized once: a million records grown by doubling fault in twice the pages.
    values_.resize(values_.size() + count);
    if (count != 0) std::memcpy(values_.data() + runs_.back().first, bytes.data(), count * kRecordSize);
  }
  // After the last add_section.
  void index() {
    std::stable_sort(runs_.begin(), runs_.end(), [](const Run& a, const Run& b) { return a.vaddr < b.vaddr; });
  }

  bool empty() const { return values_.empty(); }
  // The word at link-time `vaddr`, or nullptr. Sections overlap only in
  // hostile files: there, the run that starts last at or below vaddr is
  // asked, and no other.
  uint64_t* at(uint64_t vaddr) {
    auto it = std::upper_bound(runs_.begin(), runs_.end(), vaddr,
                               [](uint64_t a, const Run& r) { return a < r.vaddr; });
    if (it == runs_.begin()) return nullptr;
    --it;
    const uint64_t offset = vaddr - it->vaddr;
    if (offset % kRecordSize != 0 || offset / kRecordSize >= it->count) return nullptr;
    return &values_[it->first + offset / kRecordSize];
  }
  BulkVector<uint64_t>& values() { return values_; }

 private:
  std::vector<Run> runs_;
  BulkVector<uint64_t> values_;
};

struct RelocKinds {
  uint32_t relative;
  uint32_t abs64;
};

bool reloc_kinds(Isa isa, RelocKinds* out) {
  switch (isa) {
    case Isa::kX86_64: *out = {R_X86_64_RELATIVE, R_X86_64_64}; return true;
    case Isa::kArm64: *out = {R_AARCH64_RELATIVE, R_AARCH64_ABS64}; return true;
    case Isa::kRiscv64: *out = {R_RISCV_RELATIVE, R_RISCV_64}; return true;
    case Isa::kUnknown: break;
  }
  return false;
}

// Overwrites words that a dynamic RELA relocation targets with the
// link-time value the relocation produces (B = 0). Only SHF_ALLOC RELA
// sections are read: they are what the loader applies, while non-alloc
// ones (--emit-relocs) describe a value already in the word.
Status apply_dynamic_relocations(const Sections& sections, Isa isa, RecordWords& words) {
  RelocKinds kinds;
  if (words.empty() || !reloc_kinds(isa, &kinds)) return {};
  for (uint64_t i = 1; i < sections.count(); ++i) {
    const auto& sh = sections[i];
    if (sh.sh_type != SHT_RELA || (sh.sh_flags & SHF_ALLOC) == 0 || sh.sh_size == 0) continue;
    if (sh.sh_entsize != sizeof(Elf64_Rela)) {
      return elf_error(sections.label(i) + ": sh_entsize is " + std::to_string(sh.sh_entsize) +
                       ", expected " + std::to_string(sizeof(Elf64_Rela)));
    }
    if (sh.sh_size % sizeof(Elf64_Rela) != 0) {
      return elf_error(sections.label(i) + ": size " + hex(sh.sh_size) +
                       " is not a multiple of " + std::to_string(sizeof(Elf64_Rela)));
    }
    auto bytes = sections.contents(i);
    const uint64_t count = bytes.size() / sizeof(Elf64_Rela);
    // A word is found by its section's run (one, nearly always): a
    // million records' relocations cost no search over the words.
    for (uint64_t r = 0; r < count; ++r) {
      Elf64_Rela rela;
      std::memcpy(&rela, bytes.data() + r * sizeof rela, sizeof rela);
      uint64_t* word = words.at(rela.r_offset);
      if (word == nullptr) continue;
      const uint32_t type = ELF64_R_TYPE(rela.r_info);
      const uint64_t sym_index = ELF64_R_SYM(rela.r_info);
      const auto addend = static_cast<uint64_t>(rela.r_addend);
      if (type == kinds.relative || (type == kinds.abs64 && sym_index == 0)) {
        *word = addend;
      } else if (type == kinds.abs64) {
        auto symtab = symbol_table(sections, sh.sh_link);
        FTJIT_TRY(symtab);
        if (sym_index >= symtab->count()) {
          return elf_error(sections.label(i) + ": relocation " + std::to_string(r) +
                           " names symbol " + std::to_string(sym_index) + " of " +
                           std::to_string(symtab->count()));
        }
        auto sym = symtab->at(sym_index);
        // An undefined symbol resolves in another object; a record of this
        // module cannot point there, so the word is left as the file has it.
        if (sym.st_shndx != SHN_UNDEF) *word = sym.st_value + addend;
      }
    }
  }
  return {};
}

bool in_executable_segment(const std::vector<ElfImage::Segment>& segments, uint64_t vaddr) {
  if (segments.empty()) return true;  // nothing to judge by
  return std::any_of(segments.begin(), segments.end(), [vaddr](const ElfImage::Segment& s) {
    return (s.flags & PF_X) != 0 && vaddr >= s.vaddr && vaddr - s.vaddr < s.memsz;
  });
}

Result<BulkVector<uint64_t>> read_records(const Sections& sections, Isa isa,
                                           const std::vector<ElfImage::Segment>& segments,
                                           bool* has_section) {
  RecordWords words;
  std::vector<uint64_t> found;  // the sections, checked
  for (uint64_t i = 1; i < sections.count(); ++i) {
    if (sections.name(i) != kPatchableSectionName) continue;
    *has_section = true;
    const auto& sh = sections[i];
    const std::string label = sections.label(i);
    if (!sections.has_contents(i)) {
      return elf_error(label + " has no contents in the file (type " +
                       std::to_string(sh.sh_type) + ")");
    }
    if (sh.sh_size % kRecordSize != 0) {
      return elf_error(label + ": size " + hex(sh.sh_size) + " is not a multiple of 8");
    }
    if (sh.sh_addr + sh.sh_size < sh.sh_addr) {
      return elf_error(label + ": address range " + hex(sh.sh_addr) + " + " + hex(sh.sh_size) +
                       " wraps around");
    }
    found.push_back(i);
  }
  uint64_t total = 0;
  for (uint64_t i : found) total += sections.contents(i).size() / kRecordSize;
  words.values().reserve(total);  // sized once: growing by doubling faults in twice the pages
  for (uint64_t i : found) words.add_section(sections[i].sh_addr, sections.contents(i));
  words.index();
  FTJIT_TRY(apply_dynamic_relocations(sections, isa, words));

  // The records are the words, kept in place: a zero word is the record
  // of a function the linker dropped.
  BulkVector<uint64_t> records = std::move(words.values());
  records.erase(std::remove_if(records.begin(), records.end(),
                               [&](uint64_t w) { return w == 0 || !in_executable_segment(segments, w); }),
                records.end());
  if (!std::is_sorted(records.begin(), records.end())) std::sort(records.begin(), records.end());
  records.erase(std::unique(records.begin(), records.end()), records.end());
  return records;
}

// Where the window of ElfImage::code_near_record for `record` starts in
// the file, when the file-backed part of the executable PT_LOAD segment
// holding the record (read_records kept only records inside one) holds
// the whole window: nearly every record. Addresses and file ranges were
// checked by read_load_segments: vaddr + memsz does not wrap, the file
// range lies inside the file.
std::optional<uint64_t> window_offset(const std::vector<ElfImage::Segment>& segments,
                                      uint64_t record) {
  constexpr uint64_t kWindow = ElfImage::kCodeWindowBytes;
  if (record < ElfImage::kCodeBeforeRecord) return std::nullopt;
  const uint64_t start = record - ElfImage::kCodeBeforeRecord;
  for (const auto& seg : segments) {
    if ((seg.flags & PF_X) == 0 || record < seg.vaddr || record - seg.vaddr >= seg.memsz) continue;
    if (start < seg.vaddr || start - seg.vaddr > seg.filesz || seg.filesz - (start - seg.vaddr) < kWindow) {
      return std::nullopt;
    }
    return seg.offset + (start - seg.vaddr);
  }
  return std::nullopt;
}

// The window of a record that window_offset finds no whole window for:
// what the file holds of it, zeros elsewhere.
void pad_window(const FileView& file, const std::vector<ElfImage::Segment>& segments,
                uint64_t record, uint8_t* window) {
  constexpr uint64_t kWindow = ElfImage::kCodeWindowBytes;
  std::memset(window, 0, kWindow);
  const uint64_t start = record >= ElfImage::kCodeBeforeRecord ? record - ElfImage::kCodeBeforeRecord : 0;
  const uint64_t skipped = start + ElfImage::kCodeBeforeRecord - record;  // below address 0
  for (const auto& seg : segments) {
    if ((seg.flags & PF_X) == 0 || record < seg.vaddr || record - seg.vaddr >= seg.memsz) continue;
    // [from, to): the window's addresses that the segment's file bytes back.
    const uint64_t from = std::max(start, seg.vaddr);
    const uint64_t to = std::min(start + kWindow - skipped, seg.vaddr + seg.filesz);
    if (from < to) {
      auto bytes = file.slice(seg.offset + (from - seg.vaddr), to - from);
      std::memcpy(window + skipped + (from - start), bytes.data(), bytes.size());
    }
    return;
  }
}

// ============================================================================
// Symbols
// ============================================================================

// Which of several symbols at one address names it best: lower first.
int binding_rank(unsigned binding) {
  switch (binding) {
    case STB_GLOBAL: return 0;
    case STB_WEAK: return 1;
    case STB_LOCAL: return 3;
    default: return 2;  // GNU_UNIQUE and OS-specific: visible, but unusual
  }
}

// Defined functions, sorted as ElfImage::functions() says; their names
// view the file's string table.
Result<BulkVector<ElfSymbol>> read_functions(const FileView& file, const Sections& sections) {
  uint64_t index = 0;
  for (unsigned type : {SHT_SYMTAB, SHT_DYNSYM}) {
    for (uint64_t i = 1; i < sections.count() && index == 0; ++i) {
      if (sections[i].sh_type == type && sections[i].sh_size != 0) index = i;
    }
    if (index != 0) break;
  }
  BulkVector<ElfSymbol> functions;
  if (index == 0) return functions;

  auto table = symbol_table(sections, index);
  FTJIT_TRY(table);
  const std::string label = sections.label(index);
  const uint64_t budget = kNameBudgetFactor * file.size() + kNameBudgetSlack;
  uint64_t name_bytes = 0;
  auto name_of = [&](uint64_t i) {  // checked by the first pass
    return string_at(table->strings, table->at(i).st_name, [&] { return label + " symbol " + std::to_string(i); });
  };

  // One pass over the table, in its order (symbol tables come in no useful
  // order: the names and entries are read sequentially only so, and a
  // second pass in address order missed the cache for every symbol), then
  // a sort of the symbols themselves.
  const std::string_view strings(reinterpret_cast<const char*>(table->strings.data()), table->strings.size());
  functions.reserve(table->count());
  for (uint64_t i = 1; i < table->count(); ++i) {  // entry 0 is the null symbol
    const auto sym = table->at(i);
    const unsigned type = ELF64_ST_TYPE(sym.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF) continue;
    auto name = name_of(i);
    FTJIT_TRY(name);
    name_bytes += name->size();
    if (name_bytes > budget) {
      return elf_error(label + ": function names total more than " + std::to_string(budget) +
                       " bytes, too many for a " + std::to_string(file.size()) +
                       "-byte file");
    }
    const bool in_code = sym.st_shndx < sections.count() && sym.st_shndx < SHN_LORESERVE &&
                         sections[sym.st_shndx].sh_type != SHT_NULL &&
                         (sections[sym.st_shndx].sh_flags & SHF_EXECINSTR) != 0;
    ElfSymbol& f = functions.emplace_back();
    f.value = sym.st_value;
    f.size = sym.st_size;
    f.name = strings.substr(sym.st_name, name->size());
    f.ifunc = type == STT_GNU_IFUNC;
    f.in_code_section = in_code;
    f.binding = static_cast<uint8_t>(ELF64_ST_BIND(sym.st_info));
    f.mangled = name->starts_with("_Z");
  }
  // By value first (a radix sort), then the few runs of one value by
  // binding (GLOBAL, WEAK, others, LOCAL) and name.
  sort_by_address(functions, [](const ElfSymbol& f) { return f.value; });
  // The rest of the fields too: the radix sort leaves equal values in no
  // particular order, and the order must not depend on it.
  auto preferred = [](const ElfSymbol& a, const ElfSymbol& b) {
    const int ra = binding_rank(a.binding), rb = binding_rank(b.binding);
    if (ra != rb) return ra < rb;
    if (a.name != b.name) return a.name < b.name;
    const auto* na = a.name.data();
    const auto* nb = b.name.data();  // into one string table
    return std::tie(a.size, a.ifunc, a.in_code_section, a.binding, na) <
           std::tie(b.size, b.ifunc, b.in_code_section, b.binding, nb);
  };
  for (size_t i = 0; i < functions.size();) {
    size_t end = i + 1;
    while (end < functions.size() && functions[end].value == functions[i].value) ++end;
    if (end - i > 1) {
      std::sort(functions.begin() + static_cast<ptrdiff_t>(i), functions.begin() + static_cast<ptrdiff_t>(end),
                preferred);
    }
    i = end;
  }
  return functions;
}

}  // namespace

Isa isa_from_machine(uint16_t machine) {
  switch (machine) {
    case EM_X86_64: return Isa::kX86_64;
    case EM_AARCH64: return Isa::kArm64;
    case EM_RISCV: return Isa::kRiscv64;
    default: return Isa::kUnknown;
  }
}

// ============================================================================
// ElfImage
// ============================================================================

namespace {

// The copy an image views when its caller gives no owner of the bytes.
std::pair<std::span<const uint8_t>, std::shared_ptr<const void>> copied(std::span<const uint8_t> bytes) {
  auto copy = std::make_shared<const std::vector<uint8_t>>(bytes.begin(), bytes.end());
  return {std::span<const uint8_t>(*copy), std::move(copy)};
}

}  // namespace

Result<ElfImage> ElfImage::parse(std::span<const uint8_t> bytes) {
  auto [view, owner] = copied(bytes);
  return build(view, std::move(owner), false);
}

Result<ElfImage> ElfImage::parse(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner) {
  if (!owner) return parse(bytes);
  return build(bytes, std::move(owner), false);
}

Result<ElfImage> ElfImage::parse_for_sites(std::span<const uint8_t> bytes) {
  auto [view, owner] = copied(bytes);
  return build(view, std::move(owner), true);
}

Result<ElfImage> ElfImage::parse_for_sites(std::span<const uint8_t> bytes,
                                           std::shared_ptr<const void> owner) {
  if (!owner) return parse_for_sites(bytes);
  return build(bytes, std::move(owner), true);
}

Result<ElfImage> ElfImage::build(std::span<const uint8_t> bytes, std::shared_ptr<const void> owner,
                                 bool only_if_patchable) {
  FileView file(bytes);
  auto ehdr = read_elf_header(file);
  FTJIT_TRY(ehdr);
  auto table = read_section_table(file, ehdr.value());
  FTJIT_TRY(table);
  ElfImage::Segment eh_frame_hdr;
  auto segments = read_load_segments(file, ehdr.value(), table.value(), &eh_frame_hdr);
  FTJIT_TRY(segments);
  auto sections = Sections::check(file, std::move(table.value()), ehdr->e_shoff);
  FTJIT_TRY(sections);

  ElfImage img;
  img.isa_ = isa_from_machine(ehdr->e_machine);
  img.flags_ = ehdr->e_flags;
  img.dynamic_ = ehdr->e_type == ET_DYN;
  img.file_ = bytes;
  img.owner_ = std::move(owner);
  img.segments_ = std::move(segments.value());
  for (const Segment& seg : img.segments_) {
    if ((seg.flags & PF_X) != 0) img.code_segments_.push_back(seg);
  }
  img.eh_frame_hdr_ = eh_frame_hdr;
  for (uint64_t i = 1; i < sections->count(); ++i) {
    const auto& sh = (*sections)[i];
    if (sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_NULL || sections->name(i).substr(0, 7) != ".debug_") continue;
    img.debug_sections_.push_back(
        {std::string(sections->name(i)), sh.sh_offset, sh.sh_size, (sh.sh_flags & SHF_COMPRESSED) != 0});
  }
  if (only_if_patchable) {
    bool patchable = false;
    for (uint64_t i = 1; i < sections->count() && !patchable; ++i) {
      patchable = sections->name(i) == kPatchableSectionName;
    }
    if (!patchable) return img;
  }
  auto records = read_records(sections.value(), img.isa_, img.segments_,
                              &img.has_patchable_section_);
  FTJIT_TRY(records);
  img.records_ = std::move(records.value());
  for (size_t i = 0; i < img.records_.size(); ++i) {
    if (window_offset(img.code_segments_, img.records_[i])) continue;
    PaddedWindow& w = img.padded_windows_.emplace_back();
    w.index = i;
    pad_window(file, img.segments_, img.records_[i], w.bytes);
  }
  auto functions = read_functions(file, sections.value());
  FTJIT_TRY(functions);
  img.functions_ = std::move(functions.value());
  return img;
}

std::span<const uint8_t> ElfImage::code_near_record(size_t index) const {
  if (const auto offset = window_offset(code_segments_, records_[index])) {
    return file_.subspan(*offset, kCodeWindowBytes);
  }
  auto it = std::lower_bound(padded_windows_.begin(), padded_windows_.end(), index,
                             [](const PaddedWindow& w, size_t i) { return w.index < i; });
  if (it == padded_windows_.end() || it->index != index) return {};  // not a record's index
  return {it->bytes, kCodeWindowBytes};
}

std::span<const uint8_t> ElfImage::code_in_file(std::span<const uint8_t> file, uint64_t vaddr,
                                                uint64_t length) const {
  for (const Segment& seg : segments_) {
    if ((seg.flags & PF_X) == 0 || vaddr < seg.vaddr || vaddr - seg.vaddr >= seg.filesz) continue;
    const uint64_t at = vaddr - seg.vaddr;
    length = std::min(length, seg.filesz - at);
    // The segment was checked against the file it was parsed from; the
    // caller's bytes are checked again, in case they are not those.
    const uint64_t offset = seg.offset + at;
    if (offset > file.size()) return {};
    return file.subspan(offset, std::min(length, file.size() - offset));
  }
  return {};
}

const ElfSymbol* ElfImage::function_at(uint64_t vaddr) const {
  auto it = std::lower_bound(functions_.begin(), functions_.end(), vaddr,
                             [](const ElfSymbol& s, uint64_t v) { return s.value < v; });
  return it != functions_.end() && it->value == vaddr ? &*it : nullptr;
}

}  // namespace ftjit
