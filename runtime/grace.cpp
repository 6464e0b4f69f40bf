// SPDX-License-Identifier: MIT
// Grace periods over the per-thread trampoline depth counters.
#include "runtime/grace.h"

#include <time.h>

#include <chrono>
#include <unordered_set>
#include <vector>

#include "runtime/dispatch.h"
#include "runtime/thread_control.h"

namespace ftjit {

Status wait_for_grace_period(const std::function<bool(uint64_t pc)>& in_trampoline_code,
                             int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unordered_set<pid_t> done;
  // Outer signal frames are found by their look in stack memory, so a
  // stale copy above a thread's sp (it went deeper since) matches as well
  // and stays: a hit is waited for this long after the first, then taken
  // for such a copy. A live handler over a trampoline ends long before
  // (the hazards' SIGPROF handler: well under a millisecond under TCG).
  // Only threads that may be running a handler of the program's are asked
  // (thread_control.cpp): the others cost no stack reading, and show no
  // stale copies.
  constexpr auto kOuterHitPatience = std::chrono::milliseconds(500);
  std::chrono::steady_clock::time_point first_outer_hit{};
  bool outer_hits_stale = false;
  bool outer_hit_seen = false;
  struct Waiting {
    pid_t tid;
    const TrampolineCounts* counts;
    uint64_t entries;  // at the snapshot
    uint64_t own;      // entries open for good (mark_own_thread): 1 or 0
  };
  for (;;) {
    auto snap = snapshot_threads(outer_hits_stale ? nullptr : &in_trampoline_code);
    if (!snap) return snap.take_error();
    std::vector<Waiting> waiting;
    bool need_resnapshot = false;
    for (const ThreadSnapshot& t : *snap) {
      if (!t.responded || done.count(t.tid)) continue;
      if (t.outer_hit) {
        // A signal handler interrupted it inside a trampoline (before the
        // entry count, or anywhere in an inline one, which counts none):
        // it returns there, whatever its counts say now.
        need_resnapshot = true;
        outer_hit_seen = true;
        const auto now = std::chrono::steady_clock::now();
        if (first_outer_hit == std::chrono::steady_clock::time_point{}) first_outer_hit = now;
        if (now - first_outer_hit > kOuterHitPatience) outer_hits_stale = true;
      } else if (inside_beyond_own_entry(t)) {
        waiting.push_back({t.tid, t.counts_addr, t.entries, t.own ? 1u : 0u});
      } else if (in_trampoline_code(t.pc)) {
        need_resnapshot = true;  // one instruction from in or out: look again
      } else {
        done.insert(t.tid);
      }
    }
    // A busy thread is through once its exits reach its entries at the
    // snapshot (its one outermost frame, and all nested in it, returned),
    // or once it is seen with no entry open (entries read first: while a
    // frame stays open, entries > exits whenever they are read).
    for (int spin = 0; !waiting.empty(); ++spin) {
      for (size_t i = 0; i < waiting.size();) {
        uint64_t entries = 0, exits = 0;
        if (!read_remote_word(&waiting[i].counts->entries, &entries) ||
            !read_remote_word(&waiting[i].counts->exits, &exits) ||
            exits >= waiting[i].entries - waiting[i].own || entries - exits <= waiting[i].own) {
          done.insert(waiting[i].tid);
          waiting[i] = waiting.back();
          waiting.pop_back();
        } else {
          ++i;
        }
      }
      if (waiting.empty()) break;
      if (std::chrono::steady_clock::now() > deadline) {
        return make_error(FTJIT_E_SYSTEM,
                          "grace period timed out: thread " + std::to_string(waiting[0].tid) +
                              " stays inside a tracer callback");
      }
      struct timespec ts{0, spin < 100 ? 10'000 : 1'000'000};
      nanosleep(&ts, nullptr);
    }
    if (!need_resnapshot) {
      tsan_after_grace();
      return {};
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return make_error(FTJIT_E_SYSTEM, "grace period timed out: a thread stays on a trampoline");
    }
    // A handler returns in its own time: look again less often than for a
    // thread one instruction from a count.
    struct timespec ts{0, outer_hit_seen ? 1'000'000 : 50'000};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace ftjit
