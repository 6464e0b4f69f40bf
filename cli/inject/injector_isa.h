// SPDX-License-Identifier: MIT
// The ptrace injector's seam to the ISA of the processes it serves: the
// few facts that differ per ISA, declared here and defined in
// cli/inject/<isa>/injector_isa.cpp (CMake picks the folder: FTJIT_ARCH).
// The thread hijack, ThreadCall (thread_call.h), has its per-ISA half
// beside it: thread_state.h, cli/inject/<isa>/thread_state.cpp (registers,
// the signal frame, how a call is entered). An injector for another ISA is
// that folder's two files; the rest of cli/inject/ stays as it is.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/site.h"

namespace ftjit::inject::detail {

// Where a target keeps the signal return trampoline a hijacked call
// returns through (restore_rt_code): glibc's own __restore_rt in libc's
// code (x86-64), or the kernel's, __kernel_rt_sigreturn in the [vdso]
// mapping (arm64, where glibc has none).
enum class SignalTrampoline : uint8_t { kLibc, kVdso };

// Which programs this injector serves, named for messages.
struct InjectorIsa {
  Isa isa = Isa::kUnknown;
  uint16_t e_machine = 0;        // the ELF header's, of a 64-bit LSB program
  const char* name = "";         // "x86-64": "ftjit attach serves x86-64 processes"
  const char* loader = "";       // the dynamic loader's basename
  SignalTrampoline restore_rt_in = SignalTrampoline::kLibc;
  // Bytes below the stack pointer a function may use without moving it
  // (System V x86-64: 128; AAPCS64: none): a hijacked call's frame goes
  // below them.
  uint16_t red_zone = 0;
};
const InjectorIsa& injector_isa();

// The code of the signal return trampoline (x86-64: libc's __restore_rt;
// arm64: the vDSO's __kernel_rt_sigreturn): not exported, it is found as
// the one copy of these bytes in the code of the mapping
// InjectorIsa::restore_rt_in names. A hijacked call returns through it
// (thread_call.h).
std::span<const uint8_t> restore_rt_code();

// A ptrace-stopped thread's pc and general registers: an unload looks for
// addresses of the agent in them. Fails with FTJIT_E_SYSTEM if ptrace does.
struct StoppedRegisters {
  uint64_t pc = 0;
  std::vector<uint64_t> general;
};
Result<StoppedRegisters> read_stopped_registers(pid_t tid);

// errno's offset from the thread pointer, read from the code of libc's
// __errno_location at `errno_location` in process `pid` (the GOT word its
// first instruction loads); nullopt when the code is not as expected.
std::optional<int64_t> errno_tpoff_from_code(pid_t pid, uint64_t errno_location);

}  // namespace ftjit::inject::detail
