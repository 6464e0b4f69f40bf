// SPDX-License-Identifier: MIT
// inject_library / unload_library: dlopen and dlclose run inside the target
// through StoppedProcess, with dlerror()'s text brought back on failure.
#include "cli/inject/ptrace_inject.h"

#include <dlfcn.h>

#include "cli/inject/inject_internal.h"

namespace ftjit::inject {
namespace {

using Clock = std::chrono::steady_clock;

// Addresses of the loader entry points in the target.
struct DlFunctions {
  uint64_t dlopen = 0;
  uint64_t dlerror = 0;
  uint64_t dlclose = 0;
};

// Looks for the dl* functions where each libc keeps them: glibc >= 2.34 in
// libc.so.6, older glibc in libdl.so.2, musl in its loader.
Result<DlFunctions> find_dl_functions(const TargetInfo& target) {
  const std::string p = "process " + std::to_string(target.pid);
  if (target.isa != Isa::kX86_64)
    return make_error(FTJIT_E_UNSUPPORTED, p + " is not an x86-64 program; ftjit attach serves x86-64 processes");
  if (target.static_linked)
    return make_error(FTJIT_E_UNSUPPORTED, p + " (" + target.exe +
                                               ") is statically linked: no dlopen to load the agent with; "
                                               "start it with `ftjit run` instead");
  auto maps = detail::read_maps(target.pid);
  FTJIT_TRY(maps);
  struct Candidate {
    const char* name;
    bool prefix;
  };
  static constexpr Candidate kCandidates[] = {
      {"libc.so.6", false}, {"libdl.so.2", false}, {"libc-2.", true}, {"libdl-2.", true}, {"ld-musl-", true}};
  bool any_module = false;
  for (const Candidate& c : kCandidates) {
    auto mod = detail::find_module(*maps, c.name, c.prefix);
    if (!mod) continue;
    any_module = true;
    std::string file = detail::path_in_root(target.pid, mod->path);
    auto dlopen_addr = detail::elf_symbol_address(file, mod->offset0_start, "dlopen");
    if (!dlopen_addr.ok()) {
      if (dlopen_addr.error().code == FTJIT_E_NO_MATCH) continue;
      return dlopen_addr.take_error();
    }
    auto dlerror_addr = detail::elf_symbol_address(file, mod->offset0_start, "dlerror");
    FTJIT_TRY(dlerror_addr);
    auto dlclose_addr = detail::elf_symbol_address(file, mod->offset0_start, "dlclose");
    FTJIT_TRY(dlclose_addr);
    return DlFunctions{*dlopen_addr, *dlerror_addr, *dlclose_addr};
  }
  if (detail::process_gone(target.pid)) return make_error(FTJIT_E_INVALID_ARGUMENT, "no process " + std::to_string(target.pid));
  return make_error(FTJIT_E_UNSUPPORTED,
                    p + " (" + target.exe + ") has " + (any_module ? "no dlopen in its C library" : "no C library loaded (yet?)") +
                        ": the agent cannot be loaded; start it with `ftjit run` instead");
}

std::chrono::milliseconds remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

// dlerror() on the thread that just failed, as text.
std::string loader_error(StoppedProcess& stopped, uint64_t dlerror_fn, Clock::time_point deadline) {
  auto msg = stopped.call(dlerror_fn, {}, remaining(deadline));
  if (!msg.ok()) return "(dlerror failed: " + msg.error().message + ")";
  if (*msg == 0) return "(no dlerror message)";
  auto text = stopped.read_string(*msg);
  if (!text.ok()) return "(dlerror's message could not be read: " + text.error().message + ")";
  return *text;
}

}  // namespace

Result<uint64_t> inject_library(const TargetInfo& target, const std::string& path_in_target,
                                std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto dl = find_dl_functions(target);
  FTJIT_TRY(dl);
  auto stopped = StoppedProcess::stop(target.pid, timeout);
  FTJIT_TRY(stopped);
  auto path = stopped->push_string(path_in_target);
  FTJIT_TRY(path);
  const uint64_t args[] = {*path, RTLD_NOW};
  auto handle = stopped->call(dl->dlopen, args, remaining(deadline));
  FTJIT_TRY(handle);
  if (*handle == 0) {
    std::string why = loader_error(*stopped, dl->dlerror, deadline);
    (void)stopped->detach();
    return make_error(FTJIT_E_SYSTEM, "dlopen(" + path_in_target + ") failed in process " +
                                          std::to_string(target.pid) + ": " + why);
  }
  FTJIT_TRY(stopped->detach());
  return *handle;
}

Status unload_library(const TargetInfo& target, uint64_t handle, std::chrono::milliseconds timeout) {
  if (handle == 0) return make_error(FTJIT_E_INVALID_ARGUMENT, "no library handle to unload");
  const auto deadline = Clock::now() + timeout;
  auto dl = find_dl_functions(target);
  FTJIT_TRY(dl);
  auto stopped = StoppedProcess::stop(target.pid, timeout);
  FTJIT_TRY(stopped);
  const uint64_t args[] = {handle};
  auto rc = stopped->call(dl->dlclose, args, remaining(deadline));
  FTJIT_TRY(rc);
  if (static_cast<int32_t>(*rc) != 0) {
    std::string why = loader_error(*stopped, dl->dlerror, deadline);
    (void)stopped->detach();
    return make_error(FTJIT_E_SYSTEM, "dlclose failed in process " + std::to_string(target.pid) + ": " + why);
  }
  return stopped->detach();
}

}  // namespace ftjit::inject
