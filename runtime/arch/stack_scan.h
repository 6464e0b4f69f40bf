// SPDX-License-Identifier: MIT
// Looking for the signal frames a thread runs on top of, from a signal
// handler on that thread: the words of its interrupted stack, read with
// process_vm_readv (or through a pipe) so that the end of a stack never
// faults. Shared by the
// ISAs' outer_signal_frame_pc_matches (runtime/arch/arch.h), which know
// what word marks a frame and where its pc is.
#pragma once

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace ftjit::arch::detail {

// The same through a pipe, which the kernel (or qemu-user, checking the
// guest address) copies without faulting: where process_vm_readv is
// missing (qemu-user: ENOSYS) or refused (seccomp). A range that runs
// into unmapped memory is read again up to the end of its first page.
inline ssize_t read_own_memory_through_pipe(uint64_t addr, void* out, size_t n) {
  auto once = [&](size_t len) -> ssize_t {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return -1;
    const ssize_t w = write(p[1], reinterpret_cast<const void*>(addr), len);
    const ssize_t r = w > 0 ? read(p[0], out, static_cast<size_t>(w)) : -1;
    close(p[0]);
    close(p[1]);
    return r;
  };
  const ssize_t got = once(n);
  const size_t to_page_end = 4096 - (addr & 4095);
  if (got < 0 && to_page_end < n) return once(to_page_end);
  return got;
}

// Reads n bytes of this process at addr: n, or less where it is unmapped.
inline ssize_t read_own_memory(uint64_t addr, void* out, size_t n) {
  static std::atomic<bool> vm_readv_missing{false};
  if (!vm_readv_missing.load(std::memory_order_relaxed)) {
    iovec local{out, n};
    iovec remote{reinterpret_cast<void*>(addr), n};
    const ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got >= 0 || (errno != ENOSYS && errno != EPERM)) return got;
    vm_readv_missing.store(true, std::memory_order_relaxed);
  }
  return read_own_memory_through_pipe(addr, out, n);
}

// Calls at_word(address, value) for each 8-byte word in the first 64 KiB
// from `base` (8-aligned) up, until one returns true: true then, false
// once the stack (or the 64 KiB) ends.
template <typename AtWord>
inline bool any_stack_word(uint64_t base, AtWord&& at_word) {
  constexpr size_t kScanBytes = 64 * 1024;
  uint64_t words[256];
  for (size_t done = 0; done < kScanBytes; done += sizeof words) {
    const ssize_t got = read_own_memory(base + done, words, sizeof words);
    if (got <= 0) return false;
    for (size_t i = 0; i < static_cast<size_t>(got) / 8; ++i) {
      if (at_word(base + done + i * 8, words[i])) return true;
    }
    if (static_cast<size_t>(got) < sizeof words) return false;
  }
  return false;
}

// The same for the words equal to `marker`: at_word(address).
template <typename AtWord>
inline bool any_marked_stack_word(uint64_t base, uint64_t marker, AtWord&& at_word) {
  return any_stack_word(base, [&](uint64_t at, uint64_t value) { return value == marker && at_word(at); });
}

}  // namespace ftjit::arch::detail
