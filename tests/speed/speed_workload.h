// SPDX-License-Identifier: MIT
// The 19 patchable functions of ftjit_speed_target (speed_workload.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace speed {

class Accumulator {
 public:
  explicit Accumulator(uint64_t seed);
  void add(uint64_t x);
  void add_text(const std::string& s);
  uint64_t total() const;

 private:
  uint64_t total_;
};

// One unit of a worker's work: calls every traced function.
uint64_t work_unit(unsigned worker, uint64_t round);

}  // namespace speed
