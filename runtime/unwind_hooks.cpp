// SPDX-License-Identifier: MIT
// GOT redirection of the unwinder's entry points (see unwind_hooks.h).
#include "runtime/unwind_hooks.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <span>
#include <string>

#include "backends/backend.h"
#include "runtime/process_backend.h"
#include "runtime/shadow_stack.h"

namespace ftjit {
namespace {

struct _Unwind_Exception;
using RaiseFn = int (*)(_Unwind_Exception*);
using ForcedFn = int (*)(_Unwind_Exception*, void*, void*);
using ExitFn = void (*)(void*);
using BeginCatchFn = void* (*)(void*);
using PersonalityFn = int (*)(int, int, uint64_t, _Unwind_Exception*, void*);
using GetCfaFn = uintptr_t (*)(void*);
constexpr int kUnwindCleanupPhase = 2;  // _UA_CLEANUP_PHASE

RaiseFn g_raise;
RaiseFn g_resume_or_rethrow;
ForcedFn g_forced_unwind;
ExitFn g_pthread_exit;
BeginCatchFn g_begin_catch;
PersonalityFn g_personality;
GetCfaFn g_get_cfa;

// The wrappers. Each puts the real return addresses back before the
// unwinder walks the stack; none allocates (an exception may be thrown
// for lack of memory).
int hook_raise(_Unwind_Exception* e) {
  shadow_unhook_all();
  return g_raise(e);
}
int hook_resume_or_rethrow(_Unwind_Exception* e) {
  shadow_unhook_all();
  return g_resume_or_rethrow(e);
}
int hook_forced_unwind(_Unwind_Exception* e, void* stop, void* arg) {
  shadow_unhook_all();
  return g_forced_unwind(e, stop, arg);
}
[[noreturn]] void hook_pthread_exit(void* value) {
  shadow_unhook_all();
  g_pthread_exit(value);
  __builtin_unreachable();
}
// Reached from the catching frame's landing pad through its PLT, so our
// CFA is that frame's stack pointer: hooked frames below it are gone.
void* hook_begin_catch(void* e) {
  void* r = g_begin_catch(e);
  shadow_rehook_after_catch(reinterpret_cast<uint64_t>(__builtin_dwarf_cfa()));
  return r;
}

// The C++ personality routine, called by the unwinder for each frame with
// a C++ unwind table entry; in the cleanup phase, before that frame's
// landing pads (destructors, which may call traced code) run. The hooked
// frames below it are gone by then: report them now, so that exits keep
// their order with the entries the landing pads make.
int hook_personality(int version, int actions, uint64_t exception_class, _Unwind_Exception* e,
                     void* context) {
  if ((actions & kUnwindCleanupPhase) != 0 && g_get_cfa != nullptr) {
    shadow_unwinding_to(g_get_cfa(context));
  }
  return g_personality(version, actions, exception_class, e, context);
}

using Redirect = GotRedirect;
Redirect g_unwind_redirects[] = {
    {"_Unwind_RaiseException", reinterpret_cast<void*>(&hook_raise),
     reinterpret_cast<void**>(&g_raise)},
    {"_Unwind_Resume_or_Rethrow", reinterpret_cast<void*>(&hook_resume_or_rethrow),
     reinterpret_cast<void**>(&g_resume_or_rethrow)},
    {"_Unwind_ForcedUnwind", reinterpret_cast<void*>(&hook_forced_unwind),
     reinterpret_cast<void**>(&g_forced_unwind)},
    {"pthread_exit", reinterpret_cast<void*>(&hook_pthread_exit),
     reinterpret_cast<void**>(&g_pthread_exit)},
    {"__cxa_begin_catch", reinterpret_cast<void*>(&hook_begin_catch),
     reinterpret_cast<void**>(&g_begin_catch)},
    {"__gxx_personality_v0", reinterpret_cast<void*>(&hook_personality),
     reinterpret_cast<void**>(&g_personality)},
};

std::mutex g_mu;
std::atomic<bool> g_active{false};

struct ScanState {
  uint32_t jump_slot = 0, glob_dat = 0, abs64 = 0;  // the ISA's relocation types
  std::string error;
  std::span<const Redirect> redirects{g_unwind_redirects};  // what this scan redirects
  bool undo = false;  // point the wrappers' slots back at the real functions
};

// Writes `value` into a GOT slot, which RELRO may have made read-only.
bool write_got(uint64_t slot, uint64_t value, bool relro, std::string* error) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  void* base = reinterpret_cast<void*>(slot & ~(page - 1));
  if (relro && mprotect(base, page, PROT_READ | PROT_WRITE) != 0) {
    *error = std::string("mprotect GOT: ") + strerror(errno);
    return false;
  }
  // One aligned store: other threads calling through the slot see the old
  // or the new target, both valid.
  __atomic_store_n(reinterpret_cast<uint64_t*>(slot), value, __ATOMIC_RELEASE);
  if (relro) mprotect(base, page, PROT_READ);
  return true;
}

void scan_relocations(const ElfW(Rela) * rela, size_t bytes, const ElfW(Sym) * symtab,
                      const char* strtab, const dl_phdr_info* info, uint64_t relro_lo,
                      uint64_t relro_hi, ScanState* st) {
  for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
    uint32_t type = ELF64_R_TYPE(rela[i].r_info);
    // A data word with an addend is not a plain pointer to the function.
    const bool abs = type == st->abs64 && rela[i].r_addend == 0;
    if (type != st->jump_slot && type != st->glob_dat && !abs) continue;
    uint32_t sym = ELF64_R_SYM(rela[i].r_info);
    if (sym == 0) continue;
    const char* name = strtab + symtab[sym].st_name;
    for (const Redirect& r : st->redirects) {
      if (*r.real == nullptr || std::strcmp(name, r.name) != 0) continue;
      uint64_t slot = info->dlpi_addr + rela[i].r_offset;
      uint64_t want = reinterpret_cast<uint64_t>(r.wrapper);
      if (st->undo) {
        const uint64_t real = reinterpret_cast<uint64_t>(*r.real);
        if (*reinterpret_cast<uint64_t*>(slot) == want &&
            !write_got(slot, real, slot >= relro_lo && slot < relro_hi, &st->error)) {
          return;
        }
        break;
      }
      if (*reinterpret_cast<uint64_t*>(slot) == want) break;
      if (!write_got(slot, want, slot >= relro_lo && slot < relro_hi, &st->error)) return;
      break;
    }
  }
}

// A scan of `redirects` with this ISA's relocation types.
ScanState scan_state(std::span<const Redirect> redirects = g_unwind_redirects) {
  ScanState st;
  const IsaTraits& t = process_backend().traits();
  st.jump_slot = t.reloc_jump_slot;
  st.glob_dat = t.reloc_glob_dat;
  st.abs64 = t.reloc_abs64;
  st.redirects = redirects;
  return st;
}

int scan_module(dl_phdr_info* info, size_t, void* arg) {
  auto* st = static_cast<ScanState*>(arg);
  const ElfW(Dyn)* dyn = nullptr;
  uint64_t relro_lo = 0, relro_hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC) {
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + ph.p_vaddr);
    } else if (ph.p_type == PT_GNU_RELRO) {
      relro_lo = info->dlpi_addr + ph.p_vaddr;
      relro_hi = relro_lo + ph.p_memsz;
    }
  }
  if (dyn == nullptr) return 0;
  uint64_t symtab = 0, strtab = 0, jmprel = 0, pltrelsz = 0, rela = 0, relasz = 0;
  int64_t pltrel = DT_RELA;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = d->d_un.d_ptr; break;
      case DT_STRTAB: strtab = d->d_un.d_ptr; break;
      case DT_JMPREL: jmprel = d->d_un.d_ptr; break;
      case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
      case DT_PLTREL: pltrel = static_cast<int64_t>(d->d_un.d_val); break;
      case DT_RELA: rela = d->d_un.d_ptr; break;
      case DT_RELASZ: relasz = d->d_un.d_val; break;
      default: break;
    }
  }
  if (symtab == 0 || strtab == 0) return 0;
  // The loader rewrites these to addresses in place for most modules, not
  // for the vDSO: an address below the load bias is still an offset.
  auto addr = [&](uint64_t p) { return p < info->dlpi_addr ? p + info->dlpi_addr : p; };
  const auto* syms = reinterpret_cast<const ElfW(Sym)*>(addr(symtab));
  const auto* strs = reinterpret_cast<const char*>(addr(strtab));
  if (jmprel != 0 && pltrel == DT_RELA) {
    scan_relocations(reinterpret_cast<const ElfW(Rela)*>(addr(jmprel)), pltrelsz, syms, strs,
                     info, relro_lo, relro_hi, st);
  }
  if (rela != 0) {
    scan_relocations(reinterpret_cast<const ElfW(Rela)*>(addr(rela)), relasz, syms, strs, info,
                     relro_lo, relro_hi, st);
  }
  return st->error.empty() ? 0 : 1;
}

}  // namespace

Status install_unwind_hooks() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (Redirect& r : g_unwind_redirects) {
    if (*r.real == nullptr) *r.real = dlsym(RTLD_DEFAULT, r.name);
  }
  ScanState st = scan_state();
  if (g_get_cfa == nullptr) g_get_cfa = reinterpret_cast<GetCfaFn>(dlsym(RTLD_DEFAULT, "_Unwind_GetCFA"));
  dl_iterate_phdr(scan_module, &st);
  g_active.store(true, std::memory_order_release);
  if (!st.error.empty()) {
    return make_error(FTJIT_E_SYSTEM, "cannot redirect the unwinder for exit hooks: " + st.error);
  }
  return {};
}

bool unwind_hooks_active() { return g_active.load(std::memory_order_acquire); }

Status uninstall_unwind_hooks() {
  if (!g_active.load(std::memory_order_acquire)) return {};
  FTJIT_TRY(undo_got_redirects(g_unwind_redirects));
  g_active.store(false, std::memory_order_release);
  return {};
}

Status undo_got_redirects(std::span<const GotRedirect> redirects) {
  std::lock_guard<std::mutex> lock(g_mu);
  ScanState st = scan_state(redirects);
  st.undo = true;
  dl_iterate_phdr(scan_module, &st);
  if (!st.error.empty()) return make_error(FTJIT_E_SYSTEM, "cannot restore GOT slots: " + st.error);
  return {};
}

Status redirect_got_slots(std::span<const GotRedirect> redirects) {
  // The same lock as the unwinder's hooks: both toggle RELRO pages.
  std::lock_guard<std::mutex> lock(g_mu);
  ScanState st = scan_state(redirects);
  dl_iterate_phdr(scan_module, &st);
  if (!st.error.empty()) return make_error(FTJIT_E_SYSTEM, "cannot redirect GOT slots: " + st.error);
  return {};
}

}  // namespace ftjit
