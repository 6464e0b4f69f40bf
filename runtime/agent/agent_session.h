// SPDX-License-Identifier: MIT
// What the agent does on the CLI's behalf: one tracing session at a time
// (plugins attached to the process's engine), its status, its detach and
// report, and the final report when the process exits while attached.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ftjit/ftjit.h"
#include "runtime/agent/remote_emitter.h"
#include "runtime/control/protocol.h"

namespace ftjit::plugins {
class TraceSession;
}

namespace ftjit::agent {

class AgentSession {
 public:
  AgentSession();
  ~AgentSession();

  RemoteEmitter& emitter() { return emitter_; }

  // Each returns the reply to send. `output_fds` are the reports' files
  // the CLI passed, as the request announces them (Attach::output_fd
  // first, then the plugins'); the session owns them from here.
  control::Reply attach(const control::Attach& request, std::vector<int> output_fds);
  control::Reply detach(const control::Detach& request);
  control::Reply status(const control::StatusQuery& request);
  // Has the plugins write what their buffers hold now (a flight recorder's
  // contents, say), tracing going on.
  control::Reply flush();
  // Live control (`ftjit control`): pause, resume, the record limits, the
  // filter; the reply's message says what is recorded now.
  control::Reply control(const control::Control& request);

  // The process is exiting: detach, and the report for the CLI that
  // attached (nullopt-like: code FTJIT_E_NOT_ATTACHED when no session).
  control::Reply finish_at_exit();

  // After a detach: undoes everything the runtime installed in the process
  // (sleds, signal handlers, GOT redirections, thread-exit hooks) so that
  // the agent's code can be unmapped. The agent is inert afterwards.
  control::Reply prepare_unload();

  bool attached() const;
  pid_t owner_pid() const;

 private:
  control::Reply stop_locked(bool report);

  mutable std::mutex mu_;
  RemoteEmitter emitter_;
  std::unique_ptr<Backend> backend_;
  ftjit_engine* engine_ = nullptr;  // made at the first attach, kept
  std::unique_ptr<plugins::TraceSession> session_;
  FILE* out_ = nullptr;        // the report's stream
  std::vector<FILE*> plugin_outs_;  // plugins' own files (PluginRequest::output_fd)
  char* memory_ = nullptr;     // open_memstream buffer, when no file
  size_t memory_size_ = 0;
  pid_t owner_pid_ = 0;
  bool unloaded_ = false;

 public:
  // Whether prepare_unload() has run: the agent is being dlclosed.
  bool unloaded() const { return unloaded_; }
};

}  // namespace ftjit::agent
