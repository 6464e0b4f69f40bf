// SPDX-License-Identifier: MIT
// Relocated entries: functions without a sled, traced through a stub whose
// sled is an ordinary site (runtime/engine.h, RelocatedFunction). The plan
// and the copy come from the generator (EntryRelocator: core's proof over
// the module's file); this file only places stubs, writes entries with
// every other thread parked, and writes them back.
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "core/function_selection.h"
#include "runtime/arch/arch.h"
#include "runtime/code_change.h"
#include "runtime/dlopen_watch.h"
#include "runtime/engine.h"
#include "runtime/file_mapping.h"
#include "runtime/ifunc_resolution.h"
#include "runtime/log.h"
#include "runtime/module_scan.h"
#include "runtime/relocation_traps.h"
#include "runtime/thread_control.h"

namespace ftjit {
namespace {

// A stub: ops slot, landing pad, sled (site_bytes), copy and branch back.
// The longest copy (x86-64: a few instructions, jcc rel8 grown to rel32)
// fits with room to spare.
constexpr uint32_t kStubBytes = 128;
constexpr uint32_t kSlotBytes = 8;
// Notes kept per attach; the rest are counted.
constexpr size_t kMaxNotes = 64;

// Functions whose call and return are not a call and a return (they
// return twice, never return, switch stacks or are entered with a
// convention of their own): an exit hook or even an entry count there is
// not what the program does. Never relocated.
bool never_relocated(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "_start", "__restore_rt", "__clone", "clone", "__clone3", "__clone_internal", "setjmp", "_setjmp",
      "__sigsetjmp", "sigsetjmp", "longjmp", "_longjmp", "siglongjmp", "__longjmp", "__longjmp_chk",
      "vfork", "__vfork", "getcontext", "setcontext", "swapcontext", "makecontext", "__start_context",
      "_exit", "_Exit", "exit", "abort", "pthread_exit", "__libc_start_main", "__libc_start_call_main"};
  // riscv64's millicode (-msave-restore: __riscv_save_N is called with
  // its return address in t0, which a relocated entry's branch and copy
  // use as their scratch).
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames) || name.starts_with("_dl_") ||
         name.starts_with("__riscv_save_") || name.starts_with("__riscv_restore_");
}

// ftjit's own objects (the agent, plugins, a shared libftjit) and the
// dynamic loader are never relocated: the engine runs their code while it
// writes, and the loader's entries have conventions of their own.
bool module_never_relocated(std::string_view base) {
  return base.starts_with("libftjit") || base.starts_with("ftjit-plugin-") || base.starts_with("ld-linux") ||
         base.starts_with("ld64.so") || base.starts_with("ld.so");
}

// Nor is ftjit's code where an embedder linked it in statically, nor what
// it brings (its code generators, logging, options).
bool own_function(std::string_view name, std::string_view demangled) {
  static constexpr std::string_view kOwn[] = {"ftjit::", "asmjit::", "llvm::", "spdlog::", "fmt::", "CLI::"};
  return name.starts_with("ftjit_") ||
         std::any_of(std::begin(kOwn), std::end(kOwn), [&](std::string_view p) { return demangled.starts_with(p); });
}

// Whether some include pattern of `filter` can match in module `base`.
bool filter_may_match_module(const Filter& filter, std::string_view base) {
  if (filter.includes().empty()) return true;
  return std::any_of(filter.includes().begin(), filter.includes().end(), [&](const NamePattern& p) {
    return p.module.empty() || glob_match(p.module, base);
  });
}

}  // namespace

std::vector<std::string> Engine::take_relocation_notes() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(relocation_notes_, {});
}

Status Engine::relocate_matching(const Filter& filter) {
  if (relocator_ == nullptr) {
    return make_error(FTJIT_E_UNSUPPORTED,
                      "this ftjit cannot relocate entries (no instruction decoder for " +
                          std::string(isa_name(backend_.traits().isa)) + " in this build, and no generator that has one)");
  }
  const IsaTraits& traits = backend_.traits();
  relocation_notes_.clear();  // this attach's
  size_t notes_dropped = 0;
  auto note = [&](std::string line) {
    if (relocation_notes_.size() < kMaxNotes) {
      relocation_notes_.push_back(std::move(line));
    } else {
      ++notes_dropped;
    }
  };
  // Entries already taken: a compiled sled, or a stub of an earlier attach.
  std::unordered_set<uint64_t> taken;
  for (const auto& m : modules_) {
    if (m->gone) continue;
    for (const DiscoveredSite& d : m->found) taken.insert(m->relocated ? 0 : (d.symbol() ? d.symbol() : d.entry));
  }
  for (const RelocatedFunction& f : relocated_) taken.insert(f.function);

  size_t made = 0;
  for (const LoadedObjectRef& obj : loaded_objects()) {
    const bool main_exe = obj.name.empty();
    if (!main_exe && obj.name.find('/') == std::string::npos) continue;  // the vDSO: no file
    const std::string path = main_exe ? self_exe_path() : obj.name;
    const std::string base(path_basename(path));
    if (!filter_may_match_module(filter, base) || module_never_relocated(base)) continue;
    auto cached = relocation_images_.find(path);
    if (cached == relocation_images_.end()) {
      auto file = FileMapping::open(main_exe ? "/proc/self/exe" : path);
      if (!file) continue;
      auto image = ElfImage::parse((*file)->bytes(), *file);
      if (!image) continue;
      cached = relocation_images_.emplace(path, std::make_unique<ElfImage>(std::move(image.value()))).first;
    }
    const ElfImage& image = *cached->second;
    if (image.isa() != traits.isa) continue;

    // The functions of this module the filter selects, one per address.
    struct Candidate {
      uint64_t entry;
      std::string name, demangled;
      std::string path;  // the module file holding `entry`, loaded at load_bias
      uint64_t load_bias;
    };
    std::vector<Candidate> wanted;
    for (SelectedFunction& fn : select_functions(image, filter, base)) {
      if (own_function(fn.named->name, fn.demangled)) continue;
      uint64_t entry = fn.symbol().value + obj.load_bias;
      std::string entry_path = path;
      uint64_t entry_bias = obj.load_bias;
      // An IFUNC: traced at the implementation this process uses, under
      // the IFUNC's name; two IFUNCs of one implementation make one site.
      auto ifunc = std::find_if(fn.symbols.begin(), fn.symbols.end(), [](const ElfSymbol& s) { return s.ifunc; });
      if (ifunc != fn.symbols.end()) {
        auto impl = ifunc_implementation(path, main_exe ? "/proc/self/exe" : path, obj.load_bias, image, *ifunc,
                                         traits.reloc_irelative);
        if (!impl) {
          note(base + "!" + std::string(fn.named->name) + ": not relocated: an IFUNC: " + impl.error().message);
          continue;
        }
        if (taken.count(impl->address) == 0)
          note(base + "!" + std::string(fn.named->name) + ": an IFUNC, whose implementation here is " + impl->describe);
        entry = impl->address;
        entry_path = std::move(impl->path);
        entry_bias = impl->load_bias;
      }
      if (!taken.insert(entry).second) continue;
      bool special = false;
      for (const ElfSymbol& s : fn.symbols) special |= never_relocated(s.name);
      if (special) {
        note(base + "!" + std::string(fn.named->name) + ": not relocated: it returns twice, never returns or switches stacks");
        continue;
      }
      wanted.push_back({entry, std::string(fn.named->name), std::move(fn.demangled), std::move(entry_path), entry_bias});
    }
    if (wanted.empty()) continue;

    // Stubs, grouped by the arena that holds them: one relocation module
    // per arena (ModuleRecord::arena serves every site of a module).
    ModuleRecord probe;
    probe.evidence_abi = false;  // a file without sleds says nothing of its callers
    const bool saves_all = module_saves_all(probe);
    std::map<CodeArena*, std::vector<RelocatedFunction>> by_arena;
    std::map<CodeArena*, DiscoveredModule> modules;
    for (Candidate& c : wanted) {
      // Within the shorter branch's reach where there is room (riscv64: a
      // jal, 4 bytes overwritten rather than 8), else the call's.
      auto arena = arena_for(c.entry, saves_all, traits.short_entry_reach);
      uint64_t stub = arena ? arena.value()->allocate(kStubBytes, 16) : 0;
      if (stub == 0 && traits.short_entry_reach != 0) {
        arena = arena_for(c.entry, saves_all);
        stub = arena ? arena.value()->allocate(kStubBytes, 16) : 0;
      }
      if (!arena) {
        note(base + "!" + c.name + ": not relocated: no stub memory in reach: " + arena.error().message);
        continue;
      }
      if (stub == 0) {
        note(base + "!" + c.name + ": not relocated: no stub memory in reach (arena full)");
        continue;
      }
      const uint64_t symbol = stub + kSlotBytes;
      const uint64_t sled = symbol + traits.landing_pad_bytes;
      const uint64_t copy = sled + traits.site_bytes;
      RelocationRequest req;
      req.path = c.path;
      req.load_bias = c.load_bias;
      req.entry = c.entry;
      req.place = copy;
      req.max_bytes = static_cast<uint32_t>(stub + kStubBytes - copy);
      req.stub = symbol;
      auto reloc = relocator_->relocate_entry(req);
      if (reloc && std::memcmp(reinterpret_cast<const void*>(reloc->patch_at), reloc->original.data(),
                               reloc->original.size()) != 0) {
        reloc = make_error(FTJIT_E_UNEXPECTED_BYTES,
                           "changed: its first bytes in memory are not the file's (patched by someone else?)");
      }
      if (reloc && reloc->before_sled.size() > traits.landing_pad_bytes) {
        reloc = make_error(FTJIT_E_INTERNAL, "what its stub must run before the sled does not fit");
      }
      if (reloc && (reloc->branch.empty() || reloc->branch.size() > reloc->overwritten)) {
        reloc = make_error(FTJIT_E_INTERNAL, "the generator gave no branch for its entry");
      }
      if (!reloc) {
        arena.value()->free(stub);
        note(base + "!" + c.name + ": not relocated: " + reloc.error().message);
        continue;
      }
      // The stub, while nothing reaches it yet.
      uint8_t* rw = arena.value()->rw(stub);
      arch::fill_with_traps(rw, kStubBytes);
      std::memset(rw, 0, kSlotBytes);
      // The landing pad, or in its place what must run before the tracer
      // (arm64: autiasp). A stub is only ever reached by its function's
      // direct branch, which needs no landing pad; it has one for those
      // who look, and the size of one keeps the ops slot where the
      // ISA's call-ops trampoline finds it from the return address
      // (arm64: the "=4,2 behind bti c" layout).
      if (!reloc->before_sled.empty()) {
        std::memcpy(rw + kSlotBytes, reloc->before_sled.data(), reloc->before_sled.size());
      } else {
        std::memcpy(rw + kSlotBytes, traits.landing_pad, traits.landing_pad_bytes);
      }
      // The sled as a compiler leaves it where the ISA's init is its
      // module's (riscv64: the auipc to the module's site stubs, written
      // when the site is first used, as at any sled); else initialised.
      const Insn init = backend_.encode_init();
      if (init.size != 0) {
        std::memcpy(rw + (sled - stub), init.bytes, traits.site_bytes);
      } else {
        const Insn nop = backend_.encode_nop();
        for (uint32_t k = 0; nop.size != 0 && k + nop.size <= traits.site_bytes; k += nop.size)
          std::memcpy(rw + (sled - stub) + k, nop.bytes, nop.size);
      }
      std::memcpy(rw + (copy - stub), reloc->bytes.data(), reloc->bytes.size());
      FTJIT_TRY(publish_code(stub, kStubBytes));

      RelocatedFunction f;
      f.function = c.entry;
      f.arena = arena.value();
      f.stub = stub;
      f.sled = sled;
      f.reloc = std::move(reloc.value());
      // Written at the entry: the branch to the stub's first instruction
      // (its landing pad, or what stands in its place), then the sled;
      // traps after it.
      f.branch_bytes = static_cast<uint32_t>(f.reloc.branch.size());
      f.written.assign(f.reloc.overwritten, 0);
      arch::fill_with_traps(f.written.data(), f.written.size());
      std::memcpy(f.written.data(), f.reloc.branch.data(), f.reloc.branch.size());

      DiscoveredModule& dm = modules[arena.value()];
      DiscoveredSite d;
      d.entry = sled;  // record() too: prefix 0
      d.named = true;  // symbol(): sled - pad
      d.slot = stub;
      d.slot_state = OpsSlot::kAligned;
      d.pad_bytes = traits.landing_pad_bytes;
      d.name = dm.names.keep(std::move(c.name));
      if (!c.demangled.empty()) d.demangled = dm.names.keep(std::move(c.demangled));
      dm.path = path;
      dm.load_bias = obj.load_bias;
      dm.isa = traits.isa;
      dm.has_patchable_section = true;
      dm.sites.push_back(std::move(d));
      by_arena[arena.value()].push_back(std::move(f));
    }

    for (auto& [arena, functions] : by_arena) {
      // Write the entries: every other thread parked, a pc inside the
      // overwritten bytes moved to the same instruction in the copy. A
      // handler's frame that stays inside them fails the batch; then each
      // entry alone, refusing the ones it holds.
      auto write_entries = [&](std::span<RelocatedFunction> batch) -> Status {
        return with_modules_pinned([&]() -> Status {
          std::vector<uint8_t*> rws;
          for (RelocatedFunction& f : batch) {
            auto rw = writable(f.reloc.patch_at, f.reloc.overwritten);
            if (!rw) return rw.take_error();
            rws.push_back(rw.value());
          }
          auto fixup = [&](uint64_t pc) -> uint64_t {
            for (const RelocatedFunction& f : batch) {
              if (pc <= f.reloc.patch_at || pc >= f.reloc.patch_at + f.reloc.overwritten) continue;
              for (const auto& [from, to] : f.reloc.moved_to) {
                if (from == pc) return to;
              }
            }
            return 0;
          };
          auto body = [&] {
            for (size_t k = 0; k < batch.size(); ++k) {
              std::memcpy(rws[k], batch[k].written.data(), batch[k].written.size());
              arch::flush_icache(batch[k].reloc.patch_at, batch[k].written.size());
            }
            std::atomic_thread_fence(std::memory_order_seq_cst);
          };
          FTJIT_TRY(stop_the_world(fixup, body, /*strict=*/true));
          for (const RelocatedFunction& f : batch) {
            Status st = publish_code(f.reloc.patch_at, f.reloc.overwritten);
            if (!st) ftjit::log().error("ftjit: {}", st.error().message);
          }
          return {};
        });
      };
      std::vector<RelocatedFunction> placed;
      DiscoveredModule& dm = modules[arena];
      BulkVector<DiscoveredSite> sites;
      Status all = write_entries(functions);
      for (size_t k = 0; k < functions.size(); ++k) {
        RelocatedFunction& f = functions[k];
        if (!all) {
          Status one = write_entries({&f, 1});
          if (!one) {
            note(base + "!" + std::string(dm.sites[k].name) + ": not relocated: " + one.error().message);
            arena->free(f.stub);
            continue;
          }
        }
        sites.push_back(std::move(dm.sites[k]));
        placed.push_back(std::move(f));
      }
      if (placed.empty()) continue;
      dm.sites = std::move(sites);
      std::sort(dm.sites.begin(), dm.sites.end(),
                [](const DiscoveredSite& a, const DiscoveredSite& b) { return a.entry < b.entry; });
      const uint32_t mi = add_module_record(std::move(dm), true);
      modules_[mi]->arena = arena;
      modules_[mi]->main_executable = main_exe;
      const uint64_t trap_pc_offset = backend_.live_protocol().trap_pc_offset;
      for (RelocatedFunction& f : placed) {
        f.module = mi;
        // A leftover byte that starts an instruction traps to its copy.
        for (const auto& [from, to] : f.reloc.moved_to) {
          if (trap_pc_offset != 0 && from >= f.reloc.patch_at + f.branch_bytes) add_relocation_trap(from + trap_pc_offset, to);
        }
        ++made;
        relocated_.push_back(std::move(f));
      }
    }
  }
  if (notes_dropped != 0) relocation_notes_.push_back(std::to_string(notes_dropped) + " more not relocated");
  for (const std::string& line : relocation_notes_) ftjit::log().info("ftjit: {}", line);
  ftjit::log().debug("ftjit: {} entries relocated", made);
  return {};
}

Status Engine::unrelocate_idle() {
  std::vector<uint32_t> idle;
  for (uint32_t mi = 0; mi < modules_.size(); ++mi) {
    const ModuleRecord& m = *modules_[mi];
    if (!m.relocated || m.gone) continue;
    bool used = false;
    for (uint32_t i = m.first_site; i < m.first_site + m.found.size(); ++i) used |= !sites_[i].ops.empty();
    if (!used) idle.push_back(mi);
  }
  if (idle.empty()) return {};
  auto is_idle = [&](const RelocatedFunction& f) {
    return std::find(idle.begin(), idle.end(), f.module) != idle.end();
  };
  FTJIT_TRY(with_modules_pinned([&]() -> Status {
    std::vector<std::pair<const RelocatedFunction*, uint8_t*>> writes;
    for (const RelocatedFunction& f : relocated_) {
      if (!is_idle(f) || modules_[f.module]->gone) continue;
      auto rw = writable(f.reloc.patch_at, f.reloc.overwritten);
      if (!rw) return rw.take_error();
      if (std::memcmp(reinterpret_cast<const void*>(f.reloc.patch_at), f.written.data(), f.written.size()) != 0) {
        return make_error(FTJIT_E_UNEXPECTED_BYTES, "relocated entry " + format_hex(f.function) +
                                                        ": its branch was changed by someone else; nothing was restored");
      }
      writes.push_back({&f, rw.value()});
    }
    // No pc needs moving: a thread inside a copy runs on into the original
    // code after the written-back bytes, which never changed; the stub is
    // freed after a grace period that waits for it.
    auto body = [&] {
      for (const auto& [f, rw] : writes) {
        std::memcpy(rw, f->reloc.original.data(), f->reloc.original.size());
        arch::flush_icache(f->reloc.patch_at, f->reloc.original.size());
      }
      std::atomic_thread_fence(std::memory_order_seq_cst);
    };
    FTJIT_TRY(stop_the_world([](uint64_t) -> uint64_t { return 0; }, body));
    for (const auto& [f, rw] : writes) {
      Status st = publish_code(f->reloc.patch_at, f->reloc.original.size());
      if (!st) ftjit::log().error("ftjit: {}", st.error().message);
    }
    return {};
  }));
  for (uint32_t mi : idle) forget_relocations(mi);
  return {};
}

void Engine::forget_relocations(uint32_t module) {
  ModuleRecord& m = *modules_[module];
  const uint64_t trap_pc_offset = backend_.live_protocol().trap_pc_offset;
  for (auto it = relocated_.begin(); it != relocated_.end();) {
    if (it->module != module) {
      ++it;
      continue;
    }
    for (const auto& [from, to] : it->reloc.moved_to) remove_relocation_trap(from + trap_pc_offset);
    retired_.stubs.push_back({it->arena, it->stub});
    it = relocated_.erase(it);
  }
  if (!m.gone) {
    m.gone = true;
    clear_module_sites(m);
  }
  // Its sites' stubs (riscv64: a mirror of its stubs' span), freed after a
  // grace period like the stubs: an attach/detach cycle must not leave one
  // mapped each time.
  for (auto it = stub_arenas_.begin(); m.stubs != nullptr && it != stub_arenas_.end(); ++it) {
    if (it->get() != m.stubs) continue;
    retired_.arenas.push_back(std::move(*it));
    stub_arenas_.erase(it);
    break;
  }
  m.stubs = nullptr;
}

void Engine::clear_module_sites(const ModuleRecord& m) {
  for (uint32_t i = m.first_site; i < m.first_site + m.found.size(); ++i) {
    SiteRecord& s = sites_[i];
    if (s.applied.call != 0) --sites_enabled_;
    s.ops = SiteOps();
    s.applied = SiteTarget{};
    s.route = Route::kNone;
    s.initialized = false;
    s.usable = false;
    if (auto mux = muxes_.find(i); mux != muxes_.end()) {
      retired_.muxes.push_back(std::move(mux->second));
      muxes_.erase(mux);
    }
  }
}

}  // namespace ftjit
