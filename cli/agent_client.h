// SPDX-License-Identifier: MIT
// The CLI's end of the control channel (runtime/control/protocol.h): find
// and reach the agent of a process, ask it things, and serve it as its code
// generator (the agent has none: trampolines are emitted here, with asmjit,
// for the target's addresses).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>
#include <thread>

#include "core/error.h"
#include "runtime/control/protocol.h"

namespace ftjit::cli {

// The shared object `ftjit run` preloads and `ftjit attach` injects:
// $FTJIT_AGENT, else ../lib/libftjit-agent.so beside this executable
// (the build tree and an installed prefix alike).
Result<std::string> find_agent_library();
// The agent built for a guest ISA, preloaded in a program run under
// qemu-user (guest_program.h): $FTJIT_AGENT_<ISA> (FTJIT_AGENT_ARM64), else
// ../lib/ftjit/<isa>/libftjit-agent.so beside this executable. Checked to
// be an ELF of that ISA.
Result<std::string> find_guest_agent_library(Isa isa);

// Where the agent of `pid` (a pid of our namespace) listens, reached
// through /proc/PID/root (the target's mount namespace) with the pid and
// uid the target sees.
Result<std::string> agent_socket_for(pid_t pid);

class AgentConnection {
 public:
  // Connects and reads the agent's Hello. `wait_ms` > 0: retries while the
  // socket does not exist yet (a program just started under `ftjit run`).
  static Result<std::unique_ptr<AgentConnection>> connect(pid_t pid, int wait_ms = 0);
  ~AgentConnection();

  const control::Hello& hello() const { return hello_; }
  int fd() const { return fd_; }

  // Sends a request (with an fd to pass, or -1) and waits for the Reply.
  // An Exited frame arriving first is returned as the reply, with
  // *exited set (the process ended during the request).
  Result<control::Reply> request(control::MsgType type, const std::string& payload,
                                 int pass_fd = -1, int timeout_ms = -1, bool* exited = nullptr);
  // The same, passing `pass_fds` (the reports' files of an Attach).
  Result<control::Reply> request(control::MsgType type, const std::string& payload,
                                 const std::vector<int>& pass_fds, int timeout_ms, bool* exited);

 private:
  AgentConnection() = default;
  int fd_ = -1;
  control::Hello hello_;
};

// A second connection that answers the agent's Generate requests on a
// thread of its own, until destroyed or the agent goes away.
// The generator's answer to one Generate payload, with `emitter`.
// `root`: where the process's files are seen from here (/proc/PID/root;
// empty: its files are ours), for the module files a relocated entry is
// read from.
control::Generated answer_generate(std::string_view payload, const TrampolineEmitter& emitter,
                                   const std::string& root = "");

class GeneratorService {
 public:
  static Result<std::unique_ptr<GeneratorService>> start(pid_t pid);
  ~GeneratorService();
  uint64_t served() const { return served_.load(); }

 private:
  GeneratorService() = default;
  void serve();
  std::unique_ptr<AgentConnection> conn_;
  std::string root_;  // /proc/PID/root
  std::thread thread_;
  std::atomic<uint64_t> served_{0};
};

}  // namespace ftjit::cli
