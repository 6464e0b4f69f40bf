// SPDX-License-Identifier: MIT
// Batch patching, the SIGTRAP emulation window, and sites' fixed parts.
#include "runtime/patcher.h"
#include "runtime/relocation_traps.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "runtime/arch/arch.h"
#include "runtime/code_memory.h"
#include "runtime/log.h"
#include "runtime/thread_control.h"

namespace ftjit {
namespace {

// ---------------------------------------------------------------------------
// The trap window
// ---------------------------------------------------------------------------
//
// LiveChange::kTrap (x86-64). While a batch is being written, g_batch
// points at its sorted writes. A thread that executes a half-written site
// traps; the handler finds the site by binary search and emulates the
// instruction the site is becoming. g_readers keeps the batch alive while
// a handler reads it.
//
// A handler can run late: a thread traps in batch X, is descheduled
// between the exception and its handler, and X ends meanwhile (its trap
// is gone: the thread re-runs the site) — or X ends and batch Y plants a
// trap at the same site before the handler looks (it must find Y, not
// decide that the trap is someone else's). g_generation tells the cases
// apart: it changes whenever a batch is published or retracted, and a
// batch is published before its first trap is planted and retracted after
// its last is removed. A trap that is still planted while the generation
// stood still across the look, and is not in the batch of that
// generation, is not ours.

std::atomic<const EntryWrite*> g_batch{nullptr};
std::atomic<size_t> g_batch_n{0};
std::atomic<const Backend*> g_batch_backend{nullptr};
std::atomic<uint64_t> g_generation{0};
// While the first step is also the verification (see Patcher::apply), a
// trapped site runs what it held (`from`): the batch may still be rolled
// back. Once every site is verified, it runs what it becomes (`to`).
std::atomic<bool> g_batch_committed{false};
std::atomic<int> g_readers{0};
std::atomic<uint64_t> g_traps{0};
// The program's SIGTRAP action that ours chains to: two slots, one being
// read by handlers while install_trap_handler fills the other.
struct sigaction g_previous_trap_actions[2];
std::atomic<const struct sigaction*> g_previous_trap_action{nullptr};
std::mutex g_trap_mutex;
bool g_trap_retired = false;  // uninstall_trap_handler ran: never again


// Set while this thread runs the program's handler from chain_trap. A
// program that set its handler after ours, keeping ours as the one it
// chains to, calls us back from there once install_trap_handler put ours
// on top: that trap has been the program's already, so it ends there
// (chaining on would go round the two handlers until the stack ran out).
__thread bool t_in_program_trap_handler __attribute__((tls_model("initial-exec"))) = false;

void chain_trap(int sig, siginfo_t* si, void* uc) {
  const struct sigaction* prev_p = g_previous_trap_action.load(std::memory_order_acquire);
  if (prev_p == nullptr || t_in_program_trap_handler) return;
  const struct sigaction& prev = *prev_p;
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction != nullptr) {
      t_in_program_trap_handler = true;
      prev.sa_sigaction(sig, si, uc);
      t_in_program_trap_handler = false;
    }
    return;
  }
  if (prev.sa_handler == SIG_IGN) return;
  if (prev.sa_handler == SIG_DFL) {
    // The default action (core dump) once this handler returns.
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  t_in_program_trap_handler = true;
  prev.sa_handler(sig);
  t_in_program_trap_handler = false;
}

// Whether the trap `step` plants is still at `addr`.
bool trap_planted(uint64_t addr, const WriteStep& step) {
  const auto* now = reinterpret_cast<const volatile uint8_t*>(addr);
  for (uint32_t b = 0; b < step.size; ++b) {
    if (now[b] != step.fill[b]) return false;
  }
  return true;
}

// Emulates the site at `addr` if the published batch holds it.
bool emulate_from_batch(ucontext_t* uc, const Backend* backend, uint64_t addr) {
  g_readers.fetch_add(1, std::memory_order_seq_cst);
  const EntryWrite* batch = g_batch.load(std::memory_order_seq_cst);
  const size_t n = g_batch_n.load(std::memory_order_acquire);
  bool claimed = false;
  if (batch != nullptr) {
    const EntryWrite* end = batch + n;
    const EntryWrite* w = std::lower_bound(
        batch, end, addr, [](const EntryWrite& e, uint64_t a) { return e.at < a; });
    if (w != end && w->at == addr) {
      Insn insn;
      const bool committed = g_batch_committed.load(std::memory_order_acquire);
      std::memcpy(insn.bytes, committed ? &w->to : &w->from, sizeof w->to);
      const IsaTraits& traits = backend->traits();
      insn.size = static_cast<uint8_t>(traits.call_bytes);
      TrapFixup fix = backend->emulate(addr - traits.live_offset, insn);
      if (fix.push) {
        const uint64_t sp = arch::context_sp(uc) - 8;
        arch::set_context_sp(uc, sp);
        *reinterpret_cast<uint64_t*>(sp) = fix.push_value;
      }
      arch::set_context_pc(uc, fix.pc);
      g_traps.fetch_add(1, std::memory_order_relaxed);
      claimed = true;
    }
  }
  g_readers.fetch_sub(1, std::memory_order_release);
  return claimed;
}

void trap_handler(int sig, siginfo_t* si, void* ucv) {
  auto* uc = static_cast<ucontext_t*>(ucv);
  // Set with the first batch and never reset (the backend lives as long
  // as the process): it still tells a late trap's address after the batch.
  const Backend* backend = g_batch_backend.load(std::memory_order_acquire);
  // Only a breakpoint the CPU raised can be ours (not a SIGTRAP sent by
  // kill or raise).
  if (backend != nullptr && si->si_code == SI_KERNEL &&
      backend->live_protocol().trap_pc_offset != 0) {
    const LiveProtocol& protocol = backend->live_protocol();
    const uint64_t addr = arch::context_pc(uc) - protocol.trap_pc_offset;
    for (;;) {
      const uint64_t generation = g_generation.load(std::memory_order_seq_cst);
      if (emulate_from_batch(uc, backend, addr)) return;
      if (!trap_planted(addr, protocol.steps[0])) {
        // The batch ended between the trap and this handler: run the
        // instruction that replaced the breakpoint.
        arch::set_context_pc(uc, addr);
        return;
      }
      // Planted by a batch published since the look above? Then look again.
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (g_generation.load(std::memory_order_seq_cst) == generation) break;
    }
  }
  // A relocated entry's leftover bytes (runtime/relocation_traps.h): on to
  // the same instruction in its copy.
  if (si->si_code == SI_KERNEL) {
    if (const uint64_t to = relocation_trap_target(arch::context_pc(uc)); to != 0) {
      arch::set_context_pc(uc, to);
      return;
    }
  }
  chain_trap(sig, si, ucv);
}

void publish_batch(const Backend* backend, std::span<const EntryWrite> writes, bool committed) {
  g_batch_committed.store(committed, std::memory_order_relaxed);
  g_batch_backend.store(backend, std::memory_order_relaxed);
  g_batch_n.store(writes.size(), std::memory_order_relaxed);
  g_batch.store(writes.data(), std::memory_order_seq_cst);
  g_generation.fetch_add(1, std::memory_order_seq_cst);
}

void retract_batch() {
  g_batch.store(nullptr, std::memory_order_seq_cst);
  g_generation.fetch_add(1, std::memory_order_seq_cst);
  // A handler that read the batch before the store above is counted here
  // (the fetch_add above is a full barrier: the store cannot pass this load).
  while (g_readers.load(std::memory_order_seq_cst) != 0) {
  }
  g_batch_n.store(0, std::memory_order_release);
}

}  // namespace

std::string hex_bytes(const uint8_t* p, size_t n) {
  std::string out;
  char b[4];
  for (size_t i = 0; i < n; ++i) {
    snprintf(b, sizeof b, "%02x", p[i]);
    if (i) out += ' ';
    out += b;
  }
  return out;
}

Patcher::Patcher(const Backend& backend, CoreSync& sync) : backend_(backend), sync_(sync) {}

// Checked before every batch, not once: a program that sets its own
// SIGTRAP handler after ours (a crash reporter set up late, a test that
// single-steps) would otherwise get the traps of the next batch, and its
// thread would resume inside the instruction being rewritten (SIGILL).
// Ours goes back on top and chains to the program's.
Status Patcher::install_trap_handler() {
  std::lock_guard<std::mutex> lock(g_trap_mutex);
  if (g_trap_retired) return make_error(FTJIT_E_SYSTEM, "the SIGTRAP handler was given back (agent unloaded)");
  struct sigaction now;
  if (sigaction(SIGTRAP, nullptr, &now) != 0) {
    return make_error(FTJIT_E_SYSTEM, std::string("sigaction(SIGTRAP): ") + strerror(errno));
  }
  if ((now.sa_flags & SA_SIGINFO) != 0 && now.sa_sigaction == trap_handler) return {};
  const struct sigaction* published = g_previous_trap_action.load(std::memory_order_relaxed);
  struct sigaction* slot = published == &g_previous_trap_actions[0] ? &g_previous_trap_actions[1]
                                                                     : &g_previous_trap_actions[0];
  *slot = now;
  g_previous_trap_action.store(slot, std::memory_order_release);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = trap_handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGTRAP, &sa, nullptr) != 0) {
    return make_error(FTJIT_E_SYSTEM, std::string("sigaction(SIGTRAP): ") + strerror(errno));
  }
  if (published != nullptr) {
    ftjit::log().warn("ftjit: the program replaced ftjit's SIGTRAP handler; put back on top, chaining to the program's");
  }
  return {};
}

void Patcher::uninstall_trap_handler() {
  std::lock_guard<std::mutex> lock(g_trap_mutex);
  g_trap_retired = true;
  const struct sigaction* prev = g_previous_trap_action.load(std::memory_order_acquire);
  if (prev == nullptr) return;
  struct sigaction now;
  if (sigaction(SIGTRAP, nullptr, &now) == 0 && now.sa_sigaction == trap_handler) {
    sigaction(SIGTRAP, prev, nullptr);
  }
}

uint64_t Patcher::traps_emulated() { return g_traps.load(std::memory_order_relaxed); }

namespace {

// Writes the bytes step `s` covers at a site, read from `src`.
inline void write_range(const WriteStep& s, uint32_t size, const EntryWrite& w,
                        const uint8_t* src) {
  // A few bytes per site: a plain loop beats a memcpy call here.
  const uint32_t n = s.size != 0 ? s.size : size - s.offset;
  uint8_t* dst = w.rw + s.offset;
  for (uint32_t b = 0; b < n; ++b) dst[b] = src[b];
  arch::flush_icache(w.at + s.offset, n);
}

// Step `s`'s part of an instruction word (a site's `from` or `to`).
inline const uint8_t* bytes_of(const uint64_t& insn, const WriteStep& s) {
  return reinterpret_cast<const uint8_t*>(&insn) + s.offset;
}

// The bytes one step writes at a site.
inline void write_step(const WriteStep& s, uint32_t size, const EntryWrite& w) {
  write_range(s, size, w, s.from_new ? bytes_of(w.to, s) : s.fill);
}

// LiveChange::kAlignedStore: the whole new instruction in one naturally
// aligned store, seen by another thread as the old or the new one.
inline void store_whole(uint32_t size, const EntryWrite& w) {
  if (size == 8) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(w.rw), w.to, __ATOMIC_RELEASE);
  } else {
    __atomic_store_n(reinterpret_cast<uint32_t*>(w.rw), static_cast<uint32_t>(w.to),
                     __ATOMIC_RELEASE);
  }
  arch::flush_icache(w.at, size);
}

// Aligned 8-byte stores: atomic.
inline void store_slots(std::span<const SlotWrite> slots) {
  for (const SlotWrite& s : slots) {
    reinterpret_cast<std::atomic<uint64_t>*>(s.rw)->store(s.value, std::memory_order_release);
  }
}

inline bool holds(const EntryWrite& w, uint32_t size) {
  const auto* now = reinterpret_cast<const uint8_t*>(w.at);
  const auto* expect = reinterpret_cast<const uint8_t*>(&w.from);
  bool same = true;
  for (uint32_t b = 0; b < size; ++b) same &= now[b] == expect[b];
  return same;
}

Error unexpected_bytes(const EntryWrite& w, uint32_t size, uint64_t* failed_at) {
  if (failed_at != nullptr) *failed_at = w.at;
  const auto* expect = reinterpret_cast<const uint8_t*>(&w.from);
  return make_error(FTJIT_E_UNEXPECTED_BYTES,
                    "at " + format_hex(w.at) + ": expected " + hex_bytes(expect, size) +
                        ", found " + hex_bytes(reinterpret_cast<const uint8_t*>(w.at), size) +
                        "; nothing was patched");
}

}  // namespace

namespace {

// kRemapAfterWrite (code_memory.h): after a step's stores, the pages the
// batch wrote are mapped again, each once (`writes` are sorted). A failure
// is logged and remembered (code_publication_failed): the batch stands as
// written, valid for every thread at every step; only freeing waits.
void publish_batch_pages(std::span<const EntryWrite> writes, uint32_t size) {
  if (code_write_model() != CodeWriteModel::kRemapAfterWrite) return;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t last = ~uint64_t{0};
  for (const EntryWrite& w : writes) {
    const uint64_t first_page = w.at & ~(page - 1);
    if (first_page == last && ((w.at + size - 1) & ~(page - 1)) == last) continue;
    last = (w.at + size - 1) & ~(page - 1);
    Status st = publish_code(w.at, size);
    if (!st) ftjit::log().error("ftjit: {}", st.error().message);
  }
}

}  // namespace

Status Patcher::apply(std::span<const EntryWrite> writes, std::span<const SlotWrite> slots,
                      uint64_t* failed_at) {
  last_batch_syncs_ = 0;
  const uint32_t size = backend_.traits().call_bytes;
  const LiveProtocol& protocol = backend_.live_protocol();
  // Sites are far apart in a large batch: fetch the code lines a few sites
  // ahead so that the misses overlap instead of queueing.
  constexpr size_t kAhead = 16;
  // Every site is verified before any can run its new instruction. When the
  // first step only plants a trap (x86-64's int3), verifying a site and
  // planting its trap are one pass over the code instead of two: a thread
  // that traps meanwhile runs the site's old instruction, and a site that
  // fails puts every trap planted so far back before anything else is
  // written. Otherwise the verification is a pass of its own.
  if (writes.empty()) {
    store_slots(slots);
    return {};
  }
  const bool aligned_store = protocol.change == LiveChange::kAlignedStore;
  const bool fuse = !aligned_store && protocol.n_steps > 0 && !protocol.steps[0].from_new;
  if (!fuse) {
    for (size_t i = 0; i < writes.size(); ++i) {
      if (i + kAhead < writes.size()) __builtin_prefetch(reinterpret_cast<const void*>(writes[i + kAhead].at));
      if (!holds(writes[i], size)) return unexpected_bytes(writes[i], size, failed_at);
      if (aligned_store && writes[i].at % size != 0) {
        if (failed_at != nullptr) *failed_at = writes[i].at;
        return make_error(FTJIT_E_UNSUPPORTED,
                          "at " + format_hex(writes[i].at) +
                              ": the live instruction is not naturally aligned, so one store "
                              "cannot change it atomically; nothing was patched");
      }
    }
  }

  if (aligned_store) {
    // No thread can see a half-written instruction: no trap window.
    store_slots(slots);
    for (size_t i = 0; i < writes.size(); ++i) {
      if (i + kAhead < writes.size()) __builtin_prefetch(writes[i + kAhead].rw, 1);
      store_whole(size, writes[i]);
    }
    publish_batch_pages(writes, size);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    (void)sync_.sync();
    ++last_batch_syncs_;
    return {};
  }

  FTJIT_TRY(install_trap_handler());
  publish_batch(&backend_, writes, /*committed=*/!fuse);
  uint8_t step = 0;
  if (fuse) {
    const WriteStep& first = protocol.steps[0];
    for (size_t i = 0; i < writes.size(); ++i) {
      const EntryWrite& w = writes[i];
      if (i + kAhead < writes.size()) __builtin_prefetch(writes[i + kAhead].rw, 1);
      if (!holds(w, size)) {
        Error e = unexpected_bytes(w, size, failed_at);
        // Back to what each trapped site held; threads that trap until the
        // sync below are run through `from` by the handler.
        for (size_t k = 0; k < i; ++k) write_range(first, size, writes[k], bytes_of(writes[k].from, first));
        publish_batch_pages(writes.first(i), size);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (i > 0) (void)sync_.sync();
        retract_batch();
        return e;
      }
      write_step(first, size, w);
    }
    publish_batch_pages(writes, size);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    (void)sync_.sync();
    ++last_batch_syncs_;
    step = 1;
  }
  // Slots before any site can run its new instruction: a site must never
  // reach the call-ops trampoline before its slot holds the ops.
  store_slots(slots);
  g_batch_committed.store(true, std::memory_order_release);

  // The backend's (remaining) steps, each for the whole batch, then one sync.
  for (; step < protocol.n_steps; ++step) {
    const WriteStep& s = protocol.steps[step];
    for (size_t i = 0; i < writes.size(); ++i) {
      if (i + kAhead < writes.size()) __builtin_prefetch(writes[i + kAhead].rw, 1);
      write_step(s, size, writes[i]);
    }
    publish_batch_pages(writes, size);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // A failing sync cannot happen with membarrier registered; with the
    // signal fallback it means a thread did not answer. Going on is still
    // right: every step leaves each site valid for a thread that runs it.
    (void)sync_.sync();
    ++last_batch_syncs_;
  }
  retract_batch();
  return {};
}

Status Patcher::write_fixed_parts(std::span<const FixedPartWrite> sites) {
  if (sites.empty()) return {};
  const uint32_t live_offset = backend_.traits().live_offset;
  auto fixup = [&](uint64_t pc) -> uint64_t {
    auto it = std::upper_bound(sites.begin(), sites.end(), pc,
                               [](uint64_t a, const FixedPartWrite& s) { return a < s.entry; });
    if (it == sites.begin()) return 0;
    --it;
    if (pc > it->entry && pc < it->entry + it->size) return it->entry + it->size;
    // Past the fixed part's old bytes, at a live word that follows it
    // (arm64: past the nop that init makes `mov x9, x30`): run the new
    // fixed part first, or a live word enabled before the thread gets
    // there would call with x9 never set (the function then returns to
    // whatever x9 held). Running it again is harmless in either state.
    if (live_offset >= it->size && pc == it->entry + live_offset) return it->entry;
    return 0;
  };
  auto body = [&] {
    for (const FixedPartWrite& s : sites) {
      std::memcpy(s.rw, &s.bytes, s.size);
      arch::flush_icache(s.entry, s.size);
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
  };
  FTJIT_TRY(stop_the_world(fixup, body));
  // kRemapAfterWrite: after the threads are let go (the remap takes a
  // lock, which a parked thread might hold). Until then a thread may still
  // run a fixed part's old bytes, which is as valid: init and de-init only
  // happen while the live part is disabled.
  if (code_write_model() == CodeWriteModel::kRemapAfterWrite) {
    for (const FixedPartWrite& s : sites) {
      Status st = publish_code(s.entry, s.size);
      if (!st) ftjit::log().error("ftjit: {}", st.error().message);
    }
  }
  // Parked threads passed through the kernel on resume; this sync covers
  // threads that were not parked (none but us) and orders our own view.
  return sync_.sync();
}

}  // namespace ftjit
