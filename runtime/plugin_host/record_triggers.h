// SPDX-License-Identifier: MIT
// A session's triggers (core/record_control.h): the recording word the
// record gates read; the functions' trigger ops that set it or ask for a
// dump (record_gate.h); the signal handler that does the same; and the
// trigger thread, which starts and stops recording at their times and
// dumps the flight recorder when asked (never on the traced thread: a
// dump waits for the threads to leave their callbacks).
#pragma once

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/record_control.h"
#include "ftjit/ftjit.h"
#include "runtime/plugin_host/record_gate.h"

namespace ftjit::plugins::detail {

class RecordTriggers {
 public:
  // Nothing attached yet: the word reads 0 when a start trigger is to
  // come, else 1. `dump` writes the flight recorder out (a flush).
  RecordTriggers(ftjit_engine* engine, const RecordControl& control, uint32_t ops_flags,
                 ftjit_strategy strategy);
  ~RecordTriggers();  // stop()
  RecordTriggers(const RecordTriggers&) = delete;
  RecordTriggers& operator=(const RecordTriggers&) = delete;

  const std::atomic<uint32_t>* recording() const { return &recording_; }
  // Dumps asked for and done so far.
  uint64_t dumps() const { return dumps_done_.load(std::memory_order_relaxed); }

  // Attaches each function trigger (before the plugins attach), installs
  // the signal's handler and starts the trigger thread. Fails naming the
  // trigger: no traced function matches it, the engine refused, the
  // signal is taken by another session or cannot be caught. `freeze`:
  // the flight recorders' `dumping` words, set at a dump trigger and
  // cleared once its dump is written (record_gate.h, DumpFreeze).
  Status start(std::function<Status()> dump, DumpFreeze freeze = {});
  // Joins the thread, restores the signal's handler, detaches the
  // triggers; idempotent.
  Status stop();

 private:
  struct Function {
    TriggerOps t;
    std::string label;  // "--start-at f@return"
    std::string glob;
    bool attached = false;
  };
  void run();
  static void on_signal(int);

  ftjit_engine* engine_;
  RecordControl control_;
  std::atomic<uint32_t> recording_{1};
  // Bumped by a dump trigger (a futex word the thread sleeps on); the
  // thread's count of those it served.
  std::atomic<uint32_t> dump_asks_{0};
  std::atomic<uint64_t> dumps_done_{0};
  std::atomic<bool> stopping_{false};
  std::function<Status()> dump_;
  DumpFreeze freeze_;  // set by start(), before any trigger can fire
  std::vector<std::unique_ptr<Function>> functions_;
  std::thread thread_;
  bool signal_installed_ = false;
  struct sigaction old_action_ {};
};

}  // namespace ftjit::plugins::detail
