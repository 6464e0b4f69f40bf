// SPDX-License-Identifier: MIT
#include "cli/agent_unload.h"

#include <dirent.h>
#include <dlfcn.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "cli/inject/ptrace_inject.h"

namespace ftjit::cli {
namespace {

constexpr std::chrono::milliseconds kCallTimeout{10000};

// The agent's path as the process sees it, "" if it is not mapped.
std::string mapped_agent(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    size_t at = line.find('/');
    if (at != std::string::npos && line.find("libftjit-agent.so", at) != std::string::npos) {
      return line.substr(at);
    }
  }
  return "";
}

// Whether the agent's control thread (named "ftjit-agent") still exists:
// until the kernel has reaped it, it may be running our code (or
// libstdc++'s, which goes with us if the program is C) on its way out.
bool agent_thread_alive(pid_t pid) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(task.c_str());
  if (d == nullptr) return false;
  bool alive = false;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(task + "/" + e->d_name + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == "ftjit-agent") alive = true;
  }
  closedir(d);
  return alive;
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
  std::string path = mapped_agent(pid);
  if (path.empty()) return {};
  auto target = inject::inspect_target(pid);
  if (!target) return target.take_error();
  auto dlopen_at = inject::symbol_in_target(pid, "libc.so.6", "dlopen");
  auto dlclose_at = inject::symbol_in_target(pid, "libc.so.6", "dlclose");
  if (!dlopen_at || !dlclose_at) {
    return make_error(FTJIT_E_UNSUPPORTED, "no dlopen/dlclose in the process's libc: the agent stays (inert)");
  }
  {
    auto stopped = inject::StoppedProcess::stop(pid, kCallTimeout);
    if (!stopped) return stopped.take_error();
    auto str = stopped->push_string(path);
    if (!str) return str.take_error();
    // RTLD_NOLOAD: the handle of the copy that is loaded (one more
    // reference), then that reference and the one of the injection dropped.
    const uint64_t open_args[] = {*str, RTLD_NOW | RTLD_NOLOAD};
    auto handle = stopped->call(*dlopen_at, open_args, kCallTimeout);
    if (!handle) return handle.take_error();
    if (*handle == 0) return make_error(FTJIT_E_SYSTEM, "the process does not know the agent by " + path);
    for (int i = 0; i < 2; ++i) {
      const uint64_t close_args[] = {*handle};
      auto r = stopped->call(*dlclose_at, close_args, kCallTimeout);
      if (!r) return r.take_error();
    }
    FTJIT_TRY(stopped->detach());
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
  return {};
}

}  // namespace ftjit::cli
