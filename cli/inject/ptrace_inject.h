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

namespace detail {
struct AddressRange;
struct TargetLibc;
}

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

// Whether path_in_target is a copy stage_library made (not a file of the
// target's own).
bool is_staged_copy(const TargetInfo& target, const std::string& path_in_target);

// Removes a copy stage_library made, once the target has mapped it (or no
// longer will), so that nothing of ftjit stays in the target's root (a
// container's /tmp). Nothing for a path that is not such a copy, or is
// gone already. FTJIT_E_SYSTEM if the removal fails.
[[nodiscard]] Status remove_staged_copy(const TargetInfo& target, const std::string& path_in_target);

// Removes the target's /tmp/ftjit-<uid>/ (where copies are staged and
// agents listen) if it is empty; a directory in use stays.
void remove_staging_dir_if_empty(const TargetInfo& target);

// Whether the target's mapping of path_in_target still reads once the file
// is removed: through /proc/PID/map_files, which needs CAP_SYS_ADMIN. The
// agent's own symbols are read from its file at unload (agent_unload.h).
bool mapping_outlives_its_file(pid_t pid, const std::string& path_in_target);

// A process with every thread in a ptrace stop, for a consistent look at
// all of them; nothing is run in it and no register changed. The
// destructor (or detach()) lets every thread go on, each restarting the
// system call it was in; so does the kernel if we are killed meanwhile.
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
  size_t thread_count() const;

  // Whether a thread can be executing, or come back to, code in `ranges`:
  // its program counter, its other registers and the return addresses of
  // its call chain (unwound with libunwind, signal frames included) are
  // compared with them. A chain that does not reach one of `ends` proves
  // nothing about the frames it could not follow (a library's _init has no
  // CFI, and a dlopen wrapper of ours may wait above it): that thread
  // counts as one that can. Frames inside one of `data_holders` (the
  // unwinder, which keeps the personality routine it read in its frame
  // state before calling it) have every stack word compared too.
  // "" if no thread can; else which thread, and where the address was.
  [[nodiscard]] Result<std::string> find_references(std::span<const detail::AddressRange> ranges,
                                                    std::span<const detail::AddressRange> ends,
                                                    std::span<const detail::AddressRange> data_holders);

  // The threads in a ptrace stop now.
  std::vector<pid_t> stopped_threads() const;

  // A thread whose call chain (unwound from its CFI) is inside one of
  // `code`, as "thread T is inside X", or (`ends` given) whose chain
  // cannot be followed to one of `ends` (what it is inside is unknown);
  // "" if none.
  [[nodiscard]] std::string find_in_call_chains(std::span<const detail::AddressRange> code,
                                                std::span<const detail::AddressRange> ends);

  // Lets every thread go but `keep` (which stays ours, for detach()).
  void detach_except(pid_t keep);

  // Lets every thread go. Idempotent. Fails only if the process died.
  Status detach();

  struct State;

 private:
  explicit StoppedProcess(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

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
