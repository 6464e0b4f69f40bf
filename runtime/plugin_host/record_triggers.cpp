// SPDX-License-Identifier: MIT
#include "runtime/plugin_host/record_triggers.h"

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "runtime/cycle_clock.h"
#include "runtime/log.h"
#include "runtime/plugin_host/host_internal.h"

namespace ftjit::plugins::detail {

static_assert(offsetof(TriggerOps, ops) == 0);

namespace {

// The session whose signal trigger is installed: one at a time, as a
// signal has one handler.
std::atomic<RecordTriggers*> g_signal_owner{nullptr};

uint32_t action_value(TriggerAction action) {
  return action == TriggerAction::kStart ? 1 : action == TriggerAction::kStop ? 0 : kDumpValue;
}

}  // namespace

RecordTriggers::RecordTriggers(ftjit_engine* engine, const RecordControl& control, uint32_t ops_flags,
                               ftjit_strategy strategy)
    : engine_(engine), control_(control) {
  recording_.store(control.starts_off() ? 0 : 1, std::memory_order_relaxed);
  for (const RecordTrigger& trigger : control.triggers) {
    auto f = std::make_unique<Function>();
    f->label = describe_trigger(trigger);
    f->glob = trigger.function;
    ftjit_ops_init(&f->t.ops);
    // The callbacks are record_gate.cpp's: general registers only.
    f->t.ops.flags = FTJIT_OPS_F_NO_FP | (ops_flags & FTJIT_OPS_F_RELOCATE);
    f->t.ops.strategy = strategy;
    if (trigger.at_return) {
      f->t.ops.func = trigger_no_entry;
      f->t.ops.exit_func = trigger_at_exit;
    } else {
      f->t.ops.func = trigger_at_entry;
    }
    f->t.ops.private_data = &f->t;
    f->t.from_call = trigger.from_call;
    f->t.value = action_value(trigger.action);
    f->t.recording = &recording_;
    f->t.dumps = &dump_asks_;
    f->t.freeze = &freeze_;
    functions_.push_back(std::move(f));
  }
}

RecordTriggers::~RecordTriggers() { (void)stop(); }

void RecordTriggers::on_signal(int) {
  RecordTriggers* self = g_signal_owner.load(std::memory_order_acquire);
  if (self == nullptr) return;
  const int saved = errno;  // the futex wake may set it
  switch (self->control_.signal_action) {
    case TriggerAction::kStart:
      self->recording_.store(1, std::memory_order_relaxed);
      break;
    case TriggerAction::kStop:
      self->recording_.store(0, std::memory_order_relaxed);
      break;
    case TriggerAction::kToggle:
      self->recording_.fetch_xor(1, std::memory_order_relaxed);
      break;
    case TriggerAction::kDump:
      request_dump(&self->dump_asks_, &self->freeze_);
      break;
  }
  errno = saved;
}

Status RecordTriggers::start(std::function<Status()> dump, DumpFreeze freeze) {
  dump_ = std::move(dump);
  freeze_ = std::move(freeze);
  for (auto& f : functions_) {
    if (f->t.value == kDumpValue && !dump_) {
      return make_error(FTJIT_E_INVALID_ARGUMENT,
                        f->label + ": no plugin of this session buffers events to dump");
    }
    const char* include[] = {f->glob.c_str()};
    const ftjit_filter filter{include, 1, nullptr, 0};
    const ftjit_status st = ftjit_attach(engine_, &f->t.ops, &filter);
    if (st == FTJIT_E_NO_MATCH) {
      return make_error(st, f->label + ": no patchable function matches '" + f->glob + "'");
    }
    if (st != FTJIT_OK) return make_error(st, f->label + ": " + ftjit_last_error());
    f->attached = true;
  }
  if (control_.signal != 0) {
    const std::string label = "--on-signal " + std::string(sigabbrev_np(control_.signal) != nullptr
                                                               ? sigabbrev_np(control_.signal)
                                                               : std::to_string(control_.signal).c_str());
    if (control_.signal_action == TriggerAction::kDump && !dump_) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, label + ": no plugin of this session buffers events to dump");
    }
    RecordTriggers* none = nullptr;
    if (!g_signal_owner.compare_exchange_strong(none, this)) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, label + ": another session of this process has a signal trigger");
    }
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(control_.signal, &sa, &old_action_) != 0) {
      g_signal_owner.store(nullptr, std::memory_order_release);
      return make_error(FTJIT_E_SYSTEM, label + ": cannot catch it: " + std::strerror(errno));
    }
    signal_installed_ = true;
  }
  const bool dumps = control_.signal_action == TriggerAction::kDump && control_.signal != 0;
  bool function_dumps = false;
  for (const auto& f : functions_) function_dumps = function_dumps || f->t.value == kDumpValue;
  if (control_.start_after_ns != 0 || control_.stop_after_ns != 0 || dumps || function_dumps) {
    thread_ = std::thread([this] { run(); });
  }
  return {};
}

// The times, in order, and the dumps as they are asked for: the thread
// sleeps on the dump word until the next time (or a dump) comes.
void RecordTriggers::run() {
  const uint64_t t0 = monotonic_ns();
  struct Step {
    uint64_t at_ns;
    uint32_t value;
  };
  Step steps[2] = {{control_.start_after_ns, 1}, {control_.stop_after_ns, 0}};
  size_t next = 0;
  uint32_t served = 0;
  for (;;) {
    while (next < 2 && steps[next].at_ns == 0) ++next;
    const uint32_t asked = dump_asks_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_acquire)) return;
    if (asked != served) {
      served = asked;
      // The writer lets the rings go as it reads them; a dump that failed
      // must not leave them frozen.
      if (Status st = dump_(); !st) {
        ftjit::log().warn("ftjit: a dump trigger: {}", st.error().message);
        for (std::atomic<uint32_t>* w : freeze_) w->store(0, std::memory_order_release);
      }
      dumps_done_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    const uint64_t now = monotonic_ns() - t0;
    if (next < 2 && now >= steps[next].at_ns) {
      recording_.store(steps[next].value, std::memory_order_relaxed);
      ++next;
      continue;
    }
    // Woken by a dump or stop(); at most a second asleep all the same.
    uint64_t wait = 1'000'000'000;
    if (next < 2 && steps[next].at_ns - now < wait) wait = steps[next].at_ns - now;
    futex_wait_for(&dump_asks_, asked, wait);
  }
}

Status RecordTriggers::stop() {
  stopping_.store(true, std::memory_order_release);
  dump_asks_.fetch_add(1, std::memory_order_release);
  futex_wake_all(&dump_asks_);
  if (thread_.joinable()) thread_.join();
  if (signal_installed_) {
    sigaction(control_.signal, &old_action_, nullptr);
    g_signal_owner.store(nullptr, std::memory_order_release);
    signal_installed_ = false;
  }
  std::string failed;
  for (auto it = functions_.rbegin(); it != functions_.rend(); ++it) {
    Function& f = **it;
    if (!f.attached) continue;
    const ftjit_status st = ftjit_detach(engine_, &f.t.ops);
    if (st == FTJIT_OK || st == FTJIT_E_NOT_ATTACHED) {
      f.attached = false;
    } else {
      failed += (failed.empty() ? "" : "; ") + f.label + ": detach failed (" + ftjit_status_name(st) +
                "): " + ftjit_last_error();
    }
  }
  if (!failed.empty()) return make_error(FTJIT_E_INTERNAL, failed);
  return {};
}

}  // namespace ftjit::plugins::detail
