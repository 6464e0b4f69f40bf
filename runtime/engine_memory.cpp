// SPDX-License-Identifier: MIT
// The engine's memory: writable aliases of module text, trampoline arenas
// within branch reach, and the trampolines placed in them.
#include <algorithm>
#include <cinttypes>
#include <cstring>

#include <unistd.h>

#include "runtime/engine.h"
#include "backends/shadow_layout.h"
#include "runtime/inline_blocks.h"

namespace ftjit {


namespace {

constexpr size_t kArenaBytes = 1 << 20;
}  // namespace

Result<uint8_t*> Engine::writable(uint64_t addr, size_t n) {
  if (last_alias_ != nullptr && last_alias_->contains(addr, n)) return last_alias_->rw(addr);
  // A relocated entry's stub sled lives in trampoline memory, which has a
  // writable view of its own.
  for (const auto& a : arenas_) {
    if (a->contains(addr) && a->contains(addr + n - 1)) return a->rw(addr);
  }
  for (const auto& a : aliases_) {
    if (a->contains(addr, n)) {
      last_alias_ = a.get();
      return a->rw(addr);
    }
  }
  auto m = find_exec_mapping(addr);
  if (!m) return make_error(FTJIT_E_SYSTEM, "site " + format_hex(addr) + ": " + m.error().message);
  if (addr + n > m->hi) {
    return make_error(FTJIT_E_INTERNAL, "site " + format_hex(addr) + " straddles two mappings");
  }
  auto alias = TextAlias::create(m->lo, m->hi, m->path, m->offset, m->exec_prot);
  if (!alias) return alias.take_error();
  aliases_.push_back(std::move(alias.value()));
  return aliases_.back()->rw(addr);
}

Result<CodeArena*> Engine::arena_for(uint64_t entry, bool saves_all, int64_t prefer_reach) {
  if (prefer_reach > 0) {
    for (const auto& a : arenas_) {
      if (a->reaches(entry, prefer_reach) && arena_saves_all_[a.get()] == saves_all) return a.get();
    }
    // Smaller than a call's arena: it must fit within the short reach with
    // room to spare (512 relocated entries' stubs); where no gap that
    // large is in reach, a smaller one (down to a page) still takes a few
    // (the libraries a loader packs one against the other, under
    // qemu-user say, leave gaps of some tens of KiB).
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    for (size_t bytes = kArenaBytes / 16; bytes >= page; bytes /= 2) {
      if (auto a = CodeArena::create_near(entry, prefer_reach, bytes)) {
        arena_saves_all_[a.value().get()] = saves_all;
        arenas_.push_back(std::move(a.value()));
        return arenas_.back().get();
      }
    }
  }
  int64_t reach = backend_.traits().branch_reach;
  for (const auto& a : arenas_) {
    if (a->reaches(entry, reach) && arena_saves_all_[a.get()] == saves_all) return a.get();
  }
  auto a = CodeArena::create_near(entry, reach, kArenaBytes);
  if (!a) return a.take_error();
  arena_saves_all_[a.value().get()] = saves_all;
  arenas_.push_back(std::move(a.value()));
  return arenas_.back().get();
}

std::vector<std::tuple<std::string, bool, std::string>> Engine::module_saves() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::tuple<std::string, bool, std::string>> out;
  for (const auto& m : modules_) {
    if (!m->gone && !m->found.empty()) out.emplace_back(m->base, m->saves_all, m->evidence_why);
  }
  return out;
}

bool Engine::in_trampoline_memory(uint64_t pc) const {
  for (const auto& a : arenas_) {
    if (a->contains(pc)) return true;
  }
  for (const auto& a : stub_arenas_) {
    if (a->contains(pc)) return true;
  }
  for (const auto& a : retired_.arenas) {
    if (a->contains(pc)) return true;
  }
  return false;
}

Result<uint64_t*> Engine::stub_word(uint32_t index) {
  const SiteRecord& s = sites_[index];
  ModuleRecord& m = *modules_[s.module];
  const IsaTraits& traits = backend_.traits();
  const bool mirror = traits.stub_use == StubUse::kEverySite;
  if (m.stubs == nullptr) {
    // Every stub within reach of every site of the module, whose entries
    // span at most the distance between its first and last one.
    const uint64_t first = sites_[m.first_site].entry;
    const uint64_t last = sites_[m.first_site + m.found.size() - 1].entry;
    const int64_t reach = traits.branch_reach - static_cast<int64_t>(last - first);
    if (reach <= 0) return make_error(FTJIT_E_OUT_OF_RANGE, "module too large for site stubs");
    // kEverySite: a mirror of the text from the first site's stub word to
    // the last site's stub, each stub at its entry + the module's delta
    // (entries are entry_align-aligned, and so is the delta: the mirror
    // starts on a page).
    const size_t before = mirror ? static_cast<size_t>(-std::min<int32_t>(traits.stub_word_offset, 0)) : 0;
    const size_t bytes = mirror ? before + (last - first) + traits.stub_bytes : m.found.size() * traits.stub_bytes;
    auto a = CodeArena::create_near(first, reach, bytes);
    if (!a) return a.take_error();
    if (a.value()->allocate(bytes, traits.code_align) != a.value()->lo()) {
      return make_error(FTJIT_E_INTERNAL, "site stub memory is not where it was mapped");
    }
    if (mirror) {
      const uint64_t first_stub = a.value()->lo() + before;
      auto code = backend_.emit_site_code(first, first_stub);
      if (!code) return code.take_error();
      if (code->stub.size() != traits.stub_bytes || code->init.size != traits.site_bytes) {
        return make_error(FTJIT_E_INTERNAL, "the emitter's site code has the wrong size");
      }
      m.stub_delta = static_cast<int64_t>(first_stub - first);
      m.site_code = std::move(code.value());
    }
    m.stubs = a.value().get();
    m.stub_written.assign(m.found.size(), false);
    stub_arenas_.push_back(std::move(a.value()));
  }
  const uint64_t stub = stub_of(index);
  uint8_t* rw = m.stubs->rw(stub);
  const uint32_t k = index - m.first_site;
  if (!m.stub_written[k]) {
    // Written before any site jumps to it: the batch's syncs come after.
    if (mirror) {
      std::memcpy(rw, m.site_code.stub.data(), traits.stub_bytes);
    } else if (!backend_.encode_stub(stub, s.entry, rw)) {
      return make_error(FTJIT_E_OUT_OF_RANGE, "a site cannot reach its stub");
    }
    FTJIT_TRY(publish_code(stub, traits.stub_bytes));
    m.stub_written[k] = true;
  }
  return reinterpret_cast<uint64_t*>(rw + traits.stub_word_offset);
}

namespace {

Result<uint64_t> place_trampoline(const Backend& backend, CodeArena* arena,
                                  const TrampolineRequest& req, size_t* bytes) {
  // Emit once at a provisional address to learn the size, then again at the
  // real one (sizes only shrink or stay: rel32 calls get nearer).
  constexpr size_t kMaxTrampoline = 1024;
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
  // Visible before any site can branch here (kRemapAfterWrite: a stale
  // translation of what this memory held before must not run).
  Status shown = publish_code(place, code->size());
  if (!shown) {
    arena->free(place);
    return shown.take_error();
  }
  *bytes = code->size();
  return place;
}

}  // namespace

void Engine::note_trampoline(uint64_t place, size_t bytes) {
  trampoline_sizes_[place] = bytes;
  ++trampolines_;
  trampoline_bytes_ += bytes;
}

void Engine::free_trampoline(CodeArena* arena, uint64_t place) {
  auto it = trampoline_sizes_.find(place);
  if (it != trampoline_sizes_.end()) {
    trampoline_bytes_ -= it->second;
    trampoline_sizes_.erase(it);
  }
  --trampolines_;
  arena->free(place);
}

TrampolineRequest Engine::generated_request(const OpsRecord* rec, CodeArena* arena) {
  TrampolineRequest req;
  req.source = OpsSource::kImmediate;
  req.ops = reinterpret_cast<uint64_t>(rec->target);
  req.func = kTsanShim ? reinterpret_cast<uint64_t>(&ftjit_tsan_callback_shim)
                       : reinterpret_cast<uint64_t>(rec->target->func);
  req.save_fp = !(rec->target->flags & FTJIT_OPS_F_NO_FP);
  req.recursion_drops = reinterpret_cast<uint64_t>(&g_recursion_drops);
  // Its only route, generated, carries it alone: by stub iff it hooks returns.
  req.entered_by_stub = rec->hooks_returns() && backend_.traits().stub_use == StubUse::kHookedReturns;
  req.call_and_land = exit_call_and_land_address();
  req.exit_trampoline = exit_trampoline_address();
  req.real_return = reinterpret_cast<uint64_t>(&ftjit_shadow_real_return);
  req.honour_direct = false;
  req.counts_tls_offset = tls_offset_;
  req.saves_all = arena_saves_all_[arena];
  // An ops that hooks returns for every thread: the trampoline calls its
  // entry callback and keeps the shadow stack itself (no wrapper between).
  // Under ThreadSanitizer the wrapper stays: TSan must see its accesses.
  const HookedOps* h = rec->hooked.get();
  if (h != nullptr && h->exit != nullptr && !h->threads && !kTsanShim) {
    req.ops = reinterpret_cast<uint64_t>(h->user);
    req.func = reinterpret_cast<uint64_t>(h->func);
    req.exit_record = reinterpret_cast<uint64_t>(h->exit);
    req.shadow_tls_offset = shadow_stack_tls_offset();
    req.shadow_prune = reinterpret_cast<uint64_t>(&ftjit_shadow_prune);
    req.shadow_push = reinterpret_cast<uint64_t>(&ftjit_shadow_push);
  }
  return req;
}

Result<uint64_t> Engine::generated_trampoline(OpsRecord* rec, CodeArena* arena) {
  auto it = rec->generated.find(arena);
  if (it != rec->generated.end()) return it->second;
  size_t bytes = 0;
  auto place = place_trampoline(backend_, arena, generated_request(rec, arena), &bytes);
  if (!place) return place;
  rec->generated[arena] = *place;
  note_trampoline(*place, bytes);
  return place;
}

Result<const std::vector<uint8_t>*> Engine::inline_template(InlineAction action, uint32_t sample_period) {
  if (action != InlineAction::kLatency || sample_period <= 1) sample_period = 0;
  const auto key = std::make_pair(action, sample_period);
  auto it = inline_templates_.find(key);
  if (it != inline_templates_.end()) return &it->second;
  InlineRequest req;
  req.action = action;
  req.block_tls_offset = inline_block_tls_offset();
  if (action == InlineAction::kLatency) {
    req.shadow_tls_offset = shadow_stack_tls_offset();
    req.exit_trampoline = exit_latency_landing_address();
    req.counts_tls_offset = tls_offset_;
    if (sample_period != 0) {
      req.sample_period = sample_period;
      req.pending_tls_offset = inline_pending_tls_offset();
    }
  }
  auto code = backend_.emit_inline_template(req);
  if (!code) return code.take_error();
  if (code->empty() || code->size() > kInlineTemplateMaxBytes) {
    return make_error(FTJIT_E_INTERNAL, "the emitter's inline trampoline has an impossible size");
  }
  return &(inline_templates_[key] = std::move(code.value()));
}

Result<uint64_t> Engine::place_inline(OpsRecord* rec, uint32_t index, CodeArena* arena) {
  const bool latency = rec->inline_action == InlineAction::kLatency;
  const uint32_t words = latency ? shadow_layout::kHistWords : 1;
  if (next_inline_slot_ + words > kInlineSlots) {
    return make_error(FTJIT_E_OUT_OF_RANGE, "inline counters exhausted");
  }
  auto tmpl = inline_template(rec->inline_action, rec->inline_sample);
  if (!tmpl) return tmpl.take_error();
  // The fallback: the ops' callback, behind ftjit_inline_first_call. It
  // saves FP registers whatever the ops says: the first call maps memory.
  uint64_t fallback = 0;
  auto fb = rec->inline_fallback.find(arena);
  if (fb != rec->inline_fallback.end()) {
    fallback = fb->second;
  } else {
    // Its generated trampoline (hooking returns for an exit callback, as
    // without inline work), calling the first-call path (which does
    // TSan's part itself).
    TrampolineRequest req = generated_request(rec, arena);
    req.func = reinterpret_cast<uint64_t>(&ftjit_inline_first_call);
    req.save_fp = true;
    size_t bytes = 0;
    auto place = place_trampoline(backend_, arena, req, &bytes);
    if (!place) return place;
    fallback = rec->inline_fallback[arena] = *place;
    note_trampoline(*place, bytes);
  }
  const std::vector<uint8_t>& code = **tmpl;
  const uint64_t place = arena->allocate(kInlineWordsBytes + code.size(), backend_.traits().code_align);
  if (place == 0) return make_error(FTJIT_E_OUT_OF_RANGE, "trampoline arena is full");
  const uint64_t start = place + kInlineWordsBytes;
  const uint32_t slot = next_inline_slot_;
  const uint64_t offset = uint64_t{slot} * sizeof(uint64_t);
  // kCount's word: its counter; kLatency's: its site's exit record, which
  // says where its histogram is.
  ExitRecord* record = latency ? make_inline_latency_record(sites_[index].entry, offset, rec->inline_sample) : nullptr;
  const uint64_t word = latency ? reinterpret_cast<uint64_t>(record) : offset;
  std::memcpy(arena->rw(start + kInlineOffsetWord), &word, 8);
  std::memcpy(arena->rw(start + kInlineFallbackWord), &fallback, 8);
  std::memcpy(arena->rw(start), code.data(), code.size());
  Status shown = publish_code(place, kInlineWordsBytes + code.size());
  if (!shown) {
    arena->free(place);
    if (record != nullptr) record->live.store(false, std::memory_order_release);
    return shown.take_error();
  }
  next_inline_slot_ += words;
  rec->inline_slots.push_back({sites_[index].entry, slot});
  if (record != nullptr) rec->inline_records.push_back(record);
  note_trampoline(place, kInlineWordsBytes + code.size());
  inline_used_ = true;
  return start;
}

std::vector<ftjit_inline_histogram> Engine::inline_histograms(
    const std::vector<std::pair<uint64_t, uint32_t>>& slots) const {
  namespace layout = shadow_layout;
  std::map<uint64_t, ftjit_inline_histogram> by_ip;
  for (const auto& [ip, slot] : slots) {
    ftjit_inline_histogram& h = by_ip[ip];
    h.ip = ip;
    // Each word read whole (its thread updates it with one instruction).
    for_each_inline_block([&](const uint64_t* block) {
      auto word = [&](int32_t i) { return __atomic_load_n(&block[slot + i], __ATOMIC_RELAXED); };
      h.total_ns += word(layout::kHistTotalNs);
      h.max_ns = std::max(h.max_ns, word(layout::kHistMaxNs));
      h.unwound += word(layout::kHistUnwound);
      for (int b = 0; b < layout::kHistBucketCount; ++b) {
        const uint64_t n = word(layout::kHistBuckets + b);
        h.buckets[b] += n;
        h.calls += n;
      }
    });
  }
  std::vector<ftjit_inline_histogram> out;
  for (const auto& [ip, h] : by_ip) {
    if (h.calls != 0 || h.unwound != 0) out.push_back(h);
  }
  return out;
}

std::vector<std::pair<uint64_t, uint64_t>> Engine::inline_totals(
    const std::vector<std::pair<uint64_t, uint32_t>>& slots, InlineAction action) const {
  if (action == InlineAction::kLatency) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (const ftjit_inline_histogram& h : inline_histograms(slots)) {
      if (h.calls != 0) out.push_back({h.ip, h.calls});
    }
    return out;
  }
  std::map<uint64_t, uint64_t> by_ip;
  for (const auto& [ip, slot] : slots) {
    const uint64_t n = inline_slot_total(slot);
    if (n != 0) by_ip[ip] += n;
  }
  return {by_ip.begin(), by_ip.end()};
}

Result<uint64_t> Engine::shared_trampoline(CodeArena* arena, int which) {
  auto& slots = shared_[arena];
  if (slots[which] != 0) return slots[which];
  const int index = which;
  TrampolineRequest req;
  req.counts_tls_offset = tls_offset_;
  req.saves_all = arena_saves_all_[arena];
  req.recursion_drops = reinterpret_cast<uint64_t>(&g_recursion_drops);
  req.exit_trampoline = exit_trampoline_address();
  req.real_return = reinterpret_cast<uint64_t>(&ftjit_shadow_real_return);
  req.honour_direct = true;
  req.entered_by_stub = which >= kByStub;
  req.call_and_land = exit_call_and_land_address();
  which %= kByStub;
  if (which == kListTrampoline) {
    req.source = OpsSource::kImmediate;
    req.func = reinterpret_cast<uint64_t>(&ftjit_list_dispatch);
  } else {
    req.source = OpsSource::kSiteSlot;
    if (kTsanShim) req.func = reinterpret_cast<uint64_t>(&ftjit_tsan_callback_shim);
    req.save_fp = which == kCallOpsTrampoline;
    req.honour_direct = which == kCallOpsTrampoline;
  }
  size_t bytes = 0;
  auto place = place_trampoline(backend_, arena, req, &bytes);
  if (!place) return place;
  slots[index] = *place;
  note_trampoline(*place, bytes);
  return place;
}


}  // namespace ftjit
