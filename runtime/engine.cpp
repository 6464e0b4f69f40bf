// SPDX-License-Identifier: MIT
// The engine: discovery bookkeeping, attach/detach/set_filter, commits.
#include "runtime/engine.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstring>
#include <set>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "core/glob.h"
#include "runtime/grace.h"
#include "runtime/module_scan.h"
#include "runtime/thread_control.h"

namespace ftjit {
namespace {

std::atomic<bool> g_engine_exists{false};

constexpr size_t kArenaBytes = 1 << 20;
constexpr int kListTrampoline = 0;
constexpr int kCallOpsTrampoline = 1;
constexpr int kCallOpsNoFpTrampoline = 2;

std::string hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

std::string site_label(const SiteRecord& s) {
  return (s.demangled.empty() ? std::string("?") : s.demangled) + " (" + hex(s.entry) + ")";
}

}  // namespace

// ---------------------------------------------------------------------------
// SiteOps
// ---------------------------------------------------------------------------

void SiteOps::add(OpsRecord* r) {
  if (!rest_ && !one_) {
    one_ = r;
    return;
  }
  if (!rest_) {
    rest_ = std::make_unique<std::vector<OpsRecord*>>();
    rest_->push_back(one_);
    one_ = nullptr;
  }
  rest_->push_back(r);
}

void SiteOps::remove(OpsRecord* r) {
  if (!rest_) {
    if (one_ == r) one_ = nullptr;
    return;
  }
  auto it = std::find(rest_->begin(), rest_->end(), r);
  if (it != rest_->end()) rest_->erase(it);
  if (rest_->size() == 1) {
    one_ = (*rest_)[0];
    rest_.reset();
  } else if (rest_->empty()) {
    rest_.reset();
  }
}

// ---------------------------------------------------------------------------
// Creation and discovery
// ---------------------------------------------------------------------------

Engine::Engine(const Backend& backend, const ftjit_engine_options& options)
    : backend_(backend), options_(options), patcher_(backend, sync_) {}

Result<std::unique_ptr<Engine>> Engine::create(const ftjit_engine_options& options) {
  const Backend* backend = native_backend();
  if (backend == nullptr) {
    return make_error(FTJIT_E_UNSUPPORTED, "ftjit has no backend for this machine's ISA");
  }
  if (options.default_strategy < FTJIT_STRATEGY_AUTO ||
      options.default_strategy > FTJIT_STRATEGY_GENERATED) {
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      "default strategy must be auto, list, call-ops or generated");
  }
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
  if (auto st = Patcher::install_trap_handler(); !st) return fail(st.take_error());
  engine->tls_offset_ = trampoline_depth_tls_offset();
  auto added = engine->refresh_modules();
  if (!added) return fail(added.take_error());
  spdlog::debug("ftjit: engine created, {} sites in {} modules, sync via {}", engine->sites_.size(),
                engine->modules_.size(), engine->sync_.uses_membarrier() ? "membarrier" : "signals");
  return engine;
}

Result<size_t> Engine::refresh_modules() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t gen = loaded_modules_generation();
  if (gen == modules_generation_ && !modules_.empty()) return size_t{0};
  auto found = discover_loaded_modules();
  if (!found) return found.take_error();
  size_t before = sites_.size();
  FTJIT_TRY(add_modules(std::move(found.value())));
  modules_generation_ = gen;
  return sites_.size() - before;
}

Status Engine::add_modules(std::vector<DiscoveredModule> modules) {
  std::set<std::pair<std::string, uint64_t>> known;
  for (const auto& m : modules_) known.insert({m.path, m.load_bias});
  const IsaTraits& traits = backend_.traits();
  for (DiscoveredModule& m : modules) {
    if (!m.has_patchable_section || m.sites.empty()) continue;
    if (known.count({m.path, m.load_bias})) continue;
    if (m.isa != traits.isa) continue;
    uint32_t module_index = static_cast<uint32_t>(modules_.size());
    modules_.push_back({m.path, std::string(path_basename(m.path)), m.load_bias});
    for (DiscoveredSite& d : m.sites) {
      if (site_by_entry_.count(d.entry)) continue;
      SiteRecord s;
      s.entry = d.entry;
      s.module = module_index;
      s.prefix_bytes = d.prefix_bytes;
      s.has_slot = d.prefix_bytes >= traits.slot_bytes &&
                   (d.entry - traits.slot_bytes) % traits.slot_align == 0;
      const auto* code = reinterpret_cast<const uint8_t*>(d.entry);
      std::memcpy(s.original, code, traits.call_bytes);
      if (s.has_slot) std::memcpy(&s.original_slot, code - traits.slot_bytes, traits.slot_bytes);
      s.original_kind = backend_.classify_entry(d.entry, {code, traits.call_bytes}).kind;
      s.usable = s.original_kind == SledKind::kNop || s.original_kind == SledKind::kNopSled;
      s.name = std::move(d.name);
      s.demangled = std::move(d.demangled);
      site_by_entry_[s.entry] = static_cast<uint32_t>(sites_.size());
      sites_.push_back(std::move(s));
    }
  }
  return {};
}

Engine::~Engine() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (!ops_.empty()) {
      OpsRecord* rec = ops_.back().get();
      std::vector<uint32_t> old = rec->sites;
      Status st = commit(rec, old, {});
      if (!st) spdlog::error("ftjit: detach at teardown: {}", st.error().message);
      rec->ops->internal = nullptr;
      retired_.records.push_back(std::move(ops_.back()));
      ops_.pop_back();
    }
    Status st = restore_original_sleds();
    if (!st) spdlog::error("ftjit: restoring sleds at teardown: {}", st.error().message);
    st = release_after_grace();
    if (!st) {
      spdlog::error("ftjit: {}; trampoline memory is kept", st.error().message);
      for (auto& a : arenas_) a.release();
    }
    for (auto& alias : aliases_) alias->restore_file_mapping();
  }
  g_list_table.store(nullptr);
  g_engine_exists.store(false);
}

// ---------------------------------------------------------------------------
// Selection
// ---------------------------------------------------------------------------

Result<std::vector<uint32_t>> Engine::select_sites(const Filter& filter) const {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < sites_.size(); ++i) {
    const SiteRecord& s = sites_[i];
    if (filter.matches(modules_[s.module].base, s.name, s.demangled)) out.push_back(i);
  }
  if (!out.empty()) return out;
  if (sites_.empty()) {
    return make_error(FTJIT_E_NO_SITES,
                      "no loaded module has patchable entries (__patchable_function_entries); "
                      "build with -fpatchable-function-entry=5 or =13,8");
  }
  for (const NamePattern& p : filter.includes()) {
    if (!p.module.empty() || !glob_is_literal(p.name)) continue;
    if (dlsym(RTLD_DEFAULT, p.name.c_str()) != nullptr) {
      return make_error(FTJIT_E_NOT_PATCHABLE,
                        "function '" + p.name +
                            "' exists but has no patchable entry (built without "
                            "-fpatchable-function-entry, or opted out)");
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

Status Engine::attach(ftjit_ops* ops, const Filter& filter) {
  if (ops == nullptr || ops->struct_size < sizeof(ftjit_ops)) {
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
  if (ftjit_trampoline_depth != 0) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "ftjit_attach called from inside a tracer callback");
  }
  if (loaded_modules_generation() != modules_generation_) {
    auto r = refresh_modules();
    if (!r) return r.take_error();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (find(ops) != nullptr || ops->internal != nullptr) {
    return make_error(FTJIT_E_ALREADY_ATTACHED, "this ops is attached already");
  }
  auto selected = select_sites(filter);
  if (!selected) return selected.take_error();
  auto rec = std::make_unique<OpsRecord>();
  rec->ops = ops;
  rec->strategy = ops->strategy != FTJIT_STRATEGY_AUTO ? ops->strategy : options_.default_strategy;
  rec->filter = filter;
  OpsRecord* r = rec.get();
  ops_.push_back(std::move(rec));
  Status st = commit(r, {}, selected.value());
  if (!st) {
    ops_.pop_back();
    return st;
  }
  ops->internal = r;
  return release_if_much_retired();
}

Status Engine::set_filter(ftjit_ops* ops, const Filter& filter) {
  if (ftjit_trampoline_depth != 0) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "ftjit_set_filter called from inside a tracer callback");
  }
  if (loaded_modules_generation() != modules_generation_) {
    auto r = refresh_modules();
    if (!r) return r.take_error();
  }
  std::lock_guard<std::mutex> lock(mu_);
  OpsRecord* rec = find(ops);
  if (rec == nullptr) return make_error(FTJIT_E_NOT_ATTACHED, "set_filter: this ops is not attached");
  auto selected = select_sites(filter);
  if (!selected) return selected.take_error();
  std::vector<uint32_t> old = rec->sites;
  FTJIT_TRY(commit(rec, old, selected.value()));
  rec->filter = filter;
  return release_if_much_retired();
}

Status Engine::detach(ftjit_ops* ops) {
  if (ftjit_trampoline_depth != 0) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "ftjit_detach called from inside a tracer callback");
  }
  std::lock_guard<std::mutex> lock(mu_);
  OpsRecord* rec = find(ops);
  if (rec == nullptr) return make_error(FTJIT_E_NOT_ATTACHED, "detach: this ops is not attached");
  std::vector<uint32_t> old = rec->sites;
  FTJIT_TRY(commit(rec, old, {}));
  auto it = std::find_if(ops_.begin(), ops_.end(), [&](const auto& p) { return p.get() == rec; });
  for (auto& [arena, addr] : rec->generated) retired_.trampolines.push_back({arena, addr});
  rec->generated.clear();
  retired_.records.push_back(std::move(*it));
  ops_.erase(it);
  ops->internal = nullptr;
  if (ops_.empty()) FTJIT_TRY(restore_original_sleds());
  return release_after_grace();
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
  for (const SiteRecord& r : sites_) s.sites_enabled += r.applied.call != 0;
  s.batches = batches_;
  s.syncs = sync_.count();
  s.last_batch_syncs = patcher_.last_batch_syncs();
  s.last_batch_sites = last_batch_sites_;
  s.trampolines = trampolines_;
  s.trampoline_bytes = trampoline_bytes_;
  s.traps_emulated = Patcher::traps_emulated();
  s.grace_periods = grace_periods_;
  s.sync_fallbacks = sync_.fallbacks();
  return s;
}

const std::string* Engine::site_name(uint64_t entry) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = site_by_entry_.find(entry);
  return it == site_by_entry_.end() ? nullptr : &sites_[it->second].demangled;
}

std::vector<SiteInfo> Engine::sites() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SiteInfo> out;
  out.reserve(sites_.size());
  for (const SiteRecord& s : sites_) {
    out.push_back({s.entry, &s.name, &s.demangled, &modules_[s.module].path, s.route,
                   s.applied.call, s.ops.size()});
  }
  return out;
}

// ---------------------------------------------------------------------------
// Memory: text aliases, arenas, trampolines
// ---------------------------------------------------------------------------

Result<uint8_t*> Engine::writable(uint64_t addr, size_t n) {
  for (const auto& a : aliases_) {
    if (a->contains(addr, n)) return a->rw(addr);
  }
  auto m = find_exec_mapping(addr);
  if (!m) return make_error(FTJIT_E_SYSTEM, "site " + hex(addr) + ": " + m.error().message);
  if (addr + n > m->hi) {
    return make_error(FTJIT_E_INTERNAL, "site " + hex(addr) + " straddles two mappings");
  }
  auto alias = TextAlias::create(m->lo, m->hi, m->path, m->offset);
  if (!alias) return alias.take_error();
  aliases_.push_back(std::move(alias.value()));
  return aliases_.back()->rw(addr);
}

Result<CodeArena*> Engine::arena_for(uint64_t entry) {
  int64_t reach = backend_.traits().branch_reach;
  for (const auto& a : arenas_) {
    if (a->reaches(entry, reach)) return a.get();
  }
  auto a = CodeArena::create_near(entry, reach, kArenaBytes);
  if (!a) return a.take_error();
  arenas_.push_back(std::move(a.value()));
  return arenas_.back().get();
}

bool Engine::in_trampoline_memory(uint64_t pc) const {
  for (const auto& a : arenas_) {
    if (a->contains(pc)) return true;
  }
  return false;
}

namespace {

Result<uint64_t> place_trampoline(const Backend& backend, CodeArena* arena,
                                  const TrampolineRequest& req, size_t* bytes) {
  // Emit once at a provisional address to learn the size, then again at the
  // real one (sizes only shrink or stay: rel32 calls get nearer).
  constexpr size_t kMaxTrampoline = 512;
  uint64_t place = arena->allocate(kMaxTrampoline, backend.traits().code_align);
  if (place == 0) return make_error(FTJIT_E_OUT_OF_RANGE, "trampoline arena is full");
  auto code = backend.emit_trampoline(req, place);
  if (!code) {
    arena->free(place);
    return code.take_error();
  }
  if (code->size() > kMaxTrampoline) {
    arena->free(place);
    return make_error(FTJIT_E_INTERNAL, "trampoline larger than its reservation");
  }
  std::memcpy(arena->rw(place), code->data(), code->size());
  *bytes = code->size();
  return place;
}

}  // namespace

Result<uint64_t> Engine::generated_trampoline(OpsRecord* rec, CodeArena* arena) {
  auto it = rec->generated.find(arena);
  if (it != rec->generated.end()) return it->second;
  TrampolineRequest req;
  req.source = OpsSource::kImmediate;
  req.ops = reinterpret_cast<uint64_t>(rec->ops);
  req.func = reinterpret_cast<uint64_t>(rec->ops->func);
  req.save_fp = !(rec->ops->flags & FTJIT_OPS_F_NO_FP);
  req.honour_direct = false;
  req.nesting_tls_offset = tls_offset_;
  size_t bytes = 0;
  auto place = place_trampoline(backend_, arena, req, &bytes);
  if (!place) return place;
  rec->generated[arena] = *place;
  trampoline_sizes_[*place] = bytes;
  ++trampolines_;
  trampoline_bytes_ += bytes;
  return place;
}

Result<uint64_t> Engine::shared_trampoline(CodeArena* arena, int which) {
  auto& slots = shared_[arena];
  if (slots[which] != 0) return slots[which];
  TrampolineRequest req;
  req.nesting_tls_offset = tls_offset_;
  req.honour_direct = true;
  if (which == kListTrampoline) {
    req.source = OpsSource::kImmediate;
    req.func = reinterpret_cast<uint64_t>(&ftjit_list_dispatch);
  } else {
    req.source = OpsSource::kSiteSlot;
    req.save_fp = which == kCallOpsTrampoline;
    req.honour_direct = which == kCallOpsTrampoline;
  }
  size_t bytes = 0;
  auto place = place_trampoline(backend_, arena, req, &bytes);
  if (!place) return place;
  slots[which] = *place;
  trampoline_sizes_[*place] = bytes;
  ++trampolines_;
  trampoline_bytes_ += bytes;
  return place;
}

Insn Engine::encoded(const SiteRecord& s, uint64_t call) const {
  if (call != 0) {
    auto c = backend_.encode_call(s.entry, call);
    return c ? c.value() : Insn{};
  }
  // Until the one-time init the entry holds what the compiler wrote (a
  // NOP sled, or a single NOP of its own choosing): restore exactly that.
  if (s.initialized) return backend_.encode_nop();
  Insn orig;
  orig.size = static_cast<uint8_t>(backend_.traits().call_bytes);
  std::memcpy(orig.bytes, s.original, orig.size);
  return orig;
}

// ---------------------------------------------------------------------------
// Commit: plan every changed site, then write them as one batch
// ---------------------------------------------------------------------------

Status Engine::commit(OpsRecord* rec, const std::vector<uint32_t>& old_sites,
                      const std::vector<uint32_t>& new_sites) {
  std::vector<uint32_t> removed, added;
  std::set_difference(old_sites.begin(), old_sites.end(), new_sites.begin(), new_sites.end(),
                      std::back_inserter(removed));
  std::set_difference(new_sites.begin(), new_sites.end(), old_sites.begin(), old_sites.end(),
                      std::back_inserter(added));
  for (uint32_t i : removed) sites_[i].ops.remove(rec);
  for (uint32_t i : added) sites_[i].ops.add(rec);
  auto undo = [&] {
    for (uint32_t i : added) sites_[i].ops.remove(rec);
    for (uint32_t i : removed) sites_[i].ops.add(rec);
  };

  std::vector<uint32_t> changed;
  changed.reserve(removed.size() + added.size());
  std::merge(removed.begin(), removed.end(), added.begin(), added.end(),
             std::back_inserter(changed));

  // 1. Plan: route and target of every changed site.
  struct Planned {
    uint32_t site;
    Route route;
    SiteTarget target;
    std::unique_ptr<SiteMux> mux;
  };
  std::vector<Planned> plan;
  plan.reserve(changed.size());
  std::vector<ftjit_strategy> strategies;
  for (uint32_t i : changed) {
    SiteRecord& s = sites_[i];
    if (!s.ops.empty() && !s.usable) {
      undo();
      return make_error(FTJIT_E_UNEXPECTED_BYTES,
                        "site " + site_label(s) + " does not hold a patchable NOP sled: found " +
                            hex_bytes(s.original, backend_.traits().call_bytes) +
                            " (patched by someone else?); nothing was patched");
    }
    strategies.clear();
    for (size_t k = 0; k < s.ops.size(); ++k) strategies.push_back(s.ops[k]->strategy);
    Route route = choose_route(s.has_slot, strategies);
    if (route == Route::kInvalid) {
      undo();
      return make_error(FTJIT_E_UNSUPPORTED,
                        "site " + site_label(s) +
                            " has no aligned ops slot, which call-ops needs (build with "
                            "-fpatchable-function-entry=13,8); nothing was patched");
    }
    RouteAddresses a;
    Planned p{i, route, {}, nullptr};
    if (route != Route::kNone && route != Route::kDirect) {
      if (s.arena == nullptr) {
        auto arena = arena_for(s.entry);
        if (!arena) {
          undo();
          return arena.take_error();
        }
        s.arena = arena.value();
      }
    }
    OpsRecord* single = s.ops.size() == 1 ? s.ops[0] : nullptr;
    Result<uint64_t> addr = uint64_t{0};
    switch (route) {
      case Route::kGenerated:
        addr = generated_trampoline(single, s.arena);
        a.single_generated = addr ? addr.value() : 0;
        break;
      case Route::kCallOps:
        addr = shared_trampoline(s.arena, (single->ops->flags & FTJIT_OPS_F_NO_FP)
                                              ? kCallOpsNoFpTrampoline
                                              : kCallOpsTrampoline);
        a.call_ops_trampoline = addr ? addr.value() : 0;
        a.single_ops = reinterpret_cast<uint64_t>(single->ops);
        break;
      case Route::kCallOpsMux: {
        addr = shared_trampoline(s.arena, kCallOpsTrampoline);
        a.call_ops_trampoline = addr ? addr.value() : 0;
        std::vector<ftjit_ops*> list;
        for (size_t k = 0; k < s.ops.size(); ++k) list.push_back(s.ops[k]->ops);
        p.mux = make_site_mux(std::move(list));
        a.mux_ops = reinterpret_cast<uint64_t>(&p.mux->ops);
        break;
      }
      case Route::kList:
        addr = shared_trampoline(s.arena, kListTrampoline);
        a.list_trampoline = addr ? addr.value() : 0;
        break;
      case Route::kDirect:
        a.single_direct = reinterpret_cast<uint64_t>(single->ops->direct_trampoline);
        break;
      case Route::kNone:
      case Route::kInvalid:
        break;
    }
    if (!addr) {
      undo();
      return addr.take_error();
    }
    p.target = target_for(route, a);
    if (p.target.call != 0 && !backend_.encode_call(s.entry, p.target.call)) {
      undo();
      return make_error(FTJIT_E_OUT_OF_RANGE, "site " + site_label(s) + " cannot reach " +
                                                  hex(p.target.call) + " with a call");
    }
    plan.push_back(std::move(p));
  }

  // 2. Which ops must be visible to the list walker, with their ip sets.
  std::unordered_set<OpsRecord*> affected{rec};
  for (uint32_t i : changed) {
    for (size_t k = 0; k < sites_[i].ops.size(); ++k) affected.insert(sites_[i].ops[k]);
  }
  std::vector<Route> new_route(changed.size());
  auto route_of = [&](uint32_t site) {
    auto it = std::lower_bound(changed.begin(), changed.end(), site);
    if (it != changed.end() && *it == site) return plan[static_cast<size_t>(it - changed.begin())].route;
    return sites_[site].route;
  };
  // rec's own site list after this commit.
  const std::vector<uint32_t>& rec_sites_after = new_sites;
  bool list_changed = false;
  std::vector<std::pair<OpsRecord*, std::unique_ptr<IpSet>>> new_ipsets;
  for (OpsRecord* r : affected) {
    const std::vector<uint32_t>& rs = r == rec ? rec_sites_after : r->sites;
    bool needs = false;
    for (uint32_t i : rs) {
      if (route_of(i) == Route::kList) {
        needs = true;
        break;
      }
    }
    if (needs && (!r->ips || r == rec)) {
      std::vector<uint64_t> ips;
      ips.reserve(rs.size());
      for (uint32_t i : rs) ips.push_back(sites_[i].entry);
      new_ipsets.push_back({r, std::make_unique<IpSet>(ips)});
      list_changed = true;
    } else if (!needs && r->ips) {
      new_ipsets.push_back({r, nullptr});
      list_changed = true;
    }
  }

  // 3. Sleds that must become one NOP first, and every site's writes.
  std::vector<SledInit> inits;
  std::vector<EntryWrite> writes;
  std::vector<SlotWrite> slots;
  for (const Planned& p : plan) {
    SiteRecord& s = sites_[p.site];
    if (p.target.call == 0 && s.applied.call == 0) continue;
    if (p.target.call != 0 && !s.initialized && s.original_kind == SledKind::kNopSled) {
      auto rw = writable(s.entry, backend_.traits().call_bytes);
      if (!rw) {
        undo();
        return rw.take_error();
      }
      inits.push_back({s.entry, rw.value(), backend_.traits().call_bytes});
    }
  }
  std::sort(inits.begin(), inits.end(),
            [](const SledInit& a, const SledInit& b) { return a.entry < b.entry; });
  if (!inits.empty()) {
    // Verify before the one-time rewrite too: bytes as discovered.
    for (const SledInit& in : inits) {
      const SiteRecord& s = sites_[site_by_entry_[in.entry]];
      if (std::memcmp(reinterpret_cast<const void*>(in.entry), s.original, in.size) != 0) {
        undo();
        return make_error(FTJIT_E_UNEXPECTED_BYTES,
                          "site " + site_label(s) + ": expected " + hex_bytes(s.original, in.size) +
                              ", found " +
                              hex_bytes(reinterpret_cast<const uint8_t*>(in.entry), in.size) +
                              "; nothing was patched");
      }
    }
    Status st = patcher_.init_sleds(inits);
    if (!st) {
      undo();
      return st;
    }
    for (const SledInit& in : inits) sites_[site_by_entry_[in.entry]].initialized = true;
  }
  for (const Planned& p : plan) {
    SiteRecord& s = sites_[p.site];
    if (slot_changes(s.applied, p.target)) {
      auto rw = writable(s.entry - backend_.traits().slot_bytes, backend_.traits().slot_bytes);
      if (!rw) {
        undo();
        return rw.take_error();
      }
      slots.push_back({reinterpret_cast<uint64_t*>(rw.value()), p.target.slot});
    }
    if (p.target.call == s.applied.call) continue;
    auto rw = writable(s.entry, backend_.traits().call_bytes);
    if (!rw) {
      undo();
      return rw.take_error();
    }
    writes.push_back({s.entry, rw.value(), &s.name, encoded(s, s.applied.call),
                      encoded(s, p.target.call)});
  }
  std::sort(writes.begin(), writes.end(),
            [](const EntryWrite& a, const EntryWrite& b) { return a.entry < b.entry; });

  // 4. Publish what the new targets read (ip sets, list table), then write.
  std::vector<std::pair<OpsRecord*, std::unique_ptr<IpSet>>> old_ipsets;
  auto publish_table = [&] {
    auto table = std::make_unique<ListTable>();
    for (const auto& r : ops_) {
      if (r->ips) table->entries.push_back({r->ops, r->ips.get()});
    }
    g_list_table.store(table.get(), std::memory_order_release);
    if (list_table_) retired_.list_tables.push_back(std::move(list_table_));
    list_table_ = std::move(table);
  };
  if (list_changed) {
    for (auto& [r, set] : new_ipsets) {
      old_ipsets.push_back({r, std::move(r->ips)});
      r->ips = std::move(set);
    }
    publish_table();
  }
  Status st = patcher_.apply(writes, slots);
  if (!st) {
    // Nothing was written: verification comes first. Put the ip sets back.
    if (list_changed) {
      for (auto& [r, set] : old_ipsets) {
        if (r->ips) retired_.ipsets.push_back(std::move(r->ips));
        r->ips = std::move(set);
      }
      publish_table();
    }
    undo();
    (void)release_after_grace();
    return st;
  }
  for (auto& [r, set] : old_ipsets) {
    if (set) retired_.ipsets.push_back(std::move(set));
  }
  ++batches_;
  last_batch_sites_ = writes.size();

  // 5. Record the new state; retire what nothing reaches any more.
  for (Planned& p : plan) {
    SiteRecord& s = sites_[p.site];
    s.applied.call = p.target.call;
    if (p.target.slot != 0) s.applied.slot = p.target.slot;
    s.route = p.route;
    if (s.mux != nullptr) {
      auto it = std::find_if(live_muxes_.begin(), live_muxes_.end(),
                             [&](const auto& m) { return m.get() == s.mux; });
      if (it != live_muxes_.end()) {
        retired_.muxes.push_back(std::move(*it));
        live_muxes_.erase(it);
      }
      s.mux = nullptr;
    }
    if (p.mux) {
      s.mux = p.mux.get();
      live_muxes_.push_back(std::move(p.mux));
    }
  }
  rec->sites = new_sites;
  return {};
}

Status Engine::restore_original_sleds() {
  std::vector<EntryWrite> writes;
  std::vector<SlotWrite> slots;
  for (SiteRecord& s : sites_) {
    if (s.applied.call != 0) continue;
    if (s.initialized && s.original_kind == SledKind::kNopSled) {
      auto rw = writable(s.entry, backend_.traits().call_bytes);
      if (!rw) return rw.take_error();
      Insn orig;
      orig.size = static_cast<uint8_t>(backend_.traits().call_bytes);
      std::memcpy(orig.bytes, s.original, orig.size);
      writes.push_back({s.entry, rw.value(), &s.name, backend_.encode_nop(), orig});
    }
    if (s.applied.slot != 0) {
      auto rw = writable(s.entry - backend_.traits().slot_bytes, backend_.traits().slot_bytes);
      if (!rw) return rw.take_error();
      slots.push_back({reinterpret_cast<uint64_t*>(rw.value()), s.original_slot});
    }
  }
  if (writes.empty() && slots.empty()) return {};
  // Slots are only read by the call-ops trampoline, which no site calls
  // now; a grace period makes sure no thread is still about to read one.
  FTJIT_TRY(release_after_grace());
  FTJIT_TRY(patcher_.apply(writes, slots));
  ++batches_;
  last_batch_sites_ = writes.size();
  for (SiteRecord& s : sites_) {
    if (s.applied.call != 0) continue;
    if (s.original_kind == SledKind::kNopSled) s.initialized = false;
    s.applied.slot = 0;
  }
  return {};
}

// attach and set_filter promise nothing about what they retire (old
// multiplexers, ip sets, list tables), so their grace period can wait for
// the next detach, which must have one; only a pile-up forces one earlier.
Status Engine::release_if_much_retired() {
  size_t n = retired_.muxes.size() + retired_.ipsets.size() + retired_.list_tables.size() +
             retired_.trampolines.size();
  if (n < 4096) return {};
  return release_after_grace();
}

Status Engine::release_after_grace() {
  if (retired_.empty()) return {};
  Status st = wait_for_grace_period([this](uint64_t pc) { return in_trampoline_memory(pc); });
  ++grace_periods_;
  if (!st) {
    // Keep everything: a thread may still be inside. It is retried at the
    // next grace period.
    spdlog::warn("ftjit: {}", st.error().message);
    return st;
  }
  for (auto& [arena, addr] : retired_.trampolines) {
    auto it = trampoline_sizes_.find(addr);
    if (it != trampoline_sizes_.end()) {
      trampoline_bytes_ -= it->second;
      trampoline_sizes_.erase(it);
    }
    --trampolines_;
    arena->free(addr);
  }
  retired_ = Retired{};
  return {};
}

}  // namespace ftjit
