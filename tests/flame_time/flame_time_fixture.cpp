// SPDX-License-Identifier: MIT
// What `flame`'s time weights are checked against (flame_time_test.py):
// functions whose own time is known, because each sleeps a known time and
// does next to nothing else, and an exception thrown through two traced
// frames and caught in their caller.
//
//   main
//   `- work                      5 ms of its own (in the catch)
//      |- leaf_a  (twice)        30 ms each
//      |- mid                    10 ms of its own
//      |  `- leaf_b  (twice)     20 ms each
//      `- thrower                nothing of its own
//         `- deep_throw          15 ms, then throws through thrower
//
// With the argument `slower` (the second run `ftjit diff` compares):
// leaf_b sleeps twice as long, and work calls leaf_a once more.
#include <string.h>
#include <time.h>

#include <stdexcept>

namespace {

bool g_slower = false;

// Inlined, so that it is no traced function of its own.
[[gnu::always_inline]] inline void sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

}  // namespace

extern "C" {

[[gnu::noinline]] void leaf_a() { sleep_ms(30); }

[[gnu::noinline]] void leaf_b() { sleep_ms(g_slower ? 40 : 20); }

[[gnu::noinline]] void mid() {
  sleep_ms(10);
  leaf_b();
  leaf_b();
}

[[gnu::noinline]] void deep_throw() {
  sleep_ms(15);
  throw std::runtime_error("thrown through thrower");
}

[[gnu::noinline]] void thrower() {
  deep_throw();
  asm volatile("" ::: "memory");  // no tail call: thrower keeps its frame
}

[[gnu::noinline]] void work() {
  leaf_a();
  mid();
  try {
    thrower();
  } catch (const std::runtime_error &) {
    sleep_ms(5);
  }
  leaf_a();  // after the unwind: under work again, not under thrower
  if (g_slower) leaf_a();
}

}  // extern "C"

int main(int argc, char **argv) {
  g_slower = argc > 1 && strcmp(argv[1], "slower") == 0;
  work();
  return 0;
}
