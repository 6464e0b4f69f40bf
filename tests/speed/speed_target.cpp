// SPDX-License-Identifier: MIT
// ftjit_speed_target: the program of issue 16's attach-time goal, a
// 7-thread C++ program with 19 patchable functions (speed_workload.cpp,
// the only file built with patchable entries). Six workers call them in a
// loop, the main thread waits; it prints "ready PID" once every worker
// runs, and exits when stdin closes (or after SECONDS, if given).
//
//   ftjit_speed_target [SECONDS]
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "tests/speed/speed_workload.h"

namespace {

constexpr unsigned kWorkers = 6;  // and the main thread: 7
std::atomic<bool> g_stop{false};
std::atomic<unsigned> g_running{0};
std::atomic<uint64_t> g_sink{0};

void worker(unsigned id) {
  g_running.fetch_add(1);
  uint64_t sum = 0;
  for (uint64_t round = 0; !g_stop.load(std::memory_order_relaxed); ++round) {
    sum += speed::work_unit(id, round);
    // Busy enough to be traced all the time, idle enough that 6 of them
    // leave a 2-core machine to the tool being timed.
    if (round % 64 == 0) usleep(1000);
  }
  g_sink.fetch_add(sum);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 0;
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < kWorkers; ++i) threads.emplace_back(worker, i);
  while (g_running.load() != kWorkers) usleep(100);
  std::printf("ready %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  if (seconds > 0) {
    usleep(static_cast<useconds_t>(seconds * 1e6));
  } else {
    char buf[256];
    while (read(0, buf, sizeof buf) > 0) {
    }
  }
  g_stop.store(true);
  for (auto& t : threads) t.join();
  return 0;
}
