// SPDX-License-Identifier: MIT
// The agent's exported functions (agent_exports.map), for the CLI. In the
// shared library's own objects: --exclude-libs,ALL hides whatever the
// static archives it is linked from define.
#include "runtime/agent/agent_phase.h"
#include "runtime/control/protocol.h"
#include "runtime/fork_handlers.h"

// For `ftjit attach` to check that the agent it loaded is ours.
extern "C" __attribute__((visibility("default"))) int ftjit_agent_protocol_version() {
  return static_cast<int>(ftjit::control::kProtocolVersion);
}

// Called by the CLI's unload (cli/agent_unload.cpp) just before dlclose,
// on one thread while every other thread is stopped outside fork: takes
// our fork handlers out of glibc's list at a moment no fork is reading it
// (runtime/fork_handlers.h says why dlclose must not be the one to).
extern "C" __attribute__((visibility("default"))) void ftjit_agent_release_fork_handlers() {
  ftjit::release_fork_handlers();
}

// Where the agent's control thread is (agent_phase.h), for a CLI that
// finds the agent mapped and cannot connect: starting (wait) or gone
// (finish the unload a killed CLI began).
extern "C" {
__attribute__((visibility("default"))) uint32_t ftjit_agent_phase = ftjit::agent::kPhaseLoading;
}

namespace ftjit::agent {
void set_phase(uint32_t phase) { __atomic_store_n(&ftjit_agent_phase, phase, __ATOMIC_RELEASE); }
}  // namespace ftjit::agent
