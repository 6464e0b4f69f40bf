// SPDX-License-Identifier: MIT
// Symbol addresses in a target: an ELF64 .dynsym/.symtab lookup of a mapped
// file, read through /proc/PID/root, shifted by where the file is mapped.
#include <elf.h>

#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cli/inject/inject_internal.h"
#include "cli/mapped_file.h"
#include "cli/inject/ptrace_inject.h"

namespace ftjit::inject {
namespace detail {

namespace {

// The file mapped read-only: the tables are read where they lie (a libc's
// .dynsym is some 70 KiB, an unstripped library's .symtab megabytes), with
// no copy into fresh memory, whose first touch of each page was a page
// fault (~15 us on a paravirtualised guest): most of those of `ftjit
// attach`. Every range is checked against the file's size.
class ElfFile {
 public:
  Status open(const std::string& path) {
    path_ = path;
    std::string err;
    if (!file_.open(path, &err)) return make_error(FTJIT_E_SYSTEM, err);
    bytes_ = file_.bytes();
    return {};
  }
  Result<std::span<const uint8_t>> range(uint64_t offset, uint64_t size) const {
    if (offset > bytes_.size() || size > bytes_.size() - offset)
      return make_error(FTJIT_E_ELF, path_ + ": a header points past the end of the file");
    return bytes_.subspan(offset, size);
  }
  template <typename T>
  Result<T> read(uint64_t offset) const {
    auto r = range(offset, sizeof(T));
    FTJIT_TRY(r);
    T v;
    std::memcpy(&v, r->data(), sizeof v);
    return v;
  }
  const std::string& path() const { return path_; }

 private:
  cli::MappedFile file_;
  std::span<const uint8_t> bytes_;
  std::string path_;
};

// One symbol table section as it lies in the file: its symbols, their
// names and, for .dynsym, their versions (entries read with memcpy: a
// section's offset need not be aligned in a malformed file).
struct SymbolTable {
  std::span<const uint8_t> syms;
  std::string_view strtab;
  std::span<const uint8_t> versym;

  size_t count() const { return syms.size() / sizeof(Elf64_Sym); }
  Elf64_Sym sym(size_t i) const {
    Elf64_Sym s;
    std::memcpy(&s, syms.data() + i * sizeof s, sizeof s);
    return s;
  }
  bool hidden(size_t i) const {
    if ((i + 1) * 2 > versym.size()) return false;
    uint16_t v;
    std::memcpy(&v, versym.data() + i * 2, 2);
    return (v & 0x8000) != 0;
  }
};

Result<SymbolTable> read_table(const ElfFile& f, const std::vector<Elf64_Shdr>& sh, size_t index) {
  const Elf64_Shdr& tab = sh[index];
  if (tab.sh_entsize != sizeof(Elf64_Sym) || tab.sh_link >= sh.size())
    return make_error(FTJIT_E_ELF, f.path() + ": malformed symbol table");
  SymbolTable t;
  auto syms = f.range(tab.sh_offset, tab.sh_size);
  FTJIT_TRY(syms);
  t.syms = *syms;
  const Elf64_Shdr& str_sh = sh[tab.sh_link];
  auto strtab = f.range(str_sh.sh_offset, str_sh.sh_size);
  FTJIT_TRY(strtab);
  t.strtab = {reinterpret_cast<const char*>(strtab->data()), strtab->size()};
  if (tab.sh_type == SHT_DYNSYM) {
    for (const Elf64_Shdr& s : sh)
      if (s.sh_type == SHT_GNU_versym && s.sh_link == index) {
        auto v = f.range(s.sh_offset, s.sh_size);
        FTJIT_TRY(v);
        t.versym = *v;
      }
  }
  return t;
}

// An ELF file's symbol tables (.dynsym first, then .symtab) and the load
// bias of the mapping it was read for.
struct LoadedSymbols {
  ElfFile file;
  std::vector<SymbolTable> tables;
  uint64_t bias = 0;
};

Result<std::unique_ptr<LoadedSymbols>> load_symbols(const std::string& file_path, uint64_t offset0_start) {
  auto out = std::make_unique<LoadedSymbols>();
  const ElfFile& f = out->file;
  FTJIT_TRY(out->file.open(file_path));
  auto eh = f.read<Elf64_Ehdr>(0);
  FTJIT_TRY(eh);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_ident[EI_DATA] != ELFDATA2LSB)
    return make_error(FTJIT_E_ELF, file_path + " is not an ELF64 little-endian file");
  if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0)
    return make_error(FTJIT_E_ELF, file_path + ": no usable program or section headers");

  // Load bias: the mapping of file offset 0 holds the first PT_LOAD.
  std::optional<Elf64_Phdr> first_load;
  for (uint64_t i = 0; i < eh->e_phnum && !first_load; ++i) {
    auto ph = f.read<Elf64_Phdr>(eh->e_phoff + i * sizeof(Elf64_Phdr));
    FTJIT_TRY(ph);
    if (ph->p_type == PT_LOAD) first_load = *ph;
  }
  if (!first_load) return make_error(FTJIT_E_ELF, file_path + " has no PT_LOAD segment");
  uint64_t link_base = (first_load->p_vaddr - first_load->p_offset) & ~uint64_t{0xfff};
  out->bias = eh->e_type == ET_DYN ? offset0_start - link_base : 0;

  std::vector<Elf64_Shdr> shdrs(eh->e_shnum);
  for (size_t i = 0; i < shdrs.size(); ++i) {
    auto sh = f.read<Elf64_Shdr>(eh->e_shoff + i * sizeof(Elf64_Shdr));
    FTJIT_TRY(sh);
    shdrs[i] = *sh;
  }
  for (uint32_t type : {SHT_DYNSYM, SHT_SYMTAB}) {
    for (size_t i = 0; i < shdrs.size(); ++i) {
      if (shdrs[i].sh_type != type) continue;
      auto table = read_table(f, shdrs, i);
      FTJIT_TRY(table);
      out->tables.push_back(*table);
    }
  }
  return out;
}

// Each name's definition in the first table that has one (a default-version
// or unversioned definition wins over a hidden one of the same name), or
// nullopt: one pass over a table for all the names, and a table is read
// only while a name is still missing (.symtab, the long one, rarely).
std::vector<std::optional<Elf64_Sym>> lookup(const LoadedSymbols& loaded, std::span<const std::string_view> names) {
  std::vector<std::optional<Elf64_Sym>> out(names.size());
  std::unordered_map<std::string_view, size_t> wanted;
  for (size_t i = 0; i < names.size(); ++i) wanted.emplace(names[i], i);
  for (const SymbolTable& t : loaded.tables) {
    if (wanted.empty()) break;
    std::vector<bool> hidden_found(names.size(), false);
    std::vector<size_t> found_here;
    for (size_t i = 1; i < t.count(); ++i) {
      const Elf64_Sym s = t.sym(i);
      if (s.st_shndx == SHN_UNDEF || s.st_name >= t.strtab.size()) continue;
      const char* p = t.strtab.data() + s.st_name;
      const std::string_view name(p, strnlen(p, t.strtab.size() - s.st_name));
      auto it = wanted.find(name);
      if (it == wanted.end()) continue;
      const size_t k = it->second;
      const bool hidden = t.hidden(i);
      if (!out[k]) found_here.push_back(k);
      if (!out[k] || (hidden_found[k] && !hidden)) {
        out[k] = s;
        hidden_found[k] = hidden;
      }
    }
    for (size_t k : found_here) wanted.erase(names[k]);
  }
  return out;
}

}  // namespace

Result<uint64_t> elf_symbol_address(const std::string& file_path, uint64_t offset0_start, std::string_view symbol) {
  auto loaded = load_symbols(file_path, offset0_start);
  FTJIT_TRY(loaded);
  const std::string_view names[] = {symbol};
  auto s = lookup(**loaded, names)[0];
  if (!s) return make_error(FTJIT_E_NO_MATCH, file_path + " defines no symbol " + std::string(symbol));
  if (ELF64_ST_TYPE(s->st_info) == STT_TLS)
    return make_error(FTJIT_E_UNSUPPORTED, std::string(symbol) + " in " + file_path + " is thread-local");
  if (ELF64_ST_TYPE(s->st_info) == STT_GNU_IFUNC)
    return make_error(FTJIT_E_UNSUPPORTED, std::string(symbol) + " in " + file_path +
                                               " is an IFUNC (its address is the resolver's)");
  return s->st_shndx == SHN_ABS ? s->st_value : (*loaded)->bias + s->st_value;
}

Result<std::vector<std::optional<SymbolRange>>> elf_symbol_ranges(const std::string& file_path,
                                                                  uint64_t offset0_start,
                                                                  std::span<const std::string_view> names) {
  auto loaded = load_symbols(file_path, offset0_start);
  FTJIT_TRY(loaded);
  std::vector<std::optional<SymbolRange>> out;
  out.reserve(names.size());
  for (const std::optional<Elf64_Sym>& s : lookup(**loaded, names)) {
    if (!s || ELF64_ST_TYPE(s->st_info) == STT_GNU_IFUNC) {
      out.emplace_back();
      continue;
    }
    SymbolRange r;
    r.tls = ELF64_ST_TYPE(s->st_info) == STT_TLS;
    r.address = (r.tls || s->st_shndx == SHN_ABS) ? s->st_value : (*loaded)->bias + s->st_value;
    r.size = s->st_size;
    out.push_back(r);
  }
  return out;
}

}  // namespace detail

Result<uint64_t> symbol_in_target(pid_t pid, std::string_view module_basename, std::string_view symbol) {
  auto maps = detail::read_maps(pid);
  FTJIT_TRY(maps);
  constexpr std::string_view kDeleted = " (deleted)";
  auto mod = detail::find_module(*maps, module_basename);
  // A file removed since it was loaded, such as the agent ftjit staged
  // into a container and removed once loaded (stage_library).
  if (!mod) mod = detail::find_module(*maps, std::string(module_basename) + std::string(kDeleted));
  if (!mod)
    return make_error(FTJIT_E_NO_MATCH, "process " + std::to_string(pid) + " has no module " +
                                            std::string(module_basename) + " loaded");
  if (mod->path.size() > kDeleted.size() && mod->path.ends_with(kDeleted)) {
    // Its mapping still reads: the file itself, whatever became of its name.
    const detail::Mapping* m = detail::mapping_at(*maps, mod->offset0_start);
    auto address = m ? detail::elf_symbol_address(detail::map_files_path(pid, m->start, m->end),
                                                  mod->offset0_start, symbol)
                     : Result<uint64_t>(make_error(FTJIT_E_SYSTEM, "no mapping"));
    if (address || address.error().code != FTJIT_E_SYSTEM) return address;
    return make_error(FTJIT_E_ELF, mod->path + " of process " + std::to_string(pid) +
                                       " was removed or replaced on disk since it was loaded, and reading its "
                                       "mapping (/proc/PID/map_files) needs CAP_SYS_ADMIN: run ftjit as root, "
                                       "or restart the process");
  }
  return detail::elf_symbol_address(detail::path_in_root(pid, mod->path), mod->offset0_start, symbol);
}

}  // namespace ftjit::inject
