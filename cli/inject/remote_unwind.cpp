// SPDX-License-Identifier: MIT
// The call chain of a stopped thread of another process, unwound with
// libunwind's ptrace accessors from the CFI of the target's own files:
// the real return addresses, not every word of the stack that happens to
// look like one (the main thread's stack keeps stale loader addresses from
// start-up in slots no frame ever rewrites).
//
// arm64 frames built with -mbranch-protection (pac-ret) save a signed
// return address, and their CFI says so with DW_CFA_AARCH64_negate_ra_state.
// libunwind 1.6 (Debian 12) knows neither: its CFI parser rejects that
// opcode (it shares 0x2d with SPARC's DW_CFA_GNU_window_save, and is only
// handled for SPARC), so the frame is not unwound, and the return address
// it would give carries a PAC in its top bits, which matches no module. So
// the accessors handed to libunwind here read that opcode as DW_CFA_nop
// (the rest of the frame's CFI is right as it is), and every return
// address is stripped with the kernel's code-pointer mask before libunwind
// looks it up or steps from it. libunwind 1.7 and later do both themselves.
//
// libunwind 1.6's lookup of a module's CFI (_UPT_find_proc_info) takes the
// mapping that holds the pc for the start of a PT_LOAD segment: it needs a
// segment whose p_offset is the mapping's file offset, which holds for
// GNU ld's page-aligned segments. lld packs its segments (p_offset is not a
// multiple of the page size, the mapping starts at the page below), so no
// frame of an lld-linked program had CFI, no thread of one stood at a safe
// point, and `ftjit attach` gave up. Where libunwind finds nothing, the
// module's .eh_frame_hdr (PT_GNU_EH_FRAME) is found here from its program
// headers, read from the target's memory, and searched by libunwind's own
// table search.
#include <elf.h>
#include <libunwind-ptrace.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cli/inject/inject_internal.h"

namespace ftjit::inject::detail {

uint64_t code_signature_mask(pid_t tid) {
#if defined(__aarch64__) && defined(NT_ARM_PAC_MASK)
  struct {
    uint64_t data_mask;
    uint64_t insn_mask;
  } masks{};
  iovec io{&masks, sizeof masks};
  if (::ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(uintptr_t{NT_ARM_PAC_MASK}), &io) == 0)
    return masks.insn_mask;
#else
  (void)tid;
#endif
  return 0;  // no pointer authentication: code addresses are plain
}

namespace {

#if defined(__aarch64__) && UNW_VERSION_MAJOR == 1 && UNW_VERSION_MINOR < 7
constexpr bool kRewriteNegateRaState = true;
#else
constexpr bool kRewriteNegateRaState = false;
#endif

constexpr uint8_t kCfaNop = 0x00;
constexpr uint8_t kCfaNegateRaState = 0x2d;

// The target's memory as one walk reads it: whole pages, each copied once
// (process_vm_readv). libunwind's own accessor reads a word per
// PTRACE_PEEKDATA, and a walk reads the same CFI and search-table words
// many times: about a thousand system calls a thread, most of the time of
// a walk. The thread is stopped for the walk's life and the code and CFI
// do not change, so a copy stays true. A page that cannot be copied (not
// readable: PEEKDATA reads through protections) is read word by word.
class PageCache {
 public:
  explicit PageCache(pid_t tid) : tid_(tid) {}

  bool read(uint64_t addr, unw_word_t* out, unw_addr_space_t as, void* upt) {
    uint8_t bytes[sizeof(unw_word_t)];
    for (size_t done = 0; done < sizeof bytes;) {
      const uint64_t at = addr + done;
      const uint64_t page = at & ~(kPage - 1);
      const std::vector<uint8_t>* copy = page_at(page);
      if (copy == nullptr) return _UPT_access_mem(as, addr, out, 0, upt) == 0;
      const size_t n = std::min<size_t>(sizeof bytes - done, page + kPage - at);
      std::memcpy(bytes + done, copy->data() + (at - page), n);
      done += n;
    }
    std::memcpy(out, bytes, sizeof bytes);
    return true;
  }

 private:
  static constexpr uint64_t kPage = 4096;

  const std::vector<uint8_t>* page_at(uint64_t page) {
    auto it = pages_.find(page);
    if (it == pages_.end()) {
      std::vector<uint8_t> copy(kPage);
      iovec local{copy.data(), kPage};
      iovec remote{reinterpret_cast<void*>(page), kPage};
      if (::process_vm_readv(tid_, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(kPage)) copy.clear();
      it = pages_.emplace(page, std::move(copy)).first;
    }
    return it->second.empty() ? nullptr : &it->second;
  }

  pid_t tid_;
  std::unordered_map<uint64_t, std::vector<uint8_t>> pages_;
};

struct RemoteThread {
  explicit RemoteThread(pid_t tid_in) : tid(tid_in), memory(tid_in) {}
  pid_t tid;
  void* upt = nullptr;
  uint64_t insn_mask = 0;
  PageCache memory;
  // Target addresses of DW_CFA_AARCH64_negate_ra_state opcodes that reads
  // present as DW_CFA_nop.
  std::unordered_set<uint64_t> negate_ra_state_at;
  // The process's mappings, read once a walk (the thread is stopped),
  // when a pc's module is looked up here (find_by_program_headers).
  std::optional<std::vector<Mapping>> mappings;
};

// libunwind passes the accessors' argument on to the _UPT functions, and
// those hand it back to the accessors (to read the target's CFI), so the
// argument stays _UPT's own and the walk's state is found here.
thread_local RemoteThread* walking = nullptr;

// Reads a CFA program's bytes from the target, one word at a time.
class CfiBytes {
 public:
  CfiBytes(unw_addr_space_t as, void* upt, uint64_t at, uint64_t end) : as_(as), upt_(upt), at_(at), end_(end) {}

  uint64_t at() const { return at_; }
  bool done() const { return at_ >= end_; }

  bool byte(uint8_t& out) {
    if (at_ >= end_) return false;
    const uint64_t word_at = at_ & ~uint64_t{7};
    if (word_at != cached_at_) {
      unw_word_t w = 0;
      if (!walking->memory.read(word_at, &w, as_, upt_)) return false;
      cached_ = w;
      cached_at_ = word_at;
    }
    out = static_cast<uint8_t>(cached_ >> (8 * (at_ - word_at)));  // arm64 is little-endian
    ++at_;
    return true;
  }
  bool skip(uint64_t n) {
    if (n > end_ - at_) return false;
    at_ += n;
    return true;
  }
  bool leb128() {
    uint8_t b = 0x80;
    while (b & 0x80)
      if (!byte(b)) return false;
    return true;
  }
  bool block() {
    uint64_t len = 0;
    uint8_t b = 0x80;
    for (unsigned shift = 0; b & 0x80; shift += 7) {
      if (!byte(b) || shift > 56) return false;
      len |= uint64_t{b & 0x7fu} << shift;
    }
    return skip(len);
  }

 private:
  unw_addr_space_t as_;
  void* upt_;
  uint64_t at_, end_;
  uint64_t cached_at_ = ~uint64_t{0};
  uint64_t cached_ = 0;
};

// Walks a CFA program opcode by opcode (operands are skipped, so a 0x2d
// byte inside one is left alone) and records where negate_ra_state is. An
// opcode it does not know ends the walk: libunwind reports that frame.
void find_negate_ra_state(unw_addr_space_t as, RemoteThread& r, uint64_t start, uint64_t end) {
  if (end <= start || end - start > (1u << 20)) return;
  CfiBytes cfi(as, r.upt, start, end);
  while (!cfi.done()) {
    const uint64_t op_at = cfi.at();
    uint8_t op = 0;
    if (!cfi.byte(op)) return;
    bool ok = true;
    switch (op >> 6) {
      case 1:  // advance_loc
      case 3:  // restore
        continue;
      case 2:  // offset
        ok = cfi.leb128();
        break;
      default:
        switch (op) {
          case kCfaNegateRaState:
            r.negate_ra_state_at.insert(op_at);
            break;
          case 0x00: case 0x0a: case 0x0b:  // nop, remember_state, restore_state
            break;
          case 0x02: ok = cfi.skip(1); break;  // advance_loc1
          case 0x03: ok = cfi.skip(2); break;  // advance_loc2
          case 0x04: ok = cfi.skip(4); break;  // advance_loc4
          case 0x06: case 0x07: case 0x08: case 0x0d: case 0x0e: case 0x13: case 0x2e:
            ok = cfi.leb128();  // one (s)leb128 operand
            break;
          case 0x05: case 0x09: case 0x0c: case 0x11: case 0x12: case 0x14: case 0x15: case 0x2f:
            ok = cfi.leb128() && cfi.leb128();  // two
            break;
          case 0x0f:  // def_cfa_expression
            ok = cfi.block();
            break;
          case 0x10: case 0x16:  // expression, val_expression
            ok = cfi.leb128() && cfi.block();
            break;
          default:  // set_loc (its operand's size depends on the CIE) or unknown
            return;
        }
    }
    if (!ok) return;
  }
}

// libunwind's search of an .eh_frame_hdr table (what _UPT_find_proc_info
// calls once it has found one); exported, not declared by its headers.
extern "C" int UNW_OBJ(dwarf_search_unwind_table)(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t* di,
                                                  unw_proc_info_t* pi, int need_unwind_info, void* arg);

const std::vector<Mapping>& file_mappings(RemoteThread& r, pid_t tid) {
  if (!r.mappings) {
    auto maps = read_maps(tid);
    r.mappings.emplace();
    if (maps) {
      for (Mapping& m : *maps)
        if (m.inode != 0 && !m.path.empty()) r.mappings->push_back(std::move(m));
    }
  }
  return *r.mappings;
}

bool read_target(unw_addr_space_t as, RemoteThread& r, void* arg, uint64_t addr, void* out, size_t n) {
  auto* bytes = static_cast<uint8_t*>(out);
  for (size_t done = 0; done < n;) {
    unw_word_t word = 0;
    const uint64_t at = addr + done;
    const uint64_t aligned = at & ~uint64_t{sizeof word - 1};
    if (!r.memory.read(aligned, &word, as, arg)) return false;
    const size_t skip = at - aligned;
    const size_t take = std::min(sizeof word - skip, n - done);
    std::memcpy(bytes + done, reinterpret_cast<const uint8_t*>(&word) + skip, take);
    done += take;
  }
  return true;
}

// The CFI of the module that maps `ip`, found from its program headers in
// the target's memory (see the top of this file). -UNW_ENOINFO when there
// is none.
int find_by_program_headers(unw_addr_space_t as, RemoteThread& r, pid_t tid, unw_word_t ip, unw_proc_info_t* pi,
                            int need_unwind_info, void* arg) {
  const auto& maps = file_mappings(r, tid);
  auto hit = std::find_if(maps.begin(), maps.end(), [&](const Mapping& m) {
    return ip >= m.start && ip < m.end;
  });
  if (hit == maps.end()) return -UNW_ENOINFO;
  // The module's first mapping (file offset 0) holds its ELF and program
  // headers with either linker.
  auto first = std::find_if(maps.begin(), maps.end(), [&](const Mapping& m) {
    return m.offset == 0 && m.path == hit->path;
  });
  if (first == maps.end() || first->start > hit->start) return -UNW_ENOINFO;
  Elf64_Ehdr eh;
  if (!read_target(as, r, arg, first->start, &eh, sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
      eh.e_phnum > 64)
    return -UNW_ENOINFO;
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!read_target(as, r, arg, first->start + eh.e_phoff, ph.data(), ph.size() * sizeof(Elf64_Phdr)))
    return -UNW_ENOINFO;
  // The load bias, from the segment whose file bytes hold the pc.
  const uint64_t file_at = hit->offset + (ip - hit->start);
  std::optional<uint64_t> bias;
  const Elf64_Phdr* text = nullptr;
  const Elf64_Phdr* eh_frame_hdr = nullptr;
  for (const Elf64_Phdr& p : ph) {
    if (p.p_type == PT_LOAD && file_at >= p.p_offset && file_at < p.p_offset + p.p_filesz) {
      bias = ip - (p.p_vaddr + (file_at - p.p_offset));
      text = &p;
    }
    if (p.p_type == PT_GNU_EH_FRAME) eh_frame_hdr = &p;
  }
  if (!bias || text == nullptr || eh_frame_hdr == nullptr) return -UNW_ENOINFO;
  // .eh_frame_hdr: version 1, the encodings of eh_frame_ptr, fde_count
  // and the table; then eh_frame_ptr, fde_count, and the sorted table of
  // (initial location, FDE) pairs, each 4 bytes relative to the header
  // (DW_EH_PE_datarel | DW_EH_PE_sdata4), which is what libunwind searches.
  const uint64_t hdr = *bias + eh_frame_hdr->p_vaddr;
  uint8_t head[12];
  if (!read_target(as, r, arg, hdr, head, sizeof head)) return -UNW_ENOINFO;
  constexpr uint8_t kUdata4 = 0x03, kSdata4 = 0x0b, kDatarelSdata4 = 0x3b, kOmit = 0xff;
  const auto four_bytes = [](uint8_t enc) { return (enc & 0x0f) == kUdata4 || (enc & 0x0f) == kSdata4; };
  if (head[0] != 1 || !four_bytes(head[1]) || head[2] == kOmit || (head[2] & 0x0f) != kUdata4 ||
      head[3] != kDatarelSdata4)
    return -UNW_ENOINFO;
  uint32_t fde_count = 0;
  std::memcpy(&fde_count, head + 8, sizeof fde_count);
  unw_dyn_info_t di;
  std::memset(&di, 0, sizeof di);
  di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
  di.start_ip = *bias + text->p_vaddr;
  di.end_ip = *bias + text->p_vaddr + text->p_memsz;
  di.u.rti.segbase = hdr;
  di.u.rti.table_data = hdr + sizeof head;
  di.u.rti.table_len = uint64_t{fde_count} * 8 / sizeof(unw_word_t);
  return UNW_OBJ(dwarf_search_unwind_table)(as, ip, &di, pi, need_unwind_info, arg);
}

int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int need_unwind_info, void* arg) {
  RemoteThread& r = *walking;
  int rc = find_by_program_headers(as, r, r.tid, ip & ~r.insn_mask, pi, need_unwind_info, arg);
  if (rc < 0) rc = _UPT_find_proc_info(as, ip & ~r.insn_mask, pi, need_unwind_info, arg);
  // A DWARF FDE's unwind info starts with the target addresses of its
  // CIE's and its own instructions (libunwind's dwarf_cie_info_t).
  if (kRewriteNegateRaState && rc == 0 && need_unwind_info && pi->format == UNW_INFO_FORMAT_TABLE &&
      pi->unwind_info != nullptr && pi->unwind_info_size >= static_cast<int>(4 * sizeof(unw_word_t))) {
    const auto* instr = static_cast<const unw_word_t*>(pi->unwind_info);
    find_negate_ra_state(as, r, instr[0], instr[1]);
    find_negate_ra_state(as, r, instr[2], instr[3]);
  }
  return rc;
}

void put_unwind_info(unw_addr_space_t as, unw_proc_info_t* pi, void* arg) {
  _UPT_put_unwind_info(as, pi, arg);
}

int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t* addr, void* arg) {
  return _UPT_get_dyn_info_list_addr(as, addr, arg);
}

// Writes (libunwind's way of moving a cursor's pc) never reach the target:
// the walk only reads it.
int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t* val, int write, void* arg) {
  RemoteThread& r = *walking;
  if (write) return 0;
  int rc = r.memory.read(addr, val, as, arg) ? 0 : -UNW_EINVAL;
  if (rc == 0 && !r.negate_ra_state_at.empty()) {
    for (unsigned i = 0; i < sizeof(unw_word_t); ++i)
      if (r.negate_ra_state_at.count(addr + i)) {
        *val &= ~(unw_word_t{0xff} << (8 * i));
        *val |= unw_word_t{kCfaNop} << (8 * i);
      }
  }
  return rc;
}

int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t* val, int write, void* arg) {
  if (write) return 0;
  return _UPT_access_reg(as, reg, val, 0, arg);
}

int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t* val, int write, void* arg) {
  if (write) return 0;
  return _UPT_access_fpreg(as, reg, val, 0, arg);
}

int resume(unw_addr_space_t, unw_cursor_t*, void*) { return -UNW_EINVAL; }

int get_proc_name(unw_addr_space_t as, unw_word_t ip, char* buf, size_t len, unw_word_t* off, void* arg) {
  return _UPT_get_proc_name(as, ip & ~walking->insn_mask, buf, len, off, arg);
}

unw_accessors_t read_only_accessors() {
  unw_accessors_t a = _UPT_accessors;
  a.find_proc_info = find_proc_info;
  a.put_unwind_info = put_unwind_info;
  a.get_dyn_info_list_addr = get_dyn_info_list_addr;
  a.access_mem = access_mem;
  a.access_reg = access_reg;
  a.access_fpreg = access_fpreg;
  a.resume = resume;
  a.get_proc_name = get_proc_name;
  return a;
}

}  // namespace

Result<std::vector<StackFrame>> call_frames(pid_t tid, size_t max_frames) {
  static unw_accessors_t accessors = read_only_accessors();
  unw_addr_space_t space = unw_create_addr_space(&accessors, 0);
  if (space == nullptr) return make_error(FTJIT_E_SYSTEM, "libunwind: no address space");
  RemoteThread r(tid);
  r.upt = _UPT_create(tid);
  if (r.upt == nullptr) {
    unw_destroy_addr_space(space);
    return make_error(FTJIT_E_SYSTEM, "libunwind: cannot follow thread " + std::to_string(tid));
  }
  r.insn_mask = code_signature_mask(tid);
  walking = &r;
  std::vector<StackFrame> frames;
  unw_cursor_t cursor;
  int rc = unw_init_remote(&cursor, space, r.upt);
  if (rc == 0) {
    do {
      unw_word_t ip = 0, sp = 0;
      if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
      if (unw_get_reg(&cursor, UNW_REG_SP, &sp) != 0) break;
      // A signed return address: the step from this frame must start at
      // the code it names.
      if ((ip & r.insn_mask) != 0) {
        ip &= ~r.insn_mask;
        (void)unw_set_reg(&cursor, UNW_REG_IP, ip);
      }
      frames.push_back({ip, sp});
    } while (frames.size() < max_frames && unw_step(&cursor) > 0);
  }
  unw_destroy_addr_space(space);
  _UPT_destroy(r.upt);
  walking = nullptr;
  if (rc != 0) return make_error(FTJIT_E_SYSTEM, "libunwind cannot unwind thread " + std::to_string(tid));
  return frames;
}

Result<std::vector<uint64_t>> call_chain(pid_t tid, size_t max_frames) {
  auto frames = call_frames(tid, max_frames);
  if (!frames) return frames.take_error();
  std::vector<uint64_t> chain;
  chain.reserve(frames->size());
  for (const StackFrame& f : *frames) chain.push_back(f.ip);
  return chain;
}

}  // namespace ftjit::inject::detail
