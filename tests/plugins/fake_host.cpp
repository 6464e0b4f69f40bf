// SPDX-License-Identifier: MIT
// The fake ftjit host: ftjit_host services over a Session, for plugin tests.
#include "fake_host.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

namespace fake_host {
namespace {

std::mutex g_symbols_mutex;
std::map<uint64_t, std::string> g_symbols;

struct ThreadIdentity {
  bool bound = false;
  int32_t tid = 0;
  std::string name;
  bool fake_clock = false;
  uint64_t now_ns = 0;
  std::vector<uint64_t> shadow_stack;  // hooked frames, outermost first
  // The last Session this thread touched, so thread_storage is lock-free
  // after the first call, as a real host's must be.
  uint64_t cached_session = 0;
  ThreadRecord *cached_record = nullptr;
  // std::thread::id is reused after join; this is not.
  uint64_t serial = 0;
};
thread_local ThreadIdentity t_thread;
std::atomic<uint64_t> g_next_session_id{1};
std::atomic<uint64_t> g_next_thread_serial{1};

uint64_t thread_serial() {
  if (t_thread.serial == 0) t_thread.serial = g_next_thread_serial.fetch_add(1);
  return t_thread.serial;
}

Session *session_of(ftjit_plugin_ctx *ctx) {
  return reinterpret_cast<Session *>(ctx);
}

std::string vformat(const char *fmt, va_list args) {
  char text[1024];
  std::vsnprintf(text, sizeof text, fmt, args);
  return text;
}

// ---------------------------------------------------------------------------
// ftjit_host services
// ---------------------------------------------------------------------------

void host_log(ftjit_plugin_ctx *, int level, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::fprintf(stderr, "[plugin log %d] %s\n", level, vformat(fmt, args).c_str());
  va_end(args);
}

void host_set_error(ftjit_plugin_ctx *ctx, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  session_of(ctx)->set_error(vformat(fmt, args));
  va_end(args);
}

uint64_t host_now_ns() {
  if (t_thread.fake_clock) return t_thread.now_ns;
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

int32_t host_thread_id() {
  return t_thread.bound ? t_thread.tid : int32_t(gettid());
}

const char *host_thread_name() {
  if (!t_thread.bound) {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    t_thread.name = name;
  }
  return t_thread.name.c_str();
}

const char *host_symbol(ftjit_plugin_ctx *, uint64_t ip) {
  std::lock_guard<std::mutex> lock(g_symbols_mutex);
  auto it = g_symbols.find(ip);
  return it == g_symbols.end() ? nullptr : it->second.c_str();
}

int host_option_bool(ftjit_plugin_ctx *ctx, const char *name) {
  const std::string *value = session_of(ctx)->option(name, FTJIT_OPTION_BOOL);
  if (value == nullptr) return 0;
  return *value == "true" || *value == "yes" || *value == "on" || *value == "1";
}

int64_t host_option_int(ftjit_plugin_ctx *ctx, const char *name) {
  const std::string *value = session_of(ctx)->option(name, FTJIT_OPTION_INT);
  return value == nullptr ? 0 : std::strtoll(value->c_str(), nullptr, 0);
}

double host_option_double(ftjit_plugin_ctx *ctx, const char *name) {
  const std::string *value = session_of(ctx)->option(name, FTJIT_OPTION_DOUBLE);
  return value == nullptr ? 0.0 : std::strtod(value->c_str(), nullptr);
}

const char *host_option_string(ftjit_plugin_ctx *ctx, const char *name) {
  const std::string *value = session_of(ctx)->option(name, FTJIT_OPTION_STRING);
  return value == nullptr ? "" : value->c_str();
}

FILE *host_output(ftjit_plugin_ctx *ctx) { return session_of(ctx)->out(); }

const char *host_format(ftjit_plugin_ctx *ctx) {
  return session_of(ctx)->format().c_str();
}

void *host_thread_storage(ftjit_plugin_ctx *ctx) {
  ThreadRecord *record = session_of(ctx)->thread_record();
  return record != nullptr ? record->storage : nullptr;
}

void host_for_each_thread(ftjit_plugin_ctx *ctx, ftjit_thread_visit_fn fn,
                          void *arg) {
  session_of(ctx)->for_each_thread(fn, arg);
}

void *host_event_reserve(ftjit_plugin_ctx *ctx) {
  return session_of(ctx)->event_reserve();
}

void host_event_commit(ftjit_plugin_ctx *ctx) { session_of(ctx)->event_commit(); }

uint32_t host_call_depth() { return uint32_t(t_thread.shadow_stack.size()); }

size_t host_call_stack(uint64_t *ips, size_t max) {
  const size_t n = std::min(max, t_thread.shadow_stack.size());
  std::memcpy(ips, t_thread.shadow_stack.data(), n * sizeof(uint64_t));
  return n;
}

void host_drop_counts(ftjit_plugin_ctx *ctx, uint64_t *recursion,
                      uint64_t *events);

void host_set_instance_data(ftjit_plugin_ctx *ctx, void *data) {
  session_of(ctx)->set_instance_data(data);
}

void *host_instance_data(ftjit_plugin_ctx *ctx) {
  return session_of(ctx)->instance_data();
}

// The real process, unless a ProcessOverride says otherwise. Names are kept
// for the life of the test binary: a plugin may hold the pointer.
std::atomic<bool> g_process_overridden{false};
std::atomic<int32_t> g_process_pid{0};
std::atomic<const char *> g_process_name{nullptr};
std::mutex g_process_names_mutex;
std::vector<std::unique_ptr<std::string>> g_process_names;

const char *keep_process_name(std::string name) {
  std::lock_guard<std::mutex> lock(g_process_names_mutex);
  g_process_names.push_back(std::make_unique<std::string>(std::move(name)));
  return g_process_names.back()->c_str();
}

const char *real_process_name() {
  static const char *const name = [] {
    std::string comm;
    std::ifstream file("/proc/self/comm");
    std::getline(file, comm);
    return keep_process_name(comm);
  }();
  return name;
}

int32_t host_process_id() {
  return g_process_overridden.load() ? g_process_pid.load() : int32_t(getpid());
}

const char *host_process_name() {
  return g_process_overridden.load() ? g_process_name.load()
                                     : real_process_name();
}

void host_inline_counts(ftjit_plugin_ctx *ctx, ftjit_inline_count_fn visit, void *arg) {
  for (const auto &[ip, n] : session_of(ctx)->inline_counts()) visit(ip, n, arg);
}

void host_inline_histograms(ftjit_plugin_ctx *ctx, ftjit_plugin_histogram_fn visit, void *arg) {
  for (const ftjit_plugin_histogram &h : session_of(ctx)->inline_histograms()) visit(&h, arg);
}

// The fake host captures no arguments: its sessions have no DWARF.
uint32_t host_args_room(ftjit_plugin_ctx *) { return 0; }
uint32_t host_args_capture(ftjit_plugin_ctx *, uint64_t, const ftjit_plugin_regs *, void *) { return 0; }
uint32_t host_retval_capture(ftjit_plugin_ctx *, uint64_t, const ftjit_plugin_ret *, void *) { return 0; }
size_t host_args_format(ftjit_plugin_ctx *, uint64_t, const void *, char *out, size_t cap) {
  if (out != nullptr && cap != 0) out[0] = '\0';
  return 0;
}
void host_args_visit(ftjit_plugin_ctx *, uint64_t, const void *, ftjit_arg_visit_fn, void *) {}
uint32_t host_params(ftjit_plugin_ctx *, uint64_t, ftjit_param_visit_fn, void *) { return 0; }
// Nor does it group by an argument (--by-arg).
const char *host_arg_key_name(ftjit_plugin_ctx *) { return nullptr; }
int host_arg_key(ftjit_plugin_ctx *, uint64_t, const ftjit_plugin_regs *, uint64_t *key) {
  if (key != nullptr) *key = 0;
  return 0;
}
int host_arg_key_value(ftjit_plugin_ctx *, uint64_t, uint64_t, ftjit_arg_visit_fn, void *) { return 0; }
uint32_t host_args_capture_hint(ftjit_plugin_ctx *, uint64_t, const ftjit_plugin_regs *, void *, uint64_t *hint) {
  if (hint != nullptr) *hint = FTJIT_ARGS_HINT_NONE;
  return 0;
}
uint32_t host_retval_capture_hint(ftjit_plugin_ctx *, uint64_t, uint64_t, const ftjit_plugin_ret *, void *) {
  return 0;
}
// It records every call (no --depth, --sample, --min-duration, triggers).
const ftjit_record_info kRecordAll = {sizeof(ftjit_record_info), 0, 1, 0, 0, 1, 0};
const ftjit_record_info *host_record_info(ftjit_plugin_ctx *) { return &kRecordAll; }
const ftjit_args_fast_table *host_args_fast_table(ftjit_plugin_ctx *) { return nullptr; }

const ftjit_host kHost = {
    sizeof(ftjit_host),    FTJIT_PLUGIN_ABI_VERSION,
    host_log,              host_set_error,
    host_now_ns,           host_thread_id,
    host_thread_name,      host_symbol,
    host_option_bool,      host_option_int,
    host_option_double,    host_option_string,
    host_output,           host_format,
    host_thread_storage,   host_for_each_thread,
    host_event_reserve,    host_event_commit,
    host_call_depth,       host_call_stack,
    host_drop_counts,      host_set_instance_data,
    host_instance_data,    host_process_id,
    host_process_name,     host_inline_counts,
    host_inline_histograms,
    host_args_room,        host_args_capture,
    host_retval_capture,   host_args_format,
    host_args_visit,       host_params,
    host_arg_key_name,     host_arg_key,
    host_arg_key_value,
    host_args_capture_hint, host_retval_capture_hint,
    host_record_info,      host_args_fast_table,
};

}  // namespace

const ftjit_host *host() { return &kHost; }

const ftjit_host *host_of_size(uint32_t struct_size) {
  static std::mutex mutex;
  static std::map<uint32_t, std::unique_ptr<ftjit_host>> hosts;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<ftjit_host> &old = hosts[struct_size];
  if (old == nullptr) {
    old = std::make_unique<ftjit_host>(kHost);
    const size_t kept = std::min<size_t>(struct_size, sizeof(ftjit_host));
    std::memset(reinterpret_cast<char *>(old.get()) + kept, 0,
                sizeof(ftjit_host) - kept);
    old->struct_size = struct_size;
  }
  return old.get();
}

ProcessOverride::ProcessOverride(int32_t pid, std::string name) {
  g_process_pid.store(pid);
  g_process_name.store(keep_process_name(std::move(name)));
  g_process_overridden.store(true);
}

ProcessOverride::~ProcessOverride() { g_process_overridden.store(false); }

void set_symbols(std::map<uint64_t, std::string> symbols) {
  std::lock_guard<std::mutex> lock(g_symbols_mutex);
  g_symbols = std::move(symbols);
}

void bind_thread(int32_t tid, std::string name) {
  t_thread.bound = true;
  t_thread.tid = tid;
  t_thread.name = std::move(name);
}

void set_now(uint64_t ns) {
  t_thread.fake_clock = true;
  t_thread.now_ns = ns;
}

// ---------------------------------------------------------------------------
// Session
// ---------------------------------------------------------------------------

Session::Session(const char *so_path, std::map<std::string, std::string> options,
                 std::string format, uint32_t buffer_events,
                 const ftjit_host *host)
    : options_(std::move(options)), format_(std::move(format)),
      id_(g_next_session_id.fetch_add(1)) {
  library_ = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
  if (library_ == nullptr) {
    ADD_FAILURE() << "dlopen " << so_path << ": " << dlerror();
    return;
  }
  auto entry = reinterpret_cast<ftjit_plugin_entry_point>(
      dlsym(library_, FTJIT_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) {
    ADD_FAILURE() << so_path << " exports no " << FTJIT_PLUGIN_ENTRY_SYMBOL;
    return;
  }
  plugin_ = entry(host != nullptr ? host : &kHost);
  if (plugin_ == nullptr || plugin_->abi_version != FTJIT_PLUGIN_ABI_VERSION ||
      plugin_->struct_size < sizeof(ftjit_plugin)) {
    ADD_FAILURE() << so_path << ": no usable descriptor";
    plugin_ = nullptr;
    return;
  }
  // What the host checks at load: options are declared, format is offered.
  for (const auto &[name, value] : options_) {
    bool declared = false;
    for (uint32_t i = 0; i < plugin_->n_options; ++i)
      declared = declared || name == plugin_->options[i].name;
    if (!declared) ADD_FAILURE() << "option " << name << " is not declared";
  }
  for (uint32_t i = 0; i < plugin_->n_options; ++i) {
    const ftjit_plugin_option &declared = plugin_->options[i];
    if (declared.default_value != nullptr)
      options_.try_emplace(declared.name, declared.default_value);
    else
      options_.try_emplace(declared.name, declared.type == FTJIT_OPTION_STRING
                                              ? "" : "0");
  }
  if (format_.empty()) format_ = plugin_->formats[0];
  buffer_events_ = buffer_events != 0 ? buffer_events
                   : plugin_->buffer_events != 0 ? plugin_->buffer_events
                                                 : 4096;
  event_stride_ = (size_t(plugin_->event_size) + 7) & ~size_t(7);
  char path[] = "/tmp/ftjit-plugin-test-XXXXXX";
  const int fd = mkstemp(path);
  out_path_ = path;
  out_ = fdopen(fd, "w+");
}

Session::~Session() {
  if (initialized_ && plugin_->shutdown != nullptr) plugin_->shutdown(ctx());
  for (auto &thread : threads_) std::free(thread->storage);
  if (t_thread.cached_session == id_) t_thread.cached_session = 0;
  if (out_ != nullptr) std::fclose(out_);
  if (!out_path_.empty()) unlink(out_path_.c_str());
  // The library stays loaded: dlclose while another Session of the same
  // plugin lives would pull code from under it.
}

int Session::init() {
  if (plugin_ == nullptr) return -1;
  const int result = plugin_->init != nullptr ? plugin_->init(ctx()) : 0;
  initialized_ = result == 0;
  return result;
}

void Session::enter(uint64_t ip, uint64_t parent_ip) {
  t_thread.shadow_stack.push_back(ip);
  ftjit_plugin_regs regs{};
  if (plugin_->entry != nullptr) plugin_->entry(ip, parent_ip, ctx(), &regs);
}

void Session::leave(uint64_t ip, uint64_t parent_ip, bool unwound) {
  ftjit_plugin_ret ret{};
  if (plugin_->exit != nullptr)
    plugin_->exit(ip, parent_ip, ctx(), unwound ? nullptr : &ret);
  if (!t_thread.shadow_stack.empty()) t_thread.shadow_stack.pop_back();
}

ThreadRecord *Session::thread_record() {
  if (t_thread.cached_session == id_) return t_thread.cached_record;
  std::lock_guard<std::mutex> lock(mutex_);
  ThreadRecord *record = nullptr;
  for (auto &thread : threads_)
    if (thread->owner == thread_serial()) record = thread.get();
  if (record == nullptr) {
    auto fresh = std::make_unique<ThreadRecord>();
    fresh->owner = thread_serial();
    fresh->tid = host_thread_id();
    fresh->name = host_thread_name();
    fresh->storage = plugin_->thread_storage_size != 0
                         ? std::calloc(1, plugin_->thread_storage_size)
                         : nullptr;
    fresh->ring.resize(size_t(buffer_events_) * event_stride_);
    record = fresh.get();
    threads_.push_back(std::move(fresh));
  }
  t_thread.cached_session = id_;
  t_thread.cached_record = record;
  return record;
}

const std::string *Session::option(const char *name,
                                   ftjit_option_type type) const {
  for (uint32_t i = 0; i < plugin_->n_options; ++i) {
    const ftjit_plugin_option &declared = plugin_->options[i];
    if (std::strcmp(declared.name, name) != 0) continue;
    if (declared.type != type) return nullptr;
    return &options_.at(name);
  }
  return nullptr;
}

void *Session::event_reserve() {
  ThreadRecord *record = thread_record();
  if (record->tail - record->head == buffer_events_) {
    ++record->dropped;
    return nullptr;
  }
  record->reserved = true;
  return record->ring.data() + (record->tail % buffer_events_) * event_stride_;
}

void Session::event_commit() {
  ThreadRecord *record = thread_record();
  EXPECT_TRUE(record->reserved) << "commit without reserve";
  record->reserved = false;
  ++record->tail;
}

void Session::drain() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto &thread : threads_) {
    thread->info = {thread->tid, thread->name.c_str(), thread->dropped};
    for (; thread->head != thread->tail; ++thread->head)
      plugin_->consume(ctx(), &thread->info,
                       thread->ring.data() +
                           (thread->head % buffer_events_) * event_stride_);
  }
}

void Session::for_each_thread(ftjit_thread_visit_fn fn, void *arg) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto &thread : threads_) {
    thread->info = {thread->tid, thread->name.c_str(), thread->dropped};
    fn(&thread->info, thread->storage, arg);
  }
}

uint64_t Session::events_dropped() {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t dropped = 0;
  for (auto &thread : threads_) dropped += thread->dropped;
  return dropped;
}

int Session::report() {
  if (plugin_->consume != nullptr) drain();
  const int result =
      plugin_->report != nullptr ? plugin_->report(ctx(), out_, format_.c_str())
                                 : 0;
  std::fflush(out_);
  return result;
}

std::string Session::output() {
  std::fflush(out_);
  std::ifstream file(out_path_, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

namespace {
void host_drop_counts(ftjit_plugin_ctx *ctx, uint64_t *recursion,
                      uint64_t *events) {
  Session *session = session_of(ctx);
  if (recursion != nullptr) *recursion = session->recursion_drops();
  if (events != nullptr) *events = session->events_dropped();
}
}  // namespace

}  // namespace fake_host
