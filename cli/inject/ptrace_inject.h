// SPDX-License-Identifier: MIT
// ptrace injection for `ftjit attach -p PID`: inspect a running x86-64
// process, stop it, call a function in it, load (and unload) a library in it.
//
// Every function returns an ftjit::Error with a one-line message that says
// what happened and what the user can do; nothing here throws or logs.
//
// Signals: while threads of the target are stopped by us, SIGINT, SIGTERM
// and SIGHUP are blocked in the calling thread (restored, and so delivered,
// once the target runs again), so Ctrl-C cannot leave it hijacked. The
// caller should block them in its other threads too, or have none.
//
// Wait-status stealing: the functions wait for the target's threads with
// waitid(P_PID, tid); another thread of the caller that waits for any child
// (waitpid(-1)) while an injection is in progress may steal those events.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/site.h"

namespace ftjit::inject {

// What /proc tells about a target before anything touches it.
struct TargetInfo {
  pid_t pid = 0;
  std::string exe;           // path of the executable as the target sees it
  uint16_t e_machine = 0;    // ELF e_machine of the executable (EM_X86_64...)
  Isa isa = Isa::kUnknown;   // kX86_64 for a native 64-bit x86 program
  bool static_linked = false;  // no PT_INTERP: no loader, no dlopen
  std::string root;          // "/proc/PID/root": the target's "/" seen from here
  bool same_mount_ns = true; // the target's mount namespace and root are ours
  uid_t uid = 0;             // the target's real uid
  gid_t gid = 0;             // the target's real gid
  pid_t tracer_pid = 0;      // TracerPid from /proc/PID/status; 0 if none
};

// Reads /proc/PID only (no ptrace). Fails with FTJIT_E_INVALID_ARGUMENT for
// a missing pid, a zombie, a thread id that is not a process, a kernel
// thread, a process of another user we may not trace; FTJIT_E_UNSUPPORTED
// for a statically linked program or one of another ISA (also under
// qemu-user); FTJIT_E_SYSTEM if /proc cannot be read.
[[nodiscard]] Result<TargetInfo> inspect_target(pid_t pid);

// Decides from Yama's ptrace_scope (absent file: no Yama), our uid and
// CAP_SYS_PTRACE whether PTRACE_SEIZE can work, and whether another tracer
// is there already. Fails with FTJIT_E_UNSUPPORTED and a message that says
// what to run or set instead. (ptrace_scope 1 cannot be decided up front:
// the target may have allowed us with PR_SET_PTRACER; a refused
// PTRACE_SEIZE then gets the same advice.)
[[nodiscard]] Status check_ptrace_permitted(const TargetInfo& target);

// Returns a path under which the target can open host_path: host_path
// itself when it names the same file inside the target's root, else a copy
// at /tmp/ftjit-<target uid>/<basename> inside the target's root (directory
// 0700, owned by the target's user; no symlink followed on the way).
// FTJIT_E_INVALID_ARGUMENT if host_path cannot be read, FTJIT_E_SYSTEM if
// the copy fails.
[[nodiscard]] Result<std::string> stage_library(const TargetInfo& target,
                                                const std::string& host_path);

// A process with every thread in a ptrace stop, one thread of which
// ("the hijacked thread", the main thread unless it has exited) runs
// calls. Between calls every thread is stopped. The destructor (or
// detach()) restores the hijacked thread's registers and FP/vector state
// exactly, detaches every thread with no signal, and re-sends the signals
// that arrived for the hijacked thread during calls (with tgkill, so their
// siginfo names us as the sender).
class StoppedProcess {
 public:
  // Seizes and interrupts every thread, rescanning /proc/PID/task until no
  // new thread appears. Fails with FTJIT_E_INVALID_ARGUMENT if the process
  // is gone or already traced ("process N is already traced by PID M"),
  // FTJIT_E_UNSUPPORTED if ptrace is refused, FTJIT_E_SYSTEM if a thread
  // does not stop before the timeout (threads already stopped are let go).
  [[nodiscard]] static Result<StoppedProcess> stop(pid_t pid, std::chrono::milliseconds timeout);

  StoppedProcess(StoppedProcess&&) noexcept;
  StoppedProcess& operator=(StoppedProcess&&) noexcept;
  ~StoppedProcess();

  pid_t pid() const;
  pid_t hijacked_tid() const;
  size_t thread_count() const;

  // Copies bytes to the hijacked thread's stack, below its red zone and
  // below earlier copies; returns their address in the target. The space
  // stays valid until detach. FTJIT_E_OUT_OF_RANGE past 64 KiB in total.
  [[nodiscard]] Result<uint64_t> push_bytes(std::span<const uint8_t> bytes);
  // push_bytes of the string and its terminating NUL.
  [[nodiscard]] Result<uint64_t> push_string(std::string_view s);

  // Calls function(args...) (System V ABI, up to 6 integer arguments) on
  // the hijacked thread and returns rax. If the call has not returned after
  // about 1 s the other threads are let run (a stopped thread may hold a
  // lock the call needs) and stopped again when it returns. Errors:
  // FTJIT_E_INVALID_ARGUMENT for more than 6 arguments; FTJIT_E_SYSTEM for
  // "process N exited during injection", a crash inside the call, or a
  // timeout (the call is then abandoned, see the .cpp for what that leaves).
  // After an error the process should be detached, not called again.
  [[nodiscard]] Result<uint64_t> call(uint64_t function, std::span<const uint64_t> args,
                                      std::chrono::milliseconds timeout);

  // Reads a NUL-terminated string of at most max_len bytes from the target.
  [[nodiscard]] Result<std::string> read_string(uint64_t address, size_t max_len = 4096);
  // Reads size bytes from the target.
  [[nodiscard]] Result<std::vector<uint8_t>> read_memory(uint64_t address, size_t size);

  // Restores the hijacked thread, detaches all threads, re-sends deferred
  // signals. Idempotent. Fails only if the process died meanwhile.
  Status detach();

  struct State;

 private:
  explicit StoppedProcess(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

// stop() + call() + detach(): calls function(args...) (up to 6 integer
// arguments) on one thread of the process with every other thread stopped
// and returns rax. Errors as StoppedProcess::stop and ::call.
[[nodiscard]] Result<uint64_t> call_in_target(pid_t pid, uint64_t function,
                                              std::span<const uint64_t> args,
                                              std::chrono::milliseconds timeout);

// dlopen(path_in_target, RTLD_NOW) in the target (dlopen found in the
// target's libc.so.6, or libdl.so.2 for glibc < 2.34, read through
// target.root) and returns the handle. When dlopen returns NULL the message
// carries dlerror()'s text, read from the target; the target keeps running.
// FTJIT_E_UNSUPPORTED for static or foreign-ISA targets or no dlopen.
[[nodiscard]] Result<uint64_t> inject_library(const TargetInfo& target,
                                              const std::string& path_in_target,
                                              std::chrono::milliseconds timeout);

// dlclose(handle) in the target. FTJIT_E_SYSTEM with dlerror()'s text if
// dlclose fails.
[[nodiscard]] Status unload_library(const TargetInfo& target, uint64_t handle,
                                    std::chrono::milliseconds timeout);

// Run-time address of a symbol (.dynsym, then .symtab) of a module mapped in
// the target, the module named by the basename of its file (e.g.
// "libftjit-agent.so", "libc.so.6"). FTJIT_E_NO_MATCH if the module is not
// mapped or has no such symbol; FTJIT_E_ELF if its file cannot be parsed.
[[nodiscard]] Result<uint64_t> symbol_in_target(pid_t pid, std::string_view module_basename,
                                                std::string_view symbol);

}  // namespace ftjit::inject
