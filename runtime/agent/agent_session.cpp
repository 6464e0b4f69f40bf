// SPDX-License-Identifier: MIT
#include "runtime/agent/agent_session.h"

#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdlib>
#include <map>
#include <utility>

#include "core/planner.h"
#include "runtime/plugin_host/plugin_host.h"
#include "runtime/c_api_internal.h"
#include "runtime/code_change.h"
#include "runtime/dlopen_watch.h"
#include "runtime/engine.h"
#include "runtime/module_scan.h"
#include "runtime/patcher.h"
#include "runtime/thread_control.h"
#include "runtime/unwind_hooks.h"
#include "runtime/shadow_stack.h"

namespace ftjit::agent {
namespace {

control::Reply error_reply(ftjit_status code, std::string message) {
  control::Reply r;
  r.code = code;
  r.message = std::move(message);
  return r;
}

control::Reply error_reply(const Error& e) { return error_reply(e.code, e.message); }

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%#" PRIx64, v);
  return b;
}

}  // namespace

// The process reads no DWARF: the modules' producers come from the CLI,
// over the generator connection, as the code does.
AgentSession::AgentSession() {
  set_producer_reader([this](const ModuleFile& file, const std::string&) { return emitter_.module_producers(file); });
}

AgentSession::~AgentSession() {
  set_producer_reader(nullptr);
  // Only at unload, after a detach: nothing is attached any more.
  std::lock_guard<std::mutex> lock(mu_);
  session_.reset();
  if (out_ != nullptr) std::fclose(out_);
  std::free(memory_);
  if (engine_ != nullptr) ftjit_engine_destroy(engine_);
}

bool AgentSession::attached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return session_ != nullptr;
}

pid_t AgentSession::owner_pid() const {
  std::lock_guard<std::mutex> lock(mu_);
  return owner_pid_;
}

namespace {

// Cumulative clocks of the parts of an attach; two readings give where the
// time of one attach went (`ftjit attach -v` prints it).
struct AttachClocks {
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
  uint64_t scan_us = module_scan_micros();
  uint64_t control_us = thread_control_micros();
  uint64_t control_requests = thread_control_requests();
  uint64_t trips = 0;
  uint64_t trip_us = 0;

  explicit AttachClocks(const RemoteEmitter& emitter)
      : trips(emitter.round_trips()), trip_us(emitter.round_trip_micros()) {}
};

uint64_t micros_between(const AttachClocks& a, const AttachClocks& b) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(b.now - a.now).count());
}

uint64_t less(uint64_t total, uint64_t part) { return total > part ? total - part : 0; }

// Engine setup (first attach only), module scan, then the session's start:
// plugin load, plan, trampolines (round trips to the CLI), stop-the-world
// and the patch batch.
std::vector<std::pair<std::string, uint64_t>> attach_phases(const AttachClocks& start,
                                                            const AttachClocks& engine_made,
                                                            const AttachClocks& done) {
  const uint64_t scan_in_setup = engine_made.scan_us - start.scan_us;
  const uint64_t scan_in_start = done.scan_us - engine_made.scan_us;
  const uint64_t trips = done.trips - start.trips;
  const uint64_t trip_us = done.trip_us - start.trip_us;
  const uint64_t control_us = done.control_us - start.control_us;
  const uint64_t requests = done.control_requests - start.control_requests;
  return {
      {"module scan", scan_in_setup + scan_in_start},
      {"engine setup", less(micros_between(start, engine_made), scan_in_setup)},
      {"trampoline generation (" + std::to_string(trips) + " round trips to the CLI)", trip_us},
      {"stop-the-world (" + std::to_string(requests) + " requests: sled rewrite, syncs)", control_us},
      {"plugin load, plan, patch batch",
       less(micros_between(engine_made, done), scan_in_start + trip_us + control_us)},
  };
}

// Plugins `ftjit attach` copied into this process's /tmp/ftjit-UID (its
// root is a container's, where the CLI's files are not visible): loaded or
// refused, their copies go now, so that nothing of ftjit stays in the
// container even if the CLI does not live to remove them. Only files of
// that directory, which is ftjit's own, are removed.
void remove_staged_plugins(const control::Attach& request) {
  const std::string dir = control::socket_dir(::getuid()) + "/";
  for (const auto& p : request.plugins) {
    if (p.path.size() > dir.size() && p.path.compare(0, dir.size(), dir) == 0 &&
        p.path.find('/', dir.size()) == std::string::npos)
      ::unlink(p.path.c_str());
  }
}

}  // namespace

control::Reply AgentSession::attach(const control::Attach& request, std::vector<int> output_fds) {
  std::lock_guard<std::mutex> lock(mu_);
  const AttachClocks start(emitter_);
  auto close_fd = [&] {
    for (int fd : output_fds) {
      if (fd >= 0) ::close(fd);
    }
    output_fds.clear();
  };
  // The session's file first, then the plugins' own, in their order.
  size_t next_fd = 0;
  const int output_fd = request.output_fd != 0 && next_fd < output_fds.size() ? output_fds[next_fd++] : -1;
  if (unloaded_) {
    close_fd();
    return error_reply(FTJIT_E_UNSUPPORTED, "the agent is being unloaded");
  }
  if (session_ != nullptr) {
    close_fd();
    return error_reply(FTJIT_E_ALREADY_ATTACHED,
                       "already attached (by ftjit pid " + std::to_string(owner_pid_) +
                           "): run `ftjit detach -p " + std::to_string(getpid()) + "` first");
  }
  // Before the engine's first scan asks for them.
  for (const control::ModuleProducers& p : request.producers) emitter_.prime_producers(p.file, p.units);
  if (engine_ == nullptr) {
    if (backend_ == nullptr) backend_ = make_backend(native_isa(), emitter_);
    if (backend_ == nullptr) {
      close_fd();
      return error_reply(FTJIT_E_UNSUPPORTED, "the agent has no backend for this ISA");
    }
    ftjit_engine_options options;
    ftjit_engine_options_init(&options);
    options.default_strategy = FTJIT_STRATEGY_AUTO;
    options.watch_dlopen = 1;  // libraries loaded later are traced too
    engine_ = create_engine_handle(&options, *backend_, &emitter_);
    if (engine_ == nullptr) {
      close_fd();
      std::string why = ftjit_last_error();
      return error_reply(FTJIT_E_SYSTEM, why.empty() ? "cannot create the engine" : why);
    }
  }

  const AttachClocks engine_made(emitter_);
  // What trampolines keep, for this attach (ftjit_saves): nothing is
  // attached now, so everything this session makes follows it.
  std::vector<std::string> warnings;
  if (auto st = engine_of(engine_)->set_saves(static_cast<ftjit_saves>(request.saves), &warnings); !st) {
    close_fd();
    return error_reply(st.error());
  }

  plugins::SessionConfig config;
  // Streams of the plugins' own files: each takes its fd (closing it with
  // the stream), so from here on close_fd leaves them to close_plugin_outs.
  std::vector<FILE*> plugin_outs;
  auto close_plugin_outs = [&] {
    for (FILE* f : plugin_outs) std::fclose(f);
    plugin_outs.clear();
  };
  for (const auto& p : request.plugins) {
    plugins::PluginSpec spec;
    spec.name = p.path;
    spec.options = p.options;
    spec.format = p.format;
    if (p.output_fd != 0 && next_fd < output_fds.size()) {
      const int fd = std::exchange(output_fds[next_fd++], -1);
      spec.output_stream = ::fdopen(fd, "w");
      if (spec.output_stream == nullptr) {
        ::close(fd);
        close_fd();
        close_plugin_outs();
        return error_reply(FTJIT_E_SYSTEM, "cannot open a plugin's report stream");
      }
      plugin_outs.push_back(spec.output_stream);
    }
    config.plugins.push_back(std::move(spec));
  }
  config.include = request.include;
  config.exclude = request.exclude;
  config.relocate = request.relocate != 0;
  config.args = request.args;
  config.record = request.record;
  config.live = request.live != 0;
  config.strategy = static_cast<ftjit_strategy>(request.strategy);
  config.format = request.format;
  config.tids = request.tids;
  config.thread_glob = request.thread_glob;
  config.main_thread = request.main_thread != 0;
  config.buffer_policy = static_cast<plugins::BufferPolicy>(request.buffer_policy);
  config.buffer_bytes = request.buffer_bytes;
  config.buffer_wait_ms = request.buffer_wait_ms;

  // The report goes to the CLI's file, or to memory and back over the
  // socket: never to the process's own stdout.
  FILE* out = output_fd >= 0 ? ::fdopen(output_fd, "w") : ::open_memstream(&memory_, &memory_size_);
  if (out == nullptr) {
    close_fd();
    close_plugin_outs();
    return error_reply(FTJIT_E_SYSTEM, "cannot open the report stream");
  }
  config.output_stream = out;
  auto session = plugins::TraceSession::start(engine_, config);
  remove_staged_plugins(request);
  if (!session) {
    close_plugin_outs();
    std::fclose(out);
    std::free(memory_);
    memory_ = nullptr;
    memory_size_ = 0;
    return error_reply(session.error());
  }
  const AttachClocks done(emitter_);
  session_ = std::move(session.value());
  out_ = out;
  plugin_outs_ = std::move(plugin_outs);
  owner_pid_ = request.owner_pid;

  ftjit_stats st{};
  ftjit_get_stats(engine_, &st);
  control::Reply r;
  r.phases = attach_phases(start, engine_made, done);
  r.sites = st.sites_enabled;
  r.message = "attached to " + std::to_string(st.sites_enabled) + " of " + std::to_string(st.sites) +
              " patchable functions";
  for (std::string& line : engine_of(engine_)->take_relocation_notes()) warnings.push_back(std::move(line));
  r.warnings = std::move(warnings);
  return r;
}

namespace {

void put_totals(const plugins::TraceSession& session, control::Reply* r) {
  const auto totals = session.totals();
  r->recursion_drops = totals.recursion_drops;
  r->events_dropped = totals.events_dropped;
  r->events_overwritten = totals.events_overwritten;
  r->buffer_waits = totals.buffer_waits;
  r->buffer_wait_ns = totals.buffer_wait_ns;
  r->buffer_timeouts = totals.buffer_timeouts;
  r->writer = session.writer_mode();
}

}  // namespace

control::Reply AgentSession::control(const control::Control& request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (session_ == nullptr) return error_reply(FTJIT_E_NOT_ATTACHED, "not attached");
  plugins::TraceSession::Control change;
  if (request.has_paused) change.paused = request.paused != 0;
  if (request.has_depth) change.max_depth = request.depth;
  if (request.has_sample) change.sample_period = request.sample;
  if (request.has_min_duration) change.min_duration_ns = request.min_duration_ns;
  if (request.has_filter) change.filter = std::make_pair(request.include, request.exclude);
  if (auto st = session_->control(change); !st) return error_reply(st.error());
  if (request.flush) {
    if (auto st = session_->flush(); !st) return error_reply(st.error());
  }
  control::Reply r;
  put_totals(*session_, &r);
  ftjit_stats stats{};
  ftjit_get_stats(engine_, &stats);
  r.sites = stats.sites_enabled;
  r.message = session_->describe_recording();
  return r;
}

control::Reply AgentSession::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (session_ == nullptr) return error_reply(FTJIT_E_NOT_ATTACHED, "not attached");
  if (auto st = session_->flush(); !st) return error_reply(st.error());
  control::Reply r;
  put_totals(*session_, &r);
  r.message = "buffers written";
  return r;
}

control::Reply AgentSession::stop_locked(bool report) {
  if (session_ == nullptr) return error_reply(FTJIT_E_NOT_ATTACHED, "not attached");
  control::Reply r;
  if (auto st = session_->stop(); !st) return error_reply(st.error());
  if (report) {
    if (auto st = session_->report(); !st) {
      r.code = st.error().code;
      r.message = st.error().message;
    }
  }
  put_totals(*session_, &r);
  session_.reset();
  // Nothing is attached now: frames still hooked (a thread blocked inside a
  // traced function, say) get their real return addresses back, so the
  // process is left with nothing of ours on any stack.
  if (auto st = shadow_put_back_all(2000); !st) {
    r.code = st.error().code;
    r.message = "detached, but " + st.error().message;
  }
  if (out_ != nullptr) std::fclose(out_);  // a memstream's buffer is final now
  out_ = nullptr;
  // Closed before the reply: the CLI reads or converts these files then.
  for (FILE* f : plugin_outs_) std::fclose(f);
  plugin_outs_.clear();
  if (memory_ != nullptr) r.text.assign(memory_, memory_size_);
  std::free(memory_);
  memory_ = nullptr;
  memory_size_ = 0;
  owner_pid_ = 0;
  if (r.message.empty()) r.message = "detached";
  ftjit_stats st{};
  ftjit_get_stats(engine_, &st);
  r.sites = st.sites_enabled;
  return r;
}

control::Reply AgentSession::detach(const control::Detach& request) {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_locked(request.report != 0);
}

control::Reply AgentSession::prepare_unload() {
  std::lock_guard<std::mutex> lock(mu_);
  if (session_ != nullptr) return error_reply(FTJIT_E_ALREADY_ATTACHED, "still attached: detach first");
  if (engine_ != nullptr) {
    ftjit_engine_destroy(engine_);  // original sleds back, memory freed
    engine_ = nullptr;
  }
  control::Reply r;
  for (Status st : {uninstall_dlopen_watch(), uninstall_unwind_hooks()}) {
    if (!st) return error_reply(st.error());
  }
  Patcher::uninstall_trap_handler();
  make_fork_handlers_inert();
  uninstall_thread_control();
  shadow_forget_threads();
  unloaded_ = true;
  r.message = "detached; the agent can be unloaded";
  return r;
}

control::Reply AgentSession::finish_at_exit() {
  std::lock_guard<std::mutex> lock(mu_);
  if (unloaded_) return error_reply(FTJIT_E_NOT_ATTACHED, "unloaded");
  return stop_locked(true);
}

control::Reply AgentSession::status(const control::StatusQuery& request) {
  std::lock_guard<std::mutex> lock(mu_);
  control::Reply r;
  std::string& t = r.text;
  t += "attached: " + std::string(session_ ? "yes" : "no");
  if (session_) t += " (by ftjit pid " + std::to_string(owner_pid_) + ")";
  t += "\n";
  if (session_) {
    t += "plugins:";
    for (const auto& p : session_->plugins()) t += " " + p.name;
    t += "\n";
    t += "recording: " + session_->describe_recording() + "\n";
  }
  if (engine_ == nullptr) {
    t += "sites: not scanned yet (nothing was ever attached)\n";
    return r;
  }
  ftjit_stats st{};
  ftjit_get_stats(engine_, &st);
  r.sites = st.sites_enabled;
  Engine* engine = engine_of(engine_);
  std::vector<SiteInfo> sites = engine->sites();
  std::map<std::string, std::pair<uint64_t, uint64_t>> per_module;  // sites, enabled
  for (const SiteInfo& s : sites) {
    auto& m = per_module[*s.module];
    ++m.first;
    if (s.route != Route::kNone) ++m.second;
  }
  t += "sites: " + std::to_string(st.sites) + " patchable, " + std::to_string(st.sites_enabled) +
       " enabled\n";
  for (const auto& [module, counts] : per_module) {
    t += "  module " + module + ": " + std::to_string(counts.first) + " sites, " +
         std::to_string(counts.second) + " enabled\n";
  }
  if (session_) put_totals(*session_, &r);
  t += "hooked frames: " + std::to_string(shadow_hooked_frames()) + "\n";
  t += "drops: recursion " + std::to_string(st.recursion_drops) + ", exit hooks " +
       std::to_string(st.exit_hook_drops) + ", events " + std::to_string(r.events_dropped) + "\n";
  t += "trampolines: " + std::to_string(st.trampolines) + " (" + std::to_string(st.trampoline_bytes) +
       " bytes); batches " + std::to_string(st.batches) + ", syncs " + std::to_string(st.syncs) +
       "; exit hooks " + std::to_string(st.exit_hooks) + "; dlopen refreshes " +
       std::to_string(st.dlopen_refreshes) + "\n";
  if (request.sites) {
    // Like ftrace's enabled_functions: one line per enabled site.
    t += "ADDRESS\tROUTE\tOPS\tTRAMPOLINE\tMODULE\tFUNCTION\n";
    for (const SiteInfo& s : sites) {
      if (s.route == Route::kNone) continue;
      t += hex(s.entry) + "\t" + route_name(s.route) + "\t" + std::to_string(s.n_ops) + "\t" +
           hex(s.call_target) + "\t" + *s.module + "\t" + std::string(s.demangled) + "\n";
    }
  }
  return r;
}

}  // namespace ftjit::agent
