// SPDX-License-Identifier: MIT
// libftjit-agent.so: loaded into a process by `ftjit run` (LD_PRELOAD) or
// `ftjit attach` (ptrace makes the process dlopen it). Its constructor only
// starts the control thread; everything else happens when a CLI asks.
//
// Its objects are never destroyed: the control thread may still be running
// while exit() runs static destructors, so there are none.
#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/agent/agent_phase.h"
#include "runtime/agent/agent_session.h"
#include "runtime/agent/control_server.h"
#include "runtime/thread_control.h"
#include "runtime/log.h"
#include "runtime/shadow_stack.h"

namespace ftjit::agent {
namespace {

struct Agent {
  AgentSession session;
  std::unique_ptr<ControlServer> server;
};
Agent* g_agent = nullptr;

// exit() with a session attached: its report goes to the CLI that attached.
void finish_at_exit() {
  if (g_agent == nullptr || g_agent->server == nullptr) return;
  // On the program's thread, but ftjit's work: never traced.
  OwnThreadScope own;
  control::Reply r = g_agent->session.finish_at_exit();
  if (r.code == FTJIT_E_NOT_ATTACHED) r.message = "not attached";
  g_agent->server->notify_exit(r);
}

// `ftjit run` preloads us into one program, not into everything it starts.
void forget_preload() {
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload == nullptr) return;
  std::string kept;
  std::string all(preload);
  size_t at = 0;
  while (at <= all.size()) {
    size_t end = all.find_first_of(": ", at);
    if (end == std::string::npos) end = all.size();
    std::string item = all.substr(at, end - at);
    if (!item.empty() && item.find("libftjit-agent") == std::string::npos) {
      kept += (kept.empty() ? "" : ":") + item;
    }
    at = end + 1;
  }
  if (kept.empty()) {
    ::unsetenv("LD_PRELOAD");
  } else {
    ::setenv("LD_PRELOAD", kept.c_str(), 1);
  }
}

__attribute__((constructor)) void agent_init() {
  // On the program's main thread, but ftjit's work (and, under `ftjit
  // run`, the wait for the first attach): never traced.
  OwnThreadScope own;
  // The program's stdout, stderr and spdlog settings are the program's:
  // the agent's own logger writes nothing (the CLI gets the errors), or,
  // with FTJIT_AGENT_LOG set, everything to stderr.
  std::shared_ptr<spdlog::logger> logger;
  if (std::getenv("FTJIT_AGENT_LOG") != nullptr) {
    logger = std::make_shared<spdlog::logger>("ftjit-agent",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger->set_level(spdlog::level::debug);
  } else {
    logger = std::make_shared<spdlog::logger>("ftjit-agent",
                                              std::make_shared<spdlog::sinks::null_sink_mt>());
    logger->set_level(spdlog::level::off);
  }
  set_logger(std::move(logger));
  int wait_ms = 0;
  if (const char* w = std::getenv("FTJIT_AGENT_WAIT_MS")) wait_ms = std::atoi(w);
  ::unsetenv("FTJIT_AGENT_WAIT_MS");
  forget_preload();

  g_agent = new Agent();
  auto server = ControlServer::start(g_agent->session);
  if (!server) {
    // The one line the agent ever writes to the program's stderr: without
    // a socket no CLI can reach it, and the program runs untraced.
    std::fprintf(stderr, "ftjit agent: %s\n", server.error().message.c_str());
    set_phase(kPhaseDone);
    return;
  }
  g_agent->server = std::move(server.value());
  std::atexit(finish_at_exit);
  if (wait_ms > 0) g_agent->server->wait_first_attach(wait_ms);
}

// Runs in dlclose (after the CLI saw no thread can return into our code)
// or at the process's exit. The exit trampoline page is not part of the
// agent's mapping: it goes too, but only when the agent is being unloaded.
__attribute__((destructor)) void agent_fini() {
  if (g_agent != nullptr && g_agent->session.unloaded()) release_exit_trampoline();
}

}  // namespace
}  // namespace ftjit::agent
