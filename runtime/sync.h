// SPDX-License-Identifier: MIT
// "sync": the userspace IPI. After it returns, every thread of the process
// executes a core-serialising instruction before it runs user code again,
// so it sees every code byte written before the sync.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/error.h"

namespace ftjit {

class CoreSync {
 public:
  // Registers for membarrier SYNC_CORE if the kernel has it; otherwise
  // syncs fall back to interrupting every thread with the control signal.
  CoreSync();

  // One sync of every thread. Counted.
  Status sync();

  bool uses_membarrier() const { return membarrier_; }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  uint64_t fallbacks() const { return fallbacks_.load(std::memory_order_relaxed); }

 private:
  bool membarrier_ = false;
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> fallbacks_{0};
};

}  // namespace ftjit
