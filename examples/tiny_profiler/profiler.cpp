// SPDX-License-Identifier: MIT
// A tiny profiler embedding ftjit: traces its own work_* functions with an
// entry and an exit callback, and prints calls and inclusive time per
// function. Its results must not change when traced.
#include <ftjit/ftjit.hpp>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

extern "C" {
int work_fib(int n);
int work_loop(int n);
}

namespace {

struct Stat {
  long calls = 0;
  std::chrono::nanoseconds time{0};
};

int workload() { return work_fib(15) + work_loop(1000); }

}  // namespace

int main() {
  const int untraced = workload();
  std::string error;
  auto session = ftjit::Session::open(&error);
  if (!session) {
    std::fprintf(stderr, "tiny_profiler: %s\n", error.c_str());
    return 1;
  }
  // One thread calls here, so a plain stack of start times does.
  std::map<uint64_t, Stat> stats;
  std::vector<std::chrono::steady_clock::time_point> started;
  auto probe = session->attach(
      {{"work_*"}, {}},
      [&](const ftjit::Call& c) {
        ++stats[c.ip].calls;
        started.push_back(std::chrono::steady_clock::now());
      },
      [&](const ftjit::Return& r) {
        stats[r.ip].time += std::chrono::steady_clock::now() - started.back();
        started.pop_back();
      },
      FTJIT_STRATEGY_AUTO, &error);
  if (!probe) {
    std::fprintf(stderr, "tiny_profiler: %s\n", error.c_str());
    return 1;
  }
  const int traced = workload();
  probe.reset();  // detach
  for (const auto& [ip, s] : stats) {
    std::printf("%-10s %6ld calls %10lld ns\n", session->name_of(ip).c_str(), s.calls,
                static_cast<long long>(s.time.count()));
  }
  std::printf("result %d %s\n", traced, traced == untraced ? "unchanged" : "CHANGED");
  return traced == untraced ? 0 : 1;
}
