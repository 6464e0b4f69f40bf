// SPDX-License-Identifier: MIT
// What an injection needs to know of a target's C library and loader,
// read from their files and from the target's memory, never by running
// anything in it:
//   - the loader entry points (dlopen, dlclose);
//   - the signal return trampoline, the "code already in the process" an
//     injected call returns through (thread_call.cpp): glibc's __restore_rt
//     (`mov $15,%rax; syscall`) on x86-64, the vDSO's __kernel_rt_sigreturn
//     (`mov x8, #139; svc #0`) on arm64;
//   - where a thread's errno and dlerror state live (TLS offsets found
//     through __errno_location's own instructions);
//   - the code that holds the loader's, malloc's or the unwinder's locks,
//     so that a thread stopped inside it is not asked to run dlopen;
//   - the loader's list of loaded objects (_r_debug), whose entries are
//     the handles dlopen returns.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/inject/ptrace_inject.h"
#include "core/error.h"

namespace ftjit::inject::detail {

struct AddressRange {
  uint64_t lo = 0;
  uint64_t hi = 0;  // exclusive
  std::string what;  // for messages: "ld-linux-x86-64.so.2", "malloc", ...
  bool contains(uint64_t a) const { return a >= lo && a < hi; }
};

struct TargetLibc {
  uint64_t dlopen = 0;
  uint64_t dlclose = 0;
  uint64_t restore_rt = 0;  // the signal return trampoline (injector_isa.h: restore_rt_code)
  // The address of errno and of glibc's dlerror state, as offsets from the
  // thread pointer; nullopt where this libc does not say.
  std::optional<int64_t> errno_tpoff;
  std::optional<int64_t> dlerror_result_tpoff;
  uint64_t r_debug = 0;  // the loader's struct r_debug, 0 if not found
  // Code a thread must not be inside (or called from) when it is made to
  // run dlopen/dlclose: the loader, and the libc entry points that take the
  // locks dlopen and a library constructor take again.
  std::vector<AddressRange> lock_holders;
  // fork and _Fork (also lock holders): a thread inside them may call a
  // fork handler whose address it read before a dlclose unregistered it
  // (glibc drops its atfork lock around each parent and child handler).
  // With them, the entry points that take the atfork lock or the exit
  // functions' lock, which the unload's release of the agent's fork
  // handlers takes (runtime/fork_handlers.h): __register_atfork,
  // __cxa_finalize, __cxa_atexit.
  std::vector<AddressRange> fork_entries;
  // Where a whole call chain ends: libc's code (start_thread, clone3, and
  // __libc_start_call_main below main) and the program's entry point
  // (_start). A chain that ends anywhere else was cut short by a frame the
  // unwinder could not follow (a library's _init has no CFI, say).
  std::vector<AddressRange> chain_ends;

  // The range a code address or stack word falls in, or nullptr.
  const AddressRange* holder_of(uint64_t address) const;
};

// Reads the target's maps, its libc's and loader's symbol tables and the
// text around the signal return trampoline and __errno_location (through
// /proc/PID/mem).
// FTJIT_E_UNSUPPORTED with a one-line reason for a static, foreign-ISA or
// non-glibc-compatible target.
Result<TargetLibc> read_target_libc(const TargetInfo& target);

// The loader's handle (its struct link_map) of the object mapped from the
// file `path_in_target`, found in _r_debug's list; 0 if it is not loaded.
Result<uint64_t> loaded_object_handle(pid_t pid, const TargetLibc& libc, const std::string& path_in_target);

// What dlerror() would say on the thread whose thread pointer is tp,
// read from glibc's per-thread dlerror state; "" if there is none or this
// libc keeps it elsewhere.
std::string pending_dlerror(pid_t pid, const TargetLibc& libc, uint64_t tp);

// Reads target memory (process_vm_readv, then /proc/PID/mem).
Result<std::vector<uint8_t>> read_target_memory(pid_t pid, uint64_t address, size_t size);
Status write_target_memory(pid_t pid, uint64_t address, std::span<const uint8_t> bytes);

}  // namespace ftjit::inject::detail
