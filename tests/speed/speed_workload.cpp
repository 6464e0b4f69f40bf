// SPDX-License-Identifier: MIT
// The traced part of ftjit_speed_target: 19 functions, the only code of
// the program built with -fpatchable-function-entry (so the count is
// exact). Ordinary C++: a class, a template, std::string, exceptions.
#include "tests/speed/speed_workload.h"

#include <stdexcept>
#include <string>

namespace speed {

#define SPEED_NOINLINE __attribute__((noinline))

SPEED_NOINLINE uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  return x ^ (x >> 29);
}
SPEED_NOINLINE uint64_t fold(uint64_t a, uint64_t b) { return mix(a) + mix(b); }
SPEED_NOINLINE uint64_t digit_sum(uint64_t x) {
  uint64_t s = 0;
  for (; x != 0; x /= 10) s += x % 10;
  return s;
}
SPEED_NOINLINE std::string render(uint64_t x) { return std::to_string(digit_sum(x)); }
SPEED_NOINLINE size_t measure(const std::string& s) { return s.size(); }
SPEED_NOINLINE uint64_t checked(uint64_t x) {
  if (x % 97 == 0) throw std::runtime_error("divisible");
  return x;
}
SPEED_NOINLINE uint64_t guarded(uint64_t x) {
  try {
    return checked(x);
  } catch (const std::exception&) {
    return 1;
  }
}

Accumulator::Accumulator(uint64_t seed) : total_(seed) {}
SPEED_NOINLINE void Accumulator::add(uint64_t x) { total_ = fold(total_, x); }
SPEED_NOINLINE void Accumulator::add_text(const std::string& s) { total_ += measure(s); }
SPEED_NOINLINE uint64_t Accumulator::total() const { return total_; }

template <typename T>
SPEED_NOINLINE T scaled(T x, T by) {
  return x * by;
}

SPEED_NOINLINE uint64_t stage_a(uint64_t x) { return scaled<uint64_t>(mix(x), 3); }
SPEED_NOINLINE uint64_t stage_b(uint64_t x) { return scaled<uint32_t>(static_cast<uint32_t>(x), 5); }
SPEED_NOINLINE uint64_t stage_c(uint64_t x) { return guarded(stage_a(x)) + stage_b(x); }
SPEED_NOINLINE uint64_t stage_d(uint64_t x) { return x % 7 == 0 ? mix(x) : x; }
SPEED_NOINLINE uint64_t pipeline(uint64_t x) { return stage_d(stage_c(stage_b(stage_a(x)))); }

SPEED_NOINLINE uint64_t work_unit(unsigned worker, uint64_t round) {
  Accumulator acc(worker);
  for (uint64_t i = 0; i < 16; ++i) {
    acc.add(pipeline(round * 16 + i));
    if (i % 4 == 0) acc.add_text(render(acc.total()));
  }
  return acc.total();
}

}  // namespace speed
