// SPDX-License-Identifier: MIT
// The services table every plugin gets (ftjit_host), and the per-thread
// blocks behind thread_storage and the event buffers.
//
// Event path ([event] in plugin.h): thread_id, now_ns, thread_storage,
// event_reserve/commit, call_depth/call_stack. After a thread's first event
// they touch only thread-local memory and the thread's own block: no lock,
// no allocation, no syscall but clock_gettime (vDSO).
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>

#include <spdlog/spdlog.h>

#include "plugins/host/host_internal.h"

namespace ftjit::plugins::detail {

namespace {

// ---------------------------------------------------------------------------
// Thread-local state
// ---------------------------------------------------------------------------

struct SlotEntry {
  uint64_t generation;
  ThreadBlock* block;
};

// Trivially destructible on purpose: no TLS destructor to run at thread
// exit, and a thread's blocks stay with their instance.
thread_local SlotEntry t_slots[kMaxInstances];
thread_local int32_t t_tid;

void forget_tid_in_child() { t_tid = 0; }

int32_t current_tid() {
  int32_t tid = t_tid;
  if (tid == 0) {
    static const bool registered = [] {
      // A forked child's thread inherits the parent's cached id.
      pthread_atfork(nullptr, nullptr, forget_tid_in_child);
      return true;
    }();
    (void)registered;
    tid = static_cast<int32_t>(::syscall(SYS_gettid));
    t_tid = tid;
  }
  return tid;
}

std::mutex g_slots_mu;
bool g_slot_used[kMaxInstances];
std::atomic<uint64_t> g_generation{0};

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// ---------------------------------------------------------------------------
// Services
// ---------------------------------------------------------------------------

Instance* instance_of(ftjit_plugin_ctx* ctx) { return ctx->instance; }

spdlog::level::level_enum spd_level(int level) {
  switch (level) {
    case FTJIT_LOG_DEBUG: return spdlog::level::debug;
    case FTJIT_LOG_INFO: return spdlog::level::info;
    case FTJIT_LOG_WARN: return spdlog::level::warn;
    default: return spdlog::level::err;
  }
}

std::string vformat(const char* fmt, va_list ap) {
  char buf[512];
  va_list copy;
  va_copy(copy, ap);
  int n = std::vsnprintf(buf, sizeof buf, fmt, copy);
  va_end(copy);
  if (n < 0) return fmt;
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, n);
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), fmt, ap);
  out.resize(n);
  return out;
}

void svc_log(ftjit_plugin_ctx* ctx, int level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  const char* who = ctx != nullptr ? instance_of(ctx)->name() : "plugin";
  spdlog::log(spd_level(level), "{}: {}", who, msg);
}

void svc_set_error(ftjit_plugin_ctx* ctx, const char* fmt, ...) {
  if (ctx == nullptr) return;
  va_list ap;
  va_start(ap, fmt);
  instance_of(ctx)->set_error(vformat(fmt, ap));
  va_end(ap);
}

uint64_t svc_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

int32_t svc_thread_id() { return current_tid(); }

const char* svc_thread_name() {
  // Read afresh each time: threads rename themselves, and this is no
  // event-path service.
  thread_local char name[17];
  if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0) name[0] = '\0';
  name[16] = '\0';
  return name;
}

const char* svc_symbol(ftjit_plugin_ctx* ctx, uint64_t ip) {
  SymbolCache* cache = instance_of(ctx)->symbols;
  return cache != nullptr ? cache->lookup(ip) : nullptr;
}

const OptionValue* typed_option(ftjit_plugin_ctx* ctx, const char* name, ftjit_option_type type) {
  if (ctx == nullptr || name == nullptr) return nullptr;
  const OptionValue* v = instance_of(ctx)->option(name);
  return v != nullptr && v->type == type ? v : nullptr;
}

int svc_option_bool(ftjit_plugin_ctx* ctx, const char* name) {
  const OptionValue* v = typed_option(ctx, name, FTJIT_OPTION_BOOL);
  return v != nullptr && v->b ? 1 : 0;
}

int64_t svc_option_int(ftjit_plugin_ctx* ctx, const char* name) {
  const OptionValue* v = typed_option(ctx, name, FTJIT_OPTION_INT);
  return v != nullptr ? v->i : 0;
}

double svc_option_double(ftjit_plugin_ctx* ctx, const char* name) {
  const OptionValue* v = typed_option(ctx, name, FTJIT_OPTION_DOUBLE);
  return v != nullptr ? v->d : 0.0;
}

const char* svc_option_string(ftjit_plugin_ctx* ctx, const char* name) {
  const OptionValue* v = typed_option(ctx, name, FTJIT_OPTION_STRING);
  return v != nullptr ? v->s.c_str() : "";
}

FILE* svc_output(ftjit_plugin_ctx* ctx) { return instance_of(ctx)->out; }

const char* svc_format(ftjit_plugin_ctx* ctx) { return instance_of(ctx)->format.c_str(); }

// The calling thread's block for ctx: one compare on the hot path.
inline ThreadBlock* block_of(ftjit_plugin_ctx* ctx) {
  SlotEntry& e = t_slots[ctx->slot];
  if (e.generation == ctx->generation) [[likely]] return e.block;
  return ctx->needs_block != 0 ? ctx->instance->thread_block() : nullptr;
}

void* svc_thread_storage(ftjit_plugin_ctx* ctx) {
  ThreadBlock* b = block_of(ctx);
  return b != nullptr ? b->storage : nullptr;  // storage is NULL if size 0
}

void svc_for_each_thread(ftjit_plugin_ctx* ctx, ftjit_thread_visit_fn fn, void* arg) {
  if (ctx == nullptr || fn == nullptr) return;
  for (ThreadBlock* b = instance_of(ctx)->threads.load(std::memory_order_acquire); b != nullptr;
       b = b->next) {
    char name[16];
    b->copy_name(name);
    ftjit_thread_info info{b->tid, name, b->drops.load(std::memory_order_relaxed)};
    fn(&info, b->storage, arg);
  }
}

void* svc_event_reserve(ftjit_plugin_ctx* ctx) {
  ThreadBlock* b = block_of(ctx);
  if (b == nullptr || b->events == nullptr) {
    if (instance_of(ctx)->event_size != 0) {
      instance_of(ctx)->orphan_drops.fetch_add(1, std::memory_order_relaxed);
    }
    return nullptr;
  }
  const uint64_t h = b->head.load(std::memory_order_relaxed);
  if (h - b->tail.load(std::memory_order_acquire) > b->mask) {
    b->reserved = false;
    // Only this thread writes drops; the writer and report only read it.
    b->drops.store(b->drops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return nullptr;
  }
  b->reserved = true;
  b->reserved_at = h;
  return b->events + (h & b->mask) * b->event_size;
}

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

void svc_drop_counts(ftjit_plugin_ctx* ctx, uint64_t* recursion, uint64_t* events) {
  Instance* inst = instance_of(ctx);
  if (recursion != nullptr) {
    uint64_t now = 0;
    if (inst->engine != nullptr) {
      ftjit_stats st{};
      ftjit_get_stats(inst->engine, &st);
      now = st.recursion_drops;
    }
    *recursion = now >= inst->recursion_base ? now - inst->recursion_base : 0;
  }
  if (events != nullptr) *events = inst->events_dropped();
}

const ftjit_host kHost = {
    sizeof(ftjit_host),
    FTJIT_PLUGIN_ABI_VERSION,
    svc_log,
    svc_set_error,
    svc_now_ns,
    svc_thread_id,
    svc_thread_name,
    svc_symbol,
    svc_option_bool,
    svc_option_int,
    svc_option_double,
    svc_option_string,
    svc_output,
    svc_format,
    svc_thread_storage,
    svc_for_each_thread,
    svc_event_reserve,
    svc_event_commit,
    svc_call_depth,
    svc_call_stack,
    svc_drop_counts,
};

}  // namespace

const ftjit_host* host_table() { return &kHost; }

// ---------------------------------------------------------------------------
// Slots
// ---------------------------------------------------------------------------

Result<uint32_t> acquire_slot() {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  for (uint32_t i = 0; i < kMaxInstances; ++i) {
    if (!g_slot_used[i]) {
      g_slot_used[i] = true;
      return i;
    }
  }
  return make_error(FTJIT_E_INVALID_ARGUMENT, "more than " + std::to_string(kMaxInstances) +
                                                  " plugin instances loaded at once");
}

void release_slot(uint32_t slot) {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  g_slot_used[slot] = false;
}

uint64_t next_generation() { return g_generation.fetch_add(1, std::memory_order_relaxed) + 1; }

// ---------------------------------------------------------------------------
// Thread blocks
// ---------------------------------------------------------------------------

void ThreadBlock::set_name(const char* name) {
  uint64_t words[2] = {0, 0};
  std::memcpy(words, name, strnlen(name, 15));
  name_words[0].store(words[0], std::memory_order_relaxed);
  name_words[1].store(words[1], std::memory_order_relaxed);
}

void ThreadBlock::copy_name(char out[16]) const {
  uint64_t words[2] = {name_words[0].load(std::memory_order_relaxed),
                       name_words[1].load(std::memory_order_relaxed)};
  std::memcpy(out, words, 16);
  out[15] = '\0';
}

void refresh_thread_name(ThreadBlock* b) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/comm", b->tid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // the thread is gone: keep the name last seen
  char name[17] = {};
  ssize_t n = ::read(fd, name, 16);
  ::close(fd);
  if (n <= 0) return;
  if (name[n - 1] == '\n') name[n - 1] = '\0';
  b->set_name(name);
}

ThreadBlock* Instance::create_block() {
  const size_t header = round_up(sizeof(ThreadBlock), 64);
  const size_t storage = round_up(storage_size, 64);
  const size_t ring = static_cast<size_t>(event_size) * (event_size != 0 ? ring_capacity : 0);
  const size_t bytes = round_up(header + storage + ring, static_cast<size_t>(getpagesize()));
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

uint64_t Instance::events_dropped() const {
  uint64_t n = orphan_drops.load(std::memory_order_relaxed);
  for (ThreadBlock* b = threads.load(std::memory_order_acquire); b != nullptr; b = b->next) {
    n += b->drops.load(std::memory_order_relaxed);
  }
  return n;
}

const OptionValue* Instance::option(const char* name) const {
  for (const OptionValue& v : options) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

void Instance::set_error(std::string message) {
  std::lock_guard<std::mutex> lock(error_mu_);
  error_ = std::move(message);
}

std::string Instance::take_error() {
  std::lock_guard<std::mutex> lock(error_mu_);
  return std::exchange(error_, {});
}

Instance::~Instance() {
  ThreadBlock* b = threads.exchange(nullptr, std::memory_order_acquire);
  while (b != nullptr) {
    ThreadBlock* next = b->next;
    size_t bytes = b->map_bytes;
    b->~ThreadBlock();
    munmap(b, bytes);
    b = next;
  }
  if (has_slot) release_slot(ctx.slot);
}

// ---------------------------------------------------------------------------
// Symbols
// ---------------------------------------------------------------------------

const char* SymbolCache::lookup(uint64_t ip) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = names_.find(ip); it != names_.end()) return it->second.c_str();
  if (misses_.count(ip) != 0) return nullptr;
  const char* name = engine_ != nullptr ? ftjit_site_name(engine_, ip) : nullptr;
  if (name == nullptr) {
    misses_.emplace(ip, true);
    return nullptr;
  }
  return names_.emplace(ip, name).first->second.c_str();
}

}  // namespace ftjit::plugins::detail
