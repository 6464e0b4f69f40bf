// SPDX-License-Identifier: MIT
// The writer thread: the one consumer of every thread's event ring. It
// hands events to the plugins' consume() in one of three ways, by the
// session's buffer policy:
//
//   stream    kDrop, or kBlock without a spool: consume() as events
//             come, every 2 ms or when a ring is half full.
//   spool     kBlock: raw ring bytes appended to an unlinked spool file as
//             events come (one write(2) per ring, no formatting: it keeps
//             up with any one core), consume() over the spool at flush and
//             stop. A full ring makes its thread wait for this.
//   recorder  kOverwrite: nothing while the program runs; at flush and
//             stop, the last ring-full of each thread.
//
// Per thread, consume() always sees events in commit order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "runtime/plugin_host/host_internal.h"

namespace ftjit::plugins::detail {

class Writer {
 public:
  // Starts the thread. `engine` serves the recorder's flush (threads are
  // waited out of their callbacks before their rings are read).
  Writer(std::vector<Instance*> instances, BufferPolicy policy, bool spool, ftjit_engine* engine);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // What every instance's threads bump to wake the writer early; null for
  // the recorder, which nobody wakes.
  std::atomic<uint32_t>* wake_word() { return mode_ == Mode::kRecorder ? nullptr : &wake_; }

  // Consumes what the rings (and the spool) hold now, while tracing goes
  // on. From the control thread.
  Status flush();

  // Returns once every event committed before the call has been consumed.
  // Tracing must have stopped (detached): the last pass reads every ring.
  void stop();

  // "stream", "spool" or "recorder": what this writer does (for -v).
  const char* mode_name() const;

 private:
  enum class Mode { kStream, kSpool, kRecorder };

  void run();
  void pass(bool final);
  void stream_block(Instance& inst, ThreadBlock* b);
  void spool_block(uint32_t inst_index, ThreadBlock* b);
  void record_block(Instance& inst, ThreadBlock* b);
  void replay_spool();
  void stop_spooling(const char* why);
  void after_drain(ThreadBlock* b);

  std::vector<Instance*> instances_;
  std::atomic<Mode> mode_{Mode::kStream};  // spool may fall back to stream
  ftjit_engine* engine_;

  // Raw events of the spool mode: chunks of {header, events}.
  int spool_fd_ = -1;
  uint64_t spool_bytes_ = 0;

  std::atomic<uint32_t> wake_{0};
  std::atomic<bool> stop_{false};
  // flush(): requests and completions, under mu_.
  std::mutex mu_;
  std::condition_variable done_cv_;
  uint64_t flush_asked_ = 0;
  uint64_t flush_done_ = 0;
  std::thread thread_;
};

}  // namespace ftjit::plugins::detail
