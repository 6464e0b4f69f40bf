// SPDX-License-Identifier: MIT
// Unloading the agent from a process after `detach --unload` made it inert:
// wait for its control thread to end, then have the process dlclose it
// (ptrace, as it was loaded), and check that it is gone from the maps.
#pragma once

#include <sys/types.h>

#include <memory>

#include "cli/agent_client.h"
#include "core/error.h"

namespace ftjit::cli {

// `conn` is the connection the agent answered the unload on; it closes once
// the agent's thread is done.
Status unload_agent(pid_t pid, AgentConnection& conn);

// The second half of unload_agent, for an agent whose thread is gone:
// proves that no thread can be in its code, then has the process dlclose
// it. Also ends what an `ftjit` killed during an unload left behind.
Status finish_unload(pid_t pid);

// Connects to the agent of pid. One that is mapped but deaf is waited for
// while its thread lives (it is starting, or ending an unload); one whose
// thread is gone (a CLI was killed while it unloaded it) is unloaded, and
// *unloaded set: the result is then connect's "no ftjit agent" error.
Result<std::unique_ptr<AgentConnection>> connect_finishing_unload(pid_t pid, bool* unloaded);

// The agent's control thread (named "ftjit-agent") in process pid, as this
// process's /proc sees it; 0 if there is none.
pid_t agent_thread_id(pid_t pid);

// Whether an ftjit agent is mapped in process pid.
bool agent_mapped(pid_t pid);

}  // namespace ftjit::cli
