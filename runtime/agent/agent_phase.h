// SPDX-License-Identifier: MIT
// The agent's control thread, as the CLI may read it from outside (the
// exported word ftjit_agent_phase): a CLI that finds the agent mapped but
// cannot connect must tell a thread still starting (a CLI killed during
// the injection left dlopen running: the constructor is about to start
// it, or has, and its name is not set yet) from one that is gone (a CLI
// killed during the unload: finish it). Only kPhaseDone allows dlclose.
#pragma once

#include <cstdint>

namespace ftjit::agent {

inline constexpr uint32_t kPhaseLoading = 0;  // mapped, constructor not done
inline constexpr uint32_t kPhaseServing = 1;  // the control thread runs
inline constexpr uint32_t kPhaseDone = 2;     // no control thread runs our
                                              // loop again (left it, or
                                              // never started)

void set_phase(uint32_t phase);

}  // namespace ftjit::agent
