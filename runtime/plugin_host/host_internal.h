// SPDX-License-Identifier: MIT
// Plugin host internals shared by its .cpp files (and white-box tests):
// option values, the loaded shared object, the per-instance context, and the
// per-thread blocks that hold a plugin's thread storage and event ring.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "runtime/plugin_host/arg_capture.h"
#include "runtime/plugin_host/plugin_host.h"
#include "runtime/plugin_host/record_gate.h"

namespace ftjit::plugins::detail {

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

// One option's value, typed as the plugin declared it.
struct OptionValue {
  std::string name;
  ftjit_option_type type = FTJIT_OPTION_STRING;
  bool b = false;
  int64_t i = 0;
  double d = 0.0;
  std::string s;
};

// Parses `text` as an option of `type`. The error message says what was
// wanted ("an integer") and what was given; callers prefix the context.
Result<OptionValue> parse_option_value(ftjit_option_type type, std::string_view text);

// "an integer", "a boolean (true/false, yes/no, on/off, 1/0)", ...
const char* option_type_wanted(ftjit_option_type type);

// True for names of the form [a-z0-9_-]+ (plugin, option and format names).
bool valid_name(std::string_view name);

// ---------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------

// A dlopen handle, closed on destruction.
class Library {
 public:
  Library() = default;
  explicit Library(void* handle) : handle_(handle) {}
  Library(Library&& o) noexcept : handle_(o.handle_) { o.handle_ = nullptr; }
  Library& operator=(Library&& o) noexcept;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library();

  void* get() const { return handle_; }
  // Forgets the handle without closing it (code that may still run in it).
  void leak() { handle_ = nullptr; }

 private:
  void* handle_ = nullptr;
};

// A plugin whose descriptor passed every check.
struct LoadedPlugin {
  std::string path;
  std::string label;  // "plugin 'NAME' (PATH)", for messages
  Library library;
  const ftjit_plugin* desc = nullptr;
};

// The descriptor's inline work, nullptr if it has none (or predates it).
inline const ftjit_plugin_inline* plugin_inline_work(const ftjit_plugin* d) {
  if (d->struct_size < offsetof(ftjit_plugin, inline_work) + sizeof(d->inline_work)) return nullptr;
  return d->inline_work;
}

// The descriptor's consume_run, nullptr if it has none (or predates it).
inline auto plugin_consume_run(const ftjit_plugin* d) -> decltype(d->consume_run) {
  if (d->struct_size < offsetof(ftjit_plugin, consume_run) + sizeof(d->consume_run)) return nullptr;
  return d->consume_run;
}

// dlopens the plugin and checks its descriptor (see TraceSession::start).
Result<LoadedPlugin> load_plugin(const PluginSpec& spec);

// The declared options with their defaults, overridden by the spec's
// assignments; fails on an unknown name (listing the known ones) or a value
// that does not parse as the declared type.
Result<std::vector<OptionValue>> resolve_options(const LoadedPlugin& plugin,
                                                 const PluginSpec& spec);

PluginInfo info_of(const LoadedPlugin& plugin);

// The table every plugin gets.
const ftjit_host* host_table();

// The event-path services (event_services.cpp, no vector registers).
uint64_t svc_now_ns();
int32_t svc_thread_id();
void* svc_thread_storage(ftjit_plugin_ctx* ctx);
void* svc_event_reserve(ftjit_plugin_ctx* ctx);
void svc_event_commit(ftjit_plugin_ctx* ctx);
uint32_t svc_call_depth();
size_t svc_call_stack(uint64_t* ips, size_t max);
void* svc_instance_data(ftjit_plugin_ctx* ctx);
uint32_t svc_args_capture(ftjit_plugin_ctx* ctx, uint64_t ip, const ftjit_plugin_regs* regs, void* out);
uint32_t svc_retval_capture(ftjit_plugin_ctx* ctx, uint64_t ip, const ftjit_plugin_ret* ret, void* out);
uint32_t svc_args_capture_hint(ftjit_plugin_ctx* ctx, uint64_t ip, const ftjit_plugin_regs* regs, void* out,
                               uint64_t* exit_hint);
uint32_t svc_retval_capture_hint(ftjit_plugin_ctx* ctx, uint64_t ip, uint64_t exit_hint,
                                 const ftjit_plugin_ret* ret, void* out);
constexpr uint64_t kExitHintNone = FTJIT_ARGS_HINT_NONE;
int svc_arg_key(ftjit_plugin_ctx* ctx, uint64_t ip, const ftjit_plugin_regs* regs, uint64_t* key);
const ftjit_record_info* svc_record_info(ftjit_plugin_ctx* ctx);
const ftjit_args_fast_table* svc_args_fast_table(ftjit_plugin_ctx* ctx);
// The calling thread's block for ctx, made on its first call; NULL if the
// mapping failed (the record gate's way to its frames).
ThreadBlock* svc_thread_block(ftjit_plugin_ctx* ctx);

// ---------------------------------------------------------------------------
// Per-thread state
// ---------------------------------------------------------------------------

// One thread's state for one instance: its storage and its event ring, in
// one anonymous mapping (the event path must not call malloc, which may be
// traced or hold a lock). Linked into the instance's list on the thread's
// first call; never unlinked before the instance dies, so it outlives the
// thread.
struct ThreadBlock {
  ThreadBlock* next = nullptr;  // immutable once published
  size_t map_bytes = 0;
  int32_t tid = 0;
  // comm, as two words so the writer can refresh it while others copy it
  // without a data race.
  std::atomic<uint64_t> name_words[2] = {};

  uint8_t* storage = nullptr;
  uint8_t* events = nullptr;
  GateThread* gate = nullptr;  // the record gate's frames; null without one
  uint32_t event_size = 0;
  uint64_t mask = 0;  // ring capacity - 1; capacity is a power of two

  uint32_t id = 0;  // the instance's count of blocks before this one

  // Producer side (the traced thread, and the handlers it runs).
  alignas(64) std::atomic<uint64_t> head{0};
  uint64_t reserved_at = 0;
  bool reserved = false;
  std::atomic<uint64_t> drops{0};
  // kBlock: how often and how long the thread waited for room, and how
  // often it gave up. After giving up it drops without waiting until the
  // writer has emptied its ring (a writer that is stuck costs each thread
  // one wait, not one per event).
  std::atomic<uint64_t> waits{0};
  std::atomic<uint64_t> wait_ns{0};
  std::atomic<uint64_t> timeouts{0};
  std::atomic<uint32_t> gave_up{0};
  // Nonzero while the thread sleeps on the low word of `tail` (a futex):
  // the writer wakes it when it frees room.
  std::atomic<uint32_t> sleeping{0};

  // Consumer side (the writer thread).
  alignas(64) std::atomic<uint64_t> tail{0};
  std::atomic<uint64_t> overwritten{0};  // kOverwrite: events lost to newer

  void set_name(const char* name);   // up to 15 characters
  void copy_name(char out[16]) const;
};

// How many events the writer hands over at a time: a run is contiguous in
// the ring, and its slots are freed once it is consumed, so a thread that
// fills its ring meanwhile gets room after at most this many.
constexpr uint64_t kDrainRunEvents = 256;

// Pulls committed events off a block in order, calling `fn(events, n)` for
// runs of at most kDrainRunEvents consecutive slots. Only the writer may
// call it. Returns how many it consumed.
template <typename Fn>
uint64_t drain_block(ThreadBlock* b, Fn&& fn) {
  uint64_t t = b->tail.load(std::memory_order_relaxed);
  const uint64_t h = b->head.load(std::memory_order_acquire);
  const uint64_t total = h - t;
  while (t != h) {
    const uint64_t first = t & b->mask;
    const uint64_t n = std::min({h - t, b->mask + 1 - first, kDrainRunEvents});
    fn(b->events + first * b->event_size, n);
    t += n;
    b->tail.store(t, std::memory_order_release);
  }
  return total;
}

// Reads /proc/self/task/TID/comm into `b` if that thread still exists.
void refresh_thread_name(ThreadBlock* b);

// Instance slots index every thread's small array of per-instance pointers.
// A generation (never reused) tells a stale entry of a dead instance from a
// live one, so slots may be reused. The array is initial-exec TLS (16 bytes
// a slot), which a dlopen'd agent takes from the few static TLS bytes glibc
// keeps for every such library together (1,664 by default).
constexpr uint32_t kMaxInstances = 16;
Result<uint32_t> acquire_slot();
void release_slot(uint32_t slot);
uint64_t next_generation();

// ---------------------------------------------------------------------------
// Instance
// ---------------------------------------------------------------------------

// demangled names of sites, kept for the session so a plugin's pointers stay
// valid whatever happens to the engine's own strings.
class SymbolCache {
 public:
  explicit SymbolCache(ftjit_engine* engine) : engine_(engine) {}
  const char* lookup(uint64_t ip);

 private:
  ftjit_engine* engine_;
  std::mutex mu_;
  std::unordered_map<uint64_t, std::string> names_;  // node-stable strings
  std::unordered_map<uint64_t, bool> misses_;
};

}  // namespace ftjit::plugins::detail

// The context a plugin's callbacks get. The engine calls the plugin's entry
// with `ops == &ctx->ops`, so `ops` must be at offset 0 and the struct
// standard-layout; the hot fields of the event path follow it.
struct ftjit_plugin_ctx {
  ftjit_ops ops;
  uint32_t slot;
  uint32_t needs_block;  // storage or events declared: worth a block
  uint64_t generation;
  ftjit::plugins::detail::Instance* instance;
  void* plugin_data;  // set_instance_data
  // What the argument captures read at every call, here rather than in
  // the instance: the context is in cache (the trampoline just read its
  // ops), the instance and the capturer are two loads further. Empty when
  // nothing is captured for this plugin.
  ftjit::plugins::IpView args_table;
  uint32_t args_room;
  // The same table for the plugin's own event path (args_fast_table).
  ftjit_args_fast_table args_fast;
  // The record gate in front of the plugin's callbacks (record_gate.h);
  // null when the session records every call.
  const ftjit::plugins::detail::Gate* gate;
};
static_assert(std::is_standard_layout_v<ftjit_plugin_ctx>);
static_assert(offsetof(ftjit_plugin_ctx, ops) == 0);

namespace ftjit::plugins::detail {

// One loaded plugin of a session, with everything the host services read.
class Instance {
 public:
  Instance() = default;
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  ~Instance();  // unmaps every thread block, releases the slot

  ftjit_plugin_ctx ctx{};
  LoadedPlugin plugin;
  std::vector<OptionValue> options;
  std::string format;
  FILE* out = nullptr;
  ftjit_engine* engine = nullptr;
  SymbolCache* symbols = nullptr;
  uint64_t recursion_base = 0;
  bool has_slot = false;
  bool inited = false;
  bool attached = false;

  // Thread blocks, newest first.
  std::atomic<ThreadBlock*> threads{nullptr};
  // Events dropped by threads that could not get a block (out of memory).
  std::atomic<uint64_t> orphan_drops{0};
  uint32_t storage_size = 0;
  uint32_t event_size = 0;
  uint32_t ring_capacity = 0;
  BufferPolicy policy = BufferPolicy::kDrop;
  uint64_t wait_ns = 0;  // kBlock: the bound on a wait without progress
  // kOverwrite: set while the writer copies the rings out (flush): threads
  // drop instead of overwriting what it reads.
  std::atomic<uint32_t> dumping{0};
  // The writer's futex word: a thread bumps it and wakes the writer when
  // its ring is half full, or full under kBlock. Null: no writer.
  std::atomic<uint32_t>* writer_wake = nullptr;
  std::atomic<uint32_t> blocks_made{0};
  // Arguments and return values: the session's plans, and the bytes of
  // each event after the plugin's own (event_size includes them) that
  // hold a record. Null / 0: nothing captured for this plugin.
  const ArgCapturer* args = nullptr;
  uint32_t args_room = 0;
  // Gives this plugin the session's captures: args, args_room, and the
  // context's copies its event path reads (ctx.args_table, args_room,
  // args_fast), all from one place.
  void bind_args(const ArgCapturer& capturer) {
    args = &capturer;
    args_room = (capturer.max_record() + 7u) & ~7u;
    ctx.args_table = capturer.table();
    ctx.args_room = args_room;
    ctx.args_fast = ftjit_args_fast_table{reinterpret_cast<const ftjit_args_fast_slot*>(ctx.args_table.slots),
                                          ctx.args_table.mask, args_room, 0};
  }
  // --by-arg: the session's plans when they group by an argument (then
  // no inline work is compiled: the callbacks must see each call).
  const ArgCapturer* keys = nullptr;
  // What the session records of this plugin's calls (record_gate.h); its
  // info is what record_info() answers, gate or not.
  Gate gate;
  bool gated = false;  // the callbacks go through the gate

  const char* name() const { return plugin.desc->name; }
  const OptionValue* option(const char* name) const;

  void set_error(std::string message);
  std::string take_error();

  // The calling thread's block, created on its first call; NULL if the
  // mapping failed.
  ThreadBlock* thread_block();
  uint64_t events_dropped() const;
  // Sums a counter of every thread block.
  uint64_t sum(std::atomic<uint64_t> ThreadBlock::*counter) const;
  // Committed by the threads, not yet consumed by the writer.
  uint64_t events_pending() const;

 private:
  ThreadBlock* create_block();

  std::mutex error_mu_;
  std::string error_;
};

// The record limits of `record` in `gate` and in what record_info()
// answers (a counting plugin's gate is neither sampled nor filtered by
// time): at start and at each live change (session_control.cpp).
void apply_record_limits(Gate& gate, const RecordControl& record);

// "--sample: no plugin of this session is narrowed by it (...)" when
// every plugin counts every call; "" when one is narrowed.
std::string unnarrowed(const std::vector<std::unique_ptr<Instance>>& instances, const char* option);

// futex(2) on a 32-bit word, for the event path and the writer (no libc
// lock, async-signal-safe). wait returns on a wake, a changed word, a
// signal or the timeout.
void futex_wake_all(const void* word);
void futex_wait_for(const void* word, uint32_t expected, uint64_t timeout_ns);

// The low 32 bits of a ring's tail, as a futex word: every ISA ftjit
// serves is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
inline const void* tail_word(const ThreadBlock* b) { return &b->tail; }

// Marks the calling thread as the writer: its own events never wait.
void mark_writer_thread();

// Registers what the event services need at fork (a child's threads
// forget the parent's cached thread ids). Once per process, from the host's
// own thread before any plugin runs: never from the event path.
void register_event_fork_handlers();

}  // namespace ftjit::plugins::detail
