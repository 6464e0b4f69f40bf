// SPDX-License-Identifier: MIT
// The dynamic loader watch (see dlopen_watch.h), and the engine's part of
// a module change: forgetting unloaded modules, giving new sites to the
// ops whose filters select them.
#include "runtime/dlopen_watch.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <mutex>
#include <optional>
#include <shared_mutex>

#include <spdlog/spdlog.h>

#include "core/bulk_prefault.h"
#include "runtime/log.h"

#include "runtime/arch/arch.h"
#include "runtime/engine.h"
#include "runtime/module_scan.h"
#include "runtime/thread_control.h"
#include "runtime/unwind_hooks.h"

namespace ftjit {
namespace {

using DlopenFn = void* (*)(const char*, int);
using DlmopenFn = void* (*)(Lmid_t, const char*, int);
using DlcloseFn = int (*)(void*);
DlopenFn g_dlopen;
DlmopenFn g_dlmopen;
DlcloseFn g_dlclose;

// Notifications against engine teardown: a wrapper holds it shared while
// it tells the engine; dlopen_watch_stop takes it exclusively.
std::shared_mutex g_watch_mu;
Engine* g_watch_engine = nullptr;  // guarded by g_watch_mu
std::atomic<bool> g_watching{false};
thread_local bool t_notifying = false;

void notify() {
  if (!g_watching.load(std::memory_order_acquire) || t_notifying) return;
  // From a tracer callback the engine is never waited for: a detach on
  // another thread may hold it while its grace period waits for this very
  // thread to leave the callback. The next refresh (any attach, detach,
  // ftjit_refresh_modules or later dlopen) catches the change up.
  if (inside_trampoline()) return;
  const int saved_errno = errno;
  OwnThreadScope own;  // ftjit's work on the program's thread: never traced
  t_notifying = true;
  {
    std::shared_lock<std::shared_mutex> lock(g_watch_mu);
    if (g_watch_engine != nullptr) g_watch_engine->loader_changed();
  }
  t_notifying = false;
  errno = saved_errno;
}

// dlopen and dlmopen look at their return address to find the calling
// object: its namespace, and its DT_RPATH/DT_RUNPATH for a bare name. A
// wrapper in libftjit would make every caller look like libftjit. So the
// real function is entered with a return address inside the caller's
// object: a return gadget of its _fini/_init (runtime/arch/arch.h), which
// returns on into the wrapper. Where none is found the call is a plain one.
const void* ret_gadget_of_caller(const void* caller) {
  Dl_info info;
  link_map* lm = nullptr;
  if (dladdr1(caller, &info, reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) == 0 || lm == nullptr ||
      lm->l_ld == nullptr) {
    return nullptr;
  }
  for (const ElfW(Dyn)* d = lm->l_ld; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag != DT_FINI && d->d_tag != DT_INIT) continue;
    uint64_t p = d->d_un.d_ptr;
    if (p < lm->l_addr) p += lm->l_addr;  // not relocated in place
    if (const void* g = arch::find_return_gadget(reinterpret_cast<const uint8_t*>(p))) return g;
  }
  return nullptr;
}

void* hook_dlopen(const char* file, int mode) {
  void* h;
  if (const void* g = ret_gadget_of_caller(__builtin_return_address(0))) {
    h = reinterpret_cast<void*>(ftjit_call_returning_via(reinterpret_cast<const void*>(g_dlopen),
                                                         reinterpret_cast<uint64_t>(file),
                                                         static_cast<uint64_t>(mode), 0, g));
  } else {
    h = g_dlopen(file, mode);
  }
  // Patching happens here, after the real dlopen returned: the loader lock
  // is free again, and the caller pays the time (counted in
  // ftjit_stats.dlopen_patch_ns), never a traced function. No function of
  // the new library can run before this returns its handle except its
  // constructors (which run untraced), so none of them is entered
  // untraced afterwards, nor during the patching.
  if (h != nullptr) notify();
  return h;
}

void* hook_dlmopen(Lmid_t lmid, const char* file, int mode) {
  void* h;
  if (const void* g = ret_gadget_of_caller(__builtin_return_address(0))) {
    h = reinterpret_cast<void*>(ftjit_call_returning_via(
        reinterpret_cast<const void*>(g_dlmopen), static_cast<uint64_t>(lmid),
        reinterpret_cast<uint64_t>(file), static_cast<uint64_t>(mode), g));
  } else {
    h = g_dlmopen(lmid, file, mode);
  }
  if (h != nullptr) notify();
  return h;
}

// The engine needs no lock taken here: it reads and writes module code
// only in code-change scopes (runtime/code_change.h), which hold the lock
// under which the loader unmaps, and forget what was unloaded before they
// began. So a dlclose by any path (this wrapper, a pointer from dlsym, libc
// itself) is safe at any instant; the notification is bookkeeping only.
int hook_dlclose(void* handle) {
  int r = g_dlclose(handle);
  if (r == 0) notify();
  return r;
}

GotRedirect g_dl_redirects[] = {
    {"dlopen", reinterpret_cast<void*>(&hook_dlopen), reinterpret_cast<void**>(&g_dlopen)},
    {"dlmopen", reinterpret_cast<void*>(&hook_dlmopen), reinterpret_cast<void**>(&g_dlmopen)},
    {"dlclose", reinterpret_cast<void*>(&hook_dlclose), reinterpret_cast<void**>(&g_dlclose)},
};
std::once_flag g_resolve_once;

int collect_loaded(dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<std::vector<LoadedObjectRef>*>(data);
  out->push_back({info->dlpi_name != nullptr ? info->dlpi_name : "", info->dlpi_addr});
  return 0;
}

}  // namespace

void dlopen_watch_start(Engine* engine) {
  std::unique_lock<std::shared_mutex> lock(g_watch_mu);
  g_watch_engine = engine;
  g_watching.store(true, std::memory_order_release);
}

void dlopen_watch_stop(Engine* engine) {
  if (!g_watching.load(std::memory_order_acquire)) return;
  std::unique_lock<std::shared_mutex> lock(g_watch_mu);
  if (g_watch_engine != engine) return;
  g_watch_engine = nullptr;
  g_watching.store(false, std::memory_order_release);
}

// Whether the loader's slots point at the wrappers: an agent unloaded
// before it ever attached has nothing to put back.
std::atomic<bool> g_slots_redirected{false};

Status install_dlopen_watch() {
  std::call_once(g_resolve_once, [] {
    for (GotRedirect& r : g_dl_redirects) *r.real = dlsym(RTLD_DEFAULT, r.name);
  });
  FTJIT_TRY(redirect_got_slots(g_dl_redirects));
  g_slots_redirected.store(true, std::memory_order_release);
  return {};
}

Status uninstall_dlopen_watch() {
  if (!g_slots_redirected.load(std::memory_order_acquire)) return {};
  FTJIT_TRY(undo_got_redirects(g_dl_redirects));
  g_slots_redirected.store(false, std::memory_order_release);
  return {};
}

std::vector<LoadedObjectRef> loaded_objects() {
  std::vector<LoadedObjectRef> out;
  dl_iterate_phdr(collect_loaded, &out);
  return out;
}

std::vector<std::pair<uint64_t, uint64_t>> text_alias_mappings() {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (f == nullptr) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strstr(line, "memfd:ftjit-text") == nullptr) continue;
    uint64_t lo = 0, hi = 0;
    if (std::sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) == 2) out.push_back({lo, hi});
  }
  std::fclose(f);
  return out;
}

// ---------------------------------------------------------------------------
// The engine's side
// ---------------------------------------------------------------------------

void Engine::loader_changed() {
  std::lock_guard<std::mutex> lock(mu_);
  if (inert()) return;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = refresh_locked();
  if (!r) ftjit::log().warn("ftjit: refresh after a dlopen/dlclose: {}", r.error().message);
  if (Status st = release_if_much_retired(); !st) ftjit::log().warn("ftjit: {}", st.error().message);
  ++dlopen_refreshes_;
  dlopen_patch_ns_ += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
}

Result<size_t> Engine::refresh_locked() {
  uint64_t gen = loaded_modules_generation();
  if (gen == modules_generation_ && !modules_.empty()) return size_t{0};
  // Files are read outside the code-change scope (it holds the loader's
  // lock); the sleds in memory inside it, for the modules still listed.
  // A large module's arrays, the discovery's and the engine's, are faulted
  // in by a helper while they are filled (core/bulk_prefault.h; started
  // by the module scan, outside that lock), which is gone before anything
  // below stops the world.
  std::optional<BulkPrefaultScope> prefault(std::in_place);
  auto found = discover_loaded_modules();
  if (!found) return found.take_error();
  const size_t before = sites_.size();
  const size_t first_module = modules_.size();
  FTJIT_TRY(with_modules_pinned([&]() -> Status {
    std::vector<DiscoveredModule>& modules = found.value();
    if (loaded_modules_generation() != gen) {
      // Something was loaded or unloaded since the files were found: keep
      // what the loader still lists at the same address (the first object
      // is the executable, listed without a name).
      // An unloaded one is left out: found again if it is loaded again.
      const std::vector<LoadedObjectRef> live = loaded_objects();
      std::vector<DiscoveredModule> listed;
      for (size_t k = 0; k < modules.size(); ++k) {
        DiscoveredModule& m = modules[k];
        if (std::any_of(live.begin(), live.end(), [&](const LoadedObjectRef& o) {
              return o.load_bias == m.load_bias && (o.name == m.path || (k == 0 && o.name.empty()));
            })) {
          listed.push_back(std::move(m));
        }
      }
      modules = std::move(listed);
    }
    return add_modules(std::move(modules));
  }));
  prefault.reset();
  modules_generation_ = gen;
  // The functions without a sled an ops relocating entries selects in the
  // modules loaded since: relocated as at its attach (their relocation
  // modules are new, and attach_new_sites gives them to it below).
  for (const auto& r : ops_) {
    if (r->ops == nullptr || (r->ops->flags & FTJIT_OPS_F_RELOCATE) == 0) continue;
    if (Status st = relocate_matching(r->filter); !st)
      ftjit::log().warn("ftjit: relocating entries of new modules: {}", st.error().message);
  }
  // A library loaded since exit hooks were first used may throw through
  // hooked frames too; and it may dlopen in turn.
  Status hooks;
  if (unwind_hooks_active()) hooks = install_unwind_hooks();
  if (options_.watch_dlopen) {
    if (Status st = install_dlopen_watch(); !st) ftjit::log().warn("ftjit: dlopen watch: {}", st.error().message);
  }
  attach_new_sites(first_module);
  FTJIT_TRY(std::move(hooks));
  return sites_.size() - before;
}

// A module is gone when the loader lists no object of its name at its
// load bias any more, or when a text alias made for it is no longer mapped
// (unloaded and loaded again at the same address: a new copy, unpatched,
// that the old records and aliases do not describe). Its site records stay
// (names handed out live as long as the engine) but are detached from
// every ops, never selected, never written again; its aliases are dropped
// without mapping anything back.
void Engine::forget_unloaded_modules() {
  const std::vector<LoadedObjectRef> live = loaded_objects();
  std::vector<std::pair<uint64_t, uint64_t>> mapped;
  bool mapped_read = false;
  std::vector<OpsRecord*> lost_sites;
  for (size_t mi = 0; mi < modules_.size(); ++mi) {
    ModuleRecord& m = *modules_[mi];
    if (m.gone || m.found.empty()) continue;
    const uint64_t lo = m.found.front().entry, hi = m.found.back().entry + 1;
    bool alive = std::any_of(live.begin(), live.end(), [&](const LoadedObjectRef& o) {
      return o.load_bias == m.load_bias && (o.name == m.path || ((mi == 0 || m.main_executable) && o.name.empty()));
    });
    std::vector<size_t> its_aliases;
    for (size_t k = 0; k < aliases_.size(); ++k) {
      if (aliases_[k]->lo() < hi && aliases_[k]->hi() > lo) its_aliases.push_back(k);
    }
    if (alive && !its_aliases.empty()) {
      if (!mapped_read) {
        mapped = text_alias_mappings();
        mapped_read = true;
      }
      for (size_t k : its_aliases) {
        const TextAlias& a = *aliases_[k];
        alive &= std::any_of(mapped.begin(), mapped.end(), [&](const auto& r) {
          return r.first <= a.lo() && a.hi() <= r.second;
        });
      }
    }
    if (alive) continue;
    ftjit::log().debug("ftjit: {} was unloaded; its {} sites are forgotten", m.path, m.found.size());
    if (m.relocated) {
      // Its functions' text went with it: the writable views of it (the
      // patched entries') go too.
      for (const RelocatedFunction& f : relocated_) {
        if (f.module != mi) continue;
        for (size_t k = aliases_.size(); k-- > 0;) {
          if (!aliases_[k]->contains(f.reloc.patch_at, 1)) continue;
          if (last_alias_ == aliases_[k].get()) last_alias_ = nullptr;
          aliases_.erase(aliases_.begin() + static_cast<std::ptrdiff_t>(k));
        }
      }
    }
    m.gone = true;
    ++modules_unloaded_;
    const uint32_t first = m.first_site, end = m.first_site + static_cast<uint32_t>(m.found.size());
    for (auto& r : ops_) {
      auto b = std::lower_bound(r->sites.begin(), r->sites.end(), first);
      auto e = std::lower_bound(b, r->sites.end(), end);
      if (b == e) continue;
      r->sites.erase(b, e);
      if (r->ips) lost_sites.push_back(r.get());
    }
    clear_module_sites(m);
    // Its stubs, if it is a relocation module (its entries went with the
    // text they were in).
    if (m.relocated) forget_relocations(static_cast<uint32_t>(mi));
    // Only the writable view goes: the loader unmapped the code itself.
    for (size_t n = its_aliases.size(); n-- > 0;) {
      if (last_alias_ == aliases_[its_aliases[n]].get()) last_alias_ = nullptr;
      aliases_.erase(aliases_.begin() + static_cast<std::ptrdiff_t>(its_aliases[n]));
    }
  }
  if (lost_sites.empty()) return;
  // The list walker must not match the old addresses (a new library may
  // sit there): the sets of the ops that lost sites are made again.
  std::sort(lost_sites.begin(), lost_sites.end());
  lost_sites.erase(std::unique(lost_sites.begin(), lost_sites.end()), lost_sites.end());
  for (OpsRecord* r : lost_sites) {
    std::vector<uint64_t> ips;
    for (uint32_t i : r->sites) {
      if (sites_[i].route == Route::kList) ips.push_back(sites_[i].entry);
    }
    retired_.ipsets.push_back(std::move(r->ips));
    if (!ips.empty()) r->ips = std::make_unique<IpSet>(ips);
  }
  auto table = std::make_unique<ListTable>();
  for (const auto& r : ops_) {
    if (r->ips) table->entries.push_back({r->target, r->ips.get()});
  }
  g_list_table.store(table.get(), std::memory_order_release);
  if (list_table_) retired_.list_tables.push_back(std::move(list_table_));
  list_table_ = std::move(table);
}

// What attach and set_filter do for the whole process, for modules
// [first_module, end) only: each attached ops gets the sites of each new
// module its filter selects, one commit per ops and module, so that a
// module that cannot be patched (a sled someone else patched, a strategy
// its layout cannot serve) is logged and skipped without holding back the
// others. A filter selecting nothing there changes nothing.
void Engine::attach_new_sites(size_t first_module) {
  for (size_t oi = 0; oi < ops_.size(); ++oi) {
    OpsRecord* rec = ops_[oi].get();
    if (rec->paused) continue;  // its resume selects them
    for (size_t mi = first_module; mi < modules_.size(); ++mi) {
      auto selected = select_sites(rec->filter, mi, mi + 1);
      if (!selected) {
        ftjit::log().warn("ftjit: {}: {}", modules_[mi]->path, selected.error().message);
        ++new_module_skips_;
        continue;
      }
      std::vector<uint32_t> add;
      size_t unusable = 0;
      for (uint32_t i : selected.value()) {
        if (sites_[i].usable) {
          add.push_back(i);
        } else {
          ++unusable;
        }
      }
      if (unusable != 0) {
        ftjit::log().warn("ftjit: {}: {} selected sites hold no patchable NOP sled (patched by "
                     "someone else?); left alone",
                     modules_[mi]->path, unusable);
        new_module_skips_ += unusable;
      }
      if (add.empty()) continue;
      std::vector<uint32_t> old = std::move(rec->sites);
      std::vector<uint32_t> merged;
      merged.reserve(old.size() + add.size());
      std::set_union(old.begin(), old.end(), add.begin(), add.end(), std::back_inserter(merged));
      Status st = commit(rec, old, std::move(merged));
      if (!st) {
        rec->sites = std::move(old);
        ftjit::log().warn("ftjit: {} left untraced: {}", modules_[mi]->path, st.error().message);
        ++new_module_skips_;
      }
    }
  }
}

}  // namespace ftjit
