// SPDX-License-Identifier: MIT
// The bundled demo program's work: a small multi-threaded "service" that
// parses, hashes and sorts records. Built with -fpatchable-function-entry
// so ftjit can trace every function here.
#include "workload.h"

#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static uint32_t demo_hash_bytes(const char* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ (uint8_t)p[i]) * 16777619u;
  return h;
}

__attribute__((noinline)) static int demo_parse_record(uint32_t seed, struct demo_record* out) {
  out->key = seed * 2654435761u;
  out->value = (int)(seed % 1000);
  return out->value % 7 != 0;
}

__attribute__((noinline)) static int demo_compare(const void* a, const void* b) {
  const struct demo_record* x = a;
  const struct demo_record* y = b;
  return (x->key > y->key) - (x->key < y->key);
}

__attribute__((noinline)) static void demo_sort_batch(struct demo_record* r, size_t n) {
  qsort(r, n, sizeof *r, demo_compare);
}

__attribute__((noinline)) static uint64_t demo_checksum(const struct demo_record* r, size_t n) {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum += demo_hash_bytes((const char*)&r[i], sizeof r[i]);
  return sum;
}

uint64_t demo_process_batch(uint32_t seed, size_t n) {
  struct demo_record* r = calloc(n, sizeof *r);
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) kept += demo_parse_record(seed + (uint32_t)i, &r[kept]);
  demo_sort_batch(r, kept);
  uint64_t sum = demo_checksum(r, kept);
  free(r);
  return sum;
}
