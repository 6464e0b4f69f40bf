// SPDX-License-Identifier: MIT
#include "cli/inject/target_libc.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "cli/inject/injector_isa.h"
#include "cli/inject/inject_internal.h"
#include "cli/mapped_file.h"

namespace ftjit::inject::detail {
namespace {

// The libc entry points that take a lock dlopen, dlclose or a library
// constructor takes again (the loader's, malloc's arenas, the atexit and
// atfork lists, the environment, the thread stack cache). A thread stopped
// inside one of them, or with a return address into one on its stack, is
// not the one to run the loader: dlopen there would deadlock on a lock the
// thread holds itself, or re-enter a list it is walking.
constexpr std::string_view kLibcLockHolders[] = {
    "malloc", "free", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign",
    "aligned_alloc", "valloc", "pvalloc", "malloc_trim", "malloc_stats", "malloc_info", "mallinfo",
    "mallinfo2", "mallopt", "__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc",
    "__libc_memalign", "dl_iterate_phdr", "dlopen", "dlmopen", "dlclose", "dlsym", "dlvsym",
    "dladdr", "dladdr1", "dlinfo", "dlerror", "fork", "_Fork", "pthread_create", "__cxa_atexit",
    "__cxa_finalize", "__cxa_thread_atexit_impl", "atexit", "on_exit", "exit", "quick_exit",
    "setenv", "unsetenv", "putenv", "clearenv", "__libc_freeres",
};
// libgcc's unwinder holds its object list lock while it searches FDEs.
constexpr std::string_view kUnwinderLockHolders[] = {"_Unwind_Find_FDE"};

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

const MappedModule* module_named(const std::vector<Mapping>& maps, std::vector<MappedModule>& keep,
                                 std::string_view basename, bool prefix) {
  auto m = find_module(maps, basename, prefix);
  if (!m) return nullptr;
  keep.push_back(*m);
  return &keep.back();
}

// The executable mappings of the file `path`.
std::vector<const Mapping*> code_of(const std::vector<Mapping>& maps, const std::string& path) {
  std::vector<const Mapping*> out;
  for (const Mapping& m : maps)
    if (m.path == path && m.perms.size() >= 3 && m.perms[2] == 'x') out.push_back(&m);
  return out;
}

// Where `code` first is in the given mappings of one file, found in the
// file (mapped here: its pages come from the page cache, many per fault)
// and confirmed in the target's memory; 0 if not so found. Reading the
// mappings out of the target instead copies their whole text (1.4 MB of
// libc) into fresh pages of ours, about 20 ms on a VM where a page fault
// costs 13 us. The file may not be what is mapped (replaced since, or
// patched in memory): the memory decides.
uint64_t find_code_in_file(pid_t pid, const std::vector<const Mapping*>& mappings, std::span<const uint8_t> code) {
  if (mappings.empty() || code.empty()) return 0;
  cli::MappedFile file;
  std::string error;
  if (!file.open(path_in_root(pid, mappings.front()->path), &error)) return 0;
  const std::span<const uint8_t> bytes = file.bytes();
  for (const Mapping* m : mappings) {
    if (m->offset >= bytes.size() || m->end <= m->start) continue;
    const size_t len = std::min<uint64_t>(m->end - m->start, bytes.size() - m->offset);
    const void* hit = ::memmem(bytes.data() + m->offset, len, code.data(), code.size());
    if (hit == nullptr) continue;
    const uint64_t at = m->start + static_cast<uint64_t>(static_cast<const uint8_t*>(hit) - (bytes.data() + m->offset));
    auto there = read_target_memory(pid, at, code.size());
    if (there && std::equal(there->begin(), there->end(), code.begin(), code.end())) return at;
    return 0;
  }
  return 0;
}

// The code ranges of `names`, found at found[first...] (elf_symbol_ranges'
// answer, in the order of the names asked).
void push_code_ranges(const std::vector<std::optional<SymbolRange>>& found, size_t first,
                      std::span<const std::string_view> names, std::vector<AddressRange>* out) {
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& r = found[first + i];
    if (r && !r->tls && r->size > 0) out->push_back({r->address, r->address + r->size, std::string(names[i])});
  }
}

Status add_symbol_ranges(pid_t pid, const MappedModule& mod, std::span<const std::string_view> names,
                         std::vector<AddressRange>* out) {
  auto ranges = elf_symbol_ranges(path_in_root(pid, mod.path), mod.offset0_start, names);
  FTJIT_TRY(ranges);
  push_code_ranges(*ranges, 0, names, out);
  return {};
}

}  // namespace

const AddressRange* TargetLibc::holder_of(uint64_t address) const {
  for (const AddressRange& r : lock_holders)
    if (r.contains(address)) return &r;
  return nullptr;
}

Result<std::vector<uint8_t>> read_target_memory(pid_t pid, uint64_t address, size_t size) {
  std::vector<uint8_t> out(size);
  iovec local{out.data(), size};
  iovec remote{reinterpret_cast<void*>(address), size};
  if (::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size)) return out;
  int fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(FTJIT_E_SYSTEM, errno_message("cannot read the memory of process " + std::to_string(pid), errno));
  ssize_t n = ::pread(fd, out.data(), size, static_cast<off_t>(address));
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(size))
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot read the memory of process " + std::to_string(pid), n < 0 ? err : EIO));
  return out;
}

Status write_target_memory(pid_t pid, uint64_t address, std::span<const uint8_t> bytes) {
  // /proc/PID/mem writes through page protections (FOLL_FORCE), like ptrace.
  int fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return make_error(FTJIT_E_SYSTEM, errno_message("cannot write the memory of process " + std::to_string(pid), errno));
  ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(address));
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(bytes.size()))
    return make_error(FTJIT_E_SYSTEM, errno_message("cannot write the memory of process " + std::to_string(pid), n < 0 ? err : EIO));
  return {};
}

Result<TargetLibc> read_target_libc(const TargetInfo& target) {
  const pid_t pid = target.pid;
  const std::string p = "process " + std::to_string(pid);
  const InjectorIsa& isa = injector_isa();
  if (target.isa != isa.isa)
    return make_error(FTJIT_E_UNSUPPORTED, p + " is not an " + isa.name + " program; ftjit attach serves " +
                                               isa.name + " processes");
  if (target.static_linked)
    return make_error(FTJIT_E_UNSUPPORTED, p + " (" + target.exe +
                                               ") is statically linked: no dlopen to load the agent with; "
                                               "start it with `ftjit run` instead");
  auto maps = read_maps(pid);
  FTJIT_TRY(maps);
  std::vector<MappedModule> keep;
  keep.reserve(4);
  // glibc >= 2.34 keeps dlopen in libc.so.6; older ones in libdl.so.2.
  const MappedModule* libc = module_named(*maps, keep, "libc.so.6", false);
  if (!libc) libc = module_named(*maps, keep, "libc-2.", true);
  if (!libc) {
    if (process_gone(pid)) return make_error(FTJIT_E_INVALID_ARGUMENT, "no process " + std::to_string(pid));
    return make_error(FTJIT_E_UNSUPPORTED, p + " (" + target.exe +
                                               ") has no GNU C library loaded (yet?): the agent cannot be loaded; "
                                               "start it with `ftjit run` instead");
  }
  const MappedModule* libdl = module_named(*maps, keep, "libdl.so.2", false);
  const MappedModule* loader = module_named(*maps, keep, isa.loader, false);
  if (!loader) loader = module_named(*maps, keep, "ld-linux", true);
  const MappedModule* libgcc = module_named(*maps, keep, "libgcc_s.so.1", false);

  TargetLibc out;
  const std::string libc_file = path_in_root(pid, libc->path);
  constexpr std::string_view kLibcNames[] = {"dlopen", "dlclose", "__errno_location", "errno",
                                             "__libc_dlerror_result"};
  constexpr std::string_view kForkEntries[] = {"fork", "_Fork", "__register_atfork", "__cxa_finalize",
                                                "__cxa_atexit"};
  // Every name libc is asked for, in one read of its symbol tables (one
  // per list took three: 2-11 ms of `ftjit attach` beside a busy program).
  std::vector<std::string_view> libc_names(std::begin(kLibcNames), std::end(kLibcNames));
  libc_names.insert(libc_names.end(), std::begin(kLibcLockHolders), std::end(kLibcLockHolders));
  libc_names.insert(libc_names.end(), std::begin(kForkEntries), std::end(kForkEntries));
  auto found = elf_symbol_ranges(libc_file, libc->offset0_start, libc_names);
  FTJIT_TRY(found);
  if ((*found)[0]) out.dlopen = (*found)[0]->address;
  if ((*found)[1]) out.dlclose = (*found)[1]->address;
  if ((out.dlopen == 0 || out.dlclose == 0) && libdl != nullptr) {
    auto dl = elf_symbol_ranges(path_in_root(pid, libdl->path), libdl->offset0_start, kLibcNames);
    FTJIT_TRY(dl);
    if ((*dl)[0] && (*dl)[1]) {
      out.dlopen = (*dl)[0]->address;
      out.dlclose = (*dl)[1]->address;
    }
  }
  if (out.dlopen == 0 || out.dlclose == 0)
    return make_error(FTJIT_E_UNSUPPORTED, p + " (" + target.exe +
                                               ") has no dlopen in its C library: the agent cannot be loaded; "
                                               "start it with `ftjit run` instead");

  // The signal return trampoline is not exported: it is the one copy of
  // its bytes in libc's code (__restore_rt) or in the vDSO's
  // (__kernel_rt_sigreturn), as the ISA says.
  const bool in_vdso = isa.restore_rt_in == SignalTrampoline::kVdso;
  const std::string trampoline_home = in_vdso ? std::string("[vdso]") : libc->path;
  const std::span<const uint8_t> restore_rt = restore_rt_code();
  const std::vector<const Mapping*> trampoline_code = code_of(*maps, trampoline_home);
  if (!in_vdso) out.restore_rt = find_code_in_file(pid, trampoline_code, restore_rt);
  for (size_t i = 0; out.restore_rt == 0 && i < trampoline_code.size(); ++i) {
    const Mapping* m = trampoline_code[i];
    auto text = read_target_memory(pid, m->start, m->end - m->start);
    FTJIT_TRY(text);
    auto hit = std::search(text->begin(), text->end(), restore_rt.begin(), restore_rt.end());
    if (hit != text->end()) out.restore_rt = m->start + static_cast<uint64_t>(hit - text->begin());
  }
  if (out.restore_rt == 0)
    return make_error(FTJIT_E_UNSUPPORTED, p + ": its " +
                                               (in_vdso ? std::string("vDSO") : "C library (" + libc->path + ")") +
                                               " has no signal return trampoline that ftjit recognises");

  // __errno_location's code gives errno's offset from the thread pointer
  // (injector_isa.h); errno's symbol value is its offset in libc's TLS
  // block, so the two give the block's offset, and with it that of any
  // other TLS symbol of libc.
  if ((*found)[2] && (*found)[3] && (*found)[3]->tls) {
    if (std::optional<int64_t> errno_tpoff = errno_tpoff_from_code(pid, (*found)[2]->address)) {
      out.errno_tpoff = *errno_tpoff;
      if ((*found)[4] && (*found)[4]->tls)
        out.dlerror_result_tpoff = *errno_tpoff - static_cast<int64_t>((*found)[3]->address) +
                                   static_cast<int64_t>((*found)[4]->address);
    }
  }

  push_code_ranges(*found, std::size(kLibcNames), kLibcLockHolders, &out.lock_holders);
  push_code_ranges(*found, std::size(kLibcNames) + std::size(kLibcLockHolders), kForkEntries, &out.fork_entries);
  for (const Mapping* m : code_of(*maps, libc->path)) out.chain_ends.push_back({m->start, m->end, "libc"});
  if (auto auxv = read_text_file("/proc/" + std::to_string(pid) + "/auxv")) {
    for (size_t at = 0; at + 16 <= auxv->size(); at += 16) {
      uint64_t type, value;
      std::memcpy(&type, auxv->data() + at, 8);
      std::memcpy(&value, auxv->data() + at + 8, 8);
      if (type == 9 /* AT_ENTRY */) out.chain_ends.push_back({value, value + 64, "_start"});
    }
  }
  if (libdl) FTJIT_TRY(add_symbol_ranges(pid, *libdl, kLibcLockHolders, &out.lock_holders));
  if (libgcc) FTJIT_TRY(add_symbol_ranges(pid, *libgcc, kUnwinderLockHolders, &out.lock_holders));
  if (loader) {
    for (const Mapping* m : code_of(*maps, loader->path)) out.lock_holders.push_back({m->start, m->end, base_name(loader->path)});
    constexpr std::string_view kLoaderNames[] = {"_r_debug"};
    auto r = elf_symbol_ranges(path_in_root(pid, loader->path), loader->offset0_start, kLoaderNames);
    if (r && (*r)[0]) out.r_debug = (*r)[0]->address;
  }
  return out;
}

Result<uint64_t> loaded_object_handle(pid_t pid, const TargetLibc& libc, const std::string& path_in_target) {
  if (libc.r_debug == 0) return make_error(FTJIT_E_UNSUPPORTED, "the loader of process " + std::to_string(pid) + " has no _r_debug");
  auto maps = read_maps(pid);
  FTJIT_TRY(maps);
  uint64_t offset0 = 0;
  for (const Mapping& m : *maps)
    if (m.path == path_in_target && m.offset == 0) {
      offset0 = m.start;
      break;
    }
  // struct r_debug { int r_version; struct link_map* r_map; ... }
  // struct link_map { ElfW(Addr) l_addr; char* l_name; ElfW(Dyn)* l_ld; link_map* l_next, *l_prev; }
  auto walk = [&]() -> Result<uint64_t> {
    auto head = read_target_memory(pid, libc.r_debug + 8, 8);
    FTJIT_TRY(head);
    uint64_t lm;
    std::memcpy(&lm, head->data(), 8);
    for (int i = 0; lm != 0 && i < 65536; ++i) {
      auto fields = read_target_memory(pid, lm, 32);
      FTJIT_TRY(fields);
      uint64_t l_addr, l_name, l_next;
      std::memcpy(&l_addr, fields->data(), 8);
      std::memcpy(&l_name, fields->data() + 8, 8);
      std::memcpy(&l_next, fields->data() + 24, 8);
      if (l_name != 0) {
        auto name = read_target_memory(pid, l_name, std::min<size_t>(path_in_target.size() + 1, 4096));
        if (name && std::memcmp(name->data(), path_in_target.c_str(), name->size()) == 0) return lm;
      }
      // The same file under another spelling of its path: the same load bias.
      if (offset0 != 0 && l_addr == offset0) return lm;
      lm = l_next;
    }
    return uint64_t{0};
  };
  // The list is read while the target's other threads run: one of them
  // in dlopen or dlclose can change a node under the walk, which then ends
  // early. A file mapped but not found was such a torn walk: read again
  // (a few milliseconds at most; the loader holds its lock that long).
  auto found = walk();
  for (int again = 0; found && *found == 0 && offset0 != 0 && again < 200; ++again) {
    ::usleep(500);
    found = walk();
  }
  return found;
}

std::string pending_dlerror(pid_t pid, const TargetLibc& libc, uint64_t fs_base) {
  if (!libc.dlerror_result_tpoff) return "";
  auto slot = read_target_memory(pid, fs_base + static_cast<uint64_t>(*libc.dlerror_result_tpoff), 8);
  if (!slot) return "";
  uint64_t result;
  std::memcpy(&result, slot->data(), 8);
  if (result == 0 || result == ~uint64_t{0}) return "";
  // glibc >= 2.34, dlfcn/dlerror.h:
  //   struct dl_action_result { int errcode; char errstring_source; bool returned;
  //                             const char* objname; char* errstring; };
  auto fields = read_target_memory(pid, result, 24);
  if (!fields) return "";
  int32_t errcode;
  uint64_t objname_at, errstring_at;
  std::memcpy(&errcode, fields->data(), 4);
  std::memcpy(&objname_at, fields->data() + 8, 8);
  std::memcpy(&errstring_at, fields->data() + 16, 8);
  auto read_cstring = [&](uint64_t at) {
    std::string s;
    while (at != 0 && s.size() < 1024) {
      auto b = read_target_memory(pid, at + s.size(), 1);
      if (!b || (*b)[0] == 0) break;
      s.push_back(static_cast<char>((*b)[0]));
    }
    return s;
  };
  std::string errstring = read_cstring(errstring_at);
  if (errstring.empty()) return "";
  std::string objname = read_cstring(objname_at);
  std::string text = objname.empty() ? errstring : objname + ": " + errstring;
  if (errcode != 0) text += std::string(": ") + std::strerror(errcode);
  return text;
}

}  // namespace ftjit::inject::detail
