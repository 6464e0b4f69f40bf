// SPDX-License-Identifier: MIT
// ftjit's fork handlers, registered under a handle of their own so that
// they can be taken out of glibc's list at a moment ftjit chooses.
//
// Why not plain pthread_atfork: it registers a handler under the calling
// object's __dso_handle, and dlclose of that object removes it while other
// threads run. glibc 2.36's fork runs the parent and child handlers with
// its atfork lock dropped around each call, over a list length it read
// once: a removal meanwhile (it shifts the list down) makes that thread
// call an entry past the new end — ours, after dlclose unmapped it. The
// agent's unload (cli/agent_unload.cpp) removes the handlers first, while
// every other thread is stopped outside fork, by calling
// ftjit_agent_release_fork_handlers in the process; dlclose then has none
// of ours to remove.
#pragma once

namespace ftjit {

// pthread_atfork, under ftjit's own handle. Returns 0 or an errno value.
int register_fork_handlers(void (*prepare)(), void (*parent)(), void (*child)());

// Removes every handler registered by register_fork_handlers (glibc's
// __cxa_finalize on that handle: it has no exit functions, so it only
// unregisters fork handlers). Idempotent; also runs when this code is
// unloaded (a destructor), for a libftjit dlclosed by its embedder.
void release_fork_handlers();

}  // namespace ftjit
