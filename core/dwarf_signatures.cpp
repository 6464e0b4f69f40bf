// SPDX-License-Identifier: MIT
// read_debug_info: one pass over a module's compile units with libdw,
// turning each concrete function's DIE into a FunctionSignature and each
// type into a ValueType once (cached by DIE).
#include "core/dwarf_signatures.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace ftjit {
namespace {

// Real type chains (typedef of const of pointer..., structs within
// structs) are a handful deep; malformed DWARF can make them endless.
constexpr int kMaxTypeDepth = 48;
// Namespaces and classes within each other, in the walk for functions.
constexpr int kMaxScopeDepth = 64;
// A struct shown member by member has at most this many scalars once
// nested structs and arrays are flattened; a bigger one is opaque.
constexpr size_t kMaxLeafMembers = 64;
// Enumerators kept per enum; a value past them is shown as its number.
constexpr size_t kMaxEnumerators = 4096;
// Type names are spelled from nested types (a function pointer's
// parameters...); capping each keeps hostile nesting from making them
// grow without bound.
constexpr size_t kMaxNameLength = 256;
constexpr size_t kMaxScopeLength = 1024;
// A hostile file can make every function take many parameters of one
// type with many members: the result then grows as the product of sizes.
// Real modules stay far below this many entries (parameters, members and
// enumerators copied into the result) per byte of the file holding the
// DWARF.
constexpr uint64_t kCellsPerByte = 4;
constexpr uint64_t kCellsSlack = uint64_t{1} << 18;
// How far DW_AT_abstract_origin / DW_AT_specification are followed to a
// function's declaration (libdw's own chains stop sooner).
constexpr int kMaxOriginHops = 8;
// DW_LANG_C17, newer than this libdw's dwarf.h.
constexpr int kLangC17 = 0x2c;

// ============================================================================
// Small libdw helpers
// ============================================================================

std::string capped(std::string s, size_t max = kMaxNameLength) {
  if (s.size() > max) {
    s.resize(max - 3);
    s += "...";
  }
  return s;
}

std::optional<Dwarf_Word> udata(Dwarf_Die* die, unsigned name, bool integrate = false) {
  Dwarf_Attribute attr;
  Dwarf_Word value;
  Dwarf_Attribute* a = integrate ? dwarf_attr_integrate(die, name, &attr) : dwarf_attr(die, name, &attr);
  if (a == nullptr || dwarf_formudata(a, &value) != 0) return std::nullopt;
  return value;
}

bool flag(Dwarf_Die* die, unsigned name, bool integrate = false) {
  Dwarf_Attribute attr;
  bool value = false;
  Dwarf_Attribute* a = integrate ? dwarf_attr_integrate(die, name, &attr) : dwarf_attr(die, name, &attr);
  return a != nullptr && dwarf_formflag(a, &value) == 0 && value;
}

bool ref(Dwarf_Die* die, unsigned name, Dwarf_Die* out, bool integrate = false) {
  Dwarf_Attribute attr;
  Dwarf_Attribute* a = integrate ? dwarf_attr_integrate(die, name, &attr) : dwarf_attr(die, name, &attr);
  return a != nullptr && dwarf_formref_die(a, out) != nullptr;
}

// DW_AT_type, also of the declaration or abstract instance the DIE
// completes (a concrete function's return type is its origin's).
bool type_of(Dwarf_Die* die, Dwarf_Die* out) { return ref(die, DW_AT_type, out, true); }

std::string name_or(Dwarf_Die* die, const char* fallback) {
  const char* name = dwarf_diename(die);
  return capped(name != nullptr ? name : fallback);
}

bool is_qualifier(int tag) {
  return tag == DW_TAG_typedef || tag == DW_TAG_const_type || tag == DW_TAG_volatile_type ||
         tag == DW_TAG_restrict_type || tag == DW_TAG_atomic_type;
}

// The type under typedefs and cv-qualifiers; false: it is void.
bool strip_qualifiers(Dwarf_Die* die, Dwarf_Die* out) {
  *out = *die;
  for (int depth = 0; is_qualifier(dwarf_tag(out)); ++depth) {
    Dwarf_Die next;
    if (depth > kMaxTypeDepth || !type_of(out, &next)) return false;
    *out = next;
  }
  return true;
}

bool is_c_language(Dwarf_Die* die) {
  Dwarf_Die cu;
  if (dwarf_diecu(die, &cu, nullptr, nullptr) == nullptr) return true;
  switch (dwarf_srclang(&cu)) {
    case DW_LANG_C89: case DW_LANG_C: case DW_LANG_C99: case DW_LANG_C11: case DW_LANG_ObjC: case kLangC17:
      return true;
    default:
      return false;
  }
}

uint32_t address_size(Dwarf_Die* die) {
  Dwarf_Die cu;
  uint8_t size = 8;
  if (dwarf_diecu(die, &cu, &size, nullptr) == nullptr || (size != 4 && size != 8)) return 8;
  return size;
}

uint32_t to_u32(Dwarf_Word v) {
  return static_cast<uint32_t>(std::min<Dwarf_Word>(v, std::numeric_limits<uint32_t>::max()));
}

// Natural alignment of a scalar of `size` bytes: its size up to 16, else
// the largest power of two that divides it.
uint32_t natural_align(uint64_t size) {
  if (size == 0) return 1;
  uint64_t align = 1;
  while (align < 16 && size % (align * 2) == 0) align *= 2;
  return static_cast<uint32_t>(align);
}

bool is_scalar_size(uint64_t size) { return size == 1 || size == 2 || size == 4 || size == 8; }

// GCC's clones with their own conventions; LLVM's function specialisation.
bool is_clone_name(const char* name) {
  return std::strstr(name, ".isra.") != nullptr || std::strstr(name, ".constprop.") != nullptr ||
         std::strstr(name, ".part.") != nullptr || std::strstr(name, ".specialized.") != nullptr;
}

// ============================================================================
// What the ELF side says about functions
// ============================================================================

struct ElfFacts {
  // Executable PT_LOAD ranges: a subprogram elsewhere is not code of this
  // file (address 0 or a linker's tombstone for a discarded function).
  std::vector<std::pair<uint64_t, uint64_t>> code;
  bool check_code = false;
  // Entries of function symbols named as compiler clones.
  std::unordered_set<uint64_t> clones;

  bool is_code(uint64_t addr) const {
    if (!check_code) return true;
    if (addr == 0) return false;
    for (const auto& [start, end] : code) {
      if (addr >= start && addr < end) return true;
    }
    return false;
  }
};

void read_segments(Elf* elf, ElfFacts* facts) {
  GElf_Ehdr ehdr;
  size_t count = 0;
  if (gelf_getehdr(elf, &ehdr) == nullptr || ehdr.e_type == ET_REL) return;
  if (elf_getphdrnum(elf, &count) != 0 || count == 0) return;
  facts->check_code = true;
  for (size_t i = 0; i < count; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf, static_cast<int>(i), &phdr) == nullptr) continue;
    if (phdr.p_type != PT_LOAD || (phdr.p_flags & PF_X) == 0) continue;
    const uint64_t end = phdr.p_vaddr + std::min(phdr.p_memsz, ~uint64_t{0} - phdr.p_vaddr);
    facts->code.emplace_back(phdr.p_vaddr, end);
  }
}

void read_clone_symbols(Elf* elf, ElfFacts* facts) {
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    if (shdr.sh_type != SHT_SYMTAB && shdr.sh_type != SHT_DYNSYM) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr) continue;
    GElf_Sym sym;
    // gelf_getsym checks the index against the data's size.
    for (int i = 0; gelf_getsym(data, i, &sym) != nullptr; ++i) {
      if (GELF_ST_TYPE(sym.st_info) != STT_FUNC) continue;
      const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
      if (name != nullptr && is_clone_name(name)) facts->clones.insert(sym.st_value);
    }
  }
}

// ============================================================================
// The reader
// ============================================================================

class SignatureReader {
 public:
  // `cells` bounds what the result may hold (see kCellsPerByte).
  // `split_units`: look for split DWARF (.dwo) units of skeleton units,
  // which libdw opens by the names the DWARF gives; never for an image in
  // memory.
  SignatureReader(const ElfFacts& facts, uint64_t cells, bool split_units)
      : facts_(facts), cells_left_(cells), split_units_(split_units) {
    scope_names_.emplace_back();
    cycle_.type.name = "<recursive type>";
    cycle_.done = true;
  }

  // Every function of `dw`, sorted and unique by entry. An error only when
  // nothing could be read, or the budget ran out.
  Result<std::vector<FunctionSignature>> read(Dwarf* dw);

 private:
  struct Converted {
    ValueType type;
    bool is_void = false;
    // A C++ class that is not trivial for the purpose of calls (a
    // user-provided copy constructor or destructor, virtual functions...):
    // passed and returned through a hidden pointer whatever its size.
    bool by_reference = false;
    bool done = false;  // false while it is being converted: a cycle
    uint64_t cells = 1;
  };

  // A struct's scalars, flattened.
  struct Layout {
    std::vector<Member> members;
    uint32_t align = 1;
    bool opaque = false;
    bool by_reference = false;
  };

  struct Pending {
    FunctionSignature sig;
    // The DIE and those it completes, nearest first: where its scope
    // (namespace, class) is found.
    std::vector<const void*> chain;
  };

  void walk(Dwarf_Die* parent, uint32_t scope, bool cxx, int depth);
  uint32_t nested_scope(uint32_t scope, const std::string& name);
  void visit_function(Dwarf_Die* die);
  bool entry_of(Dwarf_Die* die, uint64_t* entry);
  Param param_of(Dwarf_Die* param);
  bool charge(uint64_t cells);

  const Converted& convert(Dwarf_Die* die, int depth);
  Converted convert_new(Dwarf_Die* die, int depth);
  void convert_base(Dwarf_Die* die, Converted* c);
  void convert_pointer(Dwarf_Die* die, Converted* c);
  void convert_enum(Dwarf_Die* die, Converted* c);
  void convert_struct(Dwarf_Die* die, int depth, Converted* c);
  void lay_out(Dwarf_Die* die, uint64_t base, const std::string& prefix, int depth, Layout* out);
  void lay_out_member(Dwarf_Die* member, uint64_t base, const std::string& prefix, int depth, Layout* out);
  void add_value(Dwarf_Die* type, uint64_t offset, const std::string& name, int depth, Layout* out);
  void add_array(Dwarf_Die* array, uint64_t offset, const std::string& name, int depth, Layout* out);
  void push_member(Member m, Layout* out);
  void note_special_member(Dwarf_Die* cls, Dwarf_Die* fn, Layout* out);

  const std::string& name_of(Dwarf_Die* die, int depth = 0);
  std::string spell(Dwarf_Die* die, int depth);
  std::string spell_function(Dwarf_Die* fn, const std::string& middle, int depth);
  std::string spell_dimensions(Dwarf_Die* array);

  const ElfFacts& facts_;
  uint64_t cells_left_;
  bool split_units_;
  bool over_budget_ = false;
  std::string dwarf_error_;

  std::vector<Pending> functions_;
  Converted cycle_;  // what a type that contains itself converts to
  // Types and names by DIE: the address of its bytes, unique across
  // .debug_info, .debug_types and an alternate (dwz) file, unlike offsets.
  std::unordered_map<const void*, Converted> types_;
  std::unordered_map<const void*, std::string> names_;
  // Subprogram DIEs inside namespaces and classes: their scope's index in
  // scope_names_ ("ns::Class"; 0 is the global scope).
  std::unordered_map<const void*, uint32_t> scope_of_;
  std::vector<std::string> scope_names_;
  std::unordered_map<std::string, uint32_t> scope_index_;
};

// ----------------------------------------------------------------------------
// The walk
// ----------------------------------------------------------------------------

Result<std::vector<FunctionSignature>> SignatureReader::read(Dwarf* dw) {
  Dwarf_CU* cu = nullptr;
  for (;;) {
    Dwarf_CU* next = nullptr;
    Dwarf_Half version = 0;
    uint8_t unit_type = 0;
    Dwarf_Die unit_die = {};
    Dwarf_Die sub_die = {};  // left zeroed when there is no split unit
    const int rc = dwarf_get_units(dw, cu, &next, &version, &unit_type, &unit_die,
                                   split_units_ ? &sub_die : nullptr);
    if (rc != 0) {
      if (rc < 0) dwarf_error_ = dwarf_errmsg(-1);
      break;
    }
    cu = next;
    // Type units hold no code; a skeleton's functions are in its split
    // unit. libdw leaves the DIE of a unit of unknown type zeroed.
    if (unit_type != DW_UT_compile && unit_type != DW_UT_partial && unit_type != DW_UT_skeleton) continue;
    if (unit_die.addr == nullptr || unit_die.cu == nullptr) continue;
    Dwarf_Die* die = &unit_die;
    if (unit_type == DW_UT_skeleton && sub_die.addr != nullptr) die = &sub_die;
    // GNU as describes an assembler function as returning an unnamed
    // DW_TAG_unspecified_type, parameters unknown: no signature to show.
    if (dwarf_srclang(die) == DW_LANG_Mips_Assembler) continue;
    walk(die, 0, !is_c_language(die), 0);
    if (over_budget_) break;
  }
  if (over_budget_) {
    return make_error(FTJIT_E_ELF, "its DWARF describes more parameters, members and enumerators than a "
                                   "file of its size can (corrupt DWARF?)");
  }
  if (functions_.empty() && !dwarf_error_.empty()) {
    return make_error(FTJIT_E_ELF, "its DWARF cannot be read: " + dwarf_error_);
  }

  std::vector<FunctionSignature> out;
  out.reserve(functions_.size());
  for (Pending& p : functions_) {
    for (const void* addr : p.chain) {
      auto it = scope_of_.find(addr);
      if (it == scope_of_.end()) continue;
      p.sig.name = scope_names_[it->second] + "::" + p.sig.name;
      break;
    }
    out.push_back(std::move(p.sig));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const FunctionSignature& a, const FunctionSignature& b) { return a.entry < b.entry; });
  // Two DIEs for one entry (identical code folded, a unit linked twice):
  // the first read stands for both.
  out.erase(std::unique(out.begin(), out.end(),
                        [](const FunctionSignature& a, const FunctionSignature& b) { return a.entry == b.entry; }),
            out.end());
  return out;
}

uint32_t SignatureReader::nested_scope(uint32_t scope, const std::string& name) {
  std::string full = scope == 0 ? name : scope_names_[scope] + "::" + name;
  full = capped(std::move(full), kMaxScopeLength);
  auto [it, inserted] = scope_index_.try_emplace(full, static_cast<uint32_t>(scope_names_.size()));
  if (inserted) scope_names_.push_back(std::move(full));
  return it->second;
}

// GCC and clang put every concrete function at the top of its unit or in
// the namespaces (clang) and classes that declare it, never inside
// another function's DIE (GCC's nested C functions aside), so function
// bodies are skipped: most of a unit's DIEs are in them.
void SignatureReader::walk(Dwarf_Die* parent, uint32_t scope, bool cxx, int depth) {
  if (depth > kMaxScopeDepth || over_budget_) return;
  Dwarf_Die child;
  int rc = dwarf_child(parent, &child);
  while (rc == 0 && !over_budget_) {
    switch (dwarf_tag(&child)) {
      case DW_TAG_subprogram:
        if (scope != 0) scope_of_.emplace(child.addr, scope);
        visit_function(&child);
        break;
      case DW_TAG_namespace:
        walk(&child, nested_scope(scope, name_or(&child, "(anonymous namespace)")), cxx, depth + 1);
        break;
      case DW_TAG_structure_type:
      case DW_TAG_class_type:
      case DW_TAG_union_type:
        // C's have members only.
        if (cxx && dwarf_haschildren(&child) > 0) {
          walk(&child, nested_scope(scope, name_or(&child, "<anonymous>")), cxx, depth + 1);
        }
        break;
      default:
        break;
    }
    rc = dwarf_siblingof(&child, &child);
  }
  if (rc < 0 && dwarf_error_.empty()) dwarf_error_ = dwarf_errmsg(-1);
}

bool SignatureReader::entry_of(Dwarf_Die* die, uint64_t* entry) {
  Dwarf_Addr pc;
  if (dwarf_lowpc(die, &pc) == 0) {
    *entry = pc;
    return true;
  }
  // Hot/cold split: GCC lists the part with the entry first.
  Dwarf_Addr base, start, end;
  ptrdiff_t offset = 0;
  while ((offset = dwarf_ranges(die, offset, &base, &start, &end)) > 0) {
    if (start < end) {
      *entry = start;
      return true;
    }
  }
  return false;
}

bool SignatureReader::charge(uint64_t cells) {
  if (cells > cells_left_) {
    over_budget_ = true;
    return false;
  }
  cells_left_ -= cells;
  return true;
}

void collect_params(Dwarf_Die* die, std::vector<Dwarf_Die>* params, bool* variadic) {
  Dwarf_Die child;
  if (dwarf_child(die, &child) != 0) return;
  do {
    const int tag = dwarf_tag(&child);
    if (tag == DW_TAG_formal_parameter) params->push_back(child);
    if (tag == DW_TAG_unspecified_parameters) *variadic = true;
  } while (dwarf_siblingof(&child, &child) == 0);
}

// A clone that dropped, added or reordered parameters lists other ones
// than its abstract origin.
bool same_parameters(const std::vector<Dwarf_Die>& concrete, const std::vector<Dwarf_Die>& abstract) {
  if (concrete.size() != abstract.size()) return false;
  for (size_t i = 0; i < concrete.size(); ++i) {
    Dwarf_Die origin;
    Dwarf_Die param = concrete[i];
    if (ref(&param, DW_AT_abstract_origin, &origin) && origin.addr != abstract[i].addr) return false;
  }
  return true;
}

Param SignatureReader::param_of(Dwarf_Die* die) {
  Param p;
  const char* name = dwarf_diename(die);
  if (name != nullptr) p.name = capped(name);
  p.artificial = flag(die, DW_AT_artificial, true);
  Dwarf_Die type;
  if (!type_of(die, &type)) {
    p.type.name = "?";
    return p;
  }
  const Converted& c = convert(&type, 0);
  if (!charge(c.cells)) return p;
  if (c.is_void) {
    p.type.name = c.type.name;
  } else if (c.by_reference) {
    // What the caller passes: the address of its copy.
    p.type.kind = ValueKind::kPointer;
    p.type.size = p.type.align = address_size(&type);
    p.type.name = c.type.name;
  } else {
    p.type = c.type;
  }
  return p;
}

void SignatureReader::visit_function(Dwarf_Die* die) {
  if (dwarf_hasattr(die, DW_AT_declaration)) return;
  uint64_t entry = 0;
  if (!entry_of(die, &entry) || !facts_.is_code(entry)) return;

  Pending p;
  FunctionSignature& sig = p.sig;
  sig.entry = entry;
  const char* name = dwarf_diename(die);
  if (name != nullptr) sig.name = capped(name);

  Dwarf_Die cur = *die;
  for (int hop = 0; hop < kMaxOriginHops; ++hop) {
    p.chain.push_back(cur.addr);
    Dwarf_Die next;
    if (!ref(&cur, DW_AT_abstract_origin, &next) && !ref(&cur, DW_AT_specification, &next)) break;
    cur = next;
  }

  std::vector<Dwarf_Die> params;
  collect_params(die, &params, &sig.variadic);
  Dwarf_Die origin;
  if (ref(die, DW_AT_abstract_origin, &origin)) {
    std::vector<Dwarf_Die> abstract;
    collect_params(&origin, &abstract, &sig.variadic);
    if (!same_parameters(params, abstract)) sig.abi_changed = true;
  } else if (params.empty()) {
    // A definition that leaves its parameters to its declaration.
    Dwarf_Die decl;
    if (ref(die, DW_AT_specification, &decl)) collect_params(&decl, &params, &sig.variadic);
  }
  if (udata(die, DW_AT_calling_convention, true) == Dwarf_Word{DW_CC_nocall}) sig.abi_changed = true;
  if (facts_.clones.count(entry) != 0) sig.abi_changed = true;

  if (!charge(1 + params.size())) return;
  Dwarf_Die ret;
  if (type_of(die, &ret)) {
    const Converted& c = convert(&ret, 0);
    if (!charge(c.cells)) return;
    if (!c.is_void) {
      sig.ret = c.type;
      // Returned through a hidden pointer that takes the first argument
      // register on x86-64 and riscv64, which the type alone does not
      // tell when it is small enough for registers; a bigger one is
      // returned in memory anyway, as its size says.
      if (c.by_reference && c.type.size <= 16) sig.abi_changed = true;
    }
  }
  sig.params.reserve(params.size());
  for (Dwarf_Die& param : params) {
    sig.params.push_back(param_of(&param));
    if (over_budget_) return;
  }
  functions_.push_back(std::move(p));
}

// ----------------------------------------------------------------------------
// Types
// ----------------------------------------------------------------------------

const SignatureReader::Converted& SignatureReader::convert(Dwarf_Die* die, int depth) {
  auto [it, inserted] = types_.try_emplace(die->addr);
  Converted& slot = it->second;  // stays valid while the map grows
  if (!inserted) return slot.done ? slot : cycle_;
  Converted c;
  if (depth > kMaxTypeDepth) {
    c.type.name = "<type nested too deeply>";
  } else {
    c = convert_new(die, depth);
  }
  c.cells = 1 + c.type.members.size() + c.type.enumerators.size();
  for (const Member& m : c.type.members) c.cells += m.enumerators.size();
  c.done = true;
  slot = std::move(c);
  return slot;
}

SignatureReader::Converted SignatureReader::convert_new(Dwarf_Die* die, int depth) {
  Converted c;
  // A type unit's type (-fdebug-types-section), named by its signature
  // from a stand-in DIE that may hold nothing else.
  Dwarf_Die def;
  if (ref(die, DW_AT_signature, &def) && def.addr != die->addr) {
    c = convert(&def, depth + 1);
    c.done = false;
    return c;
  }
  c.type.name = name_of(die);
  switch (dwarf_tag(die)) {
    case DW_TAG_base_type:
      convert_base(die, &c);
      break;
    case DW_TAG_typedef:
    case DW_TAG_const_type:
    case DW_TAG_volatile_type:
    case DW_TAG_restrict_type:
    case DW_TAG_atomic_type: {
      Dwarf_Die inner;
      if (!type_of(die, &inner)) {
        c.is_void = true;
        break;
      }
      std::string name = std::move(c.type.name);
      c = convert(&inner, depth + 1);
      c.type.name = std::move(name);
      break;
    }
    case DW_TAG_pointer_type:
    case DW_TAG_reference_type:
    case DW_TAG_rvalue_reference_type:
      convert_pointer(die, &c);
      break;
    case DW_TAG_enumeration_type:
      convert_enum(die, &c);
      break;
    case DW_TAG_structure_type:
    case DW_TAG_class_type:
      convert_struct(die, depth, &c);
      break;
    case DW_TAG_union_type: {
      // Not shown, but placed by its size and alignment.
      c.type.size = to_u32(udata(die, DW_AT_byte_size).value_or(0));
      Layout layout;
      lay_out(die, 0, "", depth, &layout);
      c.type.align = to_u32(udata(die, DW_AT_alignment).value_or(layout.align));
      c.by_reference = layout.by_reference;
      break;
    }
    case DW_TAG_array_type: {
      Dwarf_Die elem;
      if (type_of(die, &elem)) c.type.align = convert(&elem, depth + 1).type.align;
      c.type.size = to_u32(udata(die, DW_AT_byte_size).value_or(0));
      break;
    }
    case DW_TAG_ptr_to_member_type: {
      const uint32_t word = address_size(die);
      Dwarf_Die target, stripped;
      if (type_of(die, &target) && strip_qualifiers(&target, &stripped) &&
          dwarf_tag(&stripped) == DW_TAG_subroutine_type) {
        // The Itanium C++ ABI's pointer to member function: {ptr, adj}.
        c.type.kind = ValueKind::kStruct;
        c.type.size = 2 * word;
        c.type.align = word;
        c.type.members.push_back({"ptr", 0, ValueKind::kPointer, static_cast<uint8_t>(word), {}});
        c.type.members.push_back({"adj", word, ValueKind::kSigned, static_cast<uint8_t>(word), {}});
      } else {
        // A pointer to data member: the member's offset.
        c.type.kind = ValueKind::kPointer;
        c.type.size = c.type.align = word;
      }
      break;
    }
    case DW_TAG_unspecified_type:
      // std::nullptr_t, passed as a pointer.
      if (c.type.name == "decltype(nullptr)") {
        c.type.kind = ValueKind::kPointer;
        c.type.size = c.type.align = address_size(die);
      }
      break;
    default:
      break;  // function types, anything unknown: kUnsupported, named
  }
  return c;
}

void SignatureReader::convert_base(Dwarf_Die* die, Converted* c) {
  ValueType& t = c->type;
  const uint64_t size = udata(die, DW_AT_byte_size).value_or(0);
  const uint64_t encoding = udata(die, DW_AT_encoding).value_or(0);
  t.size = to_u32(size);
  t.align = to_u32(udata(die, DW_AT_alignment).value_or(natural_align(size)));
  switch (encoding) {
    case DW_ATE_signed:
      t.kind = ValueKind::kSigned;
      t.is_signed = true;
      break;
    case DW_ATE_unsigned:
    case DW_ATE_UTF:
      t.kind = ValueKind::kUnsigned;
      break;
    case DW_ATE_boolean:
      t.kind = ValueKind::kBool;
      break;
    case DW_ATE_signed_char:
    case DW_ATE_unsigned_char:
      // Plain char's signedness is the target's: its encoding says which.
      // "signed char" and "unsigned char" (int8_t, uint8_t) are numbers.
      t.is_signed = encoding == DW_ATE_signed_char;
      t.kind = t.name == "char" ? ValueKind::kChar : t.is_signed ? ValueKind::kSigned : ValueKind::kUnsigned;
      break;
    case DW_ATE_float:
      if (size == 4 || size == 8) t.kind = ValueKind::kFloat;
      break;
    case DW_ATE_address:
      t.kind = ValueKind::kPointer;
      break;
    case DW_ATE_complex_float:
      t.align = to_u32(udata(die, DW_AT_alignment).value_or(natural_align(size / 2)));
      break;
    default:
      break;  // decimal and fixed point: kUnsupported
  }
  // __int128 and odd sizes are not shown (but still placed by their size).
  if (t.kind != ValueKind::kUnsupported && t.kind != ValueKind::kFloat && !is_scalar_size(size)) {
    t.kind = ValueKind::kUnsupported;
    t.is_signed = false;
  }
}

void SignatureReader::convert_pointer(Dwarf_Die* die, Converted* c) {
  ValueType& t = c->type;
  t.kind = ValueKind::kPointer;
  t.size = to_u32(udata(die, DW_AT_byte_size).value_or(address_size(die)));
  t.align = natural_align(t.size);
  if (dwarf_tag(die) != DW_TAG_pointer_type) return;  // a char & is one char
  Dwarf_Die target, stripped;
  if (!type_of(die, &target) || !strip_qualifiers(&target, &stripped)) return;
  if (dwarf_tag(&stripped) != DW_TAG_base_type) return;
  const uint64_t encoding = udata(&stripped, DW_AT_encoding).value_or(0);
  if (encoding == DW_ATE_signed_char || encoding == DW_ATE_unsigned_char) t.kind = ValueKind::kString;
}

// An enumerator's DW_AT_const_value. Fixed-size forms carry the value's
// bytes: sign-extended from the form's size when the enum is signed.
std::optional<int64_t> enumerator_value(Dwarf_Attribute* attr, bool is_signed) {
  const unsigned form = dwarf_whatform(attr);
  if (form == DW_FORM_sdata || form == DW_FORM_implicit_const) {
    Dwarf_Sword v;
    if (dwarf_formsdata(attr, &v) != 0) return std::nullopt;
    return v;
  }
  Dwarf_Word v;
  if (dwarf_formudata(attr, &v) != 0) return std::nullopt;
  if (is_signed) {
    switch (form) {
      case DW_FORM_data1: return static_cast<int8_t>(v);
      case DW_FORM_data2: return static_cast<int16_t>(v);
      case DW_FORM_data4: return static_cast<int32_t>(v);
      default: break;
    }
  }
  return static_cast<int64_t>(v);
}

void SignatureReader::convert_enum(Dwarf_Die* die, Converted* c) {
  ValueType& t = c->type;
  t.kind = ValueKind::kEnum;
  const uint64_t size = udata(die, DW_AT_byte_size).value_or(0);
  t.size = to_u32(size);
  t.align = to_u32(udata(die, DW_AT_alignment).value_or(natural_align(size)));
  Dwarf_Die under, base;
  bool known = false;
  if (type_of(die, &under) && strip_qualifiers(&under, &base) && dwarf_tag(&base) == DW_TAG_base_type) {
    const uint64_t encoding = udata(&base, DW_AT_encoding).value_or(0);
    t.is_signed = encoding == DW_ATE_signed || encoding == DW_ATE_signed_char;
    known = true;
  }
  Dwarf_Die child;
  if (dwarf_child(die, &child) == 0) {
    do {
      if (dwarf_tag(&child) != DW_TAG_enumerator) continue;
      Dwarf_Attribute attr;
      if (dwarf_attr(&child, DW_AT_const_value, &attr) == nullptr) continue;
      // Without an underlying type, a negative value written as such
      // says the enum is signed.
      if (!known && dwarf_whatform(&attr) == DW_FORM_sdata) {
        Dwarf_Sword v;
        if (dwarf_formsdata(&attr, &v) == 0 && v < 0) t.is_signed = true;
      }
      if (t.enumerators.size() >= kMaxEnumerators) continue;
      const std::optional<int64_t> value = enumerator_value(&attr, t.is_signed);
      if (value) t.enumerators.push_back({*value, name_or(&child, "")});
    } while (dwarf_siblingof(&child, &child) == 0);
  }
  if (!is_scalar_size(size)) t.kind = ValueKind::kUnsupported;
}

void SignatureReader::convert_struct(Dwarf_Die* die, int depth, Converted* c) {
  ValueType& t = c->type;
  t.kind = ValueKind::kStruct;
  t.size = to_u32(udata(die, DW_AT_byte_size).value_or(0));
  if (dwarf_hasattr(die, DW_AT_declaration)) {
    t.opaque = true;  // a type this unit never completes
    return;
  }
  Layout layout;
  lay_out(die, 0, "", depth, &layout);
  if (layout.members.size() > kMaxLeafMembers) layout.opaque = true;
  t.align = to_u32(udata(die, DW_AT_alignment).value_or(layout.align));
  t.opaque = layout.opaque;
  if (!t.opaque) t.members = std::move(layout.members);
  // The compiler's word wins over what the members suggest (clang says
  // it; GCC does not).
  const std::optional<Dwarf_Word> cc = udata(die, DW_AT_calling_convention);
  if (cc == Dwarf_Word{DW_CC_pass_by_reference}) {
    c->by_reference = true;
  } else if (cc == Dwarf_Word{DW_CC_pass_by_value}) {
    c->by_reference = false;
  } else {
    c->by_reference = layout.by_reference;
  }
}

void SignatureReader::lay_out(Dwarf_Die* die, uint64_t base, const std::string& prefix, int depth, Layout* out) {
  Dwarf_Die child;
  if (dwarf_child(die, &child) != 0) return;
  do {
    switch (dwarf_tag(&child)) {
      case DW_TAG_member:
        // C++'s static data members (DWARF 4) are not in the object.
        if (dwarf_hasattr(&child, DW_AT_declaration) || dwarf_hasattr(&child, DW_AT_external)) break;
        lay_out_member(&child, base, prefix, depth, out);
        break;
      case DW_TAG_inheritance:
        lay_out_member(&child, base, prefix, depth, out);
        break;
      case DW_TAG_subprogram:
        note_special_member(die, &child, out);
        break;
      case DW_TAG_variant_part:
        out->opaque = true;
        break;
      default:
        break;
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

// DW_AT_data_member_location: a constant, or DWARF 2's expression
// DW_OP_plus_uconst N. Anything else (a virtual base) has no fixed offset.
bool member_offset(Dwarf_Die* member, uint64_t* offset) {
  Dwarf_Attribute attr;
  if (dwarf_attr(member, DW_AT_data_member_location, &attr) == nullptr) {
    *offset = 0;  // a union's members, or a struct's first by omission
    return true;
  }
  Dwarf_Word v;
  if (dwarf_formudata(&attr, &v) == 0) {
    *offset = v;
    return true;
  }
  Dwarf_Op* ops = nullptr;
  size_t count = 0;
  if (dwarf_getlocation(&attr, &ops, &count) == 0 && count == 1 &&
      (ops[0].atom == DW_OP_plus_uconst || ops[0].atom == DW_OP_constu)) {
    *offset = ops[0].number;
    return true;
  }
  return false;
}

void SignatureReader::lay_out_member(Dwarf_Die* member, uint64_t base, const std::string& prefix, int depth,
                                     Layout* out) {
  const bool inheritance = dwarf_tag(member) == DW_TAG_inheritance;
  Dwarf_Die type;
  if (!type_of(member, &type)) {
    out->opaque = true;
    return;
  }
  uint64_t offset = 0;
  if (!member_offset(member, &offset) || (inheritance && udata(member, DW_AT_virtuality).value_or(0) != 0)) {
    // A virtual base: classes that have one are passed by reference.
    out->opaque = true;
    out->by_reference = true;
  }
  if (dwarf_hasattr(member, DW_AT_bit_size) || dwarf_hasattr(member, DW_AT_data_bit_offset) ||
      dwarf_hasattr(member, DW_AT_bit_offset)) {
    out->opaque = true;
  }
  // A base's members and an anonymous struct's are reached as the
  // containing struct's own.
  std::string name = prefix;
  const char* own = inheritance ? nullptr : dwarf_diename(member);
  if (own != nullptr) name = capped(prefix.empty() ? std::string(own) : prefix + "." + own);
  if (base + offset < base) {
    out->opaque = true;
    offset = 0;
  }
  add_value(&type, base + offset, name, depth, out);
}

void SignatureReader::add_value(Dwarf_Die* type, uint64_t offset, const std::string& name, int depth, Layout* out) {
  Dwarf_Die stripped;
  if (strip_qualifiers(type, &stripped) && dwarf_tag(&stripped) == DW_TAG_array_type) {
    add_array(&stripped, offset, name, depth, out);
    return;
  }
  const Converted& c = convert(type, depth + 1);
  out->align = std::max(out->align, c.type.align);
  out->by_reference |= c.by_reference;
  if (out->opaque) return;  // its alignment still counts, its members no more
  switch (c.type.kind) {
    case ValueKind::kStruct:
      if (c.type.opaque) {
        out->opaque = true;
        return;
      }
      for (const Member& m : c.type.members) {
        if (out->opaque) return;
        Member copy = m;
        copy.name = capped(name.empty() ? m.name : m.name.empty() ? name : name + "." + m.name);
        if (offset + m.offset > std::numeric_limits<uint32_t>::max()) {
          out->opaque = true;
          return;
        }
        copy.offset = static_cast<uint32_t>(offset + m.offset);
        push_member(std::move(copy), out);
      }
      return;
    case ValueKind::kUnsupported:
      out->opaque = true;  // a union, a long double...: not laid out as scalars
      return;
    default: {
      if (c.is_void || c.type.size == 0 || c.type.size > 16 || offset > std::numeric_limits<uint32_t>::max()) {
        out->opaque = true;
        return;
      }
      Member m;
      m.name = name;
      m.offset = static_cast<uint32_t>(offset);
      m.kind = c.type.kind;
      m.size = static_cast<uint8_t>(c.type.size);
      m.enumerators = c.type.enumerators;
      push_member(std::move(m), out);
      return;
    }
  }
}

void SignatureReader::push_member(Member m, Layout* out) {
  if (out->members.size() >= kMaxLeafMembers) {
    out->opaque = true;
    return;
  }
  out->members.push_back(std::move(m));
}

void SignatureReader::add_array(Dwarf_Die* array, uint64_t offset, const std::string& name, int depth,
                                Layout* out) {
  Dwarf_Die elem;
  if (!type_of(array, &elem)) {
    out->opaque = true;
    return;
  }
  // The dimensions; a flexible or zero-length array has no count.
  std::vector<uint64_t> dims;
  uint64_t total = 1;
  Dwarf_Die child;
  if (dwarf_child(array, &child) == 0) {
    do {
      const int tag = dwarf_tag(&child);
      if (tag != DW_TAG_subrange_type && tag != DW_TAG_enumeration_type) continue;
      uint64_t count = 0;
      if (std::optional<Dwarf_Word> n = udata(&child, DW_AT_count)) {
        count = *n;
      } else if (std::optional<Dwarf_Word> upper = udata(&child, DW_AT_upper_bound)) {
        const uint64_t lower = udata(&child, DW_AT_lower_bound).value_or(0);
        count = *upper >= lower && *upper - lower < ~uint64_t{0} ? *upper - lower + 1 : 0;
      }
      dims.push_back(count);
      total = count == 0 || total > kMaxLeafMembers ? 0 : total * std::min<uint64_t>(count, kMaxLeafMembers + 1);
    } while (dwarf_siblingof(&child, &child) == 0);
  }
  const Converted& e = convert(&elem, depth + 1);
  out->align = std::max(out->align, e.type.align);
  out->by_reference |= e.by_reference;
  if (dims.empty() || total == 0 || total > kMaxLeafMembers || e.type.size == 0) {
    out->opaque = true;
    return;
  }
  const uint64_t stride = e.type.size;
  for (uint64_t i = 0; i < total && !out->opaque; ++i) {
    // "m[1][2]": the index in each dimension, the last one fastest.
    std::string index;
    uint64_t rest = i;
    for (size_t d = dims.size(); d-- > 0;) {
      index.insert(0, "[" + std::to_string(rest % dims[d]) + "]");
      rest /= dims[d];
    }
    add_value(&elem, offset + i * stride, capped(name + index), depth, out);
  }
}

// Itanium C++ ABI: a class with a user-provided copy or move constructor
// or destructor, or with virtual functions, is passed by invisible
// reference ("non-trivial for the purposes of calls"). GCC does not say it
// in DW_AT_calling_convention, so it is read from the members: an
// implicit (artificial) or "= default" one is trivial unless a base or
// member makes it not, which lay_out finds from them.
void SignatureReader::note_special_member(Dwarf_Die* cls, Dwarf_Die* fn, Layout* out) {
  if (udata(fn, DW_AT_virtuality).value_or(0) != 0) {
    out->by_reference = true;
    return;
  }
  if (flag(fn, DW_AT_artificial) || udata(fn, DW_AT_defaulted) == Dwarf_Word{DW_DEFAULTED_in_class}) return;
  const char* name = dwarf_diename(fn);
  if (name == nullptr) return;
  if (name[0] == '~') {
    out->by_reference = true;
    return;
  }
  // A constructor has the class's name, without its template arguments.
  const char* cls_name = dwarf_diename(cls);
  if (cls_name == nullptr) return;
  const std::string_view bare = std::string_view(cls_name).substr(0, std::string_view(cls_name).find('<'));
  if (bare != name) return;
  // A copy or move constructor takes one reference to the class.
  std::vector<Dwarf_Die> params;
  bool variadic = false;
  collect_params(fn, &params, &variadic);
  std::vector<Dwarf_Die> explicit_params;
  for (Dwarf_Die& p : params) {
    if (!flag(&p, DW_AT_artificial)) explicit_params.push_back(p);
  }
  if (explicit_params.size() != 1) return;
  Dwarf_Die ref_type, target, stripped;
  if (!type_of(&explicit_params[0], &ref_type) || !strip_qualifiers(&ref_type, &stripped)) return;
  const int tag = dwarf_tag(&stripped);
  if (tag != DW_TAG_reference_type && tag != DW_TAG_rvalue_reference_type) return;
  if (!type_of(&stripped, &target) || !strip_qualifiers(&target, &stripped)) return;
  const char* target_name = dwarf_diename(&stripped);
  if (stripped.addr == cls->addr || (target_name != nullptr && std::strcmp(target_name, cls_name) == 0)) {
    out->by_reference = true;
  }
}

// ----------------------------------------------------------------------------
// Type names, as C and C++ spell them
// ----------------------------------------------------------------------------

const std::string& SignatureReader::name_of(Dwarf_Die* die, int depth) {
  auto [it, inserted] = names_.try_emplace(die->addr, "?");  // "?" while spelled: a cycle
  std::string& slot = it->second;
  if (inserted) slot = capped(spell(die, depth));
  return slot;
}

std::string SignatureReader::spell_dimensions(Dwarf_Die* array) {
  std::string dims;
  Dwarf_Die child;
  if (dwarf_child(array, &child) == 0) {
    do {
      if (dwarf_tag(&child) != DW_TAG_subrange_type) continue;
      if (std::optional<Dwarf_Word> n = udata(&child, DW_AT_count)) {
        dims += "[" + std::to_string(*n) + "]";
      } else if (std::optional<Dwarf_Word> upper = udata(&child, DW_AT_upper_bound)) {
        dims += "[" + std::to_string(*upper + 1 - udata(&child, DW_AT_lower_bound).value_or(0)) + "]";
      } else {
        dims += "[]";
      }
      if (dims.size() > kMaxNameLength) break;
    } while (dwarf_siblingof(&child, &child) == 0);
  }
  return dims.empty() ? "[]" : dims;
}

// "int (*)(int, char *)" for middle "(*)".
std::string SignatureReader::spell_function(Dwarf_Die* fn, const std::string& middle, int depth) {
  Dwarf_Die ret;
  std::string s = type_of(fn, &ret) ? name_of(&ret, depth + 1) : "void";
  s += " " + middle + "(";
  std::string args;
  Dwarf_Die child;
  if (dwarf_child(fn, &child) == 0) {
    do {
      const int tag = dwarf_tag(&child);
      if (tag == DW_TAG_unspecified_parameters) args += args.empty() ? "..." : ", ...";
      if (tag != DW_TAG_formal_parameter || flag(&child, DW_AT_artificial)) continue;
      Dwarf_Die type;
      if (!args.empty()) args += ", ";
      args += type_of(&child, &type) ? name_of(&type, depth + 1) : "?";
      if (args.size() > kMaxNameLength) break;
    } while (dwarf_siblingof(&child, &child) == 0);
  }
  if (args.empty() && flag(fn, DW_AT_prototyped)) args = "void";
  return s + args + ")";
}

std::string SignatureReader::spell(Dwarf_Die* die, int depth) {
  if (depth > kMaxTypeDepth) return "?";
  const int tag = dwarf_tag(die);
  Dwarf_Die target;
  if (ref(die, DW_AT_signature, &target) && target.addr != die->addr) return name_of(&target, depth + 1);
  switch (tag) {
    case DW_TAG_structure_type:
    case DW_TAG_class_type:
    case DW_TAG_union_type:
    case DW_TAG_enumeration_type: {
      std::string name = name_or(die, "<anonymous>");
      if (!is_c_language(die)) return name;
      const char* keyword = tag == DW_TAG_union_type ? "union " : tag == DW_TAG_enumeration_type ? "enum " : "struct ";
      return keyword + name;
    }
    case DW_TAG_const_type:
    case DW_TAG_volatile_type:
    case DW_TAG_restrict_type:
    case DW_TAG_atomic_type: {
      const char* q = tag == DW_TAG_const_type      ? "const"
                      : tag == DW_TAG_volatile_type ? "volatile"
                      : tag == DW_TAG_restrict_type ? "restrict"
                                                    : "_Atomic";
      const std::string inner = type_of(die, &target) ? name_of(&target, depth + 1) : "void";
      // "char *const": a qualified pointer puts the qualifier after the star.
      if (!inner.empty() && (inner.back() == '*' || inner.back() == '&')) return inner + q;
      // "const volatile", in whichever order the compiler nested them.
      if (tag == DW_TAG_volatile_type && inner.starts_with("const ")) return "const volatile " + inner.substr(6);
      return std::string(q) + " " + inner;
    }
    case DW_TAG_pointer_type:
    case DW_TAG_reference_type:
    case DW_TAG_rvalue_reference_type: {
      const char* sym = tag == DW_TAG_pointer_type ? "*" : tag == DW_TAG_reference_type ? "&" : "&&";
      if (!type_of(die, &target)) return std::string("void ") + sym;
      if (dwarf_tag(&target) == DW_TAG_subroutine_type) {
        return spell_function(&target, std::string("(") + sym + ")", depth);
      }
      if (dwarf_tag(&target) == DW_TAG_array_type) {
        Dwarf_Die elem;
        const std::string e = type_of(&target, &elem) ? name_of(&elem, depth + 1) : "?";
        return e + " (" + sym + ")" + spell_dimensions(&target);
      }
      const std::string inner = name_of(&target, depth + 1);
      if (!inner.empty() && (inner.back() == '*' || inner.back() == '&')) return inner + sym;
      return inner + " " + sym;
    }
    case DW_TAG_ptr_to_member_type: {
      Dwarf_Die cls;
      const std::string owner = ref(die, DW_AT_containing_type, &cls) ? name_or(&cls, "?") : "?";
      if (type_of(die, &target) && dwarf_tag(&target) == DW_TAG_subroutine_type) {
        return spell_function(&target, "(" + owner + "::*)", depth);
      }
      const std::string inner = type_of(die, &target) ? name_of(&target, depth + 1) : "?";
      return inner + " " + owner + "::*";
    }
    case DW_TAG_array_type: {
      const std::string elem = type_of(die, &target) ? name_of(&target, depth + 1) : "?";
      return elem + " " + spell_dimensions(die);
    }
    case DW_TAG_subroutine_type:
      return spell_function(die, "", depth);
    case DW_TAG_base_type: {
      std::string name = name_or(die, "?");
      // clang names every _Complex type "complex": say of what, as GCC
      // does, for whoever places it by name (backends/calling_convention).
      if (udata(die, DW_AT_encoding) == Dwarf_Word{DW_ATE_complex_float} &&
          name.find("float") == std::string::npos && name.find("double") == std::string::npos) {
        const uint64_t size = udata(die, DW_AT_byte_size).value_or(0);
        name += size == 8 ? " float" : size == 16 ? " double" : " long double";
      }
      return name;
    }
    default:
      return name_or(die, "?");
  }
}

// ============================================================================
// Opening files
// ============================================================================

std::string hex_of(const unsigned char* bytes, int len) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < len; ++i) {
    s += kDigits[bytes[i] >> 4];
    s += kDigits[bytes[i] & 0xf];
  }
  return s;
}

// An error for `path` that a user can act on, before libdwfl's terser ones.
Status check_elf_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(FTJIT_E_SYSTEM, "cannot open " + path + ": " + std::strerror(errno));
  struct stat st;
  unsigned char magic[SELFMAG] = {};
  Status status;
  if (fstat(fd, &st) != 0) {
    status = make_error(FTJIT_E_SYSTEM, "cannot read " + path + ": " + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = make_error(FTJIT_E_ELF, path + " is not a regular file");
  } else if (pread(fd, magic, SELFMAG, 0) != SELFMAG || std::memcmp(magic, ELFMAG, SELFMAG) != 0) {
    status = make_error(FTJIT_E_ELF, path + " is not an ELF file");
  }
  close(fd);
  return status;
}

// Where libdwfl found the DWARF, from the name of the file it opened.
std::string describe_source(Dwfl_Module* mod, const char* main_file, const char* debug_file) {
  if (debug_file == nullptr || (main_file != nullptr && std::strcmp(main_file, debug_file) == 0)) {
    return "the file itself";
  }
  const std::string debug(debug_file);
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  const int len = dwfl_module_build_id(mod, &bits, &vaddr);
  if (len > 1) {
    const std::string hex = hex_of(bits, len);
    if (debug.find(".build-id/" + hex.substr(0, 2) + "/" + hex.substr(2)) != std::string::npos) {
      return "build-id: " + debug;
    }
    if (debug.find("debuginfod") != std::string::npos && debug.find(hex) != std::string::npos) {
      return "debuginfod: " + debug;
    }
  }
  return "debuglink: " + debug;
}

// What was looked for, for the message when nothing was found.
std::string where_looked(Dwfl_Module* mod, Elf* elf, const std::string& path, const std::string& debug_dir) {
  std::string s;
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  const int len = dwfl_module_build_id(mod, &bits, &vaddr);
  if (len > 1) {
    const std::string hex = hex_of(bits, len);
    s += "; looked for " + debug_dir + "/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug";
  } else {
    s += "; it has no build-id";
  }
  GElf_Word crc = 0;
  const char* link = elf != nullptr ? dwelf_elf_gnu_debuglink(elf, &crc) : nullptr;
  if (link != nullptr) {
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    s += " and for " + std::string(link) + " in " + dir + ", " + dir + "/.debug and under " + debug_dir;
  } else {
    s += ", and no .gnu_debuglink";
  }
  return s;
}

// libdw's DWARF_E_NO_DWARF is not exported: whether the image has a
// .debug_info tells "none" from "broken".
bool has_debug_info(Elf* elf) {
  size_t names = 0;
  if (elf_getshdrstrndx(elf, &names) != 0) return false;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    const char* name = elf_strptr(elf, names, shdr.sh_name);
    if (name != nullptr && (std::strcmp(name, ".debug_info") == 0 || std::strcmp(name, ".zdebug_info") == 0)) {
      return true;
    }
  }
  return false;
}

uint64_t cell_budget(Elf* elf) {
  size_t size = 0;
  if (elf == nullptr || elf_rawfile(elf, &size) == nullptr) size = 0;
  return kCellsSlack + kCellsPerByte * static_cast<uint64_t>(size);
}

Error with_subject(Error e, const std::string& subject) {
  e.message = subject + ": " + e.message;
  return e;
}

struct DwflDeleter {
  void operator()(Dwfl* d) const { dwfl_end(d); }
};

}  // namespace

Result<DebugInfo> read_debug_info(const std::string& path, const std::string& root) {
  std::string prefix = root;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (prefix.find(':') != std::string::npos) {
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      "root directory " + root + " holds a ':', which libdwfl's debug file search path cannot");
  }
  FTJIT_TRY(check_elf_file(path));
  elf_version(EV_CURRENT);

  // libdwfl's search path (libdwfl.h, dwfl_standard_find_debuginfo): ""
  // the file's own directory, ".debug" its subdirectory (both under the
  // root already, through `path`), then the absolute debug directory,
  // under which .build-id/ is searched too. CRCs of .gnu_debuglink files
  // are checked (a file with a build-id is matched by it instead).
  const std::string debug_dir = prefix + "/usr/lib/debug";
  std::string search = ":.debug:" + debug_dir;
  char* search_ptr = search.data();
  Dwfl_Callbacks callbacks = {};
  callbacks.find_elf = dwfl_build_id_find_elf;
  callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
  callbacks.section_address = dwfl_offline_section_address;
  callbacks.debuginfo_path = &search_ptr;
  std::unique_ptr<Dwfl, DwflDeleter> dwfl(dwfl_begin(&callbacks));
  if (!dwfl) return make_error(FTJIT_E_INTERNAL, "libdwfl: " + std::string(dwfl_errmsg(-1)));

  dwfl_report_begin(dwfl.get());
  Dwfl_Module* mod = dwfl_report_offline(dwfl.get(), path.c_str(), path.c_str(), -1);
  if (mod == nullptr) {
    return make_error(FTJIT_E_ELF, "cannot read " + path + " as ELF: " + dwfl_errmsg(-1));
  }
  if (dwfl_report_end(dwfl.get(), nullptr, nullptr) != 0) {
    return make_error(FTJIT_E_ELF, "cannot read " + path + " as ELF: " + dwfl_errmsg(-1));
  }

  Dwarf_Addr bias = 0;
  Elf* main_elf = dwfl_module_getelf(mod, &bias);
  Dwarf* dw = dwfl_module_getdwarf(mod, &bias);
  if (dw == nullptr) {
    const std::string why = dwfl_errmsg(-1);
    // libdwfl's error codes are not exported (DWFL_E_NO_DWARF): its
    // message is the stable thing.
    if (why.find("No DWARF") != std::string::npos || why.find("no DWARF") != std::string::npos) {
      return make_error(kNoDebugInfo, "no DWARF in " + path +
                                          ", nor in a debug file found by build-id or .gnu_debuglink" +
                                          where_looked(mod, main_elf, path, debug_dir));
    }
    return make_error(FTJIT_E_ELF, "cannot read the DWARF of " + path + ": " + why);
  }

  const char* main_file = nullptr;
  const char* debug_file = nullptr;
  dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, &main_file, &debug_file);
  DebugInfo info;
  info.source = describe_source(mod, main_file, debug_file);

  ElfFacts facts;
  Elf* debug_elf = dwarf_getelf(dw);
  if (main_elf != nullptr) {
    read_segments(main_elf, &facts);
    read_clone_symbols(main_elf, &facts);
  }
  if (debug_elf != nullptr && debug_elf != main_elf) read_clone_symbols(debug_elf, &facts);

  SignatureReader reader(facts, cell_budget(debug_elf), /*split_units=*/true);
  auto functions = reader.read(dw);
  if (!functions.ok()) {
    return with_subject(functions.take_error(),
                        path + (info.source == "the file itself" ? "" : " (" + info.source + ")"));
  }
  info.functions = std::move(functions.value());
  return info;
}

Result<DebugInfo> read_debug_info_from_memory(const uint8_t* data, size_t size) {
  elf_version(EV_CURRENT);
  // libelf reads the image in place and may want it aligned; the copy also
  // outlives nothing the caller owns.
  std::vector<uint64_t> copy((size + 7) / 8);
  if (size != 0) std::memcpy(copy.data(), data, size);
  Elf* elf = elf_memory(reinterpret_cast<char*>(copy.data()), size);
  if (elf == nullptr) return make_error(FTJIT_E_ELF, std::string("not an ELF image: ") + elf_errmsg(-1));
  struct ElfEnd {
    Elf* e;
    ~ElfEnd() { elf_end(e); }
  } elf_end_guard{elf};
  if (elf_kind(elf) != ELF_K_ELF) return make_error(FTJIT_E_ELF, "not an ELF image");

  Dwarf* dw = dwarf_begin_elf(elf, DWARF_C_READ, nullptr);
  if (dw == nullptr) {
    const std::string why = dwarf_errmsg(-1);
    if (!has_debug_info(elf)) return make_error(kNoDebugInfo, "no DWARF in the ELF image");
    return make_error(FTJIT_E_ELF, "cannot read the DWARF of the ELF image: " + why);
  }
  struct DwarfEnd {
    Dwarf* d;
    ~DwarfEnd() { dwarf_end(d); }
  } dwarf_end_guard{dw};
  // References into a dwz file (.gnu_debugaltlink) would make libdw open a
  // path the image names; they resolve into the image itself instead,
  // where they are checked like any other reference.
  dwarf_setalt(dw, dw);

  ElfFacts facts;
  read_segments(elf, &facts);
  read_clone_symbols(elf, &facts);
  SignatureReader reader(facts, cell_budget(elf), /*split_units=*/false);
  auto functions = reader.read(dw);
  if (!functions.ok()) return with_subject(functions.take_error(), "the ELF image");
  DebugInfo info;
  info.source = "the file itself";
  info.functions = std::move(functions.value());
  return info;
}

}  // namespace ftjit
