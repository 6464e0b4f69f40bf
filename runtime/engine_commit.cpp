// SPDX-License-Identifier: MIT
// The engine's commit: plan every site a change touches (core/planner),
// encode (backend), publish what the new targets read, write the batch
// (patcher), then retire what nothing reaches any more. Written for batches
// of a million sites: no per-site allocation, lookup or sort on the way.
#include <algorithm>
#include <cstring>
#include <iterator>

#include <spdlog/spdlog.h>

#include "runtime/log.h"

#include "runtime/code_change.h"
#include "runtime/engine.h"
#include "runtime/grace.h"

namespace ftjit {
namespace {

// The single-ops routes need no vector of strategies.
Route route_for(const SiteRecord& s, std::vector<ftjit_strategy>* scratch) {
  size_t n = s.ops.size();
  if (n == 0) return Route::kNone;
  if (n == 1) {
    ftjit_strategy one = s.ops[0]->strategy;
    return choose_route(s.has_slot, std::span<const ftjit_strategy>(&one, 1), s.ops[0]->inline_ok);
  }
  scratch->clear();
  for (size_t k = 0; k < n; ++k) scratch->push_back(s.ops[k]->strategy);
  return choose_route(s.has_slot, *scratch);
}

}  // namespace

std::string Engine::site_label(uint32_t index) const {
  char b[24];
  snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(sites_[index].entry));
  const std::string_view name = demangled_of(index);
  return (name.empty() ? std::string("?") : std::string(name)) + " (" + b + ")";
}

// The per-commit caches of "this arena's trampoline for that": consecutive
// sites almost always share an arena and an ops.
struct Engine::TrampolineCache {
  uint32_t module = UINT32_MAX;
  CodeArena* arena = nullptr;
  OpsRecord* rec = nullptr;
  CodeArena* generated_arena = nullptr;
  uint64_t generated = 0;
  int shared_which = -1;
  CodeArena* shared_arena = nullptr;
  uint64_t shared = 0;
};

Result<SiteTarget> Engine::plan_site(uint32_t index, Route route, TrampolineCache* cache,
                                     std::unique_ptr<SiteMux>* mux) {
  SiteRecord& s = sites_[index];
  if (route == Route::kNone) return SiteTarget{};
  if (route == Route::kInvalid) {
    return make_error(FTJIT_E_UNSUPPORTED,
                      "site " + site_label(index) +
                          " has no aligned ops slot, which call-ops needs (build with " +
                          backend_.traits().slot_flags + "); nothing was patched");
  }
  RouteAddresses a;
  OpsRecord* single = s.ops.size() == 1 ? s.ops[0] : nullptr;
  // A hooked return needs the site's stub where the return address is on
  // the stack (x86-64: call-and-land); where it is in a register the
  // trampoline swaps it itself. riscv64 sites reach every trampoline
  // through their stubs, which are transparent to it.
  const StubUse stub_use = backend_.traits().stub_use;
  a.via_stub = stub_use == StubUse::kEverySite;
  a.stubs_transparent = stub_use == StubUse::kEverySite;
  for (size_t k = 0; k < s.ops.size() && !a.via_stub && stub_use == StubUse::kHookedReturns; ++k) {
    a.via_stub = s.ops[k]->hooks_returns();
  }
  const int by_stub = a.via_stub && stub_use == StubUse::kHookedReturns ? kByStub : 0;
  if (route == Route::kDirect) {
    a.single_direct = reinterpret_cast<uint64_t>(single->ops->direct_trampoline);
    return target_for(route, a);
  }
  // One arena per module, placed within reach of all of its text.
  if (cache->module != s.module) {
    ModuleRecord& m = *modules_[s.module];
    if (m.arena == nullptr) {
      auto arena = arena_for(s.entry, m.saves_all);
      if (!arena) return arena.take_error();
      m.arena = arena.value();
    }
    cache->module = s.module;
    cache->arena = m.arena;
  }
  CodeArena* const arena = cache->arena;
  auto shared = [&](int which) -> Result<uint64_t> {
    if (cache->shared_which == which && cache->shared_arena == arena) return cache->shared;
    auto t = shared_trampoline(arena, which);
    if (!t) return t;
    cache->shared_which = which;
    cache->shared_arena = arena;
    cache->shared = t.value();
    return t;
  };
  Result<uint64_t> addr = uint64_t{0};
  switch (route) {
    case Route::kGenerated:
      if (cache->rec == single && cache->generated_arena == arena) {
        addr = cache->generated;
      } else {
        addr = generated_trampoline(single, arena);
        if (addr) {
          cache->rec = single;
          cache->generated_arena = arena;
          cache->generated = addr.value();
        }
      }
      if (addr) a.single_generated = addr.value();
      break;
    case Route::kCallOps:
      addr = shared(by_stub + ((single->target->flags & FTJIT_OPS_F_NO_FP)
                                   ? kCallOpsNoFpTrampoline
                                   : kCallOpsTrampoline));
      if (addr) a.call_ops_trampoline = addr.value();
      a.single_ops = reinterpret_cast<uint64_t>(single->target);
      break;
    case Route::kCallOpsMux: {
      addr = shared(by_stub + kCallOpsTrampoline);
      if (addr) a.call_ops_trampoline = addr.value();
      std::vector<ftjit_ops*> list;
      for (size_t k = 0; k < s.ops.size(); ++k) list.push_back(s.ops[k]->target);
      *mux = make_site_mux(std::move(list));
      a.mux_ops = reinterpret_cast<uint64_t>(&(*mux)->ops);
      break;
    }
    case Route::kList:
      addr = shared(by_stub + kListTrampoline);
      if (addr) a.list_trampoline = addr.value();
      break;
    case Route::kInline:
      addr = place_inline(single, index, arena);
      if (addr) {
        a.single_inline = addr.value();
        inline_code_[index] = {arena, addr.value()};
      }
      break;
    default:
      break;
  }
  if (!addr) return addr.take_error();
  return target_for(route, a);
}

Status Engine::with_modules_pinned(const std::function<Status()>& body) {
  return with_code_change([&](uint64_t generation) -> Status {
    // Anything unloaded before the scope began is forgotten here, while
    // nothing more can be: from now on every module not gone is mapped.
    if (generation == 0 || generation != unloads_checked_at_) {
      if (!modules_.empty()) forget_unloaded_modules();
      unloads_checked_at_ = generation;
    }
    return body();
  });
}

void Engine::drop_gone_sites(std::vector<uint32_t>* sites) const {
  std::erase_if(*sites, [&](uint32_t i) { return modules_[sites_[i].module]->gone; });
}

Status Engine::commit(OpsRecord* rec, const std::vector<uint32_t>& old_sites,
                      std::vector<uint32_t> new_sites) {
  bool grace_after = false;
  Status st = with_modules_pinned([&]() -> Status {
    // The lists were made before the scope: a module may have gone since.
    // (Only a process that ever unloaded one pays for the look.)
    if (modules_unloaded_ == 0) return commit_in_scope(rec, old_sites, std::move(new_sites), &grace_after);
    std::vector<uint32_t> old_live = old_sites;
    drop_gone_sites(&old_live);
    drop_gone_sites(&new_sites);
    return commit_in_scope(rec, old_live, std::move(new_sites), &grace_after);
  });
  // Outside the scope: a grace period waits for other threads, which may
  // be waiting for the loader or for fork (a nested commit leaves it to
  // the next grace period).
  if (grace_after && !in_code_change()) (void)release_after_grace();
  return st;
}

Status Engine::commit_in_scope(OpsRecord* rec, const std::vector<uint32_t>& old_sites,
                               std::vector<uint32_t> new_sites, bool* grace_after) {
  // The sites whose ops change: old xor new, walked once, in order.
  std::vector<uint32_t>& changed = changed_;
  changed.clear();
  std::set_symmetric_difference(old_sites.begin(), old_sites.end(), new_sites.begin(),
                                new_sites.end(), std::back_inserter(changed));
  const IsaTraits& traits = backend_.traits();
  const uint32_t slot_bytes = traits.slot_bytes;
  // A site: its fixed part and, live_offset from the entry, its live
  // instruction (backends/backend.h).
  const uint32_t site_bytes = traits.site_bytes;
  const uint32_t live_offset = traits.live_offset;

  // 1. One pass over the changed sites: change their ops, plan route and
  //    target, and build each one's writes. The new state goes straight
  //    into the site record; `plan` keeps the old one so that a failure
  //    before the first machine write can put everything back.
  std::vector<Planned>& plan = plan_;
  std::vector<EntryWrite>& writes = writes_;
  std::vector<SlotWrite>& slots = slots_;
  std::vector<FixedPartWrite>& inits = inits_;
  inits.clear();
  plan.resize(changed.size());
  slots.clear();
  // Sized once and filled by index: push_back's checks cost more than the
  // write itself at a million sites.
  if (writes.size() < changed.size()) writes.resize(changed.size());
  size_t n_writes = 0;
  // A fresh attach changes exactly its sites: the loop gathers their
  // entries for the ip set on the way (a pass of its own over a million
  // site records costs more than the set).
  const bool fresh = old_sites.empty();
  std::vector<uint64_t>& entries = entries_;
  if (fresh && entries.size() < changed.size()) entries.resize(changed.size());
  std::vector<ftjit_strategy> scratch;
  std::vector<OpsRecord*> affected{rec};
  TrampolineCache cache;
  Route last_route = Route::kInvalid;
  OpsRecord* last_single = nullptr;
  uint32_t last_module = UINT32_MAX;
  SiteTarget last_target;
  bool any_list = false;
  bool any_mux = false;
  bool sorted = true;
  int64_t enabled_delta = 0;
  uint64_t dirty_delta = 0;
  size_t done = 0;
  auto undo = [&] {
    for (size_t k = 0; k < done; ++k) {
      Planned& p = plan[k];
      SiteRecord& s = sites_[p.site];
      s.applied = p.old_applied;
      s.route = p.old_route;
      s.initialized = p.old_initialized;
      p.mux.reset();
      if (p.placed_inline) {
        // Never reached by any site: freed at once.
        auto it = inline_code_.find(p.site);
        free_trampoline(it->second.first, it->second.second - kInlineWordsBytes);
        inline_code_.erase(it);
        p.placed_inline = false;
      }
    }
  };
  // Ops are changed site by site as the loop goes; `ops_changed` counts how
  // many, so that undo can revert exactly those.
  size_t ops_changed = 0;
  auto undo_ops = [&] {
    for (size_t k = 0; k < ops_changed; ++k) {
      uint32_t i = changed[k];
      if (std::binary_search(old_sites.begin(), old_sites.end(), i)) {
        sites_[i].ops.add(rec);
      } else {
        sites_[i].ops.remove(rec);
      }
    }
  };
  auto fail = [&](Error e) -> Status {
    undo();
    undo_ops();
    return e;
  };
  auto old_it = old_sites.begin();
  for (size_t k = 0; k < changed.size(); ++k) {
    const uint32_t i = changed[k];
    SiteRecord& s = sites_[i];
    while (old_it != old_sites.end() && *old_it < i) ++old_it;
    if (old_it != old_sites.end() && *old_it == i) {
      s.ops.remove(rec);
    } else {
      s.ops.add(rec);
    }
    ops_changed = k + 1;
    for (size_t j = 0; j < s.ops.size(); ++j) {
      OpsRecord* r = s.ops[j];
      if (r != affected.back() && std::find(affected.begin(), affected.end(), r) == affected.end()) {
        affected.push_back(r);
      }
    }
    if (!s.ops.empty() && s.usable && s.entry % traits.entry_align != 0) {
      return fail(make_error(FTJIT_E_UNSUPPORTED,
                             "site " + site_label(i) + " is not " + std::to_string(traits.entry_align) +
                                 "-byte aligned, which " + isa_name(traits.isa) + " sites need (build with " +
                                 traits.site_flags + "); nothing was patched"));
    }
    if (!s.ops.empty() && !s.usable) {
      return fail(make_error(FTJIT_E_UNEXPECTED_BYTES,
                             "site " + site_label(i) + " does not hold a patchable NOP sled: found " +
                                 hex_bytes(sites_[i].original, site_bytes) +
                                 " (patched by someone else? or not built with " + traits.site_flags +
                                 "?); nothing was patched"));
    }
    Planned& p = plan[k];
    p.site = i;
    p.old_applied = s.applied;
    p.old_route = s.route;
    p.old_initialized = s.initialized;
    p.mux.reset();
    p.placed_inline = false;
    Route route = route_for(s, &scratch);
    any_list |= route == Route::kList;
    if (fresh) entries[k] = s.entry;
    SiteTarget t;
    // The common case: one ops, the same as the previous site's, in the
    // same module: the same target (a multiplexer is per site: never).
    OpsRecord* single = s.ops.size() == 1 ? s.ops[0] : nullptr;
    if (single != nullptr && route == last_route && single == last_single &&
        s.module == last_module && route != Route::kCallOpsMux && route != Route::kInline) {
      t = last_target;
    } else {
      auto target = plan_site(i, route, &cache, &p.mux);
      if (!target) return fail(target.take_error());
      p.placed_inline = route == Route::kInline;
      t = target.value();
      last_route = route;
      last_single = single;
      last_module = s.module;
      last_target = t;
    }
    done = k + 1;

    if (slot_changes(s.applied, t)) {
      auto rw = writable(slot_at(p.site), slot_bytes);
      if (!rw) return fail(rw.take_error());
      slots.push_back({reinterpret_cast<uint64_t*>(rw.value()), t.slot});
    }
    // The stub's word is stored with the slots: before the entry jumps to
    // the stub, and, when only the word changes, at the same point.
    if (stub_changes(s.applied, t)) {
      auto word = stub_word(i);
      if (!word) return fail(word.take_error());
      slots.push_back({word.value(), t.trampoline()});
    }
    // ftrace's check_record: what this site's entry must do.
    const SiteAction action = decide(s.applied, t);
    if (action == SiteAction::kEnable || action == SiteAction::kDisable ||
        action == SiteAction::kRetarget) {
      uint8_t* rw = writable_fast(s.entry, site_bytes);
      if (rw == nullptr) {
        auto slow = writable(s.entry, site_bytes);
        if (!slow) return fail(slow.take_error());
        rw = slow.value();
      }
      Insn from, to;
      if (t.call != 0 && !s.initialized && s.original_kind == SledKind::kNopSled) {
        // The compiler's sled gets its fixed part first (x86-64: becomes
        // one NOP), all threads parked.
        const uint8_t* original = s.original;
        if (std::memcmp(reinterpret_cast<const void*>(s.entry), original, site_bytes) != 0) {
          return fail(make_error(
              FTJIT_E_UNEXPECTED_BYTES,
              "site " + site_label(i) + ": expected " + hex_bytes(original, site_bytes) +
                  ", found " + hex_bytes(reinterpret_cast<const uint8_t*>(s.entry), site_bytes) +
                  "; nothing was patched"));
        }
        inits.push_back({s.entry, rw, site_bytes, insn_word(init_of(i))});
        s.initialized = true;
      }
      from = p.old_initialized != s.initialized ? nop_ : encoded(i, s.applied.call);
      if (t.call == 0) {
        to = encoded(i, 0);
      } else {
        // Arenas are placed within reach, so this fails only for a direct
        // trampoline the caller put too far away.
        if (t.via_stub() && every_site_via_stub()) {
          to = modules_[s.module]->site_code.call;
        } else if (t.via_stub() ? !backend_.encode_jump(s.entry + live_offset, stub_of(i), &to)
                                : !backend_.encode_call(s.entry + live_offset, t.call, &to)) {
          return fail(make_error(FTJIT_E_OUT_OF_RANGE,
                                 "site " + site_label(i) + " cannot reach its trampoline with a call"));
        }
      }
      const uint64_t at = s.entry + live_offset;
      sorted &= n_writes == 0 || writes[n_writes - 1].at < at;
      writes[n_writes++] = EntryWrite{at, rw + live_offset, insn_word(from), insn_word(to)};
    }
    enabled_delta += (t.call != 0) - (s.applied.call != 0);
    dirty_delta += s.applied.slot == 0 && t.slot != 0;
    any_mux |= p.old_route == Route::kCallOpsMux || p.mux != nullptr;
    s.applied.call = t.call;
    if (t.slot != 0) s.applied.slot = t.slot;
    s.route = route;
  }

  // 2. The ops the list walker must see, with the ips each traces. Only
  //    when a list route is involved: most commits skip this entirely.
  std::vector<std::pair<OpsRecord*, std::unique_ptr<IpSet>>> new_ipsets;
  bool list_changed = false;
  bool any_ipset = false;
  for (OpsRecord* r : affected) any_ipset |= r->ips != nullptr;
  if (any_list || any_ipset) {
    for (OpsRecord* r : affected) {
      const std::vector<uint32_t>& rs = r == rec ? new_sites : r->sites;
      // Fresh: every site of rec changed, and any_list says whether one
      // is list-routed (the other affected ops' are in rs too).
      bool needs = r == rec && fresh
                       ? any_list
                       : std::any_of(rs.begin(), rs.end(), [&](uint32_t i) {
                           return sites_[i].route == Route::kList;
                         });
      if (needs && (!r->ips || r == rec)) {
        if (r == rec && fresh) {
          new_ipsets.push_back(
              {r, std::make_unique<IpSet>(std::span<const uint64_t>(entries.data(), rs.size()))});
        } else {
          std::vector<uint64_t> ips;
          ips.reserve(rs.size());
          for (uint32_t i : rs) ips.push_back(sites_[i].entry);
          new_ipsets.push_back({r, std::make_unique<IpSet>(ips)});
        }
        list_changed = true;
      } else if (!needs && r->ips) {
        new_ipsets.push_back({r, nullptr});
        list_changed = true;
      }
    }
  }

  // 3. The machine: site inits (stop-the-world), then what the new targets
  //    read (ip sets, list table), then the batch.
  if (!inits.empty()) {
    auto by_entry = [](const FixedPartWrite& a, const FixedPartWrite& b) { return a.entry < b.entry; };
    if (!std::is_sorted(inits.begin(), inits.end(), by_entry)) {
      std::sort(inits.begin(), inits.end(), by_entry);
    }
    Status st = patcher_.write_fixed_parts(inits);
    if (!st) return fail(st.take_error());
    sites_dirty_ += inits.size();
  }
  std::span<EntryWrite> batch(writes.data(), n_writes);
  if (!sorted) {
    std::sort(batch.begin(), batch.end(),
              [](const EntryWrite& a, const EntryWrite& b) { return a.at < b.at; });
  }
  std::vector<std::pair<OpsRecord*, std::unique_ptr<IpSet>>> old_ipsets;
  auto publish_table = [&] {
    auto table = std::make_unique<ListTable>();
    for (const auto& r : ops_) {
      if (r->ips) table->entries.push_back({r->target, r->ips.get()});
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
  uint64_t failed_at = 0;
  tsan_publish();
  Status st = patcher_.apply(batch, slots, &failed_at);
  if (!st) {
    // Nothing was written: verification comes first. The sled inits that
    // did happen are real: keep those sites marked initialized.
    if (list_changed) {
      for (auto& [r, set] : old_ipsets) {
        if (r->ips) retired_.ipsets.push_back(std::move(r->ips));
        r->ips = std::move(set);
      }
      publish_table();
    }
    std::vector<bool> inited;
    for (size_t k = 0; k < done; ++k) inited.push_back(sites_[plan[k].site].initialized);
    Error e = st.take_error();
    long f = find_site(failed_at - live_offset);
    if (f >= 0) e.message = "site " + std::string(name_of(static_cast<uint32_t>(f))) + " " + e.message;
    undo();
    undo_ops();
    for (size_t k = 0; k < inited.size(); ++k) sites_[plan[k].site].initialized = inited[k];
    *grace_after = true;
    return e;
  }
  for (auto& [r, set] : old_ipsets) {
    if (set) retired_.ipsets.push_back(std::move(set));
  }
  ++batches_;
  last_batch_sites_ = n_writes;

  // 4. Retire what nothing reaches any more; count what changed.
  sites_enabled_ += enabled_delta;
  sites_dirty_ += dirty_delta;
  for (size_t k = 0; any_mux && k < changed.size(); ++k) {
    Planned& p = plan[k];
    if (p.old_route == Route::kCallOpsMux) {
      auto it = muxes_.find(p.site);
      retired_.muxes.push_back(std::move(it->second));
      muxes_.erase(it);
    }
    if (p.mux) muxes_[p.site] = std::move(p.mux);
  }
  // A site that called an inline trampoline of its own calls something
  // else now (its ops set changed: it never goes from one to another).
  for (size_t k = 0; !inline_code_.empty() && k < changed.size(); ++k) {
    const Planned& p = plan[k];
    if (p.old_route != Route::kInline || p.placed_inline) continue;
    auto it = inline_code_.find(p.site);
    if (it == inline_code_.end() || it->second.second != p.old_applied.trampoline()) continue;
    retired_.trampolines.push_back({it->second.first, it->second.second - kInlineWordsBytes});
    inline_code_.erase(it);
  }
  rec->sites = std::move(new_sites);
  return {};
}

Status Engine::restore_original_sleds() {
  if (sites_dirty_ == 0) return {};
  // Slots are only read by the call-ops trampoline, which no site calls
  // now; a grace period makes sure no thread is still about to read one.
  // It comes first: it may not wait inside the code-change scope.
  FTJIT_TRY(release_after_grace());
  return with_modules_pinned([&] { return restore_original_sleds_in_scope(); });
}

Status Engine::restore_original_sleds_in_scope() {
  const IsaTraits& traits = backend_.traits();
  // The trap protocol changes any bytes into any others live (x86-64: the
  // site is its live instruction); otherwise the fixed part goes as it
  // came, with every thread parked.
  const bool deinit_live = backend_.live_protocol().change == LiveChange::kTrap;
  std::vector<EntryWrite> writes;
  std::vector<FixedPartWrite> deinits;
  std::vector<SlotWrite> slots;
  for (uint32_t i = 0; i < sites_.size(); ++i) {
    SiteRecord& s = sites_[i];
    if (s.applied.call != 0) continue;
    if (s.initialized) {
      auto rw = writable(s.entry, traits.site_bytes);
      if (!rw) return rw.take_error();
      uint64_t original = 0;
      std::memcpy(&original, s.original, traits.site_bytes);
      if (deinit_live) {
        writes.push_back({s.entry, rw.value(), insn_word(nop_), original});
      } else {
        // Verified here, as apply verifies a live write: no site changes
        // unless every one holds what the engine wrote.
        const uint64_t init_word = insn_word(init_of(i));
        if (std::memcmp(reinterpret_cast<const void*>(s.entry), &init_word, traits.site_bytes) != 0) {
          return make_error(
              FTJIT_E_UNEXPECTED_BYTES,
              "site " + site_label(i) + ": expected " +
                  hex_bytes(reinterpret_cast<const uint8_t*>(&init_word), traits.site_bytes) +
                  ", found " + hex_bytes(reinterpret_cast<const uint8_t*>(s.entry), traits.site_bytes) +
                  "; nothing was restored");
        }
        deinits.push_back({s.entry, rw.value(), traits.site_bytes, original});
      }
    }
    if (s.applied.slot != 0) {
      auto rw = writable(slot_at(i), traits.slot_bytes);
      if (!rw) return rw.take_error();
      slots.push_back({reinterpret_cast<uint64_t*>(rw.value()), origins_[i].original_slot});
    }
  }
  if (writes.empty() && deinits.empty() && slots.empty()) return {};
  FTJIT_TRY(patcher_.apply(writes, slots));
  FTJIT_TRY(patcher_.write_fixed_parts(deinits));
  ++batches_;
  last_batch_sites_ = writes.size() + deinits.size();
  for (SiteRecord& s : sites_) {
    if (s.applied.call != 0) continue;
    s.initialized = false;
    s.applied.slot = 0;
  }
  sites_dirty_ = 0;
  return {};
}

// attach and set_filter promise nothing about what they retire (old
// multiplexers, ip sets, list tables), so their grace period can wait for
// the next detach, which must have one; only a pile-up forces one earlier.
Status Engine::release_if_much_retired() {
  size_t n = retired_.muxes.size() + retired_.ipsets.size() + retired_.list_tables.size() +
             retired_.trampolines.size() + retired_.stubs.size() + retired_.arenas.size();
  if (n < 4096) return {};
  return release_after_grace();
}

Status Engine::wait_for_callbacks() {
  std::lock_guard<std::mutex> lock(mu_);
  return wait_for_grace_period([this](uint64_t pc) { return in_trampoline_memory(pc); });
}

Status Engine::release_after_grace() {
  if (retired_.empty()) return {};
  if (code_publication_failed()) {
    // A site's old call may still be what a thread runs (its new bytes
    // were never mapped again): nothing it reaches may be freed.
    return make_error(FTJIT_E_SYSTEM,
                      "written code could not be made visible (see the log): retired "
                      "trampolines and data are kept");
  }
  Status st = wait_for_grace_period([this](uint64_t pc) { return in_trampoline_memory(pc); });
  ++grace_periods_;
  if (!st) {
    // Keep everything: a thread may still be inside. It is retried at the
    // next grace period.
    ftjit::log().warn("ftjit: {}", st.error().message);
    return st;
  }
  for (auto& [arena, addr] : retired_.trampolines) free_trampoline(arena, addr);
  for (auto& [arena, stub] : retired_.stubs) arena->free(stub);
  retired_ = Retired{};
  return {};
}

}  // namespace ftjit
