// SPDX-License-Identifier: MIT
#include "runtime/plugin_host/record_triggers.h"

#include <chrono>
#include <cstddef>

namespace ftjit::plugins::detail {

static_assert(offsetof(TriggerOps, ops) == 0);

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
    f->t.value = trigger.action == RecordTrigger::Action::kStart ? 1 : 0;
    f->t.recording = &recording_;
    functions_.push_back(std::move(f));
  }
}

RecordTriggers::~RecordTriggers() { (void)stop(); }

Status RecordTriggers::start() {
  for (auto& f : functions_) {
    const char* include[] = {f->glob.c_str()};
    const ftjit_filter filter{include, 1, nullptr, 0};
    const ftjit_status st = ftjit_attach(engine_, &f->t.ops, &filter);
    if (st == FTJIT_E_NO_MATCH) {
      return make_error(st, f->label + ": no patchable function matches '" + f->glob + "'");
    }
    if (st != FTJIT_OK) return make_error(st, f->label + ": " + ftjit_last_error());
    f->attached = true;
  }
  if (control_.start_after_ns != 0 || control_.stop_after_ns != 0) {
    timer_ = std::thread([this] { run_timer(); });
  }
  return {};
}

void RecordTriggers::run_timer() {
  using clock = std::chrono::steady_clock;
  const clock::time_point t0 = clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  struct Step {
    uint64_t at_ns;
    uint32_t value;
  };
  Step steps[2] = {{control_.start_after_ns, 1}, {control_.stop_after_ns, 0}};
  for (const Step& step : steps) {
    if (step.at_ns == 0) continue;
    const auto when = t0 + std::chrono::nanoseconds(step.at_ns);
    if (cv_.wait_until(lock, when, [this] { return stopping_; })) return;
    recording_.store(step.value, std::memory_order_relaxed);
  }
}

Status RecordTriggers::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (timer_.joinable()) timer_.join();
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
