// SPDX-License-Identifier: MIT
// The services table every plugin gets (ftjit_host), and the per-thread
// blocks behind thread_storage and the event buffers.
//
// The event-path services ([event] in plugin.h) live in event_services.cpp.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <new>

#include <spdlog/spdlog.h>

#include "runtime/log.h"

#include "runtime/plugin_host/host_internal.h"

namespace ftjit::plugins::detail {

namespace {

// ---------------------------------------------------------------------------
// Thread-local state
// ---------------------------------------------------------------------------

std::mutex g_slots_mu;
bool g_slot_used[kMaxInstances];
std::atomic<uint64_t> g_generation{0};


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
  ftjit::log().log(spd_level(level), "{}: {}", who, msg);
}

void svc_set_error(ftjit_plugin_ctx* ctx, const char* fmt, ...) {
  if (ctx == nullptr) return;
  va_list ap;
  va_start(ap, fmt);
  instance_of(ctx)->set_error(vformat(fmt, ap));
  va_end(ap);
}

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

void svc_set_instance_data(ftjit_plugin_ctx* ctx, void* data) {
  if (ctx != nullptr) ctx->plugin_data = data;
}

int32_t svc_process_id() { return static_cast<int32_t>(getpid()); }

const char* svc_process_name() {
  // The main thread's comm, read once: what `ps` and Perfetto show.
  static const std::string name = [] {
    char buf[64] = {};
    FILE* f = fopen("/proc/self/comm", "re");
    if (f != nullptr) {
      if (fgets(buf, sizeof buf, f) == nullptr) buf[0] = '\0';
      fclose(f);
    }
    std::string n(buf);
    while (!n.empty() && n.back() == '\n') n.pop_back();
    return n;
  }();
  return name.c_str();
}

void svc_inline_counts(ftjit_plugin_ctx* ctx, ftjit_inline_count_fn visit, void* arg) {
  if (ctx == nullptr || visit == nullptr || ctx->instance == nullptr || ctx->instance->engine == nullptr) return;
  if (ctx->ops.inline_entry == FTJIT_INLINE_NONE) return;
  (void)ftjit_inline_read(ctx->instance->engine, &ctx->ops, visit, arg);
}

// The engine's histograms are the SDK's, field for field.
static_assert(sizeof(ftjit_plugin_histogram) == sizeof(ftjit_inline_histogram));
static_assert(offsetof(ftjit_plugin_histogram, buckets) == offsetof(ftjit_inline_histogram, buckets));
static_assert(FTJIT_PLUGIN_BUCKETS == FTJIT_INLINE_BUCKETS);

void svc_inline_histograms(ftjit_plugin_ctx* ctx, ftjit_plugin_histogram_fn visit, void* arg) {
  if (ctx == nullptr || visit == nullptr || ctx->instance == nullptr || ctx->instance->engine == nullptr) return;
  if (ctx->ops.inline_entry != FTJIT_INLINE_LATENCY) return;
  struct Forward {
    ftjit_plugin_histogram_fn visit;
    void* arg;
  } forward{visit, arg};
  (void)ftjit_inline_read_histograms(
      ctx->instance->engine, &ctx->ops,
      [](const ftjit_inline_histogram* h, void* f) {
        auto* fw = static_cast<Forward*>(f);
        fw->visit(reinterpret_cast<const ftjit_plugin_histogram*>(h), fw->arg);
      },
      &forward);
}

uint32_t svc_args_room(ftjit_plugin_ctx* ctx) {
  return ctx != nullptr && ctx->instance != nullptr ? ctx->instance->args_room : 0;
}

// A record's size is its first u16; one larger than the room is not ours.
uint32_t record_size(const Instance* inst, const void* record) {
  if (inst == nullptr || inst->args == nullptr || record == nullptr) return 0;
  uint16_t size;
  std::memcpy(&size, record, 2);
  return size <= inst->args_room ? size : 0;
}

size_t svc_args_format(ftjit_plugin_ctx* ctx, uint64_t ip, const void* record, char* out, size_t cap) {
  const Instance* inst = ctx != nullptr ? ctx->instance : nullptr;
  const uint32_t size = record_size(inst, record);
  const std::string text = size != 0 ? inst->args->text(ip, record, size) : std::string();
  if (out != nullptr && cap != 0) {
    const size_t n = std::min(text.size(), cap - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return text.size();
}

uint32_t to_sdk_type(ShownValue::Type type) {
  switch (type) {
    case ShownValue::Type::kInt: return FTJIT_ARG_INT;
    case ShownValue::Type::kUint: return FTJIT_ARG_UINT;
    case ShownValue::Type::kDouble: return FTJIT_ARG_DOUBLE;
    case ShownValue::Type::kBool: return FTJIT_ARG_BOOL;
    case ShownValue::Type::kString: return FTJIT_ARG_STRING;
    case ShownValue::Type::kPointer: return FTJIT_ARG_POINTER;
    case ShownValue::Type::kText: return FTJIT_ARG_TEXT;
  }
  return FTJIT_ARG_TEXT;
}

// The SDK's view of a value: it points into `v`, which must outlive it.
ftjit_arg_value to_sdk_value(const ShownValue& v) {
  ftjit_arg_value out{};
  out.name = v.name.c_str();
  out.type = to_sdk_type(v.type);
  out.i = v.i;
  out.u = v.u;
  out.d = v.d;
  out.text = v.text.c_str();
  return out;
}

void svc_args_visit(ftjit_plugin_ctx* ctx, uint64_t ip, const void* record, ftjit_arg_visit_fn visit, void* arg) {
  const Instance* inst = ctx != nullptr ? ctx->instance : nullptr;
  const uint32_t size = record_size(inst, record);
  if (size == 0 || visit == nullptr) return;
  for (const ShownValue& v : inst->args->values(ip, record, size)) {
    const ftjit_arg_value out = to_sdk_value(v);
    visit(&out, arg);
  }
}

uint32_t svc_params(ftjit_plugin_ctx* ctx, uint64_t ip, ftjit_param_visit_fn visit, void* arg) {
  const Instance* inst = ctx != nullptr ? ctx->instance : nullptr;
  if (inst == nullptr || inst->args == nullptr) return 0;
  const auto params = inst->args->params(ip);
  for (const auto& p : params) {
    const ftjit_param_info info{p.name.c_str(), p.type.c_str(), p.place.c_str(), p.size};
    if (visit != nullptr) visit(&info, arg);
  }
  return static_cast<uint32_t>(params.size());
}

const char* svc_arg_key_name(ftjit_plugin_ctx* ctx) {
  const Instance* inst = ctx != nullptr ? ctx->instance : nullptr;
  if (inst == nullptr || inst->keys == nullptr) return nullptr;
  return inst->keys->key_name().c_str();
}

int svc_arg_key_value(ftjit_plugin_ctx* ctx, uint64_t ip, uint64_t key, ftjit_arg_visit_fn visit, void* arg) {
  const Instance* inst = ctx != nullptr ? ctx->instance : nullptr;
  if (inst == nullptr || inst->keys == nullptr) return 0;
  ShownValue v;
  if (!inst->keys->key_value(ip, key, &v)) return 0;
  if (visit != nullptr) {
    const ftjit_arg_value out = to_sdk_value(v);
    visit(&out, arg);
  }
  return 1;
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
    svc_set_instance_data,
    svc_instance_data,
    svc_process_id,
    svc_process_name,
    svc_inline_counts,
    svc_inline_histograms,
    svc_args_room,
    svc_args_capture,
    svc_retval_capture,
    svc_args_format,
    svc_args_visit,
    svc_params,
    svc_arg_key_name,
    svc_arg_key,
    svc_arg_key_value,
    svc_args_capture_hint,
    svc_retval_capture_hint,
    svc_record_info,
    svc_args_fast_table,
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

uint64_t Instance::events_dropped() const {
  uint64_t n = orphan_drops.load(std::memory_order_relaxed);
  for (ThreadBlock* b = threads.load(std::memory_order_acquire); b != nullptr; b = b->next) {
    n += b->drops.load(std::memory_order_relaxed);
  }
  return n;
}

uint64_t Instance::sum(std::atomic<uint64_t> ThreadBlock::*counter) const {
  uint64_t n = 0;
  for (ThreadBlock* b = threads.load(std::memory_order_acquire); b != nullptr; b = b->next) {
    n += (b->*counter).load(std::memory_order_relaxed);
  }
  return n;
}

uint64_t Instance::events_pending() const {
  uint64_t n = 0;
  for (ThreadBlock* b = threads.load(std::memory_order_acquire); b != nullptr; b = b->next) {
    // Tail first: it never passes head, so head read later is not behind it.
    const uint64_t tail = b->tail.load(std::memory_order_acquire);
    n += b->head.load(std::memory_order_acquire) - tail;
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
