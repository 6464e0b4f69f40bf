// SPDX-License-Identifier: MIT
// The one scope in which the engine reads or changes module code and the
// mappings over it (sled bytes, batches, text aliases, stubs and
// trampolines), so that two things cannot happen meanwhile:
//
// - A library is unmapped. glibc's dlclose unlinks an object from its list
//   and unmaps it in one stretch under its load-write lock, the lock that
//   dl_iterate_phdr holds while it calls its callback; a scope runs inside
//   such a callback. So every object the loader lists when the scope
//   starts stays mapped until it ends, whoever calls dlclose and however
//   (our GOT wrapper, a pointer from dlsym, libc itself). The body is told
//   the loader's generation (dlpi_adds + dlpi_subs) so that it can forget
//   what was unloaded before it started, then touch only what is listed.
//   A module unloaded after the scope ends is forgotten by the next one.
//
// - A fork. fork() waits (pthread_atfork prepare) until no scope runs, so
//   a child never inherits a half-written batch: its code is the parent's
//   as of the last complete batch, every site whole (the old or the new
//   instruction of that batch, never an int3). The parent's atfork handler
//   then waits until the child has made its copies of the shared code
//   mappings private (the child hook), so that no later batch of the
//   parent can reach the child's code through them.
//
// Inside a scope nothing may wait for another thread to make progress in
// the loader or in fork (no grace period), nor call dlopen, dlsym or
// dladdr (they take the loader's other lock, which a thread in dlopen
// holds while it waits for the load-write lock: a deadlock).
// Lock order: engine mutex -> fork exclusion -> loader's load-write lock.
#pragma once

#include <cstdint>
#include <functional>

#include "core/error.h"

namespace ftjit {

// Runs `body(loader_generation)` in a code-change scope (see above).
// Nested scopes on one thread run the body directly (with the outermost
// scope's generation: nothing can have been unloaded since). It is 0 where the loader does not report one (then assume anything changed).
Status with_code_change(const std::function<Status(uint64_t loader_generation)>& body);

// Whether this thread is inside a scope now.
bool in_code_change();

// The fork handlers (registered once, by the first engine). `privatize` is
// what the child runs before it tells the parent it may go on.
void install_code_change_fork_handlers(void (*privatize)());

// For an agent about to be unloaded (no engine left): fork() then passes
// through the handlers above without waiting for anything, so that a fork
// spends next to no time in our code while the unload looks for threads
// inside it.
void make_fork_handlers_inert();

}  // namespace ftjit
