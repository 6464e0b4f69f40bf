// SPDX-License-Identifier: MIT
// The per-thread shadow stacks and the exit trampoline's C++ half.
#include "runtime/shadow_stack.h"

#include <pthread.h>
#include <signal.h>
#include <unwind.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "backends/backend.h"
#include "backends/shadow_layout.h"
#include "runtime/arch/arch.h"
#include "runtime/cycle_clock.h"
#include "runtime/inline_blocks.h"
#include "runtime/dispatch.h"
#include "runtime/process_backend.h"
#include "runtime/thread_control.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U  // Linux 6.3; older headers lack it
#endif

namespace ftjit {

std::atomic<uint64_t> g_recursion_drops{0};

namespace {

// 1 Mi frames of hooked calls per thread: 32 MiB of address space, of
// which only the pages a thread's depth reaches are ever touched (an 8 MiB
// thread stack holds at most half a million frames). Deeper calls run with
// their entries traced but their exits not hooked, counted.
constexpr uint32_t kCapacity = 1u << 20;
// An entry whose return address was put back for an exception in flight.
constexpr uintptr_t kUnhooked = 1;

struct ShadowEntry {
  uint64_t slot;   // where the replaced return address lives
  uint64_t ret;    // the real return address (or the trampoline: chained)
  uint64_t ip;
  uintptr_t rec;   // ExitRecord*, | kUnhooked
  ExitRecord* record() const { return reinterpret_cast<ExitRecord*>(rec & ~kUnhooked); }
};

// Counters are written by the owning thread only and read by stats, so
// relaxed load+store (no locked read-modify-write on the event path).
struct Counter {
  std::atomic<uint64_t> v{0};
  void bump() { v.store(v.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  uint64_t get() const { return v.load(std::memory_order_relaxed); }
};

// Where the return address lives (runtime/arch/arch.h): in the slot for
// the frame's whole life (x86-64), or in the link register and then
// wherever the function spilled it (arm64, riscv64).
constexpr bool kLinkRegister =
    arch::return_address_home() == arch::ReturnAddressHome::kLinkRegister;

struct ShadowStack {
  uint32_t depth;
  // Exceptions raised and not caught yet. While one is in flight the
  // replaced addresses stay put back, even when a nested one (thrown and
  // caught in a destructor during the unwind) is caught.
  uint32_t in_flight;
  Counter hooks, hook_drops, unwound;
  ShadowEntry e[kCapacity];
  // kLinkRegister: where entry i's frame keeps the exit trampoline's
  // address, found by the unwinder when an exception put the real one
  // back there (0: not known), for hooking it again after the catch.
  // Pages of it are touched only by exceptions through hooked frames.
  uint64_t home[kLinkRegister ? kCapacity : 1];
  // And in which form (arch::return_address_forms: plain, or signed by
  // pac-ret with key A or B).
  int8_t home_form[kLinkRegister ? kCapacity : 1];
  // caller_of's last answer for a chain: the index of its oldest entry
  // (the one that holds the real return address) and their slot.
  uint32_t chain_base;
  uint64_t chain_slot;
};

// Which of `forms` (arch::return_address_forms) `word` is, or -1.
int form_of(uint64_t word, const uint64_t forms[3]) {
  for (int k = 0; k < 3; ++k) {
    if (forms[k] != 0 && word == forms[k]) return k;
  }
  return -1;
}

// Stacks are never unmapped: a thread that exits gives its stack back for
// the next thread (stats may read any stack at any time, and a signal
// handler may create one, so neither malloc nor munmap on these paths).
constexpr size_t kMaxStacks = 4096;
enum : int { kNever = 0, kIdle = 1, kInUse = 2 };
struct StackSlot {
  std::atomic<int> state{kNever};
  std::atomic<ShadowStack*> stack{nullptr};
};
StackSlot g_stacks[kMaxStacks];
// Slots below this were ever taken: what the counters read (the 64 KiB
// of slots are 16 pages, each a fault the first time it is read).
std::atomic<size_t> g_stacks_seen{0};
std::atomic<uint64_t> g_no_stack_drops{0};

__thread ShadowStack* t_stack __attribute__((tls_model("initial-exec"))) = nullptr;

// What the exit trampoline's own pop reads (backends/shadow_layout.h).
namespace layout = shadow_layout;
static_assert(offsetof(ShadowStack, depth) == layout::kDepth);
static_assert(offsetof(ShadowStack, hooks) == layout::kHooks);
static_assert(kCapacity == layout::kCapacity);
static_assert(sizeof(ShadowStack::depth) == 4);
static_assert(offsetof(ShadowStack, e) == layout::kEntries);
static_assert(sizeof(ShadowEntry) == layout::kEntryBytes);
static_assert(offsetof(ShadowEntry, slot) == layout::kSlot);
static_assert(offsetof(ShadowEntry, ret) == layout::kRet);
static_assert(offsetof(ShadowEntry, ip) == layout::kIp);
static_assert(offsetof(ShadowEntry, rec) == layout::kRecord);
static_assert(kUnhooked == layout::kUnhooked);
static_assert(offsetof(ExitRecord, func) == layout::kFunc);
static_assert(offsetof(ExitRecord, ops) == layout::kOps);
static_assert(offsetof(ExitRecord, live) == layout::kLive);
static_assert(offsetof(ExitRecord, save_fp) == layout::kSaveFp);
static_assert(offsetof(ExitRecord, kind) == layout::kKind);
static_assert(offsetof(ExitRecord, site) == layout::kSite);
static_assert(offsetof(ExitRecord, block_offset) == layout::kBlockOffset);
static_assert(sizeof(std::atomic<bool>) == 1);

}  // namespace

// t_stack's offset from the thread pointer, for the trampolines.
int64_t shadow_stack_tls_offset() {
  return static_cast<int64_t>(reinterpret_cast<uint64_t>(&t_stack) - arch::thread_pointer());
}

namespace {
__thread uint32_t t_stack_slot __attribute__((tls_model("initial-exec"))) = 0;

pthread_key_t g_exit_key;
std::once_flag g_prepare_once;
Status g_prepare_status;
std::atomic<uint64_t> g_exit_trampoline{0};   // the landing
std::atomic<uint64_t> g_call_and_land{0};     // just before it
std::atomic<uint64_t> g_latency_landing{0};   // inline latency's (or the landing)
std::atomic<uint64_t> g_exit_page_end{0};     // [g_call_and_land, this): all of it
// Where the landing lies in the exit trampoline's code: call-and-land fits
// before it.
constexpr uint32_t kLandingOffset = 16;
// Where inline latency's own landing goes, if the emitter has one.
constexpr uint32_t kLatencyLandingOffset = 2048;

// Whether `addr` is where hooked frames return: the landing, or inline
// latency's own.
inline bool is_landing(uint64_t addr) {
  return addr == g_exit_trampoline.load(std::memory_order_relaxed) ||
         addr == g_latency_landing.load(std::memory_order_relaxed);
}

ShadowStack* create_stack() {
  for (int pass = 0; pass < 2; ++pass) {
    int want = pass == 0 ? kIdle : kNever;
    // An idle slot was taken before: below g_stacks_seen.
    const size_t end = pass == 0 ? g_stacks_seen.load(std::memory_order_acquire) : kMaxStacks;
    for (size_t i = 0; i < end; ++i) {
      int st = want;
      if (g_stacks[i].state.load(std::memory_order_relaxed) != want ||
          !g_stacks[i].state.compare_exchange_strong(st, kInUse, std::memory_order_acquire)) {
        continue;
      }
      ShadowStack* s = g_stacks[i].stack.load(std::memory_order_relaxed);
      if (s == nullptr) {
        void* m = mmap(nullptr, sizeof(ShadowStack), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
          g_stacks[i].state.store(kNever, std::memory_order_release);
          return nullptr;
        }
        // Default-initialised, not value-initialised: `ShadowStack{}`
        // zeroed all 32 MiB (the mapping is zero already), so every thread
        // that ever hooked a return cost 32 MiB of memory.
        s = new (m) ShadowStack;
        g_stacks[i].stack.store(s, std::memory_order_release);
        size_t seen = g_stacks_seen.load(std::memory_order_relaxed);
        while (seen < i + 1 &&
               !g_stacks_seen.compare_exchange_weak(seen, i + 1, std::memory_order_release)) {
        }
      }
      s->depth = 0;
      s->in_flight = 0;
      t_stack = s;
      t_stack_slot = static_cast<uint32_t>(i);
      pthread_setspecific(g_exit_key, &g_stacks[i]);
      return s;
    }
  }
  return nullptr;
}

// The return address to report for `e`, popped already: its own, or, in a
// chain (its frame was hooked again: another ops, a tail call), that of the
// oldest entry of the same slot, still below it.
//
// A chain grows by an entry at each tail call of its frame, and every entry
// and exit of it asks for that address: found by walking down the chain,
// tail recursion 100,000 calls deep took 5 s (quadratic). The oldest entry
// found is remembered, and taken again while it is still there and still
// the frame's: one live frame per slot (a frame longjmp'd over is pruned
// before an entry at its slot is pushed), and its chain's entries above it.
uint64_t caller_of(ShadowStack* s, const ShadowEntry& e) {
  uint64_t ret = e.ret;
  if (!is_landing(ret)) return ret;
  const uint32_t b = s->chain_base;
  if (s->chain_slot == e.slot && b < s->depth && s->e[b].slot == e.slot && !is_landing(s->e[b].ret) &&
      (b + 1 == s->depth || (s->e[b + 1].slot == e.slot && is_landing(s->e[b + 1].ret))))
    return s->e[b].ret;
  for (uint32_t d = s->depth; d != 0 && is_landing(ret); --d) {
    if (s->e[d - 1].slot == e.slot) {
      ret = s->e[d - 1].ret;
      if (!is_landing(ret)) {
        s->chain_base = d - 1;
        s->chain_slot = e.slot;
      }
    }
  }
  return ret;
}

// The traced function of `e`: an inline latency entry keeps its start
// time where others keep the ip.
uint64_t entry_ip(const ShadowEntry& e) {
  const ExitRecord* r = e.record();
  return r->kind == layout::kKindInlineLatency ? r->site : e.ip;
}

// An inline latency entry's exit, as the x86-64 landing does it itself
// (on arm64 and riscv64 the landing leaves it to pop): the duration since
// the entry's counter read into the site's histogram in this thread's
// block, or the frame counted unwound. A signal handler on this thread
// may do the same between two of these updates: each one is whole.
void record_latency(const ShadowEntry& e, const ExitRecord* r, uint64_t now, bool returned) {
  uint64_t* block = ftjit_inline_block;
  if (block == nullptr || !r->live.load(std::memory_order_acquire)) return;
  uint64_t* h = block + r->block_offset / sizeof(uint64_t);
  if (!returned) {
    __atomic_fetch_add(&h[layout::kHistUnwound], 1, __ATOMIC_RELAXED);
    return;
  }
  const uint64_t ns = now > e.ip ? cycles_to_ns(now - e.ip) : 0;
  __atomic_fetch_add(&h[layout::kHistTotalNs], ns, __ATOMIC_RELAXED);
  if (ns > __atomic_load_n(&h[layout::kHistMaxNs], __ATOMIC_RELAXED)) {
    __atomic_store_n(&h[layout::kHistMaxNs], ns, __ATOMIC_RELAXED);
  }
  const int bucket = ns == 0 ? 0 : 64 - __builtin_clzll(ns);
  __atomic_fetch_add(&h[layout::kHistBuckets + bucket], 1, __ATOMIC_RELAXED);
}

// Reports the exit of popped entry `e`: returned (regs, read the counter
// at `now`) or unwound (regs null). Callbacks only if `run` (not inside a
// callback); inline latency, which calls nothing, always.
void report_exit(ShadowStack* s, const ShadowEntry& e, bool run, ftjit_ret_regs* regs,
                 uint64_t now) {
  ExitRecord* r = e.record();
  if (r->kind == layout::kKindInlineLatency) {
    record_latency(e, r, now, regs != nullptr);
    return;
  }
  if (run && r->live.load(std::memory_order_acquire)) r->func(e.ip, caller_of(s, e), r->ops, regs);
}

// Pops the newest entries while gone(entry) says their frames left without
// returning through the trampoline, and reports each unwound: counted
// always, its exit callback called only if `run` (not inside a callback).
template <typename Gone>
void pop_unwound(ShadowStack* s, bool run, Gone gone) {
  while (s->depth != 0 && gone(s->e[s->depth - 1])) {
    const ShadowEntry e = s->e[s->depth - 1];
    --s->depth;
    s->unwound.bump();
    report_exit(s, e, run, nullptr, 0);
  }
}

// A thread leaving with hooked frames (pthread_exit from inside them, or a
// cancellation): they will never return. Report them, newest first, so each
// entry still gets its one exit.
void on_thread_exit(void* p) {
  auto* slot = static_cast<StackSlot*>(p);
  ShadowStack* s = slot->stack.load(std::memory_order_relaxed);
  if (s->depth != 0) {
    const bool run = guard_enter();
    pop_unwound(s, run, [](const ShadowEntry&) { return true; });
    if (run) guard_leave();
  }
  t_stack = nullptr;
  slot->state.store(kIdle, std::memory_order_release);
}

// Slots of frames that may be gone are dead stack memory, which is exactly
// what AddressSanitizer poisons: these reads and writes are meant.
__attribute__((no_sanitize("address"))) uint64_t read_slot(uint64_t slot) {
  return *reinterpret_cast<const volatile uint64_t*>(slot);
}
__attribute__((no_sanitize("address"))) void write_slot(uint64_t slot, uint64_t value) {
  *reinterpret_cast<volatile uint64_t*>(slot) = value;
}

// Whether `a` and `b` lie on different stacks of this thread. Only a signal
// handler running on an alternate stack (sigaltstack) has frames of two
// stacks on one shadow stack; asked only when the addresses alone cannot
// tell (a system call).
bool on_different_stacks(uint64_t a, uint64_t b) {
  stack_t ss;
  if (sigaltstack(nullptr, &ss) != 0 || (ss.ss_flags & SS_ONSTACK) == 0) return false;
  const uint64_t lo = reinterpret_cast<uint64_t>(ss.ss_sp), hi = lo + ss.ss_size;
  return (a >= lo && a < hi) != (b >= lo && b < hi);
}

[[noreturn]] __attribute__((noinline, cold)) void lost_return_address(uint64_t slot) {
  // Nothing sane is left to return to. Say so plainly rather than jump
  // into the void.
  char msg[160];
  int n = snprintf(msg, sizeof msg,
                   "ftjit: fatal: no shadow-stack entry for a hooked return (slot %#llx)\n",
                   static_cast<unsigned long long>(slot));
  if (n > 0) (void)!write(2, msg, static_cast<size_t>(n));
  abort();
}

}  // namespace

// Shadow entries are keyed by their frame's slot (runtime/arch/arch.h).

namespace {
template <typename Fill>
ExitRecord* new_exit_record(Fill fill) {
  // Stable addresses, never freed, not even by static destructors: a
  // hooked frame may return during exit().
  static auto* mu = new std::mutex();
  static auto* records = new std::deque<ExitRecord>();
  std::lock_guard<std::mutex> lock(*mu);
  ExitRecord& r = records->emplace_back();
  fill(r);
  return &r;
}
}  // namespace

ExitRecord* make_exit_record(ftjit_exit_func_t func, ftjit_ops* ops) {
  return new_exit_record([&](ExitRecord& r) {
    r.func = func;
    r.ops = ops;
    r.save_fp = (ops->flags & FTJIT_OPS_F_NO_FP) == 0;
  });
}

ExitRecord* make_inline_latency_record(uint64_t site, uint64_t block_offset, uint32_t sample_period) {
  return new_exit_record([&](ExitRecord& r) {
    r.kind = layout::kKindInlineLatency;
    r.site = site;
    r.block_offset = block_offset;
    r.sample_period = sample_period;
    r.save_fp = false;
  });
}

Status prepare_exit_trampoline(int64_t counts_tls_offset) {
  std::call_once(g_prepare_once, [&] {
    if (pthread_key_create(&g_exit_key, on_thread_exit) != 0) {
      g_prepare_status = make_error(FTJIT_E_SYSTEM, "pthread_key_create failed");
      return;
    }
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    // A private mapping of a named memfd, not an anonymous one: its name in
    // /proc/PID/maps lets the CLI find it among the agent's code before an
    // unload (a stack word still pointing here is a frame still hooked).
    int fd = static_cast<int>(syscall(SYS_memfd_create, "ftjit-exit-trampoline", MFD_CLOEXEC | MFD_EXEC));
    if (fd < 0 && errno == EINVAL) fd = static_cast<int>(syscall(SYS_memfd_create, "ftjit-exit-trampoline", MFD_CLOEXEC));
    void* m = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(page)) == 0) {
      m = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    }
    if (fd >= 0) close(fd);
    if (m == MAP_FAILED) {
      g_prepare_status = make_error(FTJIT_E_SYSTEM, std::string("mmap exit trampoline: ") +
                                                        strerror(errno));
      return;
    }
    ExitTrampolineRequest req;
    req.pop = reinterpret_cast<uint64_t>(&ftjit_shadow_pop);
    req.counts_tls_offset = counts_tls_offset;
    req.landing_offset = kLandingOffset;
    // Under ThreadSanitizer every exit goes through pop, which it sees.
    if (!kTsanShim) req.shadow_tls_offset = shadow_stack_tls_offset();
    // Inline latency entries' exits: read from memory at every exit, so
    // the clock may be calibrated after this.
    req.block_tls_offset = inline_block_tls_offset();
    req.clock_mult = reinterpret_cast<uint64_t>(cycle_ns_mult());
    if (!kTsanShim) req.latency_landing_offset = kLatencyLandingOffset;
    uint64_t place = reinterpret_cast<uint64_t>(m);
    auto code = process_backend().emit_exit_trampoline(req, place);
    if (!code || code->size() > page) {
      munmap(m, page);
      g_prepare_status = code ? make_error(FTJIT_E_INTERNAL, "exit trampoline too large")
                              : code.take_error();
      return;
    }
    std::memcpy(m, code->data(), code->size());
    // Written, then executable: never both (W^X).
    if (mprotect(m, page, PROT_READ | PROT_EXEC) != 0) {
      g_prepare_status = make_error(FTJIT_E_SYSTEM, std::string("mprotect exit trampoline: ") +
                                                        strerror(errno));
      munmap(m, page);
      return;
    }
    arch::flush_icache(place, code->size());
    g_call_and_land.store(place, std::memory_order_release);
    g_exit_page_end.store(place + page, std::memory_order_release);
    g_latency_landing.store(code->size() > kLatencyLandingOffset ? place + kLatencyLandingOffset
                                                                 : place + kLandingOffset,
                            std::memory_order_release);
    g_exit_trampoline.store(place + kLandingOffset, std::memory_order_release);
  });
  if (!g_prepare_status) return make_error(g_prepare_status.error().code,
                                           g_prepare_status.error().message);
  return {};
}

const char* exit_hooks_unavailable_reason() {
  return "exit hooks are not available: the exit trampoline could not be made (see the log): "
         "attach entry callbacks only";
}

uint64_t exit_trampoline_address() { return g_exit_trampoline.load(std::memory_order_acquire); }
uint64_t exit_call_and_land_address() { return g_call_and_land.load(std::memory_order_acquire); }
uint64_t exit_latency_landing_address() { return g_latency_landing.load(std::memory_order_acquire); }

namespace {

inline void shadow_prune(const uint64_t* slot) {
  ShadowStack* s = t_stack;
  if (s == nullptr) return;
  const uint64_t at = reinterpret_cast<uint64_t>(slot);
  // Entries at or below this frame's slot belong to frames that are gone
  // (longjmp'd over, or unwound by an exception), with two exceptions:
  //  - at this very slot and still holding the trampoline: the same frame,
  //    hooked by another ops or entered again by a tail call;
  //  - below it, still holding the trampoline, on another stack: a live
  //    frame interrupted by a signal whose handler runs on an alternate
  //    stack above it. (Dead stack memory keeps the trampoline's address
  //    too, so the address alone does not prove a frame alive.)
  // (Called inside the entry's callback context: callbacks may run.)
  // kLinkRegister: a slot is the trampoline's word, not the frame's; only
  // the one at `at`, written by this very entry's trampoline (the parent's
  // return address), says anything: a frame on another stack is taken as
  // alive (it is pruned once a frame of its own stack is entered).
  pop_unwound(s, true, [&](const ShadowEntry& top) {
    if (top.slot > at) return false;
    if (top.slot == at) return !is_landing(read_slot(at));
    if (!on_different_stacks(top.slot, at)) return true;
    return !kLinkRegister && !is_landing(read_slot(top.slot));
  });
}

inline void shadow_push(uint64_t* slot, uint64_t ip, ExitRecord* rec) {
  ShadowStack* s = t_stack;
  if (s == nullptr && (s = create_stack()) == nullptr) {
    g_no_stack_drops.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint64_t tramp = g_exit_trampoline.load(std::memory_order_relaxed);
  if (s->depth == kCapacity) {
    s->hook_drops.bump();
    return;
  }
  s->e[s->depth] = ShadowEntry{reinterpret_cast<uint64_t>(slot), *slot, ip,
                               reinterpret_cast<uintptr_t>(rec)};
  // The address is replaced before the depth publishes the entry: a signal
  // handler's hooked call in between must not find a published entry whose
  // slot does not hold the trampoline yet (it would take it for dead).
  std::atomic_signal_fence(std::memory_order_seq_cst);
  *slot = tramp;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ++s->depth;
  s->hooks.bump();
}

}  // namespace


void shadow_hooked_entry(ftjit_func_t func, ftjit_ops* ops, ExitRecord* rec, uint64_t ip,
                         uint64_t parent_ip, ftjit_regs* regs) {
  const uint64_t slot = arch::return_slot_at_entry(regs->sp);
  shadow_prune(reinterpret_cast<const uint64_t*>(slot));
  func(ip, parent_ip, ops, regs);
  shadow_push(reinterpret_cast<uint64_t*>(slot), ip, rec);
}

extern "C" void ftjit_shadow_prune(uint64_t slot) {
  shadow_prune(reinterpret_cast<const uint64_t*>(slot));
}

extern "C" void ftjit_shadow_push(uint64_t slot, uint64_t ip, uint64_t record) {
  shadow_push(reinterpret_cast<uint64_t*>(slot), ip, reinterpret_cast<ExitRecord*>(record));
}

extern "C" uint64_t ftjit_shadow_pop(uint64_t slot, ftjit_ret_regs* regs) {
  const uint64_t now = arch::cycle_counter();  // first: an inline latency's end
  ShadowStack* s = t_stack;
  uint32_t d = s != nullptr ? s->depth : 0;
  while (d != 0 && s->e[d - 1].slot != slot) --d;
  if (d == 0) lost_return_address(slot);
  // Inside a callback (a signal handler's traced code returning while the
  // thread was in one, say) the bookkeeping still happens; only the
  // callbacks are skipped and counted.
  // The exit trampoline counted its own entry: that one is ours.
  const bool run = guard_enter(1);
  pop_unwound(s, run, [&](const ShadowEntry&) { return s->depth > d; });
  const ShadowEntry e = s->e[d - 1];
  std::atomic_signal_fence(std::memory_order_seq_cst);
  s->depth = d - 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  report_exit(s, e, run, regs, now);
  if (run) guard_leave(1);
  return e.ret;
}

extern "C" uint64_t ftjit_shadow_real_return(uint64_t slot) {
  const uint64_t tramp = g_exit_trampoline.load(std::memory_order_relaxed);
  ShadowStack* s = t_stack;
  return s != nullptr ? caller_of(s, ShadowEntry{slot, tramp, 0, 0}) : tramp;
}

namespace {

// kLinkRegister: one walk of the unwinder over this thread's stack, which
// stops at the first frame returning into the exit trampoline (no unwind
// table covers it). There the context's return-address column is the
// frame's spill of the link register: it gets the real address, each
// shadow entry of the frame (a chain has several) remembers where, and the
// next walk goes past it.
struct UnhookWalk {
  ShadowStack* s;
  uint64_t tramp;
  enum { kDone, kFixed, kStuck } outcome;
};

_Unwind_Reason_Code unhook_one(_Unwind_Context* ctx, void* arg) {
  auto* w = static_cast<UnhookWalk*>(arg);
  if (_Unwind_GetIP(ctx) != w->tramp) return _URC_NO_REASON;
  ShadowStack* s = w->s;
  const uint64_t key = arch::return_slot_below_cfa(_Unwind_GetCFA(ctx));
  constexpr int kColumn = arch::return_address_dwarf_column();
  // libgcc's _Unwind_Context starts with the saved-register locations;
  // trusted only if the one for the column holds the trampoline's address
  // (a register kept by value holds the address itself there instead).
  // Signed by the function (pac-ret) if it signs: the unwinder's IP is
  // the address authenticated, the spill holds the signature.
  auto* loc = reinterpret_cast<uint64_t* const*>(ctx)[kColumn];
  const uint64_t cfa = _Unwind_GetCFA(ctx);
  uint64_t forms[3];
  arch::return_address_forms(w->tramp, cfa, forms);
  uint64_t home = 0;
  int form = 0;
  if (loc != nullptr) {
    form = form_of(read_slot(reinterpret_cast<uint64_t>(loc)), forms);
    if (form >= 0) home = reinterpret_cast<uint64_t>(loc);
  }
  uint64_t real = 0;
  for (uint32_t i = 0; i < s->depth; ++i) {
    ShadowEntry& e = s->e[i];
    if (e.slot != key || (e.rec & kUnhooked) != 0) continue;
    if (real == 0) real = e.ret;  // the oldest of a chain holds it
    e.rec |= kUnhooked;
    s->home[i] = home;
    s->home_form[i] = static_cast<int8_t>(home != 0 ? form : 0);
  }
  if (real == 0 || real == w->tramp) {
    w->outcome = UnhookWalk::kStuck;  // not a frame of ours: leave it
    return _URC_NORMAL_STOP;
  }
  if (home != 0) {
    write_slot(home, arch::return_address_in_form(real, form, cfa));
  } else {
    _Unwind_SetGR(ctx, kColumn, real);
  }
  w->outcome = UnhookWalk::kFixed;
  return _URC_NORMAL_STOP;
}

void unhook_link_register_frames(ShadowStack* s, uint64_t tramp) {
  // Each walk puts one frame back and the next starts again from the top:
  // the unwinder cannot step past a frame before it is put back.
  for (uint32_t n = 0; n <= s->depth; ++n) {
    UnhookWalk w{s, tramp, UnhookWalk::kDone};
    _Unwind_Backtrace(unhook_one, &w);
    if (w.outcome != UnhookWalk::kFixed) return;
  }
}

// Where entry i's frame keeps its return address now.
inline uint64_t home_of(const ShadowStack* s, uint32_t i) {
  return kLinkRegister ? s->home[i] : s->e[i].slot;
}

}  // namespace

void shadow_unhook_all() {
  ShadowStack* s = t_stack;
  if (s == nullptr) return;
  ++s->in_flight;
  const uint64_t tramp = g_exit_trampoline.load(std::memory_order_relaxed);
  if constexpr (kLinkRegister) {
    unhook_link_register_frames(s, tramp);
    return;
  }
  // Newest first: in a chain (one frame hooked twice) the oldest entry
  // holds the real address and is written last.
  for (uint32_t i = s->depth; i-- > 0;) {
    ShadowEntry& e = s->e[i];
    if ((e.rec & kUnhooked) != 0) continue;
    if (!is_landing(read_slot(e.slot))) continue;  // stale: its frame is gone already
    write_slot(e.slot, e.ret);
    e.rec |= kUnhooked;
  }
}

void shadow_unwinding_to(uint64_t cfa) {
  ShadowStack* s = t_stack;
  if (s == nullptr || s->depth == 0) return;
  // Every hooked frame below the slot of the frame whose CFA this is is
  // gone.
  const uint64_t slot = arch::return_slot_below_cfa(cfa);
  const bool run = guard_enter();
  pop_unwound(s, run, [&](const ShadowEntry& top) { return top.slot < slot; });
  if (run) guard_leave();
}

void shadow_rehook_after_catch(uint64_t cfa) {
  ShadowStack* s = t_stack;
  if (s == nullptr) return;
  if (s->in_flight != 0) --s->in_flight;
  if (s->depth == 0) return;
  const uint64_t tramp = g_exit_trampoline.load(std::memory_order_relaxed);
  const bool run = guard_enter();
  // Frames below the catching one were unwound.
  pop_unwound(s, run, [&](const ShadowEntry& top) { return top.slot < cfa; });
  // The others are alive: hook their returns again, oldest first so that a
  // chain ends with the trampoline in the slot. Not while an outer
  // exception is still unwinding through them.
  for (uint32_t i = 0; s->in_flight == 0 && i < s->depth; ++i) {
    ShadowEntry& e = s->e[i];
    if ((e.rec & kUnhooked) == 0) continue;
    const uint64_t home = home_of(s, i);
    // In the form the frame keeps it (kLinkRegister: signed where the
    // function signs; its CFA is its key's + 8).
    const int form = kLinkRegister ? s->home_form[i] : 0;
    const uint64_t cfa = e.slot + 8;
    // Not ours any more (or never found): leave it to pruning.
    if (home == 0 || read_slot(home) != arch::return_address_in_form(e.ret, form, cfa)) continue;
    // Where it was hooked to: inline latency's entries to their landing.
    const uint64_t hook = e.record()->kind == layout::kKindInlineLatency
                              ? g_latency_landing.load(std::memory_order_relaxed)
                              : tramp;
    write_slot(home, arch::return_address_in_form(hook, form, cfa));
    e.rec &= ~kUnhooked;
  }
  if (run) guard_leave();
}

namespace {

// With every other thread parked outside our code: every stack, newest
// entry first (in a chain the oldest holds the real address, written last).
void put_back_parked() {
  for (StackSlot& slot : g_stacks) {
    if (slot.state.load(std::memory_order_acquire) != kInUse) continue;
    ShadowStack* s = slot.stack.load(std::memory_order_acquire);
    if (s == nullptr) continue;
    for (uint32_t i = s->depth; i-- > 0;) {
      const ShadowEntry& e = s->e[i];
      // A slot that no longer holds the trampoline belongs to a frame gone
      // already (or was put back for an exception): not ours to write.
      if ((e.rec & kUnhooked) == 0 && is_landing(read_slot(e.slot))) write_slot(e.slot, e.ret);
      s->unwound.bump();
    }
    s->depth = 0;
    s->in_flight = 0;
  }
}

}  // namespace

// kLinkRegister: the put-back of this thread's own frames, run by each
// parked thread on itself (thread_control's resume hook) and by the
// detaching thread. Where a hooked frame keeps the exit trampoline's
// address is its prologue's choice, and the unwinder that knows it takes
// the loader's lock, which a parked thread may hold; but it is in that
// frame's own part of the stack, and nowhere else:
//
//     higher addresses
//     | caller of frame k      |
//     +------------------------+ <- CFA of frame k (its entry's key + 8)
//     | frame k: its spill of  |    the one word == exit trampoline in
//     | x30 (== trampoline)    |    [CFA of k+1, CFA of k)
//     | unhooked frames it     |
//     | called                 |
//     +------------------------+ <- CFA of hooked frame k+1
//     | frame k+1 ...          |
//     +------------------------+ <- sp of the interrupted context
//     the innermost frame may not have spilled yet: its link register
//     then holds the trampoline (the interrupted context's x30)
//
// All or nothing: one pass checks that each frame has exactly its one word
// (or, innermost, the register), the next writes the real addresses. A
// frame that keeps it elsewhere (a callee-saved register), a stale copy
// beside it, or a frame on another stack (sigaltstack) leaves every entry
// hooked: the trampoline then stays mapped.
bool put_back_own_frames(ucontext_t* uc, uint64_t sp) {
  ShadowStack* s = t_stack;
  if (s == nullptr || s->depth == 0) return true;
  const uint64_t tramp = g_exit_trampoline.load(std::memory_order_relaxed);
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t readable_to = sp & ~(page - 1);  // [sp's page, this) checked readable
  for (int write = 0; write < 2; ++write) {
    uint64_t lo = sp;
    bool innermost = true;
    for (uint32_t i = s->depth; i > 0;) {
      // One frame: the entries of the same key (a chain: hooked again).
      uint32_t j = i - 1;
      const uint64_t key = s->e[j].slot;
      bool unhooked = (s->e[j].rec & kUnhooked) != 0;
      while (j > 0 && s->e[j - 1].slot == key) {
        --j;
        unhooked = unhooked && (s->e[j].rec & kUnhooked) != 0;
      }
      const uint64_t cfa = key + 8;
      if (cfa <= lo || (lo & 7) != 0) return false;
      const uint64_t real = s->e[j].ret;  // the oldest of a chain holds it
      if (!unhooked) {
        uint64_t found = 0, n = 0;
        // The trampoline's address as the frame keeps it: plain, or signed
        // by the function (pac-ret, with its CFA).
        uint64_t forms[3];
        arch::return_address_forms(tramp, cfa, forms);
        int found_form = 0;
        // Each page is checked readable once, first (a range may cross
        // into another stack, or a guard page, if the entries span two
        // stacks).
        for (; readable_to < cfa; readable_to += page) {
          uint64_t probe;
          const uint64_t at = readable_to < lo ? lo : readable_to;
          if (!read_remote_word(reinterpret_cast<const uint64_t*>(at), &probe)) return false;
        }
        for (uint64_t a = lo; a < cfa; a += 8) {
          const int f = form_of(*reinterpret_cast<const uint64_t*>(a), forms);
          if (f >= 0) {
            found = a;
            found_form = f;
            ++n;
          }
        }
        const int register_form =
            innermost && uc != nullptr ? form_of(arch::context_link_register(uc), forms) : -1;
        const bool in_register = register_form >= 0;
        if (n > 1 || (n == 0 && !in_register) || real == tramp) return false;
        if (write == 1) {
          if (n == 1) *reinterpret_cast<uint64_t*>(found) = arch::return_address_in_form(real, found_form, cfa);
          if (in_register)
            arch::set_context_link_register(uc, arch::return_address_in_form(real, register_form, cfa));
        }
      }
      lo = cfa;
      innermost = false;
      i = j;
    }
  }
  for (uint32_t i = s->depth; i > 0; --i) s->unwound.bump();
  s->depth = 0;
  s->in_flight = 0;
  return true;
}

bool put_back_parked_self(void* ucv) {
  auto* uc = static_cast<ucontext_t*>(ucv);
  return put_back_own_frames(uc, arch::context_sp(uc));
}

Status shadow_put_back_all(int timeout_ms) {
  const uint64_t tramp = g_exit_trampoline.load(std::memory_order_acquire);
  if (tramp == 0) return {};
  const uint64_t call_and_land = g_call_and_land.load(std::memory_order_acquire);
  const uint64_t page_end = g_exit_page_end.load(std::memory_order_acquire);
  if constexpr (kLinkRegister) {
    // This thread's frames first (a library user may detach from inside
    // hooked frames), then every parked thread's, each by itself.
    uint64_t here = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
    put_back_own_frames(nullptr, here & ~uint64_t{7});
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      uint32_t failures = 0;
      auto ran = stop_the_world_if(
          [&](const ThreadSnapshot& t) {
            return !inside_beyond_own_entry(t) && (t.pc < call_and_land || t.pc >= page_end);
          },
          [] {}, put_back_parked_self, &failures);
      if (!ran) return ran.take_error();
      if (*ran) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        return make_error(FTJIT_E_SYSTEM,
                          "cannot put the return addresses back: a thread stays inside a tracer "
                          "callback or trampoline");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (const uint64_t n = shadow_hooked_frames(); n != 0) {
      return make_error(FTJIT_E_UNSUPPORTED,
                        std::to_string(n) + " hooked frames keep the exit trampoline's address "
                        "where a put-back cannot find it for sure (a register, another stack, "
                        "or a blocked thread): they return through it, and it stays mapped");
    }
    return {};
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    // A thread that just returned into the trampoline (its slot consumed,
    // its entry not popped yet), or is inside it (inline latency's landing
    // counts no entry) or any other trampoline or callback, must finish
    // first: its entry is still needed. So must one about to call a hooked
    // body from call-and-land (its entry pushed, the return address about
    // to be replaced by the call).
    auto ran = stop_the_world_if(
        [&](const ThreadSnapshot& t) {
          return !inside_beyond_own_entry(t) && (t.pc < call_and_land || t.pc >= page_end);
        },
        put_back_parked);
    if (!ran) return ran.take_error();
    if (*ran) return {};
    if (std::chrono::steady_clock::now() >= deadline) {
      return make_error(FTJIT_E_SYSTEM,
                        "cannot put the return addresses back: a thread stays inside a tracer "
                        "callback or trampoline");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void release_exit_trampoline() {
  const uint64_t place = g_call_and_land.exchange(0, std::memory_order_acq_rel);
  g_exit_trampoline.store(0, std::memory_order_release);
  if (place != 0) munmap(reinterpret_cast<void*>(place), static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  // The shadow stacks go with it: no frame is hooked and no thread is in
  // our code (the unload proved it), and the agent's code that reads them
  // is being unmapped. Kept, each cycle of attach and unload cost every
  // thread that hooked a return its stack again.
  for (StackSlot& slot : g_stacks) {
    if (ShadowStack* s = slot.stack.exchange(nullptr, std::memory_order_acq_rel)) munmap(s, sizeof(ShadowStack));
    slot.state.store(kNever, std::memory_order_release);
  }
}

void shadow_forget_threads() {
  if (g_exit_trampoline.load(std::memory_order_acquire) != 0) pthread_key_delete(g_exit_key);
}

uint64_t shadow_hooked_frames() {
  uint64_t n = 0;
  for (StackSlot& slot : g_stacks) {
    if (slot.state.load(std::memory_order_acquire) != kInUse) continue;
    if (ShadowStack* s = slot.stack.load(std::memory_order_acquire)) n += s->depth;
  }
  return n;
}

ShadowCounters shadow_counters() {
  ShadowCounters c{0, g_no_stack_drops.load(std::memory_order_relaxed), 0};
  const size_t seen = g_stacks_seen.load(std::memory_order_acquire);
  for (size_t i = 0; i < seen; ++i) {
    ShadowStack* s = g_stacks[i].stack.load(std::memory_order_acquire);
    if (s == nullptr) continue;
    c.hooks += s->hooks.get();
    c.hook_drops += s->hook_drops.get();
    c.unwound += s->unwound.get();
  }
  return c;
}

}  // namespace ftjit

// The calling thread's hooked frames (ftjit.h).
extern "C" uint32_t ftjit_shadow_depth(void) {
  return ftjit::t_stack != nullptr ? ftjit::t_stack->depth : 0;
}
extern "C" size_t ftjit_shadow_stack(uint64_t* ips, size_t max) {
  const ftjit::ShadowStack* s = ftjit::t_stack;
  if (s == nullptr) return 0;
  const size_t n = s->depth < max ? s->depth : max;
  for (size_t i = 0; i < n; ++i) ips[i] = entry_ip(s->e[i]);
  return n;
}
