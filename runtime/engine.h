// SPDX-License-Identifier: MIT
// The in-process engine: sites of every loaded module, the ops attached to
// them, and the commit of every change (plan in core/, encode in the
// backend, write here). One engine per process.
#pragma once

#include <array>
#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <unordered_map>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "core/filter.h"
#include "core/planner.h"
#include "core/site.h"
#include "ftjit/ftjit.h"
#include "runtime/code_memory.h"
#include "runtime/dispatch.h"
#include "runtime/hooked_ops.h"
#include "runtime/patcher.h"
#include "runtime/sync.h"

namespace ftjit {

struct OpsRecord;

// The ops attached to one site, in attach order, in one word: an OpsRecord*
// when there is one (most sites), else a tagged pointer to a vector. A
// million sites must not mean a million vectors, nor 16 bytes each.
class SiteOps {
 public:
  SiteOps() = default;
  ~SiteOps() { delete many(); }
  SiteOps(SiteOps&& o) noexcept : v_(o.v_) { o.v_ = 0; }
  SiteOps& operator=(SiteOps&& o) noexcept {
    std::swap(v_, o.v_);
    return *this;
  }
  size_t size() const { return many() ? many()->size() : (v_ ? 1 : 0); }
  bool empty() const { return v_ == 0; }
  OpsRecord* operator[](size_t i) const {
    return many() ? (*many())[i] : reinterpret_cast<OpsRecord*>(v_);
  }
  void add(OpsRecord* r);
  void remove(OpsRecord* r);

 private:
  static constexpr uintptr_t kMany = 1;
  std::vector<OpsRecord*>* many() const {
    return (v_ & kMany) ? reinterpret_cast<std::vector<OpsRecord*>*>(v_ & ~kMany) : nullptr;
  }
  uintptr_t v_ = 0;
};

// What the engine keeps per site (ftrace: dyn_ftrace), split hot and cold:
// a commit walks the hot records of every site it changes, so they are
// kept to 48 bytes (the site's original bytes fill what would be padding:
// traits().site_bytes, at most 8); names and the original slot live in
// SiteOrigin.
struct SiteRecord {
  uint64_t entry = 0;
  SiteTarget applied;          // what the site calls / its slot holds now
  SiteOps ops;                 // desired
  uint32_t module = 0;
  Route route = Route::kNone;  // the route `applied` implements
  SledKind original_kind = SledKind::kUnknown;
  bool has_slot : 1 = false;     // aligned 8-byte ops slot before the entry
  bool usable : 1 = false;       // the entry holds a sled we know
  bool initialized : 1 = false;  // the fixed part is written (encode_init)
  uint8_t original[8] = {};    // site bytes as discovered
};
static_assert(sizeof(SiteRecord) == 48);

// What a site's ops slot held before ftjit touched it. Its names and
// where the slot is are the module record's (Engine::found_of, slot_at):
// a million sites are 8 MB here, not 24.
struct SiteOrigin {
  uint64_t original_slot = 0;  // slot bytes as discovered
};

struct OpsRecord {
  ftjit_ops* ops = nullptr;
  // What trampolines, slots and list tables are given: `ops` itself, or
  // its wrapper when it has an exit callback or a thread filter.
  ftjit_ops* target = nullptr;
  std::unique_ptr<HookedOps> hooked;
  // Whether it hooks returns: its sites are then entered through stubs.
  bool hooks_returns() const { return hooked && hooked->exit != nullptr; }
  // Once detached: frames it hooked may return long after, silently.
  void silence_exits() {
    if (hooked && hooked->exit) hooked->exit->live.store(false, std::memory_order_release);
    for (ExitRecord* r : inline_records) r->live.store(false, std::memory_order_release);
  }
  ftjit_strategy strategy = FTJIT_STRATEGY_AUTO;  // resolved against the engine default
  Filter filter;
  // Paused (set_paused): no site patched for it, its filter kept, new
  // modules' sites left alone until it resumes.
  bool paused = false;
  std::vector<uint32_t> sites;  // sorted site indices
  std::map<CodeArena*, uint64_t> generated;  // its trampoline in each arena
  // Inline work (ftjit_ops.inline_entry) the backend compiles: its sites
  // get kInline routes, each with a trampoline of its own whose fallback
  // is `inline_fallback` (a generated trampoline calling
  // ftjit_inline_first_call) in the site's arena.
  bool inline_ok = false;
  InlineAction inline_action = InlineAction::kCount;
  uint32_t inline_sample = 0;  // kLatency: 1 call in N timed (ftjit_ops.inline_sample; 0: every call)
  std::map<CodeArena*, uint64_t> inline_fallback;
  // Every (site entry, counter slot) it was given, kept after the site
  // left: the counts of a site detached and attached again add up.
  // (kLatency: the first of its histogram's kHistWords slots.)
  std::vector<std::pair<uint64_t, uint32_t>> inline_slots;
  // kLatency: each site's exit record (shadow_layout.h, kKindInlineLatency).
  std::vector<ExitRecord*> inline_records;
  std::unique_ptr<IpSet> ips;   // published when it serves a list-routed site
};

struct ModuleRecord {
  CodeArena* arena = nullptr;  // trampoline memory within reach of it all
  // The stubs of its sites (backends/backend.h, StubUse), made when the
  // first site needs one (x86-64: an exit hook on it; riscv64: any call);
  // each written the first time its site needs it, then never changed
  // (only its word is). kHookedReturns: one per site in site order;
  // kEverySite: each at its site's entry + stub_delta, the module's sites
  // then all written with site_code.
  CodeArena* stubs = nullptr;
  std::vector<bool> stub_written;
  int64_t stub_delta = 0;
  SiteCode site_code;
  std::string path;
  std::string base;  // basename, what filters match
  // What its trampolines keep (core/register_evidence.h): its evidence,
  // and the decision under the engine's ftjit_saves; `arena` holds
  // trampolines of that kind.
  bool evidence_abi = false;
  std::string evidence_why;
  bool saves_all = true;
  uint64_t load_bias = 0;
  // Unloaded (dlclose): its sites are never selected nor written again.
  bool gone = false;
  // Its sites are the sleds of stubs that relocated entries of `path`'s
  // functions reach (runtime/engine_relocation.cpp), not the file's own.
  bool relocated = false;
  // A relocation module of the main executable (which the loader lists
  // without a name).
  bool main_executable = false;
  BulkVector<DiscoveredSite> found;  // never changes once added
  SiteNames site_names;               // what found's names view
  uint32_t first_site = 0;            // its sites: [first_site, +found.size())
  // The same names packed in one buffer, in site order, so that selection
  // walks them sequentially: found's names lie in the string table's
  // order, and reading them in site order misses the cache for nearly
  // every site. Packed by the first selection that reads the module (a
  // filter scoped to another module never does), not at discovery, which
  // a million sites would slow by as much. Guarded by the engine's mu_.
  struct NameRef {
    uint32_t name_at, demangled_at;
    uint16_t name_len, demangled_len;  // demangled_len 0: same as the name
  };
  mutable BulkString name_pool;
  mutable BulkVector<NameRef> names;
};

// A read-only view of one site for status output and tests.
struct SiteInfo {
  uint64_t entry;
  std::string_view name;       // NUL-terminated in memory (site names are)
  std::string_view demangled;
  const std::string* module;
  Route route;
  uint64_t call_target;
  size_t n_ops;
};

class Engine {
 public:
  // An engine whose sites are encoded, and trampolines emitted, by
  // `backend` (which outlives every engine).
  static Result<std::unique_ptr<Engine>> create(const ftjit_engine_options& options,
                                                const Backend& backend);
  // Who plans and copies relocated entries (FTJIT_OPS_F_RELOCATE); none:
  // such an attach fails, saying why.
  void set_entry_relocator(const EntryRelocator* relocator) { relocator_ = relocator; }
  // One line per function an attach could not relocate, and why (taken:
  // the CLI shows them as warnings).
  std::vector<std::string> take_relocation_notes();
  ~Engine();

  // Attaches `ops` to the sites `filter` selects. Fails, changing nothing, if
  // the filter selects nothing, the ops is attached already, a strategy
  // cannot serve a selected site, or a selected sled is not as expected.
  Status attach(ftjit_ops* ops, const Filter& filter);
  // Changes the sites of an attached ops; same failure rules as attach.
  Status set_filter(ftjit_ops* ops, const Filter& filter);
  // Unpatches every site of `ops` (one batch), which stays attached: the
  // frames it hooked still return through its exit, its inline counts are
  // kept; resuming patches what its filter selects now.
  Status set_paused(ftjit_ops* ops, bool paused);
  // Detaches `ops` and waits for a grace period before returning.
  Status detach(ftjit_ops* ops);
  // A grace period with nothing retired: returns once every thread that was
  // inside a callback at the call has left it; threads entering one later
  // see what the caller wrote before. Not from a callback.
  Status wait_for_callbacks();
  // Re-reads loaded modules; returns the number of new sites. Modules
  // unloaded since are forgotten; the sites of new ones are given to every
  // attached ops whose filter selects them (runtime/dlopen_watch.cpp).
  Result<size_t> refresh_modules();
  // The dlopen watch's notification, after dlopen/dlmopen/dlclose returned.
  void loader_changed();

  long site_count(const ftjit_ops* ops) const;
  // ftjit_engine_set_saves; `warnings`: a line per module forced to the
  // psABI's set against its evidence.
  Status set_saves(ftjit_saves saves, std::vector<std::string>* warnings);
  // Each module with sites: (basename, keeps every register?, why).
  std::vector<std::tuple<std::string, bool, std::string>> module_saves() const;
  // ftjit_inline_read: (ip, total) of each site of `ops` with a nonzero
  // count, live or, once detached, final. -1 if it was never attached.
  long inline_read(const ftjit_ops* ops, ftjit_inline_visit_fn visit, void* arg) const;
  // ftjit_inline_read_histograms: likewise, each site's latency histogram.
  long inline_read_histograms(const ftjit_ops* ops, ftjit_inline_histogram_fn visit, void* arg) const;
  ftjit_stats stats() const;
  std::vector<SiteInfo> sites() const;
  // Demangled name of the site at `entry`, nullptr if none. Stable while
  // the engine lives (sites are never removed).
  // The site's shown name, NUL-terminated; nullptr if no site is there.
  const char* site_name(uint64_t entry) const;
  const Backend& backend() const { return backend_; }

 private:
  Engine(const Backend& backend, const ftjit_engine_options& options);
  Status add_modules(std::vector<DiscoveredModule> modules);
  // One module's record and its sites (add_modules; relocation modules).
  uint32_t add_module_record(DiscoveredModule m, bool relocated);

  // Relocated entries (runtime/engine_relocation.cpp). A function without
  // a sled that an FTJIT_OPS_F_RELOCATE attach selects gets a stub in
  // trampoline memory within branch reach:
  //
  //   stub  [ ops slot (8) ][ landing pad ][ sled ][ after ]
  //         [ copy of the first instructions, relocated ][ branch back to
  //           patch_at+overwritten ]
  //
  // (arm64, after a paciasp at the entry: autiasp in the landing pad's
  // place and paciasp `after` (RelocatedEntry::before_sled, the start of
  // its bytes): the tracer sees the return address plain, and an exit
  // hook's replacement is signed for the function's autiasp.)
  //
  // and its first instructions become one branch to the stub's sled,
  // which is a site of a relocation module (ModuleRecord::relocated) like
  // any compiled one: every route, plugin and exit hook works on it. When
  // no ops is attached to it any more, its bytes are written back and the
  // stub is freed after a grace period.
  struct RelocatedFunction {
    uint32_t module = 0;  // its relocation module
    uint64_t function = 0;  // the symbol
    RelocatedEntry reloc;
    CodeArena* arena = nullptr;
    uint64_t stub = 0;
    uint64_t sled = 0;
    uint32_t branch_bytes = 0;     // of the branch at patch_at; traps follow
    std::vector<uint8_t> written;  // what [patch_at, +overwritten) holds now
  };
  // Relocates the functions without a sled that `filter` selects and no
  // relocation module holds yet; the refused ones go to relocation_notes_.
  Status relocate_matching(const Filter& filter);
  // Writes back the entries of relocation modules none of whose sites
  // has an ops, and retires their stubs (in a code-change scope).
  Status unrelocate_idle();
  // Forgets (without writing) the relocated entries of module `module`
  // and retires their stubs; marks it gone if it is not.
  void forget_relocations(uint32_t module);
  // Every site of a gone module back to nothing (no ops, not written
  // again), its multiplexers retired.
  void clear_module_sites(const ModuleRecord& m);
  // Over modules [first_module, end_module); for a part of them, selecting
  // nothing is no error.
  Result<std::vector<uint32_t>> select_sites(const Filter& filter, size_t first_module = 0,
                                             size_t end_module = SIZE_MAX) const;
  // runtime/dlopen_watch.cpp: refresh_modules() with mu_ held, forgetting
  // unloaded modules, attaching new sites to the ops whose filter wants them.
  Result<size_t> refresh_locked();
  void forget_unloaded_modules();
  void attach_new_sites(size_t first_module);
  struct TrampolineCache;
  // One changed site of a commit: where it goes and how.
  struct Planned {
    uint32_t site;
    Route old_route;
    bool old_initialized;
    SiteTarget old_applied;
    std::unique_ptr<SiteMux> mux;  // the new multiplexer, if any
    bool placed_inline = false;    // a new inline trampoline (inline_code_)
  };
  Result<SiteTarget> plan_site(uint32_t index, Route route, TrampolineCache* cache,
                               std::unique_ptr<SiteMux>* mux);
  std::string site_label(uint32_t index) const;
  // Moves `rec` from old_sites to new_sites (both sorted). On success
  // rec->sites holds new_sites; on failure the caller still owns old_sites.
  // Runs in a code-change scope (runtime/code_change.h): sites of modules
  // unloaded meanwhile are dropped from both lists, never touched.
  Status commit(OpsRecord* rec, const std::vector<uint32_t>& old_sites,
                std::vector<uint32_t> new_sites);
  // commit()'s work, inside the scope. *grace_after: a grace period is due
  // (it may not wait inside the scope).
  Status commit_in_scope(OpsRecord* rec, const std::vector<uint32_t>& old_sites,
                         std::vector<uint32_t> new_sites, bool* grace_after);
  // Every initialized sled of a site that calls nothing back to the
  // compiler's bytes, slots too (after a grace period; in a scope).
  Status restore_original_sleds();
  Status restore_original_sleds_in_scope();
  // Runs `body` in a code-change scope (runtime/code_change.h) after
  // forgetting every module the loader unloaded since the last check: in
  // `body` every module not marked gone is mapped, and stays so. The only
  // way the engine reads or writes module code or the mappings over it.
  Status with_modules_pinned(const std::function<Status()>& body);
  // Removes the sites of gone modules from `sites` (sorted).
  void drop_gone_sites(std::vector<uint32_t>* sites) const;
  // Trampoline memory within reach of `entry`, whose trampolines keep
  // every call-clobbered register (saves_all) or the psABI's only; within
  // `prefer_reach` of it where there is or can be (a relocated entry's
  // shorter branch: IsaTraits::short_entry_reach).
  Result<CodeArena*> arena_for(uint64_t entry, bool saves_all, int64_t prefer_reach = 0);
  bool module_saves_all(const ModuleRecord& m) const;
  Result<uint64_t> generated_trampoline(OpsRecord* rec, CodeArena* arena);
  // What `rec`'s generated trampoline in `arena` is emitted from.
  TrampolineRequest generated_request(const OpsRecord* rec, CodeArena* arena);
  // Counts a trampoline placed at `place` (stats, and its size for retiring).
  void note_trampoline(uint64_t place, size_t bytes);
  // Frees what note_trampoline counted (no thread can reach it any more).
  void free_trampoline(CodeArena* arena, uint64_t place);
  Result<uint64_t> shared_trampoline(CodeArena* arena, int which);
  // The emitted code every inline trampoline of `action` copies, emitted
  // on first use (FTJIT_E_UNSUPPORTED where the ISA compiles none).
  Result<const std::vector<uint8_t>*> inline_template(InlineAction action, uint32_t sample_period);
  // Site `index`'s own inline trampoline for `rec` (a new counter slot,
  // its words written), in `arena`; its address (after the words).
  Result<uint64_t> place_inline(OpsRecord* rec, uint32_t index, CodeArena* arena);
  // Attach's check of an ops' inline work (ftjit_ops.inline_entry): its
  // action compiled by the backend, or an error naming why not.
  Status prepare_inline(OpsRecord* rec);
  // (ip, slot) pairs summed over threads, merged per ip, nonzero only.
  // Each site's histogram of a kLatency ops' slots, merged over threads
  // (and over the slots one site had), sites without calls left out.
  std::vector<ftjit_inline_histogram> inline_histograms(
      const std::vector<std::pair<uint64_t, uint32_t>>& slots) const;
  // (ip, calls) of each site with any, of an ops whose inline work is
  // `action`.
  std::vector<std::pair<uint64_t, uint64_t>> inline_totals(
      const std::vector<std::pair<uint64_t, uint32_t>>& slots, InlineAction action) const;
  Result<uint8_t*> writable(uint64_t addr, size_t n);
  // The writable alias of [addr, addr+n) if it lies in the alias used last;
  // nullptr otherwise (then ask writable()).
  uint8_t* writable_fast(uint64_t addr, size_t n) const {
    return last_alias_ != nullptr && last_alias_->contains(addr, n) ? last_alias_->rw(addr) : nullptr;
  }
  // The stub of site `index` (its module's stubs exist).
  uint64_t stub_of(uint32_t index) const {
    const SiteRecord& s = sites_[index];
    const ModuleRecord& m = *modules_[s.module];
    if (backend_.traits().stub_use == StubUse::kEverySite) return s.entry + static_cast<uint64_t>(m.stub_delta);
    return m.stubs->lo() + uint64_t{index - m.first_site} * backend_.traits().stub_bytes;
  }
  // Sites call their stubs always (riscv64), not only for hooked returns.
  bool every_site_via_stub() const { return backend_.traits().stub_use == StubUse::kEverySite; }
  // What site `index`'s init writes (its fixed part, the live part
  // disabled): one word for the ISA, or its module's (kEverySite).
  Insn init_of(uint32_t index) const {
    return every_site_via_stub() ? modules_[sites_[index].module]->site_code.init : init_;
  }
  // Makes site `index`'s stub (and its module's stub memory) if missing;
  // returns the writable alias of its word.
  Result<uint64_t*> stub_word(uint32_t index);
  // What site `index` holds when it calls `call` (0: its disabled state).
  Insn encoded(uint32_t index, uint64_t call) const {
    const SiteRecord& s = sites_[index];
    if (call != 0) {
      Insn insn;
      // In reach: encoded once already.
      const SiteTarget t{call, 0};
      const uint64_t at = s.entry + backend_.traits().live_offset;
      if (t.via_stub() && every_site_via_stub()) {
        insn = modules_[s.module]->site_code.call;
      } else if (t.via_stub()) {
        backend_.encode_jump(at, stub_of(index), &insn);
      } else {
        backend_.encode_call(at, call, &insn);
      }
      return insn;
    }
    // Until the one-time init the live part holds what the compiler wrote
    // (a NOP sled, or a single NOP of its own choosing): restore exactly
    // that.
    if (s.initialized) return nop_;
    Insn orig = nop_;
    std::memcpy(orig.bytes, s.original + backend_.traits().live_offset, orig.size);
    return orig;
  }
  // What discovery found of site `index`.
  const DiscoveredSite& found_of(uint32_t index) const {
    const ModuleRecord& m = *modules_[sites_[index].module];
    return m.found[index - m.first_site];
  }
  // Where site `index`'s ops slot is (0: none): just before the symbol,
  // which a landing pad puts 4 bytes before the entry (core/site.h), so
  // not always entry - slot_bytes.
  uint64_t slot_at(uint32_t index) const;
  std::string_view name_of(uint32_t index) const { return found_of(index).name; }
  std::string_view demangled_of(uint32_t index) const { return found_of(index).shown_name(); }
  Status release_after_grace();
  Status may_change(const char* what, bool needs_modules);
  Status release_if_much_retired();
  bool in_trampoline_memory(uint64_t pc) const;
  OpsRecord* find(const ftjit_ops* ops) const;
  // Index of the site whose entry is `entry`, or -1.
  long find_site(uint64_t entry) const;

  static constexpr int kListTrampoline = 0;
  static constexpr int kCallOpsTrampoline = 1;
  static constexpr int kCallOpsNoFpTrampoline = 2;
  // Each of the three entered by a site's stub (exit hooks): + kByStub.
  static constexpr int kByStub = 3;

  const Backend& backend_;
  const Insn nop_;   // backend_.encode_nop(), asked once
  const Insn init_;  // backend_.encode_init(), asked once
  ftjit_engine_options options_;
  mutable std::mutex mu_;
  CoreSync sync_;
  Patcher patcher_;
  std::vector<std::unique_ptr<ModuleRecord>> modules_;
  std::vector<std::string> modules_without_sites_;  // basenames, for messages
  BulkVector<SiteRecord> sites_;    // per module, in entry order
  BulkVector<SiteOrigin> origins_;  // parallel to sites_
  std::unordered_map<uint32_t, std::unique_ptr<SiteMux>> muxes_;  // by site
  uint64_t sites_dirty_ = 0;  // initialized or slot written: restore work
  uint64_t sites_enabled_ = 0;
  uint64_t modules_generation_ = 0;
  // The loader's generation when unloaded modules were last looked for
  // inside a code-change scope (with_modules_pinned).
  uint64_t unloads_checked_at_ = UINT64_MAX;
  uint64_t dlopen_refreshes_ = 0;
  uint64_t dlopen_patch_ns_ = 0;
  uint64_t modules_unloaded_ = 0;
  uint64_t new_module_skips_ = 0;
  std::vector<std::unique_ptr<OpsRecord>> ops_;
  const EntryRelocator* relocator_ = nullptr;
  std::vector<RelocatedFunction> relocated_;
  std::vector<std::string> relocation_notes_;
  // Parsed module files, for the symbols relocation selects from.
  std::map<std::string, std::unique_ptr<ElfImage>> relocation_images_;
  // Inline work: the template per action, the trampoline each kInline site
  // calls now (its arena and address), the next counter slot (never
  // reused), and the final counts of detached ops.
  std::map<std::pair<InlineAction, uint32_t>, std::vector<uint8_t>> inline_templates_;  // by (action, period)
  std::unordered_map<uint32_t, std::pair<CodeArena*, uint64_t>> inline_code_;
  uint32_t next_inline_slot_ = 0;
  bool inline_used_ = false;
  std::unordered_map<const ftjit_ops*, std::vector<std::pair<uint64_t, uint64_t>>> final_inline_;
  std::unordered_map<const ftjit_ops*, std::vector<ftjit_inline_histogram>> final_histograms_;
  std::vector<std::unique_ptr<TextAlias>> aliases_;
  TextAlias* last_alias_ = nullptr;
  // Scratch of commit(), kept between commits: a million-site batch would
  // otherwise fault in ~100 MB of fresh zero pages every time.
  std::vector<uint32_t> changed_;
  std::vector<Planned> plan_;
  std::vector<EntryWrite> writes_;
  std::vector<SlotWrite> slots_;
  std::vector<FixedPartWrite> inits_;  // fixed parts (re)written: every site of a generated attach
  std::vector<uint64_t> entries_;  // a fresh attach's entries, for its ip set
  std::vector<std::unique_ptr<CodeArena>> arenas_;
  std::map<const CodeArena*, bool> arena_saves_all_;  // each arena's kind
  ftjit_saves saves_ = FTJIT_SAVES_AUTO;
  // Per arena: [0] list, [1] call-ops saving FP, [2] call-ops without FP;
  // [3..5] the same entered by stubs.
  std::map<CodeArena*, std::array<uint64_t, 6>> shared_;
  // Modules' stub memory (ModuleRecord::stubs): trampoline memory too, for
  // grace periods and fork, but never handed out for trampolines.
  std::vector<std::unique_ptr<CodeArena>> stub_arenas_;
  std::unique_ptr<ListTable> list_table_;
  // Retired by the last commit, freed after its grace period.
  struct Retired {
    std::vector<std::unique_ptr<SiteMux>> muxes;
    std::vector<std::unique_ptr<IpSet>> ipsets;
    std::vector<std::unique_ptr<ListTable>> list_tables;
    std::vector<std::pair<CodeArena*, uint64_t>> trampolines;
    std::vector<std::unique_ptr<OpsRecord>> records;
    std::vector<std::pair<CodeArena*, uint64_t>> stubs;  // relocated entries'
    // Site stubs of relocation modules given back (riscv64's mirrors):
    // trampoline memory until freed (in_trampoline_memory looks here too).
    std::vector<std::unique_ptr<CodeArena>> arenas;
    bool empty() const {
      return muxes.empty() && ipsets.empty() && list_tables.empty() && trampolines.empty() &&
             records.empty() && stubs.empty() && arenas.empty();
    }
  } retired_;
  uint64_t batches_ = 0;
  uint64_t last_batch_sites_ = 0;
  uint64_t grace_periods_ = 0;
  uint64_t trampolines_ = 0;
  uint64_t trampoline_bytes_ = 0;
  std::map<uint64_t, size_t> trampoline_sizes_;
  int64_t tls_offset_ = 0;
  pid_t owner_pid_ = 0;  // the process that created the engine

  // In a forked child: the code mappings become private copies and the
  // inherited engine becomes inert (its writable aliases still reach the
  // parent's code). Run by the fork handlers of runtime/code_change.cpp
  // before the parent may write code again.
  void on_fork_child();
  bool inert() const;
  friend void engine_atfork_child();
};

}  // namespace ftjit
