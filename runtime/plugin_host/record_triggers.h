// SPDX-License-Identifier: MIT
// A session's triggers (record_control.h): the recording word the record
// gates read, the functions' trigger ops that set it (record_gate.h), and
// a timer thread for --start-after and --stop-after.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "ftjit/ftjit.h"
#include "core/record_control.h"
#include "runtime/plugin_host/record_gate.h"

namespace ftjit::plugins::detail {

class RecordTriggers {
 public:
  // Nothing attached yet: the word reads 0 when a start trigger is to
  // come, else 1.
  RecordTriggers(ftjit_engine* engine, const RecordControl& control, uint32_t ops_flags,
                 ftjit_strategy strategy);
  ~RecordTriggers();  // stop()
  RecordTriggers(const RecordTriggers&) = delete;
  RecordTriggers& operator=(const RecordTriggers&) = delete;

  const std::atomic<uint32_t>* recording() const { return &recording_; }

  // Attaches each function trigger (before the plugins attach) and starts
  // the timer. Fails naming the trigger: no traced function matches it,
  // or the engine refused.
  Status start();
  // Joins the timer, detaches the triggers; idempotent.
  Status stop();

 private:
  struct Function {
    TriggerOps t;
    std::string label;  // "--start-at f@return"
    std::string glob;
    bool attached = false;
  };
  void run_timer();

  ftjit_engine* engine_;
  RecordControl control_;
  std::atomic<uint32_t> recording_{1};
  std::vector<std::unique_ptr<Function>> functions_;
  std::thread timer_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace ftjit::plugins::detail
