// SPDX-License-Identifier: MIT
// Looking for the signal frames a thread runs on top of, from a signal
// handler on that thread: the words of its interrupted stack, read with
// process_vm_readv so that the end of a stack never faults. Shared by the
// ISAs' outer_signal_frame_pc_matches (runtime/arch/arch.h), which know
// what word marks a frame and where its pc is.
#pragma once

#include <sys/uio.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace ftjit::arch::detail {

// Reads n bytes of this process at addr: n, or less where it is unmapped.
inline ssize_t read_own_memory(uint64_t addr, void* out, size_t n) {
  iovec local{out, n};
  iovec remote{reinterpret_cast<void*>(addr), n};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
}

// Calls at_word(address) for each 8-byte word equal to `marker` in the
// first 64 KiB from `base` (8-aligned) up, until one returns true: true
// then, false once the stack (or the 64 KiB) ends.
template <typename AtWord>
inline bool any_marked_stack_word(uint64_t base, uint64_t marker, AtWord&& at_word) {
  constexpr size_t kScanBytes = 64 * 1024;
  uint64_t words[256];
  for (size_t done = 0; done < kScanBytes; done += sizeof words) {
    const ssize_t got = read_own_memory(base + done, words, sizeof words);
    if (got <= 0) return false;
    for (size_t i = 0; i < static_cast<size_t>(got) / 8; ++i) {
      if (words[i] == marker && at_word(base + done + i * 8)) return true;
    }
    if (static_cast<size_t>(got) < sizeof words) return false;
  }
  return false;
}

}  // namespace ftjit::arch::detail
