// SPDX-License-Identifier: MIT
// Test support for discovery: the fixture catalogue, its expected functions, and a tiny ELF writer.
#pragma once

#include <elf.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#ifndef FTJIT_FIXTURE_DIR
#error "FTJIT_FIXTURE_DIR must name the directory of the fixture binaries"
#endif
#ifndef FTJIT_FIXTURE_HAVE_CLANG
#define FTJIT_FIXTURE_HAVE_CLANG 0
#endif

namespace ftjit::testing {

// ============================================================================
// Fixture catalogue
// ============================================================================

enum class FixtureKind { kLibrary, kStripped, kExecutable };

struct Fixture {
  std::string file;       // name inside FTJIT_FIXTURE_DIR
  std::string compiler;   // "gcc" or "clang"
  uint32_t prefix_bytes;  // M of -fpatchable-function-entry=N,M (x86: 1-byte NOPs)
  uint32_t sled_bytes;    // N
  FixtureKind kind;

  std::string path() const { return std::string(FTJIT_FIXTURE_DIR) + "/" + file; }
  bool is_clang() const { return compiler == "clang"; }
};

// Names the fixture in gtest output instead of dumping its bytes.
inline void PrintTo(const Fixture& f, std::ostream* os) { *os << f.file; }

inline std::vector<Fixture> sled_fixtures() {
  std::vector<Fixture> out;
  std::vector<std::string> compilers = {"gcc"};
  if (FTJIT_FIXTURE_HAVE_CLANG) compilers.push_back("clang");
  for (const auto& cc : compilers) {
    for (auto [layout, prefix, sled] :
         {std::tuple{"p5", 0u, 5u}, std::tuple{"p13_8", 8u, 13u}}) {
      const std::string tag = cc + "_" + layout;
      out.push_back({"libfx_" + tag + ".so", cc, prefix, sled, FixtureKind::kLibrary});
      out.push_back({"libfx_" + tag + ".stripped.so", cc, prefix, sled, FixtureKind::kStripped});
      out.push_back({"fx_exe_" + tag, cc, prefix, sled, FixtureKind::kExecutable});
    }
  }
  return out;
}

inline std::string fixture_test_name(const Fixture& f) {
  std::string s;
  for (char c : f.file) s += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return s;
}

// The oracle: what the fixture sources define, written down by hand from
// tests/fixtures/*.c{,pp} rather than derived from any ELF reader.
struct ExpectedFunction {
  const char* name;
  const char* demangled;
  bool exported;  // in .dynsym of the library (survives --strip-all)
};

inline const std::vector<ExpectedFunction>& library_functions() {
  static const std::vector<ExpectedFunction> kFunctions = {
      {"fx_add", "fx_add", true},
      {"fx_mul", "fx_mul", true},
      {"fx_local", "fx_local", false},
      {"fx_chain", "fx_chain", true},
      {"_ZN2ns6widget4frobEi", "ns::widget::frob(int)", true},
      {"_ZN2ns6widget4makeEi", "ns::widget::make(int)", true},
      {"_Z8fx_twiceIiET_S0_", "int fx_twice<int>(int)", true},
      {"_Z8fx_twiceIdET_S0_", "double fx_twice<double>(double)", true},
      {"_Z7fx_overi", "fx_over(int)", true},
      {"_Z7fx_overd", "fx_over(double)", true},
      {"_Z7fx_overPKc", "fx_over(char const*)", true},
  };
  return kFunctions;
}

inline std::vector<ExpectedFunction> expected_functions(const Fixture& f) {
  auto out = library_functions();
  if (f.kind == FixtureKind::kExecutable) out.push_back({"main", "main", true});
  return out;
}

// Not patchable in any fixture (patchable_function_entry(0,0)).
inline constexpr const char* kOptedOut = "fx_optout";

// ============================================================================
// Files
// ============================================================================

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

// A fixture's path by its file name, and its bytes.
inline std::string fixture_path(const char* name) { return std::string(FTJIT_FIXTURE_DIR) + "/" + name; }
inline std::vector<uint8_t> fixture_bytes(const char* name) { return read_file(fixture_path(name)); }

inline std::span<const uint8_t> as_span(const std::vector<uint8_t>& v) { return {v.data(), v.size()}; }

// An independent reader for well-formed files, used only to find the bytes
// that tests check or corrupt. It trusts its input: fixtures are ours.
struct TrustedElf {
  explicit TrustedElf(const std::vector<uint8_t>& b) : bytes(b) {
    std::memcpy(&ehdr, bytes.data(), sizeof ehdr);
  }
  Elf64_Shdr section(size_t i) const {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes.data() + ehdr.e_shoff + i * sizeof sh, sizeof sh);
    return sh;
  }
  uint64_t section_header_offset(size_t i) const { return ehdr.e_shoff + i * sizeof(Elf64_Shdr); }
  std::optional<size_t> find_section(std::string_view name) const {
    const auto names = section(ehdr.e_shstrndx);
    for (size_t i = 0; i < ehdr.e_shnum; ++i) {
      const char* n = reinterpret_cast<const char*>(bytes.data() + names.sh_offset +
                                                    section(i).sh_name);
      if (name == n) return i;
    }
    return std::nullopt;
  }
  std::optional<size_t> find_section_type(uint32_t type) const {
    for (size_t i = 0; i < ehdr.e_shnum; ++i) {
      if (section(i).sh_type == type) return i;
    }
    return std::nullopt;
  }
  // File offset of a link-time address, through the PT_LOAD headers.
  std::optional<uint64_t> file_offset(uint64_t vaddr) const {
    for (size_t i = 0; i < ehdr.e_phnum; ++i) {
      Elf64_Phdr ph;
      std::memcpy(&ph, bytes.data() + ehdr.e_phoff + i * sizeof ph, sizeof ph);
      if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz) {
        return ph.p_offset + (vaddr - ph.p_vaddr);
      }
    }
    return std::nullopt;
  }

  const std::vector<uint8_t>& bytes;
  Elf64_Ehdr ehdr;
};

template <typename T>
void poke(std::vector<uint8_t>& bytes, uint64_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

// ============================================================================
// ElfWriter: small synthetic ET_DYN files for cases no compiler produces
// ============================================================================

// Lays out [ELF header][program headers][section contents][section headers].
// One PT_LOAD R+X maps the whole file at vaddr == offset, so section
// addresses given to add_section() are honoured only for NOBITS sections;
// PROGBITS sections get addr == file offset unless addr is nonzero.
class ElfWriter {
 public:
  // Where the first added section's contents start (and its address).
  static constexpr uint64_t kFirstSectionOffset = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr);

  struct Section {
    std::string name;
    uint32_t type = SHT_PROGBITS;
    uint64_t flags = 0;
    uint64_t addr = 0;
    uint32_t link = 0;
    uint32_t info = 0;
    uint64_t entsize = 0;
    std::vector<uint8_t> data;
  };

  // Returns the section index.
  uint32_t add_section(Section s) {
    sections_.push_back(std::move(s));
    return static_cast<uint32_t>(sections_.size());  // index 0 is the null section
  }

  static std::vector<uint8_t> words(std::initializer_list<uint64_t> values) {
    std::vector<uint8_t> out(values.size() * 8);
    size_t i = 0;
    for (uint64_t v : values) std::memcpy(out.data() + 8 * i++, &v, 8);
    return out;
  }

  static std::vector<uint8_t> symbols(std::initializer_list<Elf64_Sym> syms) {
    std::vector<uint8_t> out(sizeof(Elf64_Sym));  // null symbol
    for (const auto& s : syms) {
      const auto* p = reinterpret_cast<const uint8_t*>(&s);
      out.insert(out.end(), p, p + sizeof s);
    }
    return out;
  }

  static std::vector<uint8_t> relas(std::initializer_list<Elf64_Rela> relocs) {
    std::vector<uint8_t> out;
    for (const auto& r : relocs) {
      const auto* p = reinterpret_cast<const uint8_t*>(&r);
      out.insert(out.end(), p, p + sizeof r);
    }
    return out;
  }

  // Extended numbering moves the section count into section 0's sh_size.
  std::vector<uint8_t> build(bool extended_numbering = false) const {
    std::vector<uint8_t> out(sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr), 0);
    std::string shstrtab(1, '\0');
    std::vector<Elf64_Shdr> headers(1, Elf64_Shdr{});
    auto add_name = [&shstrtab](const std::string& n) {
      const auto off = static_cast<uint32_t>(shstrtab.size());
      shstrtab += n;
      shstrtab += '\0';
      return off;
    };
    for (const auto& s : sections_) {
      while (out.size() % 8 != 0) out.push_back(0);
      Elf64_Shdr sh{};
      sh.sh_name = add_name(s.name);
      sh.sh_type = s.type;
      sh.sh_flags = s.flags;
      sh.sh_offset = out.size();
      sh.sh_addr = s.addr != 0 ? s.addr : out.size();
      sh.sh_size = s.data.size();
      sh.sh_link = s.link;
      sh.sh_info = s.info;
      sh.sh_entsize = s.entsize;
      sh.sh_addralign = 8;
      out.insert(out.end(), s.data.begin(), s.data.end());
      headers.push_back(sh);
    }
    Elf64_Shdr names{};
    names.sh_name = add_name(".shstrtab");
    names.sh_type = SHT_STRTAB;
    names.sh_offset = out.size();
    names.sh_size = shstrtab.size();
    out.insert(out.end(), shstrtab.begin(), shstrtab.end());
    headers.push_back(names);
    while (out.size() % 8 != 0) out.push_back(0);

    Elf64_Ehdr eh{};
    std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_DYN;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = sizeof(Elf64_Ehdr);
    eh.e_shoff = out.size();
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = 1;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = static_cast<uint16_t>(headers.size());
    eh.e_shstrndx = static_cast<uint16_t>(headers.size() - 1);
    if (extended_numbering) {
      headers[0].sh_size = headers.size();
      headers[0].sh_link = eh.e_shstrndx;
      eh.e_shnum = 0;
      eh.e_shstrndx = SHN_XINDEX;
    }
    const uint64_t file_size = out.size() + headers.size() * sizeof(Elf64_Shdr);
    Elf64_Phdr ph{};
    ph.p_type = PT_LOAD;
    ph.p_flags = PF_R | PF_X;
    ph.p_filesz = file_size;
    ph.p_memsz = file_size;
    ph.p_align = 0x1000;
    std::memcpy(out.data(), &eh, sizeof eh);
    std::memcpy(out.data() + sizeof eh, &ph, sizeof ph);
    for (const auto& h : headers) {
      const auto* p = reinterpret_cast<const uint8_t*>(&h);
      out.insert(out.end(), p, p + sizeof h);
    }
    return out;
  }

 private:
  std::vector<Section> sections_;
};

inline Elf64_Sym function_symbol(uint32_t name, uint64_t value, uint16_t shndx,
                                 unsigned char bind = STB_GLOBAL) {
  Elf64_Sym s{};
  s.st_name = name;
  s.st_info = ELF64_ST_INFO(bind, STT_FUNC);
  s.st_shndx = shndx;
  s.st_value = value;
  s.st_size = 16;
  return s;
}

}  // namespace ftjit::testing
