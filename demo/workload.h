// SPDX-License-Identifier: MIT
// The demo workload's entry point.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct demo_record {
  uint32_t key;
  int value;
};

// Parses, sorts and checksums `n` generated records; deterministic in seed.
uint64_t demo_process_batch(uint32_t seed, size_t n);

#ifdef __cplusplus
}
#endif
