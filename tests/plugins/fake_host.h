// SPDX-License-Identifier: MIT
// A fake ftjit host for plugin tests: every ftjit_host service, with clock,
// thread identity, symbols and buffer size under the test's control, and
// buffered events handed to consume() only when the test drains them.
#ifndef FTJIT_TESTS_PLUGINS_FAKE_HOST_H
#define FTJIT_TESTS_PLUGINS_FAKE_HOST_H

#include <ftjit/plugin.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fake_host {

//! Names symbol() returns; an ip missing here has no name.
void set_symbols(std::map<uint64_t, std::string> symbols);

//! The calling thread's kernel id and name as the host reports them.
void bind_thread(int32_t tid, std::string name);
//! The calling thread's clock from now on; without it, CLOCK_MONOTONIC.
void set_now(uint64_t ns);

//! While it lives, process_id() and process_name() report `pid` and `name`
//! instead of this process's; names handed out before stay valid.
class ProcessOverride {
 public:
  ProcessOverride(int32_t pid, std::string name);
  ~ProcessOverride();
  ProcessOverride(const ProcessOverride &) = delete;
  ProcessOverride &operator=(const ProcessOverride &) = delete;
};

//! One buffered thread, as the host tracks it.
struct ThreadRecord {
  uint64_t owner = 0;  // the fake host's serial of the owning thread
  int32_t tid = 0;
  std::string name;
  ftjit_thread_info info{};
  void *storage = nullptr;
  std::vector<unsigned char> ring;  // capacity slots, event_size rounded to 8
  uint64_t head = 0, tail = 0;      // consumed, committed events
  bool reserved = false;
  uint64_t dropped = 0;
};

//! One loaded plugin instance; its address is the plugin's ctx.
class Session {
 public:
  //! dlopens `so_path` and checks its descriptor; fails the test on error.
  //! `host`: what the plugin is given, by default host(). A plugin keeps the
  //! host of its latest ftjit_plugin_v1 call for all its instances, so
  //! Sessions of one plugin with different hosts must not overlap.
  Session(const char *so_path, std::map<std::string, std::string> options = {},
          std::string format = "", uint32_t buffer_events = 0,
          const ftjit_host *host = nullptr);
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  const ftjit_plugin &plugin() const { return *plugin_; }
  ftjit_plugin_ctx *ctx() { return reinterpret_cast<ftjit_plugin_ctx *>(this); }

  //! The plugin's init result; error() holds what it set.
  int init();
  //! The traced function `ip` is entered / left on the calling thread; the
  //! host's shadow stack follows. unwound: left by exception, ret == NULL.
  void enter(uint64_t ip, uint64_t parent_ip = 0);
  void leave(uint64_t ip, uint64_t parent_ip = 0, bool unwound = false);
  //! Hands every committed event to consume(), thread by thread, as the
  //! writer thread does. Only while no thread produces events.
  void drain();
  //! Drains, then the plugin's report to the output stream; its result.
  int report();
  //! Everything written to the output stream so far.
  std::string output();

  const std::string &error() const { return error_; }
  //! What inline_counts() visits: the counts the engine kept in the code
  //! the sites call (inline work), by function entry.
  void set_inline_counts(std::vector<std::pair<uint64_t, uint64_t>> counts) {
    inline_counts_ = std::move(counts);
  }
  const std::vector<std::pair<uint64_t, uint64_t>> &inline_counts() const { return inline_counts_; }
  //! What inline_histograms() visits: the engine's inline latency.
  void set_inline_histograms(std::vector<ftjit_plugin_histogram> h) { inline_histograms_ = std::move(h); }
  const std::vector<ftjit_plugin_histogram> &inline_histograms() const { return inline_histograms_; }
  void set_recursion_drops(uint64_t n) { recursion_drops_ = n; }
  uint64_t recursion_drops() const { return recursion_drops_; }
  uint64_t events_dropped();

  // Host services, used by the C trampolines in fake_host.cpp.
  void set_error(std::string message) { error_ = std::move(message); }
  ThreadRecord *thread_record();
  const std::string *option(const char *name, ftjit_option_type type) const;
  FILE *out() const { return out_; }
  const std::string &format() const { return format_; }
  void *event_reserve();
  void event_commit();
  void for_each_thread(ftjit_thread_visit_fn fn, void *arg);
  void set_instance_data(void *data) {
    instance_data_.store(data, std::memory_order_release);
  }
  void *instance_data() const {
    return instance_data_.load(std::memory_order_acquire);
  }

 private:
  void *library_ = nullptr;
  const ftjit_plugin *plugin_ = nullptr;
  std::map<std::string, std::string> options_;
  std::string format_;
  uint32_t buffer_events_ = 0;
  size_t event_stride_ = 0;  // event_size rounded up to 8: slots stay aligned
  std::string out_path_;
  FILE *out_ = nullptr;
  std::string error_;
  uint64_t recursion_drops_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> inline_counts_;
  std::vector<ftjit_plugin_histogram> inline_histograms_;
  bool initialized_ = false;
  // Atomic: set in init on one thread, read by traced threads without a lock.
  std::atomic<void *> instance_data_{nullptr};
  uint64_t id_;  // tells instances apart in the per-thread cache
  std::mutex mutex_;
  std::vector<std::unique_ptr<ThreadRecord>> threads_;  // creation order
};

//! The host given to every plugin.
const ftjit_host *host();
//! host() as a host built against an older SDK sees it: struct_size cut to
//! `struct_size` and the members past it NULL, so calling one crashes.
const ftjit_host *host_of_size(uint32_t struct_size);

}  // namespace fake_host

#endif
