// SPDX-License-Identifier: MIT
// Unloading the agent from a process after `detach --unload` made it inert:
// wait for its control thread to end, then have the process dlclose it
// (ptrace, as it was loaded), and check that it is gone from the maps.
#pragma once

#include <sys/types.h>

#include "cli/agent_client.h"
#include "core/error.h"

namespace ftjit::cli {

// `conn` is the connection the agent answered the unload on; it closes once
// the agent's thread is done.
Status unload_agent(pid_t pid, AgentConnection& conn);

}  // namespace ftjit::cli
