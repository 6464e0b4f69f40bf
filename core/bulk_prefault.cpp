// SPDX-License-Identifier: MIT
// The prefault helper: one thread, a queue of mappings, populated 2 MiB at a time.
#include "core/bulk_prefault.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

namespace ftjit {
namespace {

// A step of the helper: one huge page, so that a withdrawal waits for at
// most one.
constexpr size_t kStep = size_t{2} << 20;

struct Region {
  uint8_t* start;
  size_t bytes;
};

struct Prefault {
  std::mutex mu;
  std::condition_variable cv;
  int scopes = 0;
  bool stop = false;
  std::thread helper;
  std::deque<Region> queue;
  const uint8_t* current = nullptr;  // what the helper populates now
  bool withdrawn = false;            // current is to be left
  Prefault* previous = nullptr;      // a forked child's parent state, kept reachable
};

Prefault* g_state = nullptr;

Prefault& state() {
  static const bool ready = [] {
    g_state = new Prefault();  // never destroyed: used until exit
    // A child of fork has no helper (only the forking thread is copied),
    // and the lock may have been held: it starts from a new state. The
    // old one is left as it would be at exit, but linked from the new
    // one: the child still holds it, and a leak checker must see that.
    ::pthread_atfork(nullptr, nullptr, [] {
      auto* fresh = new Prefault();
      fresh->previous = g_state;
      g_state = fresh;
    });
    return true;
  }();
  (void)ready;
  return *g_state;
}

void populate() {
  Prefault& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    s.cv.wait(lock, [&] { return s.stop || !s.queue.empty(); });
    if (s.stop) break;
    const Region r = s.queue.front();
    s.queue.pop_front();
    s.current = r.start;
    s.withdrawn = false;
    for (size_t done = 0; done < r.bytes && !s.withdrawn && !s.stop; done += kStep) {
      lock.unlock();
      // Errors (an old kernel's EINVAL, EINTR) only mean page faults later.
      (void)::madvise(r.start + done, std::min(kStep, r.bytes - done), MADV_POPULATE_WRITE);
      lock.lock();
    }
    s.current = nullptr;
    s.cv.notify_all();
  }
}

}  // namespace

BulkPrefaultScope::BulkPrefaultScope() {
  Prefault& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.scopes;
}

BulkPrefaultScope::~BulkPrefaultScope() {
  Prefault& s = state();
  std::thread helper;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (--s.scopes != 0 || !s.helper.joinable()) return;
    s.stop = true;
    s.queue.clear();
    helper = std::move(s.helper);
    s.cv.notify_all();
  }
  helper.join();
  std::lock_guard<std::mutex> lock(s.mu);
  s.stop = false;
}

void bulk_prefault_start() {
  Prefault& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.scopes == 0 || s.helper.joinable()) return;
  try {
    s.helper = std::thread(populate);
  } catch (const std::system_error&) {
    // No thread: the arrays fault in as they are filled.
  }
}

void bulk_prefault_offer(void* start, size_t bytes) {
  if (bytes < kPrefaultBytes) return;
  Prefault& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.helper.joinable() || s.stop) return;
  s.queue.push_back({static_cast<uint8_t*>(start), bytes});
  s.cv.notify_all();
}

void bulk_prefault_withdraw(void* start) {
  Prefault& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  std::erase_if(s.queue, [&](const Region& r) { return r.start == start; });
  if (s.current != start) return;
  s.withdrawn = true;
  s.cv.wait(lock, [&] { return s.current != start; });
}

}  // namespace ftjit
