// SPDX-License-Identifier: MIT
// The engine: discovery bookkeeping, attach/detach/set_filter, commits.
#include "runtime/engine.h"
#include "runtime/cycle_clock.h"
#include "runtime/inline_blocks.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstddef>
#include <cstring>

#include <spdlog/spdlog.h>

#include "runtime/log.h"

#include "core/glob.h"
#include "runtime/code_change.h"
#include "runtime/dlopen_watch.h"
#include "runtime/grace.h"
#include "runtime/process_backend.h"
#include "runtime/shadow_stack.h"
#include "runtime/unwind_hooks.h"
#include "runtime/module_scan.h"
#include "runtime/thread_control.h"

namespace ftjit {
namespace {

std::atomic<bool> g_engine_exists{false};
std::atomic<Engine*> g_engine{nullptr};


}  // namespace

// ---------------------------------------------------------------------------
// SiteOps
// ---------------------------------------------------------------------------

void SiteOps::add(OpsRecord* r) {
  if (v_ == 0) {
    v_ = reinterpret_cast<uintptr_t>(r);
    return;
  }
  if (!many()) {
    auto* v = new std::vector<OpsRecord*>{reinterpret_cast<OpsRecord*>(v_)};
    v_ = reinterpret_cast<uintptr_t>(v) | kMany;
  }
  many()->push_back(r);
}

void SiteOps::remove(OpsRecord* r) {
  std::vector<OpsRecord*>* v = many();
  if (!v) {
    if (v_ == reinterpret_cast<uintptr_t>(r)) v_ = 0;
    return;
  }
  auto it = std::find(v->begin(), v->end(), r);
  if (it != v->end()) v->erase(it);
  if (v->size() <= 1) {
    v_ = v->empty() ? 0 : reinterpret_cast<uintptr_t>((*v)[0]);
    delete v;
  }
}

// ---------------------------------------------------------------------------
// Creation and discovery
// ---------------------------------------------------------------------------

Engine::Engine(const Backend& backend, const ftjit_engine_options& options)
    : backend_(backend),
      nop_(backend.encode_nop()),
      init_(backend.encode_init()),
      options_(options),
      patcher_(backend, sync_),
      saves_(static_cast<ftjit_saves>(options.saves)),
      owner_pid_(getpid()) {}

void engine_atfork_child() {
  if (Engine* e = g_engine.load()) e->on_fork_child();
}

void Engine::on_fork_child() {
  // No lock: another parent thread may have held it at fork() and does not
  // exist here. The lists are only read.
  for (const auto& a : aliases_) privatize_after_fork(a->lo(), a->hi() - a->lo(), a->inode(), a->exec_prot());
  for (const auto& a : arenas_) {
    privatize_after_fork(a->lo(), a->hi() - a->lo(), a->inode(), PROT_READ | PROT_EXEC);
  }
  for (const auto& a : stub_arenas_) {
    privatize_after_fork(a->lo(), a->hi() - a->lo(), a->inode(), PROT_READ | PROT_EXEC);
  }
  for (const auto& a : retired_.arenas) {
    privatize_after_fork(a->lo(), a->hi() - a->lo(), a->inode(), PROT_READ | PROT_EXEC);
  }
}

bool Engine::inert() const { return getpid() != owner_pid_; }

namespace {

// What the engine relies on of a backend's site model (backends/backend.h),
// checked once rather than assumed at every site.
Status check_site_model(const Backend& backend) {
  const IsaTraits& t = backend.traits();
  const LiveProtocol& p = backend.live_protocol();
  if (t.site_bytes == 0 || t.site_bytes > sizeof(SiteRecord::original) || t.call_bytes > 8 ||
      t.live_offset + t.call_bytes > t.site_bytes) {
    return make_error(FTJIT_E_INTERNAL, "backend: the live instruction lies outside the site");
  }
  // The trap protocol rewrites de-inits live, which needs the site to be
  // its live instruction; an aligned store is one whole instruction.
  if (p.change == LiveChange::kTrap ? (t.live_offset != 0 || t.site_bytes != t.call_bytes)
                                    : (t.call_bytes != 4 && t.call_bytes != 8)) {
    return make_error(FTJIT_E_INTERNAL, "backend: its live protocol does not fit its site layout");
  }
  return {};
}

// Where a site's ops slot is, 0 if it has none the traits can use. Named
// sites: where discovery found it, before the symbol (after a landing pad
// the entry is 4 bytes past the symbol); unnamed: the prefix before the
// entry.
uint64_t usable_slot(const DiscoveredSite& d, const IsaTraits& traits) {
  if (traits.slot_bytes == 0) return 0;
  uint64_t at = d.slot;
  if (at == 0 && d.symbol() == 0 && d.prefix_bytes >= traits.slot_bytes) at = d.entry - traits.slot_bytes;
  // The call-ops trampolines find the slot from the ip rounded down to the
  // slot's alignment (a landing pad may stand between the two): nowhere
  // else.
  if (at == 0 || at % traits.slot_align != 0) return 0;
  const uint64_t symbol = at + traits.slot_bytes;
  return d.entry >= symbol && d.entry - symbol < traits.slot_align ? at : 0;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const ftjit_engine_options& options,
                                               const Backend& backend_ref) {
  const Backend* backend = &backend_ref;
  if (options.default_strategy < FTJIT_STRATEGY_AUTO ||
      options.default_strategy > FTJIT_STRATEGY_GENERATED) {
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      "default strategy must be auto, list, call-ops or generated");
  }
  if (options.saves < FTJIT_SAVES_AUTO || options.saves > FTJIT_SAVES_ALL) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "saves must be auto, abi or all");
  }
  if (auto st = check_site_model(*backend); !st) return st.take_error();
  bool expected = false;
  if (!g_engine_exists.compare_exchange_strong(expected, true)) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "an ftjit engine exists already in this process");
  }
  std::unique_ptr<Engine> engine(new Engine(*backend, options));
  auto fail = [&](Error e) -> Result<std::unique_ptr<Engine>> {
    engine.reset();
    return e;
  };
  if (auto st = install_thread_control(); !st) return fail(st.take_error());
  if (backend->live_protocol().change == LiveChange::kTrap) {
    if (auto st = Patcher::install_trap_handler(); !st) return fail(st.take_error());
  }
  engine->tls_offset_ = trampoline_counts_tls_offset();
  // Every trampoline needs its address (to report real callers), so it is
  // made now rather than with the first exit hook. An ISA without exit
  // hooks yet has none (0): its trampolines compare with nothing, and
  // attach refuses an exit callback.
  set_process_backend(backend);
  if (auto st = prepare_exit_trampoline(engine->tls_offset_);
      !st && st.error().code != FTJIT_E_UNSUPPORTED) {
    return fail(st.take_error());
  }
  install_code_change_fork_handlers(engine_atfork_child);
  g_engine.store(engine.get());
  if (options.watch_dlopen) dlopen_watch_start(engine.get());
  auto added = engine->refresh_modules();
  if (!added) return fail(added.take_error());
  ftjit::log().debug("ftjit: engine created, {} sites in {} modules, sync via {}", engine->sites_.size(),
                engine->modules_.size(), engine->sync_.uses_membarrier() ? "membarrier" : "signals");
  return engine;
}

Result<size_t> Engine::refresh_modules() {
  std::lock_guard<std::mutex> lock(mu_);
  return refresh_locked();
}

Status Engine::add_modules(std::vector<DiscoveredModule> modules) {
  const IsaTraits& traits = backend_.traits();
  for (DiscoveredModule& m : modules) {
    if (!m.has_patchable_section || m.sites.empty() || m.isa != traits.isa) {
      std::string base(path_basename(m.path));
      if (std::find(modules_without_sites_.begin(), modules_without_sites_.end(), base) ==
          modules_without_sites_.end()) {
        modules_without_sites_.push_back(std::move(base));
      }
      continue;
    }
    bool known = false;
    for (const auto& have : modules_) {
      known |= !have->gone && !have->relocated && have->path == m.path && have->load_bias == m.load_bias;
    }
    if (known) continue;
    add_module_record(std::move(m), false);
  }
  return {};
}

uint32_t Engine::add_module_record(DiscoveredModule m, bool relocated) {
  const IsaTraits& traits = backend_.traits();
  auto rec = std::make_unique<ModuleRecord>();
  rec->path = m.path;
  rec->base = std::string(path_basename(m.path));
  rec->load_bias = m.load_bias;
  rec->evidence_abi = m.saves_abi_is_enough;
  rec->evidence_why = std::move(m.saves_why);
  rec->saves_all = module_saves_all(*rec);
  rec->found = std::move(m.sites);  // sorted by entry
  rec->site_names = std::move(m.names);
  rec->first_site = static_cast<uint32_t>(sites_.size());
  uint32_t module_index = static_cast<uint32_t>(modules_.size());
  sites_.reserve(sites_.size() + rec->found.size());
  origins_.reserve(sites_.size() + rec->found.size());
  for (const DiscoveredSite& d : rec->found) {
    SiteRecord s;
    SiteOrigin o;
    s.entry = d.entry;
    s.module = module_index;
    const uint64_t slot = usable_slot(d, traits);
    s.has_slot = slot != 0;
    const auto* code = reinterpret_cast<const uint8_t*>(d.entry);
    std::memcpy(s.original, code, std::min<size_t>(traits.site_bytes, sizeof s.original));
    if (s.has_slot) {
      std::memcpy(&o.original_slot, reinterpret_cast<const void*>(slot), traits.slot_bytes);
    }
    s.original_kind = backend_.classify_entry(d.entry, {code, traits.site_bytes}).kind;
    s.usable = s.original_kind == SledKind::kNop || s.original_kind == SledKind::kNopSled;
    sites_.push_back(std::move(s));
    origins_.push_back(o);
  }
  rec->relocated = relocated;
  modules_.push_back(std::move(rec));
  return module_index;
}

uint64_t Engine::slot_at(uint32_t index) const {
  return sites_[index].has_slot ? usable_slot(found_of(index), backend_.traits()) : 0;
}

long Engine::find_site(uint64_t entry) const {
  for (const auto& m : modules_) {
    if (m->gone || m->found.empty() || entry < m->found.front().entry || entry > m->found.back().entry) continue;
    auto it = std::lower_bound(m->found.begin(), m->found.end(), entry,
                               [](const DiscoveredSite& d, uint64_t e) { return d.entry < e; });
    if (it != m->found.end() && it->entry == entry) {
      return static_cast<long>(m->first_site + (it - m->found.begin()));
    }
  }
  return -1;
}

Engine::~Engine() {
  g_engine.store(nullptr);
  dlopen_watch_stop(this);  // waits for a notification under way
  if (inert()) {
    // A forked child's copy: its code is private now and nothing here may
    // touch the parent's. Free memory only (dropping the child's writable
    // views changes nothing for the parent); keep trampolines mapped.
    for (auto& a : arenas_) a->keep_code_mapped();
    for (auto& a : stub_arenas_) a->keep_code_mapped();
    for (auto& a : retired_.arenas) a->keep_code_mapped();
    // The child's patched sites still reach wrappers, multiplexers and list
    // tables after this: keep them, reachable (for leak checkers) from a
    // global that outlives the engine.
    static auto* kept = new std::vector<std::shared_ptr<void>>();
    for (auto& r : ops_) kept->emplace_back(std::move(r));
    for (auto& r : retired_.records) kept->emplace_back(std::move(r));
    for (auto& [site, mux] : muxes_) kept->emplace_back(std::move(mux));
    for (auto& m : retired_.muxes) kept->emplace_back(std::move(m));
    if (list_table_) kept->emplace_back(std::move(list_table_));
    for (auto& t : retired_.list_tables) kept->emplace_back(std::move(t));
    for (auto& s : retired_.ipsets) kept->emplace_back(std::move(s));
    g_engine_exists.store(false);
    return;
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    // What was unloaded is forgotten by each code-change scope below
    // (commit, restore, mapping back): never written nor mapped back.
    while (!ops_.empty()) {
      OpsRecord* rec = ops_.back().get();
      std::vector<uint32_t> old = std::move(rec->sites);
      Status st = commit(rec, old, {});
      if (!st) ftjit::log().error("ftjit: detach at teardown: {}", st.error().message);
      rec->silence_exits();
      rec->ops->internal = nullptr;
      retired_.records.push_back(std::move(ops_.back()));
      ops_.pop_back();
    }
    Status st = unrelocate_idle();
    if (!st) ftjit::log().error("ftjit: restoring relocated entries at teardown: {}", st.error().message);
    st = restore_original_sleds();
    if (!st) ftjit::log().error("ftjit: restoring sleds at teardown: {}", st.error().message);
    st = release_after_grace();
    if (!st) {
      ftjit::log().error("ftjit: {}; trampoline memory is kept", st.error().message);
      for (auto& a : arenas_) a.release();
      for (auto& a : stub_arenas_) a.release();
      for (auto& a : retired_.arenas) a.release();
    } else if (inline_used_) {
      // No site reaches an inline trampoline: the next engine's slots
      // start from zero, in the same blocks.
      reset_inline_blocks();
    }
    st = with_modules_pinned([&]() -> Status {
      for (auto& alias : aliases_) alias->restore_file_mapping();
      return {};
    });
    if (!st) ftjit::log().error("ftjit: mapping module text back at teardown: {}", st.error().message);
  }
  g_list_table.store(nullptr);
  g_engine_exists.store(false);
}

// ---------------------------------------------------------------------------
// Selection
// ---------------------------------------------------------------------------

namespace {

// ModuleRecord::names, made once.
void pack_names(const ModuleRecord& m) {
  if (m.names.size() == m.found.size()) return;
  m.names.clear();
  m.name_pool.clear();
  m.names.reserve(m.found.size());
  // Sized once (the lengths are in found, the names' bytes are not read):
  // a pool grown by doubling touches twice its size in fresh pages.
  size_t bytes = 0;
  for (const DiscoveredSite& d : m.found) {
    bytes += std::min<size_t>(d.name.size(), UINT16_MAX);
    if (!d.demangled.empty() && d.demangled != d.name) bytes += std::min<size_t>(d.demangled.size(), UINT16_MAX);
  }
  m.name_pool.reserve(bytes);
  for (const DiscoveredSite& d : m.found) {
    ModuleRecord::NameRef r{};
    auto put = [&](std::string_view text, uint32_t* at, uint16_t* len) {
      *at = static_cast<uint32_t>(m.name_pool.size());
      *len = static_cast<uint16_t>(std::min<size_t>(text.size(), UINT16_MAX));
      m.name_pool.append(text.substr(0, *len));
    };
    put(d.name, &r.name_at, &r.name_len);
    if (!d.demangled.empty() && d.demangled != d.name) put(d.demangled, &r.demangled_at, &r.demangled_len);
    m.names.push_back(r);
  }
}

}  // namespace

Result<std::vector<uint32_t>> Engine::select_sites(const Filter& filter, size_t first_module,
                                                   size_t end_module) const {
  std::vector<uint32_t> out;
  end_module = std::min(end_module, modules_.size());
  for (size_t mi = first_module; mi < end_module; ++mi) {
    const auto& m = modules_[mi];
    if (m->gone) continue;
    // Patterns scoped to another module cannot match here: drop them once
    // per module instead of once per site.
    std::vector<std::string> inc, exc;
    bool any_include = filter.includes().empty();
    for (const NamePattern& p : filter.includes()) {
      if (p.module.empty() || glob_match(p.module, m->base)) {
        inc.push_back(p.name);
        any_include = true;
      }
    }
    if (!any_include) continue;
    for (const NamePattern& p : filter.excludes()) {
      if (p.module.empty() || glob_match(p.module, m->base)) exc.push_back(p.name);
    }
    auto local = Filter::compile(inc, exc);
    if (!local) return local.take_error();
    pack_names(*m);
    const char* pool = m->name_pool.data();
    for (size_t k = 0; k < m->names.size(); ++k) {
      const ModuleRecord::NameRef& r = m->names[k];
      std::string_view name(pool + r.name_at, r.name_len);
      std::string_view demangled =
          r.demangled_len ? std::string_view(pool + r.demangled_at, r.demangled_len) : name;
      if (local->matches(m->base, name, demangled)) out.push_back(m->first_site + static_cast<uint32_t>(k));
    }
  }
  if (!out.empty() || first_module != 0 || end_module != modules_.size()) return out;
  if (sites_.empty()) {
    return make_error(FTJIT_E_NO_SITES,
                      std::string("no loaded module has patchable entries (__patchable_function_entries); "
                                  "build with ") + backend_.traits().site_flags +
                          ", or trace functions without one by relocating their entries (--relocate, "
                          "FTJIT_OPS_F_RELOCATE)");
  }
  for (const NamePattern& p : filter.includes()) {
    if (p.module.empty()) continue;
    bool with_sites = false;
    for (const auto& m : modules_) with_sites |= glob_match(p.module, m->base);
    if (with_sites) continue;
    for (const std::string& base : modules_without_sites_) {
      if (glob_match(p.module, base)) {
        return make_error(FTJIT_E_NO_SITES,
                          "module " + base + " has no patchable entries (no "
                          "__patchable_function_entries section); build it with " +
                          backend_.traits().site_flags + ", or trace its functions by relocating their entries "
                          "(--relocate, FTJIT_OPS_F_RELOCATE)");
      }
    }
    return make_error(FTJIT_E_NO_MATCH, "no loaded module matches '" + p.module + "'");
  }
  for (const NamePattern& p : filter.includes()) {
    if (!p.module.empty() || !glob_is_literal(p.name)) continue;
    if (dlsym(RTLD_DEFAULT, p.name.c_str()) != nullptr) {
      return make_error(FTJIT_E_NOT_PATCHABLE,
                        "function '" + p.name +
                            "' exists but has no patchable entry (built without "
                            "-fpatchable-function-entry, or opted out); --relocate "
                            "(FTJIT_OPS_F_RELOCATE) traces it by relocating its entry");
    }
  }
  return make_error(FTJIT_E_NO_MATCH, "filter (" + filter.describe() + ") matches none of the " +
                                          std::to_string(sites_.size()) + " patchable sites");
}

OpsRecord* Engine::find(const ftjit_ops* ops) const {
  for (const auto& r : ops_) {
    if (r->ops == ops) return r.get();
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// Public operations
// ---------------------------------------------------------------------------

// What every control call checks first: that this process owns the engine,
// that the caller is not a callback (a grace period would wait for itself),
// and (when selecting sites) that modules loaded since are known.
Status Engine::may_change(const char* what, bool needs_modules) {
  if (inert()) {
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      "this engine belongs to the parent process (fork); create a new one");
  }
  if (inside_trampoline()) {
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      std::string(what) + " called from inside a tracer callback");
  }
  // refresh_modules compares the generation under the engine lock (the
  // dlopen watch changes it from other threads).
  if (needs_modules) {
    auto r = refresh_modules();
    if (!r) return r.take_error();
  }
  return {};
}

Status Engine::attach(ftjit_ops* ops, const Filter& filter) {
  if (ops == nullptr || ops->struct_size < offsetof(ftjit_ops, exit_func)) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "ops is null or not initialised (ftjit_ops_init)");
  }
  if (ops->strategy < FTJIT_STRATEGY_AUTO || ops->strategy > FTJIT_STRATEGY_DIRECT) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "ops has an unknown strategy");
  }
  if (ops->strategy == FTJIT_STRATEGY_DIRECT ? ops->direct_trampoline == nullptr
                                             : ops->func == nullptr) {
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      ops->strategy == FTJIT_STRATEGY_DIRECT
                          ? "a direct ops needs direct_trampoline"
                          : "ops has no func");
  }
  if (FTJIT_OPS_HAS(ops, exit_func) && ops->exit_func != nullptr &&
      exit_trampoline_address() == 0) {
    return make_error(FTJIT_E_UNSUPPORTED, exit_hooks_unavailable_reason());
  }
  FTJIT_TRY(may_change("ftjit_attach", true));
  std::lock_guard<std::mutex> lock(mu_);
  if (find(ops) != nullptr || ops->internal != nullptr) {
    return make_error(FTJIT_E_ALREADY_ATTACHED, "this ops is attached already");
  }
  const bool relocate = (ops->flags & FTJIT_OPS_F_RELOCATE) != 0;
  if (relocate) FTJIT_TRY(relocate_matching(filter));
  auto selected = select_sites(filter);
  if (!selected) {
    if (relocate) {
      Status st = unrelocate_idle();
      if (!st) ftjit::log().error("ftjit: {}", st.error().message);
    }
    return selected.take_error();
  }
  auto rec = std::make_unique<OpsRecord>();
  rec->ops = ops;
  rec->target = ops;
  if (needs_hooks(ops)) {
    if (ops->strategy == FTJIT_STRATEGY_DIRECT) {
      return make_error(FTJIT_E_UNSUPPORTED,
                        "a direct ops cannot have an exit callback or a thread filter");
    }
    auto hooked = make_hooked_ops(ops);
    if (!hooked) return hooked.take_error();
    if (hooked.value()->exit != nullptr) {
      FTJIT_TRY(install_unwind_hooks());
    }
    rec->hooked = std::move(hooked.value());
    rec->target = &rec->hooked->ops;
    // Where every caller keeps nothing but the return registers across a
    // call (saves abi), the landing keeps only those (xmm0-1) around an FP
    // exit callback; under auto an ops may span modules of both kinds.
    if (rec->hooked->exit != nullptr && saves_ == FTJIT_SAVES_ABI) rec->hooked->exit->save_fp = false;
  }
  rec->strategy = ops->strategy != FTJIT_STRATEGY_AUTO ? ops->strategy : options_.default_strategy;
  rec->filter = filter;
  if (FTJIT_OPS_HAS(ops, inline_entry) && ops->inline_entry != FTJIT_INLINE_NONE) {
    FTJIT_TRY(prepare_inline(rec.get()));
  }
  // Another attach of this ops (or of a new one at its address) starts afresh.
  final_inline_.erase(ops);
  final_histograms_.erase(ops);
  OpsRecord* r = rec.get();
  ops_.push_back(std::move(rec));
  Status st = commit(r, {}, std::move(selected.value()));
  if (!st) {
    ops_.pop_back();
    if (relocate) {
      Status back = unrelocate_idle();
      if (!back) ftjit::log().error("ftjit: {}", back.error().message);
    }
    return st;
  }
  ops->internal = r;
  return release_if_much_retired();
}

Status Engine::prepare_inline(OpsRecord* rec) {
  const ftjit_ops* ops = rec->ops;
  const char* what = nullptr;
  switch (ops->inline_entry) {
    case FTJIT_INLINE_COUNT:
      if (needs_hooks(ops)) {
        return make_error(FTJIT_E_INVALID_ARGUMENT,
                          "inline count cannot be combined with an exit callback or a thread filter "
                          "(its trampoline hooks no return and asks no thread)");
      }
      if (FTJIT_OPS_HAS(ops, inline_sample) && ops->inline_sample > 1) {
        return make_error(FTJIT_E_INVALID_ARGUMENT, "inline count counts every call: inline_sample is latency's");
      }
      rec->inline_action = InlineAction::kCount;
      what = "count";
      break;
    case FTJIT_INLINE_LATENCY:
      // The exit callback is where the fallback times its calls.
      if (ops->exit_func == nullptr || ops->threads != nullptr) {
        return make_error(FTJIT_E_INVALID_ARGUMENT,
                          "inline latency needs an exit callback (the fallback's) and no thread filter");
      }
      rec->inline_action = InlineAction::kLatency;
      what = "latency";
      if (FTJIT_OPS_HAS(ops, inline_sample) && ops->inline_sample > 1) {
        if (ops->inline_sample > kMaxInlineSample) {
          return make_error(FTJIT_E_INVALID_ARGUMENT, "inline latency: inline_sample " +
                                                          std::to_string(ops->inline_sample) + " is above " +
                                                          std::to_string(kMaxInlineSample));
        }
        rec->inline_sample = ops->inline_sample;
      }
      break;
    default:
      return make_error(FTJIT_E_INVALID_ARGUMENT,
                        "ops asks for inline work " + std::to_string(ops->inline_entry) +
                            ", which this ftjit does not know");
  }
  // Compiled, or refused here: never a silent fall back to callbacks.
  auto tmpl = inline_template(rec->inline_action, rec->inline_sample);
  if (!tmpl) {
    return make_error(tmpl.error().code, std::string("inline ") + what + " on " +
                                             isa_name(backend_.traits().isa) + ": " + tmpl.error().message);
  }
  if (rec->inline_action == InlineAction::kLatency) {
    // A counter whose deltas are not durations here (a TSC the kernel
    // does not trust): the callbacks time the calls with the host's clock,
    // and nothing waits for a calibration.
    if (cycle_deltas_trustworthy()) calibrate_cycle_clock();
    if (!cycle_deltas_trusted() || *cycle_ns_mult() == 0) {
      ftjit::log().info("ftjit: inline latency: the cycle counter does not measure durations on "
                        "this machine; its calls are timed by the callbacks");
      return {};
    }
  }
  rec->inline_ok = true;
  return {};
}

Status Engine::set_filter(ftjit_ops* ops, const Filter& filter) {
  FTJIT_TRY(may_change("ftjit_set_filter", true));
  std::lock_guard<std::mutex> lock(mu_);
  OpsRecord* rec = find(ops);
  if (rec == nullptr) return make_error(FTJIT_E_NOT_ATTACHED, "set_filter: this ops is not attached");
  // Relocated entries follow the filter: new ones for the functions it
  // now selects, written back for those it no longer does.
  const bool relocate = (ops->flags & FTJIT_OPS_F_RELOCATE) != 0;
  if (relocate) FTJIT_TRY(relocate_matching(filter));
  auto drop_idle = [&] {
    if (!relocate) return;
    Status st = unrelocate_idle();
    if (!st) ftjit::log().error("ftjit: {}", st.error().message);
  };
  auto selected = select_sites(filter);
  if (!selected) {
    drop_idle();
    return selected.take_error();
  }
  if (rec->paused) {
    // Kept for the resume, which patches what it selects then.
    rec->filter = filter;
    drop_idle();
    return {};
  }
  std::vector<uint32_t> old = std::move(rec->sites);
  Status st = commit(rec, old, std::move(selected.value()));
  if (!st) {
    rec->sites = std::move(old);
    drop_idle();
    return st;
  }
  rec->filter = filter;
  drop_idle();
  return release_if_much_retired();
}

Status Engine::set_paused(ftjit_ops* ops, bool paused) {
  FTJIT_TRY(may_change("ftjit_set_paused", true));
  std::lock_guard<std::mutex> lock(mu_);
  OpsRecord* rec = find(ops);
  if (rec == nullptr) return make_error(FTJIT_E_NOT_ATTACHED, "set_paused: this ops is not attached");
  if (rec->paused == paused) return {};
  std::vector<uint32_t> old = std::move(rec->sites);
  std::vector<uint32_t> want;
  if (!paused) {
    auto selected = select_sites(rec->filter);
    if (!selected) {
      rec->sites = std::move(old);
      return selected.take_error();
    }
    want = std::move(selected.value());
  }
  Status st = commit(rec, old, std::move(want));
  if (!st) {
    rec->sites = std::move(old);
    return st;
  }
  rec->paused = paused;
  return release_if_much_retired();
}

Status Engine::detach(ftjit_ops* ops) {
  FTJIT_TRY(may_change("ftjit_detach", false));
  std::lock_guard<std::mutex> lock(mu_);
  OpsRecord* rec = find(ops);
  if (rec == nullptr) return make_error(FTJIT_E_NOT_ATTACHED, "detach: this ops is not attached");
  // Sites of modules unloaded since are dropped by commit's code-change scope.
  std::vector<uint32_t> old = std::move(rec->sites);
  Status st = commit(rec, old, {});
  if (!st) {
    rec->sites = std::move(old);
    return st;
  }
  auto it = std::find_if(ops_.begin(), ops_.end(), [&](const auto& p) { return p.get() == rec; });
  for (auto& [arena, addr] : rec->generated) retired_.trampolines.push_back({arena, addr});
  rec->generated.clear();
  for (auto& [arena, addr] : rec->inline_fallback) retired_.trampolines.push_back({arena, addr});
  rec->inline_fallback.clear();
  rec->silence_exits();
  const std::vector<std::pair<uint64_t, uint32_t>> slots = std::move(rec->inline_slots);
  const InlineAction action = rec->inline_action;
  retired_.records.push_back(std::move(*it));
  ops_.erase(it);
  ops->internal = nullptr;
  Status st_relocated = unrelocate_idle();
  if (!st_relocated) ftjit::log().error("ftjit: {}", st_relocated.error().message);
  Status st_sleds = ops_.empty() ? restore_original_sleds() : Status{};
  Status grace = st_sleds ? release_after_grace() : Status{};
  // Read once no thread can be in its inline trampolines any more (or as
  // they are, if the grace period failed): its final counts.
  if (!slots.empty()) {
    final_inline_[ops] = inline_totals(slots, action);
    if (action == InlineAction::kLatency) final_histograms_[ops] = inline_histograms(slots);
  }
  FTJIT_TRY(st_sleds);
  return grace;
}

bool Engine::module_saves_all(const ModuleRecord& m) const {
  switch (saves_) {
    case FTJIT_SAVES_ABI: return false;
    case FTJIT_SAVES_ALL: return true;
    default: return !m.evidence_abi;
  }
}

Status Engine::set_saves(ftjit_saves saves, std::vector<std::string>* warnings) {
  if (saves < FTJIT_SAVES_AUTO || saves > FTJIT_SAVES_ALL) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "unknown saves policy " + std::to_string(saves));
  }
  std::lock_guard<std::mutex> lock(mu_);
  saves_ = saves;
  for (auto& m : modules_) {
    if (m->gone || m->found.empty()) continue;
    const bool all = module_saves_all(*m);
    // Its trampolines from now on come from an arena of the new kind.
    if (all != m->saves_all) m->arena = nullptr;
    m->saves_all = all;
    if (saves == FTJIT_SAVES_ABI && !m->evidence_abi && warnings != nullptr) {
      warnings->push_back("saves abi for " + m->base + ", whose evidence says every register: " +
                          m->evidence_why);
    }
  }
  return {};
}

long Engine::inline_read(const ftjit_ops* ops, ftjit_inline_visit_fn visit, void* arg) const {
  std::vector<std::pair<uint64_t, uint64_t>> totals;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const OpsRecord* rec = find(ops)) {
      totals = inline_totals(rec->inline_slots, rec->inline_action);
    } else if (auto f = final_inline_.find(ops); f != final_inline_.end()) {
      totals = f->second;
    } else {
      return -1;
    }
  }
  // Outside the lock: the visitor may call back into the engine.
  for (const auto& [ip, n] : totals) visit(ip, n, arg);
  return static_cast<long>(totals.size());
}

long Engine::inline_read_histograms(const ftjit_ops* ops, ftjit_inline_histogram_fn visit,
                                    void* arg) const {
  std::vector<ftjit_inline_histogram> histograms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const OpsRecord* rec = find(ops)) {
      if (rec->inline_action == InlineAction::kLatency) histograms = inline_histograms(rec->inline_slots);
    } else if (auto f = final_histograms_.find(ops); f != final_histograms_.end()) {
      histograms = f->second;
    } else if (final_inline_.find(ops) == final_inline_.end()) {
      return -1;
    }
  }
  for (const ftjit_inline_histogram& h : histograms) visit(&h, arg);
  return static_cast<long>(histograms.size());
}

long Engine::site_count(const ftjit_ops* ops) const {
  std::lock_guard<std::mutex> lock(mu_);
  const OpsRecord* rec = find(ops);
  return rec ? static_cast<long>(rec->sites.size()) : -1;
}

ftjit_stats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ftjit_stats s{};
  s.sites = sites_.size();
  s.sites_enabled = sites_enabled_;
  s.batches = batches_;
  s.syncs = sync_.count();
  s.last_batch_syncs = patcher_.last_batch_syncs();
  s.last_batch_sites = last_batch_sites_;
  s.trampolines = trampolines_;
  s.trampoline_bytes = trampoline_bytes_;
  s.traps_emulated = Patcher::traps_emulated();
  s.grace_periods = grace_periods_;
  s.sync_fallbacks = sync_.fallbacks();
  s.recursion_drops = g_recursion_drops.load(std::memory_order_relaxed);
  ShadowCounters sc = shadow_counters();
  s.exit_hooks = sc.hooks;
  s.exit_hook_drops = sc.hook_drops;
  s.frames_unwound = sc.unwound;
  s.dlopen_refreshes = dlopen_refreshes_;
  s.dlopen_patch_ns = dlopen_patch_ns_;
  s.modules_unloaded = modules_unloaded_;
  s.new_module_skips = new_module_skips_;
  return s;
}

const char* Engine::site_name(uint64_t entry) const {
  std::lock_guard<std::mutex> lock(mu_);
  long i = find_site(entry);
  // Names view NUL-terminated text (a string table's, or a std::string).
  if (i >= 0) return demangled_of(static_cast<uint32_t>(i)).data();
  // A relocated entry's stub outlives its module record (a report is made
  // after the detach that wrote the entry back): the newest stub that
  // stood at `entry` names it.
  for (size_t mi = modules_.size(); mi-- > 0;) {
    const ModuleRecord& m = *modules_[mi];
    if (!m.relocated || !m.gone) continue;
    for (size_t k = 0; k < m.found.size(); ++k) {
      if (m.found[k].entry == entry) return demangled_of(m.first_site + static_cast<uint32_t>(k)).data();
    }
  }
  return nullptr;
}

std::vector<SiteInfo> Engine::sites() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SiteInfo> out;
  out.reserve(sites_.size());
  for (uint32_t i = 0; i < sites_.size(); ++i) {
    const SiteRecord& s = sites_[i];
    if (modules_[s.module]->gone) continue;
    out.push_back({s.entry, name_of(i), demangled_of(i), &modules_[s.module]->path, s.route,
                   s.applied.trampoline(), s.ops.size()});
  }
  return out;
}

}  // namespace ftjit
