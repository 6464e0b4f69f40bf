// SPDX-License-Identifier: MIT
#include "cli/agent_unload.h"

#include <dirent.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "cli/inject/inject_internal.h"
#include "cli/inject/ptrace_inject.h"
#include "cli/inject/target_libc.h"
#include "cli/inject/thread_call.h"

namespace ftjit::cli {
namespace {

constexpr std::chrono::milliseconds kCallTimeout{10000};
// How long the other threads stay stopped while dlclose runs (longer: one
// of them may hold a lock it needs).
constexpr std::chrono::milliseconds kOthersStoppedFor{100};
// How long threads get to leave the agent's code (and fork) before it
// stays loaded.
constexpr std::chrono::milliseconds kLeaveAgentCodeWithin{3000};
// How long a moment with no thread inside the loader, malloc or the
// unwinder's lock is looked for: past it, dlclose goes ahead and may wait
// kOthersStoppedFor for one of them. (A busy program has such a thread
// almost always: waiting the whole kLeaveAgentCodeWithin made every
// unload of the hazard program take 3.5 s.)
constexpr std::chrono::milliseconds kPreferIdleFor{100};

// The agent's path as the process sees it (as it was loaded: a copy staged
// into a container is removed once loaded), "" if it is not mapped.
std::string mapped_agent(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  constexpr std::string_view kDeleted = " (deleted)";
  while (std::getline(maps, line)) {
    size_t at = line.find('/');
    if (at != std::string::npos && line.find("libftjit-agent.so", at) != std::string::npos) {
      std::string path = line.substr(at);
      if (path.ends_with(kDeleted)) path.resize(path.size() - kDeleted.size());
      return path;
    }
  }
  return "";
}

}  // namespace

pid_t agent_thread_id(pid_t pid) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(task.c_str());
  if (d == nullptr) return 0;
  pid_t found = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(task + "/" + e->d_name + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == "ftjit-agent") {
      found = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
      break;
    }
  }
  closedir(d);
  return found;
}

namespace {

// Whether the agent's control thread still exists: until the kernel has
// reaped it, it may be running our code (or libstdc++'s, which goes with
// us if the program is C) on its way out.
bool agent_thread_alive(pid_t pid) { return agent_thread_id(pid) != 0; }

// The code the agent brought: its own executable mappings and those of the
// code memory it made (trampolines, stubs, the exit trampoline: memfds
// named "ftjit-...").
Result<std::vector<inject::detail::AddressRange>> agent_code(pid_t pid) {
  auto maps = inject::detail::read_maps(pid);
  if (!maps) return maps.take_error();
  std::vector<inject::detail::AddressRange> out;
  for (const auto& m : *maps) {
    if (m.perms.size() < 3 || m.perms[2] != 'x') continue;
    if (m.path.find("libftjit-agent.so") != std::string::npos) out.push_back({m.start, m.end, "the agent"});
    else if (m.path.rfind("/memfd:ftjit-", 0) == 0) out.push_back({m.start, m.end, "ftjit's generated code"});
  }
  return out;
}

// The unwinder's code (libgcc_s): between reading a frame's personality
// routine (a wrapper of ours while exit hooks were on) and calling it, it
// keeps the address in its frame state on the stack, not as a return
// address.
Result<std::vector<inject::detail::AddressRange>> unwinder_code(pid_t pid) {
  auto maps = inject::detail::read_maps(pid);
  if (!maps) return maps.take_error();
  std::vector<inject::detail::AddressRange> out;
  for (const auto& m : *maps) {
    if (m.perms.size() < 3 || m.perms[2] != 'x') continue;
    if (m.path.find("/libgcc_s.so") != std::string::npos) out.push_back({m.start, m.end, "the unwinder"});
  }
  return out;
}

constexpr uint32_t kAgentPhaseLoading = 0;
constexpr uint32_t kAgentPhaseDone = 2;

// The agent's control thread as it says itself (runtime/agent/agent_phase.h:
// 0 loading, 1 serving, 2 done); nullopt for an agent of an older ftjit,
// which has no such word. A word that cannot be read yet (the loader has
// not mapped its segment) is still loading.
std::optional<uint32_t> agent_phase(pid_t pid, const std::string& path) {
  auto at = inject::symbol_in_target(pid, std::filesystem::path(path).filename().string(), "ftjit_agent_phase");
  if (!at) return at.error().code == FTJIT_E_NO_MATCH ? std::nullopt : std::optional(kAgentPhaseLoading);
  auto word = inject::detail::read_target_memory(pid, *at, sizeof(uint32_t));
  if (!word || word->size() != sizeof(uint32_t)) return kAgentPhaseLoading;
  uint32_t phase;
  std::memcpy(&phase, word->data(), sizeof phase);
  return phase;
}

}  // namespace

Status unload_agent(pid_t pid, AgentConnection& conn) {
  // The agent closes every connection as its thread ends.
  auto end = control::recv_frame(conn.fd(), 10000);
  if (end) return make_error(FTJIT_E_SYSTEM, "the agent did not stop its thread for the unload");
  for (int i = 0; i < 500 && agent_thread_alive(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (agent_thread_alive(pid)) return make_error(FTJIT_E_SYSTEM, "the agent's thread did not end: it stays loaded (inert)");
  return finish_unload(pid);
}

bool agent_mapped(pid_t pid) { return !mapped_agent(pid).empty(); }

Result<std::unique_ptr<AgentConnection>> connect_finishing_unload(pid_t pid, bool* unloaded) {
  *unloaded = false;
  const auto deadline = std::chrono::steady_clock::now() + kLeaveAgentCodeWithin;
  for (;;) {
    auto conn = AgentConnection::connect(pid);
    if (conn) return conn;
    const std::string path = mapped_agent(pid);
    const bool mapped = !path.empty();
    // No thread named ftjit-agent: gone, or not started yet (a `ftjit`
    // killed during the injection left the process's dlopen running; the
    // thread it starts has its creator's name at first, and unloading
    // then would pull the agent from under it). The agent's own word
    // tells which; an older agent has none.
    if (mapped && !agent_thread_alive(pid) &&
        agent_phase(pid, path).value_or(kAgentPhaseDone) == kAgentPhaseDone) {
      // A killed `ftjit` began the unload: finish it.
      FTJIT_TRY(finish_unload(pid));
      *unloaded = true;
      return conn;
    }
    // Mapped with its thread alive but deaf: starting up (its loader call
    // still running) or ending (its thread closing the socket). Ask again.
    if (!mapped || std::chrono::steady_clock::now() > deadline) return conn;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Status finish_unload(pid_t pid) {
  std::string path = mapped_agent(pid);
  if (path.empty()) return {};
  auto target = inject::inspect_target(pid);
  if (!target) return target.take_error();

  // Nothing of the agent may be unmapped while a thread can still execute
  // it or return into it: a wrapper of the unwinder, of the personality
  // routine or of dlopen it was inside when its hook was taken away, a
  // trampoline, a fork handler, a signal handler. With every thread
  // stopped, no register and no stack word may point into the agent's
  // code (return addresses of call chains followed to their end, and every
  // word of the unwinder's frames), and no thread may be inside fork; the
  // hooks are gone, so a thread
  // that has no such address cannot come by a new one, except through a
  // fork handler dlclose has not unregistered yet: dlclose runs while the
  // other threads stay stopped. A thread that still has an address of ours
  // gets time to leave; after that the agent stays loaded, inert, and the
  // user is told why.
  auto libc = inject::detail::read_target_libc(*target);
  if (!libc) return make_error(libc.error().code, libc.error().message + "; the agent stays (inert)");
  auto handle = inject::detail::loaded_object_handle(pid, *libc, path);
  if (!handle) return handle.take_error();
  if (*handle == 0) return make_error(FTJIT_E_SYSTEM, "the process does not know the agent by " + path);
  // Absent from an agent of an older ftjit: then dlclose alone removes
  // its fork handlers.
  auto release_fork_handlers = inject::symbol_in_target(
      pid, std::filesystem::path(path).filename().string(), "ftjit_agent_release_fork_handlers");
  const auto deadline = std::chrono::steady_clock::now() + kLeaveAgentCodeWithin;
  const auto prefer_idle_until = std::chrono::steady_clock::now() + kPreferIdleFor;
  for (;;) {
    auto ranges = agent_code(pid);
    if (!ranges) return ranges.take_error();
    auto stopped = inject::StoppedProcess::stop(pid, kCallTimeout);
    if (!stopped) return stopped.take_error();
    auto unwinder = unwinder_code(pid);
    if (!unwinder) return unwinder.take_error();
    auto refs = stopped->find_references(*ranges, libc->chain_ends, *unwinder);
    if (!refs) return refs.take_error();
    std::string busy = *refs;
    if (busy.empty()) busy = stopped->find_in_call_chains(libc->fork_entries, {});
    // A thread inside fork calls the fork handlers glibc read before
    // dlclose unregistered them (ours are inert, but ours): it must leave
    // fork first, like our code. A thread inside the loader, malloc or
    // the unwinder holds a lock dlclose needs: a moment without one is
    // looked for a little while; then dlclose goes ahead, and the others
    // are let go after kOthersStoppedFor, should it wait for one of them.
    if (busy.empty() && std::chrono::steady_clock::now() < prefer_idle_until &&
        !stopped->find_in_call_chains(libc->lock_holders, libc->chain_ends).empty()) {
      FTJIT_TRY(stopped->detach());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    if (busy.empty()) {
      // dlclose runs on one thread while the others stay stopped, so that
      // none can enter the agent's code meanwhile (glibc calls a fork
      // handler it read before dlclose unregistered it); if it needs a
      // lock one of them holds, they are let go after a moment.
      auto threads = stopped->stopped_threads();
      if (threads.empty()) return make_error(FTJIT_E_SYSTEM, "no thread of process " + std::to_string(pid) + " stopped");
      // Our fork handlers leave glibc's list first, while no thread is in
      // fork and none can enter it (runtime/fork_handlers.h: a removal
      // while a fork runs its handlers makes it call a removed one). Should
      // that wait for a lock a stopped thread holds, the others are let go
      // and everything is checked again.
      if (release_fork_handlers) {
        auto release = inject::ThreadCall::adopt(pid, *libc, threads.front());
        if (!release) return release.take_error();
        FTJIT_TRY(release->start(*release_fork_handlers, {}));
        auto returned = release->returned_within(kOthersStoppedFor);
        if (!returned) return returned.take_error();
        if (!*returned) {
          stopped->detach_except(release->tid());
          FTJIT_TRY(release->finish(kCallTimeout));
        }
        FTJIT_TRY(release->release());
        if (!*returned) {
          FTJIT_TRY(stopped->detach());
          continue;
        }
      }
      auto call = inject::ThreadCall::adopt(pid, *libc, threads.front());
      if (!call) return call.take_error();
      const std::string before = inject::detail::pending_dlerror(pid, *libc, call->thread_pointer());
      const uint64_t args[] = {*handle};
      FTJIT_TRY(call->start(libc->dlclose, args));
      auto returned = call->returned_within(kOthersStoppedFor);
      if (!returned) return returned.take_error();
      if (!*returned) {
        stopped->detach_except(call->tid());
        FTJIT_TRY(call->finish(kCallTimeout));
      }
      const std::string after = inject::detail::pending_dlerror(pid, *libc, call->thread_pointer());
      FTJIT_TRY(call->release());
      FTJIT_TRY(stopped->detach());
      if (!after.empty() && after != before)
        return make_error(FTJIT_E_SYSTEM, "dlclose of the agent failed in process " + std::to_string(pid) + ": " + after);
      break;
    }
    FTJIT_TRY(stopped->detach());
    if (std::chrono::steady_clock::now() > deadline) {
      return make_error(FTJIT_E_SYSTEM, "the agent stays loaded (inert): " + busy);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  // dlclose unmaps at once unless a thread still has thread-local
  // destructors of ours to run: give those threads a moment.
  for (int i = 0; i < 50 && !mapped_agent(pid).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!mapped_agent(pid).empty()) {
    return make_error(FTJIT_E_UNSUPPORTED,
                      "the agent is inert but still mapped (preloaded by `ftjit run`, or held by "
                      "the loader); it does nothing");
  }
  // The copy `ftjit attach` staged into the process's root (a container)
  // when it could not remove it once loaded, and the directory it staged
  // it in, once the agent's socket has left it too.
  if (inject::is_staged_copy(*target, path)) {
    FTJIT_TRY(inject::remove_staged_copy(*target, path));
    inject::remove_staging_dir_if_empty(*target);
  }
  return {};
}

}  // namespace ftjit::cli
