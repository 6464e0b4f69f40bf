// SPDX-License-Identifier: MIT
// The agent's end of the control channel: a thread of the traced process
// (all signals blocked, so the program's signals never land on it) that
// listens on /tmp/ftjit-UID/PID.sock in a 0700 directory, admits only
// peers of the same user (or root), and hands each request to the
// session. One request at a time; a generator connection is handed over to
// the session's RemoteEmitter for good.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "runtime/agent/agent_session.h"

namespace ftjit::agent {

class ControlServer {
 public:
  // Creates the directory and the socket and starts the thread.
  static Result<std::unique_ptr<ControlServer>> start(AgentSession& session);
  ~ControlServer();

  // Waits until an attach succeeded (run mode: the program's main() must
  // not start untraced; after a refused attach `ftjit run` stops it), at
  // most `timeout_ms`.
  void wait_first_attach(int timeout_ms);

  // The process is exiting: tells the CLI that attached (if it is still
  // connected) with the final report, and removes the socket.
  void notify_exit(const control::Reply& final_report);

  const std::string& path() const { return path_; }

 private:
  explicit ControlServer(AgentSession& session) : session_(session) {}
  void loop();
  // Handles one frame from `fd`; false to close the connection.
  bool handle(int fd);
  bool handle_frame(int fd);

  AgentSession& session_;
  std::string path_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop the loop
  int own_nice_ = 0;  // the thread's, put back after each request (latency_slice.h)
  std::thread thread_;
  std::vector<int> clients_;
  std::mutex send_mu_;     // frames to the owner from two threads
  int owner_fd_ = -1;      // the connection that attached
  std::mutex attach_mu_;
  std::condition_variable attach_cv_;
  bool attach_done_ = false;
  bool unloading_ = false;  // the loop ends after this reply
};

}  // namespace ftjit::agent
