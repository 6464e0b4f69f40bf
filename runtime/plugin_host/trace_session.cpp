// SPDX-License-Identifier: MIT
// A trace session: the plugins of one run, from load to report; its
// writer thread is runtime/plugin_host/event_writer.h.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

#include <spdlog/spdlog.h>

#include "runtime/log.h"

#include "runtime/plugin_host/event_writer.h"
#include "runtime/plugin_host/host_internal.h"
#include "runtime/plugin_host/record_triggers.h"
#include "runtime/cycle_clock.h"

namespace ftjit::plugins {

using detail::Instance;
using detail::ThreadBlock;

namespace {

constexpr uint32_t kDefaultBufferEvents = 4096;
constexpr uint32_t kMaxBufferEvents = 1u << 24;

// The entry the engine calls for a plugin that only hooks exits: the engine
// needs an entry callback to install the return hook from.
void empty_entry(uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) {}

uint32_t round_up_pow2(uint32_t n) {
  uint32_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

Error session_error(const std::string& message) {
  return make_error(FTJIT_E_INVALID_ARGUMENT, message);
}

}  // namespace

// ---------------------------------------------------------------------------
// Start
// ---------------------------------------------------------------------------

TraceSession::TraceSession() = default;

Result<std::unique_ptr<TraceSession>> TraceSession::start(ftjit_engine* engine,
                                                          const SessionConfig& config) {
  if (engine == nullptr) return session_error("no engine");
  if (config.plugins.empty()) return session_error("no plugin given");
  if (config.strategy == FTJIT_STRATEGY_DIRECT) {
    return session_error("the direct strategy needs a trampoline of its own; plugins cannot use it");
  }
  if (config.buffer_events > kMaxBufferEvents) {
    return session_error("buffer of " + std::to_string(config.buffer_events) +
                         " events is over the limit " + std::to_string(kMaxBufferEvents));
  }
  if (config.buffer_bytes > kMaxBufferBytes) {
    return session_error("a buffer of " + std::to_string(config.buffer_bytes) +
                         " bytes per thread is over the limit of 1 GiB");
  }
  if (config.buffer_policy != BufferPolicy::kDrop && config.buffer_policy != BufferPolicy::kOverwrite &&
      config.buffer_policy != BufferPolicy::kBlock) {
    return session_error("unknown buffer policy " +
                         std::to_string(static_cast<int>(config.buffer_policy)));
  }
  if (config.buffer_policy == BufferPolicy::kBlock &&
      (config.buffer_wait_ms == 0 || config.buffer_wait_ms > kMaxBufferWaitMs)) {
    return session_error("a buffer wait of " + std::to_string(config.buffer_wait_ms) +
                         " ms is out of range (1 ms to 1 hour)");
  }

  if (std::string why = check_record_control(config.record); !why.empty()) return session_error(why);

  // Before any plugin can ask for the time, where the answer would change
  // (monotonic_ns reads the counter once calibrated). Elsewhere (a VM
  // whose clocksource is kvm-clock) calibrating only slept: up to 10 ms
  // of an attach that came soon after the agent's load.
  if (cycle_counter_is_clock()) calibrate_cycle_clock();

  // Any early return below destroys `s`, whose destructor undoes whatever
  // was done: detach, shutdown, close, unload.
  std::unique_ptr<TraceSession> s(new TraceSession());
  s->engine_ = engine;
  s->config_ = config;
  s->symbols_ = std::make_unique<detail::SymbolCache>(engine);
  ftjit_stats stats{};
  ftjit_get_stats(engine, &stats);
  s->recursion_base_ = stats.recursion_drops;

  const SessionConfig& c = s->config_;
  if (!c.tids.empty() || !c.thread_glob.empty() || c.main_thread) {
    s->thread_filter_.tids = c.tids.empty() ? nullptr : c.tids.data();
    s->thread_filter_.n_tids = c.tids.size();
    s->thread_filter_.name_glob = c.thread_glob.empty() ? nullptr : c.thread_glob.c_str();
    s->thread_filter_.main_thread = c.main_thread ? 1 : 0;
  }
  for (const std::string& g : c.include) s->include_.push_back(g.c_str());
  for (const std::string& g : c.exclude) s->exclude_.push_back(g.c_str());
  const RecordControl& record = c.record;
  if (record.has_triggers()) {
    s->triggers_ = std::make_unique<detail::RecordTriggers>(
        engine, record, c.relocate ? FTJIT_OPS_F_RELOCATE : 0, c.strategy);
  }
  if (!c.args.empty()) {
    s->args_ = std::make_unique<ArgCapturer>(c.args);
    if (s->args_->empty() && !s->args_->has_keys()) s->args_.reset();
  }

  // 1. Load and check every plugin before running any of its code but the
  //    descriptor function.
  detail::register_event_fork_handlers();
  for (const PluginSpec& spec : c.plugins) {
    auto loaded = detail::load_plugin(spec);
    if (!loaded) return loaded.take_error();
    auto inst = std::make_unique<Instance>();
    inst->plugin = std::move(loaded.value());
    const ftjit_plugin* d = inst->plugin.desc;
    const std::string& label = inst->plugin.label;

    auto options = detail::resolve_options(inst->plugin, spec);
    if (!options) return options.take_error();
    inst->options = std::move(options.value());

    // Its own format= wins over the session's.
    const std::string& format = spec.format.empty() ? c.format : spec.format;
    std::string formats;
    for (uint32_t i = 0; d->formats != nullptr && d->formats[i] != nullptr; ++i) {
      formats += (formats.empty() ? "" : ", ") + std::string(d->formats[i]);
      if (format == d->formats[i]) inst->format = format;
    }
    if (format.empty()) {
      inst->format = d->formats != nullptr && d->formats[0] != nullptr ? d->formats[0] : "";
    } else if (inst->format.empty()) {
      return session_error("plugin '" + std::string(d->name) + "' does not support format '" +
                           format + "' (" +
                           (formats.empty() ? std::string("it writes no report") : "it writes " + formats) +
                           ")");
    }

    inst->storage_size = d->thread_storage_size;
    // The ring's slot stride: rounded up so every slot is 8-byte aligned,
    // as plugin.h promises.
    inst->event_size = (d->event_size + 7u) & ~7u;
    // A plugin that records arguments gets room for one record after its
    // own event.
    if (s->args_ != nullptr && inst->event_size != 0 && (d->flags & FTJIT_PLUGIN_F_ARGS) != 0) {
      inst->bind_args(*s->args_);
      inst->event_size += inst->args_room;
    }
    uint64_t want = c.buffer_events != 0 ? c.buffer_events
                    : d->buffer_events != 0 ? d->buffer_events
                                            : kDefaultBufferEvents;
    if (c.buffer_bytes != 0 && inst->event_size != 0) {
      want = (c.buffer_bytes + inst->event_size - 1) / inst->event_size;
    }
    if (want > kMaxBufferEvents) want = kMaxBufferEvents + 1;  // refused below
    inst->ring_capacity = round_up_pow2(static_cast<uint32_t>(want));
    if (static_cast<uint64_t>(inst->ring_capacity) * inst->event_size > kMaxBufferBytes) {
      return session_error(label + ": a buffer of " + std::to_string(inst->ring_capacity) +
                           " events of " + std::to_string(inst->event_size) +
                           " bytes is over the 1 GiB limit");
    }
    if (s->args_ != nullptr && s->args_->has_keys()) inst->keys = s->args_.get();
    inst->policy = c.buffer_policy;
    inst->wait_ns = static_cast<uint64_t>(c.buffer_wait_ms) * 1'000'000;

    auto slot = detail::acquire_slot();
    if (!slot) return session_error(label + ": " + slot.error().message);
    inst->has_slot = true;
    inst->engine = engine;
    inst->symbols = s->symbols_.get();
    inst->recursion_base = s->recursion_base_;

    ftjit_plugin_ctx& ctx = inst->ctx;
    ctx.slot = slot.value();
    ctx.generation = detail::next_generation();
    ctx.needs_block = (inst->storage_size != 0 || inst->event_size != 0) ? 1 : 0;
    ctx.instance = inst.get();
    ftjit_ops_init(&ctx.ops);
    // The plugin's callbacks have the engine's callback ABI, with ctx in
    // place of ops: the engine calls them directly, no host frame between.
    ctx.ops.func = d->entry != nullptr ? reinterpret_cast<ftjit_func_t>(d->entry) : empty_entry;
    ctx.ops.exit_func = reinterpret_cast<ftjit_exit_func_t>(d->exit);
    // An FP argument to capture needs the FP registers saved at entry.
    const bool reads_fp = inst->args != nullptr && inst->args->reads_fp_at_entry();
    ctx.ops.flags = (d->flags & FTJIT_PLUGIN_F_NO_FP) != 0 && !reads_fp ? FTJIT_OPS_F_NO_FP : 0;
    if (c.relocate) ctx.ops.flags |= FTJIT_OPS_F_RELOCATE;
    ctx.ops.strategy = c.strategy;
    ctx.ops.private_data = inst.get();
    ctx.ops.threads = s->thread_filter_.tids != nullptr || s->thread_filter_.name_glob != nullptr ||
                              s->thread_filter_.main_thread != 0
                          ? &s->thread_filter_
                          : nullptr;
    // What it records (record_gate.h): a plugin that counts every call
    // (FTJIT_PLUGIN_F_EVERY_CALL) is neither sampled nor filtered by time.
    detail::Gate& gate = inst->gate;
    const bool every_call = (d->flags & FTJIT_PLUGIN_F_EVERY_CALL) != 0;
    gate.entry = d->entry;
    gate.exit = d->exit;
    gate.every_call = every_call;
    gate.regs_bytes = (ctx.ops.flags & FTJIT_OPS_F_NO_FP) != 0 ? offsetof(ftjit_plugin_regs, fp)
                                                               : sizeof(ftjit_plugin_regs);
    gate.recording = s->triggers_ != nullptr ? s->triggers_->recording() : nullptr;
    detail::apply_record_limits(gate, record);
    // Why the gate stands in front of the plugin, each reason once. A live
    // session keeps the gate whatever it records now: the limits change
    // through it (TraceSession::control).
    struct GateReasons {
      bool live, depth, sampled, min_duration, triggers;
      bool any() const { return live || depth || sampled || min_duration || triggers; }
      bool sampling_alone() const { return sampled && !live && !depth && !min_duration && !triggers; }
    };
    const GateReasons reasons{c.live, record.max_depth != 0, !every_call && record.sample_period > 1,
                              !every_call && record.min_duration_ns != 0, gate.recording != nullptr};
    inst->gated = reasons.any();
    // Sampling alone leaves inline latency inline: its sites' code takes
    // each thread's turns itself, the gate samples the rest (sites the
    // engine does not compile) and takes what the code leaves to the
    // callbacks as turns (record_gate.cpp).
    const bool sampled_only = reasons.sampling_alone();
    if (inst->gated) {
      // The gate keeps a frame per call, with the exit hooked, in the
      // thread's block.
      ctx.ops.func = detail::gate_entry;
      ctx.ops.exit_func = detail::gate_exit;
      ctx.gate = &inst->gate;
      ctx.needs_block = 1;
    }
    // Inline work where the engine can take it: a thread filter needs the
    // callback at every call, and so does grouping by an argument
    // (--by-arg: the callback reads it), and the record gate.
    const ftjit_plugin_inline* work = detail::plugin_inline_work(d);
    if (work != nullptr && ctx.ops.threads == nullptr && inst->keys == nullptr && !inst->gated) {
      if (work->entry == FTJIT_PLUGIN_INLINE_COUNT) ctx.ops.inline_entry = FTJIT_INLINE_COUNT;
      if (work->entry == FTJIT_PLUGIN_INLINE_LATENCY) ctx.ops.inline_entry = FTJIT_INLINE_LATENCY;
    } else if (work != nullptr && ctx.ops.threads == nullptr && inst->keys == nullptr && sampled_only &&
               work->entry == FTJIT_PLUGIN_INLINE_LATENCY) {
      ctx.ops.inline_entry = FTJIT_INLINE_LATENCY;
      ctx.ops.inline_sample = record.sample_period;
    }
    s->instances_.push_back(std::move(inst));
  }

  // Sampling and the duration filter with only plugins that count every
  // call would change nothing: refused rather than ignored.
  if (record.min_duration_ns != 0 || record.sample_period > 1) {
    const std::string why =
        detail::unnarrowed(s->instances_, record.min_duration_ns != 0 ? "--min-duration" : "--sample");
    if (!why.empty()) return session_error(why);
  }

  // 2. The output, before init, so a plugin may write a header there.
  if (c.output_stream != nullptr) {
    s->out_ = c.output_stream;
  } else if (c.output.empty() || c.output == "-") {
    s->out_ = stdout;
  } else {
    s->out_ = std::fopen(c.output.c_str(), "we");
    if (s->out_ == nullptr) {
      return make_error(FTJIT_E_SYSTEM,
                        "cannot open output '" + c.output + "': " + std::strerror(errno));
    }
    s->owns_out_ = true;
  }
  // A plugin with a file of its own writes there instead; two plugins
  // never share one by name (the second open would truncate the first).
  for (size_t i = 0; i < s->instances_.size(); ++i) {
    const PluginSpec& spec = c.plugins[i];
    Instance& inst = *s->instances_[i];
    inst.out = s->out_;
    if (spec.output_stream != nullptr) {
      inst.out = spec.output_stream;
    } else if (!spec.output.empty()) {
      const bool taken = spec.output == c.output ||
                         std::any_of(s->plugin_files_.begin(), s->plugin_files_.end(),
                                     [&](const auto& f) { return f.second == spec.output; });
      if (taken) return session_error(inst.plugin.label + ": output '" + spec.output + "' is another report's file");
      inst.out = std::fopen(spec.output.c_str(), "we");
      if (inst.out == nullptr) {
        return make_error(FTJIT_E_SYSTEM, inst.plugin.label + ": cannot open output '" + spec.output +
                                              "': " + std::strerror(errno));
      }
      s->plugin_files_.emplace_back(inst.out, spec.output);
    }
  }

  // 3. Init, in order; a plugin whose init failed is not shut down.
  for (auto& inst : s->instances_) {
    const ftjit_plugin* d = inst->plugin.desc;
    if (d->init != nullptr && d->init(&inst->ctx) != 0) {
      std::string why = inst->take_error();
      return session_error(inst->plugin.label + ": init failed: " +
                           (why.empty() ? std::string("(the plugin gave no reason)") : why));
    }
    inst->inited = true;
  }

  // 4. The writer drains from the first event on, so it runs before attach.
  std::vector<Instance*> buffered;
  for (auto& inst : s->instances_) {
    if (inst->event_size != 0) buffered.push_back(inst.get());
  }
  if (!buffered.empty()) {
    s->writer_ = std::make_unique<detail::Writer>(buffered, c.buffer_policy, c.spool, engine);
    for (Instance* inst : buffered) inst->writer_wake = s->writer_->wake_word();
  }

  // 5. Attach: the triggers first (at a site they share with a plugin,
  //    they run before it), then the plugins.
  if (s->triggers_ != nullptr) {
    std::function<Status()> dump;
    detail::DumpFreeze freeze;
    if (s->writer_ != nullptr) {
      dump = [session = s.get()] { return session->flush(); };
      for (Instance* inst : buffered) {
        if (inst->policy == BufferPolicy::kOverwrite) freeze.push_back(&inst->dumping);
      }
    }
    FTJIT_TRY(s->triggers_->start(std::move(dump), std::move(freeze)));
  }
  ftjit_filter filter{s->include_.data(), s->include_.size(), s->exclude_.data(),
                      s->exclude_.size()};
  for (auto& inst : s->instances_) {
    ftjit_status st = ftjit_attach(engine, &inst->ctx.ops, &filter);
    if (st != FTJIT_OK) {
      return make_error(st, inst->plugin.label + ": attach failed (" + ftjit_status_name(st) +
                                "): " + ftjit_last_error());
    }
    inst->attached = true;
  }
  return s;
}

// ---------------------------------------------------------------------------
// Stop, report, teardown
// ---------------------------------------------------------------------------

Status TraceSession::stop() {
  if (stopped_) return {};
  std::string failed;
  // The triggers first: their thread may be dumping through the writer,
  // which must not run beside the detaches below.
  if (triggers_ != nullptr) {
    if (Status st = triggers_->stop(); !st) failed = st.error().message;
  }
  // Reverse order: undo in the opposite order of start.
  for (auto it = instances_.rbegin(); it != instances_.rend(); ++it) {
    Instance& inst = **it;
    if (!inst.attached) continue;
    ftjit_status st = ftjit_detach(engine_, &inst.ctx.ops);
    if (st == FTJIT_OK || st == FTJIT_E_NOT_ATTACHED) {
      inst.attached = false;
    } else {
      failed += (failed.empty() ? "" : "; ") + inst.plugin.label + ": detach failed (" +
                ftjit_status_name(st) + "): " + ftjit_last_error();
    }
  }
  // A plugin still attached may still produce: the writer must keep going.
  if (!failed.empty()) return make_error(FTJIT_E_INTERNAL, failed);
  // Detach waited until no thread is in a callback, so nothing is committed
  // after this and the writer's last pass empties every ring.
  if (writer_) writer_->stop();
  for (auto& inst : instances_) {
    for (ThreadBlock* b = inst->threads.load(std::memory_order_acquire); b != nullptr; b = b->next) {
      detail::refresh_thread_name(b);
    }
  }
  stopped_ = true;
  return {};
}

Status TraceSession::flush() {
  if (stopped_) return session_error("the session has stopped");
  if (!writer_) return session_error("no plugin of this session buffers events");
  FTJIT_TRY(writer_->flush());
  // What consume() wrote is in the files now, not in their stdio buffers:
  // a flight recorder's dump is there to be read while the program runs.
  // (stdio locks each stream: the writer thread may be writing to it.)
  for (auto& inst : instances_) {
    if (inst->out != nullptr) std::fflush(inst->out);
  }
  if (out_ != nullptr) std::fflush(out_);
  return {};
}

Status TraceSession::report() {
  if (reported_) return session_error("report() called twice");
  FTJIT_TRY(stop());
  reported_ = true;
  std::string failed;
  for (auto& inst : instances_) {
    const ftjit_plugin* d = inst->plugin.desc;
    if (d->report == nullptr) continue;
    if (d->report(&inst->ctx, inst->out, inst->format.c_str()) != 0) {
      std::string why = inst->take_error();
      failed += (failed.empty() ? "" : "; ") + inst->plugin.label + ": report failed: " +
                (why.empty() ? std::string("(the plugin gave no reason)") : why);
    }
  }
  // Each plugin's own file first (the session's output is flushed below).
  for (size_t i = 0; i < instances_.size(); ++i) {
    FILE* own = instances_[i]->out;
    if (own == out_) continue;
    const std::string& path = config_.plugins[i].output;
    if (std::fflush(own) != 0 || std::ferror(own) != 0) {
      failed += (failed.empty() ? "" : "; ") + std::string("writing '") +
                (path.empty() ? instances_[i]->plugin.label + "'s report" : path) + "': " + std::strerror(errno);
    }
  }
  for (auto& [file, path] : plugin_files_) {
    if (std::fclose(file) != 0) {
      failed += (failed.empty() ? "" : "; ") + std::string("closing '") + path + "': " + std::strerror(errno);
    }
    for (auto& inst : instances_) {
      if (inst->out == file) inst->out = nullptr;
    }
  }
  plugin_files_.clear();
  const std::string where = owns_out_ ? "'" + config_.output + "'" : std::string("stdout");
  if (std::fflush(out_) != 0 || std::ferror(out_) != 0) {
    failed += (failed.empty() ? "" : "; ") + std::string("writing ") + where + ": " +
              std::strerror(errno);
  }
  if (owns_out_) {
    if (std::fclose(out_) != 0) {
      failed += (failed.empty() ? "" : "; ") + std::string("closing ") + where + ": " +
                std::strerror(errno);
    }
    out_ = nullptr;
    owns_out_ = false;
    for (auto& inst : instances_) inst->out = nullptr;
  }

  // Not on the output: a tsv report must stay exactly the plugins' lines.
  Totals t = totals();
  if (t.events_dropped != 0) {
    ftjit::log().warn("ftjit: {} events dropped because a plugin's buffer was full "
                      "(the block policy keeps every event; a larger buffer may help)",
                      t.events_dropped);
  }
  if (t.recursion_drops != 0) {
    ftjit::log().info("ftjit: {} traced calls made from inside callbacks ran untraced",
                 t.recursion_drops);
  }
  if (!failed.empty()) return make_error(FTJIT_E_SYSTEM, failed);
  return {};
}

TraceSession::Totals TraceSession::totals() const {
  Totals t;
  ftjit_stats stats{};
  ftjit_get_stats(engine_, &stats);
  t.recursion_drops = stats.recursion_drops >= recursion_base_ ? stats.recursion_drops - recursion_base_ : 0;
  for (const auto& inst : instances_) {
    t.events_dropped += inst->events_dropped();
    t.events_pending += inst->events_pending();
    t.events_overwritten += inst->sum(&ThreadBlock::overwritten);
    t.buffer_waits += inst->sum(&ThreadBlock::waits);
    t.buffer_wait_ns += inst->sum(&ThreadBlock::wait_ns);
    t.buffer_timeouts += inst->sum(&ThreadBlock::timeouts);
  }
  return t;
}

const char* TraceSession::writer_mode() const { return writer_ ? writer_->mode_name() : ""; }

std::vector<PluginInfo> TraceSession::plugins() const {
  std::vector<PluginInfo> out;
  for (const auto& inst : instances_) out.push_back(detail::info_of(inst->plugin));
  return out;
}

TraceSession::~TraceSession() {
  Status st = stop();
  if (!st) {
    // A traced thread may still run plugin code or write its blocks: keep
    // code and memory mapped for the life of the process.
    ftjit::log().error("ftjit: {}; the plugins stay loaded", st.error().message);
    for (auto& inst : instances_) {
      inst->plugin.library.leak();
      (void)inst.release();
    }
    (void)writer_.release();
    (void)args_.release();
    (void)triggers_.release();
    return;
  }
  for (auto it = instances_.rbegin(); it != instances_.rend(); ++it) {
    Instance& inst = **it;
    if (inst.inited && inst.plugin.desc->shutdown != nullptr) inst.plugin.desc->shutdown(&inst.ctx);
  }
  if (owns_out_ && out_ != nullptr) std::fclose(out_);
  for (auto& [file, path] : plugin_files_) std::fclose(file);
  // Unmaps the thread blocks, then dlcloses, newest first.
  while (!instances_.empty()) instances_.pop_back();
}

}  // namespace ftjit::plugins
