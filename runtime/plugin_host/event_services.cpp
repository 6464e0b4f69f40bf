// SPDX-License-Identifier: MIT
// The event-path services ([event] in plugin.h): thread_id, now_ns,
// thread_storage, event_reserve/commit, call_depth/call_stack,
// instance_data, and the creation of a thread's block on its first event.
// After a thread's first event they touch only thread-local memory and the
// thread's own block: no lock, no allocation, no system call.
//
// Built with -mgeneral-regs-only: a plugin that declares
// FTJIT_PLUGIN_F_NO_FP runs under a trampoline that did not save the
// vector registers, and everything it calls here must leave them alone
// (which is also why nothing here calls libc's string functions).
#include <pthread.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <mutex>
#include <new>

#include "runtime/fork_handlers.h"
#include "runtime/plugin_host/host_internal.h"
#include "runtime/cycle_clock.h"

namespace ftjit::plugins::detail {

namespace {

struct SlotEntry {
  uint64_t generation;
  ThreadBlock* block;
};

// Trivially destructible on purpose: no TLS destructor to run at thread
// exit, and a thread's blocks stay with their instance.
//
// Initial-exec, like the runtime's own thread state: in the agent, a
// dlopen'd shared object, the default model calls __tls_get_addr on every
// service call, and malloc on a thread's first. (Static TLS is scarce for
// a dlopen'd library: hence kMaxInstances.)
thread_local SlotEntry t_slots[kMaxInstances] __attribute__((tls_model("initial-exec")));
thread_local int32_t t_tid __attribute__((tls_model("initial-exec")));
// The writer's own events (a consume() that calls traced code) never wait
// for the writer.
thread_local bool t_is_writer __attribute__((tls_model("initial-exec")));
// A forked child has no writer thread: its threads never wait for one.
std::atomic<bool> g_no_writer_here{false};

void forget_parent_in_child() {
  t_tid = 0;
  g_no_writer_here.store(true, std::memory_order_relaxed);
}

}  // namespace

// From the host's own thread, before any callback can run: the event path
// must take no lock (a callback may run inside fork's prepare handlers,
// or under any lock of the thread it interrupts), and registering a fork
// handler takes glibc's atfork lock.
void register_event_fork_handlers() {
  static std::once_flag once;
  // A forked child's thread inherits the parent's cached id, and no writer.
  std::call_once(once, [] { register_fork_handlers(nullptr, nullptr, forget_parent_in_child); });
}

namespace {

int32_t current_tid() {
  int32_t tid = t_tid;
  if (tid == 0) {
    tid = static_cast<int32_t>(::syscall(SYS_gettid));
    t_tid = tid;
  }
  return tid;
}


size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Only this thread writes its block's producer counters: no atomic
// read-modify-write on the event path.
inline void bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

void wake_writer(Instance* inst) {
  inst->writer_wake->fetch_add(1, std::memory_order_release);
  futex_wake_all(inst->writer_wake);
}

// kBlock, the ring full at head `h`: sleeps until the writer frees a slot.
// Gives up (false: the caller drops) when the writer frees nothing for
// inst->wait_ns, and without waiting when no writer can come: the writer
// itself, a forked child, or a thread that gave up and whose ring the
// writer has not emptied since.
__attribute__((noinline, cold)) bool wait_for_room(ThreadBlock* b, Instance* inst, uint64_t h) {
  if (inst->policy != BufferPolicy::kBlock || inst->writer_wake == nullptr || t_is_writer ||
      g_no_writer_here.load(std::memory_order_relaxed) ||
      b->gave_up.load(std::memory_order_relaxed) != 0) {
    return false;
  }
  constexpr uint64_t kNap = 1'000'000;  // ns: a lost wake costs at most this
  const uint64_t start = monotonic_ns();
  uint64_t progress_at = start;
  uint64_t seen = b->tail.load(std::memory_order_acquire);
  bump(b->waits);
  bool room = false;
  for (;;) {
    // Dekker with the writer's tail store and its read of `sleeping`: one
    // of the two sees the other, so a wake is never lost for long.
    b->sleeping.store(1, std::memory_order_seq_cst);
    wake_writer(inst);
    const uint64_t t = b->tail.load(std::memory_order_seq_cst);
    if (h - t <= b->mask) {
      room = true;
      break;
    }
    const uint64_t now = monotonic_ns();
    if (t != seen) {
      seen = t;
      progress_at = now;
    }
    if (now - progress_at >= inst->wait_ns) {
      b->gave_up.store(1, std::memory_order_relaxed);
      bump(b->timeouts);
      break;
    }
    const uint64_t left = inst->wait_ns - (now - progress_at);
    futex_wait_for(tail_word(b), static_cast<uint32_t>(t), left < kNap ? left : kNap);
  }
  b->sleeping.store(0, std::memory_order_relaxed);
  bump(b->wait_ns, monotonic_ns() - start);
  return room;
}

// A thread's first event of an instance makes the thread's block, out of
// line: see with_block.
template <auto Use>
__attribute__((noinline, cold)) auto with_first_block(ftjit_plugin_ctx* ctx) {
  return Use(ctx->needs_block != 0 ? ctx->instance->thread_block() : nullptr, ctx);
}

// Use(the calling thread's block for ctx, or nullptr; ctx). One compare on
// the common path, which stays a leaf: no register to save, no frame.
template <auto Use>
inline auto with_block(ftjit_plugin_ctx* ctx) {
  SlotEntry& e = t_slots[ctx->slot];
  if (e.generation == ctx->generation) [[likely]] return Use(e.block, ctx);
  return with_first_block<Use>(ctx);
}

inline ThreadBlock* block_itself(ThreadBlock* b, ftjit_plugin_ctx*) { return b; }

inline void* storage_of(ThreadBlock* b, ftjit_plugin_ctx*) {
  return b != nullptr ? b->storage : nullptr;  // storage is NULL if size 0
}

inline void* reserve_in(ThreadBlock* b, ftjit_plugin_ctx* ctx) {
  if (b == nullptr || b->events == nullptr) {
    if (ctx->instance->event_size != 0) {
      ctx->instance->orphan_drops.fetch_add(1, std::memory_order_relaxed);
    }
    return nullptr;
  }
  Instance* inst = ctx->instance;
  const uint64_t h = b->head.load(std::memory_order_relaxed);
  const uint64_t used = h - b->tail.load(std::memory_order_acquire);
  if (used > b->mask) [[unlikely]] {
    // Full. A flight recorder writes over its oldest event, unless the
    // writer is copying the ring out; kBlock waits; kDrop drops.
    const bool overwrite = inst->policy == BufferPolicy::kOverwrite &&
                           inst->dumping.load(std::memory_order_acquire) == 0;
    if (!overwrite && !wait_for_room(b, inst, h)) {
      b->reserved = false;
      // Only this thread writes drops; the writer and report only read it.
      bump(b->drops);
      return nullptr;
    }
  } else if (used == (b->mask >> 1) && inst->writer_wake != nullptr) [[unlikely]] {
    // Half full: the writer comes now rather than at its next period.
    wake_writer(inst);
  }
  b->reserved = true;
  b->reserved_at = h;
  return b->events + (h & b->mask) * b->event_size;
}

}  // namespace

void futex_wake_all(const void* word) {
  ::syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

void futex_wait_for(const void* word, uint32_t expected, uint64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000),
              static_cast<long>(timeout_ns % 1'000'000'000)};
  ::syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}

void mark_writer_thread() { t_is_writer = true; }

void* svc_thread_storage(ftjit_plugin_ctx* ctx) { return with_block<storage_of>(ctx); }

// A late entry of the record gate reads its frame's entry time.
uint64_t svc_now_ns() {
  const uint64_t replayed = t_replay_now_ns;
  return replayed != 0 ? replayed : monotonic_ns();
}

ThreadBlock* svc_thread_block(ftjit_plugin_ctx* ctx) { return with_block<block_itself>(ctx); }

const ftjit_record_info* svc_record_info(ftjit_plugin_ctx* ctx) { return &ctx->instance->gate.info; }

int32_t svc_thread_id() { return current_tid(); }

void* svc_event_reserve(ftjit_plugin_ctx* ctx) { return with_block<reserve_in>(ctx); }

void svc_event_commit(ftjit_plugin_ctx* ctx) {
  SlotEntry& e = t_slots[ctx->slot];
  if (e.generation != ctx->generation) return;  // nothing was reserved
  ThreadBlock* b = e.block;
  if (!b->reserved) return;  // the reserve failed, or commit came twice
  b->reserved = false;
  b->head.store(b->reserved_at + 1, std::memory_order_release);
}

uint32_t svc_call_depth() { return ftjit_shadow_depth(); }

size_t svc_call_stack(uint64_t* ips, size_t max) { return ftjit_shadow_stack(ips, max); }

void* svc_instance_data(ftjit_plugin_ctx* ctx) { return ctx != nullptr ? ctx->plugin_data : nullptr; }


void ThreadBlock::set_name(const char* name) {
  uint64_t words[2] = {0, 0};
  // Byte by byte: libc's strnlen may use vector registers.
  auto* bytes = reinterpret_cast<unsigned char*>(words);
  for (size_t i = 0; i < 15 && name[i] != '\0'; ++i) bytes[i] = static_cast<unsigned char>(name[i]);
  name_words[0].store(words[0], std::memory_order_relaxed);
  name_words[1].store(words[1], std::memory_order_relaxed);
}

ThreadBlock* Instance::create_block() {
  const size_t header = round_up(sizeof(ThreadBlock), 64);
  const size_t storage = round_up(storage_size, 64);
  const size_t ring = static_cast<size_t>(event_size) * (event_size != 0 ? ring_capacity : 0);
  const size_t gate_bytes = gated ? round_up(sizeof(GateThread), 64) : 0;
  const size_t bytes = round_up(header + storage + ring + gate_bytes, static_cast<size_t>(getpagesize()));
  // mmap, not malloc: async-signal-safe, lock-free in userspace, and never
  // a traced allocator. Its pages come zeroed, as thread storage promises.
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return nullptr;
  auto* b = new (mem) ThreadBlock;
  b->map_bytes = bytes;
  b->tid = current_tid();
  b->storage = storage_size != 0 ? static_cast<uint8_t*>(mem) + header : nullptr;
  b->events = event_size != 0 ? static_cast<uint8_t*>(mem) + header + storage : nullptr;
  b->event_size = event_size;
  if (gated) b->gate = reinterpret_cast<GateThread*>(static_cast<uint8_t*>(mem) + header + storage + ring);
  b->id = blocks_made.fetch_add(1, std::memory_order_relaxed);
  b->mask = event_size != 0 ? ring_capacity - 1 : 0;
  char name[17] = {};
  if (prctl(PR_GET_NAME, name, 0, 0, 0) == 0) b->set_name(name);

  ThreadBlock* head = threads.load(std::memory_order_relaxed);
  do {
    b->next = head;
  } while (!threads.compare_exchange_weak(head, b, std::memory_order_release,
                                          std::memory_order_relaxed));
  return b;
}

ThreadBlock* Instance::thread_block() {
  SlotEntry& e = t_slots[ctx.slot];
  if (e.generation == ctx.generation) return e.block;
  ThreadBlock* b = create_block();
  if (b == nullptr) return nullptr;
  e.block = b;
  e.generation = ctx.generation;
  return b;
}

}  // namespace ftjit::plugins::detail
