// SPDX-License-Identifier: MIT
// Where the time of `ftjit attach` / `ftjit run` went, for -v: each phase
// ends where the next begins, and the agent's own breakdown of the attach
// request is shown under it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace ftjit::cli {

class PhaseClock {
 public:
  // Ends the phase that ran since the previous end() (or construction).
  void end(std::string name) {
    const auto now = std::chrono::steady_clock::now();
    phases_.push_back({std::move(name), ms(last_, now), false});
    last_ = now;
  }

  // A part of the phase that ended last, measured elsewhere (the agent).
  void detail(std::string name, uint64_t micros) {
    phases_.push_back({std::move(name), static_cast<double>(micros) / 1000.0, true});
  }

  double total_ms() const { return ms(first_, last_); }

  // One line per phase, "COMMAND: phase NAME: X.X ms", parts indented
  // under theirs, then the total.
  void print(const char* command) const {
    for (const Phase& p : phases_) {
      std::fprintf(stderr, "%s: %s%s: %.1f ms\n", command, p.detail ? "    agent: " : "phase ",
                   p.name.c_str(), p.ms);
    }
    std::fprintf(stderr, "%s: phases total: %.1f ms\n", command, total_ms());
  }

 private:
  struct Phase {
    std::string name;
    double ms;
    bool detail;
  };
  static double ms(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  }

  std::chrono::steady_clock::time_point first_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_ = first_;
  std::vector<Phase> phases_;
};

}  // namespace ftjit::cli
