// SPDX-License-Identifier: MIT
// The traps after a relocated entry's branch. One branch replaces the first
// instructions of a function; the bytes of the last one that the branch
// does not cover are filled with traps (x86-64 int3):
//
//   patch_at [ jmp stub (5) ][ cc cc cc ][ body ...
//             `-- i1 --'`-- i2 ------'
//
// The proof (core/relocation_plan.h) found no branch into them; one it
// could not see (computed at run time) traps there instead of running the
// tail of an instruction, and the SIGTRAP handler (runtime/patcher.cpp)
// sends the thread to the same instruction in the copy.
#pragma once

#include <cstdint>

namespace ftjit {

// Redirects a trap that reports pc `trap_pc` (the kernel's pc after the
// trap instruction) to `to`. False when the table is full (the trap then
// stays unredirected: what a missed branch into the bytes would have hit
// anyway). Called under the engine lock.
bool add_relocation_trap(uint64_t trap_pc, uint64_t to);
void remove_relocation_trap(uint64_t trap_pc);

// Where a thread trapped with pc `trap_pc` goes, or 0 if it is not a
// relocated entry's trap. Async-signal-safe.
uint64_t relocation_trap_target(uint64_t trap_pc);

}  // namespace ftjit
