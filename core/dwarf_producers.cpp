// SPDX-License-Identifier: MIT
// compile_unit_producers over libdw: each unit's own DIE, its DW_AT_producer
// and whether it has an address range. Nothing below the unit DIE is read.
#include "core/dwarf_producers.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ftjit {
namespace {

Error dwarf_error(const std::string& what) { return make_error(FTJIT_E_ELF, "DWARF: " + what); }

bool has_dwarf_section(Elf* elf) {
  size_t names = 0;
  if (elf_getshdrstrndx(elf, &names) != 0) return false;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    const char* name = elf_strptr(elf, names, shdr.sh_name);
    if (name != nullptr && (std::strcmp(name, ".debug_info") == 0 || std::strcmp(name, ".zdebug_info") == 0))
      return true;
  }
  return false;
}

Result<std::vector<CompileUnitProducer>> read_units(Elf* elf) {
  if (elf == nullptr) return dwarf_error(std::string("not an ELF file: ") + elf_errmsg(-1));
  if (elf_kind(elf) != ELF_K_ELF) return dwarf_error("not an ELF file");
  std::vector<CompileUnitProducer> out;
  // No .debug_info: no evidence, not a failure.
  if (!has_dwarf_section(elf)) return out;
  Dwarf* dw = dwarf_begin_elf(elf, DWARF_C_READ, nullptr);
  if (dw == nullptr) return dwarf_error(dwarf_errmsg(-1));
  struct DwarfEnd {
    Dwarf* d;
    ~DwarfEnd() { dwarf_end(d); }
  } end{dw};
  Dwarf_CU* cu = nullptr;
  for (;;) {
    Dwarf_CU* next = nullptr;
    Dwarf_Half version = 0;
    uint8_t unit_type = 0;
    Dwarf_Die unit_die;
    const int r = dwarf_get_units(dw, cu, &next, &version, &unit_type, &unit_die, nullptr);
    if (r == 1) break;
    if (r != 0) return dwarf_error(std::string("a unit cannot be read: ") + dwarf_errmsg(-1));
    cu = next;
    if (unit_type != DW_UT_compile && unit_type != DW_UT_partial && unit_type != DW_UT_skeleton &&
        unit_type != DW_UT_split_compile)
      continue;
    CompileUnitProducer unit;
    unit.version = version;
    Dwarf_Attribute attr;
    if (dwarf_attr(&unit_die, DW_AT_producer, &attr) != nullptr) {
      const char* producer = dwarf_formstring(&attr);
      if (producer == nullptr) {
        return dwarf_error("the producer of the unit at " + std::to_string(dwarf_dieoffset(&unit_die)) +
                           " cannot be read: " + dwarf_errmsg(-1));
      }
      unit.producer = producer;
    }
    unit.has_code = dwarf_hasattr(&unit_die, DW_AT_low_pc) != 0 || dwarf_hasattr(&unit_die, DW_AT_ranges) != 0;
    out.push_back(std::move(unit));
  }
  return out;
}

struct ElfEnd {
  Elf* e;
  ~ElfEnd() {
    if (e != nullptr) elf_end(e);
  }
};

}  // namespace

Result<std::vector<CompileUnitProducer>> compile_unit_producers(const std::string& path) {
  elf_version(EV_CURRENT);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(FTJIT_E_SYSTEM, path + ": " + std::strerror(errno));
  struct FdClose {
    int fd;
    ~FdClose() { ::close(fd); }
  } closer{fd};
  // ELF_C_READ_MMAP: libelf maps the file read-only and reads what it
  // needs; nothing is written back.
  ElfEnd elf{elf_begin(fd, ELF_C_READ_MMAP, nullptr)};
  auto units = read_units(elf.e);
  if (!units) {
    Error e = units.take_error();
    e.message = path + ": " + e.message;
    return e;
  }
  return units;
}

Result<std::vector<CompileUnitProducer>> compile_unit_producers(std::span<const uint8_t> image) {
  elf_version(EV_CURRENT);
  // libelf reads an image in place and may want it aligned and writable.
  std::vector<uint64_t> copy((image.size() + 7) / 8);
  if (!image.empty()) std::memcpy(copy.data(), image.data(), image.size());
  ElfEnd elf{elf_memory(reinterpret_cast<char*>(copy.data()), image.size())};
  return read_units(elf.e);
}

}  // namespace ftjit
