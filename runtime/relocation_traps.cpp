// SPDX-License-Identifier: MIT
#include "runtime/relocation_traps.h"

#include <atomic>

namespace ftjit {
namespace {

// A fixed table a signal handler reads without locks: a slot's `to` is
// published before its pc and cleared after it. 4096 traps cover ~1000
// entries (x86-64 leaves 0 to 10 bytes after its jmp, rarely more than 3).
struct TrapSlot {
  std::atomic<uint64_t> pc{0};
  std::atomic<uint64_t> to{0};
};
constexpr int kSlots = 4096;
TrapSlot g_slots[kSlots];

}  // namespace

bool add_relocation_trap(uint64_t trap_pc, uint64_t to) {
  for (TrapSlot& s : g_slots) {
    if (s.pc.load(std::memory_order_relaxed) != 0) continue;
    s.to.store(to, std::memory_order_relaxed);
    s.pc.store(trap_pc, std::memory_order_release);
    return true;
  }
  return false;
}

void remove_relocation_trap(uint64_t trap_pc) {
  for (TrapSlot& s : g_slots) {
    if (s.pc.load(std::memory_order_relaxed) == trap_pc) s.pc.store(0, std::memory_order_release);
  }
}

uint64_t relocation_trap_target(uint64_t trap_pc) {
  for (const TrapSlot& s : g_slots) {
    if (s.pc.load(std::memory_order_acquire) == trap_pc) return s.to.load(std::memory_order_relaxed);
  }
  return 0;
}

}  // namespace ftjit
