// SPDX-License-Identifier: MIT
// Symbol addresses in a target: an ELF64 .dynsym/.symtab lookup of a mapped
// file, read through /proc/PID/root, shifted by where the file is mapped.
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "cli/inject/inject_internal.h"
#include "cli/inject/ptrace_inject.h"

namespace ftjit::inject {
namespace detail {

namespace {

// A file read piecewise with every range checked against its size.
class ElfFile {
 public:
  ElfFile(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  ~ElfFile() { ::close(fd_); }
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  Status read(uint64_t offset, uint64_t size, void* out) const {
    if (offset > size_ || size > size_ - offset)
      return make_error(FTJIT_E_ELF, path_ + ": a header points past the end of the file");
    uint64_t done = 0;
    while (done < size) {
      ssize_t n = ::pread(fd_, static_cast<char*>(out) + done, size - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return make_error(FTJIT_E_SYSTEM, errno_message("cannot read " + path_, n < 0 ? errno : EIO));
      done += static_cast<uint64_t>(n);
    }
    return {};
  }
  template <typename T>
  Result<std::vector<T>> read_array(uint64_t offset, uint64_t bytes) const {
    std::vector<T> v(bytes / sizeof(T));
    FTJIT_TRY(read(offset, v.size() * sizeof(T), v.data()));
    return v;
  }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  uint64_t size_;
  std::string path_;
};

struct Found {
  bool found = false;
  bool hidden_version = true;
  Elf64_Sym sym{};
};

// One symbol table section read whole: its symbols, their names and, for
// .dynsym, their versions.
struct SymbolTable {
  std::vector<Elf64_Sym> syms;
  std::vector<char> strtab;
  std::vector<uint16_t> versym;

  // A default-version (or unversioned) definition of name wins over a
  // hidden one of the same name.
  Found find(std::string_view name) const {
    Found best;
    for (size_t i = 1; i < syms.size(); ++i) {
      const Elf64_Sym& s = syms[i];
      if (s.st_shndx == SHN_UNDEF || s.st_name >= strtab.size()) continue;
      const char* p = strtab.data() + s.st_name;
      size_t len = strnlen(p, strtab.size() - s.st_name);
      if (std::string_view(p, len) != name) continue;
      bool hidden = i < versym.size() && (versym[i] & 0x8000) != 0;
      if (!best.found || (best.hidden_version && !hidden)) {
        best.found = true;
        best.hidden_version = hidden;
        best.sym = s;
      }
    }
    return best;
  }
};

Result<SymbolTable> read_table(const ElfFile& f, const std::vector<Elf64_Shdr>& sh, size_t index) {
  const Elf64_Shdr& tab = sh[index];
  if (tab.sh_entsize != sizeof(Elf64_Sym) || tab.sh_link >= sh.size())
    return make_error(FTJIT_E_ELF, f.path() + ": malformed symbol table");
  SymbolTable t;
  auto syms = f.read_array<Elf64_Sym>(tab.sh_offset, tab.sh_size);
  FTJIT_TRY(syms);
  t.syms = std::move(*syms);
  const Elf64_Shdr& str_sh = sh[tab.sh_link];
  auto strtab = f.read_array<char>(str_sh.sh_offset, str_sh.sh_size);
  FTJIT_TRY(strtab);
  t.strtab = std::move(*strtab);
  if (tab.sh_type == SHT_DYNSYM) {
    for (const Elf64_Shdr& s : sh)
      if (s.sh_type == SHT_GNU_versym && s.sh_link == index) {
        auto v = f.read_array<uint16_t>(s.sh_offset, s.sh_size);
        FTJIT_TRY(v);
        t.versym = std::move(*v);
      }
  }
  return t;
}

// An ELF file's symbol tables (.dynsym first, then .symtab) and the load
// bias of the mapping it was read for.
struct LoadedSymbols {
  std::vector<SymbolTable> tables;
  uint64_t bias = 0;
};

Result<LoadedSymbols> load_symbols(const std::string& file_path, uint64_t offset0_start) {
  int fd = ::open(file_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(FTJIT_E_SYSTEM, errno_message("cannot open " + file_path, errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot stat " + file_path, e));
  }
  ElfFile f(fd, static_cast<uint64_t>(st.st_size), file_path);

  Elf64_Ehdr eh{};
  FTJIT_TRY(f.read(0, sizeof eh, &eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return make_error(FTJIT_E_ELF, file_path + " is not an ELF64 little-endian file");
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0)
    return make_error(FTJIT_E_ELF, file_path + ": no usable program or section headers");

  // Load bias: the mapping of file offset 0 holds the first PT_LOAD.
  auto phdrs = f.read_array<Elf64_Phdr>(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr));
  FTJIT_TRY(phdrs);
  const Elf64_Phdr* first_load = nullptr;
  for (const Elf64_Phdr& ph : *phdrs)
    if (ph.p_type == PT_LOAD) {
      first_load = &ph;
      break;
    }
  if (!first_load) return make_error(FTJIT_E_ELF, file_path + " has no PT_LOAD segment");
  uint64_t link_base = (first_load->p_vaddr - first_load->p_offset) & ~uint64_t{0xfff};
  LoadedSymbols out;
  out.bias = eh.e_type == ET_DYN ? offset0_start - link_base : 0;

  auto shdrs = f.read_array<Elf64_Shdr>(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr));
  FTJIT_TRY(shdrs);
  for (uint32_t type : {SHT_DYNSYM, SHT_SYMTAB}) {
    for (size_t i = 0; i < shdrs->size(); ++i) {
      if ((*shdrs)[i].sh_type != type) continue;
      auto table = read_table(f, *shdrs, i);
      FTJIT_TRY(table);
      out.tables.push_back(std::move(*table));
    }
  }
  return out;
}

// The first table's definition of name, or nullopt.
std::optional<Elf64_Sym> lookup(const LoadedSymbols& loaded, std::string_view name) {
  for (const SymbolTable& t : loaded.tables) {
    Found found = t.find(name);
    if (found.found) return found.sym;
  }
  return std::nullopt;
}

}  // namespace

Result<uint64_t> elf_symbol_address(const std::string& file_path, uint64_t offset0_start, std::string_view symbol) {
  auto loaded = load_symbols(file_path, offset0_start);
  FTJIT_TRY(loaded);
  auto s = lookup(*loaded, symbol);
  if (!s) return make_error(FTJIT_E_NO_MATCH, file_path + " defines no symbol " + std::string(symbol));
  if (ELF64_ST_TYPE(s->st_info) == STT_TLS)
    return make_error(FTJIT_E_UNSUPPORTED, std::string(symbol) + " in " + file_path + " is thread-local");
  if (ELF64_ST_TYPE(s->st_info) == STT_GNU_IFUNC)
    return make_error(FTJIT_E_UNSUPPORTED, std::string(symbol) + " in " + file_path +
                                               " is an IFUNC (its address is the resolver's)");
  return s->st_shndx == SHN_ABS ? s->st_value : loaded->bias + s->st_value;
}

Result<std::vector<std::optional<SymbolRange>>> elf_symbol_ranges(const std::string& file_path,
                                                                  uint64_t offset0_start,
                                                                  std::span<const std::string_view> names) {
  auto loaded = load_symbols(file_path, offset0_start);
  FTJIT_TRY(loaded);
  std::vector<std::optional<SymbolRange>> out;
  out.reserve(names.size());
  for (std::string_view name : names) {
    auto s = lookup(*loaded, name);
    if (!s || ELF64_ST_TYPE(s->st_info) == STT_GNU_IFUNC) {
      out.emplace_back();
      continue;
    }
    SymbolRange r;
    r.tls = ELF64_ST_TYPE(s->st_info) == STT_TLS;
    r.address = (r.tls || s->st_shndx == SHN_ABS) ? s->st_value : loaded->bias + s->st_value;
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
