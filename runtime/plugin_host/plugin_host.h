// SPDX-License-Identifier: MIT
// The plugin host: finds, loads and checks tracer plugins (plugin.h), gives
// them the host services, attaches them to an engine, runs the writer thread
// that drains their event buffers, and has them write their reports.
//
// Used by the CLI, the bench and embedders. Control functions here are called
// from one control thread; the plugins' event path never enters this header.
#pragma once

#include <cstdint>
#include <cstdio>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/arg_capture_spec.h"
#include "core/error.h"
#include "core/record_control.h"
#include "ftjit/ftjit.h"
#include "ftjit/plugin.h"

namespace ftjit::plugins {

// A plugin as the user names it: a built-in name ("count"), resolved on
// plugin_search_path() as ftjit-plugin-NAME.so, or a path (it contains '/'
// or ends in ".so"), plus option assignments in the order given.
struct PluginSpec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> options;
  // The host's keys (kHostKeys), never the plugin's options: this plugin's
  // report format ("" the session's) and its own file ("" the session's
  // output), or a stream given in its place (not closed here: an agent's
  // fd from the CLI).
  std::string format;
  std::string output;
  FILE* output_stream = nullptr;

  // True when `name` is a path rather than a built-in name.
  bool is_path() const;
};

// The spec keys the host takes for itself, so that several plugins of one
// run can each have their report's format and file: "format", "output".
inline constexpr const char* kHostKeys[] = {"format", "output"};

// Parses "NAME", "NAME:key=value,key=value" or "PATH.so:key=value". In a
// value, "\," is a comma and "\\" a backslash. A name ends at the first ':',
// a path at the first ".so:" (so its directories may contain ':'). The
// host keys go to `format` and `output`, the rest to `options`. Returns
// FTJIT_E_INVALID_ARGUMENT for an empty name, an invalid built-in name, an
// item without '=', an empty key, an empty item, a key given twice or a
// host key without a value.
Result<PluginSpec> parse_plugin_spec(std::string_view text);

// One declared option of a plugin, as shown to users.
struct OptionInfo {
  std::string name;
  ftjit_option_type type = FTJIT_OPTION_STRING;
  std::string default_value;  // as declared; "" when the plugin gave NULL
  std::string help;
};

// "bool", "int", "double", "string" (or "?" for a value out of range).
const char* option_type_name(ftjit_option_type type);

// What a plugin declares about itself.
struct PluginInfo {
  std::string name;         // the descriptor's name
  std::string path;         // the shared object loaded
  std::string description;
  std::vector<OptionInfo> options;
  std::vector<std::string> formats;  // the first is the default
  bool hooks_exit = false;  // has an exit callback (needs return hooks)
  bool inline_count = false;  // counts inline (ftjit_plugin_inline) where it can
  bool inline_latency = false;  // times calls inline where it can
  std::string error;        // list_plugins() only: why it could not be loaded
};

// Directories searched for built-in plugins, in order: the entries of
// $FTJIT_PLUGIN_PATH (a colon-separated list; empty entries skipped), the
// build tree's plugin folder, then the installed plugin folder.
std::vector<std::string> plugin_search_path();

// Every ftjit-plugin-NAME.so on the search path (the first of a name wins;
// names starting with "test-" are skipped), sorted by name. A plugin that
// cannot be loaded or checked is listed with `error` set. Fails with
// FTJIT_E_SYSTEM when no directory of the search path can be read.
Result<std::vector<PluginInfo>> list_plugins();

// The file a spec names: the path itself, or ftjit-plugin-NAME.so found on
// plugin_search_path(). Fails (naming every directory tried) if not found.
Result<std::string> find_plugin_file(const PluginSpec& spec);

// Loads and checks the plugin `spec` names and returns its declaration; the
// spec's options are not looked at. Fails with a message naming the plugin
// and the cause (see TraceSession::start for the list).
Result<PluginInfo> describe_plugin(const PluginSpec& spec);

// What a thread does when its event buffer is full (the choices ftrace
// and LTTng give): drop the new event, overwrite the oldest (a flight
// recorder: buffers are written at stop or at flush(), never while the
// program runs), or wait for the writer to make room, at most
// `buffer_wait_ms` without progress, then drop.
enum class BufferPolicy : uint8_t { kDrop = 0, kOverwrite = 1, kBlock = 2 };

// "drop", "overwrite", "block".
const char* buffer_policy_name(BufferPolicy policy);
// The policy of that name; fails naming the three.
Result<BufferPolicy> parse_buffer_policy(std::string_view name);

// Limits of the buffer options, per thread and plugin.
inline constexpr uint64_t kMaxBufferBytes = 1ull << 30;
inline constexpr uint32_t kDefaultBufferWaitMs = 1000;
inline constexpr uint32_t kMaxBufferWaitMs = 3600u * 1000u;

// Everything one tracing run needs.
struct SessionConfig {
  std::vector<PluginSpec> plugins;
  // Site filter (globs, optionally MODULE!GLOB); empty include = every site.
  std::vector<std::string> include, exclude;
  // Also functions without a sled, through relocated entries
  // (FTJIT_OPS_F_RELOCATE).
  bool relocate = false;
  // Arguments and return values to capture, for plugins that declare
  // FTJIT_PLUGIN_F_ARGS (arg_capture.h).
  ArgCaptureSpec args;
  ftjit_strategy strategy = FTJIT_STRATEGY_AUTO;  // DIRECT is refused
  // "" = each plugin's default; otherwise every plugin must list it (a
  // plugin's PluginSpec::format wins over it).
  std::string format;
  // "" or "-" = stdout; otherwise a file, created (truncated) before init.
  std::string output;
  // When set, used instead of `output` (and never closed): an agent's
  // in-memory report, or a file the CLI opened and passed over.
  FILE* output_stream = nullptr;
  // Thread filter: a thread passes if it matches any part; none set = all.
  std::vector<int32_t> tids;
  std::string thread_glob;
  bool main_thread = false;
  // Events per thread buffer; 0 = the plugin's default (or the host's).
  // Rounded up to a power of two.
  uint32_t buffer_events = 0;
  // Bytes per thread buffer (rounded up to a power of two of events); when
  // set, it wins over buffer_events. At most kMaxBufferBytes.
  uint64_t buffer_bytes = 0;
  BufferPolicy buffer_policy = BufferPolicy::kDrop;
  // kBlock: how long a thread waits for a writer that frees nothing.
  uint32_t buffer_wait_ms = kDefaultBufferWaitMs;
  // Which calls the plugins see: every one unless narrowed (depth,
  // duration, sampling, triggers).
  RecordControl record;
  // Keeps the record gate in front of every plugin, so that the record
  // limits may change while attached (control()): the gate's price on
  // every call, and no inline work.
  bool live = false;
  // kBlock: the writer appends raw events to a spool file as they come and
  // has them consumed at flush() and stop (it keeps up with any thread);
  // false: it has them consumed as they come (threads wait for that).
  bool spool = true;
};

class ArgCapturer;
namespace detail {
class Instance;
class SymbolCache;
class Writer;
class RecordTriggers;
}  // namespace detail

// The plugins of one run, attached to one engine. Not thread-safe: call its
// members from one control thread (never from a tracer callback).
class TraceSession {
 public:
  // Loads every plugin, checks it and its options, opens the output, inits
  // every plugin, then attaches every plugin. On any failure everything done
  // so far is undone (detached, shut down, closed, unloaded) and the error
  // names the plugin and the cause: file missing, not an ELF shared object,
  // not loadable (dlerror), no ftjit_plugin_v1 ("not an ftjit plugin"), NULL
  // descriptor, another ABI version, struct_size too small, no entry and no
  // exit callback, a bad name, bad option declarations, unknown option given
  // (the known ones listed), a value of the wrong type, an unsupported
  // format, an unwritable output, init failing (with the plugin's message),
  // or the engine refusing the attach.
  static Result<std::unique_ptr<TraceSession>> start(ftjit_engine* engine,
                                                     const SessionConfig& config);

  TraceSession(const TraceSession&) = delete;
  TraceSession& operator=(const TraceSession&) = delete;
  // stop(), then each plugin's shutdown, then unloads the plugins. If a
  // detach failed, the plugins and their memory are kept (leaked) because
  // a traced thread could still call them.
  ~TraceSession();

  // Detaches every plugin (waiting until no thread is in a callback), then
  // lets the writer thread drain every buffer and joins it. Idempotent;
  // fails if the engine refuses a detach (then call it again later).
  Status stop();

  // Stops if needed, then has each plugin write its report to the output in
  // the session's format, then flushes the output (and closes it if it is a
  // file). The host itself writes nothing to the output. Every plugin gets
  // its turn; the error names each plugin that failed (with its set_error
  // message) or the output that could not be written. Only once per session.
  Status report();

  // Writes what the buffers hold now, while tracing goes on: under
  // kOverwrite the flight recorder's contents (threads drop their events
  // for the moment it takes); otherwise it waits until the writer has
  // consumed everything committed before the call. Fails if no writer runs
  // (no plugin buffers events) or the session stopped.
  Status flush();

  struct Totals {
    uint64_t recursion_drops = 0;  // engine-wide, since start()
    uint64_t events_dropped = 0;   // all plugins' buffers, all threads
    uint64_t events_pending = 0;   // committed, not yet consumed by the writer
    uint64_t events_overwritten = 0;  // kOverwrite: the oldest, replaced
    uint64_t buffer_waits = 0;     // kBlock: times a thread waited for room
    uint64_t buffer_wait_ns = 0;   // ... and how long, in all
    uint64_t buffer_timeouts = 0;  // ... and gave up (then dropped)
  };
  Totals totals() const;

  // Live control: what may change while the threads go on. Each field set
  // is applied. Pause unpatches the plugins' sites (each plugin's in one
  // batch; a frame open then still gets its exit, inline counts are kept)
  // and resume patches them again; a new filter patches and unpatches the
  // sites in one batch: both on any session. The limits need the record
  // gate (SessionConfig::live, or a session started with any record
  // option). Fails, changing nothing, on a limit the session cannot take,
  // a limit out of range, or a filter that selects nothing.
  struct Control {
    std::optional<bool> paused;
    std::optional<uint32_t> max_depth;        // 0: any
    std::optional<uint32_t> sample_period;    // 0, 1: every call
    std::optional<uint64_t> min_duration_ns;  // 0: none
    std::optional<std::pair<std::vector<std::string>, std::vector<std::string>>> filter;  // include, exclude
  };
  Status control(const Control& change);
  bool live() const;
  bool paused() const { return paused_.load(std::memory_order_relaxed) != 0; }
  // What is recorded now, as the options would say it: "depth <= 3,
  // 1 call in 10, calls >= 10us, filter 'a*' but not 'b*', paused".
  std::string describe_recording() const;

  // How the writer hands events to the plugins: "stream", "spool",
  // "recorder" (plugins/event_writer.h); "" when no plugin buffers events.
  const char* writer_mode() const;

  // The plugins loaded, in the order given.
  std::vector<PluginInfo> plugins() const;

 private:
  TraceSession();

  ftjit_engine* engine_ = nullptr;
  SessionConfig config_;
  ftjit_thread_filter thread_filter_{};
  std::vector<const char*> include_, exclude_;
  std::vector<std::unique_ptr<detail::Instance>> instances_;
  std::unique_ptr<detail::SymbolCache> symbols_;
  std::unique_ptr<detail::Writer> writer_;
  std::unique_ptr<ArgCapturer> args_;
  std::unique_ptr<detail::RecordTriggers> triggers_;
  FILE* out_ = nullptr;
  bool owns_out_ = false;
  // Plugins' own files (PluginSpec::output) the session opened, to close
  // after the reports, with their paths for messages.
  std::vector<std::pair<FILE*, std::string>> plugin_files_;
  bool stopped_ = false;
  bool reported_ = false;
  std::atomic<uint32_t> paused_{0};
  uint64_t recursion_base_ = 0;
};

}  // namespace ftjit::plugins
