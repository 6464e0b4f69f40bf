// SPDX-License-Identifier: MIT
// BulkPrefaultScope: a helper thread that faults in the large bulk arrays
// (core/bulk_memory.h) while the thread that made them fills them.
//
// Why: fresh memory is paid page by page on first touch: the kernel
// zeroes it and, in a virtual machine, the host backs it first. On the
// 2-core VM this was measured on, 160 MB (what discovering a million
// sites builds) took 650-730 ms to fill where the filling itself took
// about 90; with a second thread populating the same range ahead of the
// filler (MADV_POPULATE_WRITE), 325-450. The other core does the
// kernel's share while the first parses.
//
// Only within a scope (one discovery), only for arrays of kPrefaultBytes
// and more, and only once start() was called where creating a thread is
// safe (no loader lock held). The helper never touches an array's
// contents (populating only maps zero pages), and an array freed while it
// is queued or being populated is withdrawn first (bulk_free waits for
// the helper to leave it), so no range is populated after it is unmapped.
// Outside a scope, or without a helper, arrays fault in as they are
// filled, as before.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ftjit {

inline constexpr size_t kPrefaultBytes = size_t{4} << 20;

class BulkPrefaultScope {
 public:
  BulkPrefaultScope();
  // Stops the helper (what it has not populated is left to page faults)
  // and joins it: no helper outlives the outermost scope.
  ~BulkPrefaultScope();
  BulkPrefaultScope(const BulkPrefaultScope&) = delete;
  BulkPrefaultScope& operator=(const BulkPrefaultScope&) = delete;
};

// Starts the helper if a scope is open and none runs; nothing if it cannot
// (a failed thread creation only means no prefaulting).
void bulk_prefault_start();

// For bulk_memory.cpp: a new mapping, queued for the helper if one runs;
// and one about to be unmapped, withdrawn (waits while the helper is in it).
void bulk_prefault_offer(void* start, size_t bytes);
void bulk_prefault_withdraw(void* start);

}  // namespace ftjit
