// SPDX-License-Identifier: MIT
// inject_library / unload_library: dlopen and dlclose run inside the target
// on one thread borrowed at a safe point (thread_call.h), which comes back
// to its own state by itself even if we are killed; dlerror()'s text is
// read from the thread's dlerror state on failure.
#include "cli/inject/ptrace_inject.h"

#include <dlfcn.h>

#include "cli/inject/inject_internal.h"
#include "cli/inject/target_libc.h"
#include "cli/inject/thread_call.h"
#include "runtime/control/latency_slice.h"

namespace ftjit::inject {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

Result<uint64_t> inject_library(const TargetInfo& target, const std::string& path_in_target,
                                std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto libc = detail::read_target_libc(target);
  FTJIT_TRY(libc);
  auto call = ThreadCall::seize(target.pid, *libc, 0, remaining(deadline));
  FTJIT_TRY(call);
  auto path = call->push_string(path_in_target);
  FTJIT_TRY(path);
  const uint64_t args[] = {*path, RTLD_NOW};
  {
    // The loader's work (mapping, relocating, the constructors) on a
    // thread that would otherwise wait behind every busy thread of its
    // process between turns (runtime/control/latency_slice.h).
    control::ShortSliceFor short_turns(call->tid());
    FTJIT_TRY(call->run(libc->dlopen, args, remaining(deadline)));
  }
  // dlopen's value went with its return through rt_sigreturn: the handle
  // is the loader's entry for the file, if it has one now.
  auto handle = detail::loaded_object_handle(target.pid, *libc, path_in_target);
  if (handle && *handle == 0) {
    std::string why = detail::pending_dlerror(target.pid, *libc, call->thread_pointer());
    (void)call->release();
    return make_error(FTJIT_E_SYSTEM, "dlopen(" + path_in_target + ") failed in process " +
                                          std::to_string(target.pid) + ": " + (why.empty() ? "(no dlerror message)" : why));
  }
  FTJIT_TRY(call->release());
  return handle;
}

Status unload_library(const TargetInfo& target, uint64_t handle, std::chrono::milliseconds timeout) {
  if (handle == 0) return make_error(FTJIT_E_INVALID_ARGUMENT, "no library handle to unload");
  const auto deadline = Clock::now() + timeout;
  auto libc = detail::read_target_libc(target);
  FTJIT_TRY(libc);
  auto call = ThreadCall::seize(target.pid, *libc, 0, remaining(deadline));
  FTJIT_TRY(call);
  const std::string before = detail::pending_dlerror(target.pid, *libc, call->thread_pointer());
  const uint64_t args[] = {handle};
  FTJIT_TRY(call->run(libc->dlclose, args, remaining(deadline)));
  const std::string after = detail::pending_dlerror(target.pid, *libc, call->thread_pointer());
  FTJIT_TRY(call->release());
  if (!after.empty() && after != before)
    return make_error(FTJIT_E_SYSTEM, "dlclose failed in process " + std::to_string(target.pid) + ": " + after);
  return {};
}

}  // namespace ftjit::inject
